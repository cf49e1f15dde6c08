"""Pooled (hierarchical) estimates for groups with too few shapes to be calibrated on their own.

A group with fewer than ``min_shapes`` distinct shapes (or whose forms all need more) borrows
strength from the groups around it: a form on the achievable model (models.py: physical parameters
that mean the same for every op) is fitted on every case of the first *level* and form that the
data support, in this order:

1. ``family+backend``, ``achievable_eff``: the group's family on the same backend (device, family,
   backend: the same code in its other modes and dtypes), host, fixed and per-resource efficiencies;
2. ``family+backend``, ``achievable_scale``: the same cases, the achievable estimate times one factor
   (the same code falls short of the achievable model by a similar factor in all its modes; e.g. a
   Mamba-2 block measured in decode, forward and training);
3. ``family``, ``achievable_eff`` then ``achievable_scale``: the family on any backend (device, family);
4. ``all``, ``achievable_eff``: every case on the device.

Borrowing from the same backend with fewer parameters comes before borrowing from other backends:
other code of one family (a gated MLP block and a Mamba-2 block) falls short of the achievable model
for different reasons. A level and form are used when the level holds at least two groups and at
least max(min_shapes, k + 2) distinct shapes (k = the form's parameters on that level), the rule
cross-validation applies to one group.

Shrinkage towards the pooled fit: the group's own shapes give an offset of its log time,
delta = sum_j m_j / (n + kappa), m_j the mean log residual of the pooled fit on the group's shape j,
n its shapes, kappa = sigma_w^2 / tau^2 the ratio of the within-group variance of shape residuals
to the between-group variance of group offsets on that level (method of moments; an empirical-Bayes
normal-normal estimate). A group with one shape moves 1 / (1 + kappa) of the way to its own data.
The estimate is the pooled model times exp(delta) (``group_scale`` of the form).

Honest errors: each of the group's shapes is held out in turn: the pooled level is refitted without
that shape and delta is recomputed from the group's other shapes (leave-shape-out within the pooled
level). Intervals: split-conformal ranks (each shape weighs 1) of the level's *leave-group-out*
residuals: every other group of the level predicted by a pooled fit without any of its cases, which
is how far the pooled fit misses a group it has not seen, the situation of a small group. Coverage is
checked on the group's held-out cases against that interval (built without the group).
Every such group is labelled ``status: "pooled"`` with the level it borrowed from (``pooled_from``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .achievable_forms import AchievableEff, AchievableScale
from .crossval import ape, conformal, shape_weights
from .join import JoinedCase
from .models import Features, Model

LEVELS = ("family+backend", "family", "all")
# (level, form) in the order they are tried (module docstring)
STEPS = (("family+backend", AchievableEff), ("family+backend", AchievableScale), ("family", AchievableEff),
         ("family", AchievableScale), ("all", AchievableEff))
KAPPA_BOUNDS = (0.0, 100.0)
TAU2_FLOOR = 1e-4          # between-group variance floor (1% in time): kappa stays finite


def level_key(c: JoinedCase, level: str) -> tuple:
    if level == "family+backend":
        return (c.device, c.family, c.backend)
    if level == "family":
        return (c.device, c.family)
    return (c.device,)


def level_label(level: str, key: tuple) -> str:
    if level == "family+backend":
        return f"{key[0]}: family {key[1]} [{key[2]}]"
    if level == "family":
        return f"{key[0]}: family {key[1]} (every backend)"
    return f"{key[0]}: every case"


def dim_ranges(cases: list[JoinedCase]) -> dict[str, list[int]]:
    """Per dimension name: [min, max] over the cases (the fitted data's range, for ``extrapolated``)."""
    out: dict[str, list[int]] = {}
    for c in cases:
        for k, v in c.dims.items():
            lo, hi = out.get(k, [v, v])
            out[k] = [min(lo, v), max(hi, v)]
    return dict(sorted(out.items()))


@dataclass
class Level:
    level: str
    key: tuple
    cases: list[JoinedCase]
    groups: np.ndarray          # [n] group label per case
    shapes: np.ndarray          # [n] shape id (group, dims) per case
    X: Features
    y: np.ndarray
    model: Model                # the form on every case of the level
    logo_resid: np.ndarray      # [n] log(y / pred) of a fit without the case's group
    kappa: float
    form: type = AchievableEff

    @property
    def label(self) -> str:
        return level_label(self.level, self.key)

    def summary(self) -> dict:
        return {"level": self.level, "label": self.label, "form": self.form.name, "n_points": len(self.cases),
                "n_shapes": int(len(np.unique(self.shapes))), "n_groups": int(len(np.unique(self.groups)))}


def _shape_means(resid: np.ndarray, shapes: np.ndarray) -> np.ndarray:
    return np.array([resid[shapes == s].mean() for s in np.unique(shapes)])


def _kappa(resid: np.ndarray, groups: np.ndarray, shapes: np.ndarray) -> float:
    """sigma_w^2 / tau^2 from the shape-mean residuals of each group (method of moments)."""
    means, within, dof, ns = [], 0.0, 0, []
    for g in np.unique(groups):
        m = _shape_means(resid[groups == g], shapes[groups == g])
        means.append(m.mean())
        ns.append(len(m))
        within += float(((m - m.mean()) ** 2).sum())
        dof += len(m) - 1
    sigma_w2 = within / dof if dof else 0.0
    tau2 = float(np.var(means, ddof=1)) - float(np.mean([sigma_w2 / n for n in ns])) if len(means) > 1 else 0.0
    return float(np.clip(sigma_w2 / max(tau2, TAU2_FLOOR), *KAPPA_BOUNDS))


def _offset(resid: np.ndarray, shapes: np.ndarray, kappa: float) -> float:
    if len(resid) == 0:
        return 0.0
    m = _shape_means(resid, shapes)
    return float(m.sum() / (len(m) + kappa))


def build_level(level: str, key: tuple, cases: list[JoinedCase], group_of, form: type = AchievableEff) -> Level:
    X = Features.from_cases(cases)
    y = np.array([c.measured_s for c in cases])  # [n]
    groups = np.array([group_of(c) for c in cases])
    index: dict = {}
    shapes = np.array([index.setdefault((g, c.shape), len(index)) for g, c in zip(groups, cases)])
    full = form().fit(X, y).guarded(X, y)
    logo = np.empty_like(y)
    for g in np.unique(groups):
        test = groups == g
        fitted = form().fit(X.subset(~test), y[~test], start=full).guarded(X.subset(~test), y[~test])
        logo[test] = np.log(y[test] / fitted.predict(X.subset(test)))
    kappa = _kappa(np.log(y / full.predict(X)), groups, shapes)
    return Level(level, key, cases, groups, shapes, X, y, full, logo, kappa, form)


def choose_level(cases_g: list[JoinedCase], all_cases: list[JoinedCase], group_of, min_shapes: int,
                 cache: dict) -> tuple[Level | None, list[str]]:
    """The first level with enough data for the group, and why each finer one was passed over."""
    passed = []
    for level, form in STEPS:
        key = level_key(cases_g[0], level)
        members = [c for c in all_cases if level_key(c, level) == key]
        n_groups = len({group_of(c) for c in members})
        n_shapes = len({(group_of(c), c.shape) for c in members})
        need = max(min_shapes, form().n_params_of(Features.from_cases(members)) + 2)
        if n_groups >= 2 and n_shapes >= need:
            if (level, key, form.name) not in cache:
                cache[(level, key, form.name)] = build_level(level, key, members, group_of, form)
            return cache[(level, key, form.name)], passed
        passed.append(f"{level_label(level, key)} ({form.name}): {n_groups} group(s), {n_shapes} shape(s), "
                      f"needs 2 groups and {need} shapes")
    return None, passed


def _coarser_interval(lv: Level, cases_g: list[JoinedCase], all_cases: list[JoinedCase], group_of, level: float,
                      cache: dict):
    """Where the chosen level holds too few other shapes for an interval at its level (the
    extreme residuals were used), the interval from the next coarser level's leave-group-out
    residuals (the family for a family+backend level, every case for a family level), the group
    left out: how far a pooled fit misses a group it has not seen, measured over more groups. It is
    wider than the finer level's (coarser fits miss more), so the stated level is kept, not
    overstated. None where the coarser level has no more residuals either."""
    coarser = {"family+backend": ("family", lv.form), "family": ("all", AchievableEff)}.get(lv.level)
    if coarser is None:
        return None
    name, form = coarser
    key = level_key(cases_g[0], name)
    ck = (name, key, form.name)
    if ck not in cache:
        members = [c for c in all_cases if level_key(c, name) == key]
        if len({group_of(c) for c in members}) < 2:
            return None
        cache[ck] = build_level(name, key, members, group_of, form)
    cl = cache[ck]
    others = cl.groups != group_of(cases_g[0])
    if not others.any():
        return None
    method = (f"split-conformal ranks of leave-group-out log residuals of the coarser pooled level {cl.label} "
              f"({form.name}; each shape weighs 1; the group itself left out): {lv.label} holds too few "
              "other shapes for an interval at this level")
    iv = conformal(cl.logo_resid[others], level, shape_weights(cl.shapes[others]), method=method)
    return iv if iv.exact_level else None


def pool_group(rec: dict, cases_g: list[JoinedCase], all_cases: list[JoinedCase], group_of, level: float,
               min_shapes: int, cache: dict) -> dict:
    """Turn a not-calibrated group record into a pooled one (in place), or say why it cannot be."""
    lv, passed = choose_level(cases_g, all_cases, group_of, min_shapes, cache)
    if lv is None:
        rec["reason"] = (rec["reason"] or "") + "; no pooled level has enough data: " + "; ".join(passed)
        return rec
    own = lv.groups == group_of(cases_g[0])   # the group's cases inside the level, in level order
    idx = np.flatnonzero(own)
    y, shapes = lv.y[idx], lv.shapes[idx]
    # held out: the level refitted without one of the group's shapes; the offset from its other shapes
    heldout = np.empty_like(y)
    for s in np.unique(shapes):
        test_level = own & (lv.shapes == s)
        Xf, yf = lv.X.subset(~test_level), lv.y[~test_level]
        fitted = lv.form().fit(Xf, yf, start=lv.model).guarded(Xf, yf)
        rest = own & ~test_level
        resid_rest = np.log(lv.y[rest] / fitted.predict(lv.X.subset(rest)))
        delta = _offset(resid_rest, lv.shapes[rest], lv.kappa)
        heldout[shapes == s] = fitted.predict(lv.X.subset(test_level)) * np.exp(delta)
    delta = _offset(np.log(y / lv.model.predict(lv.X.subset(idx))), shapes, lv.kappa)
    model = lv.form({**lv.model.params, "group_scale": float(np.exp(delta))}, lv.model.active)
    others = ~own
    method = (f"split-conformal ranks of leave-group-out log residuals of the pooled level {lv.label} "
              "(each shape weighs 1; the group itself left out)")
    interval = conformal(lv.logo_resid[others], level, shape_weights(lv.shapes[others]), method=method)
    if not interval.exact_level:
        interval = _coarser_interval(lv, cases_g, all_cases, group_of, level, cache) or interval
    resid = np.log(y / heldout)
    covered = (resid >= interval.log_lo) & (resid <= interval.log_hi)
    errors = ape(heldout, y)
    cases_lv = [lv.cases[i] for i in idx]
    rec.update({
        "status": "pooled",
        "reason": (f"{rec['reason']}; estimated from the pooled fit of {lv.label} "
                   f"({lv.summary()['n_groups']} groups, {lv.summary()['n_shapes']} shapes), shrunk towards "
                   "the group's own shapes"),
        "pooled_from": lv.summary(),
        "shrinkage": {"log_offset": delta, "kappa": lv.kappa, "n_shapes": int(len(np.unique(shapes))),
                      "rule": "delta = sum of the group's shape-mean log residuals / (shapes + kappa)"},
        "model": model.to_dict(),
        "cv": {"median_ape_pct": float(np.median(errors)), "p90_ape_pct": float(np.percentile(errors, 90)),
               "n_heldout": len(y), "coverage": float(covered.mean()), "n_covered": int(covered.sum()),
               "level": level, "scheme": f"leave-shape-out within the pooled level {lv.label}"},
        "interval": interval.to_dict(),
        "bound_range_s": [float(lv.X.bound.min()), float(lv.X.bound.max())],
        "dim_ranges": dim_ranges(lv.cases),
        "heldout": [],
    })
    lo, hi = interval.apply(heldout)
    for i, c in enumerate(cases_lv):
        rec["heldout"].append({
            "key": c.key, "file_sha256": c.source_sha256, "dims": c.dims, "op": c.op,
            "measured_s": c.measured_s, "heldout_pred_s": float(heldout[i]),
            "heldout_lo_s": float(lo[i]), "heldout_hi_s": float(hi[i]),
            "ape_pct": float(errors[i]), "covered": bool(covered[i]),
        })
    return rec
