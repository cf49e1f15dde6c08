"""Calibrated estimates for one op identity: the entry point ``ssmbench predict --calibration`` uses.

    est = calibrated_estimate(profile, "mamba1_scan", "fused", {"B": 4, ...}, "bf16", "fwd")
    est.estimate_s, est.lo_s, est.hi_s, est.label   # label: "calibrated", "pooled" or "transferred"

The estimate is the chosen model of the profile's group for (op, impl, dtype, mode [, backend])
evaluated on the per-resource bound times of the dims on the target spec (the profile's own spec
unless another is given, in which case the numbers are *transferred*, with wider intervals: see
transfer.py). A group too small to be calibrated on its own is estimated from a pooled fit
(``status: "pooled"``, pool.py) and labelled "pooled", naming the level it borrowed from.
The interval is the profile's prediction interval at its level (``profile.level``, 0.8 by default);
for a call the achievable estimate finds host-bound it also holds the spread of host speed between
machines (sessions.py), since the estimate is for a machine whose host speed was not measured.
``estimate_detail`` gives everything behind the numbers (group, model, level, and whether it is an
extrapolation: ``extrapolated`` is true when a dimension of the call lies outside the range of that
dimension in the data the group, or its pooled level, was fitted on, or is not among its dimensions,
or when the bound lies outside the fitted bounds' range; ``extrapolation`` says which, one line each).
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

from ..analytic.cases import case_family
from ..errors import UserError
from ..hwspecs import Spec, get_spec
from .join import Bounds, resource_bounds
from .models import Features
from .profile import Profile, read_profile
from .sessions import HOST_BOUND, widen_for_host
from .transfer import TRANSFER_RULE, is_transfer, widen


class Estimate(NamedTuple):
    estimate_s: float
    lo_s: float
    hi_s: float
    label: str          # "calibrated" | "pooled" | "transferred"


USABLE = ("calibrated", "pooled")


def extrapolation(group: dict, dims: Mapping[str, int] | None, bound: float) -> list[dict[str, Any]]:
    """Why an estimate is an extrapolation (empty: it is not): each dimension outside the range of
    the data the group (or its pooled level) was fitted on, or absent from it; the bound outside the
    fitted bounds' range."""
    out = []
    ranges = group.get("dim_ranges") or {}
    if dims is not None and ranges:
        for k, v in dims.items():
            if k not in ranges:
                out.append({"dim": k, "value": v, "range": None,
                            "text": f"{k}={v}: not a dimension of the fitted data"})
            elif not ranges[k][0] <= v <= ranges[k][1]:
                out.append({"dim": k, "value": v, "range": list(ranges[k]),
                            "text": f"{k}={v} outside the fitted {k} = {ranges[k][0]}..{ranges[k][1]}"})
    lo, hi = group["bound_range_s"]
    if not lo <= bound <= hi:
        out.append({"dim": "bound", "value": bound, "range": [lo, hi],
                    "text": f"bound {bound:.3g} s outside the fitted bounds {lo:.3g}..{hi:.3g} s"})
    return out


def estimate_from_bounds(profile: Profile, group: dict, bounds: Bounds, target_spec_id: str,
                         dims: Mapping[str, int] | None = None) -> dict[str, Any]:
    if group["status"] not in USABLE:
        raise UserError(f"{profile.path}: group {group['label']} is not calibrated: {group['reason']}")
    X = Features.from_bounds([bounds])
    model = profile.model(group)
    est = float(model.predict(X)[0])
    transferred = is_transfer(profile.spec_id, target_spec_id)
    host_bound = (bounds.achievable or {}).get("bottleneck") == HOST_BOUND
    iv = profile.interval(group, pace="host" if host_bound else "gpu")
    spread = profile.data.get("host_sessions")
    if host_bound and spread:  # a new machine's host speed is unknown: the spread between sessions
        iv = widen_for_host(iv, float(spread["sigma_log"]))
    if transferred:
        iv = widen(iv)
    lo, hi = iv.apply(est)
    extra = extrapolation(group, dims, float(X.bound[0]))
    terms = {k: float(v[0]) for k, v in model.terms(X).items()}
    device = model.device(X)
    pooled = group["status"] == "pooled"
    return {
        "estimate_s": est, "lo_s": float(lo), "hi_s": float(hi), "level": iv.level,
        "label": "transferred" if transferred else ("pooled" if pooled else "calibrated"),
        "pooled_from": group.get("pooled_from") if pooled else None,
        "interval_rule": TRANSFER_RULE if transferred else iv.method,
        "level_guaranteed": iv.exact_level,
        "extrapolated": bool(extra), "extrapolated_dims": [e["dim"] for e in extra],
        "extrapolation": [e["text"] for e in extra],
        "bound_s": float(bounds.bound_s), "bottleneck": bounds.bottleneck,
        "terms_s": terms, "device_s": None if device is None else float(device[0]),
        "group": group["label"], "model": group["model"]["name"],
        "profile_spec": profile.spec_id, "target_spec": target_spec_id,
        "cv": group["cv"], "device_mismatch": bool(group.get("device_mismatch")),
    }


def estimate_detail(profile: Profile | str, op: str, impl: str, dims: Mapping[str, int], dtype: str, mode: str,
                    *, spec: Spec | str | None = None, backend: str | None = None) -> dict[str, Any]:
    if not isinstance(profile, Profile):
        profile = read_profile(profile)
    if spec is None:
        try:
            spec = get_spec(profile.spec_id)
        except UserError as exc:
            raise UserError(f"{profile.path}: its spec {profile.spec_id!r} is not a built-in spec; "
                            f"pass the spec file ({exc})") from None
    elif isinstance(spec, str):
        spec = get_spec(spec)
    group = profile.find(op, impl, dtype, mode, backend=backend, family=case_family(op), dims=dims)
    # the group's backend: its host call path enters the achievable terms (analytic/execution.py)
    bounds = resource_bounds(spec, op, impl, dims, dtype, mode, profile.data["spec"].get("prefer", "measured"),
                             backend=group["key"]["backend"] or backend)
    return estimate_from_bounds(profile, group, bounds, spec.id, dims)


def calibrated_estimate(profile: Profile | str, op: str, impl: str, dims: Mapping[str, int], dtype: str,
                        mode: str, *, spec: Spec | str | None = None, backend: str | None = None) -> Estimate:
    d = estimate_detail(profile, op, impl, dims, dtype, mode, spec=spec, backend=backend)
    return Estimate(d["estimate_s"], d["lo_s"], d["hi_s"], d["label"])


def calibrated_estimate_or_reason(profile: Profile | str, op: str, impl: str, dims: Mapping[str, int], dtype: str,
                                  mode: str, *, spec: Spec | str | None = None,
                                  backend: str | None = None) -> tuple[Estimate | None, str | None]:
    """As ``calibrated_estimate``, but an identity the profile does not calibrate gives
    (None, reason) instead of an error, so that a per-op table can say "not calibrated" for that op
    and keep its analytic bound."""
    try:
        return calibrated_estimate(profile, op, impl, dims, dtype, mode, spec=spec, backend=backend), None
    except UserError as exc:
        return None, str(exc)


def sum_estimates(parts: list[tuple[Estimate, float]]) -> Estimate:
    """The estimate of a sequence of ops, each (estimate, count): times add. The interval adds the
    endpoints, i.e. it assumes the ops' errors move together (conservative: independent errors would
    give a narrower interval). The label is "transferred" if any part is, else "calibrated" or
    "pooled" when every part is, else "calibrated + pooled"."""
    if not parts:
        raise UserError("no calibrated estimates to add up")
    est = sum(e.estimate_s * n for e, n in parts)
    lo = sum(e.lo_s * n for e, n in parts)
    hi = sum(e.hi_s * n for e, n in parts)
    labels = {e.label for e, _ in parts}
    label = ("transferred" if "transferred" in labels else labels.pop() if len(labels) == 1
             else "calibrated + pooled")
    return Estimate(est, lo, hi, label)
