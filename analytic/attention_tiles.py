"""Attention tile loops' shared counts (``chain.TILE_LOOP`` chains of FlashAttention-2, cuDNN and SDPA's
memory-efficient kernels: chain_fa2.py, chain_cudnn.py, chain_memeff.py): how many tiles each program loops over
under the causal mask, and one tile step's work by engine."""

from __future__ import annotations

import math

# a backward tile step's GEMMs (S = Q K^T recomputed, dP = dO V^T, dV, dK, dQ) and its vector FLOPs per score entry
# (P = exp(S - lse) as an FMA, dS = P (dP - D))
ATTENTION_BWD_GEMMS = 5
ATTENTION_BWD_VECTOR_PER_ENTRY = 4


def key_tiles_per_query_tile(rows: int, keys: int, causal: bool, bm: int, bn: int) -> list[int]:
    """Key tiles of ``bn`` each query tile of ``bm`` rows loops over; causal: bottom-right aligned (query row i
    sees the keys up to i + keys - rows), as FlashAttention >= 2.1 and cuDNN mask."""
    n_m, n_all = math.ceil(rows / bm), math.ceil(keys / bn)
    if not causal:
        return [n_all] * n_m
    return [min(n_all, math.ceil((keys - rows + (m + 1) * bm) / bn)) for m in range(n_m)]


def query_tiles_per_key_tile(rows: int, keys: int, causal: bool, bm: int, bn: int) -> list[int]:
    """Query tiles of ``bm`` rows that see each key tile of ``bn`` (a backward's loop per key tile); causal:
    bottom-right aligned, key tile n first seen by query tile (n bn + rows - keys) / bm (the kernels'
    ``m_block_min``)."""
    n_m, n_n = math.ceil(rows / bm), math.ceil(keys / bn)
    return [n_m - (max(0, (n * bn + rows - keys) // bm) if causal else 0) for n in range(n_n)]


def attention_fwd_step_work(bm: int, bn: int, head_dim: int) -> tuple[float, float, float]:
    """(tensor FLOPs, vector FLOPs, exponentials) of one forward attention tile step of ``bm`` query rows x ``bn``
    keys: QK^T and PV over the full tile, the online softmax's 4 vector FLOPs and 1 exponential per entry and its
    per-row rescale (head dim + 3 vector, 1 exponential) (ops/attention/common.online_softmax)."""
    return (2 * 2.0 * bm * bn * head_dim, 4.0 * bm * bn + (head_dim + 3.0) * bm, float(bm * bn + bm))


def attention_bwd_step_work(bm: int, bn: int, head_dim: int) -> tuple[float, float, float]:
    """(tensor FLOPs, vector FLOPs, exponentials) of one backward attention tile step: the five GEMMs over the full
    tile, ``ATTENTION_BWD_VECTOR_PER_ENTRY`` vector FLOPs and 1 exponential per score entry."""
    return (2.0 * ATTENTION_BWD_GEMMS * bm * bn * head_dim, float(ATTENTION_BWD_VECTOR_PER_ENTRY * bm * bn),
            float(bm * bn))
