"""cuDNN's SDPA backward as a tile loop (analytic/chain_cudnn.py): its steps, links and the H100 measurements."""

import json
import math
from pathlib import Path

import pytest
from ssmbench.analytic import chain as ch
from ssmbench.analytic import chain_cudnn as cc
from ssmbench.analytic import execution
from ssmbench.analytic.achievable import TENSOR_DTYPES, AchievableTable, chain_step_time
from ssmbench.analytic.registry import cost
from ssmbench.hwspecs import get_spec

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "results/h100/2026-12-05/cudnn-bwd"
CAUSAL = cc.cudnn_sdpa_chain(True)
FULL = cc.cudnn_sdpa_chain(False)


def test_backward_items_are_key_tiles_over_the_query_tiles_that_see_them():
    d = {"B": 2, "H": 3, "G": 3, "L": 256, "S": 256, "P": 64}
    loop = CAUSAL(d, "bwd")
    n = 256 // 64
    assert loop.programs == 2 * 3 * n and loop.steps == n and loop.programs_per_sm == 1
    assert loop.total_steps == 2 * 3 * n * (n + 1) / 2  # causal: key tile j is seen by query tiles j..n-1
    assert FULL(d, "bwd").total_steps == 2 * 3 * n * n
    assert loop.step_work == (10 * 64 * 64 * 64, 4 * 64 * 64, 64 * 64) and loop.l2_round_trips == 1
    side = loop.then
    assert side.cls == ch.ROW_LOOP and side.programs == 1 and side.memory_phases == 0
    # D = rowsum(dO o O) (dO, O read; D, the fp32 accumulator written) and the conversion (accumulator read, dQ written)
    rows = 2 * 3 * 256
    assert side.row_bytes == rows * 64 * (2 + 2 + 4) + rows * 4 + rows * 64 * (4 + 2)
    assert CAUSAL(d, "fwd") is None and CAUSAL(d, "decode") is None and CAUSAL({**d, "L": 0}, "bwd") is None


def test_forward_backward_call_runs_the_forward_loop_first():
    d = {"B": 1, "H": 4, "G": 4, "L": 512, "S": 512, "P": 128}
    fwd, bwd, side = CAUSAL(d, "fwdbwd").links
    assert fwd.phased and not bwd.phased and fwd.l2_round_trips == 0
    assert fwd.programs == 4 * 512 // 64 and fwd.steps == 512 // 128  # the last query tile sees every key tile
    assert side.cls == ch.ROW_LOOP
    assert CAUSAL(d, "fwdbwd").keys == (ch.L2_LATENCY_KEY,)


def test_step_is_the_engines_in_series_and_one_l2_round_trip():
    spec = get_spec("h200-sxm")
    t = AchievableTable.of([spec])
    loop = CAUSAL({"B": 1, "H": 1, "G": 1, "L": 64, "S": 64, "P": 128}, "bwd")
    sms = float(t.sm_count[0])
    bf16 = TENSOR_DTYPES.index("bf16")
    want = (10 * 64 * 64 * 128 * sms / t.rate_tensor[0, bf16] + 4 * 64 * 64 * sms / t.rate_vector[0]
            + 64 * 64 * sms / t.rate_sfu[0] + t.l2_latency[0])
    assert float(chain_step_time(loop, t)[0]) == pytest.approx(want)
    # phased: the vector and exponential work side by side
    both = ch.tile_step_time(ch.Chain(ch.TILE_LOOP, 1, 1, 1, step_work=(0.0, 2e4, 1e3), phased=True), 10, 1e12,
                             1e11, 1e10)
    assert both == pytest.approx(10 * max(2e4 / 1e11, 1e3 / 1e10))


def _estimate(op, dims, mode, spec):
    c = execution.measured_call(cost(op, dims, impl="fa2", mode=mode, dtype="bf16"), "torch.sdpa.cudnn", op, "fa2",
                                dims, "bf16", mode)
    return execution.estimate_call(c, spec, op, "fa2", dims, "bf16", mode, backend="torch.sdpa.cudnn")


def test_h100_backward_calls_of_long_loops_land_within_ten_percent():
    # the stored H100 run the chain was read against (results/h100/2026-12-05/cudnn-bwd): at L >= 4096 the
    # loops are long and the chain holds; at L <= 2048 the per-item prologue it leaves out shows (module docstring)
    spec = get_spec("h100-sxm")
    cases = [c for f in sorted(RUN.glob("run-*.json")) for c in json.loads(f.read_text())["cases"]
             if c["status"] == "ok" and c["backend"] == "torch.sdpa.cudnn" and c["mode"] == "bwd"]
    assert len(cases) == 10
    for c in cases:
        ratio = _estimate(c["op"], c["dims"], "bwd", spec).time_s / c["time_s"]["median"]
        if c["dims"]["L"] >= 4096:
            assert 0.88 < ratio < 1.1, (c["key"], ratio)
        else:
            assert 0.8 < ratio < 1.0, (c["key"], ratio)


def test_tensor_share_of_the_step_matches_what_ncu_saw_busy():
    # ncu (byte_audit_cudnn_bwd.json): the tensor pipe 39 % busy at P = 64 and 62 % at P = 128 over the loop; the
    # step's GEMMs at the probe's tensor rate are that share of the measured step (the kernel's duration / its
    # steps per SM)
    audit = json.loads((RUN / "byte_audit_cudnn_bwd.json").read_text())
    for case in audit["cases"]:
        d = case["dims"]
        loop = next(k for k in case["measured"]["per_kernel"] if "bprop" in k["name"])
        busy = loop["GPU Speed Of Light Throughput: Compute (SM) Throughput"] / 100
        steps = d["B"] * d["H"] * math.comb(d["L"] // 64 + 1, 2) / 132
        step_s = loop["GPU Speed Of Light Throughput: Duration"] * 1e-9 / steps
        cycles = step_s * loop["GPU Speed Of Light Throughput: SM Frequency"]
        tensor_cycles = 10 * 64 * 64 * d["P"] / 4096  # dense bf16 wgmma: 4096 FLOPs per clock per SM
        assert tensor_cycles / cycles == pytest.approx(busy, abs=0.03)
