"""Print a short table of the result files in a folder (the last step of the device scripts).

Usage: python scripts/summarize_results.py RESULTS_DIR [--totals-with DIR ...]
With --totals-with, a last line counts the statuses over RESULTS_DIR and those folders together (the
latest record of each case key, files of other devices than RESULTS_DIR's set aside).
Columns: status, median time of one call (measurement, CUDA events), achieved bytes/s and FLOP/s
(analytic count / measured median), roofline fraction (analytic bound / measured median), energy
per token (measurement, NVML), and the key (op/impl/backend/dtype/mode/dims) or the failure reason.
"""

from __future__ import annotations

import collections
import sys


def _num(x, scale=1.0, fmt="{:.3g}"):
    return fmt.format(x * scale) if isinstance(x, (int, float)) else "-"


def main(folder: str, totals_with: list[str]) -> int:
    from ssmbench.measure.results import latest_by_key, measured_on, read_dir

    files = read_dir(folder)
    cases = latest_by_key(files)
    counts = collections.Counter(c["status"] for c in cases.values())
    print(f"{'status':<13}{'median':>10}{'GB/s':>9}{'TFLOP/s':>9}{'roofl.':>8}{'J/token':>10}  case")
    print(f"{'':<13}{'(us)':>10}{'(an/ms)':>9}{'(an/ms)':>9}{'(frac)':>8}{'(NVML)':>10}")
    for key, c in sorted(cases.items()):
        t = (c.get("time_s") or {}).get("median")
        ach = c.get("achieved") or {}
        roof = c.get("roofline") or {}
        frac = roof.get("fraction") if isinstance(roof, dict) else c.get("roofline_fraction")
        en = (c.get("energy") or {}).get("joules_per_token")
        tail = key if c["status"] == "ok" else f"{key}  <- {str(c.get('reason'))[:140]}"
        print(f"{c['status']:<13}{_num(t, 1e6, '{:.1f}'):>10}{_num(ach.get('bytes_per_s'), 1e-9, '{:.0f}'):>9}"
              f"{_num(ach.get('flop_per_s'), 1e-12, '{:.1f}'):>9}{_num(frac, 1.0, '{:.2f}'):>8}"
              f"{_num(en, 1.0, '{:.2e}'):>10}  {tail}")
    print(f"{len(cases)} cases in {len(files)} result file(s): "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if totals_with:
        devices = {measured_on(f) for f in files}
        # names are run-<UTC time>-<pid>: name order is oldest first, as latest_by_key wants
        by_path = {f.path.resolve(): f for d in [*totals_with, folder] for f in read_dir(d)}
        every = [by_path[p] for p in sorted(by_path, key=lambda p: p.name)
                 if not devices or measured_on(by_path[p]) in devices]
        total = collections.Counter(c["status"] for c in latest_by_key(every).values())
        print(f"with {', '.join(totals_with)}: {sum(total.values())} cases in {len(every)} result file(s) of "
              f"{', '.join(sorted(str(d) for d in devices)) or 'any device'}: "
              + ", ".join(f"{k} {v}" for k, v in sorted(total.items())))
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    extra = args[args.index("--totals-with") + 1:] if "--totals-with" in args else []
    base = args[: args.index("--totals-with")] if "--totals-with" in args else args
    sys.exit(main(base[0] if base else "results", extra))
