"""Model forms relating achieved time to the per-resource roofline bound times.

Inputs per case (``Features``): T_r, the analytic bound time of each resource r (tensor, vector,
special-function, DRAM; see ``join.py``), in seconds, and n, the kernel launches per call (at least
1). T_max = max_r T_r is the roofline bound. Every form has a fixed term t0 * n: a time per launch
that covers launch latency, tail effects and synchronisation (for one op, n is usually constant and
t0 * n is a fixed latency; for per-step loop implementations n grows with the sequence).

Forms (t is the predicted time per call):
- ``roofline_const``:  t = t0 n + T_max / e                      (one efficiency for the bound)
- ``max_eff``:         t = t0 n + max_r T_r / e_r                (per-resource efficiencies; overlap)
- ``sum_nnls``:        t = t0 n + sum_r c_r T_r, c_r >= 0        (no overlap; c_r = 1 / e_r)
- ``size_eff``:        t = t0 n + T_max / (e_max s(W)),  s(W) = W^a / (W^a + W_half^a), W = T_max
                       (efficiency grows with the amount of work and saturates at e_max; W is the
                       work measured in roofline seconds on the calibrated spec; with a = 1 the
                       size term W_half / e_max is a constant that t0 also describes, so a is what
                       lets this form differ from ``roofline_const``)
- ``achievable_eff``:  t = g max(h s_k T_host, f T_fixed + max_r A_r / e_r)
                       (on the achievable model's terms instead of the roofline's: A_r the
                       attained-rate engine and memory times incl. L2 and DRAM latency, T_host the
                       host issue time, T_fixed the per-kernel GPU fixed time; h, f, e_r = 1 is the
                       achievable estimate itself, and a weak prior pulls their logs to 0; s_k the
                       host speed of measurement session k (join.session_of: one machine), fitted
                       where the data hold two or more sessions, shrunk towards 1, and 1 for a
                       machine the fit has not seen (calibrate/sessions.py says why); g = 1 except
                       for a small group estimated from a pooled fit, pool.py)
- ``achievable_scale``: t = c max(T_host, T_fixed + max_r A_r)   (the achievable estimate times one
                       factor: the one-parameter form a pooled level of few shapes can support)
- ``achievable_host``: t = max(h T_host, T_fixed + max_r A_r)   (the achievable estimate with its host
                       time times one factor: the device side as the model has it, the host at the
                       measured machine's speed)
- ``overlap``:         t = ((t0 n)^p + (T_max / e)^p)^(1/p),  1 <= p <= 16
                       (the fixed time overlaps the work: p = 1 adds them, large p takes the larger.
                       Eager PyTorch code issues kernels from the CPU while earlier ones run, so a
                       small problem takes the CPU's issue time and a large one the GPU's work time)

Efficiencies are fractions of the spec's ceiling (1 = the ceiling is reached). They may exceed 1
when the ceiling is an attained value that a kernel beats or when cache hits make device-memory
traffic smaller than counted; they are bounded to [1e-4, 4].

Every fit is guarded (``Model.guarded``): its predictions are kept within GUARD_FACTOR of the range
of measured / achievable ratios it was fitted on, so no form predicts orders of magnitude off the
achievable estimate outside its data.

Fitting: ``roofline_const``, ``max_eff``, ``size_eff`` and ``overlap`` minimise the squared error of
log t (so a relative error counts the same at every size) with ``scipy.optimize.least_squares`` on
log-parameters (positivity) and a soft-L1 loss (a few outlying timings do not dominate), from a few
starting points (cross-validation folds start from the fit on all cases, then from the form's own
first start, and keep the better).
``sum_nnls`` is linear: weighted non-negative least squares (``scipy.optimize.nnls``) on relative
errors. ``max_eff`` adds a weak prior pulling each log e_r towards 0 (weight 0.05): a resource that
never binds in the data is left at its ceiling instead of drifting, which keeps the fit well posed.
A resource is *active* (gets its own parameter) when its bound reaches 1% of T_max in some case;
an inactive one is taken at its ceiling by ``max_eff`` and adds nothing in ``sum_nnls``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy.optimize import least_squares, nnls

from .join import RESOURCES, Bounds, JoinedCase

EFF_BOUNDS = (1e-4, 4.0)
T0_BOUNDS = (1e-10, 10.0)          # seconds per launch
ACTIVE_FRACTION = 0.01
PRIOR_WEIGHT = 0.05
LOSS_SCALE = 0.1                   # soft-L1 scale on log-time residuals (~10%)
TOL = 1e-7                         # optimiser tolerances: far below timing noise
P_MAX = 16.0                       # overlap exponent: 1 = fixed time adds, 16 = nearly max()
# Resources of the achievable model (analytic/achievable.py GPU_RESOURCES), and its sequential chain
# (analytic/chain.py): one more term of the device-side max, with its own attained fraction, so that a
# chain that binds is not read as per-kernel fixed time.
ACH_RESOURCES = ("tensor", "vector", "special_function", "dram", "l2", "chain")
# Host issue time per kernel launch taken where the spec models neither launch.host.* (the
# achievable estimate's host term is then 0) nor launch.kernel: the order of an eager PyTorch op's
# dispatch on a current server CPU. ``achievable_eff`` scales it by h, so it is a starting point,
# not a result.
HOST_NOMINAL_S = 5e-6
SCALE_BOUNDS = (1e-3, 1e3)         # host and fixed-cost scales of achievable_eff
# The guard (Model.guarded): a fit's prediction stays within this factor of the range of measured /
# achievable ratios it was fitted on. 2: a shape may fall short of the achievable estimate twice as
# far as (or come twice as close as) any fitted shape, never orders of magnitude.
GUARD_FACTOR = 2.0
GUARD_LO, GUARD_HI = "guard.ratio_lo", "guard.ratio_hi"


def achievable_terms(bounds: list[Bounds], T: np.ndarray, launches: np.ndarray):
    """Per case: achievable engine / memory times [n, RA], host time [n] and per-kernel GPU fixed time
    [n] from ``Bounds.achievable``. The fixed time is gpu_s - max_r times_s (n x launch.graph_node;
    the DRAM latency stays inside the dram time, as in the achievable model), so that with every
    parameter at 1, achievable_eff reproduces the achievable estimate. A host time of 0 (the spec
    does not know launch.host.*) becomes the launch bound (launches x launch.kernel) where the spec
    knows it, else HOST_NOMINAL_S per launch; a case without an achievable
    estimate takes the roofline times (no l2 term) and no GPU fixed time."""
    n = len(bounds)
    A = np.zeros((n, len(ACH_RESOURCES)))  # [n, RA]
    host = HOST_NOMINAL_S * launches       # [n]
    fixed = np.zeros(n)                    # [n]
    for i, b in enumerate(bounds):
        a = b.achievable
        if not a:
            for j, r in enumerate(ACH_RESOURCES):
                A[i, j] = T[i, RESOURCES.index(r)] if r in RESOURCES else 0.0
            continue
        times = {**(a.get("times_s") or {}), "chain": a.get("chain_s")}
        A[i] = [float(times.get(r) or 0.0) for r in ACH_RESOURCES]
        fixed[i] = max(float(a.get("gpu_s") or 0.0) - A[i].max(), 0.0)
        if float(a.get("host_s") or 0.0) > 0:
            host[i] = float(a["host_s"])
        elif b.times.get("launch"):  # the spec's eager per-launch overhead (launch.kernel) x launches
            host[i] = float(b.times["launch"])
    return A, host, fixed


@dataclass(frozen=True)
class Features:
    T: np.ndarray          # [n, R] bound time per resource in RESOURCES order, s (0 = no work)
    launches: np.ndarray   # [n] launches per call, >= 1
    # achievable-model terms (analytic/achievable.py), None where the bounds carry no estimate:
    A: np.ndarray | None = None          # [n, len(ACH_RESOURCES)] engine / memory times, s
    host: np.ndarray | None = None       # [n] host issue time, s (nominal per launch where not modelled)
    fixed: np.ndarray | None = None      # [n] per-kernel GPU fixed time, s
    session: np.ndarray | None = None    # [n] measurement session (join.session_of); None: a new machine

    @classmethod
    def from_bounds(cls, bounds: list[Bounds], session: list[str] | None = None) -> Features:
        T = np.array([[b.times.get(r, 0.0) for r in RESOURCES] for b in bounds], dtype=float)  # [n, R]
        n = np.array([max(b.launches, 1.0) for b in bounds], dtype=float)  # [n]
        A, host, fixed = achievable_terms(bounds, T, n)
        return cls(T, n, A, host, fixed, None if session is None else np.array(session, dtype=object))

    @classmethod
    def from_cases(cls, cases: list[JoinedCase]) -> "Features":
        return cls.from_bounds([c.bounds for c in cases], [c.session or c.source_sha256 for c in cases])

    def __len__(self) -> int:
        return self.T.shape[0]

    def subset(self, idx) -> "Features":
        def cut(a):
            return None if a is None else a[idx]
        return Features(self.T[idx], self.launches[idx], cut(self.A), cut(self.host), cut(self.fixed),
                        cut(self.session))

    def achievable(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(A, host, fixed); from the roofline times where the bounds carried no achievable estimate
        (no l2 term, nominal host time per launch, no GPU fixed time)."""
        if self.A is not None:
            return self.A, self.host, self.fixed
        A = np.zeros((len(self), len(ACH_RESOURCES)))  # [n, RA]
        for i, r in enumerate(ACH_RESOURCES):
            if r in RESOURCES:
                A[:, i] = self.column(r)
        return A, HOST_NOMINAL_S * self.launches, np.zeros(len(self))

    def achievable_time(self) -> np.ndarray:
        """The achievable estimate per case, s [n]: max(host, fixed + max_r A_r) (achievable_eff with
        every parameter at 1)."""
        A, host, fixed = self.achievable()
        return np.maximum(np.maximum(host, fixed + A.max(axis=1)), 1e-30)

    @property
    def bound(self) -> np.ndarray:
        return self.T.max(axis=1)  # [n]

    def column(self, r: str) -> np.ndarray:
        return self.T[:, RESOURCES.index(r)]


def active_resources(X: Features) -> tuple[str, ...]:
    frac = X.T / X.bound[:, None]  # [n, R]
    return tuple(r for i, r in enumerate(RESOURCES) if np.max(frac[:, i]) >= ACTIVE_FRACTION)


def _bottleneck_terms(X: Features, value: np.ndarray) -> dict[str, np.ndarray]:
    """Assign ``value`` (one per case) to each case's roofline bottleneck resource."""
    which = X.T.argmax(axis=1)  # [n]
    return {r: np.where(which == i, value, 0.0) for i, r in enumerate(RESOURCES)}


class Model:
    """A model form. ``fit`` returns a new fitted instance; ``params`` are plain JSON numbers."""

    name: ClassVar[str]
    formula: ClassVar[str]

    def __init__(self, params: dict[str, Any] | None = None, active: tuple[str, ...] = ()):
        self.params = dict(params or {})
        self.active = tuple(active)

    def n_params(self, active: tuple[str, ...]) -> int:
        raise NotImplementedError

    def n_params_of(self, X: Features) -> int:
        """Parameters this form fits on X (cross-validation needs more shapes than this)."""
        return self.n_params(active_resources(X))

    def fit(self, X: Features, y: np.ndarray, start: "Model | None" = None) -> "Model":
        """Fit on (X, y). ``start``: a fit of the same form on related data (cross-validation folds
        start from the fit on all cases) whose parameters are tried first."""
        raise NotImplementedError

    def _vector(self) -> np.ndarray | None:
        """The optimiser's parameter vector of this fit (None: linear forms have none)."""
        return None

    def _terms(self, X: Features) -> dict[str, np.ndarray]:
        """The form's own time contributions (s): 'fixed' and one per resource."""
        raise NotImplementedError

    def terms(self, X: Features) -> dict[str, np.ndarray]:
        """Time contributions (s) that add up to the prediction: 'fixed' and one per resource. A
        guarded fit (``guard``) scales them all so that their sum stays within its range of ratios to
        the achievable estimate."""
        raw = self._terms(X)
        if GUARD_LO not in self.params:
            return raw
        factor = self._guard_factor(X, raw)
        return {k: v * factor for k, v in raw.items()}

    def _guard_factor(self, X: Features, raw: dict[str, np.ndarray]) -> np.ndarray:
        """[n] the factor a guarded fit scales its terms by: their sum kept within its range of ratios to
        the achievable estimate."""
        total = np.maximum(sum(raw.values()), 1e-30)
        ach = X.achievable_time()
        return np.clip(total, ach * self.params[GUARD_LO], ach * self.params[GUARD_HI]) / total

    def predict(self, X: Features) -> np.ndarray:
        return sum(self.terms(X).values())

    def _device(self, X: Features) -> np.ndarray | None:
        """The form's device time (s) of each case, host issue aside; None for a form without a host
        term of its own (its prediction is the device's and the host's together)."""
        return None

    def device(self, X: Features) -> np.ndarray | None:
        """The fitted device time of each case (``_device``), scaled as ``terms`` scales a guarded fit;
        None where the form has no separate device side."""
        dev = self._device(X)
        if dev is None or GUARD_LO not in self.params:
            return dev
        return dev * self._guard_factor(X, self._terms(X))

    def guarded(self, X: Features, y: np.ndarray) -> Model:
        """This fit with the physical guard of the data (X, y) it was fitted on: its predictions are
        kept within [min r / GUARD_FACTOR, max r * GUARD_FACTOR] times the achievable estimate, r the
        fitted cases' measured / achievable ratios. The achievable estimate is what physics and the
        software path allow; how far a kernel falls short of it is a property of the kernel that
        the measured shapes show, so a form that extrapolates to a shortfall far outside anything
        measured (a held-out refit predicting 75x the time of a 17 us decode) is clipped back."""
        r = y / X.achievable_time()                                       # [n]
        params = {**{k: v for k, v in self.params.items() if k not in (GUARD_LO, GUARD_HI)},
                  GUARD_LO: float(r.min() / GUARD_FACTOR), GUARD_HI: float(r.max() * GUARD_FACTOR)}
        return type(self)(params, self.active)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "formula": self.formula, "active": list(self.active), "params": self.params}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Model":
        return cls(dict(d["params"]), tuple(d.get("active", ())))

    def _fixed(self, X: Features) -> np.ndarray:
        return self.params["t0_s_per_launch"] * X.launches


def _starts(start: Model | None, own: list, cls: type, active: tuple[str, ...] = ()) -> list:
    """A warm start from a related fit first, then the form's first own start (in case the warm one
    sits in another basin); without a warm start, all own starts."""
    if isinstance(start, cls) and start.active == active and start._vector() is not None:
        return [start._vector(), own[0]]
    return own


def _log_fit(predict, x0_list, lb, ub, y, prior=None):
    """Least squares on log time from several starts; returns the best parameter vector."""
    logy = np.log(y)

    def resid(p):
        r = np.log(np.maximum(predict(p), 1e-30)) - logy
        return np.concatenate([r, prior(p)]) if prior is not None else r

    best = None
    for x0 in x0_list:
        x0 = np.clip(np.asarray(x0, dtype=float), lb + 1e-9, ub - 1e-9)
        sol = least_squares(resid, x0, bounds=(lb, ub), loss="soft_l1", f_scale=LOSS_SCALE, x_scale=1.0,
                            ftol=TOL, xtol=TOL, gtol=TOL)
        if best is None or sol.cost < best.cost:
            best = sol
    return best.x


def _t0_start(X: Features, y: np.ndarray) -> float:
    return float(np.clip(0.3 * np.min(y / X.launches), *T0_BOUNDS))


class RooflineConst(Model):
    name = "roofline_const"
    formula = "t = t0*n + T_max/e"

    def n_params(self, active):
        return 2

    def fit(self, X, y, start=None):
        W = X.bound
        e0 = float(np.median(W / y))
        lb = np.log([T0_BOUNDS[0], EFF_BOUNDS[0]])
        ub = np.log([T0_BOUNDS[1], EFF_BOUNDS[1]])
        t0 = _t0_start(X, y)
        starts = _starts(start, [np.log([t0, e0]), np.log([t0 * 1e-3, e0])], RooflineConst,
                         start.active if start is not None else ())
        p = _log_fit(lambda p: np.exp(p[0]) * X.launches + W / np.exp(p[1]), starts, lb, ub, y)
        return RooflineConst({"t0_s_per_launch": float(np.exp(p[0])), "eff": float(np.exp(p[1]))},
                             active_resources(X))

    def _vector(self):
        return np.log([self.params["t0_s_per_launch"], self.params["eff"]])

    def _terms(self, X):
        out = _bottleneck_terms(X, X.bound / self.params["eff"])
        out["fixed"] = self._fixed(X)
        return out


class MaxEff(Model):
    name = "max_eff"
    formula = "t = t0*n + max_r T_r/e_r"

    def n_params(self, active):
        return 1 + len(active)

    def fit(self, X, y, start=None):
        active = active_resources(X)
        cols = np.array([RESOURCES.index(r) for r in active])
        Ta = X.T[:, cols]  # [n, A]
        t0 = _t0_start(X, y)
        e0 = float(np.median(X.bound / y))
        lb = np.log([T0_BOUNDS[0]] + [EFF_BOUNDS[0]] * len(active))
        ub = np.log([T0_BOUNDS[1]] + [EFF_BOUNDS[1]] * len(active))

        def pred(p):
            return np.exp(p[0]) * X.launches + np.max(Ta / np.exp(p[1:]), axis=1)

        starts = [np.log([t0] + [e0] * len(active)),
                  np.log([t0 * 1e-3] + [e0] * len(active)),
                  np.log([t0] + [min(e0 * 3, EFF_BOUNDS[1])] * len(active))]
        # one start per resource: that resource binds, the others sit near their ceiling
        for j in range(len(active)):
            s = [1.0] * len(active)
            s[j] = e0
            starts.append(np.log([t0] + s))
        p = _log_fit(pred, _starts(start, starts, MaxEff, active), lb, ub, y, prior=lambda p: PRIOR_WEIGHT * p[1:])
        params = {"t0_s_per_launch": float(np.exp(p[0]))}
        params.update({f"eff.{r}": float(np.exp(v)) for r, v in zip(active, p[1:])})
        return MaxEff(params, active)

    def _vector(self):
        return np.log([self.params["t0_s_per_launch"]] + [self.params[f"eff.{r}"] for r in self.active])

    def _effs(self) -> np.ndarray:
        # a resource inactive in the fit is taken at its ceiling (efficiency 1)
        return np.array([self.params.get(f"eff.{r}", 1.0) for r in RESOURCES])

    def _terms(self, X):
        ratio = X.T / self._effs()  # [n, R]
        which = ratio.argmax(axis=1)
        out = {r: np.where(which == i, ratio[:, i], 0.0) for i, r in enumerate(RESOURCES)}
        out["fixed"] = self._fixed(X)
        return out


class SumNNLS(Model):
    name = "sum_nnls"
    formula = "t = t0*n + sum_r c_r*T_r (c_r >= 0)"

    def n_params(self, active):
        return 1 + len(active)

    def fit(self, X, y, start=None):
        active = active_resources(X)
        cols = [RESOURCES.index(r) for r in active]
        A = np.column_stack([X.launches] + [X.T[:, c] for c in cols])  # [n, 1 + A]
        # relative errors: divide each row by its measured time
        scale = A.max(axis=0)
        scale[scale == 0] = 1.0
        coef, _ = nnls(A / y[:, None] / scale, np.ones_like(y))
        coef = coef / scale
        params = {"t0_s_per_launch": float(coef[0])}
        params.update({f"c.{r}": float(v) for r, v in zip(active, coef[1:])})
        return SumNNLS(params, active)

    def _terms(self, X):
        # a resource inactive in the fit (under 1% of the bound in every case) adds nothing, as in
        # the fit itself
        out = {r: self.params.get(f"c.{r}", 0.0) * X.column(r) for r in RESOURCES}
        out["fixed"] = self._fixed(X)
        return out


class SizeEff(Model):
    name = "size_eff"
    formula = "t = t0*n + T_max/(e_max*s(W)), s(W) = W^a/(W^a + W_half^a), W = T_max"

    def n_params(self, active):
        return 4

    def fit(self, X, y, start=None):
        W = X.bound
        t0 = _t0_start(X, y)
        e0 = float(np.median(W / y))
        # parameters: log t0, log e_max, log W_half, a
        lb = np.array([np.log(T0_BOUNDS[0]), np.log(EFF_BOUNDS[0]), np.log(1e-9), 0.25])
        ub = np.array([np.log(T0_BOUNDS[1]), np.log(EFF_BOUNDS[1]), np.log(10.0), 4.0])

        def pred(p):
            return np.exp(p[0]) * X.launches + W / np.exp(p[1]) * (1.0 + (np.exp(p[2]) / W) ** p[3])

        wmid = float(np.exp(np.median(np.log(W))))
        starts = [[np.log(t0), np.log(e0), np.log(wmid), 1.0],
                  [np.log(t0 * 1e-3), np.log(min(2 * e0, 3.9)), np.log(wmid), 0.5],
                  [np.log(t0), np.log(e0), np.log(float(W.min())), 2.0]]
        p = _log_fit(pred, _starts(start, starts, SizeEff, start.active if start is not None else ()), lb, ub, y)
        return SizeEff({"t0_s_per_launch": float(np.exp(p[0])), "eff_max": float(np.exp(p[1])),
                        "W_half_s": float(np.exp(p[2])), "a": float(p[3])}, active_resources(X))

    def _vector(self):
        return np.array([np.log(self.params["t0_s_per_launch"]), np.log(self.params["eff_max"]),
                         np.log(self.params["W_half_s"]), self.params["a"]])

    def efficiency(self, W: np.ndarray) -> np.ndarray:
        a, wh = self.params["a"], self.params["W_half_s"]
        return self.params["eff_max"] / (1.0 + (wh / W) ** a)

    def _terms(self, X):
        out = _bottleneck_terms(X, X.bound / self.efficiency(X.bound))
        out["fixed"] = self._fixed(X)
        return out


class Overlap(Model):
    name = "overlap"
    formula = "t = ((t0*n)^p + (T_max/e)^p)^(1/p)"

    def n_params(self, active):
        return 3

    def fit(self, X, y, start=None):
        W = X.bound
        t0 = _t0_start(X, y)
        e0 = float(np.median(W / y))
        # parameters: log t0, log e, log p
        lb = np.array([np.log(T0_BOUNDS[0]), np.log(EFF_BOUNDS[0]), 0.0])
        ub = np.array([np.log(T0_BOUNDS[1]), np.log(EFF_BOUNDS[1]), np.log(P_MAX)])

        def pred(p):
            return _pnorm(np.exp(p[0]) * X.launches, W / np.exp(p[1]), np.exp(p[2]))

        t_floor = float(np.clip(np.min(y / X.launches), *T0_BOUNDS))
        starts = [[np.log(t0), np.log(e0), np.log(2.0)], [np.log(t_floor), np.log(e0), np.log(8.0)],
                  [np.log(t0 * 1e-2), np.log(e0), 0.5]]
        p = _log_fit(pred, _starts(start, starts, Overlap, start.active if start is not None else ()), lb, ub, y)
        return Overlap({"t0_s_per_launch": float(np.exp(p[0])), "eff": float(np.exp(p[1])),
                        "p": float(np.exp(p[2]))}, active_resources(X))

    def _vector(self):
        return np.log([self.params["t0_s_per_launch"], self.params["eff"], self.params["p"]])

    def _terms(self, X):
        fixed = self._fixed(X)
        work = X.bound / self.params["eff"]
        total = _pnorm(fixed, work, self.params["p"])
        # the overlapped total is split in proportion to each part's p-th power (p = 1: the plain sum)
        pw = self.params["p"]
        share = fixed ** pw / (fixed ** pw + work ** pw)
        out = _bottleneck_terms(X, total * (1.0 - share))
        out["fixed"] = total * share
        return out


def _pnorm(a: np.ndarray, b: np.ndarray, p: float) -> np.ndarray:
    """(a^p + b^p)^(1/p), computed without overflow for large p."""
    m = np.maximum(a, b)
    return m * ((a / m) ** p + (b / m) ** p) ** (1.0 / p)
