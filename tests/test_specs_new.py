"""``ssmbench specs new --from SPEC --probe FILE``: a probe file is a spec fragment that merges into a spec
which ``specs validate`` accepts; the probe's values replace same-key entries, the base's others stay."""

from pathlib import Path

import pytest
import yaml
from ssmbench.hwspecs import load_spec

STORED_H200_PROBE = Path(__file__).resolve().parent.parent / "results/h200/2026-12-02/default/probe-h200.yaml"
SMALL_PROBE = ["--copy-mib", "4", "--matmul-n", "64", "--vector-numel", "4096", "--target-time", "0.01"]


def _measured(spec) -> dict[str, str]:
    return {m.key: m.value for m in spec.measured}


def test_the_stored_h200_probe_merges_into_h200_sxm(run_cli, tmp_path):
    out = tmp_path / "h200-probed.yaml"
    code, text, err = run_cli("specs", "new", "--from", "h200-sxm", "--probe", str(STORED_H200_PROBE), "--out", str(out))
    assert code == 0, err
    assert run_cli("specs", "validate", str(out))[0] == 0
    spec = load_spec(out)
    assert spec.id == "h200-probed" and spec.device_names == ["NVIDIA H200"] and not spec.hypothetical
    measured = _measured(spec)
    probe = {m["key"]: m["value"] for m in yaml.safe_load(STORED_H200_PROBE.read_text())["measured"]}
    assert {k: measured[k] for k in probe} == probe                    # the probe's values replace the base's
    assert measured["memory.dram.bandwidth"] == "4.246 TB/s"          # the base said 4186 GB/s
    assert measured["memory.l2.capacity"] == "60 MiB" and measured["power.idle"] == "100 W"  # kept from the base
    assert str(STORED_H200_PROBE) in spec.notes and text.count("measured (kept from h200-sxm)") == 1
    assert "--id to choose" in text and "specs validate" in text


def test_a_cpu_probe_round_trips_through_specs_new(run_cli, monkeypatch, tmp_path, write_spec, h200_dict):
    """The CPU probe's file merges into a base that lists its keys; the result loads with the probe's values."""
    import ssmbench.cli as cli

    probe = tmp_path / "cpu-probe.yaml"
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("ssmbench.commands.measure", "ssmbench.commands.specs"))
    assert run_cli("probe", "--device", "cpu", "--out", str(probe), *SMALL_PROBE)[0] == 0
    h200_dict["compute"]["tensor"]["fp32"] = {"unknown": "a CPU's fp32 matmul rate is measured, not published"}
    base = write_spec(h200_dict, "base.yaml")
    out = tmp_path / "mine.yaml"
    code, _, err = run_cli("specs", "new", "--from", base, "--probe", str(probe), "--out", str(out),
                           "--id", "my-cpu", "--name", "This CPU")
    assert code == 0, err
    assert run_cli("specs", "validate", str(out))[0] == 0
    spec = load_spec(out)
    assert (spec.id, spec.name) == ("my-cpu", "This CPU")
    written = yaml.safe_load(probe.read_text())
    measured = _measured(spec)
    assert {m["key"]: measured[m["key"]] for m in written["measured"]} == {m["key"]: m["value"] for m in written["measured"]}
    assert measured["launch.kernel"] == "6.962 us"  # the base's other measured entries are kept
    name = written["meta"]["device"]["name"]
    assert spec.device_names == ([name] if name else h200_dict["device_names"])


@pytest.mark.parametrize("argv, message", [
    (["--from", "pim-hbm"], "a hypothetical design has no measurements"),
    (["--from", "t4"], "are not values of this spec"),  # the T4 lists no bf16 tensor rate
    (["--from", "h200-sxm", "--id", "Bad Id"], "--id: 'Bad Id' is not a spec id"),
    (["--from", "no-such-spec"], "unknown spec id 'no-such-spec'"),
])
def test_specs_new_refuses_bad_input_and_writes_nothing(run_cli, tmp_path, argv, message):
    out = tmp_path / "new.yaml"
    code, _, err = run_cli("specs", "new", *argv, "--probe", str(STORED_H200_PROBE), "--out", str(out))
    assert code == 2 and message in err and "Traceback" not in err
    assert not out.exists()


def test_specs_new_checks_the_output_path_first(run_cli, tmp_path):
    out = tmp_path / "taken.yaml"
    out.write_text("keep me\n")
    code, _, err = run_cli("specs", "new", "--from", "h200-sxm", "--probe", "no/such/probe.yaml", "--out", str(out))
    assert code == 2 and "file exists" in err and out.read_text() == "keep me\n"
    code, _, err = run_cli("specs", "new", "--from", "h200-sxm", "--probe", "no/such/probe.yaml",
                           "--out", str(tmp_path / "new.txt"))
    assert code == 2 and "expected a .yaml or .yml file name" in err


def test_a_bad_fragment_names_each_bad_entry(run_cli, tmp_path, write_spec):
    bad = write_spec({"measured": [
        {"key": "memory.dram.bandwidth", "value": "5 W", "date": "2026-01-01", "method": "x"},
        {"key": "memory.dram.speed", "value": "5 TB/s", "date": "2026-01-01", "method": "x"},
        {"key": "launch.kernel", "value": "5 us", "date": "2026-01-01"},
    ]}, "bad-probe.yaml")
    code, _, err = run_cli("specs", "new", "--from", "h200-sxm", "--probe", bad, "--out", str(tmp_path / "n.yaml"))
    assert code == 2
    assert "measured[0].value: '5 W' has unit 'watt', expected a bandwidth" in err
    assert "measured[1].key: 'memory.dram.speed' is not a spec value path" in err
    assert "measured[2].method: required key is missing" in err
