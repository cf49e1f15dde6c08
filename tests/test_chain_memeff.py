"""SDPA's memory-efficient forward as a tile loop (analytic/chain_memeff.py): tiles, shared-memory bytes, steps,
and the stored H200 calls."""

import json
from pathlib import Path

import pytest
from ssmbench.analytic import chain as ch
from ssmbench.analytic import chain_memeff as me
from ssmbench.analytic import execution
from ssmbench.analytic.achievable import TENSOR_DTYPES, AchievableTable, chain_step_time
from ssmbench.analytic.registry import cost
from ssmbench.hwspecs import get_spec

ROOT = Path(__file__).resolve().parents[1]
# the H200 files holding the six causal forward calls of the backend (the default suite's and a fill's)
RUNS = (ROOT / "results/h200/2026-12-02/default/run-20261202T171253.371422Z-714.json",
        ROOT / "results/h200/2026-12-03/fill/call1/run-20261203T210633.771090Z-886.jsonl")
CAUSAL = me.memeff_fwd_chain(True)


def test_dispatch_takes_the_first_kernel_whose_max_head_dim_holds():
    assert me.memeff_fwd_tile(32) == me.memeff_fwd_tile(64) == (64, 64)
    assert me.memeff_fwd_tile(96) == me.memeff_fwd_tile(128) == (64, 128)
    assert me.memeff_fwd_tile(256) == (32, 128)
    assert me.memeff_warps(64, 128) == 8 and me.memeff_warps(64, 64) == 4


def test_shared_memory_bytes_per_step_by_hand():
    # 64 x 128 kernel, head dim 128: 8 warps x 64 elements x (128 + 128) read; Q, K, V (64 + 256 rows of 128) and P
    # (64 x 128) written
    assert me.memeff_fwd_smem_bytes(128, "bf16") == 2 * (8 * 64 * 256 + 320 * 128 + 64 * 128) == 352 * 1024
    # 64 x 64 kernel, head dim 64: 4 warps x 64 x (64 + 64); (64 + 128) x 64 + 64 x 64 written
    assert me.memeff_fwd_smem_bytes(64, "bf16") == 2 * (4 * 64 * 128 + 192 * 64 + 64 * 64) == 96 * 1024


def test_causal_loop_counts_key_tiles_up_to_the_diagonal():
    d = {"B": 1, "H": 32, "G": 32, "L": 2048, "S": 2048, "P": 128}
    loop = CAUSAL(d, "fwd")
    # query tile m of 64 rows sees ceil((m + 1) 64 / 128) key tiles of 128: 2 x (1 + ... + 16) per head
    assert loop.steps == 16 and loop.programs == 32 * 32 and loop.total_steps == 32 * 272
    assert loop.programs_per_sm == 2 and loop.mma_sync and loop.label == "tensor"
    assert me.memeff_fwd_chain(False)(d, "fwd").total_steps == 32 * 32 * 16
    assert CAUSAL({**d, "P": 64}, "fwd").programs_per_sm == 4
    for mode in ("fwdbwd", "bwd", "decode"):
        assert CAUSAL(d, mode) is None
    assert CAUSAL(d, "fwd", "fp32") is None and CAUSAL({**d, "L": 0}, "fwd") is None


def test_step_is_the_mma_sync_work_and_its_shared_memory_bytes_in_series():
    t = AchievableTable.of([get_spec("h200-sxm")])
    loop = CAUSAL({"B": 1, "H": 1, "G": 1, "L": 64, "S": 128, "P": 128}, "fwd")
    share = float(t.sm_count[0])  # one CTA: alone on its SM
    # 264 CTAs on 132 SMs: two share each SM (the launch bounds' two of the 64 x 128 kernel)
    two = CAUSAL({"B": 4, "H": 66, "G": 66, "L": 64, "S": 128, "P": 128}, "fwd")
    assert float(chain_step_time(two, t)[0]) == pytest.approx(2 * float(chain_step_time(loop, t)[0]))
    bf16 = TENSOR_DTYPES.index("bf16")
    want = share * (4 * 64 * 128 * 128 / t.rate_mma_sync[0, bf16] + 352 * 1024 / t.smem_bw[0]
                    + (4 * 64 * 128 + 131 * 64) / t.rate_vector[0] + (64 * 128 + 64) / t.rate_sfu[0])
    assert float(chain_step_time(loop, t)[0]) == pytest.approx(want)
    assert ch.SMEM_BANDWIDTH_KEY in loop.keys


def _stored_forward_calls():
    for path in RUNS:
        text = path.read_text()
        cases = ([json.loads(line) for line in text.splitlines() if line.strip()] if path.suffix == ".jsonl"
                 else json.loads(text)["cases"])
        yield from (c for c in cases if isinstance(c, dict) and c.get("backend") == "torch.sdpa.efficient"
                    and c.get("status") == "ok" and c["mode"] == "fwd")


def test_h200_forward_calls_land_under_their_measurement_within_twenty_five_percent():
    # the chain leaves out the barriers' wait on the slowest warp and the softmax's shared-memory reductions: under
    # at every GPU-paced shape (module docstring); the throughput terms alone were 0.24-0.40x
    spec = get_spec("h200-sxm")
    ratios = {}
    for c in _stored_forward_calls():
        call = execution.measured_call(cost(c["op"], c["dims"], impl="fa2", mode="fwd", dtype="bf16"),
                                       "torch.sdpa.efficient", c["op"], "fa2", c["dims"], "bf16", "fwd")
        est = execution.estimate_call(call, spec, c["op"], "fa2", c["dims"], "bf16", "fwd",
                                      backend="torch.sdpa.efficient")
        ratios[c["key"]] = (est.time_s / c["time_s"]["median"], est.bottleneck)
    assert len(ratios) == 6
    paced = {k: r for k, (r, cls) in ratios.items() if cls != "host/launch"}
    assert len(paced) == 5  # B = 1, L = 512: the call's host time exceeds the loop (0.3x: a host-paced record)
    for key, r in paced.items():
        assert 0.75 < r < 1.0, (key, r)
