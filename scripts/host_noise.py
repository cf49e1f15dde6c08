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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
