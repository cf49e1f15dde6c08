"""Confidence intervals of the report's ratios, from the spread the records carry.

A record holds the median, the 20th and 80th percentiles and the count n of its timed calls. Two
sources of variation enter a ratio of two medians:

1. Within a run (repeat variance). The p20..p80 spread gives a robust standard deviation of one call,
   sigma = (p80 - p20) / (2 z_0.8) (z_0.8 = 0.8416: exact for a normal distribution, and insensitive to
   the long tail of slow calls that the mean and the max carry). The median of n calls then has the
   standard error sqrt(pi / 2) sigma / sqrt(n) (asymptotic efficiency of the median under a normal
   distribution), i.e. se_log = that / median on the log scale.
2. Between runs. Consecutive calls within one run are not independent draws of what another run
   (another process, another lease, other clocks) measures: repeated cases show it. For every case key
   measured ok in more than one record (the report's own SSM and attention ops; if fewer than
   ``MIN_REPEAT_PAIRS`` such pairs exist, every op), the log ratio d of two successive medians gives
   Var(d) = 2 sigma_run^2, so sigma_run = sqrt(mean(d^2) / 2) (the root mean square: a case that moved a
   lot between runs widens every interval, it is not trimmed away). The same for energy per call.

A ratio a / b of two records then has, on the log scale, the variance
se_log(a)^2 + se_log(b)^2 + 2 sigma_run^2 (energy: 2 sigma_run,E^2 only: one NVML window per record
gives no within-run spread), and the interval exp(log(a / b) +- z sigma) with z the two-sided normal
quantile of the confidence level. Without any repeated case sigma_run is unknown: intervals are
within-run only and the report says they are too narrow; energy intervals are then not available.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import NormalDist

from ...measure.results import ResultFile

Z_P80 = NormalDist().inv_cdf(0.8)
MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)  # se(median) / se(mean) for a normal distribution
MIN_REPEAT_PAIRS = 3


def z_of(confidence: float) -> float:
    """The two-sided normal quantile of a confidence level (0.95 -> 1.96)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def within_se_log(time_s: dict) -> float:
    """Standard error of log(median) from one record's p20, p80 and n (0 where a field is missing)."""
    med, p20, p80, n = (time_s.get(k) for k in ("median", "p20", "p80", "n"))
    if not (med and p20 is not None and p80 is not None and n):
        return 0.0
    sigma = max(p80 - p20, 0.0) / (2 * Z_P80)
    return MEDIAN_EFFICIENCY * sigma / math.sqrt(n) / med


@dataclass(frozen=True)
class RunSpread:
    """Run-to-run spread on the log scale (None: no repeated case), from ``pairs`` repeat pairs."""

    time: float | None
    time_pairs: int
    energy: float | None
    energy_pairs: int
    scope: str  # which cases the pairs came from

    def describe(self) -> str:
        t = (f"{self.time * 100:.2g}% (root mean square over {self.time_pairs} pairs of repeated cases, "
             f"{self.scope})" if self.time is not None else "not estimated (no case was measured twice)")
        e = (f"{self.energy * 100:.2g}% ({self.energy_pairs} pairs)" if self.energy is not None
             else "not estimated (no case has two energy windows)")
        return f"run-to-run spread of a median time: {t}; of energy per call: {e}"


def _pairs(files: Iterable[ResultFile], ops: set[str] | None, field: str) -> list[float]:
    seen: dict[str, float] = {}
    out = []
    for rf in files:
        for r in rf.records:
            if r.status != "ok" or (ops is not None and r["op"] not in ops):
                continue
            v = (r.time_s or {}).get("median") if field == "time" else (r.energy or {}).get("joules_per_call")
            if not v or v <= 0:
                continue
            if r.key in seen:
                out.append(math.log(v / seen[r.key]))
            seen[r.key] = v
    return out


def _rms_sigma(d: list[float]) -> float:
    return math.sqrt(sum(x * x for x in d) / (2 * len(d)))


def run_spread(files: list[ResultFile], ops: set[str]) -> RunSpread:
    """Run-to-run spread of time and energy (module docstring); ``files`` oldest first."""
    scope = "the report's SSM and attention ops"
    dt, de = _pairs(files, ops, "time"), _pairs(files, ops, "energy")
    if len(dt) < MIN_REPEAT_PAIRS:
        scope = f"every op (fewer than {MIN_REPEAT_PAIRS} repeats of the report's ops)"
        dt, de = _pairs(files, None, "time"), _pairs(files, None, "energy")
    return RunSpread(_rms_sigma(dt) if dt else None, len(dt), _rms_sigma(de) if de else None, len(de), scope)


@dataclass(frozen=True)
class Ratio:
    value: float
    lo: float | None
    hi: float | None

    def scaled(self, k: float) -> Ratio:
        return Ratio(self.value * k, None if self.lo is None else self.lo * k, None if self.hi is None else self.hi * k)


def ratio(a: float, b: float, var_log: float | None, z: float) -> Ratio:
    """a / b with the interval exp(log(a / b) +- z sqrt(var_log)); no interval where var_log is None."""
    v = a / b
    if var_log is None:
        return Ratio(v, None, None)
    w = z * math.sqrt(var_log)
    return Ratio(v, v * math.exp(-w), v * math.exp(w))


def time_ratio(att: dict, ssm: dict, spread: RunSpread, z: float) -> Ratio:
    """Measured speedup: attention's median time / the SSM's, with its interval."""
    var = within_se_log(att) ** 2 + within_se_log(ssm) ** 2 + 2 * (spread.time or 0.0) ** 2
    return ratio(att["median"], ssm["median"], var, z)


def energy_ratio(att_j: float, ssm_j: float, spread: RunSpread, z: float) -> Ratio:
    """Measured energy saving: attention's joules per call / the SSM's (interval from run-to-run only)."""
    return ratio(att_j, ssm_j, None if spread.energy is None else 2 * spread.energy ** 2, z)
