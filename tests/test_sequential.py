"""Op calls estimated part by part (analytic/sequential.py): mamba-ssm's GatedMLP runs two GEMMs and two
eager elementwise kernels one after another, so its estimate is the sum of theirs, not one overlapped call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ssmbench.analytic import achievable, sequential
from ssmbench.analytic.registry import cost
from ssmbench.calibrate.join import resource_bounds
from ssmbench.hwspecs import get_spec

DIMS = {"B": 16, "L": 2048, "D": 768, "F": 2048}
RESULTS = Path(__file__).resolve().parents[1] / "results" / "h200" / "2026-12-04" / "strided-gate"


def test_parts_are_the_kernels_of_the_merged_gated_mlp():
    assert sequential.parts_of("gated_mlp", "merged_eager", DIMS) == [
        ("linear", "cublas", {"B": 16, "L": 2048, "I": 768, "O": 4096}),
        ("silu_gate", "chunked_eager", {"B": 16, "L": 2048, "D": 2048}),
        ("linear", "cublas", {"B": 16, "L": 2048, "I": 2048, "O": 768})]
    assert sequential.parts_of("gated_mlp", "fused", DIMS) is None
    # the parts' costs add up to the composite's (same kernels, same launches, same FLOPs)
    parts = [cost(o, d, impl=i, mode="fwd") for o, i, d in sequential.parts_of("gated_mlp", "merged_eager", DIMS)]
    whole = cost("gated_mlp", DIMS, impl="merged_eager", mode="fwd")
    assert sum(int(p.launches) for p in parts) == int(whole.launches)
    assert sum(float(p.flops) for p in parts) == pytest.approx(float(whole.flops))


@pytest.mark.parametrize("mode", ["fwd", "fwdbwd"])
def test_composed_estimate_is_the_sum_of_the_parts(mode):
    spec = get_spec("h200-sxm")
    est = sequential.composed(spec, "gated_mlp", "merged_eager", DIMS, "bf16", mode)
    parts = [resource_bounds(spec, o, i, d, "bf16", mode).achievable
             for o, i, d in sequential.parts_of("gated_mlp", "merged_eager", DIMS)]
    # each part measured alone pays its own torch.autograd call in a backward; the composite pays one (its parts'
    # backward kernels pay their per-launch cost of a graph freed per call, execution.as_measured, as each part alone)
    table = achievable.AchievableTable.of([spec])
    swap = achievable.host_cost(table, "autograd")
    assert est["gpu_s"] == pytest.approx(sum(p["gpu_s"] for p in parts))
    merged = (len(parts) - 1) * swap if mode == "fwdbwd" else 0.0
    assert est["host_s"] == pytest.approx(sum(p["host_s"] for p in parts) - merged)
    assert est["time_s"] == pytest.approx(max(est["host_s"], est["gpu_s"]))
    # more than one overlapped call of the summed cost: the GEMMs' tensor time and the gate's memory time add
    one = achievable.estimate(cost("gated_mlp", DIMS, impl="merged_eager", mode=mode), spec)
    assert est["gpu_s"] > 1.3 * one.gpu_s
    # the join uses it for this implementation
    joined = resource_bounds(spec, "gated_mlp", "merged_eager", DIMS, "bf16", mode, backend="torch_ref.merged")
    assert joined.achievable["gpu_s"] == pytest.approx(est["gpu_s"])


def test_composed_estimate_meets_the_stored_measurements():
    """The three op-level GatedMLP cases of 2026-12-04: 35 % under as one call, within 3 % part by part."""
    spec = get_spec("h200-sxm")
    (path,) = RESULTS.glob("run-*.jsonl")
    cases = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    cases = [c for c in cases if c.get("op") == "gated_mlp" and c.get("status") == "ok"]
    assert len(cases) == 3
    for c in cases:
        est = sequential.composed(spec, "gated_mlp", "merged_eager", c["dims"], c["dtype"], c["mode"])
        assert est["time_s"] == pytest.approx(c["time_s"]["median"], rel=0.03), c["key"]
