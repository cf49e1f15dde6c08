"""Calibrated profiles: their own versioned JSON files, with provenance. They never edit hwspecs/.

Layout (schema_version 1)::

    {"schema_version": 1, "kind": "ssmbench.calibration_profile",
     "meta": {command_line, git, hostname, platform, python, ssmbench_version, versions, created_utc},
     "spec": {"id", "name", "prefer", "ceilings": {key: {value, origin, provenance}}},
     "provenance": {"results": [{"path", "sha256", "device", "n_cases"}], "devices": [...],
                    "device_mismatch": bool, "skipped": [{"path", "reason"}] (only when files were skipped)},
     "settings": {"level", "min_shapes", "group_by"},
     "pace_scales": {"gpu", "host": {"scale", "n"}} or null (pace.py: the pooled spread of held-out log
         residuals per pace that scales each group's interval_by_pace),
     "host_sessions": {"sigma_log", "n_cases", "n_sessions", "source"} (sessions.py: the spread of host
                 speed between measurement sessions, added to host-bound intervals on a new machine),
     "groups": [ one record per group, see fit.py; status "calibrated", "pooled" (pool.py: estimated
                 from a pooled level, named in "pooled_from") or "not_calibrated" ],
     "excluded": [ {"key", "file", "status", "reason"} ],
     "energy": (optional) the energy fit on the results' NVML energy windows (energy_profile.py: static
               power, J per unit of each term, the leave-shape-out check per family), or {"note": why not}}

A profile is written once: an existing file is not replaced unless asked (``force``), so a profile
named in a report keeps meaning what it meant.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from ..errors import UserError
from ..files import read_user_text
from ..provenance import analysis_meta
from .achievable_forms import model_from_dict
from .crossval import Interval
from .join import Joined
from .models import Model
from .paths import case_path
from .pace import pace_scales
from .sessions import session_spread

PROFILE_SCHEMA_VERSION = 1
PROFILE_KIND = "ssmbench.calibration_profile"


def _plain(o: Any) -> Any:
    """JSON-ready: numpy scalars and arrays to Python, NaN and infinity to null (JSON has neither)."""
    if isinstance(o, dict):
        return {str(k): _plain(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_plain(v) for v in o]
    if hasattr(o, "tolist"):
        return _plain(o.tolist())
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o


def json_text(data: Any) -> str:
    return json.dumps(_plain(data), indent=2, allow_nan=False) + "\n"


def build_profile(joined: Joined, groups: list[dict], settings: dict[str, Any],
                  command: list[str] | None = None, skipped: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """``skipped``: the files of the results folders that were not measurement files, with why; listed
    in the provenance when there are any (a profile of files named one by one has no such key)."""
    provenance = {"results": joined.files, "devices": joined.devices, "device_mismatch": joined.device_mismatch}
    if skipped:
        provenance["skipped"] = list(skipped)
    return {
        "schema_version": PROFILE_SCHEMA_VERSION,
        "kind": PROFILE_KIND,
        "meta": analysis_meta(command),
        "spec": {"id": joined.spec_id, "name": joined.spec_name, "prefer": joined.prefer,
                 "ceilings": joined.ceilings},
        "provenance": provenance,
        "settings": dict(settings),
        "host_sessions": session_spread(joined.cases),
        "pace_scales": pace_scales(groups),
        "groups": groups,
        "excluded": joined.excluded,
    }


def write_profile(profile: dict[str, Any], path: str | Path, force: bool = False) -> Path:
    path = Path(path)
    if path.exists() and not force:
        raise UserError(f"{path} exists; calibrated profiles are not overwritten (choose a new file name, or --force)")
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json_text(profile)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a profile is shared data like a result file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


class Profile:
    """A calibrated profile read from disk (or built in memory)."""

    def __init__(self, data: dict[str, Any], path: str = "<memory>"):
        self.data = data
        self.path = path

    @property
    def spec_id(self) -> str:
        return self.data["spec"]["id"]

    @property
    def level(self) -> float:
        return float(self.data["settings"]["level"])

    @property
    def groups(self) -> list[dict]:
        return self.data["groups"]

    def result_hashes(self) -> set[str]:
        return {r["sha256"] for r in self.data["provenance"]["results"]}

    def find(self, op: str, impl: str, dtype: str, mode: str, backend: str | None = None,
             family: str | None = None, dims: Mapping[str, int] | None = None) -> dict:
        """The group that calibrates this op identity; an error names what the profile holds. ``dims``:
        the shape, which picks the group of the kernel path it takes on ``backend``
        (``paths.case_path`` on the profile's spec; without dims, the backend's usual kernel)."""
        spec_id = (self.data.get("spec") or {}).get("id")
        path = case_path(op, impl, dims, mode, backend, spec_id) if dims is not None else ""

        def op_ok(g):
            k = g["key"]
            return k["op"] == op or (k["op"] == "*" and family is not None and k["family"] == family)

        hits = [g for g in self.groups if op_ok(g) and g["key"]["impl"] == impl and g["key"]["dtype"] == dtype
                and g["key"]["mode"] == mode and (backend is None or g["key"]["backend"] == backend)
                and g["key"].get("path", "") == path]
        if not hits:
            held = sorted({f"{g['key']['op']}/{g['key']['impl']} {g['key']['dtype']} {g['key']['mode']}"
                           for g in self.groups})
            raise UserError(
                f"{self.path}: no calibrated group for {op}/{impl} {dtype} {mode}"
                + (f" [{backend}]" if backend else "") + (f" (kernel path {path})" if path else "")
                + "; the profile holds: " + ", ".join(held)
            )
        if len(hits) > 1:
            choices = sorted({g["key"]["backend"] for g in hits}) if backend is None else []
            if len(choices) > 1:
                raise UserError(
                    f"{self.path}: {op}/{impl} {dtype} {mode} is calibrated for several backends "
                    f"({', '.join(choices)}); name one"
                )
            devices = sorted({g["key"]["device"] for g in hits})
            if len(devices) > 1:
                raise UserError(f"{self.path}: {op}/{impl} {dtype} {mode} is calibrated on several devices "
                                f"({', '.join(devices)}); fit one profile per device")
        return hits[0]

    @staticmethod
    def model(group: dict) -> Model:
        return model_from_dict(group["model"])

    @staticmethod
    def interval(group: dict, pace: str | None = None) -> Interval:
        """The group's prediction interval; with ``pace`` ("host" or "gpu"), that pace's own where the
        group has one (fit.pace_intervals)."""
        iv = (group.get("interval_by_pace") or {}).get(pace) or group["interval"]
        return Interval(float(iv["level"]), float(iv["log_lo"]), float(iv["log_hi"]), int(iv["n_residuals"]),
                        bool(iv["level_guaranteed"]), **({"method": iv["method"]} if iv.get("method") else {}))


def read_profile(path: str | Path) -> Profile:
    path = Path(path)
    text = read_user_text(path, UserError, what="calibration profile")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); expected a calibration profile") from None
    if not isinstance(data, dict) or data.get("kind") != PROFILE_KIND:
        raise UserError(f"{path}: not a calibration profile (expected kind {PROFILE_KIND!r}; "
                        "write one with `ssmbench calibrate`)")
    version = data.get("schema_version")
    if version != PROFILE_SCHEMA_VERSION:
        raise UserError(f"{path}: calibration profile schema_version {version!r} is not supported; "
                        f"expected {PROFILE_SCHEMA_VERSION}")
    for k in ("spec", "provenance", "settings", "groups"):
        if k not in data:
            raise UserError(f"{path}: calibration profile has no {k!r} section; the file is damaged")
    for g in data["groups"]:
        if g.get("status") in ("calibrated", "pooled"):
            try:
                model_from_dict(g["model"])
            except (KeyError, TypeError, ValueError) as exc:
                raise UserError(f"{path}: group {g.get('label')!r}: unreadable model ({exc})") from None
    return Profile(data, str(path))
