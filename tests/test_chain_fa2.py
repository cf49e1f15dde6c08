"""FlashAttention-2's forward key-tile loop as a sequential chain (analytic/chain_fa2.py ``fa2_fwd_chain``,
class TILE_LOOP): its grid and steps over small dims, the step time from the engine rates, the
longest-last schedule, the split-KV grid, and which measured backends carry it."""

from __future__ import annotations

import math

import pytest
from ssmbench.analytic import chain as ch
from ssmbench.analytic import chain_fa2 as fa
from ssmbench.analytic import execution
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


def test_a_small_grid_splits_the_key_loop_and_drops_the_chain():
    c = ch.Chain(ch.TILE_LOOP, 8, 24, 2, total_steps=120, step_work=(1.0, 0.0, 0.0), split_grid=24)
    assert float(ch.chain_time(c, 16, 1e-6)) == 0.0  # 24 < 0.8 x 2 x 16
    assert float(ch.chain_time(c, 15, 1e-6)) > 0.0  # 24 = 0.8 x 2 x 15: one split


def test_step_time_is_the_tile_at_the_ctas_share_of_the_sm():
    c = ch.Chain(ch.TILE_LOOP, 1, 1, 2, step_work=(1e6, 2e4, 1e3))
    t = ch.tile_step_time(c, 10, 1e12, 1e11, 1e10)
    assert t == pytest.approx(20 * (1e6 / 1e12 + 2e4 / 1e11 + 1e3 / 1e10))
    with pytest.raises(ValueError, match="step_work"):
        ch.Chain(ch.TILE_LOOP, 1, 1, 2)


def test_h200_chain_of_a_named_case_by_hand():
    # B=1, H=32, L=S=2048, P=128 (measured 164.5 us, results/h200/2026-12-02/default): 512 CTAs of
    # 2 (m + 1) steps, 8704 in all, the longest (32) last, 264 slots
    spec = get_spec("h200-sxm")
    d = {"B": 1, "H": 32, "G": 8, "L": 2048, "S": 2048, "P": 128}
    c = CAUSAL(d, "fwd")
    mma = 625.9e12
    step = 2 * 132 * (4 * 128 * 64 * 128 / mma + (128 * 64 + 128) / 3.73e12 + (4 * 128 * 64 + 131 * 128) / 63.71e12)
    e = estimate(Cost(tensor={"bf16": 1.0}, launches=1), spec, chain=c)
    assert e.chain_s == pytest.approx(((8704 - 32) / 264 + 32) * step, rel=1e-3)
    assert e.bottleneck == "latency"


def test_which_backends_carry_the_chain():
    d = {"B": 1, "H": 32, "G": 8, "L": 2048, "S": 2048, "P": 128}
    assert execution.chain_of("attention_causal", "fa2", d, "fwd", "torch.sdpa.flash") is not None
    assert execution.chain_of("attention_full", "fa2", d, "fwd", "flash_attn.fa2").total_steps == 32 * 16 * 32
    # cuDNN's forward keeps its throughput terms; the memory-efficient forward's loop is its own (chain_memeff.py)
    assert execution.chain_of("attention_causal", "fa2", d, "fwd", "torch.sdpa.cudnn") is None
    own = execution.chain_of("attention_causal", "fa2", d, "fwd", "torch.sdpa.efficient")
    assert own.smem_bytes > 0 and own.programs == 32 * 2048 // 64
    assert execution.serial_engines("attention_causal", "fa2", "torch.sdpa.efficient")
