"""Figure of the energy check (``ssmbench gap --energy-plot``, ``ssmbench energy-fit --plot``): a pure
function of the report's ``energy`` section (``calibrate/energy.evaluate``); nothing is measured here.

Left: measured energy per call against the held-out (leave-shape-out) prediction at the measured time,
per family (log-log; the diagonal is agreement), power-limited windows hollow. Right: the same against
the prediction at the achievable estimate of the time (energy and time both predicted).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ._common import new_figure, save


def energy_figure(ev: dict[str, Any], spec_id: str, path: str | Path) -> Path:
    rows = ev["cases"]
    fig, axes = new_figure(12, 5, ncols=2)
    meas = np.array([r["measured_j"] for r in rows])
    fams = sorted({r["family"] for r in rows})
    for ax, basis, what in zip(axes, ("measured_time", "achievable_time"),
                               ("at the measured time", "at the achievable time")):
        pred = np.array([r[f"heldout_j_{basis}"] for r in rows])
        for i, fam in enumerate(fams):
            for limited in (False, True):
                sel = [j for j, r in enumerate(rows) if r["family"] == fam and r["power_limited"] == limited]
                if not sel:
                    continue
                style = {"facecolors": "none", "edgecolors": f"C{i % 10}"} if limited else {"color": f"C{i % 10}"}
                ax.scatter(meas[sel], pred[sel], s=16, label=None if limited else fam, **style)
        lo = min(meas.min(), pred.min()) / 1.5
        hi = max(meas.max(), pred.max()) * 1.5
        ax.plot([lo, hi], [lo, hi], color="k", lw=0.8)
        st = ev["bases"][basis]["all"]
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="measured energy per call [J]",
               ylabel="predicted energy per call [J] (calibrated estimate, held out)",
               title=f"{spec_id}: energy {what}\nmedian |err| {st['median_ape_pct']:.1f}%, "
                     f"p90 {st['p90_ape_pct']:.1f}% (hollow: power-limited)")
    axes[0].legend(loc="upper left", fontsize=7)
    return save(fig, path)
