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
                      "measured in two or more sessions"}


def widen_for_host(iv: Interval, sigma_log: float) -> Interval:
    """The interval of a host-bound prediction on a new machine: the session spread added in quadrature."""
    z = NormalDist().inv_cdf(0.5 + iv.level / 2.0)
    extra = (z * sigma_log) ** 2
    return Interval(iv.level, -math.sqrt(iv.log_lo ** 2 + extra), math.sqrt(iv.log_hi ** 2 + extra), iv.n,
                    iv.exact_level, iv.method + f"; host-bound on a new machine: between-session spread "
                                                f"{sigma_log:.2f} (log sd) added in quadrature")
