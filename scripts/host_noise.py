"""The spread of repeated whole-model records of one key (measure/suites/models/host_noise_h200.yaml): how
noisy the host's issue time of an eager model step is, against which the model-level host terms
(``launch.host.ssm_module``, ``calibrate/runtime_host.py``) can be judged.

Usage: python scripts/host_noise.py DIR [DIR ...]

Reads every record of the model-run files under the folders (all of them: a key measured three times
gives three rows, where ``latest_records`` would keep one) and prints per key, each a measurement: the
number of ok records, the step time (median of each record's timed calls) as min / median / max, the
spread (max - min) / median, the GPU-idle share of the step (profile.host_idle_s / step), and the order
in the file of each record (a drift over the call shows as a trend in that order). Never fails on the
figures (a benchmark table, not a test).
"""

from __future__ import annotations

import sys
from pathlib import Path


def rows(paths: list[Path]) -> list[dict]:
    """Per key: n, min, median, max of the step time in s, spread, idle share, times in file order
    (``measure.models.records.repeat_spread``, which ``ssmbench characterize`` reports too)."""
    from ssmbench.measure.models.records import repeat_spread

    return repeat_spread(paths)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    paths = [p for d in argv for p in sorted(Path(d).rglob("model-run-*.json"))]
    if not paths:
        print(f"no model-run-*.json files under {', '.join(argv)}", file=sys.stderr)
        return 2
    print("[measurement] step time per key over repeated records: n, min / median / max, spread (max - min) / "
          "median, GPU-idle share, times in file order")
    for r in rows(paths):
        idle = "-" if r["idle_share"] is None else f"{r['idle_share']:.0%}"
        spread = "-" if r["spread"] is None else f"{r['spread']:.1%}"
        times = ", ".join(f"{t * 1e3:.2f}" for t in r["in_order_s"])
        print(f"{r['key']}: n={r['n']} {r['min_s'] * 1e3:.2f} / {r['median_s'] * 1e3:.2f} / {r['max_s'] * 1e3:.2f} ms, "
              f"spread {spread}, idle {idle}; in order: {times} ms")
    ref = host_speed(paths)
    if ref is not None:
        print(f"[measurement] host reference beside each record (measure/models/host_reference.py), {ref['n']} records: "
              f"Python loop step {ref['python_min_s'] * 1e9:.1f} .. {ref['python_max_s'] * 1e9:.1f} ns; within a key, "
              f"log(step / key median) against log(Python step / key median): correlation {ref['correlation']:.2f}, "
              f"slope {ref['slope']:.2f}; log sd of the steps {ref['sd_raw']:.3f}, {ref['sd_after']:.3f} with that "
              "slope taken out (in sample)")
    return 0


def host_speed(paths: list[Path]) -> dict | None:
    """Over the ok records with a ``host_reference``, within each key: the correlation and least-squares slope
    (through the origin) of log(step / the key's median step) on log(Python loop step / the key's median of
    it), the Python step being the mean of the reference before and after the timed calls; and the log sd of
    the step deviations before and after that slope is taken out. None where fewer than 4 such records."""
    import json
    import math
    import statistics

    from ssmbench.measure.models.host_reference import python_step_s

    by: dict[str, list[tuple[float, float]]] = {}
    for p in paths:
        for r in json.loads(p.read_text(encoding="utf-8"))["records"]:
            ref = r.get("host_reference")
            if r.get("status") == "ok" and ref:
                by.setdefault(r["key"], []).append((float(r["time_s"]["median"]), python_step_s(ref)))
    xs, ys, pys = [], [], []
    for v in by.values():
        if len(v) < 2:
            continue
        tm, pm = statistics.median(t for t, _ in v), statistics.median(q for _, q in v)
        for t, q in v:
            xs.append(math.log(t / tm))
            ys.append(math.log(q / pm))
            pys.append(q)
    if len(xs) < 4 or not any(ys):
        return None
    slope = sum(x * y for x, y in zip(xs, ys)) / sum(y * y for y in ys)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    corr = sxy / math.sqrt(sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys))
    return {"n": len(xs), "python_min_s": min(pys), "python_max_s": max(pys), "correlation": corr, "slope": slope,
            "sd_raw": statistics.pstdev(xs), "sd_after": statistics.pstdev([x - slope * y for x, y in zip(xs, ys)])}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
