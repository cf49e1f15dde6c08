"""FlashAttention-2's forward key-tile loop as a sequential chain (analytic/chain_fa2.py ``fa2_fwd_chain``,
class TILE_LOOP): its grid and steps over small dims, the step time from the engine rates, the
longest-last schedule, the split-KV grid, and which measured backends carry it."""

from __future__ import annotations

import dataclasses
import math

import pytest
from ssmbench.analytic import chain as ch
from ssmbench.analytic import chain_fa2 as fa
from ssmbench.analytic import execution, fa2_split
from ssmbench.analytic.achievable import estimate
from ssmbench.analytic.cost import Cost
from ssmbench.hwspecs import get_spec

CAUSAL = fa.fa2_fwd_chain(True)
FULL = fa.fa2_fwd_chain(False)


def test_causal_prefill_grid_and_uneven_steps():
    # P = 128: tile 128 x 64; L = S = 512: 4 query tiles seeing 2, 4, 6, 8 key tiles
    c = CAUSAL({"B": 2, "H": 3, "G": 3, "L": 512, "S": 512, "P": 128}, "fwd")
    assert (c.programs, c.steps, c.total_steps) == (2 * 3 * 4, 8, 2 * 3 * 20)
    assert c.step_work == (4 * 128 * 64 * 128, 4 * 128 * 64 + 131 * 128, 128 * 64 + 128)
    assert c.mma_sync and c.programs_per_sm == fa.FA2_FWD_CTAS_PER_SM


def test_bottom_right_causal_with_fewer_queries_than_keys():
    # L = 256 queries at the end of S = 1024 keys: tiles see (1024 - 256 + 128) / 64 = 14 and 16 key tiles
    c = CAUSAL({"B": 1, "H": 1, "G": 1, "L": 256, "S": 1024, "P": 128}, "fwd")
    assert (c.steps, c.total_steps) == (16, 30)
    assert FULL({"B": 1, "H": 1, "G": 1, "L": 256, "S": 1024, "P": 128}, "fwd").total_steps == 2 * 16


def test_decode_packs_the_query_heads_of_a_kv_head_into_one_tile():
    d = {"B": 4, "H": 32, "G": 8, "S": 1000, "P": 64}  # P = 64: tile 128 x 128
    c = CAUSAL(d, "decode")
    assert (c.programs, c.steps, c.total_steps) == (4 * 8, math.ceil(1000 / 128), 4 * 8 * 8)
    assert c.step_work[0] == 4 * 128 * 128 * 64  # the whole tile, 4 of its 128 rows real
    assert CAUSAL({**d, "G": 32}, "decode").programs == 4 * 32
    assert CAUSAL(d, "bwd") is None
    # the part of a windowed attention beyond its window, for a prompt within it, runs no kernel
    assert CAUSAL({"B": 1, "H": 4, "G": 4, "L": 0, "S": 0, "P": 64}, "fwd") is None


def test_schedule_longest_last_and_one_wave():
    c = ch.Chain(ch.TILE_LOOP, 8, 24, 2, total_steps=120, step_work=(1.0, 0.0, 0.0))
    assert float(ch.chain_time(c, 20, 1e-6)) == pytest.approx(8e-6)  # 24 CTAs fit 40 slots
    assert float(ch.chain_time(c, 5, 1e-6)) == pytest.approx(((120 - 8) / 10 + 8) * 1e-6)


def test_a_small_grid_runs_the_split_kernels_chain_instead():
    split = ch.Chain(ch.TILE_LOOP, 8, 24, 2, step_work=(1.0, 0.0, 0.0))  # 24 query blocks, 8 key blocks
    c = ch.Chain(ch.TILE_LOOP, 8, 24, 2, total_steps=120, step_work=(1.0, 0.0, 0.0), split=split, group_steps=(8,))
    # 24 >= 0.8 x 2 x 15: one split, the tile loop's own chain (24 CTAs in 30 slots: one wave of 8 steps)
    assert float(ch.chain_time(c, 15, 1e-6)) == pytest.approx(8e-6)
    # 24 < 0.8 x 2 x 16: 4 splits (the fewest whose 96 CTAs fill whole waves of 32 slots) of 2 key blocks each:
    # 3 waves of 2 steps, the last step after the max (fa2_split.split_kv_after)
    assert fa2_split.num_splits(24, 16, 8) == 4
    assert float(ch.chain_time(c, 16, 1e-6)) == pytest.approx((2 * 3 - 1) * 1e-6)


def test_step_time_is_the_tile_at_the_ctas_share_of_the_sm():
    per_cta = 1e6 / 1e12 + 2e4 / 1e11 + 1e3 / 1e10
    shared = ch.Chain(ch.TILE_LOOP, 1, 40, 2, step_work=(1e6, 2e4, 1e3))  # 40 CTAs on 10 SMs: two share each SM
    assert ch.tile_step_time(shared, 10, 1e12, 1e11, 1e10) == pytest.approx(20 * per_cta)
    # a grid of no more CTAs than SMs leaves each CTA its SM's engines
    alone = dataclasses.replace(shared, programs=10)
    assert ch.tile_step_time(alone, 10, 1e12, 1e11, 1e10) == pytest.approx(10 * per_cta)
    # the softmax beside the MMAs and their shared-memory operands, which follow one another, where a neighbour
    # CTA fills them (FlashAttention-2's forward); a lone CTA runs them in series
    side = dataclasses.replace(shared, smem_bytes=1e3, side_overlapped=True)
    assert ch.tile_step_time(side, 10, 1e12, 1e11, 1e10, 1e9) == pytest.approx(
        20 * max(1e6 / 1e12 + 1e3 / 1e9, 2e4 / 1e11 + 1e3 / 1e10))
    lone = dataclasses.replace(side, programs=10)
    assert ch.tile_step_time(lone, 10, 1e12, 1e11, 1e10, 1e9) == pytest.approx(10 * (per_cta + 1e3 / 1e9))


def test_list_schedule_is_the_block_schedulers_refill_in_grid_order():
    # equal programs: whole waves, not Graham's bound (which would add a program's length)
    assert ch.list_schedule((4, 4), 5, 4) == 12.0
    # programs 1, 2, 1, 2 on two slots: the third starts at 1 (ends 2), the fourth at 2 (ends 4)
    assert ch.list_schedule((1, 2), 2, 2) == 4.0
    assert ch.list_schedule((2, 1), 2, 2) == 3.0  # the longest first: the short ones fill in behind
    assert ch.list_schedule((1, 2, 3), 1, 8) == 3.0  # fewer programs than slots: the longest


def test_a_large_grid_adds_its_further_groups_evenly(monkeypatch):
    from ssmbench.analytic import block_schedule as bs

    causal = tuple(2 * (m + 1) for m in range(64))  # one head's query tiles at L = 8192, 128 x 64 tiles
    steady = bs.list_schedule(causal, 5000, 264)  # 320000 programs: 1024 groups simulated, the rest spread
    monkeypatch.setattr(bs, "SIMULATED_PROGRAMS", 10 ** 9)
    bs.list_schedule.cache_clear()
    try:
        assert steady == pytest.approx(bs.list_schedule(causal, 5000, 264), rel=1e-4)
    finally:
        bs.list_schedule.cache_clear()


def test_h200_chain_of_a_named_case_by_hand():
    # B=1, H=32, L=S=2048, P=128 (measured 164.5 us, results/h200/2026-12-02/default): 512 CTAs of 2 (m + 1)
    # steps in grid order (query tile fastest), 264 slots; a step is its MMAs at the mma.sync rate and its
    # 160 KiB of K and V operands through shared memory in series, the softmax beside them
    spec = get_spec("h200-sxm")
    d = {"B": 1, "H": 32, "G": 8, "L": 2048, "S": 2048, "P": 128}
    c = CAUSAL(d, "fwd")
    assert c.smem_bytes == 2 * (2 * 4 + 2) * 64 * 128 and c.side_overlapped
    mma, smem = 625.9e12, 32 * 4 * 1.98e9 * 132
    step = 2 * 132 * max(4 * 128 * 64 * 128 / mma + c.smem_bytes / smem,
                         (128 * 64 + 128) / 3.73e12 + (4 * 128 * 64 + 131 * 128) / 63.71e12)
    steps = ch.list_schedule(tuple(2 * (m + 1) for m in range(16)), 32, 264)
    assert (8704 - 32) / 264 < steps < (8704 - 32) / 264 + 32  # between the fluid and Graham's bound
    e = estimate(Cost(tensor={"bf16": 1.0}, launches=1), spec, chain=c)
    assert e.chain_s == pytest.approx(steps * step, rel=2e-2)
    assert e.chain_label == "tensor"


def test_which_backends_carry_the_chain():
    d = {"B": 1, "H": 32, "G": 8, "L": 2048, "S": 2048, "P": 128}
    assert execution.chain_of("attention_causal", "fa2", d, "fwd", "torch.sdpa.flash") is not None
    assert execution.chain_of("attention_full", "fa2", d, "fwd", "flash_attn.fa2").total_steps == 32 * 16 * 32
    # cuDNN's forward keeps its throughput terms; the memory-efficient forward's loop is its own (chain_memeff.py)
    assert execution.chain_of("attention_causal", "fa2", d, "fwd", "torch.sdpa.cudnn") is None
    own = execution.chain_of("attention_causal", "fa2", d, "fwd", "torch.sdpa.efficient")
    assert own.smem_bytes > 0 and own.programs == 32 * 2048 // 64
    assert execution.serial_engines("attention_causal", "fa2", "torch.sdpa.efficient")


@pytest.mark.parametrize("backend", ["torch.sdpa.flash", "torch.sdpa.efficient"])
def test_a_repeated_scheduled_chain_takes_one_schedule_per_launch(backend):
    # a model's layers launch the kernel back to back (Chain.repeated): the grid-order schedule is paid per launch
    d = {"B": 1, "H": 32, "G": 8, "L": 8192, "S": 8192, "P": 128}
    c = execution.chain_of("attention_causal", "fa2", d, "fwd", backend)
    assert c.group_steps is not None
    one = ch.chain_time(c, 132, 1.0)
    assert ch.chain_time(c.repeated(10), 132, 1.0) == pytest.approx(10 * one, rel=1e-12)
