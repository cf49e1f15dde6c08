"""The calibrate -> profile -> gap -> estimate flow on synthetic result files generated from known
parameters plus noise (calibrate/synthetic.py), on the built-in H200 spec."""

import contextlib
import io
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from ssmbench.calibrate.estimate import calibrated_estimate, estimate_detail
from ssmbench.calibrate.models import MaxEff, Overlap, SizeEff
from ssmbench.calibrate.profile import read_profile
from ssmbench.calibrate.synthetic import SyntheticGroup, true_time, write_synthetic
from ssmbench.calibrate.transfer import TRANSFER_WIDEN
from ssmbench.hwspecs import builtin_dir, get_spec, load_spec

import ssmbench.cli as cli

NOISE = 0.03
LINEAR = [dict(B=1, L=L, I=I, O=O) for L, I, O in itertools.product([16, 512, 4096], [1024, 4096], [2048, 8192])]
NORM = [dict(B=1, L=L, D=D) for L, D in itertools.product([128, 2048, 16384], [1024, 4096, 8192])]
SILU = [dict(B=1, L=L, D=D) for L, D in itertools.product([256, 4096, 32768], [1024, 4096, 8192])]


def _groups():
    return [
        SyntheticGroup("linear", "cublas", "torch.matmul", "bf16", "fwd", LINEAR,
                       MaxEff({"t0_s_per_launch": 6e-6, "eff.tensor": 0.7, "eff.dram": 0.85}, ("tensor", "dram"))),
        SyntheticGroup("rmsnorm", "torch_eager", "torch_ref", "bf16", "fwd", NORM,
                       Overlap({"t0_s_per_launch": 1.2e-5, "eff": 0.75, "p": 4.0}, ("dram",)),
                       failures=[(dict(B=64, L=16384, D=8192), "oom", "CUDA out of memory (synthetic)")]),
        SyntheticGroup("silu", "torch_eager", "torch_ref", "bf16", "fwd", SILU,
                       SizeEff({"t0_s_per_launch": 3e-6, "eff_max": 0.9, "W_half_s": 2e-5, "a": 2.0}, ())),
        # three shapes only: not calibrated on its own (said by name and count), so pooled with silu
        SyntheticGroup("softplus", "torch_eager", "torch_ref", "bf16", "fwd", SILU[:3],
                       SizeEff({"t0_s_per_launch": 3e-6, "eff_max": 0.9, "W_half_s": 2e-5, "a": 2.0}, ())),
    ]


def run_cli(monkeypatch, *argv):
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("ssmbench.commands.calibrate",))
    return cli.main(list(argv))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    spec = get_spec("h200-sxm")
    d = tmp_path_factory.mktemp("synthetic")
    fit_dir, val_dir = d / "fit", d / "validation"
    write_synthetic(fit_dir, spec, _groups(), "NVIDIA H200", noise=NOISE, seed=0)
    write_synthetic(val_dir, spec, _groups(), "NVIDIA H200", noise=NOISE, seed=1)
    return {"spec": spec, "fit": fit_dir, "val": val_dir, "dir": d}


@pytest.fixture(scope="module")
def calibrated(data):
    mp = pytest.MonkeyPatch()
    out = data["dir"] / "h200.calibration.json"
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            assert run_cli(mp, "calibrate", "--results", str(data["fit"]), "--hw", "h200-sxm", "--out", str(out),
                           "--json") == 0
    finally:
        mp.undo()
    return out, json.loads(buf.getvalue())


@pytest.fixture(scope="module")
def profile_path(calibrated):
    return calibrated[0]


def _group(profile, op):
    return next(g for g in profile.groups if g["key"]["op"] == op)


def test_profile_has_provenance_and_recovers_parameters(data, profile_path):
    p = read_profile(profile_path)
    assert p.spec_id == "h200-sxm"
    files = p.data["provenance"]["results"]
    assert len(files) == 1
    import hashlib
    assert files[0]["sha256"] == hashlib.sha256(Path(files[0]["path"]).read_bytes()).hexdigest()
    assert p.data["spec"]["ceilings"]["memory.dram.bandwidth"]["origin"] == "measured"
    lin = _group(p, "linear")
    assert lin["status"] == "calibrated"
    if lin["model"]["name"] == "max_eff":
        assert lin["model"]["params"]["eff.tensor"] == pytest.approx(0.7, rel=0.1)
        assert lin["model"]["params"]["eff.dram"] == pytest.approx(0.85, rel=0.1)
    for op in ("linear", "rmsnorm", "silu"):
        g = _group(p, op)
        assert g["status"] == "calibrated", g["reason"]
        assert g["cv"]["median_ape_pct"] <= 10.0
        assert g["cv"]["p90_ape_pct"] <= 25.0
        assert g["cv"]["coverage"] >= 0.6  # 9-18 held-out cases per group: coverage is coarse
    soft = _group(p, "softplus")
    assert soft["status"] == "pooled"
    assert "softplus" in soft["reason"] and "3 distinct shape" in soft["reason"]
    assert soft["pooled_from"]["level"] == "family+backend"
    assert soft["pooled_from"]["label"] == "NVIDIA H200: family elementwise [torch_ref]"
    assert [e["status"] for e in p.data["excluded"]] == ["oom"]


def test_profile_is_never_overwritten_silently(data, profile_path, monkeypatch, capsys):
    before = profile_path.read_bytes()
    assert run_cli(monkeypatch, "calibrate", "--results", str(data["fit"]), "--hw", "h200-sxm",
                   "--out", str(profile_path)) == 2
    assert "not overwritten" in capsys.readouterr().err
    assert profile_path.read_bytes() == before


def test_calibrate_prints_a_summary_of_every_group(calibrated):
    summary = calibrated[1]
    assert summary["profile"] == str(calibrated[0])
    statuses = {g["label"].split(": ", 1)[1].split("/")[0]: g["status"] for g in summary["groups"]}
    assert statuses == {"linear": "calibrated", "rmsnorm": "calibrated", "silu": "calibrated",
                        "softplus": "pooled"}


def test_gap_markdown_json_and_plot(data, profile_path, monkeypatch, capsys, tmp_path):
    png = tmp_path / "gap.png"
    assert run_cli(monkeypatch, "gap", "--results", str(data["fit"]), "--hw", "h200-sxm",
                   "--calibration", str(profile_path), "--plot", str(png)) == 0
    md = capsys.readouterr().out
    for label in ("**bound**", "**measured**", "**calibrated**", "% of roofline", "## Per family", "## Per case",
                  "Excluded cases", "TFLOP/s", "TB/s"):
        assert label in md
    assert png.stat().st_size > 10_000
    assert run_cli(monkeypatch, "gap", "--results", str(data["fit"]), "--hw", "h200-sxm",
                   "--calibration", str(profile_path), "--format", "json") == 0
    rep = json.loads(capsys.readouterr().out)
    fams = {f["family"]: f for f in rep["families"]}
    assert fams["gemm"]["meets_target"] and fams["norm"]["meets_target"]
    # softplus (elementwise) is too small on its own: pooled, and its rows and family say so
    assert fams["elementwise"]["n_pooled"] == 1 and fams["elementwise"]["cv_pooled"]["n"] == 3
    soft = [r for r in rep["cases"] if r["op"] == "softplus"]
    assert all(r["label"] == "pooled" and r["pooled_from"]["level"] == "family+backend"
               and r["error_kind"] == "cross-validated (leave-shape-out within the pooled level)" for r in soft)
    assert rep["overall"]["pooled"]["n"] == 3 and rep["overall"]["n_without_estimate"] == 0
    assert "pooled from NVIDIA H200: family elementwise [torch_ref]" in md
    rows = [r for r in rep["cases"] if r["op"] == "linear"]
    assert all(r["label"] == "calibrated" and r["error_kind"].startswith("cross-validated") for r in rows)
    for r in rows:
        assert r["roofline_pct"] == pytest.approx(100 * r["bound_s"] / r["measured_s"])
        assert r["attribution"]["to"] in ("compute", "memory", "fixed overhead")
    small = min(rows, key=lambda r: r["bound_s"])  # 6 us of fixed time dwarfs a sub-us bound
    assert small["attribution"]["to"] == "fixed overhead"
    big = max(rows, key=lambda r: r["bound_s"])
    assert big["attribution"]["to"] == "compute"


def test_gap_fits_on_the_fly_without_a_profile(data, monkeypatch, capsys):
    assert run_cli(monkeypatch, "gap", "--results", str(data["fit"]), "--hw", "h200-sxm", "--json") == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["calibration"]["fitted_here"]
    assert {g["status"] for g in rep["groups"]} == {"calibrated", "pooled"}


def test_gap_on_results_not_used_in_the_fit_reports_validation_errors(data, profile_path, monkeypatch, capsys):
    assert run_cli(monkeypatch, "gap", "--results", str(data["val"]), "--hw", "h200-sxm",
                   "--calibration", str(profile_path), "--json") == 0
    rep = json.loads(capsys.readouterr().out)
    gemm = next(f for f in rep["families"] if f["family"] == "gemm")
    assert gemm["cv"]["n"] == 0 and gemm["validation"]["n"] == len(LINEAR)
    assert gemm["validation"]["median_ape_pct"] < 10.0
    # the overall section counts them too (a transferred profile's cases are all validation)
    assert rep["overall"]["all"]["n"] == 0
    assert rep["overall"]["validation"]["n"] == sum(f["validation"]["n"] for f in rep["families"])
    v = rep["by_pace"]["validation"]
    assert v["gpu"]["n"] + v["host"]["n"] == rep["overall"]["validation"]["n"]


def test_calibrated_estimate_matches_truth_within_interval(data, profile_path):
    spec = data["spec"]
    g = _groups()[0]
    dims = dict(B=1, L=1024, I=2048, O=4096)  # not a fitted shape, inside every fitted range
    est, lo, hi, label = calibrated_estimate(str(profile_path), "linear", "cublas", dims, "bf16", "fwd")
    assert label == "calibrated"
    assert lo <= est <= hi
    truth = true_time(g, spec, dims)
    assert est == pytest.approx(truth, rel=0.1)
    d = estimate_detail(str(profile_path), "linear", "cublas", dims, "bf16", "fwd")
    assert d["bound_s"] < est and d["group"].startswith("NVIDIA H200") and not d["extrapolated"]


def test_extrapolated_names_the_dimension(profile_path):
    # B was 1 in every fitted shape: B = 2 is outside the data even where the bound is inside its range
    d = estimate_detail(str(profile_path), "linear", "cublas", dict(B=2, L=1024, I=2048, O=4096), "bf16", "fwd")
    assert d["extrapolated"] and d["extrapolated_dims"] == ["B"]
    assert d["extrapolation"] == ["B=2 outside the fitted B = 1..1"]
    d = estimate_detail(str(profile_path), "linear", "cublas", dict(B=1, L=64, I=2048, O=16384), "bf16", "fwd")
    assert d["extrapolated_dims"] == ["O"]


def _slower_spec(tmp_path):
    """A copy of the H200 spec with another id and half the memory bandwidth."""
    data = yaml.safe_load((builtin_dir() / "h200-sxm.yaml").read_text())
    data["id"] = "h200-halfbw-test"
    data["name"] = "Test accelerator (H200 with half the bandwidth)"
    data["hypothetical"] = True
    data["memory"]["dram"]["bandwidth"]["value"] = "2.4 TB/s"
    data.pop("measured")  # a hypothetical device has no measured ceilings
    path = tmp_path / "halfbw.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(path)


def test_transfer_to_another_spec_is_labelled_and_wider(data, profile_path, tmp_path):
    target = _slower_spec(tmp_path)
    dims = dict(B=1, L=16384, D=8192)  # memory bound rmsnorm: time follows the bandwidth
    e_cal = calibrated_estimate(str(profile_path), "rmsnorm", "torch_eager", dims, "bf16", "fwd")
    e_tr = calibrated_estimate(str(profile_path), "rmsnorm", "torch_eager", dims, "bf16", "fwd", spec=target)
    assert e_cal.label == "calibrated" and e_tr.label == "transferred"
    # measured 4.186 TB/s ceiling on the H200 vs 2.4 TB/s datasheet value on the target
    assert e_tr.estimate_s / e_cal.estimate_s == pytest.approx(4.186 / 2.4, rel=0.05)
    w_cal = np.log(e_cal.hi_s / e_cal.lo_s)
    w_tr = np.log(e_tr.hi_s / e_tr.lo_s)
    assert w_tr >= TRANSFER_WIDEN * w_cal * 0.999


def test_gap_with_a_transferred_profile_labels_every_estimate(data, profile_path, monkeypatch, capsys, tmp_path):
    target = _slower_spec(tmp_path)
    spec_file = tmp_path / "halfbw.yaml"
    assert run_cli(monkeypatch, "gap", "--results", str(data["val"]), "--hw", str(spec_file),
                   "--calibration", str(profile_path), "--allow-device-mismatch") == 0
    md = capsys.readouterr().out
    assert "**Transferred**" in md and "**Device mismatch**" in md
    assert "(calibrated)" not in md and "(transferred)" in md
    assert target.id in md


def test_estimates_for_a_sequence_of_ops(profile_path):
    from ssmbench.calibrate.estimate import calibrated_estimate_or_reason, sum_estimates

    lin, none_reason = calibrated_estimate_or_reason(str(profile_path), "linear", "cublas",
                                                     dict(B=1, L=2048, I=2048, O=2048), "bf16", "fwd")
    norm, _ = calibrated_estimate_or_reason(str(profile_path), "rmsnorm", "torch_eager",
                                            dict(B=1, L=2048, D=2048), "bf16", "fwd")
    missing, reason = calibrated_estimate_or_reason(str(profile_path), "layernorm", "torch_eager",
                                                    dict(B=1, L=2048, D=2048), "bf16", "fwd")
    assert none_reason is None and missing is None and "no calibrated group" in reason
    total = sum_estimates([(lin, 2), (norm, 1)])
    assert total.estimate_s == pytest.approx(2 * lin.estimate_s + norm.estimate_s)
    assert total.lo_s <= total.estimate_s <= total.hi_s and total.label == "calibrated"
    soft, _ = calibrated_estimate_or_reason(str(profile_path), "softplus", "torch_eager",
                                            dict(B=1, L=2048, D=2048), "bf16", "fwd")
    assert soft.label == "pooled" and soft.lo_s <= soft.estimate_s <= soft.hi_s
    assert sum_estimates([(lin, 1), (soft, 1)]).label == "calibrated + pooled"
