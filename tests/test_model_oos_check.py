"""scripts/model_oos_check.py: the estimates it writes before a run are the ones `ssmbench characterize` gives the
run's records afterwards (same prediction path), and its check reports their errors against the records."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ssmbench.cli import main as cli

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "results/h200/2026-12-03/models"
PROFILE = REPO / "results/h200/2026-12-02/calibration/profile.json"
SUITE = """name: mini
dtype: bf16
entries:
  - {model: qwen2.5-0.5b, runner: hf, arch: qwen2, prefill: [[8, 2048]], decode: [[1, 2048]]}
  - {model: llama-3.2-1b, runner: hf, arch: llama, train: [[4, 2048]], optimizer: true}
  - {model: llama-3.2-1b, runner: hf, arch: llama, prefill: [[3, 1000]]}
"""


def _script(*args):
    return subprocess.run([sys.executable, str(REPO / "scripts" / "model_oos_check.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("oos")
    (tmp / "suite.yaml").write_text(SUITE)
    pred = _script("--predict-suite", tmp / "suite.yaml", "--calibration", PROFILE, "--json", tmp / "pred.json")
    assert pred.returncode == 0, pred.stderr
    assert cli(["characterize", "--results", str(RUN), "--calibration", str(PROFILE), "--format", "json",
                "--out", str(tmp / "char.json")]) == 0
    chk = _script("--check", tmp / "char.json", "--predicted", tmp / "pred.json", "--json", tmp / "check.json")
    assert chk.returncode == 0, chk.stderr
    return (json.loads((tmp / "pred.json").read_text()), json.loads((tmp / "char.json").read_text()),
            json.loads((tmp / "check.json").read_text()), chk.stdout)


def test_estimates_before_equal_characterize(checked):
    pred, char, _, _ = checked
    assert len(pred["cases"]) == 4 and pred["spec"] == "h200-sxm" and pred["meta"]["inputs"]
    by_key = {r["key"]: r for r in char["records"]}
    for key in ("model/qwen2.5-0.5b/hf/prefill/hf-eager/b8_l2048", "model/qwen2.5-0.5b/hf/decode/hf-eager/b1_l2048",
                "model/llama-3.2-1b/hf/train/hf-eager/b4_l2048"):
        assert pred["cases"][key]["calibrated_s"] == pytest.approx(by_key[key]["calibrated_s"], rel=1e-9)
        assert pred["cases"][key]["achievable_s"] == pytest.approx(by_key[key]["achievable_s"], rel=1e-9)


def test_check_errors_and_unmeasured(checked):
    pred, char, check, text = checked
    assert check["unchanged"] is True
    assert check["not_measured"] == ["model/llama-3.2-1b/hf/prefill/hf-eager/b3_l1000"]
    by_key = {r["key"]: r for r in char["records"]}
    for row in check["rows"]:
        meas = by_key[row["key"]]["measured_s"]
        assert row["error"] == pytest.approx(pred["cases"][row["key"]]["calibrated_s"] / meas - 1)
        assert row["pace"] == by_key[row["key"]]["measured_pace"]
    assert check["summary"]["train"]["all"]["n"] == 1 and "| phase | n |" in text


def test_bad_input_exit_2(tmp_path):
    r = _script("--check", tmp_path / "missing.json", "--predicted", tmp_path / "p.json")
    assert r.returncode == 2 and "model_oos_check:" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "p.json").write_text("{}")
    r = _script("--check", tmp_path / "p.json", "--predicted", tmp_path / "p.json")
    assert r.returncode == 2 and "lacks the field 'records'" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "s.yaml").write_text("name: x\nentries: []\n")
    r = _script("--predict-suite", tmp_path / "s.yaml", "--json", tmp_path / "out.json")
    assert r.returncode == 2 and "entries" in r.stderr
    (tmp_path / "ok.yaml").write_text(SUITE)
    r = _script("--predict-suite", tmp_path / "ok.yaml", "--json", tmp_path)
    assert r.returncode == 2 and "is a folder" in r.stderr
