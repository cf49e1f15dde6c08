"""Energy parameters fitted on measured cases, and their leave-shape-out check per family.

Data: every joined case (``join.py``) whose record carries an NVML energy window
(``measure/energy.py``: ``joules_per_call`` over >= 1 s of back-to-back calls, ``wall_s_per_call`` the
window's time per call, ``avg_power_w``). Its operations and bytes are those the energy model charges
(``analytic/energy.counts``) under the warm-cache rule of a measured window (no L2 flush between calls).

Model, per call: E = P_static x T + sum_k e_k x n_k, with T the window's time per call (so that the fit
judges the energy model, not the time model), n_k the call's count of term k (tensor FLOPs per dtype and
tensor-instruction class, vector FLOPs, transcendentals, DRAM bytes, bytes crossing the cache, bytes
re-read from it) and e_k its energy. Static power is
fitted, not set to the idle reading: a working device runs at higher clocks and temperature than an
idle one (the H200 idles at ~117-128 W; the fit is what the counted work leaves over).

Power limit: a window whose average power is within ``POWER_LIMITED_FRACTION`` of ``power.tdp`` ran
at the limit (the controller lowered the clocks to hold it, and the measured time includes that
stretch). It is predicted as min(P_static x T + dynamic, limit x T), which is the model's stretch rule
(``analytic/energy.py``) seen from a time that is already stretched. So its energy is a lower bound
on the model's, not a value to match: a model at or above limit x T predicts it exactly, whatever its
excess. It enters the fit as that bound (a one-sided residual: only a model below the measured energy
is penalised), rather than being left out: left out, nothing stopped the fit from putting the work
of the power-limited windows (SSD's forward and decode step, FlashAttention-2 decode, large Mamba-1
decode steps) under the limit, and on the H200 they were predicted 20-25% low.

Fit: non-negative least squares of E / E_measured (relative error; each shape weighs 1 however often
it was measured), the power-limited windows as one-sided bounds (``_bounded_nnls``: NNLS over the
windows below the limit and the bounds the current solution violates, repeated until that set stops
changing), over the terms that at least ``MIN_CASES_PER_TERM`` fitted cases exercise. fp16 tensor
FLOPs share the bf16 coefficient (one tensor-core datapath, one datasheet rate), for each instruction
class. A term the data do not determine (too few cases, or a fitted zero) is reported; an mma.sync term
left undetermined is charged at the full-rate coefficient (``EnergyFit.value``). Re-read bytes get their
own coefficient although a spec charges them at its cache's: the workload cases cannot split DRAM from
cache bytes (nearly every cache byte they count is a DRAM byte, so the ``cache`` coefficient carries part
of the DRAM energy), while the re-reads are L2 traffic alone; on the H200 they fit at 40-54 pJ/B beside
the probe's L2-resident read at 40.4 pJ/B. The fit is written as a calibration profile
(``energy_profile.py``), never into a spec.

Check: leave-shape-out (every case of a held-out shape predicted by a fit without it), per family:
median and p90 absolute % error with bootstrap intervals over shapes (``BOOTSTRAP`` resamples, fixed
seed), and a split-conformal prediction interval of the held-out log residuals with its coverage
(``crossval.py``). Two time bases: the measured window time (the energy model alone) and the
achievable estimate of the time (``analytic/achievable.py``: energy and time both predicted).
``spec_check``: every case predicted with the spec's own parameters, no fit, on both time bases (the
out-of-sample check of parameters measured by ``ssmbench probe --energy``, the *analytic estimate*;
in-sample, and labelled so, where a spec's parameters were calibrated on these cases). The fit above is the
*calibrated estimate*; ``analytic/energy.py`` explains where and why the two differ.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from ..analytic import execution
from ..analytic.cases import case_cost
from ..analytic.energy import (
    TERM_UNITS,
    TERMS,
    EnergyTable,
    cache_level,
    counts,
    fallback_term,
    label,
    path_issue_seconds,
)
from ..analytic.padding import executed_tensor_factor, executed_work_factor
from ..analytic.reuse import l2_reread_share
from ..analytic.roofline import spec_ceiling, work_array
from ..errors import UserError
from ..hwspecs import Spec
from .crossval import ape, conformal, loso_coverage, shape_weights
from .join import Joined

POWER_LIMITED_FRACTION = 0.95
MIN_CASES_PER_TERM = 5
TIED = {"tensor.fp16": "tensor.bf16", "tensor_mma_sync.fp16": "tensor_mma_sync.bf16"}
BOOTSTRAP = 1000
LEVEL = 0.8
TARGET = {"median_ape_pct": 10.0, "p90_ape_pct": 25.0}  # issue #14, per family
BASES = ("measured_time", "achievable_time")
FIT_UNITS = {"B": "J/B", "s": "W"}  # a fitted coefficient's unit by its term's count unit (else J/FLOP)


@dataclass(frozen=True)
class EnergyCase:
    key: str
    family: str
    shape: str                  # op identity and dims: repeats of a case share it
    source: str
    started: str | None
    measured_j: float
    time_s: float               # the window's wall time per call
    avg_power_w: float
    achievable_s: float
    counts: dict[str, float]    # term -> operations or bytes (analytic/energy.TERMS)

    def row(self) -> np.ndarray:
        return np.array([self.time_s] + [self.counts[t] for t in TERMS])


def measured_call_traits(op: str, impl: str, dims, dtype: str, mode: str, backend: str | None,
                         sm_count: float | None = None) -> dict:
    """The execution traits ``analytic/energy.counts`` charges one measured call by: fp32 matmuls on TF32,
    tensor FLOPs issued as mma.sync, the bytes re-read from the cache (``analytic/execution.py``) less those
    the SMs' L1 serves (``analytic/reuse.py``) and the work executed on padded tiles
    (``analytic/padding.py``); ``sm_count``, the spec's, decides what depends on it."""
    return {"tf32": execution.fp32_matmul_on_tf32(op, impl, backend),
            "mma_sync": execution.tensor_instr(op, impl, backend) == "mma_sync",
            "l2_reread": execution.l2_reread_bytes(op, impl, dims, dtype, mode, backend)
            * l2_reread_share(op, impl, dims, dtype, mode, backend, sm_count),
            "work_factor": executed_work_factor(op, impl, dims, dtype, mode, backend),
            "tensor_factor": executed_tensor_factor(op, impl, dims, mode, backend, sm_count)}


def sm_count(spec: Spec) -> float | None:
    """The spec's SM count (``compute.sm_count``), None where unknown."""
    v = spec_ceiling(spec, "compute.sm_count", "measured").value
    return None if v is None else float(v)


def energy_cases(joined: Joined, spec: Spec) -> list[EnergyCase]:
    """The joined cases with an energy window, with the counts the energy model charges."""
    cache = cache_level(spec)
    cap = spec_ceiling(spec, f"memory.{cache}.capacity", "measured").value if cache else None
    out = []
    for c in joined.cases:
        e = c.energy
        if not e or not e.get("joules_per_call") or not e.get("wall_s_per_call"):
            continue
        cost = execution.as_measured(case_cost(c.op, c.dims, impl=c.impl, mode=c.mode, dtype=c.dtype), c.backend, c.mode)
        ach = c.bounds.achievable or {}
        w = work_array(cost)
        n = counts(w, ach.get("l2_bytes", 0.0), ach.get("dram_bytes", float(cost.executed_bytes)),
                   **measured_call_traits(c.op, c.impl, c.dims, c.dtype, c.mode, c.backend, sm_count(spec)), warm_l2=True,
                   l2_capacity=np.nan if cap is None else cap, path_issue_s=path_issue_seconds(w, spec))
        shape = f"{c.op}/{c.impl}/{c.backend}/{c.dtype}/{c.mode}/" + ",".join(f"{k}={v}" for k, v in sorted(c.dims.items()))
        out.append(EnergyCase(c.key, c.family, shape, c.source, e.get("started_utc"), float(e["joules_per_call"]),
                              float(e["wall_s_per_call"]), float(e["avg_power_w"]), c.bounds.achievable_s,
                              {t: float(v) for t, v in n.items()}))
    if not out:
        raise UserError("no measured case with an energy window (energy.joules_per_call) to fit energy on; "
                        "measure on a CUDA device with NVML (ssmbench measure without --no-energy)")
    return out


def power_limit(spec: Spec) -> float:
    v = spec_ceiling(spec, "power.tdp", "measured").value
    if v is None:
        raise UserError(f"{spec.id}: power.tdp (the power limit) is unknown; the energy fit needs it to tell "
                        "power-limited windows apart")
    return float(v)


@dataclass(frozen=True)
class EnergyFit:
    static_w: float
    per_term: dict[str, float]        # fitted terms (zeros included) -> J per unit
    undetermined: dict[str, str]      # term -> why it was not fitted
    n_fit: int                        # cases fitted on (not power-limited)
    limit_w: float
    n_bound: int = 0                  # power-limited cases, fitted as lower bounds

    def value(self, t: str) -> float:
        """A term's coefficient: its own value where given (a spec's), else its tied partner's (a fit), else
        that of the term standing in for it (``analytic/energy.fallback_term``: an mma.sync FLOP the cases
        do not determine is charged as a full-rate one), else 0."""
        v = self.per_term.get(t, self.per_term.get(TIED.get(t, t)))
        if (v is None or v == 0.0) and fallback_term(t) is not None:
            return self.value(fallback_term(t))
        return 0.0 if v is None else v

    def _coef(self) -> np.ndarray:
        """[static, one per analytic/energy.TERMS] (``value``)."""
        return np.array([self.static_w] + [self.value(t) for t in TERMS])

    def predict(self, X: np.ndarray, time_s: np.ndarray) -> np.ndarray:
        """Energy per call of rows ``X`` (``EnergyCase.row``) at ``time_s``, a time that already includes
        any power-limit stretch (a measured one): min(static x T + dynamic, limit x T)."""
        c = self._coef()
        return np.minimum(X[:, 1:] @ c[1:] + c[0] * time_s, self.limit_w * time_s)

    def predict_at(self, X: np.ndarray, time_s: np.ndarray) -> np.ndarray:
        """Energy per call at a predicted time, before any stretch: the rule of analytic/energy.py."""
        dyn = X[:, 1:] @ self._coef()[1:]
        p = self.static_w + dyn / np.maximum(time_s, 1e-30)
        t = np.where(p > self.limit_w, dyn / (self.limit_w - self.static_w), time_s)
        return self.static_w * t + dyn


def _design(cases: list[EnergyCase]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X = np.array([c.row() for c in cases])
    y = np.array([c.measured_j for c in cases])
    w = shape_weights(np.array([c.shape for c in cases])) / y
    return X, y, w


BOUND_ITERATIONS = 100  # _bounded_nnls: active-set passes; the set settles in a few on the H200 cases


def _bounded_nnls(A: np.ndarray, b: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """min ||A x - b||^2 over x >= 0, where the rows with ``bound`` count only while A x < b (a squared
    hinge: those rows are lower bounds on A x). Active set: NNLS on the other rows and the bounds the
    solution violates, until the set of violated bounds repeats (a fixed point: every bound left out
    holds, every one kept is violated or was at the last pass)."""
    active = ~bound
    seen: set[bytes] = set()
    x = nnls(A[active], b[active])[0]
    for _ in range(BOUND_ITERATIONS):
        nxt = ~bound | (bound & (A @ x < b))
        key = nxt.tobytes()
        if key in seen:
            break
        seen.add(key)
        active = nxt
        x = nnls(A[active], b[active])[0]
    return x


def fit(cases: list[EnergyCase], limit_w: float) -> EnergyFit:
    """Non-negative least squares of the energy model on the cases below the power limit, with the
    power-limited ones as lower bounds (module docstring)."""
    X, y, w = _design(cases)
    P = np.array([c.avg_power_w for c in cases])
    use = P < POWER_LIMITED_FRACTION * limit_w
    if use.sum() < 2:
        raise UserError(f"only {int(use.sum())} measured case(s) ran below {POWER_LIMITED_FRACTION:.0%} of the power "
                        f"limit ({limit_w:g} W); the energy fit needs cases whose power is not capped")
    cols = {t: X[:, 1 + i] for i, t in enumerate(TERMS)}
    for t, to in TIED.items():
        cols[to] = cols[to] + cols.pop(t)
    fitted, undetermined = [], {}
    for t, v in cols.items():
        n = int((v > 0).sum())
        if n >= MIN_CASES_PER_TERM:
            fitted.append(t)
        elif n:
            undetermined[t] = f"{n} fitted case(s) exercise it; at least {MIN_CASES_PER_TERM} are needed"
    A = np.column_stack([X[:, 0]] + [cols[t] for t in fitted])
    coef = _bounded_nnls(A * w[:, None], y * w, ~use)
    per = {t: float(c) for t, c in zip(fitted, coef[1:])}
    for t, c in per.items():
        if c == 0.0:
            undetermined[t] = "fitted zero: the cases give this term no positive energy beside the others"
    return EnergyFit(float(coef[0]), per, undetermined, int(use.sum()), limit_w, int((~use).sum()))


def leave_shape_out(cases: list[EnergyCase], limit_w: float) -> dict[str, np.ndarray]:
    """Held-out energy per call of every case, on each time basis, from a fit without its shape."""
    X, _, _ = _design(cases)
    shapes = np.array([c.shape for c in cases])
    T = np.array([c.time_s for c in cases])
    Ta = np.array([c.achievable_s for c in cases])
    out = {b: np.empty(len(cases)) for b in BASES}
    for s in np.unique(shapes):
        test = shapes == s
        f = fit([c for c, t in zip(cases, test) if not t], limit_w)
        out["measured_time"][test] = f.predict(X[test], T[test])
        out["achievable_time"][test] = f.predict_at(X[test], Ta[test])
    return out


def _bootstrap(errors: np.ndarray, shapes: np.ndarray, q: float) -> tuple[float, float]:
    """A 80% bootstrap interval of the q-th percentile of ``errors``, resampling shapes."""
    rng = np.random.default_rng(0)
    uniq = np.unique(shapes)
    idx = {s: np.flatnonzero(shapes == s) for s in uniq}
    vals = []
    for _ in range(BOOTSTRAP):
        pick = np.concatenate([idx[s] for s in rng.choice(uniq, size=len(uniq))])
        vals.append(np.percentile(errors[pick], q))
    lo, hi = np.percentile(vals, [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2])
    return float(lo), float(hi)


def _stats(pred: np.ndarray, y: np.ndarray, shapes: np.ndarray) -> dict:
    e = ape(pred, y)
    r = np.log(y / pred)
    iv = conformal(r, LEVEL, shape_weights(shapes))
    cov = loso_coverage(r, shapes, LEVEL) if len(np.unique(shapes)) > 1 else np.ones(len(r), dtype=bool)
    med, p90 = float(np.median(e)), float(np.percentile(e, 90))
    return {"n": int(len(e)), "n_shapes": int(len(np.unique(shapes))), "median_ape_pct": med,
            "median_ape_pct_interval": _bootstrap(e, shapes, 50), "p90_ape_pct": p90,
            "p90_ape_pct_interval": _bootstrap(e, shapes, 90), "interval": iv.to_dict(),
            "coverage": float(cov.mean()),
            "meets_target": med <= TARGET["median_ape_pct"] and p90 <= TARGET["p90_ape_pct"]}


def evaluate(cases: list[EnergyCase], limit_w: float) -> dict:
    """The fit on every case, the held-out predictions and the per-family statistics on each basis."""
    full = fit(cases, limit_w)
    held = leave_shape_out(cases, limit_w)
    y = np.array([c.measured_j for c in cases])
    shapes = np.array([c.shape for c in cases])
    fams = np.array([c.family for c in cases])
    limited = np.array([c.avg_power_w >= POWER_LIMITED_FRACTION * limit_w for c in cases])
    per_basis = {}
    for b in BASES:
        per_basis[b] = {"all": _stats(held[b], y, shapes),
                        "families": {f: _stats(held[b][fams == f], y[fams == f], shapes[fams == f])
                                     for f in sorted(set(fams))}}
    rows = [{"key": c.key, "family": c.family, "source": c.source, "measured_j": c.measured_j, "time_s": c.time_s,
             "avg_power_w": c.avg_power_w, "power_limited": bool(limited[i]), "achievable_s": c.achievable_s,
             **{f"heldout_j_{b}": float(held[b][i]) for b in BASES},
             **{f"ape_pct_{b}": float(ape(held[b][i], y[i])) for b in BASES}} for i, c in enumerate(cases)]
    return {"label": "calibrated estimate (energy; leave-shape-out)", "fit": fit_dict(full), "bases": per_basis,
            "target": TARGET, "level": LEVEL, "n_power_limited": int(limited.sum()), "cases": rows,
            "power_limited_fraction": POWER_LIMITED_FRACTION}


def spec_check(cases: list[EnergyCase], spec: Spec) -> dict:
    """Every case predicted with the spec's own energy parameters (``analytic/energy.EnergyTable``, measured
    entries first) at the measured window time, no fit: the check of parameters that an isolating probe
    measured. Where the spec's parameters were calibrated on these cases the check is in-sample, and
    says so."""
    table = EnergyTable.of([spec])
    if not table.has_section[0]:
        return {"note": f"{spec.id} has no known energy parameter"}
    limit = table.limit_w[0]
    spec_fit = EnergyFit(float(np.nan_to_num(table.static_w[0])),
                         {t: float(np.nan_to_num(table.per_term[t][0])) for t in TERMS}, {}, 0,
                         float(limit) if np.isfinite(limit) else np.inf)
    X, y, _ = _design(cases)
    pred = {"measured_time": spec_fit.predict(X, X[:, 0]),
            "achievable_time": spec_fit.predict_at(X, np.array([c.achievable_s for c in cases]))}
    shapes = np.array([c.shape for c in cases])
    fams = np.array([c.family for c in cases])
    calibrated = sorted(table.calibrated[0])

    def per_family(p):
        return {"all": _stats(p, y, shapes),
                "families": {f: _stats(p[fams == f], y[fams == f], shapes[fams == f]) for f in sorted(set(fams))}}

    at = {b: per_family(pred[b]) for b in BASES}
    return {"label": label(table, 0), "in_sample": bool(calibrated),
            "note": ("in-sample: the spec's energy parameters " + ", ".join(calibrated) + " were calibrated on "
                     "measured cases" if calibrated else "out of sample: no parameter was fitted on these cases"),
            "parameters": {k: v for k, v in table.origins[0].items() if k.startswith("energy.")},
            **at["measured_time"], "bases": at}


def energy_section(joined: Joined, spec: Spec) -> dict:
    """The gap report's ``energy`` section: ``evaluate`` on the joined cases with an energy window, or a
    note saying why there is none."""
    if not any(c.energy for c in joined.cases):
        return {"note": "no energy section: no joined case carries an energy window (measured without NVML "
                        "or with --no-energy)"}
    if joined.device_mismatch:
        return {"note": f"no energy fit: the results were measured on {', '.join(joined.devices)}, not on "
                        f"{spec.id}; energy windows are fitted on the spec of the device that measured them"}
    try:
        cases = energy_cases(joined, spec)
        out = evaluate(cases, power_limit(spec))
        out["spec_check"] = spec_check(cases, spec)
        return out
    except UserError as exc:  # too few usable windows: the time report stands, the reason is printed
        return {"note": f"no energy fit: {exc}"}


def fit_dict(f: EnergyFit) -> dict:
    return {"static_power_w": f.static_w,
            "per_term": {t: {"value": v, "unit": FIT_UNITS.get(TERM_UNITS[t], "J/FLOP")}
                         for t, v in f.per_term.items()},
            "undetermined": f.undetermined, "n_fit_cases": f.n_fit, "n_bound_cases": f.n_bound,
            "power_limit_w": f.limit_w,
            "tied": TIED}
