"""Host speed per measurement session, and what it adds to the interval of a prediction for a new machine.

Why: a call whose time is its host's issue time (the achievable estimate's bottleneck is
``host/launch``: eager PyTorch code, small kernels) runs as fast as the CPU of the machine that
issues it. Machines of one kind differ there: on the stored H200 results the same 200 cases were
measured on two machines; the GPU-bound ones agree within 2-3 % and the host-bound ones differ by
a factor of 1.4 in the median (rmsnorm eager 48 us on one, 100 us on the other). That is the
issuing CPU, not the kernel, so the fit gives each session (join.session_of: one machine lease)
its own factor on the host terms (achievable_forms.py ``AchievableEff``), estimated from that session's other
host-bound cases and never from the case being predicted (leave-shape-out refits without it).

A prediction for a new machine takes the factor 1 (the spec's probe-measured host costs times the
fit's host_scale: the middle of the fitted sessions), and its interval must hold the spread between
machines that the held-out residuals (each predicted with its own session's factor) do not contain.
``session_spread`` measures that spread without any model: over the cases measured in two or more
sessions whose achievable bottleneck is host/launch, the pooled variance of log time between
sessions (each case's sample variance of its per-session mean log times, averaged). ``widen_for_host``
adds it in quadrature to both log bounds of a host-bound prediction's interval:
log_hi' = sqrt(log_hi^2 + (z sigma)^2), z the normal quantile of the interval's upper end
(log_lo' likewise, negative).

``repeatability`` puts the same spread in the targets' terms, again without any model: each session's time of
a case measured in two or more sessions (the geometric mean of its records there) against the median of its
other sessions' times (on log times: the geometric middle of an even count), |t_s / median_other - 1|, median
and p90, for host-bound and for GPU-bound cases apart.
A model that knew every case's typical time exactly would still show these errors on single sessions.
"""

from __future__ import annotations

import math
from collections import defaultdict
from statistics import NormalDist

import numpy as np

from .achievable_forms import SESSION_SPREAD_LOG
from .crossval import Interval
from .join import JoinedCase

HOST_BOUND = "host/launch"    # the achievable estimate's bottleneck label of a host-bound call


def session_spread(cases: list[JoinedCase]) -> dict:
    """The between-session log-time spread of host-bound cases (see the module docstring), or the
    prior SESSION_SPREAD_LOG where no host-bound case was measured in two sessions."""
    by_key: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for c in cases:
        if (c.bounds.achievable or {}).get("bottleneck") == HOST_BOUND:
            by_key[c.key][c.session or c.source_sha256].append(math.log(c.measured_s))
    variances = [float(np.var([np.mean(v) for v in per.values()], ddof=1))
                 for per in by_key.values() if len(per) >= 2]
    sessions = sorted({c.session or c.source_sha256 for c in cases})
    if not variances:
        return {"sigma_log": SESSION_SPREAD_LOG, "n_cases": 0, "n_sessions": len(sessions),
                "source": "prior (achievable_forms.SESSION_SPREAD_LOG): no host-bound case was measured in two sessions"}
    return {"sigma_log": float(math.sqrt(np.mean(variances))), "n_cases": len(variances),
            "n_sessions": len(sessions),
            "source": "measured: pooled between-session variance of log time of the host-bound cases "
                      "measured in two or more sessions",
            "repeatability": repeatability(cases)}


def repeatability(cases: list[JoinedCase]) -> dict:
    """Model-free repeat errors between sessions (module docstring), by what sets the pace: {"host_bound",
    "gpu_bound": {"n": session records compared, "n_cases", "median_pct", "p90_pct"} or None, "method"}."""
    by_key: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    bound: dict[str, bool] = {}
    for c in cases:
        by_key[c.key][c.session or c.source_sha256].append(math.log(c.measured_s))
        bound[c.key] = (c.bounds.achievable or {}).get("bottleneck") == HOST_BOUND
    errs: dict[bool, list[float]] = {True: [], False: []}
    n_cases = {True: 0, False: 0}
    for key, per in by_key.items():
        if len(per) < 2:
            continue
        n_cases[bound[key]] += 1
        means = {s: float(np.mean(v)) for s, v in per.items()}
        for s, m in means.items():
            others = [v for o, v in means.items() if o != s]
            errs[bound[key]].append(100.0 * abs(math.exp(m - float(np.median(others))) - 1.0))

    def summary(host: bool) -> dict | None:
        e = errs[host]
        return None if not e else {"n": len(e), "n_cases": n_cases[host], "median_pct": float(np.median(e)),
                                   "p90_pct": float(np.percentile(e, 90))}
    return {"host_bound": summary(True), "gpu_bound": summary(False),
            "method": "measured: each session's time of a case measured in two or more sessions (geometric mean of "
                      "its records there) against the median of its other sessions' times, |ratio - 1|; "
                      "host-bound: the achievable estimate's bottleneck is host/launch"}


def widen_for_host(iv: Interval, sigma_log: float) -> Interval:
    """The interval of a host-bound prediction on a new machine: the session spread added in quadrature."""
    z = NormalDist().inv_cdf(0.5 + iv.level / 2.0)
    extra = (z * sigma_log) ** 2
    return Interval(iv.level, -math.sqrt(iv.log_lo ** 2 + extra), math.sqrt(iv.log_hi ** 2 + extra), iv.n,
                    iv.exact_level, iv.method + f"; host-bound on a new machine: between-session spread "
                                                f"{sigma_log:.2f} (log sd) added in quadrature")
