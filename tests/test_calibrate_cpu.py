"""The CPU path's real results through the whole flow: probe and measure (plain PyTorch on the
CPU) -> calibrate -> gap (Markdown, JSON, plot).

The CPU spec is built here from what ``ssmbench probe`` measured on this machine (its ``measured:``
entries: copy bandwidth and matmul rates), with every datasheet value unknown, and is named after
the CPU that measure records and lists that name in its device_names, so that the results match it
by the device rule. Timings on a shared CI machine are noisy: this test checks the flow and its
labels, not the accuracy of the fit.
"""

import json

import pytest
import yaml

import ssmbench.cli as cli

torch = pytest.importorskip("torch")

SUITE = {
    "schema_version": 1,
    "name": "cpu_calibration_flow",
    "entries": [
        {"op": "silu", "backend": "torch_ref", "dtype": "fp32", "modes": ["fwd"],
         "grid": {"B": 1, "L": [16, 256, 4096], "D": [64, 1024]}},
        {"op": "rmsnorm", "backend": "torch_ref", "dtype": "fp32", "modes": ["fwd"],
         "grid": {"B": 1, "L": [16, 256, 2048], "D": [64, 512]}},
    ],
}


def cpu_spec(name: str, measured: list) -> dict:
    def unknown(why="not known for this CPU"):
        return {"unknown": why}

    return {
        "schema_version": 1, "id": "ci-cpu", "name": name, "vendor": "unknown", "hypothetical": False,
        "device_names": [name],
        "architecture": "the CPU this test runs on", "sources": {},
        "compute": {"sm_count": unknown(), "clock_boost": unknown(),
                    "tensor": {d: unknown("see measured") for d in ("fp32", "bf16", "fp16")},
                    "vector": {"fp32": unknown("probe gives no vector ceiling on a CPU")},
                    "special_function": unknown("probe gives no special-function ceiling on a CPU")},
        "memory": {"dram": {"scope": "device", "capacity": unknown(), "bandwidth": unknown("see measured")}},
        "launch": {"kernel": unknown(), "graph_node": unknown("no graphs on a CPU")},
        "power": {"tdp": unknown(), "idle": unknown()},
        "measured": measured,
    }


def run_cli(monkeypatch, *argv):
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("ssmbench.commands.measure", "ssmbench.commands.calibrate"))
    return cli.main(list(argv))


def test_cpu_results_through_calibrate_and_gap(tmp_path, monkeypatch, capsys):
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump(SUITE, sort_keys=False))
    res = tmp_path / "results"
    assert run_cli(monkeypatch, "measure", "--suite", str(suite), "--device", "cpu", "--out", str(res),
                   "--target-time", "0.005", "--no-energy", "--json") == 0
    capsys.readouterr()
    (result_file,) = res.glob("*.json")
    meta = json.loads(result_file.read_text())["meta"]
    probe = tmp_path / "probe.yaml"
    assert run_cli(monkeypatch, "probe", "--device", "cpu", "--out", str(probe), "--target-time", "0.01",
                   "--copy-mib", "16", "--matmul-n", "128", "--vector-numel", "65536") == 0
    capsys.readouterr()
    measured = yaml.safe_load(probe.read_text())["measured"]
    assert "memory.dram.bandwidth" in [m["key"] for m in measured]
    spec_file = tmp_path / "cpu.yaml"
    spec_file.write_text(yaml.safe_dump(cpu_spec(meta["device"]["name"], measured), sort_keys=False))

    prof = tmp_path / "cpu.calibration.json"
    assert run_cli(monkeypatch, "calibrate", "--results", str(res), "--hw", str(spec_file), "--out", str(prof)) == 0
    out = capsys.readouterr().out
    assert "Calibration on ci-cpu" in out and "wrote calibrated profile" in out
    profile = json.loads(prof.read_text())
    assert {g["key"]["op"]: g["status"] for g in profile["groups"]} == {"silu": "calibrated", "rmsnorm": "calibrated"}
    assert profile["provenance"]["results"][0]["path"] == str(result_file)
    assert profile["provenance"]["device_mismatch"] is False

    png = tmp_path / "gap.png"
    assert run_cli(monkeypatch, "gap", "--results", str(res), "--hw", str(spec_file), "--calibration", str(prof),
                   "--format", "json", "--plot", str(png)) == 0
    rep = json.loads(capsys.readouterr().out)
    assert len(rep["cases"]) == 12
    for r in rep["cases"]:
        assert r["measured_s"] > 0 and r["bound_s"] > 0 and r["label"] == "calibrated"
        assert r["error_kind"].startswith("cross-validated")
        assert r["lo_s"] <= r["calibrated_s"] <= r["hi_s"]
    assert {f["family"] for f in rep["families"]} == {"elementwise", "norm"}
    assert png.stat().st_size > 10_000

    md = tmp_path / "gap.md"
    assert run_cli(monkeypatch, "gap", "--results", str(res), "--hw", str(spec_file), "--out", str(md)) == 0
    text = md.read_text()
    assert "fitted on these results" in text and "(calibrated)" in text and "ci-cpu" in text
