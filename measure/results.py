"""Versioned result files: one new file per run, written case by case, never overwritten.

While a sweep runs it appends one JSON line per finished case to ``<stem>.jsonl`` (first line: the
header with ``schema_version``, ``meta`` and ``timing``), flushed and fsync'd, so a kill loses no
finished case. At the end the run is consolidated into ``<stem>.json``
(``{"schema_version", "meta", "timing", "cases"}``, written to a temporary file and renamed) and the
``.jsonl`` is removed. The reader accepts either form; a ``.jsonl`` whose last line was cut by a
kill loses only that unfinished line.

``stem`` is ``run-<UTC timestamp to the microsecond>-<pid>`` (``-<n>`` added on a collision); a file of that name that already exists is never touched.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..errors import UserError
from ..files import read_user_text

SCHEMA_VERSION = 1
STATUSES = ("ok", "failed_check", "oom", "unavailable", "error", "timeout")
# Statuses that --resume treats as done. "error" is retried: it is usually a bug or a transient
# failure that the next run may not have; "unavailable" is retried: it says a library was missing
# in that environment, and the case was never attempted; "timeout" (the case gave no result within the
# sweep's --case-timeout and the process was ended) is retried, e.g. with a longer limit.
FINISHED = ("ok", "failed_check", "oom")


class ResultsError(UserError):
    """A result file that cannot be read as ssm-bench results; ``str()`` names the file and the problem."""


def jsonable(o: Any) -> Any:
    """Plain JSON data: NaN and infinities become null (JSON has neither), numpy scalars become numbers."""
    if isinstance(o, bool) or o is None or isinstance(o, (str, int)):
        return o
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {str(k): jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [jsonable(v) for v in o]
    if hasattr(o, "item") and callable(o.item) and getattr(o, "ndim", 1) == 0:  # numpy / torch scalars
        return jsonable(o.item())
    if hasattr(o, "tolist"):
        return jsonable(o.tolist())
    if hasattr(o, "isoformat"):
        return o.isoformat()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"cannot write {type(o).__name__} to a result file")


def _dumps(o: Any, indent: int | None = None) -> str:
    return json.dumps(jsonable(o), indent=indent, allow_nan=False)


class ResultWriter:
    """Writes one run. ``add(record)`` per finished case; ``finish()`` consolidates."""

    def __init__(self, out_dir: str | Path, meta: dict[str, Any], timing: dict[str, Any], prefix: str = "run"):
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        base = f"{prefix}-{stamp}-{os.getpid()}"
        for i in range(1000):
            stem = base if i == 0 else f"{base}-{i}"
            if not (self.out_dir / f"{stem}.json").exists():
                try:
                    self._fh = open(self.out_dir / f"{stem}.jsonl", "x", encoding="utf-8")  # never overwrite
                except FileExistsError:
                    continue
                break
        else:
            raise ResultsError(f"{self.out_dir}: cannot find a free result file name for {base}")
        self.stem = stem
        self.jsonl_path = self.out_dir / f"{stem}.jsonl"
        self.json_path = self.out_dir / f"{stem}.json"
        self.meta, self.timing = meta, timing
        self.cases: list[dict[str, Any]] = []
        self._write_line({"record": "header", "schema_version": SCHEMA_VERSION, "meta": meta, "timing": timing})

    def _write_line(self, obj: dict[str, Any]) -> None:
        self._fh.write(_dumps(obj) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def add(self, record: dict[str, Any]) -> None:
        if record.get("status") not in STATUSES:
            raise ValueError(f"case record status {record.get('status')!r} not in {STATUSES}")
        rec = jsonable(record)
        self._write_line({"record": "case", **rec})
        self.cases.append(rec)

    def finish(self, extra_meta: dict[str, Any] | None = None) -> Path:
        """Write the consolidated JSON (atomically) and remove the JSON-lines file."""
        self._fh.close()
        meta = {**self.meta, **(extra_meta or {}), "complete": True}
        doc = {"schema_version": SCHEMA_VERSION, "meta": meta, "timing": self.timing, "cases": self.cases}
        tmp = self.out_dir / f".{self.stem}.json.tmp"
        with open(tmp, "x", encoding="utf-8") as fh:
            fh.write(_dumps(doc, indent=1) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        if self.json_path.exists():
            raise ResultsError(f"{self.json_path}: exists; refusing to overwrite (the run is in {self.jsonl_path})")
        os.replace(tmp, self.json_path)
        self.jsonl_path.unlink()
        return self.json_path

    def close(self) -> None:
        """Leave the JSON-lines file as it is (interrupted run): every finished case is already in it."""
        if not self._fh.closed:
            self._fh.close()


@dataclass
class ResultFile:
    path: Path
    schema_version: int
    meta: dict[str, Any]
    timing: dict[str, Any]
    cases: list[dict[str, Any]]
    complete: bool
    notes: list[str] = field(default_factory=list)


def _check_version(path: Path, v: Any) -> int:
    if v is None:
        raise ResultsError(f"{path}: no 'schema_version'; this is not an ssm-bench result file")
    if v != SCHEMA_VERSION:
        raise ResultsError(
            f"{path}: schema_version {v!r} is not supported; this ssm-bench reads result schema_version "
            f"{SCHEMA_VERSION}")
    return v


def _check_cases(path: Path, cases: Any) -> list[dict[str, Any]]:
    if not isinstance(cases, list):
        raise ResultsError(f"{path}: 'cases' must be a list, got {type(cases).__name__}")
    for i, c in enumerate(cases):
        if not isinstance(c, dict):
            raise ResultsError(f"{path}: cases[{i}] must be an object, got {type(c).__name__}")
        missing = [k for k in ("key", "op", "impl", "backend", "dims", "dtype", "mode", "status") if k not in c]
        if missing:
            raise ResultsError(f"{path}: cases[{i}] lacks field(s) {', '.join(missing)}")
        if c["status"] not in STATUSES:
            raise ResultsError(f"{path}: cases[{i}] ({c['key']}): status {c['status']!r} is not one of "
                               f"{', '.join(STATUSES)}")
    return cases


def _read_json(path: Path, text: str) -> ResultFile:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(doc, dict):
        raise ResultsError(f"{path}: expected a JSON object at the top level, got {type(doc).__name__}")
    _check_version(path, doc.get("schema_version"))
    for k in ("meta", "timing", "cases"):
        if k not in doc:
            raise ResultsError(f"{path}: missing top-level key {k!r}")
    cases = _check_cases(path, doc["cases"])
    return ResultFile(path, SCHEMA_VERSION, doc["meta"], doc["timing"], cases, bool(doc["meta"].get("complete")))


def _read_jsonl(path: Path, text: str) -> ResultFile:
    lines = text.split("\n")
    ends_clean = text.endswith("\n")
    if ends_clean:
        lines = lines[:-1]
    notes: list[str] = []
    objs = []
    for n, line in enumerate(lines, start=1):
        try:
            objs.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if n == len(lines) and not ends_clean:
                # The writer was killed while writing this line: that case had not finished.
                notes.append(f"line {n} was cut off (interrupted write) and is ignored")
                break
            raise ResultsError(f"{path}: line {n} is not valid JSON ({exc.msg})") from None
    if not objs or not isinstance(objs[0], dict) or objs[0].get("record") != "header":
        raise ResultsError(f"{path}: the first line must be the header record with schema_version")
    head = objs[0]
    _check_version(path, head.get("schema_version"))
    cases = []
    for n, o in enumerate(objs[1:], start=2):
        if not isinstance(o, dict) or o.get("record") != "case":
            raise ResultsError(f"{path}: line {n} is not a case record")
        cases.append({k: v for k, v in o.items() if k != "record"})
    return ResultFile(path, SCHEMA_VERSION, head.get("meta") or {}, head.get("timing") or {},
                      _check_cases(path, cases), complete=False, notes=notes)


def read_results(path: str | Path) -> ResultFile:
    """Read one result file (``.json`` consolidated or ``.jsonl`` incremental) and check it."""
    path = Path(path)
    text = read_user_text(path, ResultsError)
    if path.suffix == ".jsonl":
        return _read_jsonl(path, text)
    if path.suffix == ".json":
        return _read_json(path, text)
    raise ResultsError(f"{path}: expected a .json or .jsonl result file")


_STEM = re.compile(r"^.+?-(?P<stamp>\d{8}T\d{6}(\.\d{6})?Z)-\d+(-(?P<i>\d+))?$")


def _age(p: Path) -> tuple:
    """Sort key: the UTC timestamp in the name, then the collision index (plain name order would put
    'run-T-7-1' before 'run-T-7')."""
    m = _STEM.match(p.stem)
    return (0, m["stamp"], int(m["i"] or 0), p.name) if m else (1, "", 0, p.name)


def result_files(out_dir: str | Path) -> list[Path]:
    """Result files in a folder, oldest first; a run present as both .json and .jsonl counts once."""
    d = Path(out_dir)
    if not d.is_dir():
        return []
    files = sorted((p for p in d.iterdir() if p.suffix in (".json", ".jsonl") and not p.name.startswith(".")),
                   key=_age)
    stems_json = {p.stem for p in files if p.suffix == ".json"}
    return [p for p in files if not (p.suffix == ".jsonl" and p.stem in stems_json)]


def read_dir(out_dir: str | Path) -> list[ResultFile]:
    return [read_results(p) for p in result_files(out_dir)]


def measured_on(rf: ResultFile) -> str | None:
    """The name of the device a result file was measured on (``meta.device.name``), or None."""
    dev = rf.meta.get("device")
    return dev.get("name") if isinstance(dev, dict) else None


@dataclass
class ResumeSet:
    """What ``--resume`` found: keys finished on this device, and the files it read or set aside."""

    keys: set[str]
    files: list[str]
    other_device: dict[str, str | None]  # file -> the device it was measured on (its cases are not skipped)

    def to_dict(self) -> dict[str, Any]:
        return {"finished_statuses": list(FINISHED), "from_files": self.files,
                "ignored_other_device": self.other_device}


def finished_keys(out_dirs: str | Path | Iterable[str | Path], device: str | None = None) -> ResumeSet:
    """Cases already finished (status in FINISHED) in the result files of one or more folders.

    With ``device`` (a device name as the metadata records it, e.g. "NVIDIA H200"), only files
    measured on a device of that exact name count: a case timed on another GPU model is not a
    finished case of this one, so resuming never mixes two devices into one dataset. The files set
    aside are listed with their device.
    """
    dirs = [out_dirs] if isinstance(out_dirs, (str, Path)) else list(out_dirs)
    keys: set[str] = set()
    files: list[str] = []
    other: dict[str, str | None] = {}
    for d in dirs:
        for rf in read_dir(d):
            if device is not None and measured_on(rf) != device:
                other[str(rf.path)] = measured_on(rf)
                continue
            files.append(str(rf.path))
            keys.update(c["key"] for c in rf.cases if c["status"] in FINISHED)
    return ResumeSet(keys, files, other)


def latest_by_key(files: Iterable[ResultFile]) -> dict[str, dict[str, Any]]:
    """One record per case key: the one from the latest file (files are given oldest first)."""
    out: dict[str, dict[str, Any]] = {}
    for rf in files:
        for c in rf.cases:
            out[c["key"]] = c
    return out
