"""ssmbench probe on the CPU: writes a spec-shaped measured list and never overwrites a file."""

import json

import pytest
import yaml

pytest.importorskip("torch")

from ssmbench.hwspecs import units

SMALL = ["--copy-mib", "4", "--matmul-n", "64", "--vector-numel", "4096", "--target-time", "0.01"]


def _cli(monkeypatch, argv):
    import ssmbench.cli as cli

    monkeypatch.setattr(cli, "COMMAND_MODULES", ("ssmbench.commands.measure",))
    return cli.main(argv)


def test_probe_cpu_writes_and_refuses_to_overwrite(tmp_path, monkeypatch, capsys):
    out = tmp_path / "cpu-probe.yaml"
    assert _cli(monkeypatch, ["probe", "--device", "cpu", "--out", str(out), *SMALL]) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["kind"] == "ssmbench-probe" and doc["schema_version"] == 1
    keys = {m["key"] for m in doc["measured"]}
    assert {"memory.dram.bandwidth", "compute.tensor.fp32"} <= keys
    kinds = {"memory.dram.bandwidth": "bandwidth"}
    for m in doc["measured"]:
        assert {"key", "value", "date", "method"} <= set(m)
        assert units.parse(m["value"], kinds.get(m["key"], "flop_rate")) > 0  # a value with its unit
    assert {o["name"] for o in doc["observations"]} >= {"elementwise.fp32_eager", "exp.fp32_eager"}
    assert doc["meta"]["device"]["type"] == "cpu"
    before = out.read_text()
    capsys.readouterr()
    assert _cli(monkeypatch, ["probe", "--device", "cpu", "--out", str(out), *SMALL]) == 2
    assert "file exists" in capsys.readouterr().err
    assert out.read_text() == before


def test_probe_json_output_and_bad_arguments(tmp_path, monkeypatch, capsys):
    out = tmp_path / "p.json"
    assert _cli(monkeypatch, ["probe", "--device", "cpu", "--out", str(out), *SMALL]) == 0
    assert json.loads(out.read_text())["measured"]
    assert _cli(monkeypatch, ["probe", "--device", "cpu", "--out", str(tmp_path / "p.txt")]) == 2
    assert _cli(monkeypatch, ["probe", "--device", "cpu", "--out", str(tmp_path / "q.yaml"), "--matmul-n", "0"]) == 2
    assert _cli(monkeypatch, ["probe", "--device", "tpu", "--out", str(tmp_path / "r.yaml")]) == 2


def test_probe_measured_entries_fit_a_spec(tmp_path, monkeypatch):
    """The measured list can be pasted into a spec: the spec loader accepts it."""
    import copy

    from ssmbench.hwspecs import builtin_dir, load_spec, parse_spec

    out = tmp_path / "p.yaml"
    assert _cli(monkeypatch, ["probe", "--device", "cpu", "--out", str(out), *SMALL]) == 0
    measured = yaml.safe_load(out.read_text())["measured"]
    spec_path = builtin_dir() / "h200-sxm.yaml"
    data = copy.deepcopy(yaml.safe_load(spec_path.read_text()))
    data["measured"] = [m for m in measured if m["key"] in ("memory.dram.bandwidth", "compute.tensor.bf16")]
    spec = parse_spec(data, "pasted.yaml")
    assert {m.key for m in spec.measured} == {m["key"] for m in data["measured"]}
    assert load_spec(spec_path)  # the built-in file itself is untouched


@pytest.mark.gpu
def test_probe_cuda(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from ssmbench.measure.probe import ProbeSizes, run_probe

    doc = run_probe(torch.device("cuda"), ProbeSizes(copy_mib=256, matmul_n=4096, vector_numel=1 << 20, iters=512,
                                                     target_s=0.05))
    keys = {m["key"] for m in doc["measured"]}
    assert {"memory.dram.bandwidth", "compute.tensor.bf16", "launch.kernel", "launch.graph_node"} <= keys, doc["failed"]


def test_probe_writes_a_spec_fragment(tmp_path, monkeypatch):
    """The measured list is in the spec schema's format: spec value paths, values with units, YAML dates,
    methods that say they come from the probe; spelled out (no YAML anchors)."""
    import datetime

    from ssmbench.hwspecs.fragment import load_fragment

    out = tmp_path / "p.yaml"
    assert _cli(monkeypatch, ["probe", "--device", "cpu", "--out", str(out), *SMALL]) == 0
    text = out.read_text()
    assert "&id" not in text and "*id" not in text
    entries = yaml.safe_load(text)["measured"]
    assert all(isinstance(m["date"], datetime.date) and m["method"].startswith("ssmbench probe: ") for m in entries)
    fragment = load_fragment(out)
    assert [e["key"] for e in fragment.entries] == [m["key"] for m in entries]


# Timings of one measurement as a fake timer gives them: all alike, or 2 in 10 a thousand times slower.
STEADY = (1.0e-3, 1.01e-3, 1.02e-3, 1.0e-3, 1.03e-3, 1.01e-3, 1.0e-3, 1.02e-3, 1.01e-3, 1.0e-3)
CONTENDED = (1.0e-3,) * 8 + (1.0, 1.0)


def _fake_timer(monkeypatch, samples):
    from ssmbench.measure import probe
    from ssmbench.measure.timing import TimingResult

    monkeypatch.setattr(probe, "time_call", lambda call, device, settings: TimingResult(samples, {}))


def test_spread_of_repeats():
    from ssmbench.measure.probe import spread

    assert spread(STEADY) == {"p90_over_p10": pytest.approx(1.02, rel=0.01), "max_over_min": 1.03, "n": 10}
    assert spread(CONTENDED)["p90_over_p10"] == pytest.approx(1000)


def test_probe_warns_when_repeats_spread_widely(tmp_path, monkeypatch, capsys):
    torch = pytest.importorskip("torch")
    _fake_timer(monkeypatch, CONTENDED)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)  # the hint does not depend on this machine
    out = tmp_path / "p.yaml"
    assert _cli(monkeypatch, ["probe", "--device", "cpu", "--out", str(out), *SMALL]) == 0
    err = capsys.readouterr().err
    for name in ("memory.dram.bandwidth", "compute.tensor.fp32", "elementwise.fp32_eager"):
        assert f"ssmbench: warning: probe {name}: the repeats spread widely (p90/p10 = 1e+03, max/min = 1e+03" in err
    assert "rerun with --threads 1" in err
    doc = yaml.safe_load(out.read_text())
    spread = {s["name"]: s for s in doc["spread"]}
    assert spread["memory.dram.bandwidth"] == {"name": "memory.dram.bandwidth", "p90_over_p10": 1000.0,
                                               "max_over_min": 1000.0, "n": 10}
    assert len(doc["warnings"]) == len(doc["spread"]) == 6  # 4 measured, 2 observations
    assert "(p90/p10 1e+03)" in doc["measured"][0]["method"]


def test_probe_steady_repeats_give_no_warning(tmp_path, monkeypatch, capsys):
    _fake_timer(monkeypatch, STEADY)
    out = tmp_path / "p.json"
    assert _cli(monkeypatch, ["probe", "--device", "cpu", "--out", str(out), *SMALL, "--json"]) == 0
    assert "warning" not in capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert doc["warnings"] == [] and all(s["p90_over_p10"] < 1.05 for s in doc["spread"])


def test_spread_hint_with_one_thread_names_other_processes(tmp_path, monkeypatch, capsys):
    torch = pytest.importorskip("torch")
    _fake_timer(monkeypatch, CONTENDED)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert _cli(monkeypatch, ["probe", "--device", "cpu", "--out", str(tmp_path / "p.yaml"), *SMALL]) == 0
    err = capsys.readouterr().err
    assert "other processes compete for the core" in err and "--threads 1" not in err


def test_probe_and_measure_without_pytorch_say_so(tmp_path, monkeypatch, capsys):
    # `pip install .` has no torch: the commands that run kernels stop with a message and exit 2
    monkeypatch.setitem(__import__("sys").modules, "torch", None)
    assert _cli(monkeypatch, ["probe", "--device", "cpu", "--out", str(tmp_path / "p.yaml")]) == 2
    assert _cli(monkeypatch, ["measure", "--suite", "measure/suites/cpu_smoke.yaml", "--device", "cpu",
                              "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("needs PyTorch") == 2 and "Traceback" not in err
    assert not (tmp_path / "p.yaml").exists()
