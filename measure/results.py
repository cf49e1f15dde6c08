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
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Collection, Iterable, Iterator, Sequence

from ..analytic.cases import Case
from ..errors import UserError
from ..files import read_user_text
from ..provenance import file_sha256

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


def launch_regime(rec: Mapping[str, Any]) -> str:
    """The launch regime of a stored record (a dict as written): "graph" where its calls were CUDA-graph
    replays, by the timer (``timing.cuda_graph``) or by the backend (``Backend.graph_modes``: the
    blocks' decode steps replay their own graph with the timer's switch off), else "eager"."""
    # the backend registry (its modules import no torch); imported here: the backends import this module's package
    from .backends.base import launch_regime as backend_launch

    return backend_launch(rec.get("op"), rec.get("backend"), rec.get("mode"), rec.get("timing"))


@dataclass(frozen=True, eq=False)
class Record(Mapping):
    """One case record of a result file, typed: its identity, status and timing, and where it is
    stored (``path``, ``index`` in the file's cases). Mapping access (``record["time_s"]``) gives the
    fields as stored, so nothing a file holds is lost (analytic counts, roofline, gate, ...)."""

    key: str
    status: str
    reason: str | None
    time_s: Mapping[str, Any] | None
    energy: Mapping[str, Any] | None
    started_utc: str | None
    path: Path
    index: int
    raw: Mapping[str, Any] = field(repr=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: Path, index: int) -> "Record":
        if not isinstance(d, Mapping):
            raise ResultsError(f"{path}: cases[{index}] must be an object, got {type(d).__name__}")
        if "key" not in d or "status" not in d:
            raise ResultsError(f"{path}: cases[{index}] lacks field(s) "
                               f"{', '.join(k for k in ('key', 'status') if k not in d)}")
        return cls(str(d["key"]), d["status"], d.get("reason"), d.get("time_s"), d.get("energy"),
                   d.get("started_utc"), Path(path), index, d)

    @cached_property
    def case(self) -> Case:
        """The case identity; a record whose identity is not a valid case is an error naming it."""
        try:
            return Case.from_dict(self.raw)
        except UserError as exc:
            raise ResultsError(f"{self.path}: cases[{self.index}] ({self.key}): {exc}") from None

    @property
    def launch(self) -> str:
        """"graph" if the call was timed as CUDA-graph replays (by the timer or by the backend's own
        graph), else "eager": the launch regime of its bound and estimate (``launch_regime``)."""
        return launch_regime(self.raw)

    def __getitem__(self, name: str) -> Any:
        return self.raw[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)


@dataclass
class ResultFile:
    path: Path
    schema_version: int
    meta: dict[str, Any]
    timing: dict[str, Any]
    cases: list[dict[str, Any]]
    complete: bool
    notes: list[str] = field(default_factory=list)
    sha256: str = ""  # of the file's bytes: calibration names exactly the measurements it was fitted on

    @property
    def records(self) -> list[Record]:
        return [Record.from_dict(c, self.path, i) for i, c in enumerate(self.cases)]

    @property
    def device(self) -> str:
        """The device it was measured on; a file that names none is an error (it cannot be matched to a spec)."""
        name = measured_on(self)
        if name is None:
            raise UserError(f"{self.path}: the result metadata names no device (meta.device.name); "
                            "cannot match it to a spec")
        return name


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
    return _parse(path, read_user_text(path, ResultsError))


def _parse(path: Path, text: str) -> ResultFile:
    if path.suffix == ".jsonl":
        rf = _read_jsonl(path, text)
    elif path.suffix == ".json":
        rf = _read_json(path, text)
    else:
        raise ResultsError(f"{path}: expected a .json or .jsonl result file")
    rf.sha256 = file_sha256(path)
    return rf


_STEM = re.compile(r"^.+?-(?P<stamp>\d{8}T\d{6}(\.\d{6})?Z)-\d+(-(?P<i>\d+))?$")


def _age(p: Path) -> tuple:
    """Sort key: the UTC timestamp in the name, then the collision index (plain name order would put
    'run-T-7-1' before 'run-T-7')."""
    m = _STEM.match(p.stem)
    return (0, m["stamp"], int(m["i"] or 0), p.name) if m else (1, "", 0, p.name)


def oldest_first(files: Iterable[ResultFile]) -> list[ResultFile]:
    """Result files from any folders in run order (the UTC timestamp in their names, then the path):
    the order ``latest_by_key`` expects, and one order however the files or folders were named."""
    return sorted(files, key=lambda rf: (_age(rf.path), str(rf.path)))


def result_files(out_dir: str | Path) -> list[Path]:
    """Result files in a folder, oldest first; a run present as both .json and .jsonl counts once."""
    d = Path(out_dir)
    if not d.is_dir():
        return []
    files = sorted((p for p in d.iterdir() if p.suffix in (".json", ".jsonl") and not p.name.startswith(".")),
                   key=_age)
    stems_json = {p.stem for p in files if p.suffix == ".json"}
    return [p for p in files if not (p.suffix == ".jsonl" and p.stem in stems_json)]


# The top level of a consolidated result file, as ResultWriter.finish writes it.
TOP_LEVEL_KEYS = ("schema_version", "meta", "timing", "cases")


def not_measurements(path: Path, text: str) -> str | None:
    """Why a .json / .jsonl file found in a results folder is not a measurement file, or None when it is
    one or claims to be one (then the reader checks it, and a damaged file is an error naming it).

    Decided by content, not by name: folders hold byte audits, probes, calibrated profiles and gap
    reports beside the runs, and those share ``schema_version`` and ``meta`` with result files. A
    result file's top level holds only TOP_LEVEL_KEYS (a ``.jsonl``: a first line with ``record``);
    any other top-level key says it is another kind of file. Text that is not JSON cannot say what it
    is: it counts as a damaged result file, so that nothing is dropped unseen."""
    first = text.split("\n", 1)[0] if path.suffix == ".jsonl" else text
    try:
        doc = json.loads(first)
    except json.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return f"a JSON {type(doc).__name__}, not an object"
    if path.suffix == ".jsonl":
        return None if "record" in doc else "its first line is not a result header (no 'record' key)"
    if not doc:
        return "an empty JSON object"
    other = sorted(k for k in doc if k not in TOP_LEVEL_KEYS)
    if not other:
        return None
    says = next((f"{k} {doc[k]!r}" for k in ("kind", "tool") if isinstance(doc.get(k), str)), None)
    listed = ", ".join(other[:4]) + (", ..." if len(other) > 4 else "")
    return (f"{says + ': ' if says else ''}top-level keys {listed} are not in a result file "
            f"({', '.join(TOP_LEVEL_KEYS)})")


@dataclass
class Found:
    """What ``find_results`` read: the result files, and the other files it passed over with why."""

    files: list[ResultFile]
    skipped: list[dict[str, str]]  # {"path", "reason"}


def find_results(folder: str | Path) -> Found:
    """Every result file in ``folder`` and its subfolders (each folder's oldest first, folders by
    name), read and checked; other JSON / JSONL files are listed in ``skipped``, never read as results."""
    folder = Path(folder)
    found = Found([], [])
    for d in [folder, *sorted(q for q in folder.rglob("*") if q.is_dir())]:
        for path in result_files(d):
            text = read_user_text(path, ResultsError)
            why = not_measurements(path, text)
            if why is None:
                found.files.append(_parse(path, text))
            else:
                found.skipped.append({"path": str(path), "reason": f"not a measurement file: {why}"})
    return found


def read_dir(out_dir: str | Path) -> list[ResultFile]:
    """The measurement files of one folder (not its subfolders), oldest first. Other JSON files beside
    them (a build record, a probe, a byte audit: ``not_measurements`` says why) are passed over, as
    ``find_results`` does, so that a run folder used for ``--resume-from`` may hold them; a damaged
    result file is still an error naming it."""
    out = []
    for path in result_files(out_dir):
        text = read_user_text(path, ResultsError)
        if not_measurements(path, text) is None:
            out.append(_parse(path, text))
    return out


def measured_on(rf: ResultFile) -> str | None:
    """The name of the device a result file was measured on (``meta.device.name``, as
    measure/environment.py records it: the CUDA device name or the CPU model), or None."""
    dev = rf.meta.get("device")
    name = dev.get("name") if isinstance(dev, dict) else None
    return name.strip() if isinstance(name, str) and name.strip() else None


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
    aside are listed with their device. A case is finished when it has a finished record
    (``latest_by_key`` with ``statuses=FINISHED``): a later retry that failed does not undo it.
    """
    dirs = [out_dirs] if isinstance(out_dirs, (str, Path)) else list(out_dirs)
    kept: list[ResultFile] = []
    other: dict[str, str | None] = {}
    for d in dirs:
        for rf in read_dir(d):
            if device is not None and measured_on(rf) != device:
                other[str(rf.path)] = measured_on(rf)
                continue
            kept.append(rf)
    keys = set(latest_by_key(kept, device=device, statuses=FINISHED))
    return ResumeSet(keys, [str(rf.path) for rf in kept], other)


def latest_by_key(files: Sequence[ResultFile], device: str | None = None,
                  statuses: Collection[str] | None = None) -> dict[str, Record]:
    """One record per case key: the latest, by ``started_utc`` (ISO 8601 UTC, so text order is time
    order; a record without one is older than any with one), then the later file (files are given
    oldest first), then the later record in its file.

    ``device``: only files measured on a device of exactly that name (``measured_on``); one device's
    record never replaces another's. ``statuses``: only records with one of these statuses (resume
    asks for the latest *finished* record). This is the one rule for "which record of a case stands":
    ``finished_keys`` (resume) and calibration's superseded records both use it.
    """
    best: dict[str, tuple[tuple[str, int, int], Record]] = {}
    for fi, rf in enumerate(files):
        if device is not None and measured_on(rf) != device:
            continue
        for rec in rf.records:
            if statuses is not None and rec.status not in statuses:
                continue
            rank = (str(rec.started_utc or ""), fi, rec.index)
            if rec.key not in best or rank > best[rec.key][0]:
                best[rec.key] = (rank, rec)
    return {k: v[1] for k, v in best.items()}
