"""Whole blocks against their ops: each measured block case (``block:...`` records) beside the bound
composed from the op calls its plan lists (``analytic/workloads/blocks.py``, ``composed_bound``).

Usage: python scripts/block_gap.py RESULTS_DIR [RESULTS_DIR ...] [--hw SPEC] [--prefer measured|datasheet] [--json]
                                   [--max-median-error PCT] [--ops achievable|measured]
                                   [--op-results DIR ...] [--max-distance X] [--calibration PROFILE]

For every block case with status ok in the folders given (the latest record of each key over all of
them; their op records also serve ``--ops measured``), on the spec of the device it
was measured on (``--hw``, default h200-sxm):
- measured: the median time of one call (measurement, CUDA events; decode replays a CUDA graph);
- summed: the analytic bound of the block's summed cost (max over resources of all its work: the
  bound the calibration join records);
- composed: the sum over the block's op calls of each call's analytic bound (kernels run one after
  another; eager launches, graph replay for decode), the way model predictions compose;
- ratio: measured / composed (>= 1 for a true bound);
- achievable: the achievable estimate composed from the same calls (analytic/achievable.py: host and
  device overlap across the block's calls; one graph replay for decode, one autograd call for a
  backward; mamba-ssm's modules with the runtime's Python per op call, ``blocks.block_runtime``), and
  measured / achievable; the same with the ops' host classes alone is in ``--json``
  (``achievable_ops_host_s``) and its median in the summary.
Then the median ratio per block and over all cases. ``--max-median-error PCT`` exits 1 when the
median of |measured / composed - 1| exceeds PCT percent (the check for an achievable model of the
whole blocks composed from their ops). Nothing is fitted.

``--ops measured`` adds the measurement-composed oracle (``block_oracle.py``): every call whose op was
measured (in RESULTS_DIR and each ``--op-results DIR``; at another shape within ``--max-distance``,
scaled by the model's shape ratio) takes the device time that measurement implies, composed the same
way; measured / oracle and its median |error| separate plan and composition errors (oracle far from
the measurement) from op-model errors (oracle near it, achievable far). Each call's source
(measured, scaled, model) is in ``--json``; the table gives the share of device time from measurements.

``--calibration PROFILE`` adds the blocks composed from the profile's calibrated op estimates
(``block_calibrated.py``: op groups only, so the blocks are held out; label calibrated estimate).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path


def rows(folder: str | list[str] | tuple[str, ...], hw: str, prefer: str, ops: str = "achievable", op_results: tuple[str, ...] = (),
         max_distance: float = math.log(16), calibration: str | None = None) -> list[dict]:
    from ssmbench.analytic.workloads.blocks import composed_bound
    from ssmbench.hwspecs import get_spec
    from ssmbench.measure.results import latest_by_key, read_dir

    spec = get_spec(hw)
    files = [f for d in ([folder] if isinstance(folder, str) else folder) for f in read_dir(d)]
    records = profile = None
    if ops == "measured" or calibration:
        import block_oracle

        records = block_oracle.op_records(files + [f for d in op_results for f in read_dir(d)])
    if calibration:
        import block_calibrated
        from ssmbench.calibrate.profile import read_profile

        profile = read_profile(calibration)
    out = []
    for key, c in sorted(latest_by_key(files).items()):
        if not str(c.get("op", "")).startswith("block:") or c.get("status") != "ok":
            continue
        measured = (c.get("time_s") or {}).get("median")
        b = composed_bound(c["op"], c["dims"], spec, impl=c.get("impl"), mode=c["mode"], dtype=c["dtype"],
                           prefer=prefer)
        out.append({"key": key, "op": c["op"], "mode": c["mode"], "dims": c["dims"], "measured_s": measured,
                    "summed_bound_s": b["summed_cost_bound_s"], "composed_bound_s": b["composed_s"],
                    "launch": b["launch"], "calls": b["calls"],
                    "ratio": measured / b["composed_s"] if measured and b["composed_s"] else None,
                    "achievable_s": b["achievable"]["time_s"],
                    "achievable_ops_host_s": (b["achievable_ops_host"] or b["achievable"])["time_s"],
                    "achievable_ratio": measured / b["achievable"]["time_s"] if measured else None})
        if profile is not None:
            k = block_calibrated.compose(b, c, profile, spec, records)
            out[-1].update(calibrated=k, calibrated_s=k["time_s"])
        if ops == "measured":
            o = block_oracle.compose(b, c, records, spec, max_distance)
            out[-1].update(oracle=o, oracle_s=o["time_s"], oracle_ratio=measured / o["time_s"] if measured else None)
    return out


def summary(rs: list[dict]) -> dict:
    by: dict[str, list[float]] = {}
    for r in rs:
        if r["ratio"] is not None:
            by.setdefault(f"{r['op']} {r['mode']}", []).append(r["ratio"])
    every = [r["ratio"] for r in rs if r["ratio"] is not None]
    ach = [r["achievable_ratio"] for r in rs if r.get("achievable_ratio")]
    orc = [r["oracle_ratio"] for r in rs if r.get("oracle_ratio")]
    ops_host = [r["measured_s"] / r["achievable_ops_host_s"] for r in rs if r.get("measured_s") and r.get("achievable_ops_host_s")]
    cal = [r["measured_s"] / r["calibrated_s"] for r in rs if r.get("measured_s") and r.get("calibrated_s")]
    return {"calibrated_median_abs_error_pct": statistics.median(abs(1 / x - 1) * 100 for x in cal) if cal else None,
            "achievable_ops_host_median_abs_error_pct":
                statistics.median(abs(1 / x - 1) * 100 for x in ops_host) if ops_host else None,
"oracle_median_ratio": statistics.median(orc) if orc else None,
            "oracle_median_abs_error_pct": statistics.median(abs(1 / x - 1) * 100 for x in orc) if orc else None,
            "achievable_median_ratio": statistics.median(ach) if ach else None,
            "achievable_median_abs_error_pct": statistics.median(abs(1 / x - 1) * 100 for x in ach) if ach else None,
            "median_ratio": statistics.median(every) if every else None,
            "median_abs_error_pct": statistics.median(abs(x - 1) * 100 for x in every) if every else None,
            "per_block": {k: statistics.median(v) for k, v in sorted(by.items())}, "cases": len(every)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", nargs="+", help="result folders holding block cases")
    ap.add_argument("--hw", default="h200-sxm")
    ap.add_argument("--prefer", default="measured", choices=("measured", "datasheet"))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--max-median-error", type=float, metavar="PCT")
    ap.add_argument("--ops", default="achievable", choices=("achievable", "measured"),
                    help="measured: add the measurement-composed oracle (op measurements through the same composition)")
    ap.add_argument("--op-results", action="append", default=[], metavar="DIR",
                    help="more result folders with op measurements for --ops measured")
    ap.add_argument("--max-distance", type=float, default=math.log(16),
                    help="largest sum over dimensions of |ln(call / record)| a measurement is scaled over (default ln 16)")
    ap.add_argument("--calibration", metavar="PROFILE",
                    help="a calibrated profile (ssmbench calibrate --out): add the blocks composed from its op groups' "
                         "calibrated estimates (block_calibrated.py; no block case is in any op group's fit)")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    rs = rows(a.folder, a.hw, a.prefer, a.ops, tuple(a.op_results), a.max_distance, a.calibration)
    s = summary(rs)
    if a.json:
        print(json.dumps({"label": "measured vs analytic bound composed from the block's ops", "spec": a.hw,
                          "prefer": a.prefer, "cases": rs, "summary": s}, indent=1))
    else:
        print(f"{'measured':>10}{'summed':>10}{'composed':>10}{'meas/comp':>10}{'achiev.':>10}{'meas/ach':>10}"
              f"  case (us; analytic bounds and achievable estimates on {a.hw})")
        for r in rs:
            f = lambda x: f"{x * 1e6:10.1f}" if x else f"{'-':>10}"
            print(f"{f(r['measured_s'])}{f(r['summed_bound_s'])}{f(r['composed_bound_s'])}"
                  f"{r['ratio'] or float('nan'):10.3f}{f(r['achievable_s'])}{r['achievable_ratio'] or float('nan'):10.3f}"
                  + (f"{f(r['oracle_s'])}{r['oracle_ratio'] or float('nan'):10.3f}"
                     f"{100 * r['oracle']['device_share'].get('measured', 0) + 100 * r['oracle']['device_share'].get('scaled', 0):6.0f}%"
                     if "oracle" in r else "")
                  + f"  {r['op']} {r['mode']} "
                  + ",".join(f"{k}={v}" for k, v in sorted(r["dims"].items())))
        for k, v in s["per_block"].items():
            print(f"median measured / composed bound, {k}: {v:.3f}")
        print(f"median measured / composed bound, all {s['cases']} block cases: {s['median_ratio']:.3f} "
              f"(median |ratio - 1| = {s['median_abs_error_pct']:.1f} %)")
        if s["achievable_median_ratio"] is not None:
            print(f"achievable estimate composed from the ops, all block cases: median measured / estimate "
                  f"{s['achievable_median_ratio']:.3f}, median |estimate / measured - 1| = "
                  f"{s['achievable_median_abs_error_pct']:.1f} % (target <= 10 %)")
        if s["achievable_ops_host_median_abs_error_pct"] is not None:
            print(f"achievable estimate with the ops' host classes only (no module Python, a diagnostic): median "
                  f"|estimate / measured - 1| = {s['achievable_ops_host_median_abs_error_pct']:.1f} %")
        if s["calibrated_median_abs_error_pct"] is not None:
            print(f"calibrated estimate composed from the ops' calibrated estimates (blocks held out), all block "
                  f"cases: median |estimate / measured - 1| = {s['calibrated_median_abs_error_pct']:.1f} %")
        if s["oracle_median_ratio"] is not None:
            print(f"measurement-composed (op measurements through the same composition), all block cases: median "
                  f"measured / composed {s['oracle_median_ratio']:.3f}, median |composed / measured - 1| = "
                  f"{s['oracle_median_abs_error_pct']:.1f} %")
    if a.max_median_error is not None and (s["median_abs_error_pct"] is None
                                           or s["median_abs_error_pct"] > a.max_median_error):
        print(f"block_gap: median |measured / composed - 1| = {s['median_abs_error_pct']} % exceeds "
              f"{a.max_median_error} %", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
