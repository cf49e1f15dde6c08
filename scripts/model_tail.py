"""Who makes the p90 tail of the time model's errors: tables from a gap report (``ssmbench gap --format json``).

Usage: python scripts/model_tail.py [--gap results/h200/2026-12-02/calibration/gap.json] [--top 15]
(also ``python scripts/model_targets.py --tail``).

For two errors of every measured case of the report, each with its label:
- the achievable estimate alone (|estimate / measured - 1|, ``achievable_ape_pct``), and
- the calibrated estimate held out of its group's fit (leave-shape-out, ``heldout_ape_pct``),
it prints per family: cases, median and p90 |error|, the median of estimate / measured (below 1: the
model is too fast), the cases in the overall p90 tail and those above 25 %; then the ``--top`` groups
(op / implementation [backend] dtype mode) with the most cases in that tail, with their most frequent
bottleneck label. Reads stored data only; never fails on the figures (a benchmark table, not a test).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ERRORS = {"achievable": ("achievable_ape_pct", "achievable_s", "[achievable estimate]"),
          "calibrated": ("heldout_ape_pct", "heldout_pred_s", "[calibrated estimate, leave-shape-out]")}


def _rows(cases: list[dict], err: str, pred: str) -> list[tuple[dict, float, float]]:
    """(case, |error| %, estimate / measured) of the cases that have both."""
    out = []
    for c in cases:
        e, p, m = c.get(err), c.get(pred), c.get("measured_s")
        if e is not None and p and m:
            out.append((c, float(e), float(p) / float(m)))
    return out


def tail_tables(rep: dict, top: int = 15) -> list[str]:
    """The tables as lines of text."""
    lines = []
    for err, pred, label in ERRORS.values():
        rows = _rows(rep.get("cases", []), err, pred)
        if not rows:
            continue
        e_all = np.array([r[1] for r in rows])
        cut = float(np.percentile(e_all, 90))
        lines.append(f"{label} {len(rows)} cases: median |err| {np.median(e_all):.1f} %, p90 {cut:.1f} %; "
                     "per family: n, median, p90, median estimate/measured, cases in the p90 tail, cases > 25 %")
        fams: dict[str, list] = defaultdict(list)
        groups: dict[str, list] = defaultdict(list)
        for r in rows:
            fams[r[0]["family"]].append(r)
            groups[r[0].get("group") or r[0]["key"].rsplit("/", 1)[0]].append(r)
        for fam, rs in sorted(fams.items()):
            e = np.array([r[1] for r in rs])
            ratio = float(np.exp(np.median(np.log([r[2] for r in rs]))))
            lines.append(f"  {fam:12s} n={len(rs):4d} {np.median(e):6.1f} % {np.percentile(e, 90):6.1f} %  x{ratio:5.2f}"
                         f"  tail {int(np.sum(e > cut)):3d}  >25 % {int(np.sum(e > 25)):3d}")
        ranked = sorted(groups.items(), key=lambda kv: -sum(r[1] > cut for r in kv[1]))[:top]
        lines.append(f"  groups with the most cases in the p90 tail (> {cut:.1f} %): tail/n, median |err|, "
                     "median estimate/measured, most frequent achievable bottleneck")
        for g, rs in ranked:
            n_tail = sum(r[1] > cut for r in rs)
            if not n_tail:
                break
            bott = Counter(r[0].get("achievable_bottleneck") or "-" for r in rs).most_common(1)[0][0]
            ratio = float(np.exp(np.median(np.log([r[2] for r in rs]))))
            lines.append(f"    {n_tail:3d}/{len(rs):3d} {np.median([r[1] for r in rs]):6.1f} %  x{ratio:5.2f}  "
                         f"{bott:16s} {g}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gap", default="results/h200/2026-12-02/calibration/gap.json")
    ap.add_argument("--top", type=int, default=15, help="groups listed per error (default 15)")
    a = ap.parse_args(argv)
    path = Path(a.gap)
    try:
        rep = json.loads(path.read_text())
        rep["cases"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        print(f"model_tail: {path} is not a readable gap report ({exc}); write one with scripts/calibrate_h200.sh",
              file=sys.stderr)
        return 2
    print("\n".join(tail_tables(rep, a.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
