"""Blocks composed from calibrated op estimates (``block_gap.py --calibration PROFILE``): each op call of
a measured block replaced by the device time that the profile's calibrated estimate of the same call
implies, then composed exactly as the achievable estimate composes the block
(``blocks.compose_achievable``: the calls' host times, the module's Python, one graph replay or
autograd call). The profile's op groups are fitted on op cases only (a group is one op identity), so no
block case enters any fit: the blocks are held out. Label: **calibrated estimate** (composed).

Per call (op, implementation, mode, dtype, the backend the block runs it on):
- ``calibrated``: the profile's estimate E of one timed standalone call (``calibrate.estimate``),
  where the queue model says that call was device-bound as timed (with the model's own device time and
  with E as its time, ``achievable.timed_call_lead``): its device time is
  E - the timed call's extra fixed time (``blocks.timed_call_extra``; the composition adds it once per
  block), times the call's count. The standalone call's timing regime (eager, or a CUDA-graph replay)
  is that of the nearest op record of the same identity (``block_oracle``), else eager (graph for
  decode);
- ``model (calibrated call host-bound)``: a call the model finds host-bound as timed standalone
  (SSD's and Mamba-3's autotuned Triton calls at small shapes): its calibrated time is mostly host
  time, so the call keeps the achievable device time;
- ``model (calibrated group extrapolated)``: the call lies outside the dimensions (or bounds) the group
  was fitted on (``estimate.extrapolation``): the achievable device time;
- ``model (not calibrated)``: no usable group in the profile: the achievable device time.
"""

from __future__ import annotations

import math

inf = float("inf")


def _regime(row: dict, case: dict, records: dict | None) -> bool:
    """Whether the standalone calls of this call's identity were timed as CUDA-graph replays."""
    import block_oracle
    from ssmbench.measure.results import launch_regime

    dims = row["dims"]
    group = [r for r in (records or {}).get((row["op"], row["impl"], row["mode"], case["dtype"]), ())
             if (row.get("backend") is None or r.get("backend") == row["backend"])
             and block_oracle.same_names(dims, r["dims"])]
    if not group or not dims:
        return row["mode"] == "decode"
    best = min(group, key=lambda r: block_oracle.distance(dims, r["dims"]))
    return launch_regime(best) == "graph"


def calibrated_gpu(row: dict, case: dict, profile, spec, records: dict | None = None) -> tuple[float, str, str | None]:
    """(device s, source, profile group) of one call row of ``blocks.composed_bound``."""
    import block_oracle
    from ssmbench.analytic.achievable import timed_call_lead
    from ssmbench.analytic.workloads.blocks import flush_times, timed_call_extra
    from ssmbench.calibrate.estimate import estimate_detail

    from ssmbench.errors import UserError

    try:
        d = estimate_detail(profile, row["op"], row["impl"], row["dims"], case["dtype"], row["mode"], spec=spec,
                            backend=row.get("backend"))
    except UserError:
        return row["gpu_s"], "model (not calibrated)", None
    if d["extrapolated"]:  # outside the shapes the group was fitted on: its form says little there
        return row["gpu_s"], "model (calibrated group extrapolated)", d["group"]
    est = float(d["estimate_s"])
    graph = _regime(row, case, records)
    backend = row.get("backend") or _group_backend(profile, d["group"])
    g_ref, h_ref = block_oracle.model_times(row["op"], row["impl"], row["mode"], case["dtype"], row["dims"], backend,
                                            spec, graph)
    extra, flush = timed_call_extra(spec), flush_times(spec)
    # host-bound as timed by the model's own device time or by the calibrated time: either way the calibrated
    # time is the host's (a host-bound call's estimate near its host time would pass the second test alone)
    if inf != timed_call_lead(h_ref, g_ref + extra, *flush) or inf != timed_call_lead(h_ref, est, *flush):
        return row["gpu_s"], "model (calibrated call host-bound)", d["group"]
    return max(est - extra, 0.0) * row["count"], "calibrated", d["group"]


def _group_backend(profile, label: str) -> str | None:
    """The backend of the profile group labelled ``label`` (whose call path the standalone call took)."""
    return next((g["key"].get("backend") for g in profile.data["groups"] if g["label"] == label), None)


def compose(b: dict, case: dict, profile, spec, records: dict | None = None) -> dict:
    """The calibrated-composed time of one block case (``b`` = ``composed_bound``'s result)."""
    import block_oracle

    return block_oracle.compose_calls(b, case, spec, lambda row: calibrated_gpu(row, case, profile, spec, records),
                                      "calibrated",
                                      "calibrated estimate (op groups of the profile, composed; no block case in any fit)")


def median_abs_error_pct(rows: list[dict]) -> float | None:
    """Median of |composed / measured - 1| over rows with ``calibrated_s`` (percent)."""
    import statistics

    errs = [abs(r["calibrated_s"] / r["measured_s"] - 1) * 100 for r in rows
            if r.get("calibrated_s") and r.get("measured_s") and math.isfinite(r["calibrated_s"])]
    return statistics.median(errs) if errs else None
