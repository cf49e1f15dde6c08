"""The CPU measurement path end to end: suite -> sweep -> result file -> reader; resume; interrupts;
failure records; the correctness gate; the CLI."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ssmbench.analytic.cases import Case
from ssmbench.measure.backends.base import (
    Backend,
    Prepared,
    Unavailable,
    get_backend,
    register_backend,
    unregister_backend,
)
from ssmbench.measure.gate import check
from ssmbench.measure.results import ResultWriter, read_dir, read_results, result_files
from ssmbench.measure.suite import parse_suite
from ssmbench.measure.sweep import SweepConfig, case_seed, run_sweep
from ssmbench.measure.timing import TimingSettings

FAST = TimingSettings(target_s=0.001, warmup_calls=1, warmup_s=0.0, min_repeats=2, max_repeats=5)
REF = get_backend("torch_ref", "linear")


def _cfg(out, **kw):
    return SweepConfig(device="cpu", out_dir=Path(out), timing=FAST, **kw)


def _suite(backend="torch_ref", B=(1, 2, 3, 4), modes=("fwd",)):
    return parse_suite({"schema_version": 1, "name": "t", "entries": [
        {"op": "linear", "backend": backend, "dtype": "fp32", "modes": list(modes),
         "grid": {"B": list(B), "L": 4, "I": 8, "O": 8}}]}, "t.yaml").cases


@pytest.fixture
def backends():
    """Register throw-away backends for op 'linear'; removed after the test."""
    names = []

    def add(name, prepare, **kw):
        register_backend(Backend(name=name, op="linear", impl="cublas", modes=("fwd", "bwd"),
                                 devices=("cpu", "cuda"), prepare=prepare, **kw))
        names.append(name)
        return name

    yield add
    for n in names:
        unregister_backend(n, "linear")


def _wrong_prepare(case, device, seed):
    p = REF.prepare(Case(case.op, case.impl, "torch_ref", case.dims, case.dtype, case.mode), device, seed)
    run = p.run
    p.run = lambda: run() * 1.01  # a 1% error: far beyond fp32 rounding
    return p


def test_end_to_end_cpu(tmp_path):
    from ssmbench.hwspecs import get_spec

    cases = _suite(modes=("fwd", "bwd"), B=(1, 2))
    summary = run_sweep(cases, _cfg(tmp_path, spec=get_spec("h200-sxm")))
    assert summary.counts == {"ok": 4}
    assert summary.path.suffix == ".json" and summary.path.exists()
    assert not summary.path.with_suffix(".jsonl").exists()  # consolidated, lines file removed
    rf = read_results(summary.path)
    assert rf.complete and rf.schema_version == 1 and len(rf.cases) == 4
    assert rf.timing["target_s"] == FAST.target_s
    c = rf.cases[0]
    assert c["status"] == "ok" and c["gate"]["passed"]
    assert c["seed"] == case_seed(0, c["key"])
    t = c["time_s"]
    assert 0 < t["p20"] <= t["median"] <= t["p80"] <= t["p95"] and t["n"] >= FAST.min_repeats
    assert c["timing"]["method"] == "perf_counter_ns" and c["timing"]["flush_l2"] is False
    B, L, I, O = (c["dims"][k] for k in "BLIO")
    assert c["analytic"]["flops"] == 2 * B * L * I * O
    assert c["achieved"]["flop_per_s"] == pytest.approx(c["analytic"]["flops"] / t["median"])
    assert c["roofline_fraction"] == pytest.approx(c["roofline"]["bound_s"] / t["median"])
    assert c["energy"]["joules_per_call"] is None and "CPU" in c["energy"]["reason"]
    assert c["peak_memory_bytes"] is None
    assert rf.meta["git"]["commit"] is None or len(rf.meta["git"]["commit"]) == 40


def test_resume_skips_finished_and_retries_errors(tmp_path, backends):
    cases = _suite()
    first = run_sweep(cases, _cfg(tmp_path), limit=2)
    assert first.counts == {"ok": 2}
    second = run_sweep(cases, _cfg(tmp_path, resume=True))
    assert second.skipped_finished == 2
    assert [r["key"] for r in second.records] == [sc.case.key() for sc in cases[2:]]
    third = run_sweep(cases, _cfg(tmp_path, resume=True))
    assert third.path is None and third.records == [] and third.skipped_finished == 4
    # a case that ended in 'error' runs again on --resume
    calls = []

    def flaky(case, device, seed):
        calls.append(case.key())
        if len(calls) == 1:
            raise RuntimeError("transient")
        return REF.prepare(Case(case.op, case.impl, "torch_ref", case.dims, case.dtype, case.mode), device, seed)

    name = backends("test_flaky", flaky)
    fc = _suite(backend=name, B=(1,))
    assert run_sweep(fc, _cfg(tmp_path / "f")).counts == {"error": 1}
    assert run_sweep(fc, _cfg(tmp_path / "f", resume=True)).counts == {"ok": 1}


def test_resume_from_another_folder_writes_only_the_new_cases(tmp_path):
    cases = _suite()
    earlier = run_sweep(cases, _cfg(tmp_path / "earlier"), limit=3)
    assert earlier.counts == {"ok": 3}
    seen = []
    rest = run_sweep(cases, _cfg(tmp_path / "new", resume_from=[tmp_path / "earlier"]), on_resume=seen.append)
    assert rest.skipped_finished == 3 and [r["key"] for r in rest.records] == [cases[3].case.key()]
    assert result_files(tmp_path / "new") == [rest.path]  # the earlier file stays where it was
    meta = read_results(rest.path).meta["resume"]
    assert meta["skipped_finished"] == 3 and meta["from_files"] == [str(earlier.path)]
    assert seen[0].files == [str(earlier.path)]


def test_resume_never_counts_cases_measured_on_another_device(tmp_path):
    """A case finished on another GPU model is not finished on this one: it runs again, and the file
    that holds it is listed as set aside in the new file's metadata."""
    cases = _suite(B=(1, 2))
    w = ResultWriter(tmp_path / "other", {"device": {"name": "Some Other Device"}}, {})
    w.add({**cases[0].case.to_dict(), "key": cases[0].case.key(), "status": "ok", "reason": None})
    other_file = w.finish()
    run = run_sweep(cases, _cfg(tmp_path / "new", resume_from=[tmp_path / "other"]))
    assert run.skipped_finished == 0 and len(run.records) == 2
    meta = read_results(run.path).meta["resume"]
    assert meta["ignored_other_device"] == {str(other_file): "Some Other Device"} and meta["from_files"] == []


def test_keyboard_interrupt_loses_no_finished_case(tmp_path, backends):
    seen = []

    def stop_at_third(case, device, seed):
        seen.append(case)
        if len(seen) == 3:
            raise KeyboardInterrupt
        return REF.prepare(Case(case.op, case.impl, "torch_ref", case.dims, case.dtype, case.mode), device, seed)

    name = backends("test_interrupt", stop_at_third)
    cases = _suite(backend=name)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(cases, _cfg(tmp_path))
    files = result_files(tmp_path)
    assert len(files) == 1 and files[0].suffix == ".jsonl"
    rf = read_results(files[0])
    assert not rf.complete
    assert [c["key"] for c in rf.cases] == [sc.case.key() for sc in cases[:2]]
    # resuming finishes the rest in a new file
    rest = run_sweep(cases, _cfg(tmp_path, resume=True))
    assert rest.skipped_finished == 2 and rest.counts == {"ok": 2}
    assert {c["key"] for rf in read_dir(tmp_path) for c in rf.cases} == {sc.case.key() for sc in cases}


KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from ssmbench.analytic.cases import Case
    from ssmbench.measure.backends.base import Backend, get_backend, register_backend
    from ssmbench.measure.suite import parse_suite
    from ssmbench.measure.sweep import SweepConfig, run_sweep
    from ssmbench.measure.timing import TimingSettings

    ref = get_backend("torch_ref", "linear")
    n = []

    def prepare(case, device, seed):
        n.append(1)
        if len(n) == 3:
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no finally: a real kill
        return ref.prepare(Case(case.op, case.impl, "torch_ref", case.dims, case.dtype, case.mode), device, seed)

    register_backend(Backend("test_kill", "linear", "cublas", ("fwd",), ("cpu",), prepare))
    cases = parse_suite({"schema_version": 1, "name": "k", "entries": [{"op": "linear", "backend": "test_kill",
        "dtype": "fp32", "modes": ["fwd"], "grid": {"B": [1, 2, 3, 4], "L": 4, "I": 8, "O": 8}}]}, "k").cases
    run_sweep(cases, SweepConfig(device="cpu", out_dir=Path(sys.argv[1]),
              timing=TimingSettings(target_s=0.001, warmup_calls=1, warmup_s=0.0, min_repeats=2, max_repeats=5)))
""")


def test_sigkill_mid_sweep_loses_no_finished_case(tmp_path):
    script = tmp_path / "kill.py"
    script.write_text(KILL_SCRIPT)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    (f,) = result_files(out)
    rf = read_results(f)
    assert [c["dims"]["B"] for c in rf.cases] == [1, 2]
    assert all(c["status"] == "ok" for c in rf.cases)


HANG_SCRIPT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from ssmbench.analytic.cases import Case
    from ssmbench.measure.backends.base import Backend, get_backend, register_backend
    from ssmbench.measure.suite import parse_suite
    from ssmbench.measure.sweep import SweepConfig, run_sweep
    from ssmbench.measure.timing import TimingSettings

    ref = get_backend("torch_ref", "linear")

    def prepare(case, device, seed):
        if case.dims["B"] == 2:
            while True:  # a call that never returns and ignores nothing: only the watchdog ends it
                time.sleep(0.05)
        return ref.prepare(Case(case.op, case.impl, "torch_ref", case.dims, case.dtype, case.mode), device, seed)

    register_backend(Backend("test_hang", "linear", "cublas", ("fwd",), ("cpu",), prepare))
    cases = parse_suite({"schema_version": 1, "name": "h", "entries": [{"op": "linear", "backend": "test_hang",
        "dtype": "fp32", "modes": ["fwd"], "grid": {"B": [1, 2, 3], "L": 4, "I": 8, "O": 8}}]}, "h").cases
    run_sweep(cases, SweepConfig(device="cpu", out_dir=Path(sys.argv[1]), case_timeout_s=float(sys.argv[2]),
              timing=TimingSettings(target_s=0.001, warmup_calls=1, warmup_s=0.0, min_repeats=2, max_repeats=5)))
""")


def test_a_hung_case_is_recorded_as_timeout_and_ends_the_run(tmp_path):
    from ssmbench.measure.sweep import TIMEOUT_EXIT

    script = tmp_path / "hang.py"
    script.write_text(HANG_SCRIPT)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(script), str(out), "3"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == TIMEOUT_EXIT, proc.stderr
    (f,) = result_files(out)
    rf = read_results(f)
    assert [(c["dims"]["B"], c["status"]) for c in rf.cases] == [(1, "ok"), (2, "timeout")]
    assert "no result after 3 s" in rf.cases[1]["reason"] and rf.meta["case_timeout_s"] == 3.0
    assert "hang.py:" in rf.cases[1]["reason"] and "prepare" in rf.cases[1]["reason"]  # where it hung
    assert "Thread" in proc.stderr and "in prepare" in proc.stderr  # the full stack dump, for the log
    assert rf.cases[1]["energy"]["joules_per_call"] is None


def test_a_failed_graph_capture_ends_the_run_and_resume_finishes_it(tmp_path, monkeypatch):
    """A failed CUDA graph capture can poison the process's CUDA RNG: the case is recorded as an
    error and the run ends (consolidated, with why); --resume runs the rest in a new process."""
    import ssmbench.measure.sweep as sweep_mod
    from ssmbench.measure.timing import CaptureFailed

    real = sweep_mod.make_timed_callable
    cases = _suite(B=(1, 2, 3))

    def capture_fails_for_b2(fn, device, settings):
        if len(calls) == 2:
            raise CaptureFailed("CUDA graph capture failed: RuntimeError: operation not permitted when stream is capturing")
        return real(fn, device, settings)

    calls = []
    monkeypatch.setattr(sweep_mod, "make_timed_callable", lambda *a: (calls.append(1), capture_fails_for_b2(*a))[1])
    first = run_sweep(cases, _cfg(tmp_path))
    assert first.interrupted and [r["status"] for r in first.records] == ["ok", "error"]
    meta = read_results(first.path).meta
    assert meta["ended_early"]["cases_not_run"] == 1 and "capture" in meta["ended_early"]["reason"]
    monkeypatch.setattr(sweep_mod, "make_timed_callable", real)
    rest = run_sweep(cases, _cfg(tmp_path, resume=True))
    assert not rest.interrupted and [r["dims"]["B"] for r in rest.records] == [2, 3]


def test_failures_are_records_and_the_sweep_goes_on(tmp_path, backends):
    def unavailable(case, device, seed):
        raise Unavailable("library frobnicate is not installed")

    def crash(case, device, seed):
        raise ValueError("kaboom")

    def oom(case, device, seed):
        p = REF.prepare(Case(case.op, case.impl, "torch_ref", case.dims, case.dtype, case.mode), device, seed)

        def run():
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")

        p.run = run
        return p

    names = [backends("test_unavail", unavailable), backends("test_crash", crash), backends("test_oom", oom),
             backends("test_wrong", _wrong_prepare), "torch_ref"]
    entries = [{"op": "linear", "backend": n, "dtype": "fp32", "modes": ["fwd"],
                "grid": {"B": 1, "L": 4, "I": 8, "O": 8}} for n in names]
    cases = parse_suite({"schema_version": 1, "name": "f", "entries": entries}, "f.yaml").cases
    summary = run_sweep(cases, _cfg(tmp_path))
    by = {r["backend"]: r for r in read_results(summary.path).cases}
    assert by["test_unavail"]["status"] == "unavailable"
    assert by["test_unavail"]["reason"] == "library frobnicate is not installed"
    assert by["test_crash"]["status"] == "error" and "ValueError: kaboom" in by["test_crash"]["reason"]
    assert "kaboom" in by["test_crash"]["traceback"]
    assert by["test_oom"]["status"] == "oom"
    assert by["test_wrong"]["status"] == "failed_check" and by["test_wrong"]["time_s"] is None
    assert by["torch_ref"]["status"] == "ok"
    for r in by.values():  # every record carries every field
        assert {"gate", "time_s", "analytic", "energy", "peak_memory_bytes", "roofline_fraction"} <= set(r)


def test_device_not_supported_by_backend_is_unavailable(tmp_path, backends):
    register_backend(Backend("test_cuda_only", "linear", "cublas", ("fwd",), ("cuda",), REF.prepare))
    try:
        cases = _suite(backend="test_cuda_only", B=(1,))
        r = run_sweep(cases, _cfg(tmp_path)).records[0]
    finally:
        unregister_backend("test_cuda_only", "linear")
    assert r["status"] == "unavailable" and "cuda" in r["reason"]


def test_gate_passes_reference_and_fails_wrong_backend():
    dev = torch.device("cpu")
    for dtype in ("fp32", "bf16"):
        case = Case("linear", "cublas", "torch_ref", {"B": 2, "L": 8, "I": 16, "O": 16}, dtype, "fwd")
        g = check(REF.prepare(case, dev, 1), dtype)
        assert g["passed"], g
        (o,) = g["outputs"]
        assert o["err_run"] <= o["bound"] and o["bound"] == pytest.approx(2 * o["err_reference_lo"] + g["floor"])
    case = Case("linear", "cublas", "torch_ref", {"B": 2, "L": 8, "I": 16, "O": 16}, "fp32", "fwd")
    g = check(_wrong_prepare(case, dev, 1), "fp32")
    assert not g["passed"] and "exceeds" in g["reason"]
    assert g["outputs"][0]["err_run"] == pytest.approx(0.01, rel=1e-3)


def test_gate_rejects_nan_and_shape_mismatch():
    dev = torch.device("cpu")
    case = Case("linear", "cublas", "torch_ref", {"B": 1, "L": 4, "I": 8, "O": 8}, "fp32", "fwd")
    p = REF.prepare(case, dev, 1)
    y = p.run()
    p_nan = Prepared(run=lambda: torch.full_like(y, float("nan")), reference_hi=p.reference_hi,
                     reference_lo=p.reference_lo, output_of=p.output_of, tokens=4)
    g = check(p_nan, "fp32")
    assert not g["passed"] and "NaN" in g["reason"]
    p_shape = Prepared(run=lambda: y[:, :2], reference_hi=p.reference_hi, reference_lo=p.reference_lo,
                       output_of=p.output_of, tokens=4)
    g = check(p_shape, "fp32")
    assert not g["passed"] and "shapes differ" in g["reason"]


@pytest.mark.parametrize("mode", ["fwd", "bwd", "fwdbwd", "decode"])
def test_torch_ref_every_registered_op_passes_its_gate(mode):
    """Every torch_ref backend prepares and passes the gate at a tiny shape (the cpu_smoke shapes)."""
    from ssmbench.measure.suite import load_suite

    dev = torch.device("cpu")
    for sc in load_suite("cpu_smoke").cases:
        if sc.case.mode != mode:
            continue
        p = get_backend(sc.case.backend, sc.case.op).prepare(sc.case, dev, 3)
        g = check(p, sc.case.dtype)
        assert g["passed"], (sc.case.key(), g["reason"])
        assert all(o["err_run"] <= o["bound"] for o in g["outputs"])


def test_decode_state_is_restored_for_references():
    """A decode step updates its state in place; the references start from the initial state, so the
    gate still passes after the timed region has run many steps, and the state is compared too."""
    dev = torch.device("cpu")
    case = Case("mamba1_scan", "naive", "torch_ref", {"B": 2, "E": 8, "N": 4}, "fp32", "decode")
    p = get_backend("torch_ref", "mamba1_scan").prepare(case, dev, 1)
    first = [t.clone() for t in p.output_of(p.run())]
    assert len(first) == 2  # y and the updated state
    for _ in range(5):
        later = p.output_of(p.run())
    assert not torch.equal(first[1], later[1])  # the live state moved on
    hi = p.output_of(p.reference_hi())
    assert torch.allclose(hi[1], first[1].double(), rtol=1e-5, atol=1e-6)  # references: from the initial state


def _cli(monkeypatch, argv):
    import ssmbench.cli as cli

    monkeypatch.setattr(cli, "COMMAND_MODULES", ("ssmbench.commands.measure",))
    return cli.main(argv)


def test_cli_measure(tmp_path, monkeypatch, capsys):
    suite = tmp_path / "s.yaml"
    suite.write_text(textwrap.dedent("""
        schema_version: 1
        name: tiny
        entries:
          - {op: linear, backend: torch_ref, dtype: fp32, modes: [fwd], grid: {B: [1, 2], L: 4, I: 8, O: 8}}
    """))
    out = tmp_path / "out"
    rc = _cli(monkeypatch, ["measure", "--suite", str(suite), "--device", "cpu", "--out", str(out),
                            "--target-time", "0.001", "--json"])
    assert rc == 0
    captured = capsys.readouterr()
    assert "2 cases to run" in captured.err  # the count comes first, on stderr under --json
    doc = json.loads(captured.out)
    assert doc["counts"] == {"ok": 2} and Path(doc["path"]).exists()
    rc = _cli(monkeypatch, ["measure", "--suite", str(suite), "--device", "cpu", "--out", str(out), "--resume"])
    assert rc == 0 and "nothing to run" in capsys.readouterr().out
    rc = _cli(monkeypatch, ["measure", "--suite", str(suite), "--device", "cpu", "--out", str(tmp_path / "o2"),
                            "--resume-from", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0 and "resuming from 1 result file(s)" in printed and "nothing to run" in printed
    assert _cli(monkeypatch, ["measure", "--suite", str(suite), "--device", "cpu", "--out", str(out),
                              "--resume-from", str(tmp_path / "missing")]) == 2
    assert "--resume-from" in capsys.readouterr().err
    assert _cli(monkeypatch, ["measure", "--suite", str(tmp_path / "nope.yaml"), "--device", "cpu",
                              "--out", str(out)]) == 2
    assert "file not found" in capsys.readouterr().err
    rc = _cli(monkeypatch, ["measure", "--suite", str(suite), "--device", "cpu", "--out", str(out), "--dry-run"])
    assert rc == 0 and "B=2" in capsys.readouterr().out


def test_cli_measure_exit_1_on_failed_check(tmp_path, monkeypatch, capsys, backends):
    backends("test_wrong_cli", _wrong_prepare)
    suite = tmp_path / "s.yaml"
    suite.write_text("schema_version: 1\nname: w\nentries:\n  - {op: linear, backend: test_wrong_cli, dtype: fp32, "
                     "modes: [fwd], grid: {B: 1, L: 4, I: 8, O: 8}}\n")
    rc = _cli(monkeypatch, ["measure", "--suite", str(suite), "--device", "cpu", "--out", str(tmp_path / "o"),
                            "--target-time", "0.001"])
    assert rc == 1
    assert "failed_check" in capsys.readouterr().out


def test_cpu_smoke_suite_runs(tmp_path):
    """The CI smoke suite: every case passes its gate and is timed."""
    from ssmbench.measure.suite import load_suite

    s = load_suite("cpu_smoke")
    summary = run_sweep(s.cases, _cfg(tmp_path))
    bad = [(r["key"], r["status"], r["reason"]) for r in summary.records if r["status"] != "ok"]
    assert not bad
    assert len(summary.records) == len(s.cases)
    assert os.path.exists(summary.path)


@pytest.mark.gpu
def test_sweep_on_cuda(tmp_path):
    """On a GPU: CUDA events with L2 flush, CUDA-graph replay for a decode entry, peak memory, NVML energy
    (or null with a reason where NVML is missing), and every torch_ref op of the smoke suite on CUDA."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    cases = parse_suite({"schema_version": 1, "name": "g", "entries": [
        {"op": "linear", "backend": "torch_ref", "dtype": "bf16", "modes": ["fwd"],
         "grid": {"B": 4, "L": 512, "I": 1024, "O": 1024}},
        {"op": "linear", "backend": "torch_ref", "dtype": "bf16", "modes": ["decode"],
         "grid": {"B": 4, "I": 1024, "O": 1024}, "timing": {"cuda_graph": True}},
    ]}, "g.yaml").cases
    cfg = SweepConfig(device="cuda", out_dir=tmp_path, timing=TimingSettings(target_s=0.05))
    recs = {r["mode"]: r for r in run_sweep(cases, cfg).records}
    for r in recs.values():
        assert r["status"] == "ok", r["reason"]
        assert r["timing"]["method"] == "cuda_events" and r["timing"]["flush_bytes"] > 0
        assert r["peak_memory_bytes"] > 0
        e = r["energy"]
        assert (e["joules_per_call"] is not None and e["joules_per_call"] > 0) or e["reason"]
        if e["joules_per_call"] is not None:
            assert e["window_s"] >= 1.0 and r["clocks"]["before"]["sm_clock_mhz"]
    assert recs["decode"]["timing"]["cuda_graph"] is True
    from ssmbench.measure.suite import load_suite

    smoke = run_sweep(load_suite("cpu_smoke").cases,
                      SweepConfig(device="cuda", out_dir=tmp_path / "smoke", timing=FAST, energy=False))
    assert all(r["status"] == "ok" for r in smoke.records), [(r["key"], r["reason"]) for r in smoke.records
                                                              if r["status"] != "ok"]
