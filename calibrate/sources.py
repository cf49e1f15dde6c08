"""Read measured result files for calibration, with their provenance (path and sha256).

Files are read by measure's own reader (``ssmbench.measure.results.read_results``: consolidated
``.json`` or incremental ``.jsonl``, schema and statuses checked). Only cases with status "ok" carry
a time; the others are kept as exclusions with their status and reason, never dropped silently.

Calibration never trusts a file it cannot name: every file read is listed with its sha256 (of the
bytes read, ``ResultFile.sha256``) so that a calibrated profile says exactly which measurements it
was fitted on. An incremental ``.jsonl`` of a run still in progress is read as it stands and
flagged incomplete.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import UserError
from ..measure.results import ResultFile, read_results, result_files


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
            out.append(read_results(f))
    if not any(rf.cases for rf in out):
        raise UserError(
            "no measured cases: the result file(s) " + ", ".join(str(rf.path) for rf in out) + " hold no cases"
        )
    return out
