"""Run a model suite on a GPU: every (model, phase, runtime, shape) of ``suite.py``'s entries, timed,
with energy and a kernel breakdown, one model-run file (``records.py``) under ``--out``.

    python -m ssmbench.measure.models.runner --suite measure/suites/models_h200.yaml --out DIR --deadline 300

Per entry, before its model is built: wait for the extension builds it needs (``build.needed_extensions``,
the device script compiles them in the background; ``extensions.ensure_extension`` reads their status
files and never imports a module still being built). Per case, in this order: build the callable (``steps.py``; a CUDA graph for runtime ``cuda-graph``),
time it (``timing.time_call``: CUDA events, L2 flushed before each call, warm-up first, which also
compiles and autotunes the Triton kernels), time the host's issue of one eager step alone
(``host_issue.py``), count the nn.Module calls of one eager step, read the
energy over >= ``energy_window_s`` of back-to-back calls (``energy.energy_window``), profile
``profile_steps`` calls with torch.profiler (``kernel_map.breakdown``: kernel time per part and per
kernel; ``host_idle_s`` = the timed median minus the summed kernel time per step, the time the GPU
waits for the host). A model is built once for all its cases and freed after them.

Failures are records: ``unavailable`` (a library, phase or capture this runner cannot do, with the
reason), ``oom``, ``error`` (the traceback's last lines), ``skipped`` (the deadline came first). A
failed CUDA-graph capture ends the run after its record (it can leave PyTorch's CUDA generator in
capture state, see ``timing.CaptureFailed``), so a suite lists its riskiest captures last.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import traceback
from typing import Any

from . import records as rec_mod
from .kernel_map import breakdown
from .suite import Case, load_suite

AUTOTUNE_METHOD = ("triton.runtime.autotuner.Autotuner.cache of the loaded mamba_ssm and fla modules after the "
                   "record's profiled steps: every key this process has tuned so far, with the configuration kept, and "
                   "the timings (ms) of the last tuning each autotuner ran (measure/autotune_picks.py)")
CASE_RESERVE_S = 20.0  # a case is not started with less time than this left before the deadline


def _measure(case: Case, built, suite, device, nv, idle_w, record: dict) -> None:
    import torch

    from .. import energy as energy_mod
    from .._probe_achievable import profile_gpu
    from ..autotune_picks import autotune_picks
    from ..timing import TimingSettings, make_timed_callable, time_call
    from . import host_api, steps
    from .host_issue import host_issue
    from .host_reference import METHOD as HOST_REFERENCE_METHOD
    from .host_reference import host_reference

    hold = None
    if case.phase == "prefill":
        call = steps.prefill_call(built, case.batch, case.seqlen)
    elif case.phase == "decode":
        call, hold = steps.decode_call(built, case.entry, case.batch, case.seqlen)
    else:
        call = steps.train_call(built, case.batch, case.seqlen, bool(case.entry.get("optimizer")))
    settings = TimingSettings(**{**suite.timing, "cuda_graph": case.runtime == "cuda-graph"})
    import contextlib
    with (hold or contextlib.nullcontext()):
        call()  # first call outside the graph: lazy initialisation, Triton compiles
        torch.cuda.synchronize(device)
        timed, keep = make_timed_callable(call, device, settings)
        before = host_reference(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        t = time_call(timed, device, settings)
        record["host_reference"] = {"label": "measurement", "method": HOST_REFERENCE_METHOD, "before": before,
                                    "after": host_reference(device)}
        record["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated(device) - base)
        stats = t.stats()
        record["time_s"], record["timing"] = stats, t.settings
        if case.runtime != "cuda-graph":  # the host's own issue time of a step (a replay is one launch)
            record["host_issue"] = host_issue(call, lambda: torch.cuda.synchronize(device))
            record["module_calls"] = steps.count_module_calls(call)
        if nv is not None:
            before = nv.state()
            e, _between, after = energy_mod.energy_window(timed, lambda: torch.cuda.synchronize(device), nv,
                                                          stats["median"], record["tokens"], suite.energy_window_s,
                                                          idle_w)
            record["energy"], record["clocks"] = e, energy_mod.clocks_block(before, after)
        kernels, host = profile_gpu(timed, suite.profile_steps, cpu=True)
        prof = breakdown(kernels, suite.profile_steps)
        prof["runtime_api"] = host_api.runtime_api(host, suite.profile_steps)
        prof["syncs"] = host_api.sync_warnings(timed, lambda: torch.cuda.synchronize(device))
        prof["steps"] = suite.profile_steps
        prof["host_idle_s"] = max(0.0, stats["median"] - prof["busy_s"])
        prof["kernels"] = prof["kernels"][:suite.profile_top]
        prof["method"] = ("torch.profiler (CUPTI) kernel, memcpy and memset activities over the profiled steps, "
                          "per step; parts by measure/models/kernel_map.py; host_idle_s = timed median - busy_s; "
                          f"runtime_api, syncs: {host_api.METHOD}")
        record["profile"] = prof
        picks = autotune_picks()
        if picks:  # the Triton configurations this process runs (measure/autotune_picks.py says why)
            record["autotune_picks"] = {"method": AUTOTUNE_METHOD, "kernels": picks}
        del keep
    record["status"] = "ok"


def run(suite_path: str, out: str, deadline_s: float, only: list[str] | None = None) -> int:
    import torch

    from .. import energy as energy_mod
    from ..environment import collect
    from ..timing import CaptureFailed
    from .build import build, count_params, needed_extensions, wait_for_extensions
    from ..backends.base import Unavailable
    from .steps import Unsupported

    t0 = time.monotonic()
    suite = load_suite(suite_path)
    device = torch.device("cuda")
    meta = {**collect(device, 0, sys.argv), "suite": {"name": suite.name, "path": suite_path},
            "timing": suite.timing, "deadline_s": deadline_s}
    nv, why = energy_mod.open_device(device)
    idle = energy_mod.idle_power(nv, lambda: torch.cuda.synchronize(device), 1.0) if nv else None
    meta["energy"] = {"nvml": nv is not None, "note": why or None, "idle": idle, "window_s": suite.energy_window_s}
    writer = rec_mod.ModelRunWriter(out, meta)
    ended = None
    for entry, cases in suite.by_entry():
        if only and entry["model"] not in only:
            continue
        built, build_error = None, None
        for case in cases:
            record = rec_mod.new_record(entry, case.phase, case.runtime, case.batch, case.seqlen, suite.dtype)
            start = time.monotonic()
            left = deadline_s - (start - t0)
            if ended or left < CASE_RESERVE_S:
                record.update(status="skipped", reason=ended or f"deadline: {left:.0f} s left of {deadline_s:.0f} s")
                writer.add(record)
                continue
            try:
                if built is None and build_error is None:
                    try:
                        waited = wait_for_extensions(entry)  # never import a half-built extension
                        if waited > 1.0:
                            print(f"[{time.monotonic() - t0:6.1f} s] waited {waited:.0f} s for the builds of "
                                  f"{', '.join(needed_extensions(entry))}", flush=True)
                        built = build(entry, device, suite.dtype)
                    except (ImportError, Unavailable) as exc:
                        build_error = ("unavailable", f"{type(exc).__name__}: {exc}")
                    except Exception as exc:
                        build_error = ("error", f"building the model failed: {type(exc).__name__}: {exc}")
                if build_error:
                    record.update(status=build_error[0], reason=build_error[1])
                else:
                    record["library"], record["params"] = built.library, count_params(built.module)
                    record["notes"] = list(built.notes)
                    record["runtime_note"] = built.runtime_note
                    _measure(case, built, suite, device, nv, idle["idle_power_w"] if idle else None, record)
            except Unsupported as exc:
                record.update(status="unavailable", reason=str(exc))
            except CaptureFailed as exc:
                record.update(status="unavailable", reason=str(exc))
                ended = f"run ended after {record['key']}: a failed CUDA-graph capture (timing.CaptureFailed)"
            except torch.cuda.OutOfMemoryError as exc:
                record.update(status="oom", reason=str(exc).splitlines()[0])
            except Exception as exc:
                record.update(status="error", reason=f"{type(exc).__name__}: {exc}"[:2000],
                              notes=(record["notes"] or []) + ["".join(traceback.format_exc()[-3000:])])
            record["duration_s"] = time.monotonic() - start
            writer.add(record)
            t = record["time_s"]["median"] if record["time_s"] else None
            print(f"[{time.monotonic() - t0:6.1f} s] {record['key']}: {record['status']}"
                  + (f" {t * 1e3:.3f} ms (measurement)" if t else f" ({record['reason']})"), flush=True)
            torch.cuda.empty_cache()
        built = None
        gc.collect()
        torch.cuda.empty_cache()
    path = writer.finish({"ended_early": ended, "wall_s": time.monotonic() - t0})
    print(f"wrote {path}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", required=True, help="model suite YAML (measure/suites/models_*.yaml)")
    ap.add_argument("--out", required=True, help="folder for the model-run file")
    ap.add_argument("--deadline", type=float, default=300.0, help="seconds: no case starts after this")
    ap.add_argument("--only", default="", help="comma list of model ids to run (default: all)")
    a = ap.parse_args(argv)
    only = [m for m in a.only.split(",") if m] or None
    return run(a.suite, a.out, a.deadline, only)


def describe_cases(suite_path: str) -> list[dict[str, Any]]:
    """The cases a suite would run, in order (CPU: what ``--dry-run`` style checks and tests read)."""
    return [c.describe() for _, cases in load_suite(suite_path).by_entry() for c in cases]


if __name__ == "__main__":
    sys.exit(main())
