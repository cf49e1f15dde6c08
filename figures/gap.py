"""Figure of a gap report (``ssmbench gap --plot``): a pure function of the report's data
(``ssmbench.calibrate.gap.gap_report``); nothing is measured or fitted here.

Left: measured time against the analytic bound and against the calibrated held-out prediction
(log-log; the diagonal is perfect agreement). Right: % of roofline (bound / measured) per family.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ._common import new_figure


def gap_figure(rep: dict[str, Any], path: str | Path) -> Path:
    """Write the figure to ``path`` (any format matplotlib writes; folders are created)."""
    rows = rep["cases"]
    est_label = "transferred" if rep["calibration"]["transferred"] else "calibrated (held-out)"
    fig, (ax1, ax2) = new_figure(12, 5, ncols=2)
    meas = np.array([r["measured_s"] for r in rows])
    bound = np.array([r["bound_s"] for r in rows])
    ax1.scatter(meas, bound, s=14, marker="x", color="0.5", label="bound (analytic)")
    pred_rows = [r for r in rows if r["heldout_pred_s"] is not None]
    if pred_rows:
        ax1.scatter([r["measured_s"] for r in pred_rows], [r["heldout_pred_s"] for r in pred_rows], s=14,
                    color="C0", label=est_label)
    lo = min(meas.min(), bound.min()) / 1.5
    hi = max(meas.max(), bound.max()) * 1.5
    ax1.plot([lo, hi], [lo, hi], color="k", lw=0.8)
    ax1.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi),
            xlabel="measured time per call [s]", ylabel="predicted time per call [s]",
            title=f"Predicted vs measured on {rep['spec']['id']}")
    ax1.legend(loc="upper left")

    fams = sorted({r["family"] for r in rows})
    for i, fam in enumerate(fams):
        vals = np.array([r["roofline_pct"] for r in rows if r["family"] == fam])
        jitter = (np.arange(len(vals)) % 7 - 3) * 0.04
        ax2.scatter(np.full(len(vals), i) + jitter, vals, s=12, color=f"C{i % 10}")
        ax2.hlines(np.median(vals), i - 0.3, i + 0.3, color="k", lw=1.5)
    ax2.axhline(100, color="0.4", ls="--", lw=0.8)
    ax2.set_xticks(range(len(fams)), fams, rotation=30, ha="right")
    ax2.set(yscale="log", ylabel="% of roofline (bound / measured) [%]",
            title="% of roofline per family (bar: median)")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    return path
