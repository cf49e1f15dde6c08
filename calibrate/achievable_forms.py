"""The model forms on the achievable estimate's terms (``achievable_eff``, ``achievable_scale``,
``achievable_host``; the formulas are in models.py's docstring), their per-session host factors, and the
registry of every form (``MODELS``, ``model_from_dict``). Split from models.py, which keeps the roofline-term
forms and the shared fitting machinery (``Model``, ``Features``, the log-space least squares)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .models import (
    ACH_RESOURCES,
    ACTIVE_FRACTION,
    EFF_BOUNDS,
    PRIOR_WEIGHT,
    SCALE_BOUNDS,
    Features,
    MaxEff,
    Model,
    Overlap,
    RooflineConst,
    SizeEff,
    SumNNLS,
    _log_fit,
)

# Host speed per measurement session (achievable_eff): a factor on the host terms per session, its
# log pulled towards 0 by a prior of weight HOST_NOISE_LOG / SESSION_SPREAD_LOG (the ratio of the
# scatter of one host-bound case to the spread between sessions: a normal-normal shrinkage in which a
# session seen in one case moves 1 / (1 + weight^2) of the way to that case). SESSION_SPREAD_LOG: the
# log sd between sessions of one host-bound case's time, measured on the stored H200 results (102
# cases measured on two machines: 0.35); HOST_NOISE_LOG: the log scatter of host-bound cases of one
# kernel within one session about its host factor (about 0.15 on the same results).
SESSION_PREFIX = "session_host."
SESSION_SPREAD_LOG = 0.35
HOST_NOISE_LOG = 0.15
SESSION_PRIOR_WEIGHT = HOST_NOISE_LOG / SESSION_SPREAD_LOG
SESSION_BOUNDS = (0.1, 10.0)


def fitted_sessions(X: Features) -> list[str]:
    """The sessions that get their own host factor in a fit on X: all of them when X holds at least
    two (one session alone carries no between-session information: its speed is host_scale)."""
    if X.session is None:
        return []
    names = sorted(set(X.session))
    return names if len(names) >= 2 else []


def _session_index(X: Features, sessions: list[str]) -> np.ndarray:
    if not sessions:
        return np.full(len(X), -1)
    col = {name: i for i, name in enumerate(sessions)}
    return np.array([col.get(name, -1) for name in X.session])


def achievable_active(X: Features) -> tuple[str, ...]:
    """Achievable resources whose time reaches ACTIVE_FRACTION of the largest in some case."""
    A, _, _ = X.achievable()
    top = np.maximum(A.max(axis=1), 1e-30)[:, None]
    return tuple(r for i, r in enumerate(ACH_RESOURCES) if np.max(A[:, i] / top[:, 0]) >= ACTIVE_FRACTION)


class AchievableEff(Model):
    """Efficiencies on the achievable model: t = g * max(h * T_host, f * T_fixed + max_r T_r / e_r).

    T_host, T_fixed, T_r: the achievable estimate's host issue time, per-kernel GPU fixed time and
    engine / memory times (``achievable_terms``). h scales the host time, f the fixed cost, e_r is
    the attained fraction of resource r's achievable rate (inactive resources stay at 1). All are
    fitted on log scale with a weak prior (PRIOR_WEIGHT) towards 0, i.e. towards the achievable
    model as it is, so a term the data never exercise stays at its physical value. g (``group_scale``)
    is 1 for a fit of one group; a pooled fit applied to a small group (pool.py) carries that group's
    shrunken offset there."""

    name = "achievable_eff"
    formula = "t = g*max(h*T_host, f*T_fixed + max_r T_r/e_r) (achievable-model terms)"

    def n_params(self, active):
        return 2 + len(active)

    def n_params_of(self, X):
        return 2 + len(achievable_active(X))

    def fit(self, X, y, start=None):
        active = achievable_active(X)
        A, H, F = X.achievable()
        cols = np.array([ACH_RESOURCES.index(r) for r in active], dtype=int)
        rest = np.array([i for i in range(len(ACH_RESOURCES)) if i not in cols], dtype=int)
        Ta = A[:, cols]                                                  # [n, a]
        floor = A[:, rest].max(axis=1) if len(rest) else np.zeros(len(y))  # [n] inactive: at ceiling
        k = len(active)
        sessions = fitted_sessions(X)
        m = len(sessions)
        where = _session_index(X, sessions)                              # [n] column of the case's session, -1 none
        lb = np.log([SCALE_BOUNDS[0]] * 2 + [EFF_BOUNDS[0]] * k + [SESSION_BOUNDS[0]] * m)
        ub = np.log([SCALE_BOUNDS[1]] * 2 + [EFF_BOUNDS[1]] * k + [SESSION_BOUNDS[1]] * m)

        def pred(p):
            work = np.maximum(np.max(Ta / np.exp(p[2:2 + k]), axis=1), floor) if k else floor
            s = np.exp(np.where(where >= 0, p[2 + k:][where], 0.0)) if m else 1.0
            return np.maximum(np.exp(p[0]) * s * H, np.exp(p[1]) * F + work)

        gpu0 = F + np.maximum(Ta.max(axis=1) if k else 0.0, floor)
        e0 = float(np.clip(np.median(gpu0 / y), *EFF_BOUNDS))
        h0 = float(np.clip(np.min(y / np.maximum(H, 1e-30)), *SCALE_BOUNDS))
        own = [np.log([1.0, 1.0] + [1.0] * k), np.log([h0, 1.0] + [e0] * k), np.log([h0, 1.0] + [1.0] * k),
               np.log([1.0, 3.0] + [e0] * k)]
        for j in range(k):  # one start per resource: that resource binds, the others at their ceiling
            e = [1.0] * k
            e[j] = e0
            own.append(np.log([h0, 1.0] + e))
        starts = [np.concatenate([x, np.zeros(m)]) for x in own]
        if isinstance(start, AchievableEff) and start.active == active:
            starts = [start._vector_for(sessions), starts[0]]
        weights = np.concatenate([np.full(2 + k, PRIOR_WEIGHT), np.full(m, SESSION_PRIOR_WEIGHT)])
        p = _log_fit(pred, starts, lb, ub, y, prior=lambda p: weights * p)
        params = {"host_scale": float(np.exp(p[0])), "fixed_scale": float(np.exp(p[1]))}
        params.update({f"eff.{r}": float(np.exp(v)) for r, v in zip(active, p[2:2 + k])})
        params.update({f"{SESSION_PREFIX}{name}": float(np.exp(v)) for name, v in zip(sessions, p[2 + k:])})
        return AchievableEff(params, active)

    def _vector(self):
        return self._vector_for(self.sessions())

    def _vector_for(self, sessions: list[str]) -> np.ndarray:
        """The parameter vector with one host factor per session in ``sessions`` (1 where this fit
        has none for a session)."""
        return np.log([self.params["host_scale"], self.params["fixed_scale"]]
                      + [self.params[f"eff.{r}"] for r in self.active]
                      + [self.params.get(f"{SESSION_PREFIX}{name}", 1.0) for name in sessions])

    def sessions(self) -> list[str]:
        return [k.removeprefix(SESSION_PREFIX) for k in self.params if k.startswith(SESSION_PREFIX)]

    def session_factor(self, X: Features) -> np.ndarray:
        """Per case [n]: the host factor of its measurement session, 1 for a session this fit does not
        know (a new machine: the spec's host costs times host_scale, the fitted sessions' middle)."""
        if X.session is None:
            return np.ones(len(X))
        return np.array([self.params.get(f"{SESSION_PREFIX}{name}", 1.0) for name in X.session])

    def _terms(self, X):
        A, H, F = X.achievable()
        g = self.params.get("group_scale", 1.0)
        effs = np.array([self.params.get(f"eff.{r}", 1.0) for r in ACH_RESOURCES])
        ratio = A / effs                                                  # [n, RA]
        which = ratio.argmax(axis=1)
        work = ratio.max(axis=1)
        host = self.params["host_scale"] * self.session_factor(X) * H
        fixed = self.params["fixed_scale"] * F
        gpu_bound = fixed + work >= host
        out = {r: g * np.where(gpu_bound & (which == i), work, 0.0) for i, r in enumerate(ACH_RESOURCES)}
        # a host-bound call: its whole time is fixed overhead (issuing kernels, not running them)
        out["fixed"] = g * np.where(gpu_bound, fixed, host)
        return out

    def _device(self, X):
        """T_fixed + g * max_r T_r / e_r: the device side of the form, whether or not the host side binds
        the isolated call (a host-bound call's terms show only its host time). The per-kernel fixed time
        is the achievable model's own (launch.graph_node, gemm_fixed, library_fixed: read off CUDA-graph
        profiles), not f times it: f, fitted on isolated eager calls, also holds their gaps between
        kernels, which a CUDA-graph replay or a busy launch queue does not leave."""
        A, _, F = X.achievable()
        effs = np.array([self.params.get(f"eff.{r}", 1.0) for r in ACH_RESOURCES])
        return F + self.params.get("group_scale", 1.0) * (A / effs).max(axis=1)


class AchievableScale(AchievableEff):
    """The achievable estimate times one factor: t = c * max(T_host, T_fixed + max_r T_r), c =
    exp(median log(t / achievable)) (robust to a few outlying timings). The fewest parameters a
    kernel can have on the achievable model: every term falls short of it by the same factor. Stored
    as achievable_eff parameters (host and fixed scales c, every efficiency 1 / c), so the pooled
    offset ``group_scale`` and the terms work as there."""

    name = "achievable_scale"
    formula = "t = c*max(T_host, T_fixed + max_r T_r) (the achievable estimate times one factor)"

    def n_params(self, active):
        return 1

    def n_params_of(self, X):
        return 1

    def fit(self, X, y, start=None):
        c = float(np.exp(np.median(np.log(y / X.achievable_time()))))
        params = {"host_scale": c, "fixed_scale": c}
        params.update({f"eff.{r}": 1.0 / c for r in ACH_RESOURCES})
        return AchievableScale(params, ACH_RESOURCES)

    def _vector(self):
        return None


class AchievableHost(AchievableScale):
    """The achievable estimate's device side as it is, its host side times one factor: t = max(h * T_host,
    T_fixed + max_r T_r). One parameter, for a kernel whose device time the achievable model gets right and
    whose measured host time differs from the spec's host terms by the speed of the host it ran on (the
    H200 machines' host paths vary up to 2x between sessions: one factor on every term, achievable_scale,
    then scales the device-bound shapes too). Stored as achievable_eff parameters (fixed scale and every
    efficiency 1; one parameter, as achievable_scale)."""

    name = "achievable_host"
    formula = "t = max(h*T_host, T_fixed + max_r T_r) (the achievable estimate, its host time times one factor)"

    def fit(self, X, y, start=None):
        A, H, F = X.achievable()
        device = F + A.max(axis=1)

        def pred(p):
            return np.maximum(np.exp(p[0]) * H, device)

        h0 = float(np.clip(np.median(y / np.maximum(H, 1e-30)), *SCALE_BOUNDS))
        p = _log_fit(pred, [np.log([h0]), np.zeros(1)], np.log([SCALE_BOUNDS[0]]), np.log([SCALE_BOUNDS[1]]), y)
        params = {"host_scale": float(np.exp(p[0])), "fixed_scale": 1.0}
        params.update({f"eff.{r}": 1.0 for r in ACH_RESOURCES})
        return AchievableHost(params, ACH_RESOURCES)


MODELS: dict[str, type[Model]] = {m.name: m for m in (RooflineConst, MaxEff, SumNNLS, SizeEff, Overlap,
                                                      AchievableEff, AchievableScale, AchievableHost)}


def model_from_dict(d: dict[str, Any]) -> Model:
    try:
        cls = MODELS[d["name"]]
    except KeyError:
        raise ValueError(f"unknown model form {d.get('name')!r}; known: {', '.join(MODELS)}") from None
    return cls.from_dict(d)
