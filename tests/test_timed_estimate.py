"""The achievable estimate as measured (analytic/timed.py): the timing loop's flush lead, the short
pipeline of an op's calls, the timed call's fixed device time, and the calibration join's use of a
record's timing settings. Formulas on the hand-built spec of test_achievable (DRAM 1 TB/s, latency
1 us, graph node 1 us, torch_eager 5 us, triton 20 us)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ssmbench.analytic.achievable import estimate
from ssmbench.analytic.cost import Cost
from ssmbench.analytic.timed import as_timed, flush_cost
from ssmbench.hwspecs import get_spec, parse_spec
from test_achievable import GRAPH_NODE, HOST_EAGER, HOST_TRITON, LATENCY
from test_roofline import DRAM_BW, spec_data

REPO = Path(__file__).resolve().parents[1]

FLUSH_BYTES = 20e6  # 2 x the toy's 10 MB L2
TIMED_CALL = 5e-6


def timed_spec(timed_call: bool = True):
    d = spec_data()
    d["memory"]["dram"]["latency"] = {"value": "1 us", "source": "a"}
    d["launch"]["host"] = {"torch_eager": {"value": "5 us", "source": "a"}, "triton": {"value": "20 us", "source": "a"}}
    if timed_call:
        d["launch"]["timed_call"] = {"value": "5 us", "source": "a"}
    return parse_spec(d)


TIMING = {"flush_l2": True, "flush_bytes": FLUSH_BYTES, "cuda_graph": False}


def test_flush_cost_is_one_eager_op_writing_the_buffer_at_dram_bandwidth():
    assert flush_cost(timed_spec(), FLUSH_BYTES) == pytest.approx((HOST_EAGER, FLUSH_BYTES / DRAM_BW))
    assert flush_cost(timed_spec(), 0) == (0.0, 0.0)


def test_a_small_eager_op_is_timed_at_its_device_time_plus_the_timed_call():
    # host 5 us + flush host 5 us <= device (flush 20 us + call): the device never waits
    spec = timed_spec()
    c = Cost(vector=1e3, read={"activations": 1e3}, launches=1, host={"torch_eager": 1})
    e = estimate(c, spec)
    assert e.time_s == pytest.approx(HOST_EAGER)  # steady state: host-bound
    t = as_timed(e, spec, calls=1, head_host_s=0.0, timing=TIMING)
    extra = TIMED_CALL - (GRAPH_NODE + LATENCY)
    assert t["timed_call_extra_s"] == pytest.approx(extra)
    assert t["lead_s"] == float("inf")
    assert t["time_s"] == pytest.approx(e.gpu_s + extra)
    assert t["steady_state_s"] == pytest.approx(e.time_s)
    assert t["bottleneck"] == "latency" and "as measured" in t["label"]


def test_a_host_bound_call_is_timed_at_its_host_time_not_behind_the_flush_lead():
    # 5 Triton launches: host 100 us >> device; the measurements show no flush lead (analytic/timed.py):
    # the sample takes its host time; the lead model's time is kept as a diagnostic
    spec = timed_spec()
    c = Cost(vector=1e3, read={"activations": 1e3}, launches=5, host={"triton": 5})
    e = estimate(c, spec)
    t = as_timed(e, spec, calls=5, head_host_s=0.0, timing=TIMING)
    lead = FLUSH_BYTES / DRAM_BW
    assert t["lead_s"] == pytest.approx(lead)
    g = e.gpu_s / 5
    assert t["time_s"] == pytest.approx(5 * HOST_TRITON)
    # the last call is issued at 5 x 20 us and runs g; the first kernel's extra is hidden by the host
    assert t["pipeline_s"] == pytest.approx(5 * HOST_TRITON + g - lead)
    assert t["bottleneck"] == "host/launch"


def test_a_one_off_host_cost_goes_first_and_no_flush_means_no_lead():
    spec = timed_spec()
    c = Cost(vector=1e3, read={"activations": 1e3}, launches=1, host={"torch_eager": 1, "triton": 2})
    e = estimate(c, spec)
    head = 2 * HOST_TRITON  # e.g. the autograd engine's call: host work that issues no kernel
    t = as_timed(e, spec, calls=1, head_host_s=head, timing={"flush_l2": False, "flush_bytes": 0})
    # no flush: samples back to back through the launch queue take the host work of one sample
    assert t["lead_s"] == 0.0
    assert t["time_s"] == pytest.approx(max(head + HOST_EAGER, t["gpu_s"]))
    # the isolated-call model (host then device) is the diagnostic pipeline time
    assert t["pipeline_s"] == pytest.approx(head + HOST_EAGER + t["gpu_s"])


def test_an_unknown_timed_call_is_named_not_zero():
    spec = timed_spec(timed_call=False)
    e = estimate(Cost(vector=1e3, read={"activations": 1e3}, launches=1, host={"torch_eager": 1}), spec)
    t = as_timed(e, spec, calls=1, head_host_s=0.0, timing=TIMING)
    assert "launch.timed_call" in t["not_modelled"] and t["timed_call_extra_s"] == 0.0


def test_join_compares_the_as_measured_estimate_and_keeps_the_plain_one():
    from ssmbench.calibrate.join import resource_bounds

    spec = get_spec("h200-sxm")
    dims = {"B": 1, "L": 8192, "D": 4096}  # 128 MB moved: device-bound, the timed call's extra shows
    plain = resource_bounds(spec, "silu", "torch_eager", dims, "bf16", "fwd", backend="torch_ref")
    timed = resource_bounds(spec, "silu", "torch_eager", dims, "bf16", "fwd", backend="torch_ref",
                            timing={"flush_l2": True, "flush_bytes": 125829120, "cuda_graph": False})
    assert plain.as_measured is None and plain.achievable_s == plain.achievable["time_s"]
    assert timed.achievable == plain.achievable
    assert timed.achievable_s == timed.as_measured["time_s"] != plain.achievable_s
    # the device runs ahead of the host, the sample is device time with the timed call's extra
    assert timed.as_measured["lead_s"] == float("inf") and timed.as_measured["timed_call_extra_s"] > 0
    assert timed.achievable_s == pytest.approx(timed.as_measured["gpu_s"])


def test_a_backward_pays_its_graph_nodes_and_names_an_uncounted_graph():
    from ssmbench.calibrate.join import resource_bounds

    spec = get_spec("h200-sxm")
    timing = {"flush_l2": True, "flush_bytes": 125829120, "cuda_graph": False}
    b = resource_bounds(spec, "linear", "cublas", {"B": 1, "L": 16, "I": 1024, "O": 2048}, "bf16", "bwd",
                        backend="torch_ref", timing=timing)
    # 4 nodes: the first is the autograd class's one-node graph, 3 more at launch.host.autograd_node
    # (measured on the H200 by the probe of 2026-12-03 evening): charged to the host
    assert "launch.host.autograd_node" not in b.as_measured["not_modelled"]
    from ssmbench.hwspecs.ceilings import ceiling

    node_s = ceiling(spec, "launch.host.autograd_node").value
    data = yaml.safe_load((REPO / "hwspecs" / "specs" / "h200-sxm.yaml").read_text())
    data["measured"] = [m for m in data["measured"] if m["key"] != "launch.host.autograd_node"]
    unknown = resource_bounds(parse_spec(data), "linear", "cublas", {"B": 1, "L": 16, "I": 1024, "O": 2048}, "bf16",
                              "bwd", backend="torch_ref", timing=timing)
    # without the key the nodes are named, not charged
    assert "launch.host.autograd_node" in unknown.as_measured["not_modelled"]
    assert b.as_measured["host_s"] == pytest.approx(unknown.as_measured["host_s"] + 3 * node_s)
    s = resource_bounds(spec, "attention_causal", "fa2", {"B": 1, "L": 256, "S": 256, "H": 8, "G": 8, "P": 64},
                        "bf16", "bwd", backend="torch.sdpa.flash", timing=timing)
    assert "autograd_nodes" in s.as_measured["not_modelled"]
