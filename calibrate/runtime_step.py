"""The calibrated estimate of a model step under a runtime (``predict --runtime``, ``characterize``).

The calibrated per-op models are fitted on op-level measurements: one call timed eagerly, so a small
call's calibrated time is mostly its eager host issue time (the library's Python, argument checks,
the launch), which a CUDA-graph replay does not pay and a Hugging Face module call pays more of.
Summing calibrated op times therefore charges every runtime the op-level host cost. Under a runtime
the step is composed as the achievable estimate composes it (``report.achievable_rows``):

    device_i = calibrated_i x gpu_i / max(host_eager_i, gpu_i)

the calibrated call time with its host share taken out (``gpu_i``, ``host_eager_i``: the achievable
estimate's device time and eager host time of the op call: where the isolated call was host-bound its
calibrated time scales down to the device's share, where it was device-bound it is kept whole); op
calls the profile does not cover take their achievable device time. The host side is the runtime's
achievable host time (per call, plus the step's graph replay or autograd call). The step takes

    T = max(sum of host, sum of device_i)

(host and device overlap across calls through the launch queue). The interval ends scale with the
estimate (the ratio of the composed step to the op sum).
"""

from __future__ import annotations

COMPOSE_RULE = ("under the runtime: max(runtime host time, sum of the calibrated device times: each op's "
                "calibrated time x its achievable device share of the isolated eager call; uncovered ops at "
                "their achievable device time) (calibrate/runtime_step.py)")


def compose(r: dict) -> dict | None:
    """The composed step of a prediction ``r`` with ``total.calibrated`` and an achievable runtime;
    None when the prediction has no runtime. Sets ``total.calibrated`` fields in place."""
    t = r["total"]
    a, cal = t.get("achievable") or {}, t.get("calibrated")
    if not a.get("runtime") or not cal or cal.get("estimate_s") is None:
        return None
    device = host = 0.0
    for o in r["ops"]:
        oa = o["achievable"]
        g, he = float(oa["gpu_s"]), float(oa.get("host_eager_s", oa["host_s"]))
        host += float(oa["host_s"])
        c = (o.get("calibrated") or {}).get("estimate_s")
        device += g if c is None else c * (g / max(he, g) if max(he, g) > 0 else 1.0)
    host += max(0.0, float(a["host_s"]) - sum(float(o["achievable"]["host_s"]) for o in r["ops"]))
    step = max(host, device)
    ratio = step / cal["estimate_s"] if cal["estimate_s"] else 1.0
    cal.update({"ops_sum_s": cal["estimate_s"], "estimate_s": step, "host_s": host, "device_s": device,
                "lo_s": None if cal["lo_s"] is None else cal["lo_s"] * ratio,
                "hi_s": None if cal["hi_s"] is None else cal["hi_s"] * ratio, "runtime": a["runtime"],
                "tokens_per_s": (t["tokens"] / step) if step and t["fits"] else None,
                "time_per_token_s": step / t["tokens"]})
    cal["notes"] = list(cal["notes"]) + [COMPOSE_RULE]
    return cal
