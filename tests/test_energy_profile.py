"""The energy fit as a calibration profile (``calibrate/energy_profile.py``): ``energy-fit --out`` writes
one, ``predict --calibration`` applies it as the calibrated energy of a step, on the profile's device only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ssmbench.calibrate import energy_profile as ep
from ssmbench.calibrate.profile import read_profile

from ssmbench.cli import main

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results" / "h200" / "2026-12-02" / "default"


@pytest.fixture(scope="module")
def profile_path(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("energy") / "energy-profile.json"
    assert main(["energy-fit", "--results", str(RESULTS), "--hw", "h200-sxm", "--out", str(out)]) == 0
    return out


def test_energy_fit_writes_a_calibration_profile_not_a_spec_fragment(profile_path, capsys):
    prof = read_profile(profile_path)
    sec = prof.data["energy"]
    assert prof.data["kind"] == "ssmbench.calibration_profile" and prof.groups == [] and "measured" not in prof.data
    assert sec["label"] == "calibrated estimate" and sec["static_power_w"] > 0
    assert sec["per_term"]["tensor.bf16"]["unit"] == "J/FLOP" and sec["per_term"]["dram"]["unit"] == "J/B"
    fams = sec["leave_shape_out"]["measured_time"]
    assert fams["all"]["n"] > 100 and 0 <= fams["all"]["median_ape_pct"] < 100
    assert main(["energy-fit", "--results", str(RESULTS), "--hw", "h200-sxm", "--out", str(profile_path)]) == 2
    assert "not overwritten" in capsys.readouterr().err


def test_predict_with_the_profile_adds_the_calibrated_energy_of_the_step(profile_path, capsys):
    args = ["predict", "--model", "mamba2-130m", "--hw", "h200-sxm", "--phase", "prefill", "--batch", "1",
            "--seqlen", "2048", "--calibration", str(profile_path)]
    assert main(args + ["--json"]) == 0
    t = json.loads(capsys.readouterr().out)["total"]
    cal = t["calibrated"]["energy"]
    sec = read_profile(profile_path).data["energy"]
    fit = ep.fit_of(sec)
    dyn = sum(fit.value(k) * v for k, v in t["energy"]["counts"].items())
    assert cal["label"] == "calibrated estimate" and cal["time_basis"].startswith("achievable time")
    assert cal["energy_j"] == pytest.approx(fit.static_w * cal["time_s_after_power_limit"] + dyn)
    assert cal["energy_per_token_j"] == pytest.approx(cal["energy_j"] / 2048)
    assert main(args) == 0
    assert "energy per step (calibrated estimate" in capsys.readouterr().out
    assert main(args[:4] + ["b200"] + args[5:] + ["--json"]) == 0
    other = json.loads(capsys.readouterr().out)["total"]["calibrated"]["energy"]
    assert other["label"] is None and "does not transfer" in other["note"]


def test_the_power_limit_stretches_the_calibrated_energy():
    sec = {"static_power_w": 100.0, "per_term": {"tensor.bf16": {"value": 1e-12, "unit": "J/FLOP"}},
           "undetermined": {}, "n_fit_cases": 10, "power_limit_w": 500.0}
    e = ep.step_energy(sec, {"tensor.bf16": 1e12}, 1e-3)  # 1 J in 1 ms: 1100 W wanted
    assert e["power_limited"] and e["time_s_after_power_limit"] == pytest.approx(1.0 / 400.0)
    assert e["energy_j"] == pytest.approx(500.0 * 1.0 / 400.0) and e["avg_power_w"] == pytest.approx(500.0)


def test_the_calibrated_energy_of_a_host_paced_step_is_at_the_composed_step_time(capsys):
    """Under a runtime the calibrated step is max(host, device) (``runtime_step.compose``): the static power is
    paid for that whole time, not for the ops' calibrated sum (a host-paced decode step runs 4x longer)."""
    profile = REPO / "results" / "h200" / "2026-12-02" / "calibration" / "profile.json"
    assert main(["predict", "--model", "qwen2.5-0.5b", "--hw", "h200-sxm", "--phase", "decode", "--batch", "1",
                 "--seqlen", "2048", "--runtime", "hf-eager", "--calibration", str(profile), "--json"]) == 0
    cal = json.loads(capsys.readouterr().out)["total"]["calibrated"]
    e = cal["energy"]
    assert cal["estimate_s"] > 2 * cal["ops_sum_s"]  # the host sets the pace of this step
    assert e["time_s"] == pytest.approx(cal["estimate_s"]) and e["time_basis"] == "calibrated time estimate"
    assert e["energy_j"] >= ep.fit_of(read_profile(profile).data["energy"]).static_w * cal["estimate_s"]
    assert main(["predict", "--model", "qwen2.5-0.5b", "--hw", "h200-sxm", "--phase", "decode", "--batch", "1",
                 "--seqlen", "2048", "--runtime", "hf-eager", "--calibration", str(profile)]) == 0
    out = capsys.readouterr().out  # the total is the composed step, the ops' sum a line of its own
    assert "estimate (the step under hf-eager: max(host" in out and "the ops' sum (calibrated" in out
    assert "estimate (sum over ops)" not in out
