"""The report's figures, pure functions of a built report (``build.Report``):

- ``headline``: measured speedup (time ratio) and energy saving against the arithmetic saving (FLOP
  ratio) of every matched point, with the proportional line y = x and parity y = 1: the question's
  answer in one picture;
- ``savings(regime)``: realised vs theoretical savings against length for one regime: the FLOP ratio
  (analytic count) and the predicted time ratios (calibrated estimate, analytic bound) over the
  predicted range as lines, the measured time ratios with their intervals and the measured energy
  ratios as points;
- ``roofline``: the spec's ceilings with every paired record at its measured rate (analytic FLOPs /
  measured median time) against its arithmetic intensity (analytic FLOPs / executed bytes);
- ``energy_per_token``: measured joules per token against length, SSM and baseline, per phase.

Every axis names its label (measurement, analytic count, calibrated estimate, analytic bound) and unit.
"""

from __future__ import annotations

import io

import numpy as np

from ...analytic.roofline import SpecCeilings
from .._common import new_figure, origin_phrase
from ..roofline import ceilings_of
from .build import Report
from .pairs import PHASE_ORDER
from .regimes import RegimeResult

DPI = 110
PHASE_MARKERS = {"prefill": "o", "decode": "s", "training": "^"}
LENGTH_AXIS = {"prefill": "prompt length (tokens)", "decode": "KV-cache length (tokens)",
               "training": "sequence length (tokens)"}


def regime_colours(n: int) -> list:
    """One distinct colour per regime: matplotlib's 10-colour cycle, tab20 beyond ten regimes (the cycle
    would repeat a colour, and a marker alone does not tell two regimes of one phase apart)."""
    if n <= 10:
        return [f"C{i}" for i in range(n)]
    from matplotlib import colormaps
    cmap = colormaps["tab20"]
    return [cmap(i % 20) for i in range(n)]


def png(fig) -> bytes:
    """The figure as PNG bytes (no timestamp or software metadata: the same data give the same file)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()


def headline(rep: Report):
    fig, ax = new_figure(8, 6)
    pts = rep.points
    colours = regime_colours(len(rep.regimes))
    for i, rr in enumerate(rep.regimes):
        c, m = colours[i], PHASE_MARKERS[rr.regime.phase]
        x = [p.flop_ratio for p in rr.points]
        ax.scatter(x, [p.time.value for p in rr.points], color=c, marker=m, s=30, zorder=3,
                   label=f"{rr.regime.short}: time")
        e = [(p.flop_ratio, p.energy.value) for p in rr.points if p.energy]
        if e:
            ax.scatter(*zip(*e), facecolors="none", edgecolors=c, marker=m, s=60, zorder=3)
    lo = min(min(p.flop_ratio for p in pts), min(p.time.value for p in pts)) / 2
    hi = max(max(p.flop_ratio for p in pts), max(p.time.value for p in pts)) * 2
    ax.plot([lo, hi], [lo, hi], color="k", lw=1, ls="--", label="proportional: speedup = FLOP ratio")
    ax.axhline(1, color="grey", lw=1, ls=":", label="parity (1x)")
    ax.scatter([], [], facecolors="none", edgecolors="k", s=60, label="hollow: energy ratio (measurement)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic saving: attention FLOPs / SSM FLOPs (analytic count)")
    ax.set_ylabel("attention / SSM: median time, energy per call (measurement)")
    ax.set_title(f"Do arithmetic savings become speed and energy savings? {rep.matched.device}, matched pairs",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    # below the axes: inside, the legend hid the decode points of the upper left
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    return fig


def savings(rr: RegimeResult):
    fig, ax = new_figure(7.5, 5)
    for i, s in enumerate(rr.series):
        c = f"C{i % 10}"
        n = [p.point.length for p in s.points]
        t = np.array([p.time.value for p in s.points])
        lo = np.array([p.time.lo if p.time.lo is not None else p.time.value for p in s.points])
        hi = np.array([p.time.hi if p.time.hi is not None else p.time.value for p in s.points])
        ax.errorbar(n, t, yerr=[t - lo, hi - t], fmt="o", color=c, capsize=3, zorder=4,
                    label=f"{s.series}: time ratio (measurement, {rr.series[0].points[0].point.regime.phase})"
                    if i == 0 else f"{s.series}: time ratio (measurement)")
        e = [(p.point.length, p.energy.value) for p in s.points if p.energy]
        if e:
            ax.scatter(*zip(*e), marker="D", facecolors="none", edgecolors=c, s=40, zorder=4)
        L = s.curves["lengths"]
        ax.plot(L, s.curves["flops"], color=c, lw=1.2, ls="--")
        if not all(np.isnan(s.curves["calibrated"])):
            ax.plot(L, s.curves["calibrated"], color=c, lw=1, ls="-", alpha=0.8)
        ax.plot(L, s.curves["bound"], color=c, lw=0.8, ls=":")
    for style, label in (("--", "FLOP ratio (analytic count)"), ("-", "time ratio, calibrated estimate"),
                         (":", "time ratio, analytic bound")):
        ax.plot([], [], color="k", ls=style, label=label)
    ax.scatter([], [], marker="D", facecolors="none", edgecolors="k", label="energy ratio (measurement)")
    ax.axhline(1, color="grey", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(LENGTH_AXIS[rr.regime.phase])
    ax.set_ylabel("attention / SSM (ratio; > 1: the SSM saves)")
    ax.set_title(f"Realised vs theoretical savings: {rr.regime.title}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, loc="upper left")
    return fig


def roofline(rep: Report):
    sc = SpecCeilings.of(rep.spec, "measured")
    fig, ax = new_figure(8, 5.8)
    compute, bandwidth, _, _ = ceilings_of(sc)
    dtypes = {p.point.ssm["dtype"] for p in rep.points} | {p.point.baseline["dtype"] for p in rep.points}
    # the ceilings the pairs can meet: tensor cores at their dtypes, vector fp32, special function
    compute = [c for c in compute if not c[0].startswith("tensor") or c[0].split()[-1] in dtypes]
    x = np.logspace(-1, 4, 300)
    peak = max((v for _, v, _ in compute), default=1e12)
    for i, (label, v, origin) in enumerate(compute):
        ax.plot(x, np.full_like(x, v), lw=1, ls="-", color=f"C{i + 4}",
                label=f"{label}: {v / 1e12:.3g} TFLOP/s ({origin})")
    for j, (label, bw, origin) in enumerate(bandwidth):
        y = x * bw
        ax.plot(x, np.where(y <= peak * 1.5, y, np.nan), lw=1, ls="--", color=f"C{j + 7}",
                label=f"{label}: {bw / 1e12:.3g} TB/s ({origin})")
    seen = {}
    for p in rep.points:
        for side, color in ((p.ssm, "C0"), (p.base, "C3")):
            seen[side.record.key] = (side, color, p.point.regime.phase)
    for phase in PHASE_ORDER:
        for who, color in (("SSM", "C0"), ("attention", "C3")):
            pts = [(s.flops / s.bytes, s.flops / s.time_s) for s, c, ph in seen.values()
                   if ph == phase and c == color and s.bytes > 0 and s.flops > 0]
            if pts:
                ax.scatter(*zip(*pts), color=color, marker=PHASE_MARKERS[phase], s=22, zorder=4,
                           label=f"{who}, {phase} (measurement)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity: FLOPs / executed device-memory bytes (analytic count)")
    ax.set_ylabel("FLOP/s: analytic FLOPs / measured median time")
    origins = {o for _, _, o in compute + bandwidth}
    ax.set_title(f"Roofline of {rep.spec.id} ({origin_phrase(origins)}) with the measured pairs", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6.5, loc="lower right")
    return fig


def energy_per_token(rep: Report):
    def drawn(p):  # energy per token on both sides (a record may hold energy per call only)
        return p.energy and p.ssm.energy_per_token_j and p.base.energy_per_token_j

    phases = [ph for ph in PHASE_ORDER if any(drawn(p) for rr in rep.regimes if rr.regime.phase == ph
                                              for p in rr.points)]
    if not phases:
        return None
    fig, axes = new_figure(5 * len(phases), 4.5, ncols=len(phases))
    axes = np.atleast_1d(axes)
    for ax, ph in zip(axes, phases):
        i = 0
        for rr in rep.regimes:
            if rr.regime.phase != ph:
                continue
            for s in rr.series:
                pts = [p for p in s.points if drawn(p)]
                if not pts:
                    continue
                n = [p.point.length for p in pts]
                ax.plot(n, [p.ssm.energy_per_token_j for p in pts], marker="o", color=f"C{i % 10}",
                        label=f"{rr.regime.ssm_op} {s.series}")
                ax.plot(n, [p.base.energy_per_token_j for p in pts], marker="x", ls="--", color=f"C{i % 10}")
                i += 1
        ax.plot([], [], color="k", marker="o", label="SSM (solid)")
        ax.plot([], [], color="k", marker="x", ls="--", label="attention baseline (dashed)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(LENGTH_AXIS[ph])
        ax.set_ylabel("energy per token (J, measurement, NVML)")
        ax.set_title(f"Energy per token, {ph}", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=5.5)
    return fig
