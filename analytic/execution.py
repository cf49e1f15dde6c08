"""How each implementation is executed, beyond what it computes and moves: the software path that
issues its kernels from the host, and the engine its fp32 matmuls run on.

These traits feed the achievable-time model (``achievable.py``), not the roofline bound:

- ``host_class``: the backend class (``hwspecs.schema.HOST_CLASSES``) whose per-call host cost each
  of the implementation's launches pays. An eager PyTorch op goes through the dispatcher, the caching
  allocator and a CUDA launch; a Triton kernel through Triton's Python launcher (argument binding,
  specialisation key, autotune-cache lookup); a CUDA-extension op through pybind11 into the
  library's own launcher; a matmul issued by PyTorch through the dispatcher and cuBLAS(Lt); an SDPA
  call on the cuDNN backend through cuDNN's graph cache. The registry turns this into the Cost's
  ``host`` term ({class: launches}) when a rule does not state its host calls itself.
- ``engines``: whether the kernel's tensor-core, CUDA-core and special-function phases overlap. In
  FlashAttention-2 the softmax exponentials of a tile run on the same warps between its two GEMMs;
  FlashAttention-3 (Shah et al. 2024, Sec. 3.1) was built to overlap them because on Hopper the
  exp throughput (3.9 TFLOPS vs 989 TFLOPS of matmul on the H100 SXM5) makes them take a large
  share of the cycle. FA2 engine times therefore add ("serial"); FA3 overlaps them. cuDNN's Hopper
  attention kernels issue their GEMMs as asynchronous wgmma but run the softmax between them ("phased"):
  the tile's GEMMs, then its softmax, whose exponentials (special-function units) and FMAs (CUDA cores)
  proceed side by side on their own pipes, T = T_tensor + max(T_sfu, T_vector). Evidence (H200, the
  stored measurements against the achievable estimate's terms, fixed time included): the SDPA cuDNN forward
  at L = S >= 4096, 21 causal and non-causal cases at head dims 64 and 128, took 0.90-1.08x (median 0.98)
  of T_tensor + max(T_sfu, T_vector), against 1.28-1.79x of the overlapped max(T_tensor, ...) (the most at
  head dim 64, whose exponentials per FLOP are twice those of 128) and 0.82-0.98x of all three added; FA3
  at the same shapes took 1.16x (head dim 128) and 1.48x (64) its T_tensor, between the overlapped and the
  phased times, as its ping-pong schedule intends (kept "overlap"). cuDNN's backward (and the forward of a
  forward-backward call) is a tile loop with one CTA per SM whose phases follow one another
  (``chain_cudnn.py``, from the ncu audit of results/h100/2026-12-05/cudnn-bwd): 0.5-0.75x of the measured
  backward under the phased throughput terms, 0.83-1.04x as the loop.
- ``fp32_matmul``: where fp32 x fp32 matmul FLOPs run. PyTorch keeps TF32 off by default
  (``torch.backends.cuda.matmul.allow_tf32 = False``), so cuBLAS fp32 GEMMs run on the CUDA cores
  ("vector"); Triton's ``tl.dot`` on fp32 operands uses TF32 tensor cores by default
  (``input_precision="tf32"`` on sm_80 and newer), so the Triton kernels of mamba-ssm (SSD, Mamba-3)
  and fla run their fp32 matmuls at the TF32 rate ("tf32").

- ``tensor_instr``: the tensor-core instruction class the kernel's matmuls issue. "full": the
  instructions that reach the device's full rate (``compute.tensor.<dtype>``; on Hopper the
  asynchronous warpgroup ``wgmma`` of cuBLAS, cuDNN and FlashAttention-3). "mma_sync": the
  warp-synchronous ``mma.sync.m16n8k16`` of code written for sm80 (FlashAttention-2's kernels, which
  PyTorch's SDPA flash backend vendors, and the CUTLASS sm80 kernels of its memory-efficient backend),
  which on Hopper reaches only part of the peak (Shah et al., FlashAttention-3, arXiv 2407.08608,
  Sec. 2: wgmma is needed for the Hopper tensor cores' full throughput; measured on the H200 by the
  probe's mma.sync loop: ``compute.tensor_mma_sync.<dtype>``).
- ``chain``: the sequential chain of a kernel whose programs loop over dependent steps (``chain.py``:
  steps, programs, programs per SM and kernel class, as a function of the case's dims, mode and storage
  dtype).
- ``dram_path``: the ATen kernel path (``hwspecs.schema.DRAM_PATHS``) whose attained DRAM bandwidth
  (``memory.dram.path.<path>``) the kernel's device-memory bytes move at, where that path does not
  reach the copy bandwidth: a copy out of a non-contiguous view (a repeated or interleaved KV cache)
  runs the non-vectorized ``elementwise_kernel<128, 4>`` with one element per load, not the vectorized
  copy; where the spec does not know the path's rate the copy bandwidth is used and the key is named
  among what is not modelled.
- ``l2_rereads``: bytes a kernel's SMs read again from the device-wide cache beyond its device-memory
  bytes (an operand every block re-reads), as a function of the case's dims, dtype and mode; the
  achievable model times them at the cache's bandwidth (``l2_reread_bytes``).

A measured backend may override the traits its implementation implies: FlashAttention-2 through SDPA
is one PyTorch op, but the same ``fa2`` implementation on SDPA's cuDNN backend runs cuDNN's kernels
behind cuDNN's call path (``BACKEND_TRAITS``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from ..hwspecs.schema import DRAM_PATHS, HOST_CLASSES
from .cases import is_composite
from .chain import (
    Chain,
    causal_conv1d_chain,
    fla_recurrent_chain,
    fused_residual_bwd_chain,
    gated_norm_bwd_chain,
    layer_norm_bwd_chain,
    mamba1_scan_chain,
    mamba3_siso_chain,
)
from .chain_cudnn import cudnn_sdpa_chain
from .chain_fa2 import fa2_chain
from .chain_memeff import memeff_fwd_chain
from .chain_ssd import ssd_chunk_scan_chain, ssd_chunked_chain
from .conventions import nbytes
from .cost import Cost
from .fa2_split import splits

Fp32Matmul = Literal["vector", "tf32"]


@dataclass(frozen=True)
class Traits:
    host_class: str
    fp32_matmul: Fp32Matmul = "vector"
    # "overlap": the kernel's engines work at the same time (warp specialisation, several resident
    # warps in different phases), so its engine time is the largest engine's; "serial": the same warps
    # run one engine's phase after another's with nothing else to hide it, so engine times add; "phased":
    # the tensor-core phase, then a phase whose special-function and CUDA-core work share it (module docstring)
    engines: Literal["overlap", "serial", "phased"] = "overlap"
    # the class of the decode step's kernel where it differs (a library's decode kernel is not its
    # prefill kernel: mamba-ssm's selective_state_update is a plain Triton kernel)
    decode_host_class: str | None = None
    # the class of the backward's kernels where it differs (their launchers were not measured with the
    # forward's: mamba-ssm's chunked-SSD backward keeps the general autotuned class)
    bwd_host_class: str | None = None
    # tensor-core instruction class of the kernel's matmuls (module docstring)
    tensor_instr: Literal["full", "mma_sync"] = "full"
    # the ATen kernel path whose attained DRAM bandwidth the bytes move at (module docstring); None: the copy rate
    dram_path: str | None = None
    # (dims, dtype, mode) -> bytes re-read from the device-wide cache (module docstring); None: none
    l2_rereads: Callable[[Mapping[str, int], str, str], float] | None = None
    # (dims, mode, dtype) -> the kernel's sequential chain (module docstring); None: none
    chain: Callable[[Mapping[str, int], str, str], Chain | None] | None = None

    def __post_init__(self):
        for c in (self.host_class, self.decode_host_class, self.bwd_host_class):
            if c is not None and c not in HOST_CLASSES:
                raise ValueError(f"unknown host class {c!r}; known: {HOST_CLASSES}")
        if self.dram_path is not None and self.dram_path not in DRAM_PATHS:
            raise ValueError(f"unknown DRAM path {self.dram_path!r}; known: {DRAM_PATHS}")

    def host_class_for(self, mode: str) -> str:
        if mode == "decode" and self.decode_host_class:
            return self.decode_host_class
        return self.bwd_host_class if mode == "bwd" and self.bwd_host_class else self.host_class


EAGER = Traits("torch_eager")
CUBLAS = Traits("cublas")
EXTENSION = Traits("cuda_extension")
TRITON = Traits("triton", fp32_matmul="tf32")
# mamba-ssm's SSD and Mamba-3 prefill kernels, fla's chunked kernels and mamba-ssm's Triton norms are
# wrapped in triton.autotune; their decode kernels (selective_state_update, fused_recurrent) are not
AUTOTUNED = Traits("triton_autotune", fp32_matmul="tf32", decode_host_class="triton")
# mamba-ssm's Triton norms (layer_norm.py): the same autotuned launchers in every mode; the backward kernel
# loops over its rows on one program per SM (chain.layer_norm_bwd_chain)
AUTOTUNED_NORM = Traits("triton_autotune", fp32_matmul="tf32", chain=layer_norm_bwd_chain)
# mamba-ssm's chunked-SSD forward launchers (ssd_combined.py's _mamba_chunk_scan_combined_fwd): autotuned
# kernels of ~30 arguments, each behind a Python launcher that allocates its outputs and enters a device
# guard; their host cost per kernel is measured on that library call (hwspecs.schema
# ``triton_autotune_ssd``: 168 us on the H200 host, 1.6x the autotuned median). The backward's launchers
# were not measured and keep the general class.
AUTOTUNED_SSD = Traits("triton_autotune_ssd", fp32_matmul="tf32", decode_host_class="triton",
                       bwd_host_class="triton_autotune")
FA2 = Traits("sdpa", engines="serial", tensor_instr="mma_sync")
# flash_attn_with_kvcache: FlashAttention-2's split-KV kernel (sm80 code) behind the extension's call path
FA2_EXTENSION = Traits("cuda_extension", tensor_instr="mma_sync")


def mamba1_scan_l2_rereads(dims: Mapping[str, int], dtype: str, mode: str) -> float:
    """Bytes mamba-ssm's selective-scan kernels read from L2 beyond their device-memory bytes.

    The forward kernel (csrc/selective_scan/selective_scan_fwd_kernel.cuh) runs one block per
    (batch, channel) lane, grid (B, E); per chunk and per state index n it loads that chunk of the
    input-dependent B[b, n, :] and C[b, n, :] (``load_weight``, storage dtype e, converted to fp32 in
    registers). B and C [B, N, L] are shared by the E channels of a batch: device memory serves them
    once (the compulsory bytes), every other channel's block reads them again from L2:
    fwd re-reads 2 * B * E * L * N * e bytes (the one device-memory pass of B, C is ~1/E of it and is
    left in). The backward kernel (selective_scan_bwd_kernel.cuh) loads B and C the same way and adds
    its per-channel dB, dC contributions with fp32 ``atomicAdd`` into [B, N, L] buffers: one more
    2 * B * E * L * N * e of reads and 2 * B * E * L * N * 4 bytes of atomic read-modify-writes, served
    by L2. Decode (selective_state_update) reads B, C once per (batch, channel) tile of the state it
    updates in the same kernel: nothing beyond the device-memory bytes.
    """
    if mode == "decode":
        return 0.0
    b, e_, l_, n = (int(dims[k]) for k in ("B", "E", "L", "N"))
    per_pass = 2.0 * b * e_ * l_ * n * nbytes(dtype)
    atomics = 2.0 * b * e_ * l_ * n * nbytes("fp32")
    return {"fwd": per_pass, "bwd": per_pass + atomics, "fwdbwd": 2 * per_pass + atomics}[mode]


# the row and column tile of mamba-ssm's SSD Triton kernels (_chunk_scan_fwd_kernel BLOCK_SIZE_M and
# BLOCK_SIZE_N; autotuned among 32..256, 64 the middle of its configs), as analytic/ops/ssd/stages.py
# assumes for their working sets
SSD_TILE = 64


def ssd_chunked_l2_rereads(dims: Mapping[str, int], dtype: str, mode: str) -> float:
    """Bytes mamba-ssm's chunked SSD forward kernels (ssd_chunk_state.py, ssd_chunk_scan.py) read from L2
    beyond the bytes the stage costs count (``analytic/ops/ssd/stages.py``: each intermediate read once).

    Each program of a head loads its group's tiles, so the H / G heads of a group read the group's
    operands again: ``_chunk_state_fwd_kernel`` B [C, N] per head (P and N in one program tile);
    ``_chunk_scan_fwd_kernel`` (grid: C / SSD_TILE row blocks x ceil(P / SSD_TILE) column blocks per
    chunk and head) C [SSD_TILE, N] per program, CB fp32 from column 0 to the end of its row block's
    diagonal block (sum over the nm = C / SSD_TILE row blocks: SSD_TILE^2 nm (nm + 1) / 2 = C (C +
    SSD_TILE) / 2 entries per chunk), the entering state [N, SSD_TILE] once per row block, and x rows up
    to the diagonal block (C (nm + 1) / 2 rows per column block, one of them counted). Decode
    (selective_state_update) reads each operand once: nothing. Backward: the forward of the measured
    call plus the chunk-state recompute of the backward (its B re-reads); the backward kernels' own
    re-reads are not counted."""
    if mode == "decode":
        return 0.0
    b, l_, h, p, n, c, g = (int(dims[k]) for k in ("B", "L", "H", "P", "N", "C", "G"))
    e = nbytes(dtype)
    nc, nm, npb = l_ // c, max(c // SSD_TILE, 1), -(-p // SSD_TILE)
    b_state = b * l_ * n * e * (h - g)
    scan = (b * l_ * n * e * (h * npb - g)                               # C per program
            + b * nc * (h * npb - g) * c * (c + SSD_TILE) / 2 * nbytes("fp32")  # CB up to the diagonal
            + b * nc * h * n * p * e * (nm - 1)                          # entering state per row block
            + b * l_ * h * p * e * ((nm + 1) / 2 - 1))                   # x rows up to the diagonal
    fwd = b_state + scan
    return {"fwd": fwd, "bwd": b_state, "fwdbwd": fwd + b_state}[mode]


# mamba-ssm's selective scan: each state step of a block loads B, C (barriers around the shared-memory
# transpose), then evaluates exp and the block scan: the same warps run the phases one after another. Its
# (chunk, state) steps are paced by the SM's intake of their B and C rows (chain.mamba1_scan_chain)
MAMBA1_SCAN = Traits("cuda_extension", decode_host_class="triton", engines="serial",
                     l2_rereads=mamba1_scan_l2_rereads, chain=mamba1_scan_chain)

# (op, implementation) -> traits. Every registered implementation has an entry (tests/test_execution.py).
TRAITS: dict[tuple[str, str], Traits] = {
    **{(op, impl): t for op in ("attention_causal", "attention_full") for impl, t in (
        ("naive", EAGER),          # matmul, softmax, matmul as PyTorch ops
        # torch SDPA: one dispatched op (cuDNN and memory-efficient backends: see BACKEND_TRAITS); its
        # forward's key-tile loop and its backward's query-tile loop are chains (chain_fa2.fa2_chain)
        ("fa2", dataclasses.replace(FA2, chain=fa2_chain(op == "attention_causal"))),
        ("fa3", EXTENSION),        # flash-attn's Hopper extension (flash_attn_interface)
        ("splitkv", FA2_EXTENSION),  # flash_attn_with_kvcache
    )},
    ("rope", "fused"): EXTENSION,            # vLLM's rotary_embedding custom op
    # Hugging Face apply_rotary_pos_emb on the attention's transposed q, k views: ATen's non-vectorized
    # elementwise_kernel<128, 4> (mul, neg, add) and a cat of non-contiguous halves (the model profiles'
    # kernel names; rope_torch_eager_ref)
    ("rope", "torch_eager"): Traits("torch_eager", dram_path="strided_copy"),
    # Hugging Face repeat_kv (a copy of an expanded view) and mamba-ssm MHA's repeat_interleave of the
    # interleaved [B, S, 2, G, P] cache: copies of non-contiguous views
    ("repeat_kv", "torch_eager"): Traits("torch_eager", dram_path="expand_copy"),
    ("repeat_kv", "repeat_interleave"): Traits("torch_eager", dram_path="strided_copy"),
    ("kv_append", "index_copy"): EAGER,
    ("kv_append", "fused"): EXTENSION,       # vLLM's reshape_and_cache custom op
    ("copy", "torch_eager"): EAGER,
    ("cast", "to_fp32"): EAGER,
    ("cast", "param_to_fp32"): EAGER,
    ("add", "torch_eager"): EAGER,
    # inside mamba-ssm's Triton fused_add_norm (no launch of its own); its backward rows wait on one more load
    ("add", "fused_norm"): dataclasses.replace(TRITON, chain=fused_residual_bwd_chain),
    ("a_from_log", "fp32_param"): EAGER,
    ("a_from_log", "cast_param"): EAGER,
    ("mamba3_prep", "torch_eager"): EAGER,
    # causal-conv1d's channel-first kernels: one block per (batch, channel) lane (chain.causal_conv1d_chain)
    ("conv1d", "causal_conv1d"): dataclasses.replace(EXTENSION, chain=causal_conv1d_chain),
    ("conv1d", "torch_conv"): EAGER,
    ("gated_delta_rule", "chunked"): AUTOTUNED,
    ("gated_delta_rule", "recurrent"): dataclasses.replace(TRITON, chain=fla_recurrent_chain),
    ("silu", "torch_eager"): EAGER,
    ("softplus", "torch_eager"): EAGER,
    ("silu_gate", "torch_eager"): EAGER,
    ("silu_gate", "fused"): TRITON,
    ("silu_gate", "chunked_eager"): EAGER,
    ("embedding", "gather_scatter"): EAGER,
    ("adamw", "foreach"): EAGER,  # torch._foreach_* ops: multi_tensor_apply launches from ATen
    ("lm_head", "cublas"): CUBLAS,
    ("linear", "cublas"): CUBLAS,
    ("mamba1_scan", "fused"): MAMBA1_SCAN,
    ("mamba1_scan", "naive"): EAGER,
    ("mamba1_scan", "loop"): EAGER,
    # unlike selective_state_update and fla's fused_recurrent, the Mamba-3 decode kernel
    # (ops/triton/mamba3/mamba3_siso_step.py) is wrapped in triton.autotune (9 configs, ~80 arguments):
    # an eager step pays the autotuner's per-call host path as the prefill kernels do
    ("mamba3", "siso"): dataclasses.replace(AUTOTUNED, chain=mamba3_siso_chain, decode_host_class=None),
    ("mamba3", "mimo"): AUTOTUNED,
    ("mlp", "torch_eager"): EAGER,
    ("mlp", "fused"): CUBLAS,
    ("gated_mlp", "torch_eager"): EAGER,
    ("gated_mlp", "fused"): CUBLAS,
    ("gated_mlp", "merged_eager"): EAGER,  # mamba-ssm GatedMLP: its elementwise kernels are eager ops
    ("mlp_relu2", "torch_eager"): EAGER,
    ("mlp_relu2", "fused"): TRITON,
    ("gated_mlp_geglu", "torch_eager"): EAGER,
    ("gated_mlp_geglu", "fused"): CUBLAS,
    ("moe", "grouped_gemm"): TRITON,
    ("rmsnorm", "fused"): AUTOTUNED_NORM,
    ("rmsnorm", "torch_eager"): EAGER,
    ("layernorm", "fused"): AUTOTUNED_NORM,
    ("layernorm", "torch_eager"): EAGER,
    # mamba-ssm's layernorm_gated: its backward loops over rows as the plain norm's does, and its backward call
    # (autograd, the Python launcher of a kernel of ~30 arguments, the dw reduction) takes the plain norm's host
    # time: 234-343 us against 246-489 us per call back to back, the same session and shapes
    # (results/h200/2026-12-05/norm-rope/percall/percall_split_2.json), where the one-argument Triton class put
    # its eager calls (403-422 us) at their device time; the plain norm's class is the autotuned one
    ("gated_rmsnorm", "fused"): dataclasses.replace(TRITON, chain=gated_norm_bwd_chain,
                                                    bwd_host_class="triton_autotune"),
    ("gated_rmsnorm", "torch_eager"): EAGER,
    ("s4", "fft"): EAGER,
    ("s4", "recurrent"): EAGER,
    ("softmax", "fused"): EAGER,         # F.softmax: one native kernel
    ("softmax", "online"): TRITON,
    ("softmax", "three_pass"): TRITON,
    ("softmax", "torch_eager"): EAGER,
    ("cross_entropy", "fused"): EAGER,    # F.cross_entropy: log_softmax and nll_loss native kernels
    **{(op, "triton"): AUTOTUNED_SSD for op in ("ssd_chunk_cumsum", "ssd_bmm", "ssd_chunk_state",
                                             "ssd_state_passing")},
    # the chunk scan's programs share their SM's intake of the tiles they load from L2 (chain_ssd.py)
    ("ssd_chunk_scan", "triton"): dataclasses.replace(AUTOTUNED_SSD, chain=ssd_chunk_scan_chain),
    # decode: selective_state_update's programs flow through the SMs' slots (chain.ssd_state_update_chain);
    # forward: the chunk scan's intake (chain_ssd.ssd_chunked_chain)
    ("ssd", "chunked"): dataclasses.replace(AUTOTUNED_SSD, l2_rereads=ssd_chunked_l2_rereads,
                                            chain=ssd_chunked_chain),
    ("ssd", "quadratic"): EAGER,
    ("ssd", "recurrent"): EAGER,
}

# Measured backends that execute an implementation differently from what it implies: SDPA's cuDNN
# backend runs cuDNN's own Hopper kernels (wgmma GEMMs, the softmax phased between them) behind cuDNN's call path.
# The memory-efficient backend runs CUTLASS's sm80 kernels (mma.sync, phases in sequence) with its own
# grid and loop, not FlashAttention-2's: its forward's chain is its own (BACKEND_OP_TRAITS, chain_memeff.py).
# causal-conv1d's channel-last entry point runs its own forward kernel over 64 x 64 (L, E) tiles: no lane chain.
BACKEND_TRAITS = {"torch.sdpa.cudnn": Traits("cudnn", engines="phased"), "torch.sdpa.efficient": FA2,
                  "causal_conv1d.causal_conv1d_fn_cl": EXTENSION}
# A measured backend's traits where they depend on the op as well: cuDNN's backward is a tile loop whose steps
# depend on the causal mask (chain_cudnn.py); the host class is the backend's (``BACKEND_TRAITS``)
# the memory-efficient forward is a key-tile loop of its own tiles and warp layout (chain_memeff.py)
_ATTENTION_OPS = ("attention_causal", "attention_full")
_OWN_CHAINS = {"torch.sdpa.cudnn": cudnn_sdpa_chain, "torch.sdpa.efficient": memeff_fwd_chain}
BACKEND_OP_TRAITS = {(op, be): dataclasses.replace(BACKEND_TRAITS[be], chain=of(op == "attention_causal"))
                     for be, of in _OWN_CHAINS.items() for op in _ATTENTION_OPS}


def traits(op: str, impl: str, backend: str | None = None) -> Traits:
    """The traits of ``op``/``impl`` (as measured on ``backend`` when given)."""
    if (op, backend) in BACKEND_OP_TRAITS:
        return BACKEND_OP_TRAITS[(op, backend)]
    if backend is not None and backend in BACKEND_TRAITS:
        return BACKEND_TRAITS[backend]
    try:
        return TRAITS[(op, impl)]
    except KeyError:
        raise KeyError(f"no execution traits for {op}/{impl}; add them to analytic/execution.py") from None


def host_class(op: str, impl: str, backend: str | None = None, mode: str = "fwd") -> str:
    """The backend class of one call of ``op``/``impl`` in ``mode`` (measured on ``backend`` when given)."""
    return traits(op, impl, backend).host_class_for(mode)


# Modes whose measured call is one torch.autograd.grad (measure/backends/common.py): the autograd
# engine's own host time is paid once per call, beside the kernels the backward issues.
AUTOGRAD_MODES = ("bwd", "fwdbwd")
# The host class paid per backward kernel of a graph recorded and freed in the measured call (train_host.KEY)
BACKWARD_LAUNCH = "backward_launch"

# Nodes of the backward graph that one torch.autograd.grad runs for the eager reference of (op, impl)
# (the torch_ref backend: ``ref.py``'s function on inputs that require grad), the leaves'
# AccumulateGrad excluded (autograd.grad with inputs given captures the gradients instead). Each
# node costs the engine host time (``launch.host.autograd_node``) whether or not it issues a kernel:
# ``x @ w.T`` on [B, L, I] builds 4 (UnsafeView, Mm, View of x, Transpose of w) around its one GEMM.
# Counted by hand from the references; tests/test_autograd_nodes.py walks grad_fn.next_functions of
# each reference at two sizes and checks the count. References whose node count grows with a
# dimension (the per-step loops of mamba1 naive / loop, s4 recurrent, ssd recurrent) are not listed:
# their node term is named as not modelled.
AUTOGRAD_NODES: dict[tuple[str, str], int] = {
    ("linear", "cublas"): 4,
    ("lm_head", "cublas"): 4,
    ("silu", "torch_eager"): 1,
    ("softplus", "torch_eager"): 1,
    ("silu_gate", "torch_eager"): 2,
    ("embedding", "gather_scatter"): 1,
    ("a_from_log", "fp32_param"): 2,
    ("a_from_log", "cast_param"): 2,
    ("mlp", "torch_eager"): 9,
    ("mlp_relu2", "torch_eager"): 10,
    ("gated_mlp", "torch_eager"): 14,
    ("gated_mlp_geglu", "torch_eager"): 14,
    ("rmsnorm", "torch_eager"): 6,
    ("layernorm", "torch_eager"): 9,
    ("gated_rmsnorm", "torch_eager"): 8,
    ("softmax", "torch_eager"): 5,
    ("conv1d", "torch_conv"): 4,
    ("attention_causal", "naive"): 20,
    ("attention_full", "naive"): 19,
    ("s4", "fft"): 34,
}
# The backend whose measured call is the eager reference itself
EAGER_REFERENCE_BACKEND = "torch_ref"


def autograd_nodes(op: str, impl: str, backend: str | None) -> int | None:
    """Backward-graph nodes of one measured autograd.grad of ``op``/``impl`` on ``backend`` (None: not
    counted: a library call's graph, or a reference whose node count grows with a dimension)."""
    if backend not in (None, EAGER_REFERENCE_BACKEND):
        return None
    return AUTOGRAD_NODES.get((op, impl))


def fp32_matmul_on_tf32(op: str, impl: str, backend: str | None = None) -> bool:
    """Whether ``op``/``impl`` runs its fp32 matmuls on TF32 tensor cores (False for composites:
    blocks and models sum parts whose fp32 matmuls, if any, go through PyTorch with TF32 off)."""
    return not is_composite(op) and traits(op, impl, backend).fp32_matmul == "tf32"


# Codes of Traits.engines as ``achievable.achievable_work`` takes them (its ``serial`` argument; False / True read
# as overlap / serial)
ENGINE_CODES = {"overlap": 0, "serial": 1, "phased": 2}


def serial_engines(op: str, impl: str, backend: str | None = None) -> int:
    """How the engine times of ``op``/``impl`` combine, as an ``ENGINE_CODES`` code: 0 overlap, 1 serial (they
    add), 2 phased (composites: 0; their parts are projected one by one where that matters)."""
    return 0 if is_composite(op) else ENGINE_CODES[traits(op, impl, backend).engines]


def dram_path_index(op: str, impl: str, backend: str | None = None) -> int:
    """Index into ``DRAM_PATHS`` of the kernel path ``op``/``impl`` moves its bytes on; -1: the copy rate
    (composites too: their parts are projected one by one where that matters)."""
    path = None if is_composite(op) else traits(op, impl, backend).dram_path
    return -1 if path is None else DRAM_PATHS.index(path)


def tensor_instr(op: str, impl: str, backend: str | None = None) -> str:
    """The tensor-core instruction class of ``op``/``impl`` ("full" or "mma_sync"; composites: "full",
    their parts are projected one by one where that matters)."""
    return "full" if is_composite(op) else traits(op, impl, backend).tensor_instr


def l2_reread_bytes(op: str, impl: str, dims: Mapping[str, int], dtype: str, mode: str,
                    backend: str | None = None) -> float:
    """Bytes one call of ``op``/``impl`` re-reads from the device-wide cache (0 for composites and for
    implementations without ``Traits.l2_rereads``)."""
    if is_composite(op):
        return 0.0
    fn = traits(op, impl, backend).l2_rereads
    return 0.0 if fn is None else float(fn(dims, dtype, mode))


def chain_of(op: str, impl: str, dims: Mapping[str, int], mode: str, backend: str | None = None,
             dtype: str | None = None) -> Chain | None:
    """The sequential chain of one call of ``op``/``impl`` (None for composites and for
    implementations without ``Traits.chain``); ``dtype``: the storage dtype, whose tensor rate a chain
    with a computed step (``chain.TILE_LOOP``) uses and whose element size sets a streaming kernel's chunk
    (bf16 where not given)."""
    if is_composite(op):
        return None
    fn = traits(op, impl, backend).chain
    c = None if fn is None else fn(dims, mode, dtype or "bf16")
    if c is not None and c.step_work is not None and dtype in ("bf16", "fp16"):
        c = dataclasses.replace(c, dtype=dtype)
    return c


def _sdpa_lower_right_mask(dims: Mapping[str, int], mode: str) -> str:
    """SDPA's causal attention with fewer queries than keys (L < S) on the cuDNN backend. The measured call
    passes ``causal_lower_right(L, S)`` (measure/backends/sdpa.py); PyTorch's ``CausalBias._dispatch``
    (torch/nn/attention/bias.py) sends that variant to the flash or memory-efficient kernel (both know the
    lower-right diagonal) and otherwise *materializes* it: ``torch.tril(torch.ones(L, S, dtype=bool))``
    passed as a dense ``attn_mask`` with ``is_causal=False``. Under ``sdpa_kernel(CUDNN_ATTENTION)`` the
    other two are disabled, so cuDNN runs its masked kernel: every L x S score tile (no causal tile
    skipping) with a bias operand, after the eager ops that build and convert the mask. Measured on the
    H200 (2026-12-02 calibration-torchref, one session): measured / achievable 2.5-3.1 at L < S against
    1.3-1.6 at L = S, the same kernel group otherwise. The estimate runs it as such (``dense_mask_call``: every
    score entry, the mask's eager kernels): the 12 stored H200 forward calls go from 0.49-0.52x to 0.53-0.60x;
    the rest is the masked kernel's per-step bias loads (1.4x per score entry on an H100), not modelled."""
    if mode == "decode" or "L" not in dims or "S" not in dims:
        return ""
    return "dense_mask" if dims["L"] < dims["S"] else ""


# Kernel paths (``kernel_path``): a measured backend that runs another kernel for some shapes of an op
# than for the rest, keyed by (op, backend); the function names the path a shape takes ("" for the
# backend's usual kernel). Calibration fits each path as its own group (calibrate/fit.py): one efficiency
# cannot describe two kernels.
KERNEL_PATHS: dict[tuple[str, str], Callable[[Mapping[str, int], str], str]] = {
    ("attention_causal", "torch.sdpa.cudnn"): _sdpa_lower_right_mask,
}
# The path of a kernel whose chain splits its key loop over more CTAs on a small grid (chain.py,
# FlashAttention's num_splits_heuristic): a split kernel and a combine kernel instead of the tile loop
SPLIT_KV = "split_kv"


def kernel_path(op: str, impl: str, dims: Mapping[str, int], mode: str, backend: str | None,
                sm_count: float | None = None) -> str:
    """The kernel path one measured call of ``op``/``impl`` on ``backend`` takes at ``dims`` in ``mode`` (""
    for the backend's usual kernel): ``KERNEL_PATHS``, else ``SPLIT_KV`` where the implementation's chain
    splits its key loop on a device of ``sm_count`` SMs (None: not known, no split path)."""
    fn = KERNEL_PATHS.get((op, backend)) if backend is not None else None
    path = "" if fn is None else fn(dims, mode)
    if path or sm_count is None or is_composite(op):
        return path
    try:
        c = chain_of(op, impl, dims, mode, backend)
    except KeyError:  # an implementation without traits has no chain
        return ""
    return SPLIT_KV if c is not None and float(splits(c, sm_count)) > 1 else ""


def call_backward_launches(op: str, impl: str, dims: Mapping[str, int], dtype: str, mode: str,
                           fwdbwd: Cost | None = None) -> float:
    """Kernel launches of the backward of one ``fwdbwd`` call of ``op``/``impl``: its launches in ``fwdbwd`` less
    its launches in ``fwd`` (0 in any other mode), as ``workloads/train_host.backward_launches`` counts a train
    step's; 0 for composites, whose calls are counted one by one where they are composed. ``fwdbwd``: the call's
    cost in that mode where the caller has it (not computed again)."""
    if mode != "fwdbwd" or is_composite(op):
        return 0.0
    from .registry import cost as analytic_cost

    both = fwdbwd if fwdbwd is not None else analytic_cost(op, dict(dims), impl=impl, mode="fwdbwd", dtype=dtype)
    fwd = analytic_cost(op, dict(dims), impl=impl, mode="fwd", dtype=dtype)
    return max(float(both.launches) - float(fwd.launches), 0.0)


# The eager work PyTorch's SDPA does to hand cuDNN a lower-right causal mask (``_sdpa_lower_right_mask``), as ncu saw
# it on an H100 (results/h100/2026-12-05/attention-paths): a bool fill of ones, tril, two one-element fills and the
# where that turns the bool mask into the additive bias, one kernel each; three Python-level ops issue them
# (torch.ones, Tensor.tril, the boolean-mask conversion)
DENSE_MASK_KERNELS = 5
DENSE_MASK_HOST_OPS = 3


def dense_mask_call(cost: Cost, dims: Mapping[str, int], dtype: str) -> Cost:
    """``cost`` of a causal call with L < S as cuDNN runs it with the dense mask SDPA builds: every L x S score
    entry (the kernel sees an arbitrary bias and skips no tile), so the score work (its tensor, vector and
    special-function parts) grows by L S / (L (S - L) + L (L + 1) / 2), the entries under the bottom-right
    diagonal the causal cost counts; and the mask built first: a bool L x S written, read and rewritten by tril,
    read by the conversion that writes the bias in ``dtype`` (``DENSE_MASK_KERNELS`` kernels,
    ``DENSE_MASK_HOST_OPS`` eager ops). The kernel's per-step bias loads are not in it: on the H100 the masked
    kernel's steps took 1.4x the unmasked kernel's per score entry (results/h100/2026-12-05/attention-paths)."""
    rows, keys = int(dims["L"]), int(dims["S"])
    entries = rows * keys
    grow = entries / (rows * (keys - rows) + rows * (rows + 1) / 2)
    scaled = dataclasses.replace(cost, tensor={k: v * grow for k, v in cost.tensor.items()},
                                 vector=cost.vector * grow, transcendental=cost.transcendental * grow)
    host = dict(scaled.host)
    host["torch_eager"] = host.get("torch_eager", 0) + DENSE_MASK_HOST_OPS
    mask = Cost(read={"intermediates": 2 * entries}, write={"intermediates": (2 + nbytes(dtype)) * entries},
                launches=DENSE_MASK_KERNELS)
    return dataclasses.replace(scaled, host=host) + mask


def measured_call(cost: Cost, backend: str | None, op: str, impl: str, dims: Mapping[str, int], dtype: str,
                  mode: str, launch: str = "eager") -> Cost:
    """``cost`` (of ``op``/``impl`` in ``mode``) as one measured call (``as_measured``), a forward-backward call
    timed eagerly paying its backward kernels' per-launch host cost (``call_backward_launches``), a causal call
    with fewer queries than keys on cuDNN running the dense mask SDPA builds for it (``dense_mask_call``; the forward:
    no masked backward is measured here)."""
    bwd = call_backward_launches(op, impl, dims, dtype, mode, cost) if mode == "fwdbwd" and launch == "eager" else None
    call = as_measured(cost, backend, mode, op, impl, bwd_launches=bwd)
    if mode == "fwd" and KERNEL_PATHS.get((op, backend or ""), lambda d, m: "")(dims, mode) == "dense_mask":
        call = dense_mask_call(call, dims, dtype)
    return call


def as_measured(cost: Cost, backend: str | None, mode: str | None = None, op: str | None = None,
                impl: str | None = None, bwd_launches: float | None = None) -> Cost:
    """``cost`` as one measured call: its host calls moved to the class of the measured ``backend``
    where that backend has its own call path (``BACKEND_TRAITS``), and for a backward
    (``AUTOGRAD_MODES``: the measurement is one ``torch.autograd.grad``) one autograd engine call
    (a one-node graph) plus the engine's work beyond it:

    - ``bwd`` (``measure/backends/common.py``: the grad of a graph recorded once and retained): one
      ``autograd_node`` per further node of the backward graph where ``op``/``impl`` on ``backend`` has a
      counted graph (``autograd_nodes``; the probe's slope over a retained chain of view nodes);
    - ``fwdbwd`` with ``bwd_launches`` given (``call_backward_launches``): the call records its graph in its
      forward and frees it after the grad, as a training step does, so it pays what a train step pays per
      backward kernel, ``launch.host.backward_launch`` x ``bwd_launches`` (``workloads/train_host.py``: saved
      tensors packed and unpacked, nodes made and freed, a custom Function's Python ``backward``; read off the
      host-bound whole-model train records) in place of the retained graph's per-node cost. On the stored H200
      results the host-paced forward-backward calls ran at 1.05-3.9x the per-node estimate (SDPA, FlashAttention-3,
      causal-conv1d, the eager references, mamba-ssm's modules and Triton norms); this estimate puts them at 0.46-1.8x.
      Not mamba-ssm's chunked SSD: its backward's ~24 Triton launchers are each charged
      ``launch.host.triton_autotune_ssd`` (read off the forward's five), and its forward-backward calls went from
      0.85-1.27x of the measurement to 1.21-1.80x."""
    host = dict(cost.host)
    if backend in BACKEND_TRAITS:
        calls = sum(host.values(), 0)
        host = {BACKEND_TRAITS[backend].host_class: calls} if calls else {}
    if mode in AUTOGRAD_MODES:
        host["autograd"] = host.get("autograd", 0) + 1
        if mode == "fwdbwd" and bwd_launches is not None:
            if bwd_launches > 0:
                host[BACKWARD_LAUNCH] = host.get(BACKWARD_LAUNCH, 0) + bwd_launches
            return dataclasses.replace(cost, host=host)
        nodes = autograd_nodes(op, impl, backend) if op is not None else None
        if nodes and nodes > 1:
            host["autograd_node"] = host.get("autograd_node", 0) + nodes - 1
    return dataclasses.replace(cost, host=host)


def estimate_call(cost: Cost, spec, op: str, impl: str, dims: Mapping[str, int], dtype: str, mode: str,
                  backend: str | None = None, launch: str = "eager", prefer: str = "measured"):
    """The achievable estimate (``achievable.estimate``) of one call of (op, impl) on ``backend`` with ``cost``
    (as measured: ``as_measured``), with the traits of its execution: TF32 matmuls, serial engines, the
    mma.sync class, its cache re-reads, its sequential chain, its DRAM kernel path."""
    from .achievable import estimate

    return estimate(cost, spec, tf32=fp32_matmul_on_tf32(op, impl, backend), serial=serial_engines(op, impl, backend),
                    launch=launch, prefer=prefer, mma_sync=tensor_instr(op, impl, backend) == "mma_sync",
                    l2_reread=l2_reread_bytes(op, impl, dims, dtype, mode, backend),
                    chain=chain_of(op, impl, dims, mode, backend, dtype),
                    dram_path=dram_path_index(op, impl, backend))
