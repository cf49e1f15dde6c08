"""Pareto figure of an exploration: every design point (a sample of at most ``MAX_POINTS``) and the
front, time per token against the second quantity (energy per token or the cost proxy).

Input is plain data: the two columns, the front's row indices and labels. Nothing is evaluated here.
"""

from __future__ import annotations

import numpy as np

from ._common import new_figure

MAX_POINTS = 20_000  # points drawn behind the front: more only darkens the cloud


def pareto_figure(x, y, front_rows, x_label: str, y_label: str, title: str, seed: int = 0):
    fig, ax = new_figure()
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.nonzero(~(np.isnan(x) | np.isnan(y)))[0]
    if ok.size > MAX_POINTS:
        ok = np.random.default_rng(seed).choice(ok, MAX_POINTS, replace=False)
    ax.scatter(x[ok], y[ok], s=4, color="0.75", label=f"design points ({ok.size:,} drawn)", rasterized=True)
    f = np.asarray(front_rows, dtype=int)
    ax.plot(x[f], y[f], "o-", color="C3", ms=4, lw=1, label=f"Pareto front ({f.size} designs)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig
