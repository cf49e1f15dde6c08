"""The probe's achievable-time measurements (measure/_probe_achievable.py): the CPU-side arithmetic
(fits, per-step latency, the L2 knee, the host-time loop, the pointer chain), the spec entries they
make, failures listed while the others run, and the probe file's schema. The measurements themselves
run on CUDA (gpu marker)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("torch")

from ssmbench.measure import _probe_achievable as ach  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def test_host_per_call_divides_each_batch_by_its_calls_and_syncs_outside_the_clock():
    ticks = iter(range(0, 10**12, 1000))  # every clock read advances 1000 ns
    events = []
    clock = lambda: (events.append("clock"), next(ticks))[1]  # noqa: E731
    out = ach.host_per_call(lambda: events.append("call"), n=4, repeats=3, sync=lambda: events.append("sync"),
                            clock=clock)
    assert out == pytest.approx([1000e-9 / 4] * 3)
    assert events[:7] == ["sync", "clock", "call", "call", "call", "call", "clock"]
    assert events.count("call") == 12 and events[-1] == "sync"
    with pytest.raises(ValueError):
        ach.host_per_call(lambda: None, n=0, repeats=1, sync=lambda: None)


def test_fit_recovers_a_fixed_term_and_a_bandwidth():
    rng = np.random.default_rng(0)
    b = np.array([8e3 * 4**k for k in range(10)])
    t = (3.0e-6 + b / 3.2e12) * (1 + 0.01 * rng.standard_normal(b.size))
    fit = ach.fit_fixed_plus_rate(b, t)
    assert fit["t0_s"] == pytest.approx(3.0e-6, rel=0.03)
    assert fit["bandwidth"] == pytest.approx(3.2e12, rel=0.03)
    assert fit["max_rel_residual"] < 0.05 and fit["n"] == 10


@pytest.mark.parametrize("b,t,match", [
    ([1e6, 1e6], [1e-5, 1.1e-5], "two distinct sizes"),
    ([1e3, 1e6], [0.0, 1e-5], "positive"),
    ([1e3, 1e6, 1e9], [1e-3, 1e-4, 1e-5], "do not grow"),
    ([1e3, 1e6], [1e-5], "equal-length"),
])
def test_fit_refuses_what_it_cannot_fit(b, t, match):
    with pytest.raises(ValueError, match=match):
        ach.fit_fixed_plus_rate(b, t)


def test_per_step_removes_the_fixed_part():
    fixed, lat = 7e-6, 650e-9
    assert ach.per_step(fixed + 4096 * lat, fixed + 8192 * lat, 4096, 8192) == pytest.approx(lat)
    with pytest.raises(ValueError, match="longer"):
        ach.per_step(1.0, 2.0, 8192, 4096)
    with pytest.raises(ValueError, match="does not follow"):
        ach.per_step(2e-3, 2e-3, 4096, 8192)


def test_knee_finds_the_step_from_cache_to_memory():
    mib = [1, 4, 16, 32, 48, 56, 64, 128, 512]
    bw = [9e12, 11e12, 11.5e12, 11e12, 10e12, 6e12, 4.2e12, 4.0e12, 3.9e12]
    k = ach.knee([m * 2**20 for m in mib], bw)
    assert (k["last_above"], k["first_below"]) == (48 * 2**20, 56 * 2**20)
    assert k["plateau"] == 11.5e12 and k["floor"] == 3.9e12
    assert ach.knee(mib, [4e12] * len(mib)) is None  # no cache plateau: no knee
    shuffled = ach.knee([m * 2**20 for m in reversed(mib)], list(reversed(bw)))
    assert shuffled == k


def test_knee_plateau_is_the_median_up_to_a_footprint():
    # small footprints served faster than the rest of the cache (as on the H200: 12 TB/s at 1 MiB, 8-9
    # at 8-64 MiB) must not put the knee inside the cache
    mib = [1, 2, 4, 8, 16, 32, 40, 48, 64, 80, 96, 128, 512]
    bw = [12e12, 11.3e12, 9.2e12, 8.9e12, 8.8e12, 8.3e12, 7.8e12, 8.2e12, 7.5e12, 5.9e12, 5.3e12, 4.9e12, 4.5e12]
    f = [m * 2**20 for m in mib]
    assert ach.knee(f, bw)["first_below"] == 40 * 2**20  # plateau = the largest: 12 TB/s
    k = ach.knee(f, bw, plateau_upto=16 * 2**20)
    assert (k["last_above"], k["first_below"]) == (64 * 2**20, 80 * 2**20)
    assert k["plateau"] == 9.2e12


def test_chain_is_one_cycle_through_every_slot():
    import torch

    buf, start = ach.make_chain(500, 16, torch.device("cpu"), seed=3)
    assert buf.numel() == 500 * 16 and start % 16 == 0
    seen, p = set(), start
    for _ in range(500):
        assert p % 16 == 0 and p not in seen
        seen.add(p)
        p = int(buf[p])
    assert p == start and len(seen) == 500
    assert ach.walk(buf, start, 500) == start and ach.walk(buf, start, 1) == int(buf[start])
    other, _ = ach.make_chain(500, 16, torch.device("cpu"), seed=4)
    assert not torch.equal(buf, other)
    with pytest.raises(ValueError):
        ach.make_chain(1, 16, torch.device("cpu"))


def test_summarize_kernels_per_call():
    k = [("gemm", 3e-6), ("gemm", 3e-6), ("fill", 1e-6), ("gemm", 3e-6), ("gemm", 3e-6), ("fill", 1e-6)]
    s = ach.summarize_kernels(k, calls=2)
    assert s["busy_s"] == pytest.approx(7e-6) and s["kernels"] == 3
    assert s["names"][0] == {"name": "gemm", "per_call": 2, "time_per_call_s": pytest.approx(6e-6)}
    assert s["names"][1]["name"] == "fill" and s["names"][1]["per_call"] == 1
    with pytest.raises(ValueError):
        ach.summarize_kernels(k, calls=0)


def test_slope_recovers_a_per_node_cost_and_refuses_a_flat_chain():
    ks = [1, 2, 4, 8, 16, 32, 64]
    fit = ach.slope(ks, [60e-6 + 3e-6 * k for k in ks])
    assert fit["slope"] == pytest.approx(3e-6) and fit["intercept"] == pytest.approx(60e-6)
    assert fit["max_rel_residual"] < 1e-9
    with pytest.raises(ValueError, match="do not grow"):
        ach.slope(ks, [60e-6] * len(ks))
    with pytest.raises(ValueError):
        ach.slope([1, 1], [1.0, 2.0])


def test_conv_flops_count_every_output_of_the_padded_convolution():
    # (2K + 1) FLOPs per output, B x E x (L + K - 1) outputs: as conv1d/torch_conv's rule counts them
    assert ach.conv_flops(B=2, E=3, L=10, K=4) == 9 * 2 * 3 * 13
    from ssmbench.analytic.registry import cost
    c = cost("conv1d", {"B": 2, "E": 3, "L": 10, "K": 4}, impl="torch_conv", mode="fwd", dtype="bf16")
    silu_flops = float(c.vector) - ach.conv_flops(B=2, E=3, L=10, K=4)
    assert 0 < silu_flops <= 10 * 2 * 3 * 10  # the rest is silu's few FLOPs per kept output


def test_new_keys_make_spec_entries_that_read_back():
    from ssmbench.hwspecs.fragment import check_measured
    from ssmbench.hwspecs.units import parse
    from ssmbench.measure.probe import _entry

    today = datetime.date(2026, 12, 3)
    values = {"launch.host.triton": (12.3e-6, "time"), "launch.host.cuda_extension": (4.1e-6, "time"),
              "launch.host.autograd_node": (3.2e-6, "time"), "launch.timed_call": (4.33e-6, "time"),
              "memory.dram.path.broadcast": (2.9e12, "bandwidth"), "compute.path.conv_depthwise": (0.7e12, "flop_rate"),
              "memory.dram.latency": (812e-9, "time"), "memory.l2.latency": (265e-9, "time"),
              "memory.l2.bandwidth": (10.9e12, "bandwidth")}
    entries = [_entry(k, si, "a method", today) for k, (si, _) in values.items()]
    checked = check_measured(entries, "probe.yaml")
    for e in checked:
        si, kind = values[e["key"]]
        assert parse(e["value"], kind) == pytest.approx(si, rel=1e-3)
        assert e["method"] == "ssmbench probe: a method"


def _fake_ctx(calls):
    return ach.Ctx(device=None, timed=None, measure=lambda *a: calls.append(("measure", a[0])),
                   observe=lambda *a: calls.append(("observe", a[0])), spread_text=None, ver="v", target_s=0.1)


def test_a_failed_measurement_is_listed_and_the_others_still_run(monkeypatch):
    from ssmbench.measure.probe import failure_reason

    ran, failed = [], []

    def attempt(name, fn):
        try:
            fn()
        except Exception as exc:
            failed.append({"name": name, "reason": failure_reason(exc)})

    def boom(*a):
        raise RuntimeError("no Triton here")

    monkeypatch.setattr(ach, "latency", boom)
    monkeypatch.setattr(ach, "l2_bandwidth", lambda ctx: ran.append("l2"))
    monkeypatch.setattr(ach, "copy_curves", lambda ctx: ran.append("copy"))
    monkeypatch.setattr(ach._probe_mma, "measure", lambda ctx: ran.append("mma"))

    def per_call(ctx, cls, ext):
        if cls in ("cuda_extension", "cudnn"):
            raise RuntimeError(f"{cls} unavailable " + "x" * 5000)
        ran.append(cls)

    monkeypatch.setattr(ach, "per_call_cost", per_call)
    from ssmbench.measure import _probe_paths
    monkeypatch.setattr(ach, "autograd_node_cost", lambda ctx: ran.append("autograd_node_cost"))
    for name in ("aten_paths", "conv_depthwise", "softplus_rate", "eager_op_hosts"):
        monkeypatch.setattr(_probe_paths, name, lambda ctx, name=name: ran.append(name))
    ach.run_achievable(_fake_ctx([]), attempt, ext_future=None)
    assert ran == ["l2", "copy", "mma", "aten_paths", "conv_depthwise", "softplus_rate", "torch_eager", "triton",
                   "triton_autotune", "cublas", "sdpa", "cuda_graph", "autograd", "autograd_node_cost", "eager_op_hosts"]
    assert [f["name"] for f in failed] == ["load-to-use latency", "per-call cost cuda_extension", "per-call cost cudnn"]
    assert failed[0]["reason"] == "RuntimeError: no Triton here"
    long = failed[1]["reason"]
    assert len(long) < 2100 and "characters cut" in long and long.startswith("RuntimeError: cuda_extension")


def test_unknown_backend_class_is_refused():
    with pytest.raises(ValueError, match="torch_eager"):
        ach.class_call("tpu_magic", None, None)


def test_cpu_probe_file_matches_the_probe_schema(tmp_path, monkeypatch):
    jsonschema = pytest.importorskip("jsonschema")
    import ssmbench.cli as cli

    monkeypatch.setattr(cli, "COMMAND_MODULES", ("ssmbench.commands.measure",))
    out = tmp_path / "p.json"
    assert cli.main(["probe", "--device", "cpu", "--out", str(out), "--copy-mib", "4", "--matmul-n", "64",
                     "--vector-numel", "4096", "--target-time", "0.01"]) == 0
    doc = json.loads(out.read_text())
    assert doc["curves"] == [] and doc["per_call"] == []  # CUDA only
    schema = json.loads((REPO / "docs" / "schemas" / "probe.schema.json").read_text())
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
    assert not errors
    bad = dict(doc, curves=[{"name": "x", "x": "bytes", "y": "s", "points": [[1, 2, 3]], "method": "m"}])
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(bad))


# the runtime probe's files (kind ssmbench-runtime-probe, measure/models/runtime_probe.py) have their own test
STORED = sorted(p for p in (REPO / "results" / "h200" / "2026-12-03").rglob("probe-*.yaml")
                if yaml.safe_load(p.read_text()).get("kind") == "ssmbench-probe")


@pytest.mark.parametrize("path", STORED, ids=lambda p: str(p.relative_to(REPO)))
def test_stored_probe_files_match_the_schema_and_fit_the_h200_spec_keys(path):
    jsonschema = pytest.importorskip("jsonschema")
    from ssmbench.hwspecs.fragment import load_fragment

    doc = json.loads(json.dumps(yaml.safe_load(path.read_text()), default=str))  # YAML dates as JSON strings
    schema = json.loads((REPO / "docs" / "schemas" / "probe.schema.json").read_text())
    assert not [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
    assert load_fragment(path).entries


@pytest.mark.gpu
def test_achievable_measurements_on_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    pytest.importorskip("triton")
    from ssmbench.measure.probe import ProbeSizes, run_probe

    doc = run_probe(torch.device("cuda"), ProbeSizes(copy_mib=256, matmul_n=2048, vector_numel=1 << 20, iters=256,
                                                     target_s=0.05))
    keys = {m["key"] for m in doc["measured"]}
    want = {"memory.dram.latency", "memory.l2.latency", "memory.l2.bandwidth", "launch.host.torch_eager",
            "launch.host.triton", "launch.host.cublas", "launch.host.autograd_node", "launch.timed_call",
            "memory.dram.path.broadcast", "memory.dram.path.broadcast_16bit", "memory.dram.path.cast_copy",
            "memory.dram.path.reduction",
            "compute.path.conv_depthwise", "compute.path.softplus"}
    assert want <= keys, doc["failed"]
    assert {c["name"] for c in doc["curves"]} >= {"latency_vs_footprint", "read_bandwidth_vs_footprint",
                                                  "triton_copy_time_vs_bytes", "copy__time_vs_bytes"}
    rows = {r["class"]: r for r in doc["per_call"]}
    assert rows["torch_eager"]["kernels_per_call"] == 1 and rows["triton"]["kernels_per_call"] == 1


@pytest.mark.parametrize("folder", sorted(p.parent for p in (REPO / "results" / "h200" / "2026-12-03").rglob("run-*.json*")),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_stored_result_folders_can_be_resumed_from(folder):
    """--resume-from reads every .json of a folder as a result file: the per-call split files live in a
    sub-folder (percall/), not beside the runs."""
    from ssmbench.measure.results import finished_keys

    assert finished_keys([folder], device="NVIDIA H200").keys
