"""Provenance shared by every file the tool writes: where and from what source it was made.

Measurement files add the device block (``measure/environment.py``); analysis files (calibrated
profiles, gap reports) carry ``analysis_meta()``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.metadata as md
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import __version__

REPO_ROOT = Path(__file__).resolve().parents[1]


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _declared_source(why: str) -> dict[str, Any]:
    """A copy of the tree without .git (the GPU machine gets one) cannot read its commit; the script
    that sent it declares it in SSMBENCH_SOURCE_COMMIT / SSMBENCH_SOURCE_DIRTY, recorded as declared."""
    commit = os.environ.get("SSMBENCH_SOURCE_COMMIT")
    if not commit:
        return {"commit": None, "dirty": None, "note": why}
    dirty = os.environ.get("SSMBENCH_SOURCE_DIRTY")
    return {"commit": commit, "dirty": None if dirty is None else dirty.lower() in ("1", "true", "yes"),
            "note": f"{why}; commit declared by the launching script (SSMBENCH_SOURCE_COMMIT)"}


def git_info(root: Path = REPO_ROOT) -> dict[str, Any]:
    def git(*args):
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=20)

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return _declared_source(f"not a git checkout: {head.stderr.strip()[:200]}")
        status = git("status", "--porcelain")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"commit": None, "dirty": None, "note": f"git not usable: {exc}"}
    changed = [line for line in status.stdout.splitlines() if line.strip()]
    return {"commit": head.stdout.strip(), "dirty": bool(changed), "changed_files": changed[:50],
            "note": None}


def host_meta(argv: list[str] | None = None) -> dict[str, Any]:
    """What every ``meta`` block starts with: the command line, the source commit, the host, Python
    and ssm-bench's version (result files, probes, profiles and gap reports alike)."""
    return {
        "command_line": list(sys.argv if argv is None else argv),
        "git": git_info(),
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "ssmbench_version": __version__,
    }


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes: what names exactly the stored data a result was computed from."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def analysis_meta(argv: list[str] | None = None, inputs: list | None = None) -> dict[str, Any]:
    """The ``meta`` block of a file computed from stored data (no device involved); ``inputs``: the
    files it read, listed with their sha256."""
    def version(dist: str) -> str | None:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return None

    return {
        **host_meta(argv),
        "versions": {d: version(d) for d in ("numpy", "scipy", "sympy", "matplotlib")},
        "created_utc": utc_now(),
        **({"inputs": [{"path": str(p), "sha256": file_sha256(p)} for p in inputs]} if inputs is not None else {}),
    }
