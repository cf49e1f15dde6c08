"""scripts/kernel_repeat.py and scripts/ssd_stage_gap.py on small model-run files written here: the spread
of one kernel between sessions by library, and the SSD kernels against their stages' achievable estimates."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ssmbench.analytic.registry import get_op
from ssmbench.calibrate.join import resource_bounds
from ssmbench.hwspecs.loader import get_spec
from ssmbench.measure.models.records import ModelRunWriter, new_record

REPO = Path(__file__).resolve().parents[1]
ENTRY = {"model": "mamba2-130m", "runner": "mamba_ssm"}
SCAN, GEMM = "_chunk_scan_fwd_kernel", "nvjet_sm90_tst_160x256_64x4_1x2_h_bz_coopA_TNN"


def _run_file(folder: Path, scan_us: float, gemm_us: float) -> None:
    """One session: a mamba2-130m prefill record (B = 16, L = 2048) whose profile lists two kernels."""
    w = ModelRunWriter(folder, {"device": {"name": "NVIDIA H200"}})
    r = new_record(ENTRY, "prefill", "mamba-ssm", 16, 2048, "bf16")
    r.update(status="ok", time_s={"median": 0.05},
             profile={"busy_s": 0.04, "launches": 48.0, "host_idle_s": 0.01,
                      "kernels": [{"name": SCAN, "time_s": 24 * scan_us * 1e-6, "count": 24.0},
                                  {"name": GEMM, "time_s": 24 * gemm_us * 1e-6, "count": 24.0}]})
    w.add(r)


def _script(name, *args):
    return subprocess.run([sys.executable, str(REPO / "scripts" / name), *map(str, args)], capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.fixture
def sessions(tmp_path):
    for i, (scan, gemm) in enumerate(((303.0, 249.0), (619.0, 251.0))):
        d = tmp_path / f"s{i}"
        _run_file(d, scan, gemm)
    return tmp_path


def test_kernel_repeat_groups_the_spread_by_library(sessions, tmp_path):
    out = tmp_path / "repeat.json"
    r = _script("kernel_repeat.py", sessions / "s0", sessions / "s1", "--json", out)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    by = {row["kernel"]: row for row in doc["rows"]}
    assert by[SCAN]["library"] == "Triton, autotuned" and by[GEMM]["library"] == "cuBLAS"
    # (max - min) / median of the two sessions' times per call
    assert by[SCAN]["spread"] == pytest.approx((619 - 303) / ((619 + 303) / 2))
    assert doc["summary"]["cuBLAS"]["max_spread_pct"] == pytest.approx(100 * 2 / 250)
    assert "[measurement]" in r.stdout
    assert sorted(Path(i["path"]).parent.name for i in doc["meta"]["inputs"]) == ["s0", "s1"]  # what it read


def test_ssd_stage_gap_sets_each_kernel_beside_its_stage(sessions, tmp_path):
    out = tmp_path / "gap.json"
    r = _script("ssd_stage_gap.py", sessions, "--json", out)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert len(doc["meta"]["inputs"]) == 2 and doc["meta"]["git"]  # the files it read, and the code that read them
    [row] = doc["rows"]  # the GEMM is not an SSD kernel
    dims = {"B": 16, "L": 2048, "H": 24, "P": 64, "N": 128, "G": 1, "C": 256}  # mamba2-130m's Mamba-2 block
    assert row["stage"] == "ssd_chunk_scan" and row["dims"] == dims
    expect = resource_bounds(get_spec("h200-sxm"), "ssd_chunk_scan", "triton",
                             {d: dims[d] for d in get_op("ssd_chunk_scan").dims}, "bf16", "fwd",
                             launch="graph").achievable["gpu_s"]
    assert row["achievable_gpu_s"] == pytest.approx(expect)
    assert row["ratio_fastest"] == pytest.approx(303e-6 / expect)  # the faster session against the estimate


@pytest.mark.parametrize("script", ["kernel_repeat.py", "ssd_stage_gap.py"])
def test_bad_folders_and_outputs_exit_2_with_a_message(script, sessions, tmp_path):
    r = _script(script, tmp_path / "absent")
    assert r.returncode == 2 and "no such folder" in r.stderr and "Traceback" not in r.stderr
    r = _script(script, sessions, "--json", tmp_path / "no" / "dir" / "x.json")
    assert r.returncode == 2 and "no such folder" in r.stderr and "Traceback" not in r.stderr
