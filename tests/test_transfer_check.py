"""scripts/transfer_check.py: the achievable model of one device's cases on another device's spec, against
the stored H100 run (results/h100/2026-12-05/transfer) and the H200 runs of the same cases."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "transfer_check.py"
H100 = "results/h100/2026-12-05/transfer"
H200 = "results/h200/2026-12-02/default"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True)


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    out = tmp_path_factory.mktemp("transfer") / "check.json"
    r = run("--target", H100, "--base", H200, "--json", str(out))
    assert r.returncode == 0, r.stderr
    return r.stdout, json.loads(out.read_text())


def test_every_target_case_is_estimated_on_its_spec_and_paired_with_the_base(checked):
    text, doc = checked
    rows = doc["rows"]
    assert doc["target_hw"] == "h100-sxm" and doc["base_hw"] == "h200-sxm" and len(rows) == 80
    assert doc["meta"]["tool"] == "scripts/transfer_check.py"
    paired = [r for r in rows if "base_measured_s" in r]
    assert paired and all(r["base_estimate_s"] > 0 for r in paired)
    assert {r["pace"] for r in rows} == {"gpu", "host"}
    s = doc["summary"]
    assert s["all"]["n"] == 80 and s["all, gpu-bound"]["n"] + s["all, host-bound"]["n"] == 80
    # the summary is the rows' own medians
    gpu = sorted(abs(r["target_estimate_s"] / r["target_measured_s"] - 1) * 100 for r in rows if r["pace"] == "gpu")
    n = len(gpu)
    assert s["all, gpu-bound"]["target_median_ape_pct"] == pytest.approx(
        (gpu[(n - 1) // 2] + gpu[n // 2]) / 2)
    assert "ratio |err| med" in text and "all, gpu-bound" in text


def test_without_probe_drops_the_target_specs_measured_entries(checked):
    _, doc = checked
    r = run("--target", H100, "--base", H200, "--without-probe")
    assert r.returncode == 0, r.stderr
    before = r.stdout.splitlines()[-4]
    assert before.startswith("all ") and before != checked[0].splitlines()[-4]


def test_the_estimates_written_before_a_run_cover_the_suite(tmp_path):
    out = tmp_path / "pred.json"
    r = run("--predict-suite", "transfer_h100", "--base", H200, "--json", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["kind"] == "transfer_prediction" and len(doc["rows"]) == 81
    assert all(row["target_estimate_s"] > 0 for row in doc["rows"])


def test_bad_input_is_named_with_exit_2(tmp_path):
    r = run("--target", str(tmp_path / "none"), "--base", H200)
    assert r.returncode == 2 and "no such result folder" in r.stderr and "Traceback" not in r.stderr
    r = run("--target", H100, "--base", H200, "--json", str(tmp_path / "no" / "x.json"))
    assert r.returncode == 2 and "--json" in r.stderr and "Traceback" not in r.stderr
    r = run("--target", H100, "--base", H200, "--target-hw", "no-such-gpu")
    assert r.returncode == 2 and "no-such-gpu" in r.stderr and "Traceback" not in r.stderr
    r = run("--predict-suite", "no_such_suite", "--base", H200)
    assert r.returncode == 2 and "no_such_suite" in r.stderr and "Traceback" not in r.stderr


def test_without_a_base_device_its_columns_say_so_instead_of_printing_nan():
    r = run("--target", "results/h100/2026-12-05/oos")
    assert r.returncode == 0, r.stderr
    summary = r.stdout.split("family", 1)[1]
    assert "nan" not in summary.lower()
    all_row = next(line for line in summary.splitlines() if line.startswith("all "))
    assert all_row.split()[-3:] == ["-", "-", "-"]  # base |err|, ratio |err|, measured ratio: no base case
