"""Model records and model-run files (``docs/schemas/model.schema.json``).

A model-run file ``model-run-<UTC stamp>-<pid>.json`` holds ``{"schema_version": 1, "kind":
"model-run", "meta": <environment>, "records": [...]}``. Its top-level ``kind`` keeps it out of the
op-level readers (``measure/results.find_results`` lists it as "not a measurement file"), so that
calibration never mistakes a whole model for an op case. The file is rewritten whole (temporary file,
then rename) after every record, so a run cut off by its deadline keeps every finished record.

One record is one (model, runner, phase, runtime, batch, seqlen) point; every field is present, null
where the step did not run (``RECORD_FIELDS``). ``seqlen`` is the prompt (prefill), the sequence
(train) or the cached context (decode). Units: seconds, joules, bytes.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...errors import UserError
from ..results import jsonable
from .host_reference import python_step_s
from .kernel_map import measured_profile

SCHEMA_VERSION = 1
KIND = "model-run"
PHASES = ("prefill", "decode", "train")
RUNTIMES = ("mamba-ssm", "hf-eager", "cuda-graph", "torch-compile")
STATUSES = ("ok", "oom", "unavailable", "error", "skipped")
RECORD_FIELDS = ("key", "model", "runner", "arch", "phase", "runtime", "runtime_note", "batch", "seqlen", "dtype",
                 "optimizer", "tokens", "status", "reason", "started_utc", "duration_s", "library", "params",
                 "module_calls", "time_s", "timing", "energy", "clocks", "peak_memory_bytes", "profile", "notes")


class ModelRecordError(UserError):
    """A model-run file that cannot be read; the message names the file and the problem."""


def record_key(model: str, runner: str, phase: str, runtime: str, batch: int, seqlen: int) -> str:
    return f"model/{model}/{runner}/{phase}/{runtime}/b{batch}_l{seqlen}"


def new_record(entry: dict, phase: str, runtime: str, batch: int, seqlen: int, dtype: str) -> dict[str, Any]:
    """A record with its identity set and every measured field null (status 'error' until set)."""
    rec = {k: None for k in RECORD_FIELDS}
    tokens = batch if phase == "decode" else batch * seqlen
    rec.update(key=record_key(entry["model"], entry["runner"], phase, runtime, batch, seqlen), model=entry["model"],
               runner=entry["runner"], arch=entry.get("arch"), phase=phase, runtime=runtime, batch=batch,
               seqlen=seqlen, dtype=dtype, optimizer=bool(entry.get("optimizer")) if phase == "train" else None,
               tokens=tokens, status="error", notes=[],
               started_utc=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds"))
    return rec


class ModelRunWriter:
    def __init__(self, out_dir: str | Path, meta: dict[str, Any]):
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        self.path = self.dir / f"model-run-{stamp}-{os.getpid()}.json"
        if self.path.exists():
            raise ModelRecordError(f"{self.path}: exists; refusing to overwrite")
        self.meta = meta
        self.records: list[dict[str, Any]] = []
        self._write()

    def _write(self) -> None:
        doc = {"schema_version": SCHEMA_VERSION, "kind": KIND, "meta": self.meta, "records": self.records}
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps(jsonable(doc), indent=1, allow_nan=False) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

    def add(self, record: dict[str, Any]) -> None:
        if record.get("status") not in STATUSES:
            raise ValueError(f"model record status {record.get('status')!r} not in {STATUSES}")
        missing = [k for k in RECORD_FIELDS if k not in record]
        if missing:
            raise ValueError(f"model record lacks {missing}")
        self.records.append(jsonable(record))
        self._write()

    def finish(self, extra_meta: dict[str, Any] | None = None) -> Path:
        self.meta = {**self.meta, **(extra_meta or {}), "complete": True}
        self._write()
        return self.path


def read_model_run(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelRecordError(f"{path}: cannot read a model-run file ({exc})") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise ModelRecordError(f"{path}: not a model-run file (expected top-level kind {KIND!r})")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ModelRecordError(f"{path}: schema_version {doc.get('schema_version')!r}; this ssm-bench reads "
                               f"{SCHEMA_VERSION}")
    recs = doc.get("records")
    if not isinstance(recs, list):
        raise ModelRecordError(f"{path}: 'records' must be a list")
    for i, r in enumerate(recs):
        missing = [k for k in RECORD_FIELDS if not isinstance(r, dict) or k not in r]
        if missing:
            raise ModelRecordError(f"{path}: records[{i}] lacks {', '.join(missing)}")
        if r["status"] not in STATUSES:
            raise ModelRecordError(f"{path}: records[{i}] ({r['key']}): status {r['status']!r} not in "
                                   f"{', '.join(STATUSES)}")
    return doc


def find_model_runs(folder: str | Path) -> list[Path]:
    """Every model-run file under ``folder`` (recursively), in name (time) order."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelRecordError(f"{folder}: no such folder")
    return sorted(folder.rglob("model-run-*.json"), key=lambda p: (p.name, str(p)))


def _records(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every record of the files in file order, each with ``_file``, ``_device`` (the GPU's name) and
    ``_versions`` (the run's library versions, None where the run's metadata has none: a library missing on
    the device is a None version)."""
    out = []
    for p in paths:
        doc = read_model_run(p)
        meta = doc.get("meta") or {}
        out += [{**r, "_file": str(p), "_device": (meta.get("device") or {}).get("name"),
                 "_versions": meta.get("versions")} for r in doc["records"]]
    return out


def _latest(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per key, the latest record by start time; a ``skipped`` record (the run's deadline came before the step
    ran: nothing was measured) stands only where the key has no other record."""
    def rank(r: dict[str, Any]) -> tuple[bool, str]:
        return r.get("status") != "skipped", str(r.get("started_utc") or "")

    best: dict[str, dict[str, Any]] = {}
    for r in records:  # in file order: of two equal ranks the later file's record stands
        if r["key"] not in best or rank(r) >= rank(best[r["key"]]):
            best[r["key"]] = r
    return best


def latest_records(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """One record per key, the latest by start time (then the later file; a skipped record only where the key has
    no other), with ``_records``' fields."""
    return list(_latest(_records(paths)).values())


def standing_records(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """One record per key, the one that stands for the key's measurement: ``latest_records``' record, except
    where the key has at least three ok records (a repeat measurement, measure/suites/models/host_noise_h200.yaml):
    then the ok record whose step time (its median of timed calls) is the median of theirs (of an even
    number, the later of the two middle ones). A host-bound eager step moves by up to ~75 % between records
    of one call (characterize's "Repeat measurements"): the latest of them is one draw, the median record the
    robust one, chosen on the measured times alone."""
    records = _records(paths)
    standing = _latest(records)
    ok: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("status") == "ok" and (r.get("time_s") or {}).get("median"):
            ok.setdefault(r["key"], []).append(r)
    for key, recs in ok.items():
        if len(recs) >= 3:
            recs = sorted(recs, key=lambda r: (float(r["time_s"]["median"]), str(r.get("started_utc") or "")))
            standing[key] = recs[len(recs) // 2]
    return list(standing.values())


def repeat_spread(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Per key, over every ok record of the files (all of them: a key measured in three calls gives three,
    where ``latest_records`` keeps one): ``n``, ``min_s`` / ``median_s`` / ``max_s`` of the step time (each
    record's median of its timed calls), ``spread`` = (max - min) / median, ``idle_share`` (median over the
    records of profile.host_idle_s / step: the share of the step the GPU waited for the host), ``in_order_s``
    (the times in file and record order: a drift over a call shows as a trend), ``files``, and
    ``host_python_s``: [min, max] over the records with a ``host_reference`` of its Python loop step (the mean
    of before and after the timed calls; measure/models/host_reference.py), None where no record has one."""
    by_key: dict[str, list[tuple[int, float, float | None, str]]] = {}
    python: dict[str, list[float]] = {}
    order = 0
    for p in paths:
        for r in json.loads(Path(p).read_text(encoding="utf-8"))["records"]:  # as written: checked by the caller
            order += 1
            if r.get("status") != "ok":
                continue
            t = float(r["time_s"]["median"])
            idle = measured_profile(r).get("host_idle_s")
            by_key.setdefault(r["key"], []).append((order, t, None if idle is None else float(idle) / t, str(p)))
            if r.get("host_reference"):
                python.setdefault(r["key"], []).append(python_step_s(r["host_reference"]))
    out = []
    for key, recs in sorted(by_key.items()):
        ts = [t for _, t, _, _ in recs]
        med = statistics.median(ts)
        idles = [i for _, _, i, _ in recs if i is not None]
        out.append({"key": key, "n": len(ts), "min_s": min(ts), "median_s": med, "max_s": max(ts),
                    "spread": (max(ts) - min(ts)) / med if med > 0 else None,
                    "idle_share": statistics.median(idles) if idles else None,
                    "in_order_s": [t for _, t, _, _ in sorted(recs)],
                    "files": sorted({f for _, _, _, f in recs}),
                    "host_python_s": [min(python[key]), max(python[key])] if key in python else None})
    return out
