"""Fit calibrated models per group of joined cases.

A group is (device, family, op, implementation, backend, dtype, mode, kernel path): one kernel on one
device at one precision and mode; its cases differ only in their dims. The kernel path
(``analytic/execution.kernel_path``, ``paths.py``) is empty except where a backend runs another kernel
for some shapes (SDPA's cuDNN backend with a materialized lower-right causal mask; FlashAttention's
split-KV kernel on a small grid): those shapes are a group of their own, since one set of
efficiencies cannot describe two kernels. ``group_by="family"`` pools the ops of
one family (op written as "*"), as the issue's coarser grouping; the default keeps ops apart
because different ops of a family run different kernels. The backend is part of the key: two
backends executing the same analytic implementation are different code with different speed.

Per group: candidate model forms (models.py) are scored by leave-shape-out cross-validation,
the best is refitted on every case, and its held-out residuals give the prediction interval
(crossval.py); pace.py then scales each group's interval to the pace (host-bound or GPU-bound) of the
case it is for. A group with fewer than ``min_shapes`` distinct shapes is reported as not calibrated,
with its name and count; it is never dropped. Such a group then borrows strength from the groups
around it (pool.py): the ``achievable_eff`` form (or, with fewer shapes, ``achievable_scale``) fitted on
its family and backend (then family, then every case), shrunk towards its own shapes, labelled ``status: "pooled"`` with the level it borrowed
from and its held-out error within that level. Each record carries ``dim_ranges``, the range of
every dimension in the data it was fitted on (an estimate outside them is ``extrapolated``).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np

from ..errors import UserError
from .achievable_forms import MODELS
from .crossval import ape, choose, conformal, evaluate, loso_coverage, shape_weights
from .defaults import DEFAULT_LEVEL, DEFAULT_MIN_SHAPES
from .join import Joined, JoinedCase
from .models import Features, active_resources
from .pace import normalise_by_pace, pace_of
from .paths import case_path
from .pool import dim_ranges, pool_group
from .progress import Progress


@dataclass(frozen=True)
class GroupKey:
    device: str
    family: str
    op: str
    impl: str
    backend: str
    dtype: str
    mode: str
    path: str = ""     # the kernel path (analytic/execution.kernel_path); "" for the backend's usual kernel

    @property
    def label(self) -> str:
        backend = f" [{self.backend}]" if self.backend else ""
        path = f" ({self.path})" if self.path else ""
        return f"{self.device}: {self.op}/{self.impl}{backend} {self.dtype} {self.mode}{path}"

    def to_dict(self) -> dict:
        return asdict(self)


def group_key(c: JoinedCase, group_by: str = "op") -> GroupKey:
    if group_by not in ("op", "family"):
        raise UserError(f"group_by must be 'op' or 'family', got {group_by!r}")
    op = c.op if group_by == "op" else "*"
    return GroupKey(c.device, c.family, op, c.impl, c.backend, c.dtype, c.mode,
                    case_path(c.op, c.impl, c.dims, c.mode, c.backend, (c.bounds.achievable or {}).get("spec")))


def group_cases(cases: list[JoinedCase], group_by: str = "op") -> dict[GroupKey, list[JoinedCase]]:
    groups: dict[GroupKey, list[JoinedCase]] = {}
    for c in cases:
        groups.setdefault(group_key(c, group_by), []).append(c)
    return dict(sorted(groups.items(), key=lambda kv: kv[0].label))


def _shape_ids(cases: list[JoinedCase], group_by: str) -> np.ndarray:
    # pooled families: an op's shape is its own (rmsnorm and layernorm at equal dims differ)
    keys = [(c.op if group_by == "family" else "", c.shape) for c in cases]
    index = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    return np.array([index[k] for k in keys])


def fit_group(key: GroupKey, cases: list[JoinedCase], level: float = DEFAULT_LEVEL,
              min_shapes: int = DEFAULT_MIN_SHAPES, group_by: str = "op") -> dict:
    """The profile record of one group (JSON-ready)."""
    X = Features.from_cases(cases)
    y = np.array([c.measured_s for c in cases])  # [n]
    shapes = _shape_ids(cases, group_by)
    n_shapes = int(len(np.unique(shapes)))
    bounds = X.bound
    rec = {
        "key": key.to_dict(), "label": key.label, "status": "not_calibrated", "reason": None,
        "n_points": len(cases), "n_shapes": n_shapes,
        "device_mismatch": any(c.device_mismatch for c in cases),
        "active_resources": list(active_resources(X)),
        "bound_range_s": [float(bounds.min()), float(bounds.max())], "dim_ranges": dim_ranges(cases),
        "model": None, "candidates": [], "cv": None, "interval": None, "heldout": [],
    }
    if n_shapes < min_shapes:
        rec["reason"] = (f"group {key.label} has {n_shapes} distinct shape(s) ({len(cases)} point(s)); "
                         f"at least {min_shapes} are needed for leave-shape-out cross-validation")
        return rec
    active = active_resources(X)
    candidates = evaluate([m() for m in MODELS.values()], X, y, shapes, active)
    for c in candidates:
        row = {"name": c.name, "n_params": c.n_params, "skipped": c.skipped}
        if c.skipped is None:
            e = c.errors(y)
            row.update({"cv_median_ape_pct": float(np.median(e)), "cv_p90_ape_pct": float(np.percentile(e, 90)),
                        "cv_mean_abs_log_error": c.score(y)[0]})
        rec["candidates"].append(row)
    best = choose(candidates, y)
    if best is None:
        rec["reason"] = (f"group {key.label}: no model form has enough shapes ({n_shapes}) for its parameters: "
                         + "; ".join(f"{c.name}: {c.skipped}" for c in candidates))
        return rec
    model = best.fitted
    resid = np.log(y / best.heldout_pred)  # [n]
    weights = shape_weights(shapes)
    interval = conformal(resid, level, weights)
    covered = loso_coverage(resid, shapes, level)
    errors = ape(best.heldout_pred, y)
    rec.update({
        "status": "calibrated",
        "model": model.to_dict(),
        "cv": {"median_ape_pct": float(np.median(errors)), "p90_ape_pct": float(np.percentile(errors, 90)),
               "n_heldout": len(cases), "coverage": float(covered.mean()), "n_covered": int(covered.sum()),
               "level": level, "scheme": "leave-shape-out"},
        "interval": interval.to_dict(),
    })
    for i, c in enumerate(cases):
        others = shapes != shapes[i]
        iv = conformal(resid[others], level, weights[others])
        lo, hi = iv.apply(best.heldout_pred[i])
        rec["heldout"].append({
            "key": c.key, "file_sha256": c.source_sha256, "dims": c.dims, "op": c.op,
            "measured_s": c.measured_s, "heldout_pred_s": float(best.heldout_pred[i]),
            "heldout_lo_s": float(lo), "heldout_hi_s": float(hi),
            "ape_pct": float(errors[i]), "covered": bool(covered[i]), "pace": pace_of(c),
        })
    return rec


def fit_groups(joined: Joined, level: float = DEFAULT_LEVEL, min_shapes: int = DEFAULT_MIN_SHAPES,
               group_by: str = "op", progress: Progress | None = None, pool: bool = True) -> list[dict]:
    """Every group's record, in label order; ``progress`` (calibrate/progress.py) hears of each.
    ``pool``: groups that cannot be calibrated on their own get a pooled estimate (pool.py)."""
    grouped = group_cases(joined.cases, group_by)
    groups = []
    levels: dict = {}   # pooled levels, fitted once and shared by the small groups they serve
    for i, (key, cases) in enumerate(grouped.items(), start=1):
        t0 = time.perf_counter()
        rec = fit_group(key, cases, level, min_shapes, group_by)
        if rec["status"] != "calibrated" and pool:
            pool_group(rec, cases, joined.cases, lambda c: group_key(c, group_by).label, level, min_shapes, levels)
        groups.append(rec)
        if progress is not None:
            progress(i, len(grouped), key.label, groups[-1], time.perf_counter() - t0)
    normalise_by_pace(groups, level)
    return groups


def fit_all(joined: Joined, level: float = DEFAULT_LEVEL, min_shapes: int = DEFAULT_MIN_SHAPES,
            group_by: str = "op", progress: Progress | None = None) -> list[dict]:
    if not 0.0 < level < 1.0:
        raise UserError(f"interval level must be between 0 and 1 (e.g. 0.8), got {level}")
    if min_shapes < 3:
        raise UserError(f"min_shapes must be at least 3 (one held out, two to fit), got {min_shapes}")
    groups = fit_groups(joined, level, min_shapes, group_by, progress)
    if not any(g["status"] == "calibrated" for g in groups):
        reasons = "\n  ".join(g["reason"] for g in groups)
        raise UserError(f"no group could be calibrated (too few points to fit):\n  {reasons}")
    return groups
