"""Leave-shape-out cross-validation, model choice and prediction intervals.

Leave-shape-out: a fold holds out every case of one dims tuple (repeat measurements of a shape,
from several result files, leave together), fits on the rest and predicts the held-out shape. The
error of a prediction is the absolute percentage error |t_pred / t_measured - 1| * 100; a model form
is scored by the mean absolute log error of its held-out predictions, mean |log(t_pred / t_measured)|
(every held-out shape's miss counts, the large ones too, where a median would ignore a form that
misses a tenth of the shapes by 2x; ties: lower p90, then fewer parameters). The report states
median and p90 of the percentage errors.

Intervals (split-conformal on the cross-validation residuals): with r_i = log(t_i / t_pred_i) the
held-out log residuals of the chosen form, the level-(1 - alpha) interval of a new prediction t_hat
is [t_hat * exp(r_(lo)), t_hat * exp(r_(hi))], r_(k) the k-th smallest residual,
lo = floor((n + 1) alpha / 2), hi = ceil((n + 1)(1 - alpha / 2)). Where n is too small for these
ranks (n + 1 < 2 / alpha) the extreme residuals are used and the interval says so: its level is then
not guaranteed. The interval always contains the point estimate (its log bounds straddle 0).

The ranks count shapes, not cases: each case weighs 1 / (cases of its shape), so repeat timings of
one shape (whose residuals move together) do not make the interval narrower than its level.

Coverage is reported honestly: each held-out shape's cases are checked against an interval built
only from the residuals of the *other* shapes (so a case never widens its own interval).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .models import Features, Model


def ape(pred: np.ndarray, y: np.ndarray) -> np.ndarray:
    return 100.0 * np.abs(pred / y - 1.0)


def leave_shape_out(model: Model, X: Features, y: np.ndarray, shape_ids: np.ndarray,
                    start: Model | None = None) -> np.ndarray:
    """Held-out prediction for every case, each from a fit without that case's shape. ``start``
    (the fit on all cases) is only the optimiser's first starting point; the form's own start is
    always tried too, so a fold's optimum is found from its own data. Each fold's fit is guarded
    (``Model.guarded``) by the measured / achievable ratios of its own training shapes only."""
    pred = np.empty_like(y)  # [n]
    for s in np.unique(shape_ids):
        test = shape_ids == s
        Xf, yf = X.subset(~test), y[~test]
        fitted = model.fit(Xf, yf, start=start).guarded(Xf, yf)
        pred[test] = fitted.predict(X.subset(test))
    return pred


@dataclass(frozen=True)
class Interval:
    level: float
    log_lo: float
    log_hi: float
    n: int
    exact_level: bool       # False: too few residuals, the extreme ones were used
    method: str = "split-conformal ranks of leave-shape-out log residuals (each shape weighs 1)"

    def apply(self, t: np.ndarray | float, widen: float = 1.0):
        return t * np.exp(self.log_lo * widen), t * np.exp(self.log_hi * widen)

    def to_dict(self) -> dict:
        return {"level": self.level, "log_lo": self.log_lo, "log_hi": self.log_hi, "n_residuals": self.n,
                "factor_lo": math.exp(self.log_lo), "factor_hi": math.exp(self.log_hi),
                "level_guaranteed": self.exact_level, "method": self.method}


def shape_weights(shape_ids: np.ndarray) -> np.ndarray:
    """1 / (cases of the shape) per case: repeat measurements of one shape count once together."""
    _, inverse, counts = np.unique(shape_ids, return_inverse=True, return_counts=True)
    return 1.0 / counts[inverse]


def conformal(residuals: np.ndarray, level: float, weights: np.ndarray | None = None,
              method: str | None = None) -> Interval:
    """Split-conformal interval of log residuals. ``weights`` (e.g. ``shape_weights``): the ranks
    count weight instead of cases, so that n is the number of independent shapes, not of repeat
    timings of one shape (which would make the interval narrower than its level)."""
    r = np.asarray(residuals, dtype=float)
    w = np.ones_like(r) if weights is None else np.asarray(weights, dtype=float)
    if len(r) == 0:
        raise ValueError("no residuals to build an interval from")
    order = np.argsort(r)
    r, w = r[order], w[order]
    cum = np.cumsum(w)
    n = float(cum[-1])
    alpha = 1.0 - level
    k_lo = math.floor((n + 1) * alpha / 2 + 1e-9)
    k_hi = math.ceil((n + 1) * (1 - alpha / 2) - 1e-9)
    exact = k_lo >= 1 and k_hi <= n + 1e-9
    lo = r[min(int(np.searchsorted(cum, max(k_lo, 1) - 1e-9)), len(r) - 1)]
    hi = r[min(int(np.searchsorted(cum, min(k_hi, n) - 1e-9)), len(r) - 1)]
    return Interval(level, float(min(lo, 0.0)), float(max(hi, 0.0)), int(round(n)), exact,
                    **({"method": method} if method else {}))


def loso_coverage(residuals: np.ndarray, shape_ids: np.ndarray, level: float) -> np.ndarray:
    """Per case: is its residual inside the interval built from the other shapes' residuals?"""
    covered = np.zeros(len(residuals), dtype=bool)
    w = shape_weights(shape_ids)
    for s in np.unique(shape_ids):
        test = shape_ids == s
        if (~test).sum() == 0:
            continue
        iv = conformal(residuals[~test], level, w[~test])
        covered[test] = (residuals[test] >= iv.log_lo) & (residuals[test] <= iv.log_hi)
    return covered


@dataclass
class Candidate:
    name: str
    n_params: int
    heldout_pred: np.ndarray | None
    skipped: str | None = None
    fitted: Model | None = None      # the form fitted on every case

    def errors(self, y: np.ndarray) -> np.ndarray:
        return ape(self.heldout_pred, y)

    def score(self, y: np.ndarray) -> tuple[float, float, int]:
        """(mean |log error|, p90 |% error|, parameters): lower is better, in that order."""
        e = self.errors(y)
        return float(np.mean(np.abs(np.log(self.heldout_pred / y)))), float(np.percentile(e, 90)), self.n_params


def evaluate(models: list[Model], X: Features, y: np.ndarray, shape_ids: np.ndarray,
             active: tuple[str, ...]) -> list[Candidate]:
    """Leave-shape-out predictions of every form that has enough shapes for its parameters
    (a training fold must hold at least one shape more than the form has parameters)."""
    n_shapes = len(np.unique(shape_ids))
    out = []
    for m in models:
        k = m.n_params_of(X)
        if n_shapes - 1 < k + 1:
            out.append(Candidate(m.name, k, None,
                                 f"{k} parameters need at least {k + 2} distinct shapes, the group has {n_shapes}"))
            continue
        full = m.fit(X, y).guarded(X, y)
        out.append(Candidate(m.name, k, leave_shape_out(m, X, y, shape_ids, start=full), fitted=full))
    return out


def choose(candidates: list[Candidate], y: np.ndarray) -> Candidate | None:
    ok = [c for c in candidates if c.skipped is None]
    if not ok:
        return None
    return min(ok, key=lambda c: c.score(y))
