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

from pathlib import Path

from ..errors import UserError
from ..measure.results import (
    Found,
    ResultFile,
    find_results,
    oldest_first,
    read_results,
)


def find_all(paths: list[str | Path]) -> Found:
    """Every result file in the given files or directories (and their subdirectories), oldest run first
    (``oldest_first``: the fits then do not depend on the order the paths were given in). A file given by name is read as a result file; in a directory, other JSON /
    JSONL files (byte audits, probes, calibrated profiles, gap reports) are skipped and listed with
    why (``measure.results.not_measurements``)."""
    files: list[ResultFile] = []
    skipped: list[dict[str, str]] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = find_results(p)
            if not found.files:
                raise UserError(f"{p}: no measure result files (*.json or *.jsonl) in this directory"
                                + "".join(f"\n  skipped {s['path']}: {s['reason']}" for s in found.skipped))
            files.extend(found.files)
            skipped.extend(found.skipped)
        elif p.is_file():
            files.append(read_results(p))
        else:
            raise UserError(f"{p}: no such file or directory; expected a result file or a directory of them")
    seen: set[Path] = set()
    out = []
    for rf in files:
        r = rf.path.resolve()
        if r not in seen:
            seen.add(r)
            out.append(rf)
    if not any(rf.cases for rf in out):
        raise UserError(
            "no measured cases: the result file(s) " + ", ".join(str(rf.path) for rf in out) + " hold no cases"
        )
    return Found(oldest_first(out), skipped)


def load_results(paths: list[str | Path]) -> list[ResultFile]:
    """The result files of ``find_all`` (the files it skipped are not reported)."""
    return find_all(paths).files
