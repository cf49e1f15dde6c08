"""Prediction intervals scaled to what sets a call's pace: host-bound or GPU-bound.

Why: a group's held-out residuals come from two sources of very different size. A GPU-bound call (the
achievable estimate's bottleneck is a GPU resource, latency or a chain) repeats within a few % between
measurement sessions; a host-bound one (bottleneck ``host/launch``: the host issues the call slower than
the GPU runs it) is one CPU's Python and driver path, which moves between sessions by tens of %
(sessions.py). One interval over both is too wide for the GPU-bound shapes (they fall inside it far more
often than its level says) and too narrow for the host-bound ones.

Method: normalised split-conformal prediction (Papadopoulos et al. 2002; Lei et al., "Distribution-free
predictive inference for regression", 2018, the locally weighted form), ranked per pace (Mondrian
conformal prediction, Vovk et al., "Algorithmic Learning in a Random World", 2005, ch. 4: the ranks are taken
within each category, so the level holds within each). Each held-out log residual r_i = log(measured /
held-out prediction) is divided by the spread s(p_i) of its pace, z_i = r_i / s(p_i); the interval of a case
of pace p is exp(s(p) z_lo(p)) .. exp(s(p) z_hi(p)) times the estimate, z_lo(p) and z_hi(p) the
split-conformal ranks of the group's z of pace p (each shape weighs 1). The spreads are robust:
s(p) = median |r| over the group's held-out cases of pace p where the group has at least
MIN_GROUP_PACE_RESIDUALS of them, else the same median pooled over every calibrated group. A group's own
spread matters: a GEMM's GPU-bound shapes repeat within a few %, a block's within tens, and a spread pooled
over both made the GEMMs' GPU-bound intervals far wider than their level (98 % coverage at 80 %) and the
blocks' narrower (65 %). The ranks are per pace because the two paces' normalised residuals differ in shape,
not only in scale: a host-bound time has a heavy tail (a session whose host was slow), a GPU-bound one a
light one, and one set of ranks over both gave the elementwise ops' GPU-bound shapes 98 % coverage and their
host-bound ones 70 %. Where a group holds fewer than MIN_OWN_RANK_SHAPES shapes of a pace (its level-0.8
interval would fall back to its extreme residuals), it ranks them together with the same pace's normalised
residuals of its family's other groups, then, still short, of every other group (each normalised by its
own group's spreads): the blocks' GPU-bound coverage went from 65 % to 80 % by the family's. Each held-out
case is judged against spreads and ranks from the other shapes only, so it never widens its own interval.
"""

from __future__ import annotations

import json
import math
from typing import Any, NamedTuple

import numpy as np

from .crossval import Interval, conformal, shape_weights
from .sessions import HOST_BOUND

PACES = ("gpu", "host")
# fewest held-out residuals of each pace, over all calibrated groups, for the spreads to be used
MIN_PACE_RESIDUALS = 20
# fewest held-out residuals of a pace in one group for that group's own spread of the pace (else the pooled one)
MIN_GROUP_PACE_RESIDUALS = 6
# fewest shapes of a pace in a group for its interval of that pace to rank its own normalised residuals alone: a
# level-0.8 split-conformal interval is exact from n + 1 >= 2 / 0.2 = 10 ranks; below, it takes the extreme
# residuals, which hold a new shape with probability (n - 1) / (n + 1) only (67 % at the 5 other shapes of a
# 6-shape group). Such a group ranks them together with the same pace's residuals of its family's other groups,
# then of every other group, each normalised by its own group's spreads.
MIN_OWN_RANK_SHAPES = 10
METHOD = ("normalised split-conformal ranks of leave-shape-out log residuals per pace (each shape weighs 1), each "
          "residual divided by its group's spread of its pace (pooled over groups where the group has few of that "
          f"pace); a group with fewer than {MIN_OWN_RANK_SHAPES} shapes of a pace ranks them with the same pace's "
          "of its family's other groups, then of every other group (calibrate/pace.py)")


def pace_of(case) -> str:
    """"host" where the case's achievable estimate is host-bound, else "gpu"."""
    return "host" if (case.bounds.achievable or {}).get("bottleneck") == HOST_BOUND else "gpu"


def _residuals(group: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    held = group.get("heldout") or []
    r = np.array([math.log(h["measured_s"] / h["heldout_pred_s"]) for h in held])
    paces = np.array([h.get("pace", "gpu") for h in held])
    shapes = np.array([json.dumps(h["dims"], sort_keys=True) for h in held])
    return r, paces, shapes


def pace_scales(groups: list[dict]) -> dict[str, Any] | None:
    """Per pace: ``scale`` = median |log residual| over the held-out cases of the calibrated groups, and
    ``n``; None where either pace has fewer than MIN_PACE_RESIDUALS of them."""
    by: dict[str, list[float]] = {p: [] for p in PACES}
    for g in groups:
        if g.get("status") != "calibrated":
            continue
        r, paces, _ = _residuals(g)
        for p in PACES:
            by[p] += list(np.abs(r[paces == p]))
    if any(len(v) < MIN_PACE_RESIDUALS for v in by.values()) or any(np.median(v) <= 0 for v in by.values()):
        return None
    return {p: {"scale": float(np.median(v)), "n": len(v)} for p, v in by.items()}


class _Normalised(NamedTuple):
    """One group's held-out log residuals, their paces and shapes, its spreads, the normalised residuals and
    their shape weights."""
    r: np.ndarray
    paces: np.ndarray
    shapes: np.ndarray
    spreads: dict[str, float]
    z: np.ndarray
    w: np.ndarray


def _scales_of(r: np.ndarray, paces: np.ndarray, pooled: dict[str, Any]) -> dict[str, float]:
    """Per pace, the spread of these residuals of that pace (median |r|) where there are at least
    MIN_GROUP_PACE_RESIDUALS of them and it is positive, else the pooled spread (``pace_scales``)."""
    out = {}
    for p in PACES:
        a = np.abs(r[paces == p])
        own = float(np.median(a)) if a.size >= MIN_GROUP_PACE_RESIDUALS else 0.0
        out[p] = own if own > 0 else pooled[p]["scale"]
    return out


def _of_pace(parts: list[_Normalised], pace: str) -> tuple[np.ndarray, np.ndarray]:
    """The normalised residuals of ``pace`` of these groups, and their shape weights."""
    if not parts:
        return np.zeros(0), np.zeros(0)
    return (np.concatenate([n.z[n.paces == pace] for n in parts]),
            np.concatenate([n.w[n.paces == pace] for n in parts]))


def _rank_pool(z: np.ndarray, w: np.ndarray,
               tiers: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """A group's normalised residuals of one pace, with the tiers' (its family's other groups', then every other
    group's, then its own of the other pace) added in that order while they hold fewer than MIN_OWN_RANK_SHAPES
    shapes (each shape weighs 1, so the weights sum to the shapes)."""
    zs, ws = [z], [w]
    for tz, tw in tiers:
        if sum(x.sum() for x in ws) >= MIN_OWN_RANK_SHAPES - 1e-9:
            break
        zs.append(tz)
        ws.append(tw)
    return np.concatenate(zs), np.concatenate(ws)


def normalise_by_pace(groups: list[dict], level: float) -> dict[str, Any] | None:
    """Give every calibrated group an interval per pace (``interval_by_pace``) and re-judge its held-out
    intervals and coverage on the normalised residuals, ranked per pace (module docstring). Returns the pooled
    spreads (None: too few residuals of a pace over all groups, and the groups keep their one interval)."""
    scales = pace_scales(groups)
    if scales is None:
        return None
    done = [g for g in groups if g.get("status") == "calibrated" and g.get("heldout")]
    norm = {}
    for g in done:
        r, paces, shapes = _residuals(g)
        own = _scales_of(r, paces, scales)
        norm[id(g)] = _Normalised(r, paces, shapes, own, r / np.array([own[p] for p in paces]), shape_weights(shapes))

    def family(g: dict):
        return (g.get("key") or {}).get("family")

    for g in done:
        r, paces, shapes, own, z, w = norm[id(g)]
        kin = [norm[id(o)] for o in done if o is not g and family(o) == family(g)]
        rest = [norm[id(o)] for o in done if o is not g and family(o) != family(g)]
        tiers = {p: [_of_pace(kin, p), _of_pace(rest, p)] for p in PACES}
        ivs = {}
        for p in PACES:
            mine, other = paces == p, paces != p
            zp, wp = _rank_pool(z[mine], w[mine], tiers[p] + [(z[other], w[other])])
            ivs[p] = conformal(zp, level, wp, method=METHOD)
        covered = np.zeros(len(r), dtype=bool)
        for i, h in enumerate(g["heldout"]):
            p = paces[i]
            others = shapes != shapes[i]
            if others.any():  # spreads and ranks from the other shapes only: a case never widens its own interval
                s_o = _scales_of(r[others], paces[others], scales)
                z_o = r[others] / np.array([s_o[q] for q in paces[others]])
                mine = paces[others] == p
                zp, wp = _rank_pool(z_o[mine], w[others][mine], tiers[p] + [(z_o[~mine], w[others][~mine])])
                ivi = conformal(zp, level, wp)
                s_i = s_o[p]
                h["heldout_lo_s"] = float(h["heldout_pred_s"] * math.exp(ivi.log_lo * s_i))
                h["heldout_hi_s"] = float(h["heldout_pred_s"] * math.exp(ivi.log_hi * s_i))
                covered[i] = ivi.log_lo <= r[i] / s_i <= ivi.log_hi
            h["covered"] = bool(covered[i])
        g["cv"]["coverage"] = float(covered.mean())
        g["cv"]["n_covered"] = int(covered.sum())
        g["pace_spreads"] = own
        g["interval_by_pace"] = {
            p: Interval(level, ivs[p].log_lo * own[p], ivs[p].log_hi * own[p], ivs[p].n, ivs[p].exact_level,
                        METHOD).to_dict()
            for p in PACES}
    return scales
