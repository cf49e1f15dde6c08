"""A results folder read as users lay it out: recursed, measurement files taken by their content, other
JSON / JSONL (byte audits, probes, profiles, gap reports) skipped and listed, damaged result files an
error naming them."""

import itertools
import json
from pathlib import Path

import pytest

import ssmbench.cli as cli
from ssmbench.calibrate.models import RooflineConst
from ssmbench.calibrate.profile import read_profile
from ssmbench.calibrate.sources import find_all
from ssmbench.calibrate.synthetic import SyntheticGroup, write_synthetic
from ssmbench.errors import UserError
from ssmbench.hwspecs import get_spec

REPO = Path(__file__).resolve().parent.parent
STORED = REPO / "results" / "h200" / "2026-12-02"
SHAPES = [dict(B=1, L=L, D=D) for L, D in itertools.product([128, 1024, 8192], [1024, 4096])]


def _cli(monkeypatch, *argv):
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("ssmbench.commands.calibrate",))
    return cli.main(list(argv))


def _folder(tmp_path):
    """A run in runs/, and beside it what a results folder also holds."""
    g = SyntheticGroup("rmsnorm", "torch_eager", "torch_ref", "bf16", "fwd", SHAPES,
                       RooflineConst({"t0_s_per_launch": 4e-6, "eff": 0.7}), [])
    write_synthetic(tmp_path / "runs", get_spec("h200-sxm"), [g], "NVIDIA H200", noise=0.02)
    (tmp_path / "audit").mkdir()
    # a byte audit: schema_version, meta and well-formed cases, but no timing and its own keys
    (tmp_path / "audit" / "byte_audit.json").write_text(json.dumps(
        {"schema_version": 1, "tool": "ncu", "metrics": [], "meta": {}, "cases": []}))
    (tmp_path / "profile.json").write_text(json.dumps({"schema_version": 1, "kind": "ssmbench.calibration_profile"}))
    (tmp_path / "notes.json").write_text(json.dumps(["a", "list"]))
    (tmp_path / "log.jsonl").write_text(json.dumps({"event": "start"}) + "\n")
    return tmp_path


def test_a_folder_is_recursed_and_other_files_are_skipped_and_listed(tmp_path):
    found = find_all([_folder(tmp_path)])
    assert [rf.path.parent.name for rf in found.files] == ["runs"]
    skipped = {Path(s["path"]).name: s["reason"] for s in found.skipped}
    assert set(skipped) == {"byte_audit.json", "profile.json", "notes.json", "log.jsonl"}
    assert "tool 'ncu'" in skipped["byte_audit.json"]
    assert "kind 'ssmbench.calibration_profile'" in skipped["profile.json"]
    assert all(r.startswith("not a measurement file") for r in skipped.values())


def test_calibrate_lists_the_skipped_files_on_stderr_and_in_the_profile(tmp_path, monkeypatch, capsys):
    folder = _folder(tmp_path / "data")
    out = tmp_path / "p.json"
    assert _cli(monkeypatch, "calibrate", "--results", str(folder), "--hw", "h200-sxm", "--out", str(out)) == 0
    err = capsys.readouterr().err
    assert f"skipped {folder / 'audit' / 'byte_audit.json'}: not a measurement file" in err
    prov = read_profile(out).data["provenance"]
    assert {Path(s["path"]).name for s in prov["skipped"]} == {"byte_audit.json", "profile.json", "notes.json",
                                                                "log.jsonl"}
    assert [Path(r["path"]).parent.name for r in prov["results"]] == ["runs"]


@pytest.mark.parametrize("name, text, expected", [
    ("run.json", json.dumps({"schema_version": 1, "meta": {}, "cases": []}), "missing top-level key 'timing'"),
    ("run.json", json.dumps({"schema_version": 1, "meta": {}, "timing": {}, "cases": {}}), "'cases' must be a list"),
    ("run.json", '{"schema_version": 1, "meta": {', "not valid JSON"),
    ("run.jsonl", '{"record": "header", "schema_version": 1}\n{"record": "case", "key"\n', "line 2 is not valid JSON"),
    ("run.jsonl", '{"record": "head', "first line must be the header"),
])
def test_a_damaged_result_file_in_a_folder_is_an_error_naming_it(tmp_path, monkeypatch, capsys, name, text, expected):
    folder = _folder(tmp_path / "data")
    bad = folder / "runs" / "more" / name
    bad.parent.mkdir()
    bad.write_text(text)
    with pytest.raises(UserError) as exc:
        find_all([folder])
    assert str(bad) in str(exc.value) and expected in str(exc.value)
    out = tmp_path / "p.json"
    assert _cli(monkeypatch, "calibrate", "--results", str(folder), "--hw", "h200-sxm", "--out", str(out)) == 2
    assert str(bad) in capsys.readouterr().err and not out.exists()


def test_a_folder_of_only_other_files_says_what_it_skipped(tmp_path):
    (tmp_path / "gap.json").write_text(json.dumps({"schema_version": 1, "kind": "ssmbench.gap_report"}))
    with pytest.raises(UserError, match=r"no measure result files.*\n  skipped .*gap.json: not a measurement"):
        find_all([tmp_path])


def test_the_stored_folder_reads_as_its_two_measurement_subfolders():
    """results/h200/2026-12-02 holds byte audits and the calibration outputs beside the two folders of
    runs: read whole, it gives the same files in the same order (so the same fits) as the two named."""
    whole = find_all([STORED])
    named = find_all([STORED / "default", STORED / "calibration-torchref"])
    assert [rf.path for rf in whole.files] == [rf.path for rf in named.files]
    assert [rf.sha256 for rf in whole.files] == [rf.sha256 for rf in named.files]
    assert {Path(s["path"]).name for s in whole.skipped} == {"byte_audit_ext.json", "byte_audit_noext.json",
                                                             "gap.json", "profile.json", "energy-fit.json"}
    assert named.skipped == []
    reversed_order = find_all([STORED / "calibration-torchref", STORED / "default"])
    assert [rf.path for rf in reversed_order.files] == [rf.path for rf in named.files]
