"""Measured and predicted time share per part of each characterized model record (stacked bars):
a pure function of ``calibrate.characterize.characterize``'s output."""

from __future__ import annotations

from pathlib import Path

from ._common import new_figure, save


def share_figure(doc: dict, path: str | Path) -> Path:
    recs = doc["records"]
    parts = sorted({p["part"] for r in recs for p in r["parts"]})
    n = max(len(recs), 1)
    fig, ax = new_figure(max(6.0, 0.9 * n + 2), 4.5)
    for side, dx, hatch in (("measured_share", -0.2, None), ("predicted_share", 0.2, "//")):
        bottom = [0.0] * len(recs)
        for j, part in enumerate(parts):
            vals = [next((p[side] or 0.0 for p in r["parts"] if p["part"] == part), 0.0) for r in recs]
            ax.bar([i + dx for i in range(len(recs))], vals, 0.38, bottom=bottom, color=f"C{j % 10}", hatch=hatch,
                   label=part if side == "measured_share" else None, edgecolor="white")
            bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(recs)))
    ax.set_xticklabels([f"{r['model']}\n{r['phase']} b{r['batch']} l{r['seqlen']}\n{r['runtime']}" for r in recs],
                       fontsize=6, rotation=90)
    ax.set_ylabel("share of the step time")
    ax.set_title("time share per part: measurement (left bar) vs achievable estimate (right, hatched)", fontsize=9)
    ax.legend(fontsize=6, ncol=2, loc="upper right")
    return save(fig, path)
