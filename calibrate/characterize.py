"""Characterization of whole models (issue #15): measured model records (``measure/models``) held
against their prediction, per part of the step, with the bottleneck class of each part and the
hardware change that would move it.

For each model record (status ok) the prediction of the same workload file, phase, batch and length
on the spec is made with the record's runtime (``analytic/runtime.py``): the **achievable estimate**
of the step (``total.achievable.time_s``) and, given a profile, the **calibrated estimate**
(``total.calibrated.estimate_s``). Errors are prediction / measurement - 1.

Parts (``measure/models/kernel_map.PARTS``): measured time per part is the profiler's kernel time per
step; predicted time per part is the achievable device time (``gpu_s``) of the plan's op calls in
that part (``kernel_map.PART_OF_OP``). A pseudo-part ``host`` holds the time the GPU waits for the
host: measured, the timed step minus the summed kernel time (``profile.host_idle_s``); predicted,
max(0, host - device) of the achievable step. Shares are of the step time on each side.

Bottleneck class of a part, the same rule on both sides, from the fraction of each roofline it
reaches: the analytic bound of the part's ops per resource at the spec's attained ceilings (op rows'
``bound_s``: tensor, vector, special_function, dram, cache) divided by the part's time (measured, or
predicted: the best device-time prediction of the part, its ops' calibrated device times where the
profile calibrates them (``runtime_step.device_s``: the host share of an isolated eager call taken out,
as ``calibrate/runtime_step.py`` composes the calibrated step), else their achievable device time,
``CLASS_BASIS``). The DRAM roof of bytes that ATen's non-vectorized kernels move (a broadcast
elementwise op, a dtype-converting or strided copy, a last-dimension reduction: ``Cost.path``) is
their path's attained bandwidth (``memory.dram.path.<p>``, measured on those kernels), not the copy
bandwidth: such a kernel issues one element per load per thread and cannot stream faster, so at its
path's rate it is at its DRAM roof (the op row's DRAM bound x ``achievable.dram_path_factor``). The part is bound by the resource with the largest fraction when that
fraction is at least ``ROOFLINE_FRACTION_BOUND``. Else, where the SM's compute engines together reach
it (the sum of the tensor, vector and special-function fractions: their instructions share the SMs'
issue slots, and a kernel that runs its GEMMs and its exponentials one after another on the same warps,
as attention's softmax between its two GEMMs, is busy for the sum of the phases), the part is bound by
the engine with the largest fraction: attention at 0.49 of the tensor roof and 0.41 of the
special-function roof keeps the SMs ~90% busy, and more FLOP/s is what would speed it up. Below that,
no resource is near its roof and the part is ``latency``-bound (fixed per-kernel costs, dependency
chains, memory latency).
The ``host`` part is ``host/launch``. Parts only measured (memcpy, unmapped kernels)
have no predicted class: they count as disagreement. Agreement = the measured share of the step in
parts whose predicted and measured classes are equal.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

from ..errors import UserError
from ..measure.models.kernel_map import measured_profile
from .runtime_host import FORWARD_KEYS, HOST_BOUND_SHARE, KEYS
from .runtime_step import device_s, replays_graph

LABEL_MEASURED = "measurement"
# A part runs "at" a roof when it reaches at least this fraction of that resource's attained rate.
ROOFLINE_FRACTION_BOUND = 0.5
ROOF_RESOURCES = ("tensor", "vector", "special_function", "dram", "cache")
# The SM's compute engines: their instructions share the SMs' issue slots, and in a kernel whose phases run
# one after another on the same warps (execution.Traits.engines) their times add
ENGINES = ("tensor", "vector", "special_function")
HOST_PART = "host"
# The predicted time a part's predicted class is judged at: the sum of its ops' calibrated device times where the
# profile calibrates them (``runtime_step.device_s``; the others at their achievable device time), else the
# achievable device time
CLASS_BASIS = ("calibrated estimate, device share (calibrated x gpu / max(host_eager, gpu), as the calibrated step "
               "composes it; achievable device time for ops the profile does not cover)",
               "achievable estimate (device time)")
# What hardware (or software) change would move a part out of each class.
REQUIREMENT = {
    "tensor": "more tensor-core throughput at the dtype (FLOP/s); bandwidth does not help",
    "vector": "more CUDA-core fp32 throughput (or moving the work to tensor cores)",
    "special_function": "more special-function (exp, softplus) throughput",
    "dram": "more DRAM bandwidth, or less traffic (fusion, state kept on chip)",
    "cache": "more L2 bandwidth",
    "latency": "lower per-kernel fixed cost and memory latency, fewer or fused kernels, shorter dependency "
               "chains; more bandwidth or FLOP/s does not help",
    "host/launch": "a faster host path (CUDA graphs, a compiled runtime, a faster CPU); no GPU resource helps",
}
HELD_OUT_RULE = ("leave one model out: each record predicted with " + ", ".join(KEYS) + " derived "
                 "(calibrate/runtime_host.py) from the other models' records only, and the spec's "
                 + ", ".join(FORWARD_KEYS) + " (read off op-level block cases, no model record); the calibrated "
                 "profile was fitted on op-level kernel cases, none of them a whole model")
# Energy of a step, two predictions beside the measured window (``energy_row``): the analytic estimate
# at the achievable time (``total.energy_j``), and the energy model alone at the measured window time
# (static power x that time + the prediction's dynamic terms), which judges the energy model without the
# time model's error; with a profile that has an energy section, the calibrated energies at the measured
# time too (``energy_profile.step_energy``), and the calibrated energy the prediction itself gives, at its
# calibrated step time (``apply._calibrated_energy``: the energy a user is told before any measurement).
ENERGY_AT_MEASURED = ("analytic estimate at the measured time: static power x the window's time per call + the "
                      "step's dynamic energy per term (analytic/energy.py)")
ENERGY_NONE = "not available: the spec has no energy section, or the record no energy window"
# the energy predictions beside each record, as ``summarize`` names them -> what each is
ENERGY_KINDS = {"energy": "analytic estimate at the achievable time",
                "energy_at_measured_time": "analytic estimate at the measured time",
                "energy_calibrated_at_measured_time": "calibrated estimate at the measured time",
                "energy_calibrated": "calibrated estimate at the calibrated time (the prediction's own)"}


def roof_class(bounds: dict[str, float], time_s: float) -> tuple[str | None, dict[str, float]]:
    """(class, fraction per resource) of work with analytic ``bounds`` per resource run in ``time_s``
    (the rule of the module docstring: one resource at ``ROOFLINE_FRACTION_BOUND`` of its roof, or the
    SM's engines together at it)."""
    if not time_s or time_s <= 0:
        return None, {}
    frac = {r: bounds[r] / time_s for r in ROOF_RESOURCES if bounds.get(r)}
    if not frac:
        return "latency", {}
    best = max(frac, key=frac.get)
    if frac[best] >= ROOFLINE_FRACTION_BOUND:
        return best, frac
    engines = {r: frac[r] for r in ENGINES if r in frac}
    if engines and sum(engines.values()) >= ROOFLINE_FRACTION_BOUND:
        return max(engines, key=engines.get), frac
    return "latency", frac


def _predicted_parts(r: dict) -> dict[str, dict[str, Any]]:
    from ..measure.models.kernel_map import part_of_op

    parts: dict[str, dict[str, Any]] = {}
    graph = replays_graph(r)
    for o in r["ops"]:
        p = parts.setdefault(part_of_op(o["op"], o.get("impl")), {"gpu_s": 0.0, "class_s": 0.0, "calibrated_ops": 0,
                                                                  "bounds": {k: 0.0 for k in ROOF_RESOURCES}, "ops": []})
        p["gpu_s"] += float(o["achievable"]["gpu_s"])
        cal = o.get("calibrated")
        p["class_s"] += device_s(o, graph) if cal else float(o["achievable"]["gpu_s"])
        p["calibrated_ops"] += 1 if cal else 0
        for k in ROOF_RESOURCES:
            p["bounds"][k] += float((o.get("bound_s") or {}).get(k) or 0.0) * (
                float(o["achievable"].get("dram_path_factor") or 1.0) if k == "dram" else 1.0)
        if o["op"] not in p["ops"]:
            p["ops"].append(o["op"])
    return parts


def characterize_record(rec: dict, prediction: dict) -> dict[str, Any]:
    """The rows of one measured record against its prediction (``report.predict``'s dict, with
    ``total.calibrated`` when a profile was applied)."""
    t = prediction["total"]
    ach = t["achievable"]
    meas = float(rec["time_s"]["median"])
    pred_parts = _predicted_parts(prediction)
    # the measured parts under the current kernel table (a rule added since the run applies to it too)
    prof = measured_profile(rec)
    m_parts = {k: dict(v) for k, v in (prof.get("parts") or {}).items()}
    if prof.get("unmapped", {}).get("time_s"):
        m_parts["unmapped"] = {"time_s": prof["unmapped"]["time_s"]}
    rows = []
    for part in sorted(set(pred_parts) | set(m_parts)):
        pp, mp = pred_parts.get(part), m_parts.get(part)
        bounds = pp["bounds"] if pp else {}
        p_cls, _ = roof_class(bounds, pp["class_s"]) if pp else (None, {})
        m_time = mp["time_s"] if mp else 0.0
        m_cls, m_frac = roof_class(bounds, m_time) if (mp and pp) else (None, {})
        rows.append({"part": part, "ops": pp["ops"] if pp else [],
                     "predicted_s": pp["gpu_s"] if pp else None, "measured_s": m_time if mp else None,
                     "predicted_share": pp["gpu_s"] / ach["time_s"] if pp and ach["time_s"] else None,
                     "measured_share": m_time / meas if mp else None,
                     "predicted_class": p_cls, "measured_class": m_cls,
                     "predicted_class_basis": None if not pp else (
                         CLASS_BASIS[0] if pp["calibrated_ops"] else CLASS_BASIS[1]),
                     "measured_roof_fraction": m_frac, "requirement": REQUIREMENT.get(m_cls or p_cls or "", None)})
    host_pred = max(0.0, ach["host_s"] - ach["gpu_s"])
    host_meas = prof.get("host_idle_s")
    rows.append({"part": HOST_PART, "ops": [], "predicted_s": host_pred, "measured_s": host_meas,
                 "predicted_class_basis": CLASS_BASIS[1],
                 "predicted_share": host_pred / ach["time_s"] if ach["time_s"] else None,
                 "measured_share": host_meas / meas if host_meas is not None else None,
                 "predicted_class": "host/launch", "measured_class": "host/launch" if host_meas is not None else None,
                 "measured_roof_fraction": {}, "requirement": REQUIREMENT["host/launch"]})
    measured_total = sum(x["measured_share"] or 0.0 for x in rows)
    agreed = sum(x["measured_share"] or 0.0 for x in rows
                 if x["predicted_class"] and x["predicted_class"] == x["measured_class"])
    cal = t.get("calibrated") or None
    cal_s = cal.get("estimate_s") if cal else None
    energy = rec.get("energy") or {}
    return {
        "key": rec["key"], "model": rec["model"], "runner": rec["runner"], "phase": rec["phase"],
        "runtime": rec["runtime"], "batch": rec["batch"], "seqlen": rec["seqlen"],
        "measured_s": meas, "measured_label": LABEL_MEASURED,
        "measured_pace": None if host_meas is None else ("host" if host_meas / meas >= HOST_BOUND_SHARE else "gpu"),
        "achievable_s": ach["time_s"], "achievable_error": ach["time_s"] / meas - 1,
        "achievable_host_s": ach["host_s"], "achievable_gpu_s": ach["gpu_s"],
        "calibrated_s": cal_s, "calibrated_error": (cal_s / meas - 1) if cal_s else None,
        "calibrated_note": None if cal_s else ("no calibration profile given" if cal is None else
                                               "the profile covers none of the model's ops"),
        "not_modelled": sorted(ach.get("not_modelled") or {}),
        "energy_measured_j": energy.get("joules_per_call"), "avg_power_w": energy.get("avg_power_w"),
        **energy_row(energy, t, prediction.get("calibration_energy")),
        "clock_sm_mhz": ((rec.get("clocks") or {}).get("after") or {}).get("sm_clock_mhz"),
        "class_agreement_share": agreed / measured_total if measured_total > 0 else None,
        "parts": rows,
    }


def energy_row(window: dict, t: dict, section: dict | None) -> dict[str, Any]:
    """The energy columns of one record (the rule above ``ENERGY_AT_MEASURED``); ``window`` the record's
    energy window, ``t`` the prediction's total, ``section`` a profile's energy section or None."""
    e = t.get("energy") or {}
    meas, wall = window.get("joules_per_call"), window.get("wall_s_per_call")
    out = {"energy_predicted_j": None, "energy_error": None, "energy_at_measured_time_j": None,
           "energy_at_measured_time_error": None, "energy_calibrated_at_measured_time_j": None,
           "energy_calibrated_at_measured_time_error": None, "energy_calibrated_j": None,
           "energy_calibrated_error": None, "energy_note": ENERGY_NONE}
    if not e.get("label") or not meas or not wall:
        return out
    static_w = e["static_j"] / e["time_s_after_power_limit"] if e["time_s_after_power_limit"] else 0.0
    dyn = sum(e["dynamic_j"].values())
    limit = e.get("power_limit_w") or float("inf")
    at_meas = min(static_w * wall + dyn, limit * wall)  # a window at the limit: the time is already stretched
    out.update(energy_predicted_j=t["energy_j"], energy_error=t["energy_j"] / meas - 1 if t["energy_j"] else None,
               energy_at_measured_time_j=at_meas, energy_at_measured_time_error=at_meas / meas - 1,
               energy_note=f"{e['label']} at the achievable time; {ENERGY_AT_MEASURED}")
    if section and "per_term" in section:
        from .energy_profile import step_energy
        c = step_energy(section, e["counts"], wall)
        cal = min(c["energy_j"], float(section["power_limit_w"]) * wall)
        out.update(energy_calibrated_at_measured_time_j=cal, energy_calibrated_at_measured_time_error=cal / meas - 1)
    predicted = ((t.get("calibrated") or {}).get("energy") or {}).get("energy_j")
    if predicted:
        out.update(energy_calibrated_j=predicted, energy_calibrated_error=predicted / meas - 1)
    return out


def _stats(errors: Iterable[float | None]) -> dict[str, Any]:
    e = np.abs([x for x in errors if x is not None and math.isfinite(x)])
    if e.size == 0:
        return {"n": 0, "median_abs": None, "p90_abs": None}
    return {"n": int(e.size), "median_abs": float(np.median(e)), "p90_abs": float(np.percentile(e, 90))}


def summarize(rows: list[dict]) -> dict[str, Any]:
    """Error statistics per phase (|prediction / measurement - 1|), the calibrated ones also per phase and
    measured pace (``by_pace``: *host* where the GPU idled for at least HOST_BOUND_SHARE of the measured step,
    else *gpu*; a record without a profile has no pace), and the class agreement weighted by measured time
    share over all records."""
    out: dict[str, Any] = {"by_phase": {}, "by_pace": {}, "host_bound_share": HOST_BOUND_SHARE}
    for phase in sorted({r["phase"] for r in rows}):
        sel = [r for r in rows if r["phase"] == phase]
        out["by_phase"][phase] = {"achievable": _stats(r["achievable_error"] for r in sel),
                                  "calibrated": _stats(r["calibrated_error"] for r in sel),
                                  "energy": _stats(r["energy_error"] for r in sel),
                                  "energy_at_measured_time": _stats(r["energy_at_measured_time_error"] for r in sel),
                                  "energy_calibrated_at_measured_time":
                                      _stats(r["energy_calibrated_at_measured_time_error"] for r in sel),
                                  "energy_calibrated": _stats(r["energy_calibrated_error"] for r in sel)}
        out["by_pace"][phase] = {pace: _stats(r["calibrated_error"] for r in sel if r.get("measured_pace") == pace)
                                 for pace in ("gpu", "host")}
    out["energy"] = {k: _stats(r[f"{k}_error"] for r in rows)
                     for k in ENERGY_KINDS}
    w = [(r["class_agreement_share"], r["measured_s"]) for r in rows if r["class_agreement_share"] is not None]
    out["class_agreement_time_weighted"] = (sum(a * t for a, t in w) / sum(t for _, t in w)) if w else None
    out["targets"] = {"time_median_abs": 0.10, "time_p90_abs": 0.20, "energy_median_abs": 0.15,
                      "class_agreement": 0.90}
    return out


def leave_one_out(times: list[float]) -> list[float]:
    """Each record of one key against the median of the key's other records: t_i / median(t_j, j != i) - 1.
    The same code, shape and machine kind measured again: how far any prediction of a single record must
    expect to land from it (keys with three records or more)."""
    return [t / float(np.median(times[:i] + times[i + 1:])) - 1 for i, t in enumerate(times)]


def repeats(spread_rows: list[dict]) -> dict[str, Any]:
    """The keys measured more than once (``measure.models.records.repeat_spread`` rows with n >= 2) and,
    per pace, how far their repeats lie apart: *host-bound* where the GPU waited for the host at least
    HOST_BOUND_SHARE of the step (the step is the host's issue time), else *GPU-bound*. A measurement; it
    is the floor under any model-level error judged on single records: a prediction cannot agree with two
    records of one key better than they agree with each other."""
    rows = [r for r in spread_rows if r["n"] >= 2]
    by_pace: dict[str, Any] = {}
    for pace in ("gpu", "host"):
        keys = [r for r in rows if r["spread"] is not None
                and ((r["idle_share"] or 0.0) >= HOST_BOUND_SHARE) == (pace == "host")]
        sel = [r["spread"] for r in keys]
        by_pace[pace] = {"n_keys": len(sel), "median_spread": float(np.median(sel)) if sel else None,
                         "max_spread": max(sel) if sel else None,
                         "leave_one_out": _stats(x for r in keys if r["n"] >= 3 for x in leave_one_out(r["in_order_s"]))}
    return {"label": "measurement: repeated records of one key", "host_bound_share": HOST_BOUND_SHARE,
            "rows": rows, "by_pace": by_pace}


def characterize(records: list[dict], spec_for, profile=None, held_out: bool = False) -> dict[str, Any]:
    """Characterize every ok record. ``spec_for(record)`` returns the spec to predict on; ``profile``
    a calibrated profile (``calibrate.profile.read_profile``) or None. Records whose workload the
    analytic model cannot cost are listed under ``not_predicted`` with the reason. ``held_out``: each
    record is predicted on its spec with the runtime terms measured from whole-model records
    (``calibrate/runtime_host.py``) re-derived from the OTHER models' records only (leave one model
    out), so that no record's own time feeds its prediction."""
    from .runtime_host import predict_record

    rows, skipped, terms = [], [], {}
    host_rows = None
    if held_out:
        from .runtime_host import rows_of
        host_rows = rows_of([r for r in records if r["status"] == "ok"], spec_for)
    for rec in sorted(records, key=lambda r: r["key"]):
        if rec["status"] != "ok":
            skipped.append({"key": rec["key"], "status": rec["status"], "reason": rec.get("reason")})
            continue
        try:
            spec = spec_for(rec)
            if host_rows is not None:
                from .runtime_host import held_out_spec
                spec, used = held_out_spec(spec, host_rows, rec["model"])
                terms[rec["model"]] = {e["key"]: e["value"] for e in used}
            p = predict_record(rec, spec)
            if profile is not None:
                from .apply import add_calibration
                add_calibration(p, profile, spec)
                if profile.spec_id == spec.id:  # energies per operation do not transfer between devices
                    p["calibration_energy"] = profile.data.get("energy")
        except UserError as exc:
            skipped.append({"key": rec["key"], "status": "not_predicted", "reason": str(exc)})
            continue
        rows.append(characterize_record(rec, p))
    return {"label": "characterization: measurement vs achievable / calibrated estimate",
            "rule": {"roofline_fraction_bound": ROOFLINE_FRACTION_BOUND, "resources": list(ROOF_RESOURCES),
                     "engines": list(ENGINES), "predicted_time": CLASS_BASIS[0] if profile is not None else CLASS_BASIS[1],
                     "doc": "calibrate/characterize.py"},
            "held_out": {"rule": HELD_OUT_RULE, "terms_by_model": terms} if held_out else None,
            "records": rows, "skipped": skipped, "summary": summarize(rows)}
