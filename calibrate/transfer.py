"""Apply a profile fitted on one spec to another spec (e.g. an H200 calibration to an H100 or A100).

What carries over: the fitted model form and its parameters, i.e. the efficiencies (fractions of
each resource's ceiling), the fixed time per launch, and for ``size_eff`` the saturation curve in
roofline seconds. The bound times T_r are recomputed on the target spec's ceilings, so a device with
less bandwidth gets proportionally longer memory-bound estimates at the same efficiency.

What does not carry over, and why the interval is wider: efficiencies depend on the
microarchitecture (SM count, cache sizes, clocks, the kernel's tuning for that chip), launch overhead
depends on the driver and CPU, and the size curve assumes the same saturation point in roofline
seconds. No data on the target measures these differences, so the interval is widened by a stated
rule: both log bounds are multiplied by ``TRANSFER_WIDEN`` (2) and each is at least
``TRANSFER_MIN_LOG`` (log 1.25, i.e. at least -20% / +25% around the estimate). The rule is a
stated assumption, not a fitted quantity; validate it with measurements on the target where they
exist (``ssmbench gap --calibration`` on the target's results reports the coverage it reached).

Every number produced this way is labelled "transferred", never "calibrated".
"""

from __future__ import annotations

import math

from .crossval import Interval

TRANSFER_WIDEN = 2.0
TRANSFER_MIN_LOG = math.log(1.25)
TRANSFER_RULE = (f"transferred: calibrated interval log bounds x{TRANSFER_WIDEN:g}, "
                 f"at least -{100 * (1 - math.exp(-TRANSFER_MIN_LOG)):.0f}% / +{100 * (math.exp(TRANSFER_MIN_LOG) - 1):.0f}%")


def is_transfer(profile_spec_id: str, target_spec_id: str) -> bool:
    return profile_spec_id != target_spec_id


def widen(iv: Interval) -> Interval:
    lo = min(iv.log_lo * TRANSFER_WIDEN, -TRANSFER_MIN_LOG)
    hi = max(iv.log_hi * TRANSFER_WIDEN, TRANSFER_MIN_LOG)
    return Interval(iv.level, lo, hi, iv.n, False)


def label(profile_spec_id: str, target_spec_id: str) -> str:
    return "transferred" if is_transfer(profile_spec_id, target_spec_id) else "calibrated"
