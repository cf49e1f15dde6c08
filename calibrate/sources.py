"""Read measured result files for calibration, with their provenance (path and sha256).

Files are read by measure's own reader (``ssmbench.measure.results.read_results``: consolidated
``.json`` or incremental ``.jsonl``, schema and statuses checked). Only cases with status "ok" carry
a time; the others are kept as exclusions with their status and reason, never dropped silently.

Calibration never trusts a file it cannot name: every file read is listed with its sha256 (of the
bytes read) so that a calibrated profile says exactly which measurements it was fitted on. An
incremental ``.jsonl`` of a run still in progress is read as it stands and flagged incomplete.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..measure.results import read_results, result_files

# measure/environment.py records the device (GPU via torch.cuda, or the CPU model) as
# meta["device"]["name"]; a result without it is an error, not a guess.
_DEVICE_NAME_PATHS = (("device", "name"),)


@dataclass(frozen=True)
class ResultFile:
    path: str
    sha256: str
    meta: dict[str, Any]
    cases: list[dict[str, Any]] = field(repr=False)
    complete: bool = True

    @property
    def device(self) -> str:
        return device_name(self.meta, self.path)


def device_name(meta: dict[str, Any], where: str = "<result>") -> str:
    for path in _DEVICE_NAME_PATHS:
        node: Any = meta
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, str) and node.strip():
            return node.strip()
    wanted = " or ".join("meta." + ".".join(p) for p in _DEVICE_NAME_PATHS)
    raise UserError(f"{where}: the result metadata names no device ({wanted}); cannot match it to a spec")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _read_one(path: Path) -> ResultFile:
    rf = read_results(path)
    return ResultFile(str(path), _sha256(path), dict(rf.meta or {}), list(rf.cases), bool(rf.complete))


def _is_calibration_output(path: Path) -> bool:
    """A directory of results may also hold a calibration profile or a gap report: skip those by
    their content ('kind' names them), not by their file name."""
    if path.suffix != ".json":
        return False
    try:
        head = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False  # let the reader give the precise message
    return isinstance(head, dict) and str(head.get("kind", "")).startswith("ssmbench.")


def load_results(paths: list[str | Path]) -> list[ResultFile]:
    """Every result file in the given files or directories (and their subdirectories), sorted by path."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = [f for d in [p, *sorted(q for q in p.rglob("*") if q.is_dir())] for f in result_files(d)]
            found = [f for f in found if not _is_calibration_output(f)]
            if not found:
                raise UserError(f"{p}: no measure result files (*.json or *.jsonl) in this directory")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise UserError(f"{p}: no such file or directory; expected a result file or a directory of them")
    seen: set[Path] = set()
    out = []
    for f in files:
        r = f.resolve()
        if r not in seen:
            seen.add(r)
            out.append(_read_one(f))
    if not any(rf.cases for rf in out):
        raise UserError(
            "no measured cases: the result file(s) " + ", ".join(rf.path for rf in out) + " hold no cases"
        )
    return out
