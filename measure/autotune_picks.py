"""The configurations Triton's autotuners picked in this process, for the records of a run.

Why: mamba-ssm's and fla's Triton kernels are wrapped in ``triton.autotune``. The autotuner times its
configurations once per process and key and keeps the fastest. The keys are a few sizes, not the shape:
mamba-ssm 2.3.2's SSD kernels key on (chunk_size, hdim, dstate) (``_chunk_scan_fwd_kernel``, with IS_CAUSAL, and
``_chunk_state_fwd_kernel``), (chunk_size, K, IS_CAUSAL) (``_bmm_chunk_fwd_kernel``), (chunk_size, nheads)
(``_chunk_cumsum_fwd_kernel``) and (dim)
(``_state_passing_fwd_kernel``), never on batch or sequence length: the first call of a process at a key fixes
the tile for every later shape of that key, whatever its batch and length, so one process's small first case
can set the configuration its large cases run (an op-level sweep runs its cases in one process). When two
configurations time close to each other, another process can keep another one, and the kernel's device
time then moves between sessions at the same shape: the whole-model profiles of 2026-12-03/04 show
``_chunk_scan_fwd_kernel`` at 303, 395 and 619 us per call at one shape (mamba2-130m prefill, B = 16,
L = 2048) in three sessions, where cuBLAS, cuDNN and the CUDA-extension kernels of the same steps repeat
within a few percent (``scripts/kernel_repeat.py``). Recording the pick beside the measurement tells a
configuration change from a device change.

What is read (``triton.runtime.autotuner.Autotuner``, Triton 3.x): ``cache`` ({key tuple: Config}, one entry
per tuned key), ``configs_timings`` ({Config: timings in ms} of the last tuning it ran, where present) and
``base_fn.__name__``. The autotuners are found as module attributes of the loaded packages named in
``packages``, following ``.fn`` through wrappers (``triton.heuristics``). Duck-typed on those attributes and the
class name, so this module imports neither Triton nor torch and runs on a machine without them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

PACKAGES = ("mamba_ssm", "fla")
CASE_METHOD = ("triton.runtime.autotuner.Autotuner.cache of the loaded mamba_ssm and fla modules after the case's "
               "timed calls: every key this process has tuned so far, with the configuration kept, and the timings "
               "(ms) of the last tuning each autotuner ran; tuned_here: the kernels that tuned a new key during this "
               "case (the others ran configurations an earlier case of the process tuned; measure/autotune_picks.py)")
MAX_WRAPPERS = 4  # .fn links followed from a module attribute to an autotuner


def _autotuner(obj: Any) -> Any | None:
    """The autotuner ``obj`` is or wraps (``.fn`` links), or None."""
    for _ in range(MAX_WRAPPERS + 1):
        if obj is None:
            return None
        if type(obj).__name__ == "Autotuner" and isinstance(getattr(obj, "cache", None), dict):
            return obj
        obj = getattr(obj, "fn", None)
    return None


def _name(tuner: Any) -> str:
    fn = getattr(tuner, "base_fn", None) or getattr(tuner, "fn", None)
    return getattr(fn, "__name__", None) or type(tuner).__name__


def autotune_picks(packages: Iterable[str] = PACKAGES) -> dict[str, dict[str, Any]]:
    """{"module.kernel": {"picks": [{"key": [...], "config": str}], "last_timings_ms": {config: [...]} or None}}
    for every autotuner of the loaded ``packages`` that has tuned at least one key; {} when none has."""
    prefixes = tuple(packages)
    seen: set[int] = set()
    out: dict[str, dict[str, Any]] = {}
    for mod_name, mod in sorted(sys.modules.items(), key=lambda kv: kv[0]):
        if mod is None or mod_name.split(".")[0] not in prefixes:
            continue
        for value in list(vars(mod).values()):
            tuner = _autotuner(value)
            if tuner is None or id(tuner) in seen or not tuner.cache:
                continue
            seen.add(id(tuner))
            timings = getattr(tuner, "configs_timings", None)
            out[f"{mod_name}.{_name(tuner)}"] = {
                "picks": [{"key": [str(k) for k in key], "config": str(cfg)} for key, cfg in tuner.cache.items()],
                "last_timings_ms": ({str(c): [float(t) for t in (ts if isinstance(ts, (list, tuple)) else [ts])]
                                     for c, ts in timings.items()} if isinstance(timings, dict) else None),
            }
    return out


def picks_since(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The part of ``after`` (``autotune_picks()`` at the end of a measured case) that ``before`` (at its start) did
    not hold: per kernel, the keys first tuned in between with their configurations, and the timings of that
    tuning (an op-level case tunes its own shapes; a key tuned by an earlier case of the same process is in
    that case's record, not again here)."""
    out: dict[str, dict[str, Any]] = {}
    for kernel, entry in after.items():
        known = {tuple(p["key"]) for p in (before.get(kernel) or {}).get("picks", [])}
        new = [p for p in entry["picks"] if tuple(p["key"]) not in known]
        if new:
            out[kernel] = {"picks": new, "last_timings_ms": entry["last_timings_ms"]}
    return out
