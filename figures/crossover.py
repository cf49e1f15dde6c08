"""Crossover figure: an SSM (or hybrid) model against its attention baseline, time bound against length.

Input is plain data: both models' lengths and times (s) and the crossover result of
``ssmbench.analytic.sweep.crossover``. The crossover length, when there is one, is marked.
"""

from __future__ import annotations

import numpy as np

from ._common import new_figure, origin_phrase


def crossover_figure(lengths, model_times, baseline_times, result: dict, spec_label: str, origins: set[str],
                     model_fits=None, baseline_fits=None):
    """Times are bounds regardless of capacity; points that do not fit in device memory (``*_fits``
    False) are drawn hollow."""
    fig, ax = new_figure()
    lengths = np.asarray(lengths, dtype=float)
    for i, (name, times, fits, ls) in enumerate((
            (result["model"], model_times, model_fits, "-"),
            (f"{result['baseline']} (baseline)", baseline_times, baseline_fits, "--"))):
        t = np.asarray(times, dtype=float)
        ok = np.ones(t.shape, dtype=bool) if fits is None else np.asarray(fits, dtype=bool)
        ax.plot(lengths, t, ls=ls, color=f"C{i}", label=name)
        ax.scatter(lengths[ok], t[ok], color=f"C{i}", s=14, zorder=3)
        if not ok.all():
            ax.scatter(lengths[~ok], t[~ok], facecolors="none", edgecolors=f"C{i}", s=30, zorder=3,
                       label=f"{name}: does not fit in device memory")
    if result.get("length"):
        ax.axvline(result["length"], color="k", lw=1, ls=":")
        ax.annotate(f"crossover: {result['length']} tokens", (result["length"], ax.get_ylim()[0]),
                    xytext=(5, 10), textcoords="offset points", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    what = {"prefill": "prompt length (tokens)", "train": "sequence length (tokens)",
            "decode": "context length (tokens)"}[result["phase"]]
    ax.set_xlabel(what)
    ax.set_ylabel("time per step (s), analytic bound")
    ax.set_title(f"Crossover, analytic bound: {result['phase']}, batch {result['batch']}, on {spec_label} "
                 f"({origin_phrase(origins)}): {result['result']}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig
