"""Roofline figure of a spec, with the ops of one prediction at their arithmetic intensity.

Axes: arithmetic intensity in FLOP per byte of device memory (as-executed bytes), attainable rate in
FLOP/s (transcendentals on the special-function line count as evaluations/s on the same axis). Every
ceiling of the spec is drawn: one horizontal line per tensor-core dtype, the vector fp32 line, the
special-function line, one diagonal per memory level with a known device-wide bandwidth (DRAM and
caches). Ceilings the spec gives as unknown, and the launch overheads (times, not rates), are listed
in a box under the plot. Each op is a point at (FLOPs / bytes, FLOPs / bound time): how fast its
bound lets it run; its bottleneck sets the marker.
"""

from __future__ import annotations

import numpy as np

from ..analytic.roofline import SpecCeilings, describe
from ._common import new_figure, origin_phrase

MARKERS = {"tensor": "o", "vector": "s", "special_function": "^", "dram": "D", "cache": "v", "launch": "x"}


def ceilings_of(sc: SpecCeilings):
    """(compute lines [(label, FLOP/s, origin)], bandwidth lines [(label, B/s, origin)],
    launch overheads [text], unknown or uncounted [text])."""
    compute, bandwidth, launch, other = [], [], [], []
    for dt, c in sc.tensor.items():
        if c.value is not None:
            compute.append((f"tensor {dt}", c.value, c.origin))
        elif "lists no" not in c.provenance:
            other.append(f"{c.key}: {describe(c)}")
    for name, c in (("vector fp32", sc.vector), ("special function", sc.special_function)):
        if c.value is not None:
            compute.append((name, c.value, c.origin))
        else:
            other.append(f"{c.key}: {describe(c)}")
    for c in (sc.dram, *sc.caches):
        level = c.key.split(".")[1]
        if c.value is not None:
            bandwidth.append((f"{level} bandwidth", c.value, c.origin))
        else:
            other.append(f"{c.key}: {describe(c)}")
    for c in sc.launch.values():
        if c.value is not None:
            launch.append(f"{c.key} = {c.value * 1e6:.3g} us ({c.origin})")
        else:
            other.append(f"{c.key}: {describe(c)}")
    for lvl in sc.per_sm_levels:
        other.append(f"memory.{lvl}: per-SM traffic not counted by the cost model")
    return compute, bandwidth, launch, other


def roofline_figure(sc: SpecCeilings, ops: list[dict] | None = None, title: str | None = None, max_labels: int = 8):
    """Figure of the spec's ceilings and (optionally) prediction op rows (``report.predict()['ops']``)."""
    fig, ax = new_figure(9, 6.5)
    compute, bandwidth, launch, other = ceilings_of(sc)
    x = np.logspace(-2, 4, 400)
    peak = max((v for _, v, _ in compute), default=1e12)
    colors = iter(f"C{i}" for i in range(20))
    for label, v, origin in compute:
        style = "-" if label.startswith("tensor") else ("-." if label.startswith("vector") else ":")
        ax.plot(x, np.full_like(x, v), color=next(colors), lw=1.5, ls=style,
                label=f"{label}: {v / 1e12:.4g} TFLOP/s ({origin})")
    for label, bw, origin in bandwidth:
        y = x * bw
        ax.plot(x, np.where(y <= peak * 1.5, y, np.nan), color=next(colors), lw=1.5, ls="--",
                label=f"{label}: {bw / 1e12:.4g} TB/s ({origin})")
    if ops:
        ranked = sorted((o for o in ops if o.get("time_s") and o.get("intensity_flop_per_byte")),
                        key=lambda o: -o["time_s"])
        for i, o in enumerate(ranked):
            flops = sum(o["flops_tensor"].values()) + o["flops_vector"]
            rate = flops / o["time_s"]
            if rate <= 0:
                continue
            ax.scatter([o["intensity_flop_per_byte"]], [rate], marker=MARKERS.get(o["bottleneck"], "o"),
                       color="k", s=28, zorder=5)
            if i < max_labels:
                ax.annotate(o["label"], (o["intensity_flop_per_byte"], rate), fontsize=7,
                            xytext=(4, 3 - 10 * (i % 2)), textcoords="offset points")
        for b, m in MARKERS.items():
            if any(o["bottleneck"] == b for o in ranked):
                ax.scatter([], [], marker=m, color="k", label=f"op bound by {b}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte of device memory, as executed)")
    ax.set_ylabel("attainable rate (FLOP/s; special function: evaluations/s)")
    origins = {o for _, _, o in compute + bandwidth}
    ax.set_title(title or f"Roofline, analytic bound: {sc.spec.name} ({sc.spec.id}), {origin_phrase(origins)}",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    notes = []
    if launch:
        notes.append("Launch overheads (times, not rates; they bound ops with many launches): " + "; ".join(launch))
    if other:
        notes.append("Not drawn (unknown or not counted): " + "; ".join(other))
    if notes:
        fig.text(0.01, -0.02, "\n".join(notes), fontsize=6, va="top", wrap=True)
    return fig
