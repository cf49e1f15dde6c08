"""Scaling figure: time bound per token against length, one line per model, on one spec.

Input is plain data (from ``ssmbench.analytic.sweep`` or stored predictions): for each model its
lengths and time per token. Prefill and train: per token of the prompt / sequence; decode: per
generated token at that context length. Points that do not fit in device memory are left out and
the line is broken there.
"""

from __future__ import annotations

import numpy as np

from ._common import new_figure, origin_phrase


def scaling_figure(series: list[dict], spec_label: str, phase: str, batch: int, origins: set[str]):
    """``series``: [{"model": id, "lengths": [...], "time_per_token_s": [...], "family": str}]."""
    fig, ax = new_figure()
    for i, s in enumerate(series):
        t = np.asarray(s["time_per_token_s"], dtype=float)
        ls = "-" if s.get("family") != "transformer" else "--"
        ax.plot(s["lengths"], t, ls=ls, marker=".", color=f"C{i % 10}", label=s["model"])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    what = {"prefill": "prompt length (tokens)", "train": "sequence length (tokens)",
            "decode": "context length (tokens)"}[phase]
    ax.set_xlabel(what)
    ax.set_ylabel("time per token (s/token), analytic bound")
    ax.set_title(f"Scaling, analytic bound: {phase}, batch {batch}, on {spec_label} ({origin_phrase(origins)})",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return fig
