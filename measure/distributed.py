"""Sharded measurement over the ranks of a ``torch.distributed`` job (``measure --distributed``).

Launch: ``torchrun --nproc-per-node N -m ssmbench measure --suite S --out DIR --distributed``
(across nodes: the same command on every node with torchrun's rendezvous options,
``--nnodes``, ``--rdzv-backend c10d``, ``--rdzv-endpoint HOST:PORT``). torchrun sets ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``; the process group is initialised
from them (``init_method="env://"``): NCCL when the run measures on CUDA (each rank on
``cuda:LOCAL_RANK``), gloo on the CPU (so that CI can run the whole path without a GPU). Control
messages (who finished, the records to merge) go over a gloo group in either case: they are Python
objects, which NCCL would have to stage through GPU memory.

How the work is split and kept:

- Assignment: case ``i`` (its index among the suite's cases that pass ``--filter``, in suite order)
  runs on rank ``i mod world_size`` (``shard_of``). It depends on neither what is finished nor when
  a rank starts, so a restarted job gives every rank the same cases again, and ranks never talk
  while they measure. With the suite's cases of similar duration (one timing window each), this
  spreads work evenly; the merged file records each rank's wall time so imbalance is visible.
- Each rank writes its own result file, ``rank<r>-<UTC stamp>-<pid>.jsonl``, one fsync'd line per
  finished case (``results.ResultWriter``), with ``meta.distributed`` naming its rank, host and GPU
  (name, UUID). A rank that dies loses only its unfinished case; the others' files are theirs.
- ``--resume``: each rank skips the cases finished in any result file of ``--out`` (every rank's,
  merged or not) on a device of its name, then runs the rest of its share.
- The end: every rank sends its records to rank 0 (gloo), rank 0 writes one consolidated result file
  (``run-<stamp>-<pid>.json``, ``merge``) whose ``meta.distributed.ranks`` lists every rank's host,
  GPU name and UUID, file and counts, and whose records carry ``rank``; then each rank removes its own
  rank file (the merged file holds all of it). If the job ends early (a rank died; torchrun then
  stops the others), the rank files stay: ``ssmbench merge-results DIR`` merges them, or
  ``--resume`` finishes the sweep.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError
from .results import ResultFile, ResultWriter, read_results, result_files

# Environment variables torchrun sets for every worker (torch.distributed.run, "Environment variables").
TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
# The longest a rank waits for the others at the end (torch's default process-group timeout is 30 min for
# gloo and 10 min for NCCL; a sweep's ranks can finish far apart, so the barrier allows a long wait).
END_BARRIER_TIMEOUT_S = 6 * 3600.0
RANK_PREFIX = "rank"
ASSIGNMENT = "case index (among the cases passing --filter, suite order) mod world_size"


def shard_of(index: int, world_size: int) -> int:
    """The rank that runs the case at ``index`` (see the module docstring)."""
    return index % world_size


@dataclass(frozen=True)
class Rank:
    """This process's place in the job, as torchrun gave it."""

    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: str  # the torch device this rank measures on


def torchrun_env() -> dict[str, str]:
    """torchrun's variables, or a UserError saying how to launch when they are missing."""
    missing = [k for k in TORCHRUN_ENV if k not in os.environ]
    if missing:
        raise UserError(f"--distributed needs the environment torchrun sets ({', '.join(missing)} missing); launch "
                        "with: torchrun --nproc-per-node N -m ssmbench measure ... --distributed")
    return {k: os.environ[k] for k in TORCHRUN_ENV}


def rank_device(device_arg: str, local_rank: int) -> str:
    """The device of one rank: ``cuda`` becomes ``cuda:LOCAL_RANK`` (one GPU per rank); ``cpu`` stays."""
    if device_arg == "cpu":
        return "cpu"
    if device_arg == "cuda":
        return f"cuda:{local_rank}"
    raise UserError(f"--device {device_arg!r} with --distributed: give 'cuda' (each rank takes cuda:LOCAL_RANK) "
                    "or 'cpu' (gloo); a fixed GPU index would put every rank on one GPU")


def init(device_arg: str) -> Rank:
    """Initialise the default process group from torchrun's environment (NCCL on CUDA, gloo on the CPU)
    and, for control messages, a gloo group (``control_group``)."""
    import torch
    import torch.distributed as dist

    env = torchrun_env()
    rank, world, local = int(env["RANK"]), int(env["WORLD_SIZE"]), int(env["LOCAL_RANK"])
    device = rank_device(device_arg, local)
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UserError("--device cuda: CUDA is not available here; use --device cpu (gloo) to test the path")
        if local >= torch.cuda.device_count():
            raise UserError(f"LOCAL_RANK {local} but this node has {torch.cuda.device_count()} GPU(s); "
                            "--nproc-per-node must not exceed the GPUs of a node")
        torch.cuda.set_device(local)
    backend = "nccl" if device.startswith("cuda") else "gloo"
    if not dist.is_initialized():
        kw = {"device_id": torch.device(device)} if backend == "nccl" else {}
        dist.init_process_group(backend, init_method="env://",
                                timeout=_dt.timedelta(seconds=END_BARRIER_TIMEOUT_S), **kw)
    return Rank(rank, world, local, backend, device)


_CONTROL = None


def control_group():
    """A gloo group of all ranks for Python objects (created once; the default group when it is gloo)."""
    global _CONTROL
    import torch.distributed as dist

    if _CONTROL is None:
        _CONTROL = (dist.group.WORLD if dist.get_backend() == "gloo"
                    else dist.new_group(backend="gloo", timeout=_dt.timedelta(seconds=END_BARRIER_TIMEOUT_S)))
    return _CONTROL


def rank_meta(r: Rank) -> dict[str, Any]:
    """``meta.distributed`` of one rank's file."""
    return {"rank": r.rank, "world_size": r.world_size, "local_rank": r.local_rank, "backend": r.backend,
            "host": socket.gethostname(), "assignment": ASSIGNMENT,
            "launcher": "torchrun (torch.distributed.run)", "master_addr": os.environ.get("MASTER_ADDR")}


def gather_to_rank0(obj: Any) -> list[Any] | None:
    """Every rank's ``obj`` on rank 0 (in rank order), None elsewhere; over the gloo control group."""
    import torch.distributed as dist

    group = control_group()
    out = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    dist.gather_object(obj, out, dst=0, group=group)
    return out


def broadcast_from_rank0(obj: Any) -> Any:
    import torch.distributed as dist

    box = [obj]
    dist.broadcast_object_list(box, src=0, group=control_group())
    return box[0]


def slowest_rank(dist, device, value: float) -> float:
    """The largest ``value`` over all ranks (an all_reduce MAX; every rank gets it)."""
    import torch

    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def time_regions(dist, device, call: Callable[[], Any], sync: Callable[[], None], target_s: float, *,
                 warmup: int, repeats: int, max_iters: int | None = None) -> tuple[list[float], int]:
    """Seconds per ``call`` on every rank together: ``warmup`` calls, one timed call (its slowest rank's
    time sets the iterations per region, so that ``repeats`` regions take about ``target_s``; capped at
    ``max_iters``), then per region a barrier, a device synchronise and that many back-to-back calls,
    the slowest rank's time per call. Returns (per-region seconds per call, iterations per region)."""
    for _ in range(warmup):
        call()
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    call()
    sync()
    first = slowest_rank(dist, device, time.perf_counter() - t0)
    iters = max(1, int(target_s / repeats / max(first, 1e-9)))
    if max_iters is not None:
        iters = min(iters, max_iters)
    per = []
    for _ in range(repeats):
        dist.barrier()
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        sync()
        per.append(slowest_rank(dist, device, (time.perf_counter() - t0) / iters))
    return per, iters


SHUTDOWN_BARRIER_S = 60  # how long a rank waits for the others before tearing its group down


def shutdown() -> None:
    """Tear the process group down once every rank has reached here: a gloo peer destroyed while
    another still holds its connection aborts that rank (SIGABRT) and fails the whole torchrun job.
    The wait is a monitored barrier on the gloo control group, bounded by ``SHUTDOWN_BARRIER_S`` so that
    a rank whose peer died (or is stuck elsewhere) still exits; its error is then the one reported."""
    import torch.distributed as dist

    if dist.is_initialized():
        with contextlib.suppress(RuntimeError):
            dist.monitored_barrier(group=control_group(), timeout=_dt.timedelta(seconds=SHUTDOWN_BARRIER_S))
        dist.destroy_process_group()


# --------------------------------------------------------------------------------------------- merge

@dataclass
class Part:
    """One rank's result: its metadata, timing settings and records, and the file they came from."""

    meta: dict[str, Any]
    timing: dict[str, Any]
    cases: list[dict[str, Any]]
    path: str | None
    complete: bool
    sha256: str | None = None

    @classmethod
    def of(cls, rf: ResultFile) -> Part:
        return cls(rf.meta, rf.timing, rf.cases, str(rf.path), rf.complete, rf.sha256)


def _rank_of(part: Part, i: int) -> int:
    d = part.meta.get("distributed")
    return int(d["rank"]) if isinstance(d, dict) and "rank" in d else i


def _counts(cases: Sequence[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in cases:
        out[c["status"]] = out.get(c["status"], 0) + 1
    return out


def _wall_s(part: Part) -> float | None:
    """Wall time of a rank's run: its first case's start to its last case's end (started_utc + duration_s)."""
    stamps = [(c.get("started_utc"), c.get("duration_s")) for c in part.cases if c.get("started_utc")]
    if not stamps:
        return None
    t = [_dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() for s, _ in stamps]
    ends = [ti + float(d or 0.0) for ti, (_, d) in zip(t, stamps)]
    return max(ends) - min(t)


def merged_meta(parts: Sequence[Part], how: str) -> dict[str, Any]:
    """The merged file's metadata: the lowest rank's environment, and ``distributed`` naming every rank's
    host and GPU (name, UUID), file, completeness, counts and wall time. All parts must have measured on
    one device model (resume and calibration match a file to one device by name)."""
    names = {(p.meta.get("device") or {}).get("name") for p in parts}
    if len(names) != 1:
        raise UserError(f"the rank files measured on different device models ({', '.join(sorted(map(str, names)))}); "
                        "a result file holds one device's cases: merge each model's files separately")
    ordered = sorted(enumerate(parts), key=lambda ip: _rank_of(ip[1], ip[0]))
    base = dict(ordered[0][1].meta)
    ranks = []
    for i, p in ordered:
        dev = p.meta.get("device") or {}
        ranks.append({
            "rank": _rank_of(p, i), "host": (p.meta.get("distributed") or {}).get("host") or p.meta.get("hostname"),
            "device": {k: dev.get(k) for k in ("type", "index", "name", "uuid")},
            "file": p.path, "sha256": p.sha256, "complete": p.complete, "cases": len(p.cases),
            "counts": _counts(p.cases), "wall_s": _wall_s(p), "started_utc": p.meta.get("started_utc"),
            "timing": p.timing,
        })
    walls = [r["wall_s"] for r in ranks if r["wall_s"]]
    n = sum(r["cases"] for r in ranks)
    first = {k: v for k, v in (base.get("distributed") or {}).items() if k not in ("rank", "local_rank", "host")}
    base.pop("complete", None)
    base["distributed"] = {
        **first, "merged": how, "merged_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(),
        "parts": len(parts), "ranks": ranks,
        "cases_per_s": (n / max(walls)) if walls else None,
        "cases_per_s_note": "measurement: cases of all ranks / the longest rank's wall time (first case start "
                            "to last case end)",
    }
    return base


def merge(parts: Sequence[Part], out_dir: str | Path, how: str) -> Path:
    """One consolidated result file of ``parts`` in ``out_dir`` (a new file; every record gets ``rank``)."""
    if not parts:
        raise UserError("nothing to merge: no rank produced a result file")
    meta = merged_meta(parts, how)
    timing = min(parts, key=lambda p: _rank_of(p, 0)).timing
    writer = ResultWriter(out_dir, meta, timing)
    try:
        for i, p in enumerate(parts):
            for c in p.cases:
                writer.add({**c, "rank": c.get("rank", _rank_of(p, i))})
    except BaseException:
        writer.close()
        raise
    return writer.finish({"finished_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(),
                          "ended_early": _ended_early(parts)})


def _ended_early(parts: Sequence[Part]) -> dict[str, Any] | None:
    ended = [{"rank": _rank_of(p, i), **(p.meta.get("ended_early") or {})} for i, p in enumerate(parts)
             if p.meta.get("ended_early") or not p.complete]
    return {"ranks": ended, "note": "these ranks ended early or were cut off; --resume runs their missing cases"} \
        if ended else None


def rank_files(folder: str | Path) -> list[Path]:
    """The per-rank result files in ``folder`` (oldest first)."""
    return [p for p in result_files(folder) if p.name.startswith(RANK_PREFIX)]


def merge_folder(folder: str | Path, keep_parts: bool = False) -> tuple[Path, list[Path]]:
    """``ssmbench merge-results``: merge every rank file of ``folder`` (finished or cut off) into one new
    result file there; the rank files are removed afterwards unless ``keep_parts``."""
    files = rank_files(folder)
    if not files:
        raise UserError(f"{folder}: no rank result files (rank<r>-*.json / .jsonl, written by measure --distributed)")
    parts = [Part.of(read_results(p)) for p in files]
    path = merge(parts, folder, how=f"ssmbench merge-results of {len(files)} rank file(s)")
    if not keep_parts:
        for p in files:
            p.unlink()
    return path, files


def finish_run(r: Rank, summary, out_dir: str | Path) -> dict[str, Any]:
    """At the end of a sharded sweep: gather every rank's records on rank 0, merge, then each rank removes
    its own rank file. Returns {merged path, ranks' counts} on every rank (broadcast)."""
    mine = None
    if summary.path is not None:
        mine = Part.of(read_results(summary.path))
    t0 = time.perf_counter()
    parts = gather_to_rank0(mine)
    result: dict[str, Any] = {"path": None, "error": None}
    if r.rank == 0:
        got = [p for p in parts if p is not None]
        try:
            result["path"] = str(merge(got, out_dir, how=f"rank 0 at the end of the run ({r.world_size} ranks)")) \
                if got else None
        except Exception as exc:  # the rank files stay; merge-results can be run by hand
            result["error"] = f"{type(exc).__name__}: {exc}"
        result["ranks"] = [None if p is None else {"rank": _rank_of(p, i), "counts": _counts(p.cases)}
                           for i, p in enumerate(parts)]
        result["wait_s"] = time.perf_counter() - t0
    result = broadcast_from_rank0(result)
    if result["path"] is not None and summary.path is not None:
        Path(summary.path).unlink()
    return result
