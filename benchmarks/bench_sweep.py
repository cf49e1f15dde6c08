"""How fast ``ssmbench sweep`` analyzes models, on one CPU core (a benchmark, not a test).

The grid of the issue: 20 models x 15 specs x 3 phases x 8 batch sizes x 12 lengths = 86,400 model
analyses (each one a model's full op plan, projected on one spec: time bound, bottleneck, memory by
class, capacity verdict). Target: at least 100,000 analyses per second, i.e. the grid in under 1 s.

Two numbers are printed: the first sweep of a process (it also compiles every op cost it meets with
sympy.lambdify, once per (op, implementation, mode, dtype)) and the best of later sweeps (compiled
costs cached, which is the steady state of a long sweep or a second call), wall and CPU time (the
machine may be shared: 2 cores here; CPU time is the figure of one core). The sweep takes the batched
path (``analytic/sweep_columns.py``: every plan's work in one batch, every plan projected on every spec
in one array); the per-(model, phase) path it replaced (``sweep(..., force_general=True)``, equal to it
to 1e-12: tests/test_sweep_fast.py) is timed beside it. The per-call max runs as one compiled loop
where numba is installed (``workloads/grid_kernel.py``, the ``fast`` extra; the first sweep also
compiles it, or loads it from numba's cache); the script says which, and then times the numpy path
(``SSMBENCH_NUMBA=0``) too. For comparison, the
plain-Python one-point path (``workloads/point.analyze_point``: time bound and bottleneck only, no
memory or energy) over a sample of the same grid's points, one call per point. Writing the CSV is
timed apart. If fewer than 15 built-in specs or 20 built-in models exist, the lists are cycled to reach the
grid's size, and the script says so.

Run: python benchmarks/bench_sweep.py [--repeats 5] [--csv /tmp/sweep.csv]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import io  # noqa: E402
import itertools  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402

from ssmbench.analytic import sweep  # noqa: E402
from ssmbench.analytic.registry import AnalyticError  # noqa: E402
from ssmbench.analytic.roofline import SpecTable  # noqa: E402
from ssmbench.analytic.workloads import grid_kernel  # noqa: E402
from ssmbench.analytic.workloads.models import builtin_models  # noqa: E402
from ssmbench.analytic.workloads.phases import plan  # noqa: E402
from ssmbench.analytic.workloads.point import analyze_point  # noqa: E402
from ssmbench.hwspecs import load_all  # noqa: E402

TARGET = 100_000  # analyses/s
FAST_TARGET = 3_000_000  # analyses/s (issue #17)
N_MODELS, N_SPECS = 20, 15
PHASES = ("prefill", "decode", "train")
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128]
LENGTHS = [2 ** k for k in range(7, 19)]  # 128 .. 262,144


def _usable(models):
    """Models the analytic model can cost in every phase (others are reported and left out)."""
    ok, skipped = [], []
    for m in models:
        try:
            for p in PHASES:
                plan(m, p)
            ok.append(m)
        except AnalyticError as exc:
            skipped.append(f"{m.id} ({str(exc).split(';')[0]})")
    return ok, skipped


def _take(items, n):
    return list(itertools.islice(itertools.cycle(items), n)), len(items) < n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--csv", help="also time writing the CSV to this file")
    args = ap.parse_args()

    models, skipped = _usable(list(builtin_models().values()))
    models, cycled_m = _take(models, N_MODELS)
    specs, cycled_s = _take(list(load_all().values()), N_SPECS)
    n = len(models) * len(specs) * len(PHASES) * len(BATCHES) * len(LENGTHS)
    print(f"python {platform.python_version()} on {platform.machine()}, one thread")
    print(f"grid: {len(models)} models x {len(specs)} specs x {len(PHASES)} phases x {len(BATCHES)} batches x "
          f"{len(LENGTHS)} lengths = {n:,} model analyses")
    if cycled_m or cycled_s:
        print(f"note: only {len(set(m.id for m in models))} distinct models and {len(set(s.id for s in specs))} "
              "distinct specs are available; the lists were cycled to the grid's size")
    if skipped:
        print("left out (a phase the analytic model cannot cost):", "; ".join(skipped))

    compiled = grid_kernel.enabled()
    print("per-call max: " + (f"compiled loop (numba {grid_kernel.numba.__version__})" if compiled else
                              "numpy (" + ("numba not installed" if not grid_kernel.AVAILABLE else
                                           f"{grid_kernel.ENV}=0") + ")"))
    t0 = time.perf_counter()
    cols = sweep.sweep(models, specs, PHASES, BATCHES, LENGTHS)
    cold = time.perf_counter() - t0
    warm, cpu = [], []
    for _ in range(args.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        cols = sweep.sweep(models, specs, PHASES, BATCHES, LENGTHS)
        warm.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    best = min(warm)
    print(f"first sweep (includes compiling op costs): {cold:.3f} s = {n / cold:,.0f} analyses/s")
    print(f"later sweeps: best {best:.3f} s = {n / best:,.0f} analyses/s wall, {n / min(cpu):,.0f} CPU; median "
          f"{sorted(warm)[len(warm) // 2]:.3f} s (target >= {TARGET:,}/s: "
          f"{'met' if n / min(cpu) >= TARGET else 'NOT met'}; issue #17's faster core, >= {FAST_TARGET:,}/s: "
          f"{'met' if n / min(cpu) >= FAST_TARGET else 'NOT met'})")
    if compiled:
        os.environ[grid_kernel.ENV] = "0"
        plain = []
        for _ in range(args.repeats):
            c0 = time.process_time()
            sweep.sweep(models, specs, PHASES, BATCHES, LENGTHS)
            plain.append(time.process_time() - c0)
        del os.environ[grid_kernel.ENV]
        print(f"the same sweeps with the numpy per-call max ({grid_kernel.ENV}=0): best {min(plain):.3f} s CPU = "
              f"{n / min(plain):,.0f} analyses/s CPU")
    general = []
    for _ in range(max(1, args.repeats // 2)):
        c0 = time.process_time()
        sweep.sweep(models, specs, PHASES, BATCHES, LENGTHS, force_general=True)
        general.append(time.process_time() - c0)
    print(f"per-(model, phase) path (force_general=True), for comparison: best {min(general):.3f} s CPU = "
          f"{n / min(general):,.0f} analyses/s CPU ({min(general) / min(cpu):.1f}x the batched path's CPU time)")
    tables = {s.id: SpecTable.of([s]) for s in specs}
    sample = list(itertools.islice(itertools.product(models, specs, PHASES, BATCHES, LENGTHS), 0, None, 97))
    for m, s, p, b, ln in sample:  # compile every plan and projection the sample meets
        analyze_point(m, p, tables[s.id], b, ln)
    c0 = time.process_time()
    for _ in range(max(1, args.repeats // 2)):
        for m, s, p, b, ln in sample:
            analyze_point(m, p, tables[s.id], b, ln)
    rate = len(sample) * max(1, args.repeats // 2) / (time.process_time() - c0)
    print(f"plain-Python one-point path over {len(sample):,} of the grid's points (time bound and bottleneck only): "
          f"{rate:,.0f} analyses/s CPU")
    t0 = time.perf_counter()
    buf = io.StringIO()
    sweep.write_csv(cols, buf)
    if args.csv:
        with open(args.csv, "w") as fh:
            fh.write(buf.getvalue())
    print(f"formatting {len(cols['model']):,} CSV rows: {time.perf_counter() - t0:.3f} s")


if __name__ == "__main__":
    main()
