"""How fast the one-point analysis, explore and require run, on one CPU core (a benchmark, not a test).

Prints, best of ``--repeats`` runs (wall time, and the process's CPU time: on a shared machine the CPU
time is the better figure of what one core does):

- one-point analyses per second, two paths over the same (model, phase, batch, length) point on one
  spec, the plan compiled and cached (the second and later calls): the plain-Python path
  (``workloads/point.analyze_point``: time bound, bottleneck, shares; ``ssmbench.api.point``) and the
  general numpy path (``analyze`` of a 1 x 1 grid, which also gives memory by class and capacity);
  and the fast path with the step's achievable estimate. Reference: LLM-Viewer's per-layer Python
  roofline of a transformer, ~27,000 analyses/s on one core (issue #17). The machine may be shared
  (2 cores here): the best run and CPU time are the figures of one core.
- explore: design points per second for 10^6 design points x one workload (target: <= 2 s).
- require: seconds to solve one workload's requirements and design.

Run: python benchmarks/bench_design.py [--repeats 5] [--points 1000000]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import platform
import time

from ssmbench.analytic.design import require, space
from ssmbench.analytic.design.step import Workload, WorkloadWork, evaluate
from ssmbench.analytic.roofline import SpecTable
from ssmbench.analytic.workloads.evaluate import analyze
from ssmbench.analytic.workloads.models import get_model
from ssmbench.analytic.workloads.point import analyze_point
from ssmbench.hwspecs import get_spec

ONE_POINT_TARGET = 27_000  # analyses/s (LLM-Viewer on one core, issue #17)
EXPLORE_TARGET_S = 2.0  # s for 10^6 design points x one workload
VARY = "memory.dram.bandwidth=2..16TB/s,compute.tensor.bf16=0.5..4PFLOP/s,memory.l2.capacity=10..200MB"


def best(fn, repeats: int) -> tuple[float, float]:
    """(best wall time, best CPU time) of ``fn`` in s."""
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return min(wall), min(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--points", type=int, default=1_000_000, help="design points for explore")
    ap.add_argument("--calls", type=int, default=2000, help="one-point analyses per timed run")
    args = ap.parse_args()
    print(f"measurement on this machine ({platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}), one thread; best of {args.repeats} runs, wall and CPU time")
    spec = get_spec("h200-sxm")
    table = SpecTable.of([spec])
    for model, phase, batch, length in (("llama-3-8b", "decode", 1, 4096), ("mamba2-2.7b", "decode", 64, 32768),
                                        ("jamba-v0.1", "prefill", 1, 8192)):
        m = get_model(model)
        pt = (m, phase, table, batch, length)
        paths = (("plain-Python path (analyze_point)", lambda pt=pt: analyze_point(*pt)),
                 ("plain-Python path + achievable estimate", lambda pt=pt: analyze_point(*pt, achievable=True)),
                 ("general numpy path (analyze, 1 x 1 grid)",
                  lambda pt=pt: analyze(pt[0], pt[1], pt[2], [pt[3]], [pt[4]])))
        for name, fn in paths:
            fn()  # compile and cache the plan
            w, c = best(lambda fn=fn: [fn() for _ in range(args.calls)], args.repeats)
            print(f"one-point {model} {phase} (batch {batch}, length {length}), {name}: {args.calls / w:,.0f} "
                  f"analyses/s wall, {args.calls / c:,.0f} CPU (reference {ONE_POINT_TARGET:,}/s: "
                  f"{'met' if args.calls / c >= ONE_POINT_TARGET else 'NOT met'})")
    m = get_model("mamba2-2.7b")
    ww = WorkloadWork.of(Workload(m, "decode", 64, 32768), spec)
    designs = space.Designs.of(spec, space.samples(space.parse_vary([VARY], spec), args.points))
    w, c = best(lambda: evaluate(ww, designs), max(1, args.repeats // 2))
    print(f"explore: {args.points:,} design points x 1 workload (mamba2-2.7b decode, batch 64, context 32768; "
          f"{len(ww.labels)} op calls): {w:.2f} s wall, {c:.2f} s CPU = {args.points / c:,.0f} design points/s "
          f"(target <= {EXPLORE_TARGET_S} s: {'met' if c <= EXPLORE_TARGET_S else 'NOT met'})")
    pb = require.Problem(ww, spec)
    t_star = require.target_time({"tokens_per_s": 20000.0}, ww.tokens)
    w, c = best(lambda: [require.solve(pb, k, t_star) for k in require.relevant_keys(ww, pb)]
                + [require.design(pb, t_star)], 1)
    print(f"require: every resource and the design of one workload: {w:.2f} s wall, {c:.2f} s CPU")


if __name__ == "__main__":
    main()
