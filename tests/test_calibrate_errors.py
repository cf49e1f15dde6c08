"""Bad inputs give one clear message (exit code 2 from the CLI), never a silent partial fit."""

import itertools
import json

import pytest
from ssmbench.calibrate.join import join
from ssmbench.calibrate.models import RooflineConst
from ssmbench.calibrate.profile import read_profile
from ssmbench.calibrate.sources import load_results
from ssmbench.calibrate.synthetic import SyntheticGroup, write_synthetic
from ssmbench.hwspecs import (
    SpecError,
    device_matches,
    get_spec,
    load_all,
    spec_for_device,
)
from ssmbench.measure.results import ResultWriter

import ssmbench.cli as cli
from ssmbench.errors import UserError

TRUTH = RooflineConst({"t0_s_per_launch": 4e-6, "eff": 0.7})
SHAPES = [dict(B=1, L=L, D=D) for L, D in itertools.product([128, 1024, 8192], [1024, 4096])]


def run_cli(monkeypatch, *argv):
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("ssmbench.commands.calibrate",))
    return cli.main(list(argv))


@pytest.fixture(scope="module")
def spec():
    return get_spec("h200-sxm")


def _write(tmp_path, spec, shapes=SHAPES, device="NVIDIA H200", op="rmsnorm", failures=()):
    g = SyntheticGroup(op, "torch_eager", "torch_ref", "bf16", "fwd", list(shapes), TRUTH, list(failures))
    write_synthetic(tmp_path, spec, [g], device, noise=0.02)
    return tmp_path


def _raw(tmp_path, cases, device="NVIDIA H200"):
    w = ResultWriter(tmp_path, {"device": {"type": "cuda", "name": device}}, {})
    for c in cases:
        w.add(c)
    return w.finish()


@pytest.mark.parametrize("device, expected", [
    ("NVIDIA H200", True),
    ("NVIDIA H200 SXM", False),  # not a name the driver reports: exact names only, no word matching
    ("nvidia h200", False),
    ("NVIDIA H200 NVL", False),
    ("NVIDIA H100 80GB HBM3", False),
    ("NVIDIA H20", False),
    ("Intel(R) Xeon(R) Processor", False),
    ("", False),
])
def test_device_match_rule(spec, device, expected):
    assert device_matches(spec, device) is expected


def test_spec_for_device():
    assert spec_for_device("NVIDIA H200").id == "h200-sxm"
    assert spec_for_device("NVIDIA H100 80GB HBM3").id == "h100-sxm"
    with pytest.raises(SpecError) as exc:
        spec_for_device("NVIDIA H300")
    msg = str(exc.value)
    assert "'NVIDIA H300'" in msg and "known device names" in msg and "'NVIDIA H200' (h200-sxm)" in msg
    specs = load_all()
    names = [n for s in specs.values() for n in s.device_names]
    assert len(names) == len(set(names))  # each name names one spec
    assert all(not s.device_names for s in specs.values() if s.hypothetical)
    assert all(spec_for_device(n) is not None for n in names)
    # a hypothetical design derived from a real spec never matches a device, even with its names
    derived = get_spec("h200-sxm").model_copy(update={"hypothetical": True})
    assert derived.device_names == ["NVIDIA H200"] and not device_matches(derived, "NVIDIA H200")


def test_several_specs_with_one_device_name_is_an_error(monkeypatch):
    import ssmbench.hwspecs.loader as loader

    h200 = get_spec("h200-sxm")
    twin = h200.model_copy(update={"id": "h200-twin"})
    monkeypatch.setattr(loader, "load_all", lambda: {"h200-sxm": h200, "h200-twin": twin})
    with pytest.raises(SpecError, match=r"several specs \(h200-sxm, h200-twin\)"):
        spec_for_device("NVIDIA H200")


def test_empty_results_directory(tmp_path, monkeypatch, capsys):
    assert run_cli(monkeypatch, "calibrate", "--results", str(tmp_path), "--hw", "h200-sxm",
                   "--out", str(tmp_path / "p.json")) == 2
    err = capsys.readouterr().err
    assert "no measure result files" in err and str(tmp_path) in err


def test_missing_results_path(tmp_path):
    with pytest.raises(UserError, match="no such file or directory"):
        load_results([tmp_path / "nope"])


def test_result_file_without_cases(tmp_path):
    _raw(tmp_path, [])
    with pytest.raises(UserError, match="no measured cases"):
        load_results([tmp_path])


def test_only_failed_cases(tmp_path, spec):
    rec = {"key": "rmsnorm/torch_eager/torch_ref/bf16/fwd/B=1,D=64,L=8", "op": "rmsnorm", "impl": "torch_eager",
           "backend": "torch_ref", "dims": {"B": 1, "L": 8, "D": 64}, "dtype": "bf16", "mode": "fwd",
           "status": "failed_check", "reason": "error 3x the reference"}
    _raw(tmp_path, [rec])
    with pytest.raises(UserError, match=r"no measured case with status 'ok'.*1 failed_check"):
        join(load_results([tmp_path]), spec)


def test_mismatched_device_is_an_error_unless_allowed(tmp_path, spec, monkeypatch, capsys):
    _write(tmp_path, spec, device="NVIDIA H100 80GB HBM3")
    out = tmp_path / "p.json"
    assert run_cli(monkeypatch, "calibrate", "--results", str(tmp_path), "--hw", "h200-sxm", "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert "NVIDIA H100 80GB HBM3" in err and "h200-sxm" in err and "--allow-device-mismatch" in err
    assert not out.exists()
    assert run_cli(monkeypatch, "calibrate", "--results", str(tmp_path), "--hw", "h200-sxm", "--out", str(out),
                   "--allow-device-mismatch") == 0
    assert "device mismatch allowed" in capsys.readouterr().err
    p = read_profile(out)
    assert p.data["provenance"]["device_mismatch"] is True
    assert all(g["device_mismatch"] for g in p.groups)


def test_too_few_shapes_names_the_group_and_count(tmp_path, spec, monkeypatch, capsys):
    _write(tmp_path, spec, shapes=SHAPES[:2])
    assert run_cli(monkeypatch, "calibrate", "--results", str(tmp_path), "--hw", "h200-sxm",
                   "--out", str(tmp_path / "p.json")) == 2
    err = capsys.readouterr().err
    assert "no group could be calibrated" in err
    assert "rmsnorm/torch_eager [torch_ref] bf16 fwd has 2 distinct shape(s)" in err and "at least 4" in err


def test_some_groups_too_small_are_pooled_and_labelled(tmp_path, spec, monkeypatch, capsys):
    groups = [SyntheticGroup("rmsnorm", "torch_eager", "torch_ref", "bf16", "fwd", SHAPES, TRUTH),
              SyntheticGroup("layernorm", "torch_eager", "torch_ref", "bf16", "fwd", SHAPES[:3], TRUTH)]
    write_synthetic(tmp_path, spec, groups, "NVIDIA H200", noise=0.02)
    out = tmp_path / "p.json"
    assert run_cli(monkeypatch, "calibrate", "--results", str(tmp_path), "--hw", "h200-sxm", "--out", str(out)) == 0
    captured = capsys.readouterr()
    # too small on its own: said so, then estimated from the family on its backend, and labelled
    assert "pooled: group NVIDIA H200: layernorm/torch_eager [torch_ref] bf16 fwd has 3 distinct shape(s)" \
        in captured.err
    assert "family norm [torch_ref]" in captured.err
    assert "calibrated" in captured.out and "wrote calibrated profile" in captured.out
    profile = read_profile(out)
    statuses = {g["key"]["op"]: g["status"] for g in profile.groups}
    assert statuses == {"rmsnorm": "calibrated", "layernorm": "pooled"}
    g = next(g for g in profile.groups if g["key"]["op"] == "layernorm")
    assert g["pooled_from"]["level"] == "family+backend" and g["pooled_from"]["n_groups"] == 2
    assert g["model"]["name"] == "achievable_eff" and "group_scale" in g["model"]["params"]
    assert g["cv"]["scheme"].startswith("leave-shape-out within the pooled level")
    assert len(g["heldout"]) == 3 and "leave-group-out" in g["interval"]["method"]
    # the truth is one model for both ops: the pooled estimate is close to it
    assert g["cv"]["median_ape_pct"] < 10.0


def test_min_shapes_and_level_are_checked(tmp_path, spec, monkeypatch, capsys):
    _write(tmp_path, spec)
    assert run_cli(monkeypatch, "calibrate", "--results", str(tmp_path), "--hw", "h200-sxm",
                   "--out", str(tmp_path / "p.json"), "--level", "1.5") == 2
    assert "between 0 and 1" in capsys.readouterr().err
    assert run_cli(monkeypatch, "calibrate", "--results", str(tmp_path), "--hw", "h200-sxm",
                   "--out", str(tmp_path / "p.json"), "--min-shapes", "2") == 2
    assert "at least 3" in capsys.readouterr().err


def test_unpredicted_cases_are_named_and_only_skipped_on_request(tmp_path, spec):
    _write(tmp_path, spec)
    block = {"key": "block:mamba2/fused/mamba_ssm/bf16/fwd/B=1,L=2048", "op": "block:mamba2", "impl": "fused",
             "backend": "mamba_ssm", "dims": {"B": 1, "L": 2048}, "dtype": "bf16", "mode": "fwd", "status": "ok",
             "reason": None, "time_s": {"median": 1e-3}}
    _raw(tmp_path, [block])
    with pytest.raises(UserError) as exc:
        join(load_results([tmp_path]), spec)
    msg = str(exc.value)
    assert "block:mamba2" in msg and "--skip-unpredicted" in msg
    joined = join(load_results([tmp_path]), spec, skip_unpredicted=True)
    assert len(joined.cases) == len(SHAPES)
    assert [e["status"] for e in joined.excluded] == ["unpredicted"]


def test_unknown_spec(tmp_path, spec, monkeypatch, capsys):
    _write(tmp_path, spec)
    assert run_cli(monkeypatch, "gap", "--results", str(tmp_path), "--hw", "no-such-gpu") == 2
    assert "unknown spec id 'no-such-gpu'" in capsys.readouterr().err


def test_profile_reader_checks_kind_and_version(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": 1, "meta": {}, "cases": []}))
    with pytest.raises(UserError, match="not a calibration profile"):
        read_profile(bad)
    bad.write_text(json.dumps({"schema_version": 99, "kind": "ssmbench.calibration_profile"}))
    with pytest.raises(UserError, match="schema_version 99 is not supported"):
        read_profile(bad)
    bad.write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        read_profile(bad)
    with pytest.raises(UserError, match="not found"):
        read_profile(tmp_path / "missing.json")


def test_estimate_for_an_uncalibrated_identity(tmp_path, spec):
    from ssmbench.calibrate.estimate import calibrated_estimate
    from ssmbench.calibrate.fit import fit_all
    from ssmbench.calibrate.profile import Profile, build_profile

    _write(tmp_path, spec)
    joined = join(load_results([tmp_path]), spec)
    prof = Profile(build_profile(joined, fit_all(joined), {"level": 0.8, "min_shapes": 4, "group_by": "op"}))
    with pytest.raises(UserError, match=r"no calibrated group for layernorm/torch_eager bf16 fwd.*holds: rmsnorm"):
        calibrated_estimate(prof, "layernorm", "torch_eager", {"B": 1, "L": 64, "D": 512}, "bf16", "fwd")


def test_help_texts_render(monkeypatch, capsys):
    # argparse formats help strings with %: a bare % in a help text breaks `ssmbench --help`
    for argv in (["--help"], ["calibrate", "--help"], ["gap", "--help"]):
        with pytest.raises(SystemExit) as exc:
            run_cli(monkeypatch, *argv)
        assert exc.value.code == 0
        assert "calibrate" in capsys.readouterr().out


def test_a_retried_case_counts_by_its_later_record_and_repeats_all_count(tmp_path, spec):
    """A resumed sweep retries a case that was unavailable or timed out: the later record (by
    started_utc) is the case; the earlier one is excluded as superseded, naming what replaced it.
    A case measured twice (a repeat on another lease) gives two samples."""
    key = "rmsnorm/torch_eager/torch_ref/bf16/fwd/B=1,D=1024,L=128"
    base = {"key": key, "op": "rmsnorm", "impl": "torch_eager", "backend": "torch_ref",
            "dims": {"B": 1, "L": 128, "D": 1024}, "dtype": "bf16", "mode": "fwd"}
    _raw(tmp_path / "a", [{**base, "status": "timeout", "reason": "no result after 90 s",
                           "started_utc": "2026-12-02T19:35:04Z"}])
    _raw(tmp_path / "b", [{**base, "status": "ok", "reason": None, "time_s": {"median": 2e-5},
                           "started_utc": "2026-12-02T21:28:14Z"}])
    for order in (["a", "b"], ["b", "a"]):  # the record's time decides, not the order of the paths
        joined = join(load_results([tmp_path / d for d in order]), spec)
        assert [c.key for c in joined.cases] == [key] and joined.cases[0].measured_s == 2e-5
        (ex,) = joined.excluded
        assert ex["status"] == "superseded" and ex["file"].startswith(str(tmp_path / "a"))
        assert str(tmp_path / "b") in ex["reason"]
    _raw(tmp_path / "c", [{**base, "status": "ok", "reason": None, "time_s": {"median": 2.2e-5},
                           "started_utc": "2026-12-02T22:00:00Z"}])
    joined = join(load_results([tmp_path]), spec)
    assert sorted(c.measured_s for c in joined.cases) == [2e-5, 2.2e-5]
    assert [e["status"] for e in joined.excluded] == ["superseded"]
