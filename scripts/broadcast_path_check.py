"""Check the broadcast path's element-size rule against measured eager cases (issue #13).

Usage: python scripts/broadcast_path_check.py DIR [DIR ...] [--hw h200-sxm]

For every ok case of the result folders whose cost moves bytes on ATen's broadcast kernels
(``Cost.path`` keys ``dram.broadcast`` and ``dram.broadcast_16bit``; hwspecs/schema.py DRAM_PATHS), prints
the measured median beside two achievable estimates (analytic/achievable.py, steady state, spec values; a case
timed as CUDA-graph replays is estimated under graph launch):
- **rule**: 16-bit results at ``memory.dram.path.broadcast_16bit``, fp32 results at ``memory.dram.path.broadcast``
  (the model);
- **bytes**: the same model with every broadcast byte at ``memory.dram.path.broadcast`` whatever the element
  size (the rule before 2026-12-05: the path's bandwidth in bytes, measured on fp32);
with their errors (estimate / measured - 1) and the summary per dtype. A benchmark script: it prints figures
and asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

BROADCAST_KEYS = ("dram.broadcast", "dram.broadcast_16bit")


def _bytes_rule_spec(spec):
    """``spec`` with memory.dram.path.broadcast_16bit set to the fp32 path's measured value (the bytes rule)."""
    measured = [m for m in spec.measured if m.key != "memory.dram.path.broadcast_16bit"]
    fp32 = next(m for m in measured if m.key == "memory.dram.path.broadcast")
    as_16bit = fp32.model_copy(update={"key": "memory.dram.path.broadcast_16bit"})
    return spec.model_copy(update={"measured": [*measured, as_16bit]})


def main(argv: list[str] | None = None) -> int:
    from ssmbench.analytic import achievable
    from ssmbench.analytic.registry import all_ops, cost
    from ssmbench.hwspecs import load_spec
    from ssmbench.measure.results import latest_by_key, read_dir

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--hw", default="h200-sxm")
    a = ap.parse_args(argv)
    root = Path(__file__).resolve().parents[1]
    spec = load_spec(str(root / "hwspecs" / "specs" / f"{a.hw}.yaml"))
    old = _bytes_rule_spec(spec)
    rows = []
    for d in a.dirs:
        for key, c in sorted(latest_by_key(read_dir(d)).items()):
            if c["status"] != "ok":
                continue
            if c["op"] not in all_ops():  # whole blocks: their plans, not one op's rule
                continue
            co = cost(c["op"], dict(c["dims"]), impl=c["impl"], mode=c["mode"], dtype=c["dtype"])
            if not any(float(co.path.get(p, 0)) > 0 for p in BROADCAST_KEYS):
                continue
            meas = c["time_s"]["median"]
            launch = "graph" if (c.get("timing") or {}).get("cuda_graph") else "eager"
            new_t = achievable.estimate(co, spec, launch=launch).time_s
            old_t = achievable.estimate(co, old, launch=launch).time_s
            rows.append((c["dtype"], key, meas, new_t, old_t))
    if not rows:
        print("no ok case with broadcast-path bytes in " + ", ".join(a.dirs))
        return 0
    print(f"{'measured':>10} {'rule':>10} {'err':>7} {'bytes':>10} {'err':>7}  case   "
          "(us; measurement, achievable estimates)")
    for dt, key, m, n, o in rows:
        print(f"{m * 1e6:10.1f} {n * 1e6:10.1f} {n / m - 1:+7.1%} {o * 1e6:10.1f} {o / m - 1:+7.1%}  {key}")
    for dt in sorted({r[0] for r in rows}):
        sel = [r for r in rows if r[0] == dt]
        rule, by_bytes = (statistics.median(abs(r[i] / r[2] - 1) for r in sel) for i in (3, 4))
        print(f"{dt}: {len(sel)} cases, median |err| rule {rule:.1%}, bytes {by_bytes:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
