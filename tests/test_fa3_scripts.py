"""The restricted FlashAttention-3 build of scripts/device_fa3.sh, on the CPU: scripts/fa3_build.py's
build step against stand-in setup.py files (progress, deadline, failure stage, the setup.py switches),
the device script's options and its no-sources path, and the suites it runs."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "device_fa3.sh"
MIRROR_SETUP = Path("/work/.mirror/Dao-AILab+flash-attention/repo")


def _fa3_build():
    spec = importlib.util.spec_from_file_location("fa3_build", REPO / "scripts" / "fa3_build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FB = _fa3_build()

# a stand-in hopper/setup.py: prints ninja's status lines, then fails, hangs or writes the module
FAKE_SETUP = """import os, sys, time
print("torch.__version__  = fake")
assert os.environ["FLASH_ATTENTION_DISABLE_SPLIT"] == "TRUE"
mode = os.environ["FAKE_MODE"]
for k, name in enumerate(["flash_api_stable.cpp", "flash_prepare_scheduler.cu", "flash_fwd_hdim64_bf16_sm90.cu",
                          "flash_fwd_hdim128_bf16_sm90.cu"], 1):
    print(f"[{k}/5] /usr/local/cuda/bin/nvcc -c /src/hopper/instantiations/{name} -o {name}.o", flush=True)
    if mode == "fail" and k == 3:
        print("/src/hopper/flash_fwd_kernel_sm90.h(42): error: identifier cute::foo is undefined", flush=True)
        sys.exit(1)
    if mode == "hang" and k == 2:
        time.sleep(60)
print("[5/5] c++ a.o b.o -shared -o _C.abi3.so", flush=True)
os.makedirs("flash_attn_3", exist_ok=True)
open("flash_attn_3/_C.abi3.so", "wb").write(b"ELF")
"""


def _src(tmp_path):
    hopper = tmp_path / "fa3" / "hopper"
    hopper.mkdir(parents=True)
    (hopper / "setup.py").write_text(FAKE_SETUP)
    return tmp_path / "fa3"


@pytest.mark.parametrize("mode, status, stage", [
    ("ok", "built", "done"),
    ("fail", "failed", "compile 3/5 (error; last: flash_fwd_hdim64_bf16_sm90.cu)"),
    ("hang", "timeout", "compile 2/5 (deadline; last: flash_prepare_scheduler.cu)"),
])
def test_build_records_its_outcome(tmp_path, monkeypatch, mode, status, stage):
    monkeypatch.setenv("FAKE_MODE", mode)
    src, out, log = _src(tmp_path), tmp_path / "b.json", tmp_path / "b.log"
    rec = FB.build(src, out, log, deadline_s=5.0, jobs=3, bwd=False, poll_s=0.5)
    assert rec == json.loads(out.read_text())
    assert (rec["status"], rec["stage"]) == (status, stage)
    assert rec["env"]["MAX_JOBS"] == "3" and rec["env"]["FLASH_ATTENTION_DISABLE_BACKWARD"] == "TRUE"
    assert rec["env"]["FLASH_ATTENTION_OFFLINE_BUILD"] == "TRUE"  # setup.py's nvcc download returns at once
    assert rec["log_tail"] and rec["seconds"] < 30
    if mode == "ok":
        assert rec["so"].endswith("flash_attn_3/_C.abi3.so") and rec["progress"]["done"] == 5
    if mode == "fail":
        assert rec["errors"] == ["/src/hopper/flash_fwd_kernel_sm90.h(42): error: identifier cute::foo is undefined"]
    if mode == "hang":
        assert rec["so"] is None and rec["seconds"] < 5.0 + 2 * FB.KILL_GRACE_S


def test_the_switches_restrict_the_build():
    env = FB.build_env(False, 8, base={"PYTHONSAFEPATH": "1"})
    assert "PYTHONSAFEPATH" not in env
    for n in ("SPLIT", "PAGEDKV", "APPENDKV", "LOCAL", "SOFTCAP", "PACKGQA", "FP8", "FP16", "SM80", "BACKWARD",
              "HDIM96", "HDIM192", "HDIM256"):
        assert env[f"FLASH_ATTENTION_DISABLE_{n}"] == "TRUE"
    assert "FLASH_ATTENTION_DISABLE_HDIM64" not in env and "FLASH_ATTENTION_DISABLE_HDIM128" not in env
    assert "FLASH_ATTENTION_DISABLE_BACKWARD" not in FB.build_env(True, 8, base={})


@pytest.mark.skipif(not MIRROR_SETUP.exists(), reason="the flash-attention mirror is not on this machine")
def test_every_switch_is_one_setup_py_reads():
    text = subprocess.run(["git", "-C", str(MIRROR_SETUP), "show", "HEAD:hopper/setup.py"], capture_output=True,
                          text=True, check=True).stdout
    for n in FB.DISABLED + ("BACKWARD",):
        assert f'os.getenv("FLASH_ATTENTION_DISABLE_{n}"' in text, n
    assert 'check_env_flag("FLASH_ATTENTION_OFFLINE_BUILD"' in text


def test_progress_reads_ninja():
    assert FB.progress("setup\n")["done"] is None
    p = FB.progress("[1/4] nvcc -c /a/x.cu -o x.o\nwarning\n[2/4] nvcc -c /a/y_sm90.cu -o y.o\n")
    assert p == {"done": 2, "total": 4, "what": "y_sm90.cu"}


def _device(*args, env):
    return subprocess.run(["bash", str(SCRIPT), *args], check=False, capture_output=True, text=True, env=env,
                          timeout=120)


def test_help_and_bad_options(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    r = _device("--help", env=env)
    assert r.returncode == 0
    for opt in ("--build-deadline", "--deadline", "--jobs", "--bwd", "--no-measure"):
        assert opt in r.stdout
    for args, says in ((["--bogus"], "unknown option"), (["--jobs", "x"], "positive whole number"),
                       (["--build-deadline", "600"], "less than --deadline")):
        r = _device(*args, env=env)
        assert r.returncode == 2 and says in r.stderr and r.stdout == ""


def test_without_sources_the_failure_is_recorded(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA H200, 580.00'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "OUT": str(out), "TMPDIR": str(tmp_path), "PY": sys.executable,
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FA3SRC_DIR": str(tmp_path / "none")}
    r = _device(env=env)
    assert r.returncode == 0, r.stderr
    rec = json.loads((out / "fa3_build.json").read_text())
    assert rec["status"] == "failed" and rec["stage"] == "sources" and "prepare_fa3_sources.sh" in rec["reason"]
    assert "no sources" in (out / "fa3.log").read_text()


def test_the_suites_load_and_put_fa3_first():
    from ssmbench.measure.suite import load_suite

    cases = load_suite(REPO / "measure" / "suites" / "fa3_h200.yaml").cases
    backends = [c.case.backend for c in cases]
    assert backends[:8] == ["flash_attn.fa3"] * 8 and set(backends[8:]) == {"torch.sdpa.cudnn", "torch.sdpa.flash"}
    assert {c.case.dims["P"] for c in cases} == {64, 128} and all(c.case.dims["G"] == 8 for c in cases)
    assert all(c.case.dims["H"] * c.case.dims["P"] == 4096 for c in cases)  # the matched pairs' width
    train = load_suite(REPO / "measure" / "suites" / "fa3_h200_train.yaml").cases
    assert {c.case.mode for c in train} == {"fwdbwd"}
