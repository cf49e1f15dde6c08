"""Run a list of cases: prepare, gate, time, energy, memory, analytic counts, roofline fraction.

Per case, in order (a step that fails ends the case with a status and reason; the sweep goes on):

1. ``backend.prepare(case, device, seed)``: fresh random inputs from a per-case seed (derived from
   the run seed and the case key, recorded). ``Unavailable`` -> status ``unavailable``.
2. The correctness gate (``gate.py``). A failed check -> status ``failed_check``; the case is not timed.
3. ``time_call`` (``timing.py``) with the suite entry's timing switches over the run's settings.
4. On CUDA with NVML: energy over >= 1 s of back-to-back calls (``energy.py``), clocks, temperature,
   throttle reasons; otherwise energy is null with the reason.
5. Peak memory: ``torch.cuda.max_memory_allocated`` over the timed calls (reset after the gate),
   minus what was allocated before ``prepare``: the inputs plus the call's own transient memory.
6. Analytic counts of the case (``analytic.registry.cost``), achieved rates (analytic count /
   measured median: labelled "analytic count / measurement"), and, given a hardware spec, the
   roofline bound and the fraction bound / measured time (``roofline_block``).

``torch.cuda.OutOfMemoryError`` -> status ``oom``; any other exception -> ``error`` with the message
and the end of the traceback. ``KeyboardInterrupt`` stops the sweep; every finished case is already
on disk (``results.py``). Memory is freed between cases.

A case can hang where no signal reaches Python (a kernel that never returns, a compiler stuck in
native code: seen with the Mamba-3 block's training step on the H200). With ``case_timeout_s`` a
watchdog thread writes the case as status ``timeout`` (with the limit it ran past) and ends the process with exit code ``TIMEOUT_EXIT``: the GPU context of a hung kernel cannot be
trusted for the cases after it. ``--resume`` runs the rest, and retries the timed-out case.
"""

from __future__ import annotations

import faulthandler
import gc
import hashlib
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..analytic.cases import BLOCK_PREFIX, Case, case_cost, is_composite
from . import energy as energy_mod
from .autotune_picks import CASE_METHOD, autotune_picks, picks_since
from .backends.base import Unavailable, get_backend, launch_regime
from .environment import collect, device_name, utc_now
from .gate import check
from .results import ResultWriter, ResumeSet, finished_keys
from .suite import SuiteCase
from .timing import CaptureFailed, TimingSettings, make_timed_callable, time_call

RECORD_FIELDS = ("tokens", "notes", "gate", "analytic", "time_s", "timing", "peak_memory_bytes", "memory",
                 "achieved", "roofline_fraction", "energy", "clocks", "temperature_c")


@dataclass
class SweepConfig:
    device: str = "cpu"
    out_dir: Path = Path("results")
    timing: TimingSettings = field(default_factory=TimingSettings)
    seed: int = 0
    resume: bool = False
    resume_from: list[Path] = field(default_factory=list)  # more folders whose finished cases count as done
    spec: Any = None  # a hwspecs Spec for roofline fractions, or None
    energy: bool = True
    energy_window_s: float = 1.0
    argv: list[str] | None = None
    arguments: dict[str, Any] | None = None  # the parsed command-line options
    suite_name: str | None = None
    suite_path: str | None = None
    case_timeout_s: float | None = None  # watchdog per case; None: none
    # --distributed: this process's (rank, world_size) and what the run records about the group
    # (measure/distributed.py); cases are sharded by ``select`` and the file is named rank<r>-...
    shard: tuple[int, int] | None = None
    distributed: dict[str, Any] | None = None


TIMEOUT_EXIT = 124  # exit code of a sweep ended by the case watchdog (as timeout(1) uses)


@dataclass
class SweepSummary:
    path: Path | None
    counts: dict[str, int]
    records: list[dict[str, Any]]
    skipped_finished: int
    interrupted: bool = False


def case_seed(base: int, key: str) -> int:
    """A per-case seed: stable across runs and machines, different for every case."""
    h = hashlib.sha256(f"{base}:{key}".encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


def torch_device(name: str):
    """The torch device of ``--device``; the commands that measure need PyTorch (the ``torch`` extra):
    without it they stop here with that message, not with an import traceback."""
    from ..errors import UserError

    try:
        import torch
    except ImportError:
        raise UserError("this command runs kernels and needs PyTorch, which is not installed: "
                        "pip install 'ssm-bench[torch]' (the CPU build is enough for --device cpu)") from None

    try:
        dev = torch.device(name)
    except RuntimeError:
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):
        raise UserError(f"--device {name!r}: expected cpu, cuda or cuda:N")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--device {name!r}: CUDA is not available here (torch {torch.__version__})")
    return dev


def _f(x: Any) -> float:
    return float(x)


def analytic_block(case: Case) -> tuple[dict[str, Any] | None, Any, str | None]:
    """(analytic record, Cost, reason when there is none)."""
    if is_composite(case.op) and not case.op.startswith(BLOCK_PREFIX):
        return None, None, "model-level cases carry no analytic cost: the workload layer costs blocks, not these"
    c = case_cost(case.op, dict(case.dims), impl=case.impl, mode=case.mode, dtype=case.dtype)
    rec = {
        "label": "analytic count",
        "flops": _f(c.flops),
        "flops_by_engine": {"tensor": {k: _f(v) for k, v in c.tensor.items()}, "vector": _f(c.vector),
                            "transcendental": _f(c.transcendental)},
        "bytes": _f(c.bytes),
        "executed_bytes": _f(c.executed_bytes),
        "bytes_read": _f(c.bytes_read),
        "bytes_written": _f(c.bytes_written),
        "read": {k: _f(v) for k, v in c.read.items()},
        "write": {k: _f(v) for k, v in c.write.items()},
        "extra_read": {k: _f(v) for k, v in c.extra_read.items()},
        "extra_write": {k: _f(v) for k, v in c.extra_write.items()},
        "launches": _f(c.launches),
        "working_set": _f(c.working_set),
    }
    return rec, c, None


def achieved_block(a: dict[str, Any] | None, median_s: float) -> dict[str, Any] | None:
    if a is None or not median_s > 0:
        return None
    return {
        "label": "analytic count / measured median time",
        "flop_per_s": a["flops"] / median_s,
        "bytes_per_s": a["bytes"] / median_s,
        "executed_bytes_per_s": a["executed_bytes"] / median_s,
        "transcendental_per_s": a["flops_by_engine"]["transcendental"] / median_s,
    }


def roofline_block(cost, spec, median_s: float, regime: str) -> dict[str, Any]:
    """The roofline bound of the case on ``spec`` and the fraction bound / measured time.

    The one place that turns a Cost and a spec into a bound (swap the engine here): the analytic
    roofline's ``project`` with the spec's measured ceilings where it has them, the launch regime of
    the timing (``regime``: "graph" for CUDA-graph replays, the timer's or the backend's own; "eager"
    for eager launches; ``backends.base.launch_regime``), as-executed bytes for the fraction and
    compulsory bytes beside it.
    """
    from ..analytic.roofline import project

    executed = project(cost, spec, prefer="measured", launch=regime, bytes_basis="executed")
    compulsory = project(cost, spec, prefer="measured", launch=regime, bytes_basis="compulsory")

    def frac(t):
        return t / median_s if t is not None and median_s > 0 else None

    return {
        "label": "analytic bound (roofline) / measured median time",
        "spec": spec.id,
        "projection": executed.to_dict(),
        "fraction": frac(executed.time_s),
        "fraction_compulsory_bytes": frac(compulsory.time_s),
        "bound_s": executed.time_s,
        "bound_compulsory_bytes_s": compulsory.time_s,
        "bottleneck": executed.bottleneck,
    }


def complete_record(rec: dict[str, Any]) -> dict[str, Any]:
    """Every record has every field; a case that was not timed says so in its energy block too."""
    for k in RECORD_FIELDS:
        rec.setdefault(k, None)
    if rec["energy"] is None:
        rec["energy"] = energy_mod.null_energy(f"not measured: case status {rec['status']}")
    return rec


def _is_oom(exc: BaseException) -> bool:
    import torch

    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    return isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc)  # CPU allocator


def _free(device) -> None:
    """Between cases on CUDA: collect reference cycles (autograd graphs, closures) that may hold device
    memory, and return cached blocks. Skipped on the CPU, where a full collection of a heap holding
    torch and sympy costs ~0.1 s and frees nothing a refcount does not."""
    if device.type == "cuda":
        import torch

        gc.collect()
        torch.cuda.empty_cache()


class CaseRunner:
    """Measures cases one at a time on one device (NVML and idle power opened once)."""

    def __init__(self, cfg: SweepConfig, device):
        self.cfg, self.device = cfg, device
        # NVML serves clocks and temperature even when the energy window is switched off.
        self.nv, self.nv_reason = energy_mod.open_device(device)
        self.energy_on = cfg.energy and self.nv is not None
        if not cfg.energy:
            self.nv_reason = "energy measurement switched off (--no-energy)"
        self.idle: dict[str, Any] | None = None
        if self.energy_on:
            self.idle = energy_mod.idle_power(self.nv, self.sync, cfg.energy_window_s)

    def sync(self) -> None:
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)

    def measure(self, sc: SuiteCase) -> dict[str, Any]:
        case = sc.case
        seed = case_seed(self.cfg.seed, case.key())
        settings = self.cfg.timing.replace(**sc.timing)
        rec: dict[str, Any] = {**case.to_dict(), "key": case.key(), "status": None, "reason": None,
                               "seed": seed, "device": str(self.device), "started_utc": utc_now()}
        t0 = time.perf_counter_ns()
        try:
            self._measure(case, seed, settings, rec)
        except Unavailable as exc:
            rec.update(status="unavailable", reason=str(exc) or type(exc).__name__)
        except Exception as exc:
            status = "oom" if _is_oom(exc) else "error"
            rec.update(status=status, reason=f"{type(exc).__name__}: {exc}",
                       traceback="".join(traceback.format_exception(exc)[-6:]))
            if isinstance(exc, CaptureFailed):
                rec["ends_run"] = ("a failed CUDA graph capture can leave the CUDA RNG in capture state; "
                                   "the run ends here and --resume continues in a fresh process")
        finally:
            _free(self.device)
        rec["duration_s"] = (time.perf_counter_ns() - t0) * 1e-9
        return complete_record(rec)

    def _measure(self, case: Case, seed: int, settings: TimingSettings, rec: dict[str, Any]) -> None:
        import torch

        dev = self.device
        backend = get_backend(case.backend, case.op)
        if dev.type not in backend.devices:
            raise Unavailable(f"backend {backend.name} runs on {', '.join(backend.devices)}, not {dev.type}")
        cuda = dev.type == "cuda"
        base_mem = torch.cuda.memory_allocated(dev) if cuda else None
        tuned_before = autotune_picks()
        torch.manual_seed(seed)
        prepared = backend.prepare(case, dev, seed)
        rec["tokens"] = prepared.tokens
        rec["notes"] = prepared.notes or None
        inputs_mem = torch.cuda.memory_allocated(dev) - base_mem if cuda else None

        gate = check(prepared, case.dtype)
        rec["gate"] = gate
        if not gate["passed"]:
            rec.update(status="failed_check", reason=gate["reason"])
            return
        analytic, cost, why = analytic_block(case)
        rec["analytic"] = analytic
        if why:
            rec["analytic_note"] = why

        state_before = self.nv.state() if self.nv is not None else None
        if cuda:
            torch.cuda.reset_peak_memory_stats(dev)
        call, keepalive = make_timed_callable(prepared.run, dev, settings)
        timing = time_call(call, dev, settings)
        stats = timing.stats()
        rec["time_s"] = stats
        rec["timing"] = timing.settings
        if cuda:
            peak = torch.cuda.max_memory_allocated(dev)
            rec["peak_memory_bytes"] = peak - base_mem
            rec["memory"] = {"peak_allocated_bytes": peak, "baseline_bytes": base_mem, "inputs_bytes": inputs_mem,
                             "note": "peak_memory_bytes = peak allocated during the timed calls minus what was "
                                     "allocated before prepare (inputs + the call's transient memory)"}
        else:
            rec["peak_memory_bytes"] = None
            rec["memory"] = {"note": "peak memory is read from the CUDA allocator; not measured on the CPU"}
        tuned = autotune_picks()
        if tuned:  # the Triton configurations this process runs (measure/autotune_picks.py says why)
            rec["autotune_picks"] = {"method": CASE_METHOD, "kernels": tuned,
                                     "tuned_here": sorted(picks_since(tuned_before, tuned))}
        rec["achieved"] = achieved_block(analytic, stats["median"])
        if self.cfg.spec is not None and cost is not None:
            regime = launch_regime(case.op, case.backend, case.mode, timing.settings)
            rec["roofline"] = roofline_block(cost, self.cfg.spec, stats["median"], regime)
            rec["roofline_fraction"] = rec["roofline"]["fraction"]
        else:
            rec["roofline_fraction"] = None

        if self.energy_on:
            idle_w = self.idle["idle_power_w"] if self.idle else None
            e, between, after = energy_mod.energy_window(call, self.sync, self.nv, stats["median"],
                                                         prepared.tokens, self.cfg.energy_window_s, idle_w)
            rec["energy"] = e
        else:
            rec["energy"] = energy_mod.null_energy(self.nv_reason)
            between, after = None, (self.nv.state() if self.nv is not None else None)
        if self.nv is not None:
            # before: ahead of the timed calls; between: after them, ahead of the energy window; after: the end
            rec["clocks"] = energy_mod.clocks_block(state_before, after, between)
            rec["temperature_c"] = {"before": state_before.get("temperature_c"), "after": after.get("temperature_c")}
        del call, keepalive, prepared
        rec["status"] = "ok"


def select(cases: Sequence[SuiteCase], filter_substr: str | None = None, limit: int | None = None,
           skip_keys: set[str] | None = None,
           shard: tuple[int, int] | None = None) -> tuple[list[SuiteCase], int, int]:
    """(cases to run, skipped as finished, filtered out). ``limit`` applies last.

    ``shard`` = (rank, world_size): only the cases whose index among those passing the filter is
    ``rank`` mod ``world_size`` (``distributed.shard_of``); the index does not depend on what is
    finished, so a case stays on its rank across restarts (with the same world size)."""
    from .distributed import shard_of

    skip_keys = skip_keys or set()
    todo, finished, filtered, index = [], 0, 0, -1
    for sc in cases:
        k = sc.case.key()
        if filter_substr and filter_substr not in k:
            filtered += 1
            continue
        index += 1
        if shard is not None and shard_of(index, shard[1]) != shard[0]:
            continue
        if k in skip_keys:
            finished += 1
        else:
            todo.append(sc)
    if limit is not None:
        todo = todo[:limit]
    return todo, finished, filtered


class _Watchdog:
    """Records the case as ``timeout`` and ends the process if ``limit_s`` passes before ``stop()``
    (the main thread is then stuck where no exception can reach it). A lock makes "the case finished"
    and "the limit passed" exclusive, so a case is never written twice."""

    def __init__(self, limit_s: float, sc: SuiteCase, writer: ResultWriter,
                 on_case: Callable[[int, int, dict[str, Any]], None] | None, i: int, n: int):
        self.limit_s, self.sc, self.writer, self.on_case, self.i, self.n = limit_s, sc, writer, on_case, i, n
        self.started = utc_now()
        self.case_thread = threading.get_ident()  # the thread that runs the case (and may hang)
        self.lock, self.stopped = threading.Lock(), False
        self.timer = threading.Timer(limit_s, self._fire)
        self.timer.daemon = True
        self.timer.start()

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
        self.timer.cancel()

    def _fire(self) -> None:
        with self.lock:
            if self.stopped:
                return
            case = self.sc.case
            rec = complete_record({
                **case.to_dict(), "key": case.key(), "status": "timeout", "started_utc": self.started,
                "reason": f"no result after {self.limit_s:g} s (the sweep's case timeout); the process was "
                          "ended, since a call that never returns leaves the device in an unknown state; "
                          f"it was in {stuck_at(self.case_thread)}",
                "duration_s": self.limit_s})
            self.writer.add(rec)
            self.writer.close()
            if self.on_case is not None:
                self.on_case(self.i, self.n, rec)
            faulthandler.dump_traceback(all_threads=True)  # the whole picture, on stderr (the log)
            os._exit(TIMEOUT_EXIT)


def stuck_at(thread_id: int, n_frames: int = 4) -> str:
    """The innermost Python frames of a thread, innermost last ("file:line function; ..."): where a
    hung case waits (a Triton compile or autotune, a device synchronise, a native kernel call)."""
    frame = sys._current_frames().get(thread_id)
    if frame is None:
        return "an unknown place (the case's thread has ended)"
    frames = traceback.extract_stack(frame)[-n_frames:]
    return "; ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames)


def run_sweep(cases: Sequence[SuiteCase], cfg: SweepConfig, filter_substr: str | None = None,
              limit: int | None = None, on_start: Callable[[int, int, int], None] | None = None,
              on_case: Callable[[int, int, dict[str, Any]], None] | None = None,
              on_resume: Callable[[ResumeSet], None] | None = None) -> SweepSummary:
    """Run ``cases`` into a new result file under ``cfg.out_dir``. ``on_resume(resume_set)`` is called
    first when resuming, ``on_start(n_to_run, n_finished, n_filtered)`` before the first case,
    ``on_case(i, n, record)`` after each.

    Resuming (``cfg.resume``: ``cfg.out_dir``; ``cfg.resume_from``: more folders) skips the cases
    finished on a device of this device's name only: cases timed on another GPU model are run again,
    so that a resumed dataset is one device's."""
    device = torch_device(cfg.device)
    resumed = None
    if cfg.resume or cfg.resume_from:
        resumed = finished_keys([cfg.out_dir, *cfg.resume_from], device=device_name(device))
        if on_resume is not None:
            on_resume(resumed)
    todo, n_finished, n_filtered = select(cases, filter_substr, limit, resumed.keys if resumed else set(), cfg.shard)
    if on_start is not None:
        on_start(len(todo), n_finished, n_filtered)
    if not todo:  # nothing to run: no empty result file
        return SweepSummary(None, {}, [], n_finished)
    meta = collect(device, cfg.seed, cfg.argv)
    meta["arguments"] = cfg.arguments
    meta["suite"] = {"name": cfg.suite_name, "path": cfg.suite_path}
    meta["hw_spec"] = cfg.spec.id if cfg.spec is not None else None
    meta["resume"] = {"skipped_finished": n_finished, **resumed.to_dict()} if resumed else None
    meta["selection"] = {"filter": filter_substr, "limit": limit, "filtered_out": n_filtered}
    runner = CaseRunner(cfg, device)
    meta["energy"] = {"enabled": cfg.energy, "nvml": runner.nv is not None, "note": runner.nv_reason or None,
                      "idle": runner.idle, "window_s": cfg.energy_window_s}
    meta["case_timeout_s"] = cfg.case_timeout_s
    if cfg.distributed is not None:
        meta["distributed"] = cfg.distributed
    writer = ResultWriter(cfg.out_dir, meta, cfg.timing.to_dict(),
                          prefix="run" if cfg.shard is None else f"rank{cfg.shard[0]}")
    records: list[dict[str, Any]] = []
    try:
        for i, sc in enumerate(todo):
            watchdog = (_Watchdog(cfg.case_timeout_s, sc, writer, on_case, i, len(todo))
                        if cfg.case_timeout_s is not None else None)
            try:
                rec = runner.measure(sc)
            finally:
                if watchdog is not None:
                    watchdog.stop()
            writer.add(rec)
            records.append(rec)
            if on_case is not None:
                on_case(i, len(todo), rec)
            if rec.get("ends_run"):
                ended = {"case": rec["key"], "reason": rec["ends_run"], "cases_not_run": len(todo) - i - 1}
                break
        else:
            ended = None
    except BaseException:
        writer.close()  # the .jsonl keeps every finished case; --resume continues from it
        raise
    path = writer.finish({"finished_utc": utc_now(), "ended_early": ended})
    counts: dict[str, int] = {}
    for r in records:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return SweepSummary(path, counts, records, n_finished, interrupted=ended is not None)
