"""How a measured block's time is composed from its op calls: the launch queue (``issue_pipeline``), the
timed call's lead (``timed_call_lead``), the calls each block and mode runs with their counts and the
backend they run on, and the measurement-composed oracle of ``scripts/block_gap.py --ops measured``."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from ssmbench.analytic.achievable import (
    AchievableTable,
    host_cost,
    issue_pipeline,
    timed_call_lead,
)
from ssmbench.analytic.execution import call_backward_launches
from ssmbench.analytic.workloads.blocks import (
    block_calls,
    call_backend,
    compose_achievable,
    composed_bound,
    timed_call_extra,
)
from ssmbench.hwspecs import get_spec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import block_oracle  # noqa: E402

INF = float("inf")


def test_issue_pipeline_is_the_launch_queue_recurrence():
    h, g = [3.0, 1.0, 5.0], [2.0, 4.0, 1.0]
    assert issue_pipeline(h, g) == sum(g)  # the host far ahead: the device never waits
    # lead 0: end_0 = 3 + 2 = 5; end_1 = max(4, 5) + 4 = 9; end_2 = max(9, 9) + 1 = 10
    assert issue_pipeline(h, g, 0.0) == 10.0
    assert issue_pipeline([7.0], [2.0], 0.0) == 9.0  # an isolated call: host then device
    # lead 4: end_0 = max(3, 4) + 2 = 6; end_1 = max(4, 6) + 4 = 10; end_2 = max(9, 10) + 1 = 11 -> 11 - 4
    assert issue_pipeline(h, g, 4.0) == 7.0
    for lead in (0.0, 1.0, 4.0, 100.0):
        assert issue_pipeline(h, g, lead) >= max(sum(g), sum(h) - lead)
    with pytest.raises(ValueError, match="2 host times for 1"):
        issue_pipeline([1.0, 2.0], [1.0])


def test_timed_call_lead_is_inf_while_the_host_keeps_ahead_of_flush_and_call():
    assert timed_call_lead(10.0, 20.0, 5.0, 30.0) == INF   # 10 + 5 <= 20 + 30
    assert timed_call_lead(100.0, 20.0, 5.0, 30.0) == 30.0  # host-bound: the call starts behind the flush


H200 = get_spec("h200-sxm")


def _rows(op, dims, mode, impl=None):
    return [(c.label.removeprefix("b."), c.op, c.impl, c.mode, c.count) for c, _ in block_calls(op, dims, impl, mode)]


@pytest.mark.parametrize("b", [1, 2])
def test_every_block_and_mode_lists_its_calls_with_counts(b):
    m1 = {"B": b, "L": 64, "D": 64, "N": 16}
    rows = _rows("block:mamba1", m1, "fwd")
    assert [(r[0], r[4]) for r in rows] == [("in_proj", 1), ("A", 1), ("dt_bias_fp32", 1), ("conv1d", 1)] + (
        [("conv_out_rows", 1)] if b > 1 else []) + [("x_proj", 1), ("bc_contiguous", 2), ("dt_proj", 1), ("scan", 1),
                                                     ("out_proj", 1)]
    # training: the fused function's recomputed conv1d and dt_proj, 4 dB/dC copies and the ddelta copy
    tail = [(r[0], r[3], r[4]) for r in _rows("block:mamba1", m1, "fwdbwd")][-4:]
    assert tail == [("conv1d_recompute", "fwd", 1), ("dt_proj_recompute", "fwd", 1), ("bwd_dbc_copies", "fwd", 4),
                    ("bwd_ddelta_copy", "fwd", 1)]
    assert [r[0] for r in _rows("block:mamba1", m1, "decode")] == ["in_proj", "A", "conv1d", "x_proj", "dt_proj",
                                                                   "scan", "out_proj"]
    m2 = {"B": b, "L": 256, "D": 128, "N": 16, "P": 32, "G": 1}
    assert [r[0] for r in _rows("block:mamba2", m2, "decode")] == ["in_proj", "A", "conv1d", "ssd", "gated_norm",
                                                                   "out_proj"]
    assert [(r[0], r[4]) for r in _rows("block:mamba3", {"B": b, "L": 128, "D": 128, "N": 16, "P": 32}, "fwd")] == [
        ("in_proj", 1), ("prep", 1), ("bc_norm", 2), ("mamba3", 1), ("out_proj", 1)]
    for mode in ("fwd", "fwdbwd", "decode"):  # the eager MLP as its kernels (phases._Builder.eager_gated_mlp)
        parts = [("gate_proj", "linear", "cublas"), ("up_proj", "linear", "cublas"), ("gate", "silu_gate", "torch_eager"),
                 ("down_proj", "linear", "cublas")]
        accumulate = [("bwd_dx_accumulate", "add", "torch_eager", "fwd", 1)] if mode == "fwdbwd" else []
        assert _rows("block:gated_mlp", {"B": b, "L": 8, "D": 64, "F": 128}, mode, "eager") == [
            (*p, mode, 1) for p in parts] + accumulate


def test_the_attention_block_runs_sdpa_on_cudnn_in_every_mode():
    at = {"B": 1, "L": 16, "D": 64, "H": 4, "G": 2, "P": 16, "S": 32}
    for mode in ("fwd", "fwdbwd", "decode"):
        calls = block_calls("block:attention", at, "sdpa", mode)
        att = [c for c, _ in calls if c.op == "attention_causal"]
        assert [c.impl for c in att] == ["fa2"]  # SDPA, also for the decode step (not flash_attn_with_kvcache)
        assert call_backend("block:attention", att[0]) == "torch.sdpa.cudnn"
        rows = composed_bound("block:attention", at, H200, impl="sdpa", mode=mode)["calls"]
        row = next(r for r in rows if r["op"] == "attention_causal")
        assert row["backend"] == "torch.sdpa.cudnn"
        if mode != "decode":  # its host calls on cuDNN's call path (graph replay in decode: no per-call host)
            k = next(k for c, k in calls if c.op == "attention_causal")
            n = sum(float(v) for v in k.host.values())
            table = AchievableTable.of([H200])
            # a forward-backward call's backward kernels also pay the per-launch cost of a graph freed per call
            bwd = call_backward_launches("attention_causal", "fa2", att[0].dim_map(), "bf16", mode)
            assert (mode == "fwdbwd") == (bwd > 0)
            assert n >= 1 and row["host_s"] == pytest.approx(
                n * host_cost(table, "cudnn") + bwd * host_cost(table, "backward_launch"))


def test_composed_achievable_is_the_steady_state_with_the_timed_calls_extra():
    m1 = {"B": 2, "L": 2048, "D": 256, "N": 16}
    table = AchievableTable.of([H200])
    # launch.timed_call - graph_node - dram latency of the H200 spec (4.331 - 1.118 - 0.3515 us)
    extra = timed_call_extra(H200)
    assert extra == pytest.approx(4.331e-6 - 1.118e-6 - 351.5e-9)
    for mode in ("fwd", "fwdbwd", "decode"):
        r = composed_bound("block:mamba1", m1, H200, mode=mode)
        host = [c["host_s"] for c in r["calls"]]
        gpu = [c["gpu_s"] for c in r["calls"]]
        first = {"fwd": 0.0, "fwdbwd": host_cost(table, "autograd"), "decode": host_cost(table, "cuda_graph")}[mode]
        host, gpu = [first] + host, [0.0] + gpu
        ach = r["achievable"]
        assert ach["host_s"] == pytest.approx(sum(host)) and ach["gpu_s"] == pytest.approx(sum(gpu))
        assert ach["time_s"] == pytest.approx(max(sum(host), sum(gpu) + extra))
        assert ach["pipeline_s"] == pytest.approx(issue_pipeline(host, gpu, ach["lead_s"]))
    # no flush: the host starts with no lead whenever it is the slower side
    r = composed_bound("block:mamba1", m1, H200, mode="fwd", flush=(0.0, 0.0))
    assert r["achievable"]["lead_s"] in (0.0, INF)


def test_the_oracle_takes_device_time_from_a_matching_measurement_and_scales_a_near_one():
    dims = {"B": 2, "L": 2048, "D": 4096, "F": 14336}
    case = {"op": "block:gated_mlp", "mode": "fwd", "dtype": "bf16", "dims": dims, "impl": "eager"}
    b = composed_bound("block:gated_mlp", dims, H200, impl="eager", mode="fwd")
    row = b["calls"][0]  # gate_proj: the eager MLP runs as its kernels (phases._Builder.eager_gated_mlp)
    key = ("linear", "cublas", "fwd", "bf16")

    def record(r, name, t):  # a synthetic measurement of one row's op at the row's dims (made-up times)
        return {"op": r["op"], "impl": r["impl"], "mode": "fwd", "dtype": "bf16", "backend": "torch_ref",
                "dims": dict(r["dims"]), "time_s": {"median": t}, "status": "ok", "key": name}

    rec = record(row, "k", 2.5e-3)
    # a device-bound timed sample is device time + the timed call's extra (analytic/timed.py): 2.5 ms - 2.86 us
    extra = timed_call_extra(H200)
    assert block_oracle.oracle_gpu(row, case, {key: [rec]}, H200, math.log(16)) == (pytest.approx(2.5e-3 - extra),
                                                                                     "measured", "k")
    half = dict(rec, dims={**row["dims"], "L": 1024}, time_s={"median": 1.3e-3})
    g, src, _ = block_oracle.oracle_gpu(row, case, {key: [half]}, H200, math.log(16))
    g_half = composed_bound("block:gated_mlp", {**dims, "L": 1024}, H200, impl="eager", mode="fwd")["calls"][0]["gpu_s"]
    assert src == "scaled" and g == pytest.approx((1.3e-3 - extra) * row["gpu_s"] / g_half)
    # too far (ln 2 > 0.5): the model's own device time
    assert block_oracle.oracle_gpu(row, case, {key: [half]}, H200, 0.5)[1] == "model"
    records: dict = {}
    for i, r in enumerate(b["calls"]):
        records.setdefault((r["op"], r["impl"], "fwd", "bf16"), []).append(record(r, f"k{i}", 1e-3 * (i + 1)))
    o = block_oracle.compose(b, case, records, H200, math.log(16))
    assert o["device_share"] == {"measured": 1.0}
    assert o["time_s"] == pytest.approx(compose_achievable(b["calls"], H200, "fwd", "eager", gpu_key="oracle_gpu_s")["time_s"])
