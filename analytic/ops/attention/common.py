"""Shared pieces of the attention family (``attention.py``, ``flash.py``,
``decode.py``): score counts and their matmul FLOPs, the op's input/output tensors, tile
tables, the online softmax count, dtype checks and the GQA branch.

Layout: q [B, H, L, P], k and v [B, G, S, P], o [B, H, L, P] (PyTorch SDPA's order; the bytes do not
depend on it). Query head h uses KV head h // (H / G) (``repeat_interleave`` semantics).
"""

from __future__ import annotations

from typing import Any

import sympy as sp

from ...conventions import CAUSAL_FRACTION, FLOPS_PER_FMA, TENSOR_DTYPE, nbytes
from ...cost import Cost
from ...registry import AnalyticError
from ...symbols import B, G, H, L, P, S
from ..common.kernels import Tensor

F32 = 4  # bytes: logsumexp, D = rowsum(dO * O), fp32 accumulators
# PyTorch's softmax keeps a row on chip up to 1024 elements (persistent kernel); longer rows are
# streamed by a block reduction, so a row's on-chip footprint is capped there.
SOFTMAX_ROW_ON_CHIP = 1024


def softmax_row_working_set(rows_held: int = 1) -> Any:
    return rows_held * sp.Min(S, SOFTMAX_ROW_ON_CHIP) * F32


def kv_cache_bytes_per_token(dtype: str) -> Any:
    """KV-cache bytes one token adds per layer: k and v for G KV heads of P, 2*G*P*e."""
    return 2 * G * P * nbytes(dtype)


def score_entries(causal: bool) -> Any:
    """Score-matrix entries one (batch, head) computes: L queries against S keys.

    Full: L*S. Causal, aligned bottom-right as in FlashAttention >= 2.1 and a KV cache (query i of L
    sees keys up to S - L + i): L*S - (1 - CAUSAL_FRACTION) * L^2, which is CAUSAL_FRACTION * L^2 for
    prefill (S = L) and ignores the diagonal's extra L/2 (conventions.py).
    """
    return L * S - (1 - CAUSAL_FRACTION) * L**2 if causal else L * S


def matmuls(dtype: str, entries: Any, n: int = 2) -> dict[str, Any]:
    """``Kernel.tensor`` of ``n`` score-shaped matmuls over ``entries`` score entries per (batch, head),
    one FMA of length P per entry each, at the tensor dtype of ``dtype``. n = 2: QK^T and PV (a
    forward); the backward's are dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q (+ S recomputed)."""
    return {TENSOR_DTYPE[dtype]: sp.expand(n * FLOPS_PER_FMA * B * H * entries * P)}


def out_itemsize(dtype: str) -> int:
    """FlashAttention-3's fp8 forward writes its output in bf16; everything else in the input dtype."""
    return nbytes("bf16") if dtype == "fp8" else nbytes(dtype)


def check_dtype(impl: str, dtype: str, allowed: tuple[str, ...], why: str) -> None:
    if dtype not in allowed:
        raise AnalyticError(f"implementation {impl!r} has no {dtype} path ({why}); valid dtypes: {', '.join(allowed)}")


def select(cond: Any, if_true: Cost, if_false: Cost) -> Cost:
    """A Cost whose every term is ``Piecewise((if_true, cond), (if_false, True))``: used where an
    implementation dispatches different kernels for GQA (G < H) and MHA (G = H)."""
    a, b = if_true.terms(), if_false.terms()
    terms = {}
    for key in dict.fromkeys([*a, *b]):
        x, y = a.get(key, 0), b.get(key, 0)
        terms[key] = x if x == y else sp.Piecewise((x, cond), (y, True))
    return Cost.from_terms(terms)


GQA = sp.StrictLessThan(G, H)


# Tensors of the op ---------------------------------------------------------------------------------
def q_tensor(dtype: str, name: str = "q", tokens: Any = L) -> Tensor:
    return Tensor(name, "activations", B * H * tokens * P, nbytes(dtype))  # [B, H, L, P]


def kv_tensor(name: str, dtype: str, decode: bool = False, kv_dtype: str | None = None) -> Tensor:
    """k or v [B, G, S, P]; in decode the cache, stored at ``kv_dtype`` when given (else ``dtype``)."""
    return Tensor(name, "kv_cache" if decode else "activations", B * G * S * P, nbytes(kv_dtype or dtype))


def o_tensor(dtype: str, name: str = "o", tokens: Any = L) -> Tensor:
    return Tensor(name, "activations", B * H * tokens * P, out_itemsize(dtype))  # [B, H, L, P]


def lse_tensor(name: str = "lse", tokens: Any = L, splits: Any = 1) -> Tensor:
    return Tensor(name, "intermediates", splits * B * H * tokens, F32)  # [splits, B, H, L] fp32


def online_softmax(rows: Any, entries: Any, block_n: Any) -> tuple[Any, Any]:
    """(vector FLOPs, transcendentals) of FlashAttention's online softmax.

    ``entries`` score entries over ``rows`` query rows, visited in key tiles of ``block_n``:
    - per entry: running row max (1), exp2(s * scale*log2(e) - m * scale*log2(e)) as one FMA (2) and
      one exp, row-sum add (1): 4 vector, 1 exp;
    - per (row, key tile) pair, entries / block_n of them (tile quantization ignored): rescale factor
      alpha = exp2((m_old - m_new) * scale*log2(e)) (2, 1 exp), l *= alpha (1), O row *= alpha (P):
      P + 3 vector, 1 exp;
    - per row at the end: 1 / l (1), O row *= 1/l (P), lse = m * scale + log(l) (2, 1 log):
      P + 3 vector, 1 transcendental.
    Not counted: the causal mask's compare-and-select on diagonal tiles, dtype conversions of P.
    """
    pairs = entries / block_n
    vector = 4 * entries + (P + 3) * pairs + (P + 3) * rows
    transcendental = entries + pairs + rows
    return vector, transcendental


def piecewise_by_head_dim(table: tuple[tuple[int, Any], ...]) -> Any:
    """``table`` = ((max head dim, value), ...) ascending; head dims above the last entry (beyond
    what the kernels support, 256) reuse the last value."""
    pieces = [(v, sp.Le(P, d)) for d, v in table[:-1]]
    return sp.Piecewise(*pieces, (table[-1][1], True))


# Tile tables (kBlockM, kBlockN) for 16-bit inputs --------------------------------------------------
# FlashAttention-2 forward on sm80 / sm90 (A100, H100, H200: not the sm86/sm89 branch),
# csrc/flash_attn/src/flash_fwd_launch_template.h, run_mha_fwd_hdim*: hdim 32/64 128x128; 96/128
# 128x64; 160 128x32; 192/224 128x64; 256 on H100-class smem (228 KB/SM) 64x64. One K/V stage.
FA2_FWD_TILES = ((32, (128, 128)), (64, (128, 128)), (96, (128, 64)), (128, (128, 64)), (160, (128, 32)),
                 (192, (128, 64)), (224, (128, 64)), (256, (64, 64)))
# FlashAttention-2 split-KV kernel (decode, flash_attn_with_kvcache), flash_fwd_launch_template.h,
# run_mha_fwd_splitkv_dispatch: kBlockM = 64, kBlockN = 256 if hdim <= 64, 128 if <= 128, else 64.
FA2_SPLITKV_TILES = ((64, (64, 256)), (128, (64, 128)), (256, (64, 64)))
# FlashAttention-2 backward on sm90 (227 KB of shared memory per block), flash_bwd_launch_template.h
# run_mha_bwd_hdim* (PyTorch's vendored copy, aten/src/ATen/native/transformers/cuda/flash_attn, chooses the
# same): Flash_bwd_kernel_traits<hdim, kBlockM, kBlockN, kNWarps, AtomLayoutMSdP, AtomLayoutNdKV,
# AtomLayoutMdQ, Is_V_in_regs, No_double_buffer> without dropout, as (max head dim, (kBlockM, kBlockN,
# kNWarps, AtomLayoutMSdP, AtomLayoutNdKV, AtomLayoutMdQ, Is_V_in_regs)). The warp layouts set how much
# each warp reads from shared memory per tile (chain_fa2.fa2_bwd_smem_bytes).
FA2_BWD_TRAITS = ((32, (128, 128, 8, 4, 4, 4, True)), (64, (128, 128, 8, 4, 4, 4, False)),
                  (96, (64, 128, 8, 2, 4, 4, True)), (128, (64, 128, 8, 2, 4, 2, False)),
                  (160, (64, 64, 8, 4, 4, 4, False)), (192, (64, 64, 8, 4, 2, 2, False)),
                  (224, (64, 64, 8, 4, 4, 4, False)), (256, (64, 64, 8, 4, 2, 2, False)))


def by_head_dim(table, head_dim: int):
    """The entry of a head-dim table ((max head dim, entry), ...) for ``head_dim``: the first whose bound it fits
    under, the last beyond them."""
    return next((t for d, t in table if head_dim <= d), table[-1][1])


def fa2_bwd_traits(head_dim: int) -> tuple[int, int, int, int, int, int, bool]:
    """The FA2_BWD_TRAITS entry of ``head_dim`` (the first whose bound it fits under; the last beyond 256)."""
    return by_head_dim(FA2_BWD_TRAITS, head_dim)


# The cost rule's working set uses the head-dim-128 tile (kBlockM 64, kBlockN 128) for every head dim
# (other head dims choose other tiles; only the working set moves); the chain takes each head dim's own.
FA2_BWD_TILE = fa2_bwd_traits(128)[:2]
# FlashAttention-3 forward on sm90, hopper/tile_size.h tile_size_fwd_sm90 (headdim_v = headdim,
# no paged KV, no local window, two consumer warpgroups): 16-bit and fp8 tables. Two K/V stages.
FA3_STAGES = 2


def fa3_fwd_tiles(dtype: str, causal: bool) -> tuple[tuple[int, tuple[int, int]], ...]:
    if dtype == "fp8":
        return ((64, (192, 160)), (96, (192, 128)), (128, (128, 224)), (192, (128, 160)), (256, (128, 128)))
    return ((64, (192, 128 if causal else 192)), (96, (192, 144)), (128, (128, 128 if causal else 176)),
            (192, (128, 112)), (256, (128, 80)))


# FlashAttention-3 backward hdim 128 on sm90, hopper/flash_bwd_launch_template.h run_mha_bwd_hdim128:
# kBlockM 64 (causal) or 80, kBlockN 128, two Q and two dO stages; used for every head dim.
def fa3_bwd_tile(causal: bool) -> tuple[int, int]:
    return (64 if causal else 80, 128)


def tile(table, which: int) -> Any:
    """kBlockM (which = 0) or kBlockN (which = 1) of a head-dim table, as a function of P."""
    return piecewise_by_head_dim(tuple((d, t[which]) for d, t in table))
