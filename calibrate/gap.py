"""The gap report: per case and per family, how far achieved time is from the analytic bound, how
well the calibrated model explains it, and which resource the gap is attributed to.

Numbers and their labels (every printed number carries one):
- *bound* (analytic): max over resources of work / ceiling on the spec (join.py);
- *measured*: the median time per call of the result file;
- *% of roofline* = 100 * bound / measured (100% = the kernel reaches the bound);
- *calibrated* (or *transferred*, when the profile was fitted on another spec): the group's chosen
  model at the case's dims, with its prediction interval;
- *residual* = 100 * (measured / calibrated - 1);
- *CV error*: the leave-shape-out held-out absolute % error (median and p90) of the group's chosen
  form, pooled over a family's groups; *coverage*: the share of held-out cases inside an interval
  built without their shape. Results the profile was not fitted on are true out-of-sample checks:
  their errors are reported as *validation* errors instead.

Attribution of the gap (measured - bound) uses the fitted model's terms: the fixed term t0 * n is
*fixed overhead*; each resource's term minus the part equal to the bound (for the roofline's
bottleneck resource) is that resource's excess, summed into *compute* (tensor, vector, special
function) and *memory* (DRAM). The gap is attributed to the class with the largest positive excess;
what the model does not explain is the residual.

The *achievable estimate* (``analytic/achievable.py``: attained rates, memory latency, per-kernel and
per-call host costs, L2 residency; nothing fitted) is reported beside them, with its own error against
the measurement and its bottleneck class (host/launch, latency, or a resource). The report lists every
case measured faster than the datasheet bound (a true lower bound must never be beaten).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from ..errors import UserError
from ..provenance import analysis_meta
from .defaults import DEFAULT_LEVEL, DEFAULT_MIN_SHAPES, TARGET, TARGET_ALL
from .estimate import USABLE, estimate_from_bounds
from .fit import fit_groups
from .join import RESOURCE_CLASS, RESOURCES, Joined, JoinedCase
from .profile import Profile, build_profile
from .progress import Progress
from .report import dims_text
from .sessions import HOST_BOUND
from .transfer import is_transfer

GAP_SCHEMA_VERSION = 1
# Issue #13's target for the achievable estimate alone: median |error| over all measured cases.
ACHIEVABLE_TARGET_PCT = 25.0
CLASSES = ("compute", "memory", "fixed overhead")


def attribute(terms: dict[str, float], times: dict[str, float]) -> dict[str, Any]:
    """Split the modelled gap (calibrated - bound) into compute, memory and fixed overhead."""
    feats = {r: times.get(r, 0.0) for r in RESOURCES}
    bottleneck = max(feats, key=feats.get)
    excess = {c: 0.0 for c in CLASSES}
    excess["fixed overhead"] = terms.get("fixed", 0.0)
    for r in RESOURCES:
        excess[RESOURCE_CLASS[r]] += terms.get(r, 0.0) - (feats[r] if r == bottleneck else 0.0)
    for r, v in terms.items():  # terms beyond the roofline's resources (achievable_eff: l2)
        if r != "fixed" and r not in RESOURCES:
            excess[RESOURCE_CLASS.get(r, "memory")] += v
    positive = {c: v for c, v in excess.items() if v > 0}
    total = sum(positive.values())
    to = max(positive, key=positive.get) if positive else "none (at or above the bound)"
    shares = {c: (100.0 * positive.get(c, 0.0) / total if total > 0 else 0.0) for c in CLASSES}
    return {"to": to, "excess_s": excess, "share_pct": shares}


def _finite(v):
    return v if v is None or np.isfinite(v) else None


def _case_row(c: JoinedCase, profile: Profile, group: dict | None, spec_id: str, trained: set[str]) -> dict:
    b = c.bounds
    row: dict[str, Any] = {
        "key": c.key, "family": c.family, "op": c.op, "impl": c.impl, "backend": c.backend, "dtype": c.dtype,
        "mode": c.mode, "dims": c.dims, "device": c.device, "device_mismatch": c.device_mismatch,
        "analytic_changed": c.analytic_changed,
        "bound_s": b.bound_s, "bound_times_s": b.times, "bottleneck": b.bottleneck, "unknown_resources": list(b.unknown),
        "measured_s": c.measured_s, "measured_p20_s": c.measured_p20_s, "measured_p80_s": c.measured_p80_s,
        "roofline_pct": 100.0 * b.bound_s / c.measured_s,
        "datasheet_bound_s": b.datasheet_bound_s,
        # as measured (analytic/timed.py: after the timing loop's L2 flush) where the record says how it
        # was timed; the plain steady-state estimate beside it
        "achievable_s": b.achievable_s, "achievable_kind": "as_measured" if b.as_measured else "plain",
        "achievable_plain_s": (b.achievable or {}).get("time_s"),
        "achievable_bottleneck": (b.as_measured or b.achievable or {}).get("bottleneck"),
        # lead_s is infinite where the device never waits for the host (achievable.timed_call_lead): null;
        # chain_s: the sequential chain of the kernel (analytic/chain.py), 0 where none
        "achievable_terms_s": {k: _finite((b.as_measured or b.achievable or {}).get(k))
                               for k in ("host_s", "gpu_s", "fixed_s", "chain_s", "lead_s", "timed_call_extra_s")},
        "achievable_ape_pct": 100.0 * abs(b.achievable_s / c.measured_s - 1.0),
        "group": group["label"] if group else None, "group_status": group["status"] if group else "no group",
        "calibrated_s": None, "lo_s": None, "hi_s": None, "label": None, "residual_pct": None,
        "heldout_pred_s": None, "heldout_ape_pct": None, "covered": None, "error_kind": None, "attribution": None,
    }
    if group is None or group["status"] not in USABLE:
        return row
    e = estimate_from_bounds(profile, group, b, spec_id, c.dims)
    row.update({"calibrated_s": e["estimate_s"], "lo_s": e["lo_s"], "hi_s": e["hi_s"], "label": e["label"],
                "pooled_from": e["pooled_from"], "extrapolated": e["extrapolated"],
                "extrapolated_dims": e["extrapolated_dims"],
                "residual_pct": 100.0 * (c.measured_s / e["estimate_s"] - 1.0),
                "attribution": attribute(e["terms_s"], b.times)})
    if c.source_sha256 in trained:
        held = {(h["key"], h["file_sha256"]): h for h in group["heldout"]}.get((c.key, c.source_sha256))
        if held is not None:
            row.update({"heldout_pred_s": held["heldout_pred_s"], "heldout_ape_pct": held["ape_pct"],
                        "covered": held["covered"],
                        "error_kind": ("cross-validated (leave-shape-out)" if group["status"] == "calibrated" else
                                       "cross-validated (leave-shape-out within the pooled level)")})
    else:
        row.update({"heldout_pred_s": e["estimate_s"],
                    "heldout_ape_pct": 100.0 * abs(e["estimate_s"] / c.measured_s - 1.0),
                    "covered": bool(e["lo_s"] <= c.measured_s <= e["hi_s"]),
                    "error_kind": "validation (results not used in the fit)"})
    return row


def _stats(errors: list[float], covered: list[bool]) -> dict[str, Any]:
    if not errors:
        return {"n": 0, "median_ape_pct": None, "p90_ape_pct": None, "coverage": None, "n_covered": 0}
    e = np.array(errors)
    return {"n": len(errors), "median_ape_pct": float(np.median(e)), "p90_ape_pct": float(np.percentile(e, 90)),
            "coverage": float(np.mean(covered)) if covered else None, "n_covered": int(np.sum(covered))}


def _shortfall(stats: dict, groups: list[dict], rows: list[dict]) -> list[str]:
    why = []
    not_cal = [g for g in groups if g["status"] not in USABLE]
    for g in not_cal:
        why.append(f"not calibrated: {g['reason']}")
    if stats["n"] == 0:
        if not not_cal:
            why.append("no held-out errors")
        return why
    if stats["median_ape_pct"] > TARGET["median_ape_pct"]:
        why.append(f"median |error| {stats['median_ape_pct']:.1f}% > {TARGET['median_ape_pct']:g}%")
    if stats["p90_ape_pct"] > TARGET["p90_ape_pct"]:
        why.append(f"p90 |error| {stats['p90_ape_pct']:.1f}% > {TARGET['p90_ape_pct']:g}%")
    if stats["coverage"] is not None and stats["coverage"] < TARGET["coverage"]:
        why.append(f"interval coverage {100 * stats['coverage']:.0f}% ({stats['n_covered']} of {stats['n']} "
                   f"held-out cases) < {100 * TARGET['coverage']:.0f}%")
    if stats["coverage"] is not None and stats["coverage"] > TARGET["coverage_max"]:
        why.append(f"interval coverage {100 * stats['coverage']:.0f}% ({stats['n_covered']} of {stats['n']} "
                   f"held-out cases) > {100 * TARGET['coverage_max']:.0f}%: the intervals are wider than their level")
    if len(why) > len(not_cal):
        worst = sorted((r for r in rows if r["heldout_ape_pct"] is not None), key=lambda r: -r["heldout_ape_pct"])[:3]
        why.append("largest held-out errors: " + "; ".join(
            f"{r['op']}/{r['impl']} {r['mode']} {dims_text(r['dims'])}: {r['heldout_ape_pct']:.0f}% "
            f"(at {r['roofline_pct']:.0f}% of roofline; {_bottleneck_text(r)})" for r in worst))
    return why


def _bottleneck_text(row: dict) -> str:
    """The case's bottleneck by the achievable estimate (what the evidence says sets its time: a chain, the host,
    a path rate) and by the datasheet bound, where they differ; the bound's alone where there is no estimate."""
    ach, bound = row.get("achievable_bottleneck"), row["bottleneck"]
    if ach is None:
        return f"bottleneck {bound} (bound)"
    return f"bottleneck {ach}" + ("" if ach == bound else f" (achievable estimate; the bound's: {bound})")


def _of_kind(rows: list[dict], kind: str) -> list[dict]:
    """The rows whose held-out error is of ``kind``: "cross" (cross-validated within the fit) or "validation"
    (results the profile was not fitted on)."""
    return [r for r in rows if r["error_kind"] and r["error_kind"].startswith(kind)]


def _family_rows(rows: list[dict], groups: list[dict]) -> list[dict]:
    out = []
    for fam in sorted({r["family"] for r in rows}):
        fr = [r for r in rows if r["family"] == fam]
        fg = [g for g in groups if g["key"]["family"] == fam]
        cv, val = _of_kind(fr, "cross"), _of_kind(fr, "validation")
        cv_stats = _stats([r["heldout_ape_pct"] for r in cv], [r["covered"] for r in cv])
        own = [r for r in cv if r["group_status"] == "calibrated"]
        pooled = [r for r in cv if r["group_status"] == "pooled"]
        val_stats = _stats([r["heldout_ape_pct"] for r in val], [r["covered"] for r in val])
        judged = cv_stats if cv_stats["n"] else val_stats
        why = _shortfall(judged, fg, cv or val)
        attributions = Counter(r["attribution"]["to"] for r in fr if r["attribution"])
        out.append({
            "family": fam, "n_cases": len(fr), "n_groups": len(fg),
            "n_calibrated": sum(g["status"] == "calibrated" for g in fg),
            "n_pooled": sum(g["status"] == "pooled" for g in fg),
            "roofline_pct_median": float(np.median([r["roofline_pct"] for r in fr])),
            "cv": cv_stats, "validation": val_stats,
            "cv_calibrated": _stats([r["heldout_ape_pct"] for r in own], [r["covered"] for r in own]),
            "cv_pooled": _stats([r["heldout_ape_pct"] for r in pooled], [r["covered"] for r in pooled]),
            "gap_mostly": attributions.most_common(1)[0][0] if attributions else None,
            "gap_attribution_counts": dict(attributions),
            "meets_target": not why, "shortfall": why,
        })
    return out


def _overall(rows: list[dict]) -> dict[str, Any]:
    """Held-out errors over every group: of the groups calibrated on their own, of the pooled ones,
    and of both, against TARGET_ALL (printed, not enforced); and ``validation``: the cases of results the
    profile was not fitted on (another session's, or another device's under a transferred profile), each
    predicted by the whole profile."""
    cv, val = _of_kind(rows, "cross"), _of_kind(rows, "validation")
    parts = {"calibrated": [r for r in cv if r["group_status"] == "calibrated"],
             "pooled": [r for r in cv if r["group_status"] == "pooled"], "all": cv, "validation": val}
    out: dict[str, Any] = {k: _stats([r["heldout_ape_pct"] for r in rs], [r["covered"] for r in rs])
                           for k, rs in parts.items()}
    out["n_cases"] = len(rows)
    out["n_without_estimate"] = sum(1 for r in rows if r["calibrated_s"] is None)
    out["target"] = TARGET_ALL
    return out


def _by_pace(rows: list[dict], profile: Profile) -> dict[str, Any]:
    """Held-out errors split by what sets a case's pace: *host-bound* where the achievable estimate's
    bottleneck is host/launch (the host issues the call slower than the GPU runs it), *GPU-bound*
    otherwise. The two are judged apart because their measurements repeat differently: a host-bound
    time is the Python and driver path of one CPU, which moves between measurement sessions (the
    profile's ``host_sessions``: log sd of a host-bound case's time between sessions) by far more than
    the GPU-bound times do; that spread is a floor no model of the host can beat on these measurements,
    while the GPU-bound cases judge the model of the device. Per family, against TARGET."""
    cv = _of_kind(rows, "cross")

    def split(rs: list[dict]) -> dict[str, Any]:
        out = {}
        for pace, keep in (("gpu", lambda r: r["achievable_bottleneck"] != HOST_BOUND),
                           ("host", lambda r: r["achievable_bottleneck"] == HOST_BOUND)):
            part = [r for r in rs if keep(r)]
            out[pace] = _stats([r["heldout_ape_pct"] for r in part], [r["covered"] for r in part])
        g = out["gpu"]
        out["gpu_meets_target"] = bool(g["n"]) and (
            g["median_ape_pct"] <= TARGET["median_ape_pct"] and g["p90_ape_pct"] <= TARGET["p90_ape_pct"]
            and TARGET["coverage"] <= g["coverage"] <= TARGET["coverage_max"])
        return out

    val = _of_kind(rows, "validation")
    return {"rule": "host-bound: the achievable estimate's bottleneck is host/launch; GPU-bound: any other",
            "host_sessions": profile.data.get("host_sessions"), "target": TARGET,
            "all": split(cv),
            "families": [{"family": f, **split([r for r in cv if r["family"] == f])}
                         for f in sorted({r["family"] for r in cv})],
            # the cases of results the profile was not fitted on (a transferred profile's are all such)
            "validation": split(val)}


def _achievable_summary(rows: list[dict]) -> dict[str, Any]:
    """How far the achievable estimate alone (no fitted parameter) is from the measurements, overall and
    per family, and the cases that ran faster than the datasheet bound (beyond the timing noise: the
    measured p80 is below the bound), which a true lower bound must never allow."""
    def stats(rs: list[dict]) -> dict[str, Any]:
        e = np.array([r["achievable_ape_pct"] for r in rs if np.isfinite(r["achievable_ape_pct"])])
        signed = np.array([r["achievable_s"] / r["measured_s"] for r in rs if np.isfinite(r["achievable_s"])])
        if not len(e):
            return {"n": 0, "median_ape_pct": None, "p90_ape_pct": None, "median_ratio": None}
        return {"n": int(len(e)), "median_ape_pct": float(np.median(e)), "p90_ape_pct": float(np.percentile(e, 90)),
                "median_ratio": float(np.median(signed))}
    below = [{"key": r["key"], "measured_s": r["measured_s"], "measured_p80_s": r["measured_p80_s"],
              "datasheet_bound_s": r["datasheet_bound_s"]} for r in rows
             if r["datasheet_bound_s"] and (r["measured_p80_s"] or r["measured_s"]) < r["datasheet_bound_s"]]
    bound_e = [100.0 * abs(r["datasheet_bound_s"] / r["measured_s"] - 1) for r in rows if r["datasheet_bound_s"]]
    as_measured = sum(1 for r in rows if r.get("achievable_kind") == "as_measured")
    plain = [100.0 * abs(r["achievable_plain_s"] / r["measured_s"] - 1) for r in rows
             if r.get("achievable_plain_s") is not None]
    return {"label": "achievable estimate (analytic, parameters from the spec; no fit)",
            "basis": f"as measured (analytic/timed.py: the steady state of the timing loop with the timed call's fixed "
                     f"device time after the L2 flush) for "
                     f"{as_measured} of {len(rows)} cases whose records carry their timing settings, else the "
                     f"plain steady-state estimate",
            "plain_median_ape_pct": float(np.median(plain)) if plain else None,
            "target_median_ape_pct": ACHIEVABLE_TARGET_PCT,
            "all": stats(rows), "families": {f: stats([r for r in rows if r["family"] == f])
                                             for f in sorted({r["family"] for r in rows})},
            "bottlenecks": dict(Counter(r["achievable_bottleneck"] for r in rows)),
            "datasheet_bound_median_ape_pct": float(np.median(bound_e)) if bound_e else None,
            "faster_than_datasheet_bound": below}


def gap_report(joined: Joined, profile: Profile, spec_id: str, fitted_here: bool) -> dict[str, Any]:
    transferred = is_transfer(profile.spec_id, spec_id)
    trained = profile.result_hashes() if not transferred else set()
    group_by = profile.data["settings"].get("group_by", "op")
    rows = []
    used_groups: dict[str, dict] = {}
    for c in joined.cases:
        try:
            g = profile.find(c.op, c.impl, c.dtype, c.mode, backend=c.backend, family=c.family, dims=c.dims)
        except UserError as exc:  # a case the profile does not cover is reported, not fatal
            g = {"label": f"{c.op}/{c.impl} [{c.backend}] {c.dtype} {c.mode}", "status": "not_in_profile",
                 "reason": str(exc), "key": {"family": c.family}}
        used_groups[g["label"]] = g
        rows.append(_case_row(c, profile, g, spec_id, trained))
    groups = list(used_groups.values())
    return {
        "schema_version": GAP_SCHEMA_VERSION, "kind": "ssmbench.gap_report", "meta": analysis_meta(),
        "spec": {"id": joined.spec_id, "name": joined.spec_name, "prefer": joined.prefer, "ceilings": joined.ceilings},
        "calibration": {"path": profile.path, "spec_id": profile.spec_id, "fitted_here": fitted_here,
                        "transferred": transferred, "level": profile.level, "group_by": group_by},
        "results": joined.files, "devices": joined.devices, "device_mismatch": joined.device_mismatch,
        "target": TARGET,
        "achievable": _achievable_summary(rows),
        "families": _family_rows(rows, groups),
        "overall": _overall(rows),
        "by_pace": _by_pace(rows, profile),
        "groups": [{k: g.get(k) for k in ("label", "key", "status", "reason", "n_points", "n_shapes", "pooled_from",
                                          "shrinkage", "model", "cv", "interval", "candidates", "dim_ranges")}
                   for g in groups],
        "cases": rows,
        "excluded": joined.excluded,
    }


def fit_profile_for_gap(joined: Joined, level: float = DEFAULT_LEVEL, min_shapes: int = DEFAULT_MIN_SHAPES,
                        group_by: str = "op", progress: Progress | None = None) -> Profile:
    """A profile fitted on the report's own results (no file): groups that cannot be fitted stay in
    it as not calibrated, so that bounds and measurements are still reported."""
    groups = fit_groups(joined, level, min_shapes, group_by, progress)
    settings = {"level": level, "min_shapes": min_shapes, "group_by": group_by}
    return Profile(build_profile(joined, groups, settings), "<fitted for this report>")
