"""``ssmbench specs``: list, show, validate, diff, in tables and JSON; every subcommand has --help."""

import json

import pytest
from ssmbench.hwspecs import builtin_dir, load_all

SPECS = load_all()


@pytest.mark.parametrize("argv", [
    ("specs", "--help"), ("specs", "list", "--help"), ("specs", "show", "--help"),
    ("specs", "validate", "--help"), ("specs", "diff", "--help"),
])
def test_every_command_has_help(run_cli, argv):
    code, out, _ = run_cli(*argv)
    assert code == 0
    assert out.startswith("usage: ssmbench specs")


@pytest.mark.parametrize("argv", [
    ("specs",), ("specs", "show"), ("specs", "diff", "h100-sxm"), ("specs", "validate"),
    ("specs", "list", "--prefer", "best"),
])
def test_bad_arguments_exit_2(run_cli, argv):
    code, _, err = run_cli(*argv)
    assert code == 2 and "usage:" in err and "Traceback" not in err


def test_list_shows_every_spec_with_units_and_markers(run_cli):
    code, out, err = run_cli("specs", "list")
    assert code == 0 and err == ""
    for spec_id in SPECS:
        assert spec_id in out
    assert "787 TFLOP/s [m]" in out      # the H200's measured BF16 rate is preferred and marked
    assert "4.186 TB/s [m]" in out
    assert "[d]" in out and "[a]" in out and "unknown" in out and "n/a" in out
    assert "TFLOP/s" in out and "TB/s" in out and " W" in out


def test_list_json(run_cli):
    code, out, _ = run_cli("specs", "list", "--json")
    assert code == 0
    data = json.loads(out)
    rows = {r["id"]: r for r in data["specs"]}
    assert set(rows) == set(SPECS)
    h200 = rows["h200-sxm"]["values"]
    assert h200["compute.tensor.bf16"] == {
        "key": "compute.tensor.bf16", "value": pytest.approx(787e12), "unit": "FLOP/s", "display": "787 TFLOP/s [m]",
        "origin": "measured", "provenance": h200["compute.tensor.bf16"]["provenance"]}
    assert rows["t4"]["values"]["compute.tensor.bf16"]["origin"] == "absent"
    assert rows["gb200"]["values"]["compute.special_function"]["origin"] == "unknown"
    assert rows["pim-hbm"]["values"]["memory.dram.bandwidth"]["origin"] == "design assumption"
    assert rows["h100-sxm"]["values"]["compute.special_function"]["origin"] == "measured"


def test_list_prefer_datasheet(run_cli):
    _, out, _ = run_cli("specs", "list", "--json", "--prefer", "datasheet")
    h200 = {r["id"]: r for r in json.loads(out)["specs"]}["h200-sxm"]["values"]
    assert h200["compute.tensor.bf16"]["value"] == pytest.approx(989.4e12)
    assert h200["compute.tensor.bf16"]["origin"] == "datasheet"


def test_show_text_has_values_measured_and_sources(run_cli):
    code, out, _ = run_cli("specs", "show", "h200-sxm")
    assert code == 0
    for text in ("NVIDIA H200 SXM", "memory.dram.bandwidth", "4.8 TB/s", "4.186 TB/s [m]", "Measured ceilings",
                 "0.872", "2026-12-02", "nvidia-h200 [R]", "Sources of h200-sxm", "1.979 POP/s"):
        assert text in out, text


def test_show_json_lists_every_value(run_cli):
    code, out, _ = run_cli("specs", "show", "h200-sxm", "--json", "--prefer", "datasheet")
    assert code == 0
    data = json.loads(out)
    spec = SPECS["h200-sxm"]
    assert [v["key"] for v in data["values"]] == [k for k, _ in spec.data()]
    dram = {v["key"]: v for v in data["values"]}["memory.dram.bandwidth"]
    assert dram["value"] == pytest.approx(4.8e12) and dram["unit"] == "B/s" and dram["tag"] == "R"
    assert dram["used"]["origin"] == "datasheet"
    measured = {m["key"]: m for m in data["measured"]}
    assert measured["memory.dram.bandwidth"]["ratio_to_datasheet"] == pytest.approx(4186 / 4800)
    assert measured["power.idle"]["ratio_to_datasheet"] is None
    assert set(data["sources"]) == set(spec.sources)


def test_show_accepts_a_file(run_cli):
    path = str(builtin_dir() / "t4.yaml")
    code, out, _ = run_cli("specs", "show", path, "--json")
    assert code == 0 and json.loads(out)["id"] == "t4"


def test_validate_the_shipped_library(run_cli):
    files = [str(p) for p in sorted(builtin_dir().glob("*.yaml"))]
    code, out, err = run_cli("specs", "validate", *files)
    assert code == 0 and err == ""
    assert out.count("OK    ") == len(files)


def test_validate_json_reports_each_file(run_cli, write_spec):
    bad = write_spec("schema_version: 1\n")
    good = str(builtin_dir() / "l4.yaml")
    code, out, _ = run_cli("specs", "validate", "--json", good, bad)
    assert code == 2
    data = json.loads(out)
    assert data["valid"] is False
    assert [f["ok"] for f in data["files"]] == [True, False]
    assert "id: required key is missing" in data["files"][1]["problems"][0]


def test_diff_h100_h200(run_cli):
    code, out, _ = run_cli("specs", "diff", "h100-sxm", "h200-sxm", "--json", "--prefer", "datasheet")
    assert code == 0
    data = json.loads(out)
    diffs = {d["key"]: d for d in data["differences"]}
    assert diffs["memory.dram.bandwidth"]["ratio_b_over_a"] == pytest.approx(4.8 / 3.35)
    assert diffs["memory.dram.capacity"]["ratio_b_over_a"] == pytest.approx(141 / 80)
    assert "compute.sm_count" not in diffs and "compute.tensor.bf16" not in diffs
    assert diffs["interconnect.1.bandwidth"]["a"]["origin"] == "absent"
    code, out, _ = run_cli("specs", "diff", "h100-sxm", "h200-sxm", "--prefer", "datasheet")
    assert "1.433x" in out and "memory.dram.bandwidth" in out


def test_diff_lists_only_real_differences(run_cli):
    """The same GH100 rates printed to different precision ('66.9' and '67 TFLOP/s', '1978.9' and '1979')
    are named as equal within rounding, not listed as differences."""
    _, out, _ = run_cli("specs", "diff", "h100-sxm", "h200-sxm", "--json", "--prefer", "datasheet")
    data = json.loads(out)
    # the H100's energy values are derived from the H200's probe-measured (measured:) ones; on the datasheet
    # the H200 has none, so they differ here
    energy = {"energy.static_power", "energy.per_flop.tensor.bf16", "energy.per_flop.tensor.fp16",
              "energy.per_flop.tensor.tf32", "energy.per_flop.tensor.fp8",
              "energy.per_flop.vector.fp32", "energy.per_flop.special_function", "energy.per_byte.l2",
              "energy.per_byte.dram"}
    # so are the attained per-kernel parameters the H100 takes over from the H200's measured entries
    # (tests/test_hwspecs_library.py: the rule)
    from ssmbench.hwspecs import get_spec

    derived = {k for k, d in get_spec("h100-sxm").data()
               if d.source in ("derived-h200-achievable", "derived-h200-paths")}
    assert {d["key"] for d in data["differences"]} == {
        "memory.dram.capacity", "memory.dram.bandwidth", "interconnect.1.bandwidth"} | energy | derived | {
        "energy.path_power"}
    rounded = {r["key"]: r for r in data["equal_within_rounding"]}
    assert rounded["compute.tensor.fp64"] == {"key": "compute.tensor.fp64", "a": "66.9 TFLOP/s", "b": "67 TFLOP/s"}
    assert {"compute.tensor.fp8", "compute.vector.fp64", "memory.shared.bandwidth"} <= set(rounded)
    out = " ".join(run_cli("specs", "diff", "h100-sxm", "h200-sxm", "--prefer", "datasheet")[1].split())
    assert "compute.tensor.fp64 (66.9 TFLOP/s vs 67 TFLOP/s)" in out
    assert f"Values that differ ({len(data['differences'])};" in out


@pytest.mark.parametrize("prefer", ["measured", "datasheet"])
def test_diff_of_h200_with_itself_says_no_differences(run_cli, prefer):
    code, out, _ = run_cli("specs", "diff", "h200-sxm", "h200-sxm", "--prefer", prefer)
    assert code == 0 and "No value differs between h200-sxm and h200-sxm" in out and "Values that differ" not in out
    assert "Equal within" not in out


def test_diff_rounding_is_the_written_digits(run_cli, write_spec, h200_dict):
    """'4800 GB/s' is '4.8 TB/s' and '989.45' rounds to '989.4'; '4.9 TB/s' is beyond 4.8's rounding, and '701 W'
    differs from '700 W' by a whole written digit."""
    h200_dict.pop("measured")
    a = write_spec(h200_dict, "a.yaml")
    h200_dict["id"] = "b"
    h200_dict["memory"]["dram"]["bandwidth"]["value"] = "4800 GB/s"
    h200_dict["power"]["tdp"]["value"] = "701 W"
    h200_dict["compute"]["tensor"]["bf16"]["value"] = "989.45 TFLOP/s"
    b = write_spec(h200_dict, "b.yaml")
    _, out, _ = run_cli("specs", "diff", a, b, "--json")
    data = json.loads(out)
    assert [d["key"] for d in data["differences"]] == ["power.tdp"]
    assert [r["key"] for r in data["equal_within_rounding"]] == ["compute.tensor.bf16"]
    h200_dict["memory"]["dram"]["bandwidth"]["value"] = "4.9 TB/s"
    b = write_spec(h200_dict, "b2.yaml")
    _, out, _ = run_cli("specs", "diff", a, b, "--json")
    assert "memory.dram.bandwidth" in {d["key"] for d in json.loads(out)["differences"]}


def test_list_show_and_diff_default_to_the_same_ceilings_and_say_which(run_cli):
    from ssmbench.commands.specs import CEILINGS_SHOWN

    runs = {cmd: json.loads(run_cli("specs", *argv, "--json")[1])
            for cmd, argv in (("list", ("list",)), ("show", ("show", "h200-sxm")),
                              ("diff", ("diff", "h100-sxm", "h200-sxm")))}
    assert {r["prefer"] for r in runs.values()} == {"measured"}
    assert {r["ceilings"] for r in runs.values()} == {CEILINGS_SHOWN["measured"]}
    for argv in (("list",), ("show", "h200-sxm"), ("diff", "h100-sxm", "h200-sxm")):
        for prefer in ("measured", "datasheet"):
            out = run_cli("specs", *argv, "--prefer", prefer)[1]
            assert " ".join(CEILINGS_SHOWN[prefer].split()) in " ".join(out.split()), (argv, prefer)


def test_diff_prefer_measured_compares_attained_ceilings(run_cli):
    _, out, _ = run_cli("specs", "diff", "h100-sxm", "h200-sxm", "--json", "--prefer", "measured")
    diffs = {d["key"]: d for d in json.loads(out)["differences"]}
    assert diffs["compute.tensor.bf16"]["b"]["origin"] == "measured"
    assert diffs["compute.tensor.bf16"]["a"]["origin"] == "measured"
    assert diffs["compute.tensor.bf16"]["ratio_b_over_a"] == pytest.approx(787 / 780.8)
    assert diffs["power.idle"]["a"]["origin"] == "unknown" and diffs["power.idle"]["ratio_b_over_a"] is None


def test_diff_of_a_spec_with_itself_is_empty(run_cli):
    code, out, _ = run_cli("specs", "diff", "l4", "l4")
    assert code == 0 and "No value differs" in out
