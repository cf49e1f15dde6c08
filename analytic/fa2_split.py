"""FlashAttention-2's split-KV path: how many splits it takes, and the time of its split and combine kernels.

PyTorch's vendored FlashAttention-2 (aten/src/ATen/native/transformers/cuda/flash_attn/flash_api.cpp,
``set_params_splitkv``) splits the key loop of a forward call whose grid is small: with kBlockN = 256, 128 or
64 keys per block at head dims <= 64, <= 128, above (``ops/attention/common.FA2_SPLITKV_TILES``), n_blocks =
ceil(S / kBlockN) and a grid of B x heads x ceil(L / 64) query blocks, it asks ``num_splits_heuristic(grid,
2 x multiProcessorCount, n_blocks, 128)`` (``num_splits``): one split where the grid fills 80 % of twice the
SMs, else the smallest eligible split count whose wave efficiency reaches 85 % of the best. A call that splits
runs ``flash_fwd_splitkv_kernel`` over grid x splits CTAs (tile 64 x kBlockN, four warps, two per SM like the
unsplit forward), each over ceil(n_blocks / splits) key blocks, writing its partial output and logsumexp in
fp32, then ``flash_fwd_splitkv_combine_kernel`` (flash_fwd_launch_template.h), whose CTAs (4 rows of a head
dim of 128) load the splits' logsumexps, then loop over the splits loading one partial output each: the loop
trip count is known only at run time, so each iteration waits for its load, one round trip to the device-wide
cache (the partial outputs were just written there).

So, with n splits (``split_kv_parts``): the split kernel's key loop, (ceil(n_blocks / n) - 1) steps of its tile
in the max with the throughput terms (its K and V stream while the steps run), then after the max its last
step (nothing left to load beside it) and the combine kernel: one more launch (launch.graph_node, one DRAM
round trip) and (n + 1) round trips to the device-wide cache (memory.l2.latency).

Measured on an H100 SXM (results/h100/2026-12-06/fa2-paths; torch.profiler kernel times, B = 1-16, H = 32,
G = 8, P = 128): the combine kernel took 3.55 / 4.34 / 6.27 / 9.15-9.49 us at 2 / 8 / 16 / 28-32 splits, 0.195 us
per split against the cache round trip of 0.149 us the probe measured (the loop's address arithmetic and the
scale's shared-memory load add to each trip); the split kernel at S = 4,096-131,072 took its K and V bytes at
the DRAM term plus 1-4 us (7.9, 27.0, 93.3, 182.6 us), at S = 1,024 (8 CTAs per KV head, one block each) 5.4 us.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

# flash_api.cpp num_splits_heuristic: one split when the grid's 64-row query blocks fill 80 % of the SM count
# it is given, which set_params_splitkv passes as 2 x multiProcessorCount; at most 128 splits
FA2_SPLIT_FILL = 0.8
FA2_SPLIT_SM_FACTOR = 2
FA2_SPLIT_BLOCK_M = 64
FA2_MAX_SPLITS = 128
# a split count whose wave efficiency reaches this share of the best is taken (the smallest such)
FA2_SPLIT_EFFICIENCY = 0.85


@functools.lru_cache(maxsize=4096)
def num_splits(grid_blocks: int, sm_count: int, n_blocks: int, max_splits: int = FA2_MAX_SPLITS) -> int:
    """FlashAttention's ``num_splits_heuristic(grid_blocks, 2 x sm_count, n_blocks, max_splits)``: the splits of
    a key loop of ``n_blocks`` blocks over a grid of ``grid_blocks`` 64-row query blocks on ``sm_count`` SMs.
    A split count is eligible where it changes ceil(n_blocks / splits) from one split fewer; its efficiency is
    waves / ceil(waves), waves = grid x splits / (2 x SMs)."""
    slots = FA2_SPLIT_SM_FACTOR * sm_count
    if grid_blocks >= FA2_SPLIT_FILL * slots:
        return 1
    top = min(max_splits, slots, n_blocks)

    def eligible(s: int) -> bool:
        return s == 1 or math.ceil(n_blocks / s) != math.ceil(n_blocks / (s - 1))

    eff = {}
    for s in range(1, top + 1):
        if eligible(s):
            waves = grid_blocks * s / slots
            eff[s] = waves / math.ceil(waves)
    best = max(eff.values(), default=0.0)
    return next((s for s, e in eff.items() if e >= FA2_SPLIT_EFFICIENCY * best), 1)


def splits_of(grid_blocks: float | None, n_blocks: int, sm_count) -> np.ndarray:
    """``num_splits`` per SM count of ``sm_count`` (an array, one per spec); 1 where the kernel does not split
    (no grid given, or an unknown SM count)."""
    sms = np.asarray(sm_count, dtype=float)
    if grid_blocks is None:
        return np.ones(sms.shape)
    return np.vectorize(lambda s: 1.0 if not math.isfinite(s) or s <= 0
                        else float(num_splits(int(grid_blocks), int(s), int(n_blocks))), otypes=[float])(sms)


def splits(chain, sm_count) -> np.ndarray:
    """The splits of the key loop of ``chain``'s kernel on a device of ``sm_count`` SMs (an array, one per spec):
    FlashAttention's ``num_splits_heuristic`` (fa2_split.py); 1 where it runs its own tile loop."""
    return splits_of(None if chain.split is None else chain.split.programs,
                     0 if chain.split is None else int(chain.split.steps), sm_count)


def split_link(chain, n: float):
    """The split kernel's chain at ``n`` splits: grid x n programs of ceil(key blocks / n) steps each."""
    s = chain.split
    return dataclasses.replace(s, programs=s.programs * n, steps=math.ceil(s.steps / n), total_steps=None)


def split_kv_parts(chain, sm_count, step_s) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where ``chain``'s kernel splits its key loop (fa2_split.py), per SM count: (the split kernel's steps but
    its last, in the max with the throughput terms; its last step, after the max; the splits), each x the
    chain's launches (``Chain.repeated``); (0, 0, 1) where it does not split. ``step_s``: a function of a link
    giving its step time per spec, as for ``chain_time``."""
    sms = np.asarray(sm_count, dtype=float)
    n = splits(chain, sms)
    inside, last = np.zeros(sms.shape), np.zeros(sms.shape)
    if chain.split is None:
        return inside, last, n
    launches = chain.launches
    for k in np.unique(n[n > 1]):
        link = split_link(chain, float(k))
        step = np.nan_to_num(np.broadcast_to(np.asarray(step_s(link), dtype=float), sms.shape), nan=0.0)
        waves = np.ceil(link.programs / (sms * link.programs_per_sm))
        inside = np.where(n == k, launches * (link.steps * waves - 1) * step, inside)
        last = np.where(n == k, launches * step, last)
    return inside, last, n


def split_kv_after(chain, sm_count, step_s, node_s, dram_latency, l2_latency) -> np.ndarray:
    """The time after the max of the throughput terms where a link of ``chain`` splits its key loop (module
    docstring): the split kernel's last step, then the combine kernel, one launch (``node_s``, one
    ``dram_latency``) and (splits + 1) round trips to the device-wide cache (``l2_latency``), x the chain's
    launches; 0 where no link splits. Arguments per spec (arrays); an unknown latency adds nothing."""
    sms = np.asarray(sm_count, dtype=float)
    total = np.zeros(sms.shape)
    for link in chain.links:
        _, last, n = split_kv_parts(link, sms, step_s)
        if not (n > 1).any():
            continue
        combine = sum(np.nan_to_num(np.asarray(x, dtype=float), nan=0.0) for x in
                      (node_s, dram_latency, (n + 1) * np.asarray(l2_latency, dtype=float)))
        total = total + np.where(n > 1, last + link.launches * combine, 0.0)
    return total


def split_keys(chain, sm_count) -> tuple[str, ...]:
    """The spec keys the split-KV path of ``chain`` adds on a device of ``sm_count`` SMs (one spec): the
    device-wide cache's round trip where a link splits its key loop there (the combine kernel waits on it)."""
    from .chain import L2_LATENCY_KEY

    return (L2_LATENCY_KEY,) if any(float(np.ravel(splits(link, sm_count))[0]) > 1 for link in chain.links) else ()
