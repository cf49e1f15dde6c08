"""The scripts under scripts/, on the CPU: the device script's options, its steps run against stand-ins
for python3 and nvidia-smi (no GPU, no staging of real work), and the suite files the scripts name."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"
DEVICE = SCRIPTS / "device.sh"
OPTIONS = ("--suite", "--resume", "--build", "--gpu-tests", "--byte-audit", "--audit-sections", "--audit-modes",
           "--probe", "--case-timeout", "--deadline", "--help")


def _device(*args, env=None, cwd=None):
    return subprocess.run(["bash", str(DEVICE), *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=60)


def test_help_lists_every_option():
    r = _device("--help", env={k: v for k, v in os.environ.items() if k != "OUT"})
    assert r.returncode == 0, r.stderr
    for opt in OPTIONS:
        assert opt in r.stdout, opt


@pytest.mark.parametrize("args, message", [
    (["--bogus"], "unknown option '--bogus'"),
    (["--suite"], "--suite needs a value"),
    (["--suite", "no_such_suite"], "no such file"),
    (["--case-timeout", "soon", "--suite", "cpu_smoke"], "positive whole number"),
    (["--suite", "cpu_smoke", "--case-timeout", "60"], "no --suite follows it"),
    (["--build", "flash_attn_cuda", "--suite", "cpu_smoke"], "not one of"),
    (["--resume", "no/such/folder", "--probe"], "no such folder"),
    (["--byte-audit", "--probe"], "give --suite"),
    (["--byte-audit", "--suite", "cpu_smoke", "--audit-sections", "SpeedOfLight,Roofline"], "'Roofline' is not one of"),
    (["--byte-audit", "--suite", "cpu_smoke", "--audit-modes", "fwd,sideways"], "'sideways' is not one of"),
    (["--suite", "cpu_smoke", "--audit-sections", "Occupancy"], "apply to --byte-audit"),
    (["--suite", "cpu_smoke", "--audit-modes"], "--audit-modes needs a value"),
    ([], "nothing to do"),
])
def test_bad_options_exit_2_before_any_gpu_work(tmp_path, args, message):
    # No $OUT and nothing printed: parsing fails before the log, the GPU query or staging.
    r = _device(*args, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr and "--help" in r.stderr
    assert r.stdout == ""


def test_every_script_is_valid_bash():
    scripts = sorted(SCRIPTS.glob("*.sh"))
    assert DEVICE in scripts
    for s in scripts:
        assert subprocess.run(["bash", "-n", str(s)]).returncode == 0, s


def test_no_script_names_the_old_module_paths():
    for s in SCRIPTS.iterdir():
        text = s.read_text(encoding="utf-8")
        for old in ("measure.runners", "build_extensions", "measure.commands", "measure import commands"):
            assert old not in text, f"{s.name} mentions {old}"


def _named_suites():
    """Every suite file named by a script (measure/suites/<name>.yaml) or by a command in the docs of the
    scripts (`--suite NAME` or `--suite PATH` inside a code span)."""
    paths = set()
    for s in SCRIPTS.iterdir():
        paths |= set(re.findall(r"measure/suites/[\w.-]+\.yaml", s.read_text(encoding="utf-8")))
    for doc in (REPO / "results" / "h200" / "2026-12-02" / "README.md", REPO / "docs" / "gpu_setup.md"):
        for span in re.findall(r"`([^`]+)`", doc.read_text(encoding="utf-8")):
            for arg in re.findall(r"--suite (\S+)", span):
                if not arg.isupper():  # a placeholder: FILE, SUITE
                    paths.add(arg if arg.endswith(".yaml") else f"measure/suites/{arg}.yaml")
    return sorted(paths)


def test_every_named_suite_exists_and_loads():
    from ssmbench.measure.suite import load_suite

    paths = _named_suites()
    assert {f"measure/suites/{n}.yaml" for n in ("default_h200_a", "default_h200_b", "default_h200_b_tail",
                                                 "mamba3_block_train")} <= set(paths)
    for p in paths:
        assert (REPO / p).exists(), f"a script or its docs name the suite {p}, which is missing"
        assert load_suite(REPO / p).cases


def test_the_special_suites_are_cases_of_suite_b():
    # They replay parts of default_h200_b, so that --resume over its results skips what is done.
    from ssmbench.measure.suite import load_suite

    b = {c.case.key() for c in load_suite(REPO / "measure" / "suites" / "default_h200_b.yaml").cases}
    for n in ("default_h200_b_tail", "mamba3_block_train"):
        assert {c.case.key() for c in load_suite(REPO / "measure" / "suites" / f"{n}.yaml").cases} <= b, n


# ---- the steps, against stand-ins -----------------------------------------------------------------

FAKE_NVIDIA_SMI = """#!/usr/bin/env bash
case "$*" in *driver_version*) echo "$FAKE_GPU, 580.00" ;; *) echo "$FAKE_GPU" ;; esac
"""
# python3 on the GPU machine: logs every call; runs the scripts given on stdin (the suites' extensions,
# the probe look-up) with the real interpreter; knows one device name.
FAKE_PY = """#!/usr/bin/env bash
args="$*"; echo "PY ${args//$'\\n'/ }" >> "$OUT/calls.log"
case "$1 $*" in
  "- "*) exec "$REAL_PY" "$@" ;;
  *spec_for_device*) [ "$3" = "NVIDIA H200" ] || { echo "SpecError: no spec lists '$3'" >&2; exit 1; }
                     echo h200-sxm ;;
esac
exit 0
"""


@pytest.fixture
def fake_device(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("nvidia-smi", FAKE_NVIDIA_SMI), ("fakepy", FAKE_PY), ("ncu", "#!/bin/sh\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "OUT": str(out), "TMPDIR": str(tmp_path), "PY": "fakepy", "REAL_PY": sys.executable,
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_GPU": "NVIDIA H200",
           # a checkout may hold carried prebuilt extensions (git-ignored): the tests must not see them
           "PREBUILT_DIR": str(tmp_path / "no-prebuilt")}
    env.pop("HW", None)

    def run(*args, **more_env):
        r = _device(*args, env={**env, **more_env}, cwd=tmp_path)
        log = out / "calls.log"
        calls = log.read_text().splitlines() if log.exists() else []
        log.unlink(missing_ok=True)
        return r, calls

    return run


def _find(calls, text):
    return next(i for i, c in enumerate(calls) if text in c)


def test_steps_run_in_order_with_resume_and_watchdogs(fake_device, tmp_path):
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    r, calls = fake_device("--deadline", "600", "--resume", str(earlier), "--probe", "--byte-audit",
                           "--suite", "default_h200_a", "--gpu-tests",
                           "--case-timeout", "9999", "--suite", "measure/suites/mamba3_block_train.yaml")
    assert r.returncode == 0, r.stdout + r.stderr
    order = [_find(calls, t) for t in (
        "extensions build --ext selective_scan_cuda causal_conv1d_cuda",  # --gpu-tests: every extension
        "extensions install", "spec_for_device", "import ssmbench,", " probe --device cuda",
        "byte_audit --out", "measure --suite measure/suites/default_h200_a.yaml", "not mamba_ssm tests",
        "-k mamba_ssm tests", "measure --suite measure/suites/mamba3_block_train.yaml", "summarize_results.py")]
    assert order == sorted(order), calls
    a, train = calls[order[6]], calls[order[9]]
    assert f"--resume --resume-from {earlier}" in a and "--hw h200-sxm" in a
    assert "--case-timeout 150" in a  # the default
    watchdog = int(re.search(r"--case-timeout (\d+)", train).group(1))
    assert 400 < watchdog <= 600 - 25 - 60 - 30  # all the time left, less the sweep's, audit's, watchdog's margins
    audits = [c for c in calls if "byte_audit" in c]
    assert len(audits) == 2 and "--exclude-backends" in audits[0] and "--backends mamba_ssm" in audits[1]
    assert (tmp_path / "out" / "device.log").exists()


def test_audit_sections_and_modes_reach_both_byte_audits(fake_device):
    r, calls = fake_device("--byte-audit", "--audit-sections", "SpeedOfLight,Occupancy", "--audit-modes", "fwd,bwd",
                           "--suite", "default_h200_a")
    assert r.returncode == 0, r.stdout + r.stderr
    audits = [c for c in calls if "byte_audit" in c]
    assert len(audits) == 2
    for a in audits:
        assert "--sections SpeedOfLight,Occupancy" in a and a.endswith("--modes fwd bwd")


def test_builds_default_to_what_the_suites_import(fake_device):
    _, calls = fake_device("--suite", "default_h200_a")
    assert any(c.endswith("--background") and "--ext selective_scan_cuda --sdist-dir" in c for c in calls)
    _, calls = fake_device("--suite", "default_h200_b_tail")
    assert any("--ext selective_scan_cuda causal_conv1d_cuda --sdist-dir" in c for c in calls)
    _, calls = fake_device("--suite", "cpu_smoke")
    assert not any("extensions build" in c for c in calls)
    _, calls = fake_device("--build", "causal_conv1d_cuda", "--suite", "default_h200_a")
    assert any("--ext causal_conv1d_cuda --sdist-dir" in c for c in calls)


def test_probe_is_skipped_when_a_resume_folder_holds_this_devices(fake_device, tmp_path):
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "probe-h200-sxm.yaml").write_text("meta: {device: {name: NVIDIA H200}}\n")
    r, calls = fake_device("--resume", str(earlier), "--probe")
    assert r.returncode == 0 and "probe skipped" in r.stdout
    assert not any(" probe --device" in c for c in calls)
    r, calls = fake_device("--resume", str(earlier), "--probe", FAKE_GPU="NVIDIA H100 80GB HBM3", HW="h100-sxm")
    assert any(" probe --device cuda" in c for c in calls)


def test_an_unknown_device_stops_the_call_unless_hw_is_given(fake_device):
    r, calls = fake_device("--suite", "cpu_smoke", FAKE_GPU="NVIDIA B300")
    assert r.returncode == 2 and "no spec lists 'NVIDIA B300'" in r.stdout and "HW=<spec id>" in r.stdout
    assert not any("measure --suite" in c for c in calls)
    r, calls = fake_device("--suite", "cpu_smoke", FAKE_GPU="NVIDIA B300", HW="h200-sxm")
    assert r.returncode == 0 and any("measure --suite measure/suites/cpu_smoke.yaml" in c and "--hw h200-sxm" in c
                                     for c in calls)


def test_the_extension_list_matches_the_build_tool():
    from ssmbench.measure.extensions import EXTENSIONS

    r = subprocess.run(["bash", "-c", 'source scripts/device_lib.sh; echo "${EXTENSIONS[@]}"'],
                       capture_output=True, text=True, cwd=REPO)
    assert r.stdout.split() == list(EXTENSIONS)
