"""Build a restricted FlashAttention-3 from unpacked sources with its own ``hopper/setup.py``, within a
deadline, and record the outcome as JSON; check a built one against PyTorch's SDPA (scripts/device_fa3.sh).

``build``: runs ``python setup.py build_ext --inplace`` in ``<src>/hopper`` with setup.py's switches
(``FLASH_ATTENTION_DISABLE_*``, ``DISABLED``; the backward too unless ``--bwd``), ninja with ``--jobs``
parallel compiles (``MAX_JOBS``), ``FLASH_ATTENTION_FORCE_BUILD`` (no prebuilt-wheel download) and
``FLASH_ATTENTION_OFFLINE_BUILD`` (setup.py's nvcc / ptxas download returns at once: the toolkit here,
CUDA 13.0, is used; setup.py adds its CCCL include folder itself). Every flag of the compile is
setup.py's. Where the interpreter lacks ``wheel`` or ``packaging`` (setup.py imports both) a shim
folder maps them onto setuptools' and torch's vendored copies. The build runs in its own process group
with its output in ``--log``; every ``--poll`` seconds a progress line (ninja's [k/N]) is printed; at
the deadline the group is stopped. ``--out`` gets {status: built | failed | timeout, stage, seconds,
returncode, progress, so, log_tail, errors, env}: the stage is where it stopped (setup.py before ninja
started, compile k/N, link, or no module written).

``check`` (GPU): FA3's causal forward against SDPA at bf16 and an fp32 SDPA reference on a few shapes
(head dims 64 and 128, GQA 8 KV heads), passing where FA3's largest error is at most
``GATE_FACTOR`` x SDPA's at bf16 (the correctness gate's rule, measure/gate.py). Writes JSON to --out.

Usage: python scripts/fa3_build.py build --src DIR --out JSON --log LOG [--deadline S] [--jobs N] [--bwd]
       python scripts/fa3_build.py check --out JSON          (with <src>/hopper on PYTHONPATH)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


def _meta() -> dict:
    """The record's ``meta`` block: ssmbench's provenance (command, commit, host, versions) where the staged
    package is importable, else the command line, host and Python this script can see itself."""
    try:
        from ssmbench.provenance import host_meta
    except ImportError:
        import platform
        import socket
        return {"command_line": list(sys.argv), "hostname": socket.gethostname(), "python": platform.python_version(),
                "note": "ssmbench not importable here: its provenance block is not available"}
    return host_meta()

# hopper/setup.py's switches that restrict the build (FLASH_ATTENTION_DISABLE_<name>=TRUE): sm_90a, bf16,
# head dims 64 and 128, causal / non-causal prefill without the features the matched pairs do not use.
DISABLED = ("SPLIT", "PAGEDKV", "APPENDKV", "LOCAL", "SOFTCAP", "PACKGQA", "FP16", "FP8", "VARLEN", "CLUSTER",
            "HDIM96", "HDIM192", "HDIM256", "HDIMDIFF64", "HDIMDIFF192", "SM80")
STATUS = re.compile(r"^\[(\d+)/(\d+)\]\s*(.*)$")  # ninja's status line
TAIL_LINES = 60
MAX_ERRORS = 20
KILL_GRACE_S = 10
GATE_FACTOR = 2.0
CHECK_SHAPES = ((1, 2048, 32, 8, 128), (2, 4096, 32, 8, 128), (1, 2048, 64, 8, 64), (2, 4096, 64, 8, 64))  # B, L, H, G, P

# setup.py subclasses wheel's bdist_wheel for its wheel-download command, which build_ext never runs
WHEEL_SHIM = '''try:
    from setuptools.command.bdist_wheel import bdist_wheel  # noqa: F401
except ImportError:  # setuptools' own needs the wheel package too
    from setuptools import Command

    class bdist_wheel(Command):
        user_options = []

        def initialize_options(self):
            pass

        def finalize_options(self):
            pass

        def run(self):
            raise SystemExit("bdist_wheel: no wheel package here (the shim of scripts/fa3_build.py)")
'''
SHIMS = {  # module -> files of a shim package, where the interpreter lacks it
    "wheel.bdist_wheel": {"wheel/__init__.py": "", "wheel/bdist_wheel.py": WHEEL_SHIM},
    "packaging.version": {"packaging/__init__.py": "",
                          "packaging/version.py": "from torch._vendor.packaging.version import *  # noqa: F403\n"
                                                  "from torch._vendor.packaging.version import Version, parse  # noqa: F401\n"},
}


def build_env(bwd: bool, jobs: int, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.pop("PYTHONSAFEPATH", None)  # setup.py runs as a script from its folder
    env.update({f"FLASH_ATTENTION_DISABLE_{n}": "TRUE" for n in DISABLED})
    if not bwd:
        env["FLASH_ATTENTION_DISABLE_BACKWARD"] = "TRUE"
    env.update(FLASH_ATTENTION_FORCE_BUILD="TRUE", FLASH_ATTENTION_OFFLINE_BUILD="TRUE", MAX_JOBS=str(jobs))
    return env


def write_shims(py: str, folder: Path, env: dict[str, str]) -> list[str]:
    """Shim packages for the modules setup.py imports that ``py`` lacks; returns their names."""
    missing = []
    for mod, files in SHIMS.items():
        r = subprocess.run([py, "-c", f"import {mod}"], check=False, env=env, capture_output=True)
        if r.returncode != 0:
            missing.append(mod)
            for rel, text in files.items():
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                (folder / rel).write_text(text)
    return missing


def progress(text: str) -> dict:
    """The last ninja status line of a build log: {done, total, what} (done None before ninja starts)."""
    last = None
    for line in text.splitlines():
        m = STATUS.match(line.strip())
        if m:
            last = m
    if last is None:
        return {"done": None, "total": None, "what": None}
    what = last.group(3)
    src = re.findall(r"(\S+\.(?:cu|cpp|so))\b", what)
    return {"done": int(last.group(1)), "total": int(last.group(2)), "what": Path(src[-1]).name if src else what[:120]}


def stage_of(text: str, returncode: int | None, so: Path | None, timed_out: bool) -> str:
    p = progress(text)
    if so is not None and returncode == 0:
        return "done"
    if p["done"] is None:
        return "setup.py (before ninja started)"
    if returncode == 0:
        return "no module written (setup.py ended without _C)"
    where = "link" if p["done"] == p["total"] and (p["what"] or "").endswith(".so") else f"compile {p['done']}/{p['total']}"
    return f"{where} ({'deadline' if timed_out else 'error'}; last: {p['what']})"


def nvcc_version(env: dict[str, str]) -> str | None:
    nvcc = shutil.which("nvcc", path=env.get("PATH")) or str(Path(env.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc")
    try:
        r = subprocess.run([nvcc, "--version"], check=False, capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    return r.stdout.strip().splitlines()[-1] if r.stdout.strip() else None


def find_module(hopper: Path) -> Path | None:
    found = sorted((hopper / "flash_attn_3").glob("_C*.so"))
    return found[0] if found else None


def _stop(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(KILL_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue


def build(src: Path, out: Path, log: Path, deadline_s: float, jobs: int, bwd: bool, poll_s: float,
          py: str = sys.executable) -> dict:
    hopper = src / "hopper"
    env = build_env(bwd, jobs)
    shim_dir = src / "shims"
    shims = write_shims(py, shim_dir, env)
    if shutil.which("git", path=env.get("PATH")) is None:
        # setup.py runs `git submodule update` for csrc/cutlass, which is carried: without git it would raise
        stub = shim_dir / "bin" / "git"
        stub.parent.mkdir(parents=True, exist_ok=True)
        stub.write_text("#!/bin/sh\necho 'git stub (scripts/fa3_build.py): the CUTLASS headers are carried'\n")
        stub.chmod(0o755)
        env["PATH"] = os.pathsep.join([str(stub.parent), env.get("PATH", "")])
        shims.append("git")
    if set(shims) & set(SHIMS):
        env["PYTHONPATH"] = os.pathsep.join([str(shim_dir)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    t0 = time.monotonic()
    timed_out = False
    with open(log, "w") as fh:
        proc = subprocess.Popen([py, "setup.py", "build_ext", "--inplace"], cwd=hopper, env=env, stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True)
        while proc.poll() is None:
            left = deadline_s - (time.monotonic() - t0)
            if left <= 0:
                timed_out = True
                _stop(proc)
                break
            try:
                proc.wait(min(poll_s, left))
            except subprocess.TimeoutExpired:
                p = progress(log.read_text(errors="replace"))
                print(f"[fa3 build {time.monotonic() - t0:.0f} s] ninja {p['done'] or 0}/{p['total'] or '?'}"
                      f"{': ' + p['what'] if p['what'] else ' (setup.py)'}", flush=True)
    secs = time.monotonic() - t0
    text = log.read_text(errors="replace")
    so = find_module(hopper)
    rc = proc.returncode
    ok = so is not None and rc == 0 and not timed_out
    rec = {"status": "built" if ok else "timeout" if timed_out else "failed",
           "stage": stage_of(text, rc, so, timed_out), "seconds": round(secs, 1), "deadline_s": deadline_s,
           "returncode": rc, "progress": progress(text), "so": str(so) if so else None,
           "so_bytes": so.stat().st_size if so else None, "backward": bwd, "jobs": jobs, "shims": shims,
           "nvcc": nvcc_version(env),
           "env": {k: v for k, v in env.items() if k.startswith("FLASH_ATTENTION_") or k == "MAX_JOBS"},
           "log": str(log), "log_tail": text.splitlines()[-TAIL_LINES:],
           "errors": [ln for ln in text.splitlines() if re.search(r"\berror\b", ln, re.IGNORECASE)][:MAX_ERRORS],
           "label": "measurement (wall clock of the build)", "meta": _meta()}
    out.write_text(json.dumps(rec, indent=1) + "\n")
    return rec


def check(out: Path) -> dict:
    """FA3 against SDPA (bf16) and an fp32 SDPA reference, causal prefill (module docstring)."""
    import torch
    import torch.nn.functional as F
    from flash_attn_interface import flash_attn_func

    rows = []
    for b, n, h, g, p in CHECK_SHAPES:
        torch.manual_seed(0)
        q = torch.randn(b, n, h, p, device="cuda", dtype=torch.bfloat16)  # [B, L, H, P]
        k, v = (torch.randn(b, n, g, p, device="cuda", dtype=torch.bfloat16) for _ in range(2))  # [B, L, G, P]

        def sdpa(x, y, z):
            return F.scaled_dot_product_attention(x.transpose(1, 2), y.transpose(1, 2), z.transpose(1, 2),
                                                  is_causal=True, enable_gqa=True).transpose(1, 2)
        fa3 = flash_attn_func(q, k, v, causal=True)
        fa3 = fa3[0] if isinstance(fa3, tuple) else fa3
        ref = sdpa(q.float(), k.float(), v.float())
        low = sdpa(q, k, v)
        e_fa3, e_sdpa = ((x.float() - ref).abs().max().item() for x in (fa3, low))
        rows.append({"B": b, "L": n, "H": h, "G": g, "P": p, "max_abs_err_fa3": e_fa3, "max_abs_err_sdpa_bf16": e_sdpa,
                     "max_abs_diff_fa3_sdpa": (fa3.float() - low.float()).abs().max().item(),
                     "passed": bool(e_fa3 <= GATE_FACTOR * max(e_sdpa, 2.0 ** -8))})
        del q, k, v, fa3, ref, low
        torch.cuda.empty_cache()
    rec = {"passed": all(r["passed"] for r in rows), "rule": f"FA3's max |error| vs fp32 SDPA <= {GATE_FACTOR:g} x "
           "SDPA's at bf16 (causal, GQA)", "label": "measurement", "shapes": rows,
           "torch": torch.__version__, "device": torch.cuda.get_device_name(), "meta": _meta()}
    out.write_text(json.dumps(rec, indent=1) + "\n")
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--src", required=True, type=Path, help="the unpacked sources (fa3/: hopper/, csrc/cutlass/)")
    b.add_argument("--out", required=True, type=Path)
    b.add_argument("--log", required=True, type=Path)
    b.add_argument("--deadline", type=float, default=480.0, help="seconds (default 480)")
    b.add_argument("--jobs", type=int, default=os.cpu_count() or 8, help="parallel compiles (MAX_JOBS)")
    b.add_argument("--poll", type=float, default=15.0, help="seconds between progress lines")
    b.add_argument("--bwd", action="store_true", help="also the backward instantiations")
    c = sub.add_parser("check")
    c.add_argument("--out", required=True, type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "build":
        if not (a.src / "hopper" / "setup.py").is_file():
            print(f"fa3_build.py: {a.src}/hopper/setup.py: no such file (unpack .fa3src/fa3src.tar.xz)", file=sys.stderr)
            return 2
        rec = build(a.src, a.out, a.log, a.deadline, a.jobs, a.bwd, a.poll)
        print(f"fa3 build: {rec['status']} after {rec['seconds']} s ({rec['stage']})", flush=True)
        return 0 if rec["status"] == "built" else 1
    rec = check(a.out)
    print(f"fa3 check: {'passed' if rec['passed'] else 'FAILED'} on {len(rec['shapes'])} shapes", flush=True)
    return 0 if rec["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
