"""Prediction intervals scaled to what sets a call's pace: host-bound or GPU-bound.

Why: a group's held-out residuals come from two sources of very different size. A GPU-bound call (the
achievable estimate's bottleneck is a GPU resource, latency or a chain) repeats within a few % between
measurement sessions; a host-bound one (bottleneck ``host/launch``: the host issues the call slower than
the GPU runs it) is one CPU's Python and driver path, which moves between sessions by tens of %
(sessions.py). One interval over both is too wide for the GPU-bound shapes (they fall inside it far more
often than its level says) and too narrow for the host-bound ones.

Method: normalised split-conformal prediction (Papadopoulos et al. 2002; Lei et al., "Distribution-free
predictive inference for regression", 2018, the locally weighted form). Each held-out log residual
r_i = log(measured / held-out prediction) is divided by the spread s(p_i) of its pace,
z_i = r_i / s(p_i); the split-conformal ranks are taken over the group's z (each shape weighs 1), and the
interval of a case of pace p is exp(s(p) z_lo) .. exp(s(p) z_hi) times the estimate. The spreads are robust:
s(p) = median |r| over the group's held-out cases of pace p where the group has at least
MIN_GROUP_PACE_RESIDUALS of them, else the same median pooled over every calibrated group. A group's own
spread matters: a GEMM's GPU-bound shapes repeat within a few %, a block's within tens, and a spread pooled
over both made the GEMMs' GPU-bound intervals far wider than their level (98 % coverage at 80 %) and the
blocks' narrower (65 %). A group of fewer than MIN_OWN_RANK_SHAPES shapes cannot hold its level on its own
ranks (its interval falls back to its extreme residuals) and ranks its z together with its family's other
groups' (each normalised by its own group's spreads): the blocks' GPU-bound coverage went from 65 % to 80 %.
Each held-out case is judged against spreads and ranks from the other shapes only, so it never widens its own
interval. The z of one group are exchangeable as its r were, so the level holds
over the group's cases, while each case's width follows its pace. A group whose cases are all of one pace
keeps its interval for that pace exactly (the spread cancels) and gets the other pace's by the ratio of
spreads.
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
# fewest shapes of a group for its intervals to rank its own normalised residuals alone: a level-0.8 split-conformal
# interval is exact from n + 1 >= 2 / 0.2 = 10 ranks; below, it takes the extreme residuals, which hold a new
# shape with probability (n - 1) / (n + 1) only (67 % at the 5 other shapes of a 6-shape group). Such a group
# ranks its residuals together with the other groups of its family, each normalised by its own group's spreads.
MIN_OWN_RANK_SHAPES = 10
METHOD = ("normalised split-conformal ranks of leave-shape-out log residuals (each shape weighs 1), each "
          "residual divided by its group's spread of its pace (pooled over groups where the group has few of that "
          f"pace); a group of fewer than {MIN_OWN_RANK_SHAPES} shapes ranks them with its family's other groups "
          "(calibrate/pace.py)")


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


def normalise_by_pace(groups: list[dict], level: float) -> dict[str, Any] | None:
    """Give every calibrated group an interval per pace (``interval_by_pace``) and re-judge its held-out
    intervals and coverage on the normalised residuals (module docstring). Returns the pooled spreads (None:
    too few residuals of a pace over all groups, and the groups keep their one interval)."""
    scales = pace_scales(groups)
    if scales is None:
        return None
    done = [g for g in groups if g.get("status") == "calibrated" and g.get("heldout")]
    norm = {}
    for g in done:
        r, paces, shapes = _residuals(g)
        own = _scales_of(r, paces, scales)
        norm[id(g)] = _Normalised(r, paces, shapes, own, r / np.array([own[p] for p in paces]), shape_weights(shapes))
    for g in done:
        r, paces, shapes, own, z, w = norm[id(g)]
        family = (g.get("key") or {}).get("family")
        borrowed = [norm[id(o)] for o in done if o is not g and (o.get("key") or {}).get("family") == family]
        if len(np.unique(shapes)) >= MIN_OWN_RANK_SHAPES or not borrowed:
            z_x, w_x = np.zeros(0), np.zeros(0)
        else:  # the family's other groups' normalised residuals, each shape weighing 1
            z_x, w_x = np.concatenate([b.z for b in borrowed]), np.concatenate([b.w for b in borrowed])
        iv = conformal(np.concatenate([z, z_x]), level, np.concatenate([w, w_x]), method=METHOD)
        covered = np.zeros(len(r), dtype=bool)
        for i, h in enumerate(g["heldout"]):
            others = shapes != shapes[i]
            if others.any():  # spreads and ranks from the other shapes only: a case never widens its own interval
                s_o = _scales_of(r[others], paces[others], scales)
                z_o = r[others] / np.array([s_o[p] for p in paces[others]])
                ivi = conformal(np.concatenate([z_o, z_x]), level, np.concatenate([w[others], w_x]))
                s_i = s_o[paces[i]]
                h["heldout_lo_s"] = float(h["heldout_pred_s"] * math.exp(ivi.log_lo * s_i))
                h["heldout_hi_s"] = float(h["heldout_pred_s"] * math.exp(ivi.log_hi * s_i))
                covered[i] = ivi.log_lo <= r[i] / s_i <= ivi.log_hi
            h["covered"] = bool(covered[i])
        g["cv"]["coverage"] = float(covered.mean())
        g["cv"]["n_covered"] = int(covered.sum())
        g["pace_spreads"] = own
        g["interval_by_pace"] = {
            p: Interval(level, iv.log_lo * own[p], iv.log_hi * own[p], iv.n, iv.exact_level, METHOD).to_dict()
            for p in PACES}
    return scales
