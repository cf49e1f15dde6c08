"""PyTorch SDPA's memory-efficient forward kernel (backend ``torch.sdpa.efficient``) as a sequential chain of the
achievable model (``chain.py``, class ``TILE_LOOP``).

What runs: xFormers' CUTLASS kernel ``AttentionKernel`` (PyTorch's copy,
aten/src/ATen/native/transformers/cuda/mem_eff_attention/kernel_forward.h), compiled for sm80 and run on Hopper
as such: its GEMMs are warp-level ``mma.sync`` fed from shared memory, not wgmma. For bf16 and fp16 the dispatch
(kernels/cutlassF.h ``dispatch_cutlassF_bf16_sm80``) takes the first kernel whose ``kMaxK`` holds the head dim:
64 x 64 (``fmha_cutlassF_bf16_aligned_64x64_rf_sm80``, head dim <= 64), 64 x 128 (``..._64x128_rf_sm80``, <= 128),
32 x 128 (``..._32x128_gmem_sm80``, beyond): kQueriesPerBlock query rows x kKeysPerBlock keys per step
(``MEMEFF_FWD_TILES``). Grid (ceil(L / kQ), H, B), one CTA of kQ kK / 1024 warps per query tile, each warp a
32 x 32 tile of both GEMMs (``WarpShape<32, 32>``); ``__launch_bounds__`` asks for 16 warps per SM
(``getWarpsPerSmFw``): 2 CTAs of the 64 x 128 kernel, 4 of the 64 x 64. Each CTA loops over its key tiles
(causal: up to the diagonal, ``num_keys = min(query_start + offset + kQ, num_keys)``, bottom-right aligned as
``key_tiles_per_query_tile`` counts), and each step runs its phases one after another with a ``__syncthreads``
between them:

1. MM0, S = Q K^T (kQ x kK over the head dim): Q's and K's tiles loaded into shared memory (cp.async, a
   four-stage pipeline), each warp's operands read from there for its 32 x 32 tile;
2. the online softmax on the accumulators: row maxima through shared memory (``atomicMaxFloat``), exp, the row
   sums and the output's rescale factors; P stored to shared memory as MM1's A operand (``B2bGemm``);
3. MM1, O += P V (kQ x head dim over kK keys): V's tile loaded into shared memory, P and V read from there.

Shared-memory traffic is what sets the step apart from FlashAttention-2's forward (``chain_fa2.py``, 4 warps of
16 query rows each, K and V read once per warp row): with 32 x 32 warp tiles every warp reads a 32-row slice of
A and a 32-column slice of B over the reduction, 64 x K elements per warp per GEMM, and the step writes Q, K, V
and P into shared memory:

    smem bytes per step = itemsize x (W x 64 x P + W x 64 x kK + (kQ + 2 kK) x P + kQ x kK),   W = kQ kK / 1024

(352 KiB at head dim 128 on the 64 x 128 kernel, 96 KiB at head dim 64 on the 64 x 64 one). The phases are
separated by barriers and every resident CTA runs the same phases, so the step is modelled in series, as
FlashAttention-2's backward is: t_step = tile tensor FLOPs / (mma.sync rate / SMs) + smem bytes /
(memory.shared.bandwidth / SMs) + the softmax's exponentials and vector work at their engines' share, x the CTAs
sharing the SM (``Chain.smem_bytes``); the CTAs go out in grid order (query tile fastest) to the first free slot
(``block_schedule.list_schedule``). Nothing is fitted: the rates are the spec's (the probe's mma.sync loop, the
shared-memory bandwidth from the bank count).

Against the H200's stored calls (the default suite of 2026-12-02 and a fill call of 2026-12-03: six causal forward
calls, L = S = 512 to 8192, head dims 64 and 128): the estimate goes from 0.24-0.40x of the measured time (the
throughput terms at the mma.sync rate) to 0.77-0.88x at the five the GPU paces (``tests/test_chain_memeff.py``; the
sixth, B = 1 and L = 512, is paced by the call's host time). It stays under at every shape: the barriers also wait
on the slowest warp, and the softmax's shared-memory reductions and atomics are not in the step. ncu on an H100
(results/h100/2026-12-05/attention-paths) confirms the kernels, their warps and CTAs per SM (8 warps, 2 per SM at
head dim 128; 4 warps, 4 per SM at 64) and finds no unit near its peak: the mma.sync pipe 34 % and 23 % busy, the
shared-memory data pipe 40 % and 31 %, the warps stalled mostly on fixed latencies, short scoreboard (shared
memory) and barriers. MM1's warps tile
an output kKeysPerBlock columns wide (its ThreadblockShape; predicated beyond the head dim), so its operand reads
do not shrink with a head dim below kMaxK.

Not modelled: the backward kernel (``AttentionBackwardKernel``, a key-block loop of five GEMMs with its dQ
accumulated in an fp32 workspace under a lock per query block): a forward-backward call keeps the throughput terms
for it (0.26-0.45x of the measured calls). What ncu found on an H100 (results/h100/2026-12-05/attention-paths): at
head dim 128 the 128 x 128 kernel (16 warps, one CTA per SM, 131 KiB of shared memory), at 64 the 64 x 64 one
(4 warps, three per SM), grid (key blocks, H, B), after a copy kernel and the workspace's memset (134 MB at B = 2,
H = 32, L = 4096: 42 us); no unit near its peak (the mma.sync pipe 27 %, the shared-memory data pipe 35 %, L2 40 %),
the warps waiting on barriers, shared memory, fixed latencies, global loads and the lock's memory barrier; its
timed steps (~20 us per 128 x 128 step at L = 4096-8192) are ~1.6x its MMAs and shared-memory operands in series.
Also not modelled: fp32 (the 32 x 128 TF32 kernels); decode's single-query fast path (``num_queries == 1`` with
broadcast K and V heads, which iterates over heads instead of rows).
"""

from __future__ import annotations

from collections.abc import Mapping

from .attention_tiles import attention_fwd_step_work, key_tiles_per_query_tile
from .chain import TILE_LOOP, Chain
from .conventions import nbytes

# (kMaxK bound on the head dim, (kQueriesPerBlock, kKeysPerBlock)): the bf16 and fp16 sm80 forward kernels in
# dispatch order (kernels/cutlassF.h dispatch_cutlassF_bf16_sm80 / _f16_sm80)
MEMEFF_FWD_TILES = ((64, (64, 64)), (128, (64, 128)), (65536, (32, 128)))
# warps a streaming multiprocessor is asked to hold (kernel_forward.h getWarpsPerSmFw: sm80+, 16-bit types);
# the launch bounds' minimum CTAs per SM is this over the kernel's warps
MEMEFF_WARPS_PER_SM = 16
# the warp tile of both GEMMs (WarpShape<32, 32>), and its elements per warp per reduction index (32 rows of A
# + 32 columns of B)
MEMEFF_WARP_TILE = 32
# storage dtypes the chain covers (the 16-bit sm80 kernels); fp32 runs other kernels (not modelled)
MEMEFF_DTYPES = ("bf16", "fp16")


def memeff_fwd_tile(head_dim: int) -> tuple[int, int]:
    """(kQueriesPerBlock, kKeysPerBlock) of the forward kernel the dispatch picks at ``head_dim``."""
    return next(t for d, t in MEMEFF_FWD_TILES if head_dim <= d)


def memeff_warps(bq: int, bk: int) -> int:
    """Warps of one CTA (kernel_forward.h ``kNumWarpsPerBlock``)."""
    return bq * bk // (MEMEFF_WARP_TILE * MEMEFF_WARP_TILE)


def memeff_fwd_smem_bytes(head_dim: int, dtype: str) -> float:
    """Bytes one step of the forward kernel moves through shared memory (module docstring): both GEMMs' warp
    operands (W warps x 64 elements per reduction index, over the head dim for MM0 and the key tile for MM1),
    and the Q, K, V and P tiles written into it."""
    bq, bk = memeff_fwd_tile(head_dim)
    w, per_index = memeff_warps(bq, bk), 2 * MEMEFF_WARP_TILE
    reads = w * per_index * head_dim + w * per_index * bk
    writes = (bq + 2 * bk) * head_dim + bq * bk
    return float(nbytes(dtype) * (reads + writes))


def memeff_fwd_chain(causal: bool):
    """The memory-efficient forward kernel's key-tile loop (module docstring) for prefill (dims B, H, L, S, P);
    None in other modes, for other dtypes, and for a call with a zero dimension."""

    def chain(dims: Mapping[str, int], mode: str, dtype: str = "bf16") -> Chain | None:
        if mode != "fwd" or dtype not in MEMEFF_DTYPES:
            return None
        b, h, rows, s, p = (int(dims[k]) for k in ("B", "H", "L", "S", "P"))
        if min(b, h, rows, s, p) <= 0:
            return None
        bq, bk = memeff_fwd_tile(p)
        per_tile = key_tiles_per_query_tile(rows, s, causal, bq, bk)
        work = attention_fwd_step_work(bq, bk, p)
        per_sm = max(1, MEMEFF_WARPS_PER_SM // memeff_warps(bq, bk))
        return Chain(TILE_LOOP, max(per_tile), b * h * len(per_tile), per_sm,
                     total_steps=float(b * h * sum(per_tile)), step_work=work, mma_sync=True, dtype=dtype,
                     smem_bytes=memeff_fwd_smem_bytes(p, dtype), label="tensor", group_steps=tuple(per_tile))

    return chain
