"""The achievable-time model (analytic/achievable.py): each term as a formula on a hand-built spec,
the bottleneck classes, TF32 routing, L2 residency, unknown parameters, and the execution traits
every registered implementation must have."""

from __future__ import annotations

import numpy as np
import pytest
from ssmbench.analytic import execution
from ssmbench.analytic.achievable import AchievableTable, achievable_work, estimate, host_cost
from ssmbench.analytic.cost import Cost
from ssmbench.analytic.registry import all_ops, cost
from ssmbench.analytic.roofline import project, work_array
from ssmbench.hwspecs import get_spec, load_all, parse_spec

from test_roofline import DRAM_BW, GRAPH_NODE, L2_BW, SFU, TENSOR_BF16, VECTOR, spec_data

LATENCY = 1e-6
HOST_EAGER = 5e-6
HOST_TRITON = 20e-6
TF32 = 50e12


def toy_spec(graph_host=False, **over):
    d = spec_data(**over)
    d["memory"]["dram"]["latency"] = {"value": "1 us", "source": "a"}
    d["launch"]["host"] = {"torch_eager": {"value": "5 us", "source": "a"}, "triton": {"value": "20 us", "source": "a"}}
    if graph_host:
        d["launch"]["host"]["cuda_graph"] = {"value": "4 us", "source": "a"}
    d["compute"]["tensor"]["tf32"] = {"value": "50 TFLOP/s", "source": "a"}
    return parse_spec(d)


@pytest.fixture
def toy():
    return toy_spec()


def test_large_work_is_bound_by_its_engine_plus_fixed_terms(toy):
    c = Cost(tensor={"bf16": 2e12}, read={"weights": 1e9}, launches=2, host={"torch_eager": 2})
    e = estimate(c, toy)
    t_tensor = 2e12 / TENSOR_BF16
    assert e.times_s["tensor"] == pytest.approx(t_tensor)
    assert e.times_s["dram"] == pytest.approx(2 * LATENCY + 1e9 / DRAM_BW)
    assert e.gpu_s == pytest.approx(2 * GRAPH_NODE + t_tensor)
    assert e.host_s == pytest.approx(2 * HOST_EAGER)
    assert e.time_s == pytest.approx(e.gpu_s)
    assert e.bottleneck == "tensor"
    assert e.label == "achievable estimate"


def test_tiny_work_is_host_bound_and_graph_replay_removes_the_host(toy):
    c = Cost(vector=1e3, read={"activations": 1e3}, launches=3, host={"triton": 3})
    e = estimate(c, toy)
    assert e.host_s == pytest.approx(3 * HOST_TRITON)
    assert e.time_s == pytest.approx(3 * HOST_TRITON)
    assert e.bottleneck == "host/launch"
    g = estimate(c, toy, launch="graph")  # the toy spec knows no cuda_graph host cost: named, not zero-claimed
    assert g.host_s == 0 and g.bottleneck == "latency" and "launch.host.cuda_graph" in g.not_modelled
    assert g.time_s == pytest.approx(3 * GRAPH_NODE + 3 * LATENCY + 1e3 / DRAM_BW)


def test_fp32_matmul_moves_to_tf32_only_where_the_implementation_uses_it(toy):
    c = Cost(tensor={"fp32": 1e12}, launches=1)
    assert estimate(c, toy).times_s["vector"] == pytest.approx(1e12 / VECTOR)
    t = estimate(c, toy, tf32=True)
    assert t.times_s["tensor"] == pytest.approx(1e12 / TF32) and t.times_s["vector"] == 0


def test_intermediates_that_fit_in_l2_cross_l2_not_dram(toy):
    small = Cost(read={"activations": 1e6}, write={"activations": 1e6}, extra_read={"intermediates": 1e6},
                 extra_write={"intermediates": 1e6}, launches=2)
    e = estimate(small, toy)
    assert e.l2_bytes == pytest.approx(2e6) and e.dram_bytes == pytest.approx(2e6)
    assert e.times_s["l2"] == pytest.approx(2e6 / L2_BW)
    big = Cost(read={"activations": 1e9}, extra_read={"intermediates": 1e9}, launches=1)
    assert estimate(big, toy).l2_bytes == 0  # one kernel's traffic is far beyond the 10 MB L2


def test_l2_serves_a_kernel_only_within_half_of_one_partition(toy):
    # toy L2: 10 MB in two partitions; a kernel's traffic is cache-served up to a quarter, 2.5 MB.
    # 4 MB per kernel (2 MB compulsory + 2 MB intermediates over one launch) fits half the cache but
    # not half of one partition: every byte crosses DRAM, as the H200's 4M-element eager chains do.
    mid = Cost(read={"activations": 1e6}, write={"activations": 1e6}, extra_read={"intermediates": 1e6},
               extra_write={"intermediates": 1e6}, launches=1)
    e = estimate(mid, toy)
    assert e.l2_bytes == 0 and e.dram_bytes == pytest.approx(4e6)
    # the same bytes over two launches: 2 MB per kernel, under 2.5 MB, so the intermediates are L2's
    two = Cost(read={"activations": 1e6}, write={"activations": 1e6}, extra_read={"intermediates": 1e6},
               extra_write={"intermediates": 1e6}, launches=2)
    assert estimate(two, toy).l2_bytes == pytest.approx(2e6)


def test_unknown_parameters_give_no_term_and_are_named():
    spec = parse_spec(spec_data())  # no latency, no host costs, no tf32
    c = Cost(vector=1e9, read={"activations": 1e9}, launches=1, host={"torch_eager": 1})
    e = estimate(c, spec)
    assert "memory.dram.latency" in e.not_modelled and "launch.host.torch_eager" in e.not_modelled
    assert "launch.host.triton" not in e.not_modelled  # not used by this cost
    assert e.host_s == 0 and e.times_s["dram"] == pytest.approx(1e9 / DRAM_BW)


def test_achievable_is_never_below_the_compulsory_datasheet_bound(toy):
    for c in (Cost(tensor={"bf16": 1e9}, vector=1e8, transcendental=1e7, read={"activations": 1e8},
                   extra_read={"intermediates": 1e6}, launches=5, host={"torch_eager": 5}),
              Cost(transcendental=1e12, read={"activations": 1e3}, launches=1)):
        b = project(c, toy, prefer="datasheet", bytes_basis="compulsory")
        assert estimate(c, toy).time_s >= b.time_s


def test_vectorized_form_agrees_with_the_one_op_form(toy):
    sizes = np.array([1e3, 1e6, 1e9])
    c = Cost(tensor={"bf16": 100 * sizes}, read={"activations": sizes}, launches=np.array([1.0, 2.0, 3.0]),
             host={"torch_eager": np.array([1.0, 2.0, 3.0])})
    a = achievable_work(work_array(c), AchievableTable.of([toy]))
    for i, s in enumerate(sizes):
        one = Cost(tensor={"bf16": 100 * s}, read={"activations": s}, launches=i + 1, host={"torch_eager": i + 1})
        e = estimate(one, toy)
        assert a.time[0, i] == pytest.approx(e.time_s)
        assert a.bottleneck_names()[0, i] == e.bottleneck


def test_every_implementation_has_execution_traits_and_host_calls():
    for op in all_ops().values():
        for impl in op.impls:
            t = execution.traits(op.name, impl.name)
            assert t.host_class in execution.HOST_CLASSES


def test_every_rule_issues_one_host_call_per_launch():
    """A composite that sums parts of several software paths (GEMMs and eager elementwise kernels)
    states its host calls by class; none may drop a part's calls (the MLPs once charged only their
    cuBLAS GEMMs). Every launch of every rule is one host call of some class."""
    import sympy as sp
    from ssmbench.analytic.registry import symbolic_cost

    for op in all_ops().values():
        for impl in op.impls:
            for mode in impl.modes:
                c = symbolic_cost(op.name, impl.name, mode, "bf16")
                assert sp.simplify(sum(c.host.values(), 0) - c.launches) == 0, (op.name, impl.name, mode, c.host)


def test_registry_fills_host_calls_from_the_traits():
    c = cost("linear", {"B": 1, "L": 16, "I": 1024, "O": 2048}, impl="cublas")
    assert c.host == {"cublas": c.launches}
    dims = {"B": 1, "L": 1024, "H": 8, "P": 64, "N": 64, "G": 1, "C": 256}
    s = cost("ssd", dims, impl="chunked")
    # the forward's launchers are the chunked-SSD library's own class (measured on that call)
    assert set(s.host) == {"triton_autotune_ssd"} and float(s.host["triton_autotune_ssd"]) == float(s.launches) == 5
    b = cost("ssd", dims, impl="chunked", mode="bwd")
    assert set(b.host) == {"triton_autotune"} and float(b.host["triton_autotune"]) == float(b.launches)
    # a train step's forward and backward launches each keep their pass's class
    t = cost("ssd", dims, impl="chunked", mode="fwdbwd")
    assert t.host == {"triton_autotune_ssd": s.launches, "triton_autotune": b.launches}
    d = cost("ssd", {"B": 1, "H": 8, "P": 64, "N": 64, "G": 1}, impl="chunked", mode="decode")
    assert set(d.host) == {"triton"}  # selective_state_update is not autotuned


def test_library_host_class_falls_back_to_its_general_class():
    """Where a spec does not know the chunked-SSD launchers' own host cost, the autotuned class's value
    stands in (and the key is not named as not modelled); where it knows it, its own value is used."""
    from ssmbench.analytic.achievable import AchievableTable, host_cost
    from ssmbench.hwspecs import get_spec

    h200 = get_spec("h200-sxm")
    t = AchievableTable.of([h200])
    assert host_cost(t, "triton_autotune_ssd") == pytest.approx(168e-6)
    assert host_cost(t, "triton_autotune") == pytest.approx(107e-6)
    asic = get_spec("ssm-sram-asic")  # knows triton_autotune (a design assumption), not the SSD class
    a = AchievableTable.of([asic])
    assert host_cost(a, "triton_autotune_ssd") == host_cost(a, "triton_autotune") > 0
    assert "launch.host.triton_autotune_ssd" not in a.missing[0]


def test_a_forward_backward_call_pays_the_train_steps_cost_per_backward_kernel():
    """A fwdbwd call records and frees its graph as a train step does: launch.host.backward_launch per backward
    kernel (its launches beyond the forward's) in place of the retained graph's per-node cost; a bwd call (a
    retained graph) keeps the per-node cost; a graph replay pays neither."""
    from ssmbench.calibrate.join import resource_bounds

    dims = {"B": 1, "L": 512, "I": 2048, "O": 8192}
    assert execution.call_backward_launches("linear", "cublas", dims, "bf16", "fwdbwd") == 2  # dX and dW GEMMs
    assert execution.call_backward_launches("linear", "cublas", dims, "bf16", "bwd") == 0
    assert execution.call_backward_launches("block:attention", "sdpa", {}, "bf16", "fwdbwd") == 0  # composed
    c = Cost(launches=3, host={"cublas": 3})
    both = execution.as_measured(c, None, "fwdbwd", "linear", "cublas", bwd_launches=2)
    assert both.host == {"cublas": 3, "autograd": 1, "backward_launch": 2}
    retained = execution.as_measured(c, None, "bwd", "linear", "cublas")
    assert retained.host == {"cublas": 3, "autograd": 1, "autograd_node": 3}  # 4 nodes: the first is the call's
    h200 = get_spec("h200-sxm")
    t = AchievableTable.of([h200])
    eager = resource_bounds(h200, "linear", "cublas", dims, "bf16", "fwdbwd", backend="torch_ref").achievable
    assert eager["host_s"] == pytest.approx(3 * host_cost(t, "cublas") + host_cost(t, "autograd")
                                            + 2 * host_cost(t, "backward_launch"))
    graph = resource_bounds(h200, "linear", "cublas", dims, "bf16", "fwdbwd", backend="torch_ref",
                            launch="graph").achievable
    assert graph["host_s"] == pytest.approx(host_cost(t, "cuda_graph"))


def test_measured_backend_overrides_the_host_class():
    c = Cost(launches=1, host={"torch_eager": 1})
    assert execution.as_measured(c, "torch.sdpa.cudnn").host == {"cudnn": 1}
    assert execution.as_measured(c, "torch.sdpa.flash").host == {"torch_eager": 1}
    assert execution.as_measured(c, "torch.sdpa.flash", "bwd").host == {"torch_eager": 1, "autograd": 1}
    assert execution.as_measured(c, None, "decode").host == {"torch_eager": 1}
    codes = execution.ENGINE_CODES
    assert execution.serial_engines("attention_causal", "fa2", "torch.sdpa.flash") == codes["serial"]
    assert execution.serial_engines("attention_causal", "fa2", "torch.sdpa.cudnn") == codes["phased"]
    assert execution.serial_engines("attention_causal", "fa3") == codes["overlap"]


def test_serial_engines_add_their_times(toy):
    c = Cost(tensor={"bf16": 1e12}, transcendental=5e9, launches=1)
    over, ser = estimate(c, toy), estimate(c, toy, serial=True)
    assert over.gpu_s == pytest.approx(GRAPH_NODE + 1e12 / TENSOR_BF16)
    assert ser.gpu_s == pytest.approx(GRAPH_NODE + 1e12 / TENSOR_BF16 + 5e9 / SFU)


def test_phased_engines_add_the_tensor_phase_to_the_larger_of_the_others(toy):
    """cuDNN's attention (engines "phased"): the GEMMs, then a softmax phase whose exponentials and FMAs run
    side by side on their own pipes."""
    from ssmbench.analytic.execution import ENGINE_CODES

    c = Cost(tensor={"bf16": 1e12}, vector=2e11, transcendental=5e9, launches=1)
    phased = estimate(c, toy, serial=ENGINE_CODES["phased"])
    t, v, s = 1e12 / TENSOR_BF16, 2e11 / VECTOR, 5e9 / SFU
    assert phased.gpu_s == pytest.approx(GRAPH_NODE + t + max(v, s))
    assert estimate(c, toy, serial=True).gpu_s == pytest.approx(GRAPH_NODE + t + v + s)


def test_bad_host_class_is_named():
    with pytest.raises(ValueError, match="unknown backend class"):
        Cost(host={"cuda_graphs": 1})


def test_every_builtin_spec_gives_an_estimate_or_names_what_is_missing():
    c = cost("linear", {"B": 1, "L": 16, "I": 1024, "O": 2048}, impl="cublas")
    for spec in load_all().values():
        e = estimate(c, spec)
        assert e.time_s > 0
        for key, why in e.not_modelled.items():
            assert why, key


def test_h200_spec_lists_what_it_knows():
    e = estimate(cost("linear", {"B": 1, "L": 16, "I": 1024, "O": 2048}, impl="cublas"), get_spec("h200-sxm"))
    assert e.spec_id == "h200-sxm" and e.time_s > 0


def test_state_kept_on_chip_leaves_dram_in_the_achievable_estimate():
    import dataclasses

    from ssmbench.analytic.roofline import SpecTable
    from ssmbench.analytic.workloads.evaluate import analyze
    from ssmbench.analytic.workloads.models import get_model
    from ssmbench.analytic.workloads.report import achievable_rows

    spec = get_spec("ssm-sram-asic")
    res = analyze(get_model("mamba2-2.7b"), "decode", SpecTable.of([spec]), [4], [4096.0], keep_calls=True)
    assert bool(res.residency[0].resident[0, 0])
    on_chip = achievable_rows(res, spec, [{} for _ in res.calls.calls])
    off_chip = achievable_rows(dataclasses.replace(res, residency=[]), spec, [{} for _ in res.calls.calls])
    assert on_chip["gpu_s"] < off_chip["gpu_s"]


def test_a_graph_replay_pays_one_host_launch_per_call():
    c = Cost(vector=1e3, read={"activations": 1e3}, launches=30, host={"triton": 30})
    g = estimate(c, toy_spec(graph_host=True), launch="graph")
    assert g.host_s == pytest.approx(4e-6)
    assert g.gpu_s == pytest.approx(30 * GRAPH_NODE + max(1e3 / VECTOR, 30 * LATENCY + 1e3 / DRAM_BW))


def test_targets_script_prints_labelled_figures_and_rejects_a_bad_gap_file(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    script = root / "scripts" / "model_targets.py"
    r = subprocess.run([sys.executable, str(script)], cwd=root, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "[achievable estimate] median |err|" in r.stdout and "[calibrated estimate, leave-shape-out]" in r.stdout
    bad = tmp_path / "gap.json"
    bad.write_text("{}")
    r = subprocess.run([sys.executable, str(script), "--gap", str(bad)], cwd=root, capture_output=True, text=True)
    assert r.returncode == 2 and "not a gap report" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, str(script), "--gap", str(tmp_path / "none.json")], cwd=root,
                       capture_output=True, text=True)
    assert r.returncode == 2 and "no gap report" in r.stderr


def test_tail_tables_count_the_cases_beyond_the_p90_per_family_and_group():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import model_tail

    # 9 cases: achievable errors 10, 20, ..., 90 % (estimate too fast), the last two in family "b"
    cases = [{"key": f"op/x/be/bf16/fwd/L={i}", "family": "b" if i >= 7 else "a", "group": "g-b" if i >= 7 else "g-a",
              "measured_s": 1.0, "achievable_s": 1.0 - 0.1 * (i + 1), "achievable_ape_pct": 10.0 * (i + 1),
              "achievable_bottleneck": "dram"} for i in range(9)]
    lines = model_tail.tail_tables({"cases": cases})
    assert lines[0].startswith("[achievable estimate] 9 cases: median |err| 50.0 %, p90 82.0 %")
    fam_b = next(x for x in lines if x.strip().startswith("b "))
    assert "n=   2" in fam_b and "tail   1" in fam_b and ">25 %   2" in fam_b
    assert any("1/  2" in x and "g-b" in x for x in lines)
    assert not any("calibrated" in x for x in lines)  # no held-out errors in these cases


def test_ssd_launcher_host_cost_is_the_percall_measurement():
    """launch.host.triton_autotune_ssd is the measured host time per call of mamba_chunk_scan_combined
    (scripts/percall_split.py, back to back) per Triton kernel, median of its shapes."""
    import json
    import statistics
    from pathlib import Path

    from ssmbench.hwspecs import get_spec
    from ssmbench.hwspecs.units import parse

    path = Path(__file__).resolve().parents[1] / "results/h200/2026-12-03/achievable/call2/percall/percall_split_1.json"
    rows = [r for r in json.loads(path.read_text())["rows"] if r["label"].startswith("ssd_chunked")]
    assert len(rows) == 2 and all(len(r["kernels"]) == 5 for r in rows)  # five Triton kernels, no eager ones
    per_kernel = statistics.median(r["host_b2b_s"] / len(r["kernels"]) for r in rows)
    m = next(m for m in get_spec("h200-sxm").measured if m.key == "launch.host.triton_autotune_ssd")
    assert parse(m.value, "time") == pytest.approx(per_kernel, rel=5e-3)
