"""Calibrated estimates added to a prediction (``ssmbench predict --calibration``).

``add_calibration`` takes a prediction of ``ssmbench.analytic.workloads.report.predict`` (plain data)
and a calibrated profile. Per op row: the profile's fitted model for the row's (op, implementation,
dtype, mode) evaluated on the per-resource bound times of the row's shape (``estimate``; the
profile's ceiling choice, as-executed bytes), times the call count; the interval is the profile's
prediction interval times the count. Label "calibrated", or "transferred" (wider interval) when the
spec is not the profile's. A decode at a mean context that is not a whole number is estimated at the
nearest one (the row says so): the calibrated model is not affine in the context, so this is an
approximation of the mean step, not a bound. The total adds the rows: estimates and interval ends
add (``sum_estimates``: the ops' errors are taken to move together); rows the profile does not cover
add their analytic bound, which has no upper end, so the total then has none either. Capacity is not
applied to the calibrated total (it is the time of a step that may not fit; its notes say so).
"""

from __future__ import annotations

from ..errors import UserError
from .estimate import Estimate, estimate_detail, sum_estimates
from .transfer import TRANSFER_RULE
from .transfer import label as transfer_label

SUM_RULE = ("per-op intervals added end to end (the ops' errors assumed to move together, which gives a "
            "wider interval than independent errors would)")
BOUND_PART_RULE = ("op calls the profile does not cover add their analytic bound: a lower bound, so the "
                   "total has no upper end")


def _reason(text: str, path: str) -> str:
    """A reason without the profile path in front and the list of what the profile holds behind
    (``calibrate.profile.Profile.find`` writes both): the output names the profile and lists its
    groups once, in ``calibration``."""
    prefix = f"{path}: "
    text = text[len(prefix):] if text.startswith(prefix) else text
    return text.split("; the profile holds: ")[0]


def _calibrate_row(o: dict, profile, spec, dtype: str, backend: str | None):
    """(per-call Estimate, row fields) for one op row, or (None, row fields) where not calibrated."""
    dims = {k: int(round(v)) for k, v in o["shape"].items()}
    # decode with --context runs at the mean context, which need not be a whole number of tokens
    rounded = [f"{k} = {o['shape'][k]:g} rounded to {v}" for k, v in dims.items() if v != o["shape"][k]]
    try:
        d = estimate_detail(profile, o["op"], o["impl"], dims, dtype, o["mode"], spec=spec, backend=backend)
    except UserError as exc:
        return None, {"calibrated": None, "calibration_note": _reason(str(exc), profile.path)}
    n = o["count"]
    notes = []
    if d["extrapolated"]:
        notes.append("extrapolated: " + "; ".join(d["extrapolation"]))
    if d["pooled_from"]:
        notes.append(f"pooled: the group has too few shapes of its own; estimated from {d['pooled_from']['label']}")
    if rounded:
        notes.append("evaluated at " + ", ".join(rounded))
    if d["device_mismatch"]:
        notes.append("the group was fitted on results from a device other than the profile's spec")
    fields = {"calibrated": {
        "estimate_s": d["estimate_s"] * n, "lo_s": d["lo_s"] * n, "hi_s": d["hi_s"] * n,
        "label": d["label"], "level": d["level"], "per_call_s": d["estimate_s"], "count": n,
        "level_guaranteed": d["level_guaranteed"], "interval_rule": d["interval_rule"],
        "extrapolated": d["extrapolated"], "extrapolated_dims": d["extrapolated_dims"],
        "pooled_from": d["pooled_from"], "group": d["group"], "model": d["model"], "cv": d["cv"],
        "device_mismatch": d["device_mismatch"], "terms_per_call_s": d["terms_s"],
        "device_per_call_s": d["device_s"]},
        "calibration_note": "; ".join(notes) or None}
    return Estimate(d["estimate_s"], d["lo_s"], d["hi_s"], d["label"]), fields


def _calibrated_energy(profile, spec, t: dict, est_s: float | None) -> dict:
    """The step's energy with the profile's energy section (``energy_profile.step_energy``) at the calibrated
    time estimate (the achievable time where there is none), or a note why there is none."""
    from .energy_profile import step_energy
    section = profile.data.get("energy") or {}
    counts = (t.get("energy") or {}).get("counts")
    if "per_term" not in section:
        return {"label": None, "note": section.get("note") or "the profile has no energy section (energy-fit --out "
                                                              "or calibrate on results with energy windows writes one)"}
    if profile.spec_id != spec.id:
        return {"label": None, "note": f"not applied: the profile's energies were fitted on {profile.spec_id}, not "
                                       f"{spec.id} (energy per operation does not transfer between devices)"}
    if counts is None:
        return {"label": None, "note": "no counts: the spec has no energy section"}
    time_s = est_s if est_s else t["achievable"]["time_s"]
    out = step_energy(section, counts, time_s, t.get("tokens"))
    out["time_basis"] = "calibrated time estimate" if est_s else "achievable time (no calibrated time)"
    return out


def add_calibration(r: dict, profile, spec, backends: dict[str, str] | None = None) -> dict:
    """Add calibrated estimates to a prediction ``r`` of ``predict`` (in place; returns ``r``).

    Each op row gets ``calibrated`` ({estimate_s, lo_s, hi_s, label, level, ...}: the profile's model
    for the row's (op, implementation, dtype, mode[, backend]) at the row's shape on ``spec``, times
    the row's call count; label "calibrated", or "transferred" when ``spec`` is not the profile's
    spec) or ``calibrated: null`` and ``calibration_note`` with the reason; the row keeps its
    analytic bound either way. ``total.calibrated`` sums them (``calibrate.estimate.sum_estimates``)
    and adds the analytic bound of the rows not covered; ``calibration`` names the profile.
    ``backends`` (op -> backend) picks a group where the profile calibrates an op with several; without
    one, a row's own ``backend`` (the backend its plan's modules call) picks it.
    """
    backends = dict(backends or {})
    stray = sorted(set(backends) - {o["op"] for o in r["ops"]})
    if stray:
        raise UserError(f"--calibration-backend names op(s) {', '.join(stray)}, which this prediction does not "
                        f"run; its ops: {', '.join(sorted({o['op'] for o in r['ops']}))}")
    parts, bound_part, bound_calls, uncovered, unbounded = [], 0.0, 0, [], []
    for o in r["ops"]:
        # a row whose plan names the backend its modules call (phases.SDPA_BACKEND) takes that backend's group
        est, fields = _calibrate_row(o, profile, spec, r["dtype"], backends.get(o["op"]) or o.get("backend"))
        o.update(fields)
        if est is not None:
            parts.append((est, o["count"]))
        elif o["time_s"] is None:
            unbounded.append(o["label"])
        else:
            uncovered.append(o["label"])
            bound_part += o["time_s"]
            bound_calls += o["count"]
    cal = sum_estimates(parts) if parts else None
    t = r["total"]
    complete = not uncovered and not unbounded
    known = not unbounded
    est_s = ((cal.estimate_s if cal else 0.0) + bound_part) if known else None
    label = cal.label if cal else "analytic bound"
    if cal and not complete:
        label += " + analytic bound"
    notes = [SUM_RULE] + ([BOUND_PART_RULE] if uncovered else [])
    if unbounded:
        notes.append(f"no total: {', '.join(unbounded)} have neither a calibrated estimate nor an analytic bound")
    if not t["fits"]:
        notes.append("ignoring capacity: the step does not fit in device memory")
    t["calibrated"] = {
        "label": label, "level": profile.level,
        "estimate_s": est_s,
        "lo_s": ((cal.lo_s if cal else 0.0) + bound_part) if known else None,
        "hi_s": cal.hi_s if complete and cal else None,
        "calibrated_part": None if cal is None else {
            "estimate_s": cal.estimate_s, "lo_s": cal.lo_s, "hi_s": cal.hi_s, "label": cal.label,
            "level": profile.level, "op_calls": sum(n for _, n in parts)},
        "bound_part_s": bound_part, "bound_part_op_calls": bound_calls,
        "not_covered": uncovered, "not_bounded": unbounded,
        "tokens_per_s": (t["tokens"] / est_s) if est_s and t["fits"] else None,
        "time_per_token_s": (est_s / t["tokens"]) if est_s is not None else None,
        "notes": notes,
    }
    from .runtime_step import compose
    compose(r)  # under a runtime: the step composed from calibrated device times and the runtime's host
    target = transfer_label(profile.spec_id, spec.id)
    # the calibrated time where the profile calibrates some op of the step (an all-bound sum is a lower bound):
    # the step's, after compose, so that a host-paced step pays static power for its whole time, not its ops' sum
    t["calibrated"]["energy"] = _calibrated_energy(profile, spec, t, t["calibrated"]["estimate_s"] if cal else None)
    held = sorted({f"{g['key']['op']}/{g['key']['impl']} {g['key']['dtype']} {g['key']['mode']} ({g['key']['backend']})"
                   + (f" [pooled from {g['pooled_from']['level']}]" if g["status"] == "pooled" else "")
                   for g in profile.groups if g["status"] in ("calibrated", "pooled")})
    r["calibration"] = {
        "profile": profile.path, "profile_spec": profile.spec_id, "target_spec": spec.id, "label": target,
        "level": profile.level, "prefer": profile.data["spec"].get("prefer", "measured"),
        "created_utc": (profile.data.get("meta") or {}).get("created_utc"),
        "results": [{"path": f["path"], "sha256": f["sha256"]} for f in profile.data["provenance"]["results"]],
        "backends": backends, "holds": held,
        "note": (f"calibrated estimates: the profile's fitted model per (op, implementation, dtype, mode) applied "
                 f"to each call's per-resource bound times on {spec.id} (ceilings: the profile's choice, "
                 f"{profile.data['spec'].get('prefer', 'measured')}; as-executed bytes), times the call count; "
                 f"intervals at {100 * profile.level:.0f}% from held-out residuals"
                 + (f"; {TRANSFER_RULE} (the profile was fitted on {profile.spec_id})"
                    if target == "transferred" else "")),
    }
    return r
