"""Which ops a model runs in each phase, with which dimensions, implementation and mode.

A **plan** is the fixed list of op calls of one forward (or training step) of a model: for each block
of the layer sequence the ops below, each with a multiplicity (occurrences of the block in the model).
Dimensions are constants from the model or one of three grid variables, so one plan serves every
(batch, length) point and the evaluator (``evaluate.py``) runs each op's compiled cost once over
arrays:

- ``batch``: sequences in the batch (B);
- ``tokens``: tokens processed per sequence by this call (L): the prompt in prefill, the sequence in
  training, 1 in decode;
- ``keys``: keys each query sees (attention's S): ``tokens`` in prefill and training, the context
  length in decode.

Phases and modes: ``prefill`` runs every op in mode ``fwd``; ``decode`` runs one token per sequence in
mode ``decode`` (an op without a decode rule runs ``fwd`` with L = 1, which is what decode of a
stateless op is); ``train`` runs ``fwdbwd`` (forward and backward) and, with activation recomputation,
the forward of every layer block once more.

Ops per block (dims in the op's letters; E = expand x D). Every block a layer runs also ends with its
residual add (``add`` over B x L x d_model, label ``.residual``; mamba-ssm's ``fused_add_norm`` does it
inside the next norm: implementation ``fused_norm``). Splits of a projection's output
(``torch.split``, ``chunk``, ``rearrange`` to heads) are views and launch nothing; where a layout is
not viewable the module copies it, and those copies are counted (``copy``), as read in mamba-ssm
2.3.2.post1:

- mamba1 (``Mamba`` fast path, ``mamba_inner_fn``): norm(D), in_proj linear(D -> 2E) (computed as
  W @ x^T: no transpose copy), a_from_log (A = -exp(A_log), [E, N], fp32 parameter), the fp32 cast of
  dt_proj's bias (prefill / train), conv1d(E, K), the copy of the conv output to (B L) x E rows for
  x_proj (``rearrange(conv1d_out, 'b d l -> (b l) d')`` is a view only for B = 1: the call's D is
  E when B > 1 and 0, not run, for one sequence), x_proj linear(E -> R + 2N),
  the two ``.contiguous()`` copies of B and C to [B, 1, N, L], [RMSNorm on Delta (R) and B, C (N) for
  Falcon-Mamba / Jamba], dt_proj linear(R -> E), mamba1_scan(E, N) (softplus of Delta, D skip and z
  gate inside the fused kernel), out_proj(E -> D). Training adds what ``MambaInnerFn.backward``
  runs beyond the ops' backward rules: the recomputed conv1d and dt_proj forward (checkpoint_lvl 1)
  and five copies (dB and dC made contiguous and written into dx_dbl, ddelta's product written into
  it). Decode (``Mamba.step``): in_proj, conv1d update, x_proj, dt_proj, a_from_log, the scan step,
  out_proj.
- mamba2 (``Mamba2``, mem_eff_path / step): norm(D), in_proj linear(D -> 2E + 2GN + H), a_from_log
  ([H], A_log stored at the model dtype: cast, exp, neg), conv1d(E + 2GN, K), ssd(H, P, N, G, C),
  gated_rmsnorm(E), out_proj linear(E -> D). Training adds the conv1d forward that
  ``MambaSplitConv1dScanCombinedFn.backward`` recomputes.
- mamba3: norm(D), in_proj linear(D -> 2E + 2GNM + 3H + angles), mamba3_prep (prefill / train: the
  module's eager softplus / clamp / dt-bias / angle-cast kernels), RMSNorm of B and C (N, over
  G x M rows per token each), mamba3(H, P, N, M) with implementation ``mimo`` when M > 1 else
  ``siso``, out_proj linear(E -> D). No conv. Training adds autograd's ``cat`` of the split
  in-projection's gradients (a copy of B x L x in_proj width).
- chunked kernels (ssd, mamba3) see the tokens rounded up to whole chunks (C; Mamba-3: its chunk of
  64 / M tokens): the kernels compute the last, partial chunk as a full tile.
- attention: norm(d_in), qkv linear(d_in -> (H + 2G) P), rope (when the block has ``rope_dim``: q and
  k rotated over rope_dim dims per head), kv_append (prefill and decode: the new tokens' k, v written
  into the cache), attention_causal(H, G, P; L = tokens, S = keys), o_proj linear(H P -> D).
  Training adds autograd's ``cat`` of q, k, v's gradients into the fused projection's output
  (a copy of B x L x (H + 2G) P).
- attention with a sliding window W (``Attention.window``): query i (0-based) attends keys
  i - W + 1 .. i, i.e. min(i + 1, W) keys. Decode at context S: keys = min(S, W). Prefill (and
  training) of L tokens: score entries per (batch, head) = the causal triangle L^2 / 2 for L <= W,
  and W^2 / 2 + (L - W) W beyond (each query past the first W attends W keys; the diagonal's extra
  convention as in ``conventions.CAUSAL_FRACTION``). The attention ops have no windowed rule, so this
  is a sum of existing op calls: ``attention_causal`` with L = S = min(L, W) (the first W tokens,
  causal) plus ``attention_full`` (label ``.attention_beyond_window``) with L = max(L - W, 0) queries
  against S = W keys (a call with a zero dimension does not run). FLOPs and q / o bytes are exact;
  the two calls read the K/V of 2W keys where a windowed kernel (FlashAttention's ``window_size``)
  reads each of the L keys' K/V once, one launch instead of two.
- residual add: ``torch_eager`` (one add kernel) for Hugging Face modules; mamba-ssm's modules
  (``library``, ``library_sdpa``: ``fused_add_norm=True``, ``residual_in_fp32=True``) add it inside the
  next norm's Triton kernel (``fused_norm``: no launch, the fp32 residual stream's bytes); the whole-model
  profiles of mamba-ssm models show no add kernel per block.
- mlp: norm(D), then the op of the block's (activation, gated) pair, ``MLP_OPS`` (D, F): ``mlp`` (GELU),
  ``mlp_relu2`` (Nemotron-H's ReLU^2), ``gated_mlp`` (SwiGLU), ``gated_mlp_geglu`` (Zamba2's GeGLU); any
  other pair is an error naming these.
- moe: norm(D), moe(D, F, X, Xk).
- linear: linear(d_in -> d_out) (no residual add of its own).
- model ends: embedding(B, L, D, V) first; final norm(D) and lm_head(D, V) last. In prefill the LM head
  runs on the last token of each sequence only (``logits='last'``, what generation needs; 'all' for
  every token); in training on every token.

Not counted: dropout; Mamba-3's decode pre-processing (its ``mamba3`` decode rule is the fused step
kernel); the extra copies of mamba_inner_fn's B / C / Delta RMSNorm path (Falcon-Mamba, Jamba).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..registry import AnalyticError, get_op
from .models import MLP, Attention, Linear, Mamba1, Mamba2, Mamba3, Model, MoE

PHASES = ("prefill", "decode", "train")
GRID_VARS = ("batch", "tokens", "keys")

# Implementation preferred for each op and mode when the user names none; resolve_impl falls back
# to the op's default, then to any implementation with a rule for the mode.
DEFAULT_IMPLS: dict[str, dict[str, str]] = {
    "attention_causal": {"fwd": "fa2", "bwd": "fa2", "fwdbwd": "fa2", "decode": "splitkv"},
    "ssd": {"fwd": "chunked", "bwd": "chunked", "fwdbwd": "chunked", "decode": "chunked"},
    "mamba1_scan": {"*": "fused"},
    "conv1d": {"*": "causal_conv1d"},
    "rmsnorm": {"*": "fused"},
    "layernorm": {"*": "fused"},
    "gated_rmsnorm": {"*": "fused"},
    "gated_mlp": {"*": "fused"},
    "gated_mlp_geglu": {"*": "fused"},
    "mlp": {"fwd": "fused", "decode": "fused"},
    "mlp_relu2": {"fwd": "fused", "decode": "fused"},
    "kv_append": {"*": "fused"},
    "add": {"*": "torch_eager"},
}

# The op that costs an MLP block, by (activation, gated); the activation is part of the op's identity.
MLP_OPS: dict[tuple[str, bool], str] = {
    ("gelu", False): "mlp",
    ("relu2", False): "mlp_relu2",
    ("silu", True): "gated_mlp",
    ("gelu", True): "gated_mlp_geglu",
}


def mlp_op(activation: str, gated: bool) -> str:
    """The registered op for an MLP block; an (activation, gated) pair without one is an AnalyticError."""
    try:
        return MLP_OPS[(activation, gated)]
    except KeyError:
        valid = "; ".join(f"{a} {'gated' if g else 'plain'} -> {op}" for (a, g), op in MLP_OPS.items())
        raise AnalyticError(f"MLP activation {activation!r} ({'gated' if gated else 'not gated'}) has no cost "
                            f"rule; valid: {valid}") from None

# A dimension of a call: an int constant, a grid variable name, (grid variable, multiplier, round up
# to a multiple of), or (grid variable, multiplier, round up to, minus, at most): the value
# min(max(rounded - minus, 0), at most) x multiplier (``at most`` None: no cap); windows use the last.
Dim = Any


def dim_parts(v: Dim) -> tuple:
    """A plan dimension as (grid variable or None, constant or multiplier, round up to, minus, at most)."""
    if isinstance(v, str):
        return (v, 1, 1, 0, None)
    if isinstance(v, tuple):
        return v + (0, None) if len(v) == 3 else v
    return (None, v, 1, 0, None)


def dim_value(grid: Mapping[str, Any], var: str | None, mult, step: int, minus: int = 0, cap: int | None = None):
    """The value of a dimension (``dim_parts``) on ``grid``: scalars or numpy arrays."""
    if var is None:
        return mult
    v = grid[var]
    if step != 1:
        v = np.ceil(v / step) * step
    if minus:
        v = np.maximum(v - minus, 0)
    if cap is not None:
        v = np.minimum(v, cap)
    return v * mult


@dataclass(frozen=True)
class OpCall:
    """One op call of a plan; ``count`` = times it runs per model step (block occurrences x calls)."""

    label: str  # e.g. "mamba.in_proj"
    block: str  # block name ("" for the model ends)
    op: str
    impl: str
    mode: str
    dims: tuple[tuple[str, Dim], ...]
    count: int
    instances: int  # occurrences of the block in the layer sequence
    recompute: bool = False  # the extra forward of activation recomputation
    # the measured backend the modules call for this op where it runs the implementation differently from
    # what the implementation implies (``execution.BACKEND_TRAITS``; ``SDPA_BACKEND``); None: as implied
    backend: str | None = None
    # whether the call is a module call of its own, paying a runtime's per-call module host class
    # (``analytic/runtime.py``); False for the later op calls of one module listed kernel by kernel
    module_call: bool = True
    # the op whose implementation this call is one kernel of, where the plan lists that op's kernels as op
    # calls of their own (``_Builder.merged_gated_mlp``, ``eager_gated_mlp``); None: the call is its own op
    part_of: str | None = None

    def dim_map(self) -> dict[str, Dim]:
        return dict(self.dims)

    @property
    def module_calls(self) -> int:
        """Module calls per model step: ``count``, or 0 for a call inside another call's module."""
        return self.count if self.module_call else 0


def resolve_impl(op_name: str, mode: str, requested: str | None) -> tuple[str, str]:
    """(implementation, mode) to cost ``op_name`` in ``mode``; decode falls back to fwd with L = 1."""
    op = get_op(op_name)
    if requested is not None:
        impl = op.impl(requested)  # raises with the valid names
        if impl.supports(mode):
            return impl.name, mode
        # decode of a stateless op (no implementation has a decode rule) is its forward with L = 1; an op
        # with a decode rule elsewhere must not run another implementation's forward in its place
        if mode == "decode" and impl.supports("fwd") and not any(i.supports("decode") for i in op.impls):
            return impl.name, "fwd"
        with_rule = [i.name for i in op.impls if i.supports(mode)]
        valid = [m for m in ("fwd", "bwd", "fwdbwd", "decode") if impl.supports(m)]
        raise AnalyticError(f"op {op_name!r}, implementation {requested!r} has no rule for mode {mode!r} "
                            f"(its modes: {', '.join(valid)}); implementations with a {mode} rule: "
                            f"{', '.join(with_rule) or 'none'}")
    prefs = DEFAULT_IMPLS.get(op_name, {})
    order = [prefs.get(mode), prefs.get("*"), op.default_impl, *(i.name for i in op.impls)]
    for m in ((mode, "fwd") if mode == "decode" else (mode,)):
        for name in order:
            if name is not None and name in op.impl_map and op.impl_map[name].supports(m):
                return name, m
    raise AnalyticError(f"op {op_name!r} has no implementation with a rule for mode {mode!r}")


# "library": the kernel libraries' modules (mamba-ssm's MambaLMHeadModel, flash-attn present); "hf":
# Hugging Face modules (runtime.py's hf-eager); "library_sdpa": mamba-ssm's modules on a machine without
# flash-attn, whose MHA then runs its SDPA fallback (mha.py, ``MHA.forward`` / ``_update_kvcache_attention``):
# ``torch.repeat_interleave(k, dim=2, repeats=H / G)`` and the same for v before SDPA, which materializes
# k and v even at repeats = 1 (MHA): in decode a copy of the whole cached K and V of every attention
# layer per step (the measured profiles: two direct_copy kernels per layer the size of the cache)
MODULE_STYLES = ("library", "hf", "library_sdpa")
# The backend PyTorch's SDPA picks for the causal attention of the "hf" and "library_sdpa" modules in
# prefill and training on the H200 (bf16, head dim 64, causal or with a mask): cuDNN. Evidence: every
# whole-model profile of 2026-12-03 (results/h200/2026-12-03/models*, PyTorch 2.11) names only
# ``cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma`` (and ``..._bprop_wgmma`` in training) for
# the attention kernels, none of the flash backend's ``pytorch_flash::flash_fwd_kernel``. cuDNN's Hopper
# kernels issue wgmma and overlap the softmax with the GEMMs (``execution.BACKEND_TRAITS``), where the
# FlashAttention-2 traits of ``fa2`` charge mma.sync and serial phases. Decode keeps its ``splitkv`` rule.
SDPA_BACKEND = "torch.sdpa.cudnn"
SDPA_MODULES = ("hf", "library_sdpa")
SDPA_OPS = ("attention_causal", "attention_full")


class _Builder:
    def __init__(self, model: Model, phase: str, impls: Mapping[str, str], modules: str = "library"):
        self.model, self.phase, self.impls, self.modules = model, phase, impls, modules
        self.mode = {"prefill": "fwd", "decode": "decode", "train": "fwdbwd"}[phase]
        self.tokens: Dim = 1 if phase == "decode" else "tokens"
        self.calls: list[OpCall] = []

    def add(self, label: str, block: str, instances: int, op: str, dims: dict[str, Dim], per_block: int = 1,
            tokens: Dim | None = None, mode: str | None = None, impl: str | None = None,
            module_call: bool = True, part_of: str | None = None) -> None:
        mode = mode or self.mode
        impl, mode = resolve_impl(op, mode, self.impls.get(op, impl))
        full = {"B": "batch", "L": self.tokens if tokens is None else tokens, **dims}
        op_dims = get_op(op).dims
        unknown = sorted(set(full) - set(op_dims) - {"B", "L"})
        if unknown:
            raise AnalyticError(f"op {op!r} has no dimension(s) {unknown} (its dims: {', '.join(op_dims)})")
        kept = tuple((k, v) for k, v in full.items() if k in op_dims)
        backend = SDPA_BACKEND if (self.modules in SDPA_MODULES and op in SDPA_OPS and impl == "fa2"
                                   and mode in ("fwd", "fwdbwd")) else None
        self.calls.append(OpCall(label, block, op, impl, mode, kept, instances * per_block, instances,
                                 backend=backend, module_call=module_call, part_of=part_of))

    def norm(self, label: str, block: str, n: int, width: int) -> None:
        self.add(f"{label}.norm", block, n, self.model.spec.norm, {"D": width})

    def chunked_tokens(self, chunk: int) -> Dim:
        """Tokens rounded up to whole chunks: chunked kernels compute the last, partial chunk in full."""
        return 1 if self.tokens == 1 else ("tokens", 1, chunk)

    def attention(self, name: str, n: int, blk: Attention) -> None:
        """The attention op calls of a block; with a window, the sum of the module docstring."""
        heads = {"H": blk.heads, "G": blk.kv_heads, "P": blk.head_dim}
        W = blk.window
        if W is None:
            self.add(f"{name}.attention", name, n, "attention_causal", {"S": "keys", **heads})
            return
        if self.tokens == 1:
            self.add(f"{name}.attention", name, n, "attention_causal", {"S": ("keys", 1, 1, 0, W), **heads})
            return
        self.add(f"{name}.attention", name, n, "attention_causal", {"S": ("keys", 1, 1, 0, W), **heads},
                 tokens=("tokens", 1, 1, 0, W))
        self.add(f"{name}.attention_beyond_window", name, n, "attention_full", {"S": W, **heads},
                 tokens=("tokens", 1, 1, W, None), impl=self.impls.get("attention_causal"))

    @property
    def train(self) -> bool:
        return self.phase == "train"

    def copy(self, label: str, block: str, n: int, width: Dim, per_block: int = 1) -> None:
        """A layout copy of B x tokens x ``width`` elements (inside a custom autograd function or
        itself backward work: a forward-only kernel in every phase)."""
        self.add(label, block, n, "copy", {"D": width}, per_block=per_block, mode="fwd" if self.train else None)

    def mamba1(self, name: str, n: int, blk: Mamba1, D: int) -> None:
        E, N, R = blk.d_inner(D), blk.d_state, blk.dt_rank
        prefill = self.tokens != 1
        self.norm(name, name, n, D)
        self.add(f"{name}.in_proj", name, n, "linear", {"I": D, "O": 2 * E})
        self.add(f"{name}.A", name, n, "a_from_log", {"E": E, "N": N}, impl="fp32_param")
        if prefill:
            self.add(f"{name}.dt_bias_fp32", name, n, "cast", {"B": 1, "L": 1, "D": E}, impl="param_to_fp32")
        self.add(f"{name}.conv1d", name, n, "conv1d", {"E": E, "K": blk.d_conv})
        if prefill:  # for one sequence the transposed view is a valid GEMM operand: a copy only when B > 1
            self.copy(f"{name}.conv_out_rows", name, n, ("batch", E, 1, 1, 1))
        self.add(f"{name}.x_proj", name, n, "linear", {"I": E, "O": R + 2 * N})
        if prefill:
            self.copy(f"{name}.bc_contiguous", name, n, N, per_block=2)
        if blk.bcdt_norm:
            self.add(f"{name}.dt_norm", name, n, "rmsnorm", {"D": R})
            self.add(f"{name}.bc_norm", name, n, "rmsnorm", {"D": N}, per_block=2)
        self.add(f"{name}.dt_proj", name, n, "linear", {"I": R, "O": E})
        self.add(f"{name}.scan", name, n, "mamba1_scan", {"E": E, "N": N})
        self.add(f"{name}.out_proj", name, n, "linear", {"I": E, "O": D})
        if self.train:  # MambaInnerFn.backward beyond the ops' backward rules
            self.add(f"{name}.conv1d_recompute", name, n, "conv1d", {"E": E, "K": blk.d_conv}, mode="fwd")
            self.add(f"{name}.dt_proj_recompute", name, n, "linear", {"I": R, "O": E}, mode="fwd")
            self.copy(f"{name}.bwd_dbc_copies", name, n, N, per_block=4)
            self.copy(f"{name}.bwd_ddelta_copy", name, n, R)

    def mamba2(self, name: str, n: int, blk: Mamba2, D: int) -> None:
        E, H = blk.d_inner(D), blk.heads(D)
        self.norm(name, name, n, D)
        self.add(f"{name}.in_proj", name, n, "linear", {"I": D, "O": blk.in_proj_out(D)})
        self.add(f"{name}.A", name, n, "a_from_log", {"E": H, "N": 1}, impl="cast_param")
        self.add(f"{name}.conv1d", name, n, "conv1d", {"E": blk.conv_channels(D), "K": blk.d_conv})
        self.add(f"{name}.ssd", name, n, "ssd",
                 {"H": H, "P": blk.headdim, "N": blk.d_state, "G": blk.ngroups, "C": blk.chunk_size},
                 tokens=self.chunked_tokens(blk.chunk_size))
        self.add(f"{name}.gated_norm", name, n, "gated_rmsnorm", {"D": E})
        self.add(f"{name}.out_proj", name, n, "linear", {"I": E, "O": D})
        if self.train:  # MambaSplitConv1dScanCombinedFn.backward recomputes the conv
            self.add(f"{name}.conv1d_recompute", name, n, "conv1d", {"E": blk.conv_channels(D), "K": blk.d_conv},
                     mode="fwd")

    def mamba3(self, name: str, n: int, blk: Mamba3, D: int) -> None:
        E, H, M = blk.d_inner(D), blk.heads(D), blk.mimo_rank
        rows = blk.ngroups * M
        self.norm(name, name, n, D)
        self.add(f"{name}.in_proj", name, n, "linear", {"I": D, "O": blk.in_proj_out(D)})
        if self.tokens != 1:
            self.add(f"{name}.prep", name, n, "mamba3_prep", {"H": H, "N": blk.d_state})
        bc_tokens = rows if self.tokens == 1 else ("tokens", rows, 1)
        self.add(f"{name}.bc_norm", name, n, "rmsnorm", {"D": blk.d_state}, per_block=2, tokens=bc_tokens)
        self.add(f"{name}.mamba3", name, n, "mamba3", {"H": H, "P": blk.headdim, "N": blk.d_state, "M": M},
                 impl="mimo" if M > 1 else "siso", tokens=self.chunked_tokens(blk.chunk_size))
        self.add(f"{name}.out_proj", name, n, "linear", {"I": E, "O": D})
        if self.train:  # autograd's cat of the split in-projection's gradients
            self.copy(f"{name}.in_proj_split_bwd", name, n, blk.in_proj_out(D))

    def attention_block(self, name: str, n: int, blk: Attention, D: int) -> None:
        Din, H, G, P = blk.width_in(D), blk.heads, blk.kv_heads, blk.head_dim
        hf = self.modules == "hf"
        self.norm(name, name, n, Din)
        if hf:  # q_proj, k_proj, v_proj: three nn.Linear modules, three GEMMs
            for proj, heads in (("q", H), ("k", G), ("v", G)):
                self.add(f"{name}.{proj}_proj", name, n, "linear", {"I": Din, "O": heads * P})
        else:
            self.add(f"{name}.qkv_proj", name, n, "linear", {"I": Din, "O": (H + 2 * G) * P})
        if blk.rope_dim is not None:
            self.add(f"{name}.rope", name, n, "rope", {"H": H, "G": G, "P": blk.rope_dim})
        # HF's first cache update keeps the prompt's k and v tensors (no copy); decode appends by index
        if not self.train and not (hf and self.tokens != 1):
            self.add(f"{name}.kv_append", name, n, "kv_append", {"G": G, "P": P})
        if hf and self.tokens == 1 and G < H and blk.window is None:
            # with a cache and a mask, HF hands SDPA k and v repeated to H heads (repeat_kv), not GQA
            self.add(f"{name}.repeat_kv", name, n, "repeat_kv", {"H": H, "G": G, "P": P}, tokens="keys")
        if self.modules == "library_sdpa" and blk.window is None:
            # mamba-ssm's MHA without flash-attn copies k and v for SDPA (MODULE_STYLES): the prompt's in
            # prefill and train (forward; the copy's backward, a reduction over the repeats, is not costed),
            # the whole cache's in decode
            self.add(f"{name}.repeat_kv", name, n, "repeat_kv", {"H": H, "G": G, "P": P},
                     tokens="keys" if self.tokens == 1 else None, mode="fwd" if self.train else None,
                     impl="repeat_interleave")
        self.attention(name, n, blk)
        self.add(f"{name}.o_proj", name, n, "linear", {"I": H * P, "O": D})
        if self.train:  # autograd's cat of dq, dk, dv into the fused projection's output gradient
            self.copy(f"{name}.qkv_split_bwd", name, n, (H + 2 * G) * P)

    def merged_gated_mlp(self, name: str, n: int, D: int, F: int) -> None:
        """mamba-ssm's GatedMLP (``gated_mlp``/``merged_eager``) as the op calls of its kernels: fc1, the
        chunked gate, fc2. One op call would overlap its GEMMs' tensor time with its elementwise kernels'
        memory time (an op call's engines overlap, ``achievable.py``), where the kernels run one after
        another; the module is one call (``module_call``: the runtime's module class is paid once)."""
        kw = {"part_of": "gated_mlp", "module_call": False}
        self.add(f"{name}.fc1", name, n, "linear", {"I": D, "O": 2 * F}, part_of="gated_mlp")
        self.add(f"{name}.gate", name, n, "silu_gate", {"D": F}, impl="chunked_eager", **kw)
        self.add(f"{name}.fc2", name, n, "linear", {"I": F, "O": D}, **kw)

    def eager_gated_mlp(self, name: str, n: int, D: int, F: int) -> None:
        """Hugging Face's LlamaMLP (``gated_mlp``/``torch_eager``: ``down_proj(act_fn(gate_proj(x)) *
        up_proj(x))``) as the op calls of its kernels, for the reason ``merged_gated_mlp`` gives: gate_proj,
        up_proj, silu and the product (``silu_gate``/``torch_eager``: two eager kernels), down_proj; in
        training also autograd's add of the two projections' input gradients (``ops/mlp/cost.py``
        ``_dx_accumulate``), a forward-style kernel of the backward as the plan's layout copies are. One
        module call (``module_call``), as before the split."""
        kw = {"part_of": "gated_mlp", "module_call": False}
        self.add(f"{name}.gate_proj", name, n, "linear", {"I": D, "O": F}, part_of="gated_mlp")
        self.add(f"{name}.up_proj", name, n, "linear", {"I": D, "O": F}, **kw)
        self.add(f"{name}.gate", name, n, "silu_gate", {"D": F}, impl="torch_eager", **kw)
        self.add(f"{name}.down_proj", name, n, "linear", {"I": F, "O": D}, **kw)
        if self.train:
            self.add(f"{name}.bwd_dx_accumulate", name, n, "add", {"D": D}, mode="fwd", impl="torch_eager", **kw)

    def block(self, name: str, n: int) -> None:
        blk, D = self.model.block(name), self.model.d_model
        if isinstance(blk, Mamba1):
            self.mamba1(name, n, blk, D)
        elif isinstance(blk, Mamba2):
            self.mamba2(name, n, blk, D)
        elif isinstance(blk, Mamba3):
            self.mamba3(name, n, blk, D)
        elif isinstance(blk, Attention):
            self.attention_block(name, n, blk, D)
        elif isinstance(blk, MLP):
            self.norm(name, name, n, D)
            op = mlp_op(blk.activation, blk.gated)
            if op == "gated_mlp" and self.impls.get(op) == "merged_eager":
                self.merged_gated_mlp(name, n, D, blk.d_ff)
            elif op == "gated_mlp" and self.impls.get(op) == "torch_eager":
                self.eager_gated_mlp(name, n, D, blk.d_ff)
            else:
                self.add(f"{name}.mlp", name, n, op, {"D": D, "F": blk.d_ff})
        elif isinstance(blk, MoE):
            self.norm(name, name, n, D)
            self.add(f"{name}.moe", name, n, "moe", {"D": D, "F": blk.d_ff, "X": blk.experts, "Xk": blk.top_k})
        elif isinstance(blk, Linear):
            self.add(f"{name}.linear", name, n, "linear", {"I": blk.d_in or D, "O": blk.d_out or D})
            return
        else:
            raise AnalyticError(f"block {name!r}: no op plan for kind {blk.kind!r}")
        # mamba-ssm's blocks (fused_add_norm) add the residual inside the next norm's kernel
        self.add(f"{name}.residual", name, n, "add", {"D": D},
                 impl=None if self.modules == "hf" else "fused_norm")


@functools.lru_cache(maxsize=512)
def _plan(model: Model, phase: str, impls: tuple[tuple[str, str], ...], recompute: bool,
          logits: str, modules: str, optimizer: str | None = None) -> tuple[OpCall, ...]:
    b = _Builder(model, phase, dict(impls), modules)
    D, V = model.d_model, model.spec.vocab
    b.add("embedding", "", 1, "embedding", {"D": D, "V": V})
    for name, n in model.block_counts.items():
        b.block(name, n)
    flips = len(model.layer_sequence) - 1 if model.spec.flip_between_layers else 0
    if flips:  # hidden.flip(1) and residual.flip(1) between layers; in training their backward flips the gradients
        for label, width in (("flip_hidden", D), ("flip_residual", 2 * D)):  # the residual is fp32: 2 x D 16-bit widths
            b.add(label, "", flips, "copy", {"D": width}, per_block=2 if b.train else 1, mode="fwd" if b.train else None)
    b.norm("final", "", 1, D)
    head_tokens = 1 if phase == "decode" or (phase == "prefill" and logits == "last") else "tokens"
    b.add("lm_head", "", 1, "lm_head", {"D": D, "V": V}, tokens=head_tokens)
    if phase == "train":  # F.cross_entropy over every token's logits, and its backward
        b.add("loss", "", 1, "cross_entropy", {"V": V})
    if optimizer is not None:  # the parameter update after the backward, over every parameter (ops/optimizer)
        b.add("optimizer", "", 1, optimizer, {"Np": model.params}, mode="fwd")
    calls = b.calls
    if phase == "train" and recompute:
        extra = _Builder(model, "prefill", dict(impls), modules)
        for name, n in model.block_counts.items():
            extra.block(name, n)
        calls = calls + [OpCall(c.label + ".recompute", c.block, c.op, c.impl, c.mode, c.dims, c.count,
                                c.instances, recompute=True, backend=c.backend, module_call=c.module_call)
                         for c in extra.calls]
    return tuple(calls)


OPTIMIZERS = ("adamw",)  # optimizer ops a train plan can end with (``optimizer``)


def plan(model: Model, phase: str, impls: Mapping[str, str] | None = None, recompute: bool = False,
         logits: str = "last", modules: str = "library", optimizer: str | None = None) -> tuple[OpCall, ...]:
    """The op calls of one step of ``model`` in ``phase`` (cached). ``modules``: ``library`` (fused
    library modules: one QKV projection) or ``hf`` (Hugging Face modules, ``runtime.py``'s hf-eager:
    q, k and v projections apart, the GQA heads repeated before attention in decode, no cache copy
    of the prompt). ``optimizer`` (train only): the op of the parameter update that ends the step
    (``adamw``: ``ops/optimizer``), over all ``model.params``; None: the step ends with the backward."""
    if modules not in MODULE_STYLES:
        raise AnalyticError(f"unknown module style {modules!r}; valid: {', '.join(MODULE_STYLES)}")
    if phase not in PHASES:
        raise AnalyticError(f"unknown phase {phase!r}; valid phases: {', '.join(PHASES)}")
    if logits not in ("last", "all"):
        raise AnalyticError(f"logits must be 'last' or 'all', got {logits!r}")
    if recompute and phase != "train":
        raise AnalyticError("activation recomputation applies to the train phase only")
    if optimizer is not None and (phase != "train" or optimizer not in OPTIMIZERS):
        raise AnalyticError(f"optimizer {optimizer!r}: an optimizer step is part of the train phase only, and one of "
                            f"{', '.join(OPTIMIZERS)}")
    return _plan(model, phase, tuple(sorted((impls or {}).items())), recompute, logits, modules, optimizer)
