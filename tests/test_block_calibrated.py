"""Blocks composed with the module's Python (the ``mamba-ssm`` runtime's host term per op call) and from
calibrated op estimates (``scripts/block_calibrated.py``), each against a hand derivation."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ssmbench.analytic.achievable import AchievableTable, host_cost
from ssmbench.analytic.workloads.blocks import (
    block_runtime,
    compose_achievable,
    composed_bound,
    timed_call_extra,
)
from ssmbench.calibrate.estimate import estimate_detail
from ssmbench.calibrate.profile import read_profile
from ssmbench.hwspecs import get_spec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import block_calibrated

H200 = get_spec("h200-sxm")
PROFILE = ROOT / "results/h200/2026-12-02/calibration/profile.json"
SSM_MODULE_S = 76.52e-6  # launch.host.ssm_module of the H200 spec (calibrate/runtime_host.py, decode records)
# the inference forward's classes (calibrate/runtime_host.block_rows, the standalone block cases)
SSM_FORWARD_S = {"mamba1": 32.8e-6, "mamba2": 52.48e-6}
# per block mode, the module class a mamba-ssm block's op call pays (runtime.FORWARD_PHASES: prefill only)
MODULE_S = {"fwd": SSM_FORWARD_S["mamba1"], "fwdbwd": SSM_MODULE_S}


def test_the_spec_value_the_hand_derivations_use():
    table = AchievableTable.of([H200])
    assert host_cost(table, "ssm_module") == pytest.approx(SSM_MODULE_S)
    assert host_cost(table, "ssm_forward") == pytest.approx(SSM_FORWARD_S["mamba1"])
    assert host_cost(table, "ssm_forward_mamba2") == pytest.approx(SSM_FORWARD_S["mamba2"])


@pytest.mark.parametrize("mode", ["fwd", "fwdbwd"])
def test_mamba_ssm_blocks_pay_the_modules_python_per_op_call(mode):
    """Mamba-1 fwd at B = 1 runs 10 op calls (in_proj, A, dt_bias cast, conv1d, x_proj, 2 B/C copies, dt_proj,
    scan, out_proj): 10 x the module's Python per op call on top of the ops' own host classes (the forward's
    ssm_forward, 32.8 us; a train step's ssm_module, 76.52 us)."""
    dims = {"B": 1, "L": 64, "D": 64, "N": 16}
    r = composed_bound("block:mamba1", dims, H200, mode=mode)
    for c in r["calls"]:
        assert c["host_module_s"] == pytest.approx(c["count"] * MODULE_S[mode])
        assert c["host_s"] == pytest.approx(c["host_ops_s"] + c["host_module_s"])
    calls = sum(c["count"] for c in r["calls"])
    if mode == "fwd":
        assert calls == 10
    ops_only = composed_bound("block:mamba1", dims, H200, mode=mode, module_runtime=False)
    assert [c["host_s"] for c in ops_only["calls"]] == pytest.approx([c["host_ops_s"] for c in r["calls"]])
    assert r["achievable"]["host_s"] == pytest.approx(ops_only["achievable"]["host_s"] + calls * MODULE_S[mode])
    # host-bound at this size: the block takes its host time
    assert r["achievable"]["time_s"] == pytest.approx(r["achievable"]["host_s"])
    assert r["achievable_ops_host"]["time_s"] == pytest.approx(ops_only["achievable"]["time_s"])


def test_plain_torch_blocks_and_graph_replays_pay_no_module_python():
    assert block_runtime("block:mamba2").name == "mamba-ssm" and block_runtime("block:attention") is None
    at = {"B": 1, "L": 16, "D": 64, "H": 4, "G": 2, "P": 16, "S": 32}
    for op, dims, impl in (("block:attention", at, "sdpa"), ("block:gated_mlp", {"B": 1, "L": 8, "D": 64, "F": 128}, "eager")):
        r = composed_bound(op, dims, H200, impl=impl, mode="fwd")
        assert all(c["host_module_s"] == 0 for c in r["calls"]) and r["achievable_ops_host"] is None
    r = composed_bound("block:mamba2", {"B": 1, "D": 128, "N": 16, "P": 32, "G": 1}, H200, mode="decode")
    assert all(c["host_s"] == 0 and c["host_module_s"] == 0 for c in r["calls"])
    assert r["achievable"]["host_s"] == pytest.approx(host_cost(AchievableTable.of([H200]), "cuda_graph"))


@pytest.fixture(scope="module")
def profile():
    return read_profile(PROFILE)


def test_a_device_bound_call_takes_its_calibrated_time_less_the_timed_calls_extra(profile):
    dims = {"B": 2, "L": 2048, "D": 4096, "F": 8192}  # every kernel inside its group's fitted shapes
    case = {"op": "block:gated_mlp", "mode": "fwd", "dtype": "bf16", "dims": dims}
    b = composed_bound("block:gated_mlp", dims, H200, impl="eager", mode="fwd")
    # the eager MLP runs as its kernels (phases._Builder.eager_gated_mlp): gate_proj, up_proj, the gate, down_proj
    assert [(c["op"], c["impl"]) for c in b["calls"]] == [("linear", "cublas")] * 2 + [("silu_gate", "torch_eager"),
                                                                                      ("linear", "cublas")]
    row = b["calls"][0]  # gate_proj
    d = estimate_detail(profile, "linear", "cublas", row["dims"], "bf16", "fwd", spec=H200)
    assert not d["extrapolated"]
    g, src, group = block_calibrated.calibrated_gpu(row, case, profile, H200)
    assert src == "calibrated" and group == d["group"]
    assert g == pytest.approx((d["estimate_s"] - timed_call_extra(H200)) * row["count"])
    k = block_calibrated.compose(b, case, profile, H200)
    assert k["device_share"] == {"calibrated": 1.0}
    assert k["time_s"] == pytest.approx(compose_achievable(b["calls"], H200, "fwd", "eager",
                                                           gpu_key="calibrated_gpu_s")["time_s"])


def test_extrapolated_host_bound_and_uncalibrated_calls_keep_the_models_device_time(profile):
    # Mamba-2 decode at D = 768: the conv's E = 1792 lies below the causal_conv1d_update group's E = 5376..10240;
    # the Triton gated norm (implementation "fused") has no group of its own
    dims = {"B": 1, "D": 768, "N": 128, "P": 64, "G": 1}
    case = {"op": "block:mamba2", "mode": "decode", "dtype": "bf16", "dims": dims}
    rows = {r["label"]: r for r in composed_bound("block:mamba2", dims, H200, mode="decode")["calls"]}
    for label, source in (("conv1d", "model (calibrated group extrapolated)"), ("gated_norm", "model (not calibrated)")):
        g, src, _ = block_calibrated.calibrated_gpu(rows[label], case, profile, H200)
        assert (g, src) == (rows[label]["gpu_s"], source)
    # SSD at L = 2048, H = 24 (inside its group's shapes): the standalone call is host-bound (5 autotuned Triton
    # launches, 535 us of host against ~20 us of device), its calibrated time (~520 us) says nothing of the device
    m2 = {"B": 1, "L": 2048, "D": 768, "N": 128, "P": 64, "G": 1}
    row = next(r for r in composed_bound("block:mamba2", m2, H200, mode="fwd")["calls"] if r["op"] == "ssd")
    g, src, _ = block_calibrated.calibrated_gpu(row, {**case, "mode": "fwd", "dims": m2}, profile, H200)
    assert (g, src) == (row["gpu_s"], "model (calibrated call host-bound)")


def test_the_calibration_join_records_a_blocks_composed_estimate():
    """calibrate/join.resource_bounds of a block case: the composition's host and device sums (the plain
    estimate's steady state and, as measured, its time with the timed call's extra), and the calibration's
    achievable terms reproduce the composed estimate with every parameter at 1."""
    from ssmbench.analytic.workloads.blocks import composed_estimate
    from ssmbench.calibrate.join import resource_bounds
    from ssmbench.calibrate.models import Features

    dims = {"B": 1, "L": 2048, "D": 768, "N": 128, "P": 64, "G": 1}
    timing = {"flush_l2": True, "flush_bytes": 2 * 60 * 2**20, "cuda_graph": False}
    b = resource_bounds(H200, "block:mamba2", "mem_eff_path", dims, "bf16", "fwd", backend="mamba_ssm.Mamba2",
                        timing=timing)
    comp = composed_bound("block:mamba2", dims, H200, mode="fwd")
    a = comp["achievable"]
    assert b.achievable["host_s"] == pytest.approx(a["host_s"]) and b.achievable["gpu_s"] == pytest.approx(a["gpu_s"])
    assert b.achievable["time_s"] == pytest.approx(max(a["host_s"], a["gpu_s"]))
    assert b.as_measured["time_s"] == pytest.approx(a["time_s"])
    for r in ("dram", "tensor"):
        assert b.achievable["times_s"][r] == pytest.approx(sum(c["times_s"][r] for c in comp["calls"]))
    assert b.achievable["fixed_s"] == pytest.approx(a["gpu_s"] - max(b.achievable["times_s"].values()))
    assert Features.from_bounds([b]).achievable_time()[0] == pytest.approx(b.achievable["time_s"])
    plain, timed = composed_estimate("block:mamba2", dims, H200, mode="fwd")
    assert plain == b.achievable and timed["timed_call_extra_s"] == pytest.approx(timed_call_extra(H200))
    # host-bound: 6 op calls x 52.48 us of Mamba2's forward Python on top of the ops' host classes (SSD's 5
    # autotuned launches)
    assert plain["bottleneck"] == "host/launch"
    assert plain["host_s"] == pytest.approx(sum(c["host_ops_s"] for c in comp["calls"]) + 6 * SSM_FORWARD_S["mamba2"])
