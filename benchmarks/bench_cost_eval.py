"""How fast the analytic model evaluates op costs, on one CPU core (a benchmark, not a test).

For each op: cost(op, dims) with dims as numpy arrays of N random shapes (one call evaluates N
cases: validation + the lambdified rule), against the same API called once per shape in a Python
loop. Prints evaluations per second for both (best run; the vectorized median too) and the speed-up. Target for the
vectorized path: >= 10,000,000 evaluations/s per op on one core.

Run: python benchmarks/bench_cost_eval.py [--shapes 1000000] [--repeats 7] [--loop-shapes 2000]
"""

from __future__ import annotations

import os

# One core: no BLAS / OpenMP threads (numpy's elementwise kernels are single-threaded anyway). Not
# pinned to a CPU: on a shared machine a fixed core may be the busy one.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from ssmbench.analytic.registry import AnalyticError, all_ops, compiled_cost, cost  # noqa: E402

TARGET = 10_000_000  # evaluations/s

# Random dimension ranges [low, high) per op; ops missing from the registry are reported and skipped.
CASES: dict[str, dict[str, tuple[int, int]]] = {
    "linear": {"B": (1, 64), "L": (1, 16384), "I": (64, 16384), "O": (64, 16384)},
    "rmsnorm": {"B": (1, 64), "L": (1, 16384), "D": (64, 8192)},
    "softmax": {"B": (1, 64), "H": (1, 128), "L": (1, 16384), "S": (1, 16384)},
    "gated_mlp": {"B": (1, 64), "L": (1, 16384), "D": (64, 8192), "F": (64, 32768)},
    "moe": {"B": (1, 64), "L": (1, 16384), "D": (64, 8192), "F": (64, 32768), "X": (8, 129), "Xk": (1, 9)},
    # SSD: chunk C and heads H x head dim P; L a multiple of C and H a multiple of G (the SSD rule's
    # divisibility constraints, where it declares them).
    "ssd": {"B": (1, 64), "L": (1, 64), "H": (1, 128), "P": (16, 129), "N": (16, 257), "G": (1, 2), "C": (64, 257)},
}


def shapes(op: str, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    dims = {d: rng.integers(lo, hi, n) for d, (lo, hi) in CASES[op].items()}
    if op == "ssd":
        dims["L"] = dims["L"] * dims["C"]  # whole chunks
    if op == "moe":
        dims["Xk"] = np.minimum(dims["Xk"], dims["X"])
    return dims


def timed(fn, repeats: int) -> tuple[float, float]:
    """(best, median) wall time of ``fn`` in seconds. The best run is the machine's rate; the median
    shows how much other load on the machine slowed the others."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def measure(op: str, n_vec: int, n_loop: int, repeats: int, rng: np.random.Generator) -> tuple[float, ...]:
    """Evaluations per second: vectorized (best, median) and per-call loop (best)."""
    compiled_cost(op)  # build and lambdify once, outside the timing
    dims = shapes(op, n_vec, rng)
    # Keep the latest result alive, as a caller would: freeing it before the next call lets the
    # allocator return the memory to the OS and page-fault it back in, which would be timed too.
    kept = [cost(op, dims)]
    best, median = timed(lambda: kept.__setitem__(0, cost(op, dims)), repeats)
    small = shapes(op, n_loop, rng)
    rows = [{d: int(v[i]) for d, v in small.items()} for i in range(n_loop)]

    def loop():
        for r in rows:
            cost(op, r)
    loop_best, _ = timed(loop, max(1, repeats // 2))
    return n_vec / best, n_vec / median, n_loop / loop_best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", type=int, default=1_000_000, help="shapes per vectorized call")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--loop-shapes", type=int, default=2000, help="shapes for the per-call Python loop")
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    registered = all_ops()
    print(f"cost evaluation rate — measurement on this machine ({platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, numpy {np.__version__}), one thread")
    print(f"vectorized: one cost() call over {args.shapes:,} random shapes (numpy arrays), best and median of "
          f"{args.repeats}; loop: cost() once per shape over {args.loop_shapes:,} shapes, best run")
    print(f"{'op':<10} {'vectorized best':>16} {'vectorized median':>18} {'per-call loop':>14} {'speed-up':>9}"
          f"  (evaluations/s; target >= {TARGET:,}/s vectorized)")
    for op in CASES:
        if op not in registered:
            print(f"{op:<10} not registered (yet): skipped")
            continue
        try:
            vec_best, vec_median, loop_rate = measure(op, args.shapes, args.loop_shapes, args.repeats, rng)
        except AnalyticError as exc:
            print(f"{op:<10} skipped: the random shapes do not fit its rule ({exc})")
            continue
        verdict = "target met" if vec_best >= TARGET else "target MISSED"
        print(f"{op:<10} {vec_best:>16,.0f} {vec_median:>18,.0f} {loop_rate:>14,.0f} {vec_best / loop_rate:>8,.0f}x"
              f"  {verdict}")


if __name__ == "__main__":
    main()
