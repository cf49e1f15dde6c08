"""The calibrated estimate of a model step under a runtime (``predict --runtime``, ``characterize``).

The calibrated per-op models are fitted on op-level measurements: one call timed eagerly, so a small
call's calibrated time is mostly its eager host issue time (the library's Python, argument checks,
the launch), which a CUDA-graph replay does not pay and a Hugging Face module call pays more of.
Summing calibrated op times therefore charges every runtime the op-level host cost. Under a runtime
the step is composed as the achievable estimate composes it (``report.achievable_rows``):

    device_i = the calibrated form's device side, T_fixed + g x max_r T_r / e_r, where the group's form
               is one on the achievable model's terms (``achievable_forms.py``: the fitted efficiencies of
               the device's resources, whatever side bound the isolated calls);
    device_i = calibrated_i x gpu_i / max(host_eager_i, gpu_i) for the other forms:

the calibrated call time with its host share taken out (``gpu_i``, ``host_eager_i``: the achievable
estimate's device time and eager host time of the op call: where the isolated call was host-bound its
calibrated time scales down to the device's share, where it was device-bound it is kept whole); op
calls the profile does not cover take their achievable device time. Whether the isolated call was
device-bound is judged by the calibrated model where it says more than the achievable estimate: where
the model's device-resource terms alone (its per-call terms other than ``fixed``: the engine and memory
times it fitted) reach the call's eager host time, the device could not have waited on the host, and
the calibrated time is kept whole (``device_s``), except that inside a CUDA-graph replay the form's per-call
fixed term gives way to the achievable model's fixed time (its ``fixed_s``: graph node, GEMM and library-kernel
fixed times and a DRAM latency per kernel, read off the CUDA-graph profiles): that term, fitted on isolated eager
calls, also holds their gaps between kernels, which a replay does not leave (mamba2-130m's CUDA-graph decode at
B = 32: the state update's group fits 5.8 us per call of fixed time where the graph's nodes take ~2.9 us, and the
step came out 7 % over the measurement with it, -4 % without). Eager steps keep the term (replacing it there too
took the eager training steps' median error from 11.6 to 14.0 % on 2026-12-05). Their kernels do leave gaps where the
host issues more slowly than the device runs, which max(host, device) below does not see (Transformer++ 125M's
training step at B = 8, L = 2048: the GPU idle 8.0 of 48.8 ms in its profile though its planned host time, 35.0 ms,
is not above its device time, 34.5 ms). The term is no model of those gaps. It used to stand in for them on the wrong
part: while an isolated forward-backward call was charged only the retained graph's per-node host cost, the
forward-backward linear group's calls looked device-bound, its form kept its 50 us of fixed time per launch, and the
training steps' GEMMs came out at 1.25-1.74x their profiled kernel time (Transformer++ 23.2 against 16.3 ms). Since
such a call pays ``launch.host.backward_launch`` per backward kernel (``analytic/execution.as_measured``), the share
rule takes its device share, and the GEMM part lands at 0.94-1.01x of the profiled kernels in the larger models'
steps (Transformer++ 16.0 against 16.3 ms, Llama-3.2-1B 78.5 against 77.4); the training steps' median error went
from 11.6 to 14.0 %, the gaps showing where they are (Transformer++'s step 23 % under). The gaps are not modelled:
an issue pipeline over the steps' calls in execution order (forward by layer, backward reversed, each call's host
and device time split by mode) gives max(host, device) within 1 % for all but Vim (-9 against -14 %), so the calls'
order does not explain them. Measured, they are the host's state: five training steps timed again on 2026-12-05
with the host's own issue time beside them (results/h200/2026-12-05/train-issue, measure/models/host_issue.py)
each took max(issue time, kernels busy) within 2-6 % (Mamba-2 130M, whose host slowed and sped within the record,
16 % under), while the same steps' times moved with their host between sessions (Mamba 130M 135.5 ms per step on
2026-12-03, 86.4 ms on 2026-12-05 at the same 85 ms of kernels; Transformer++ 48.8 and 42.5 ms; Qwen2.5-0.5B 132.5
and 88.4 ms): host and device overlap as this composition has them, and what misses is the host term, taken from
records of other moments' host states (its estimate 0.49-1.24x of the measured issue times). The achievable device
time can sit under the host time where the device actually binds: mamba-ssm's chunked SSD at B = 4, L = 32768 on
the H200 plans 0.71 ms of device time per call against 0.84 ms of host, but the calibrated model fits 1.12 ms of DRAM
time per call (the group's DRAM efficiency 0.62; the profiled kernels took 2.0 ms), and scaling its
1.80 ms by 0.71 / 0.84 took 16 % of a device-bound call away. And where the isolated calls of a group were
host-bound at the model's shapes, the share rule scaled the calibrated host time by the achievable estimate's
device share, which inherits the achievable model's device error: the chunked SSD at B = 16, L = 2048, H = 24
took 453 us as a CUDA-graph replay (results/h200/2026-12-04/ssd-graph) where the achievable estimate says
189 us; the share rule put 117 us in the step, the group's fitted device side (DRAM at 0.62, L2 at 0.30 of
their achievable rates) 464 us. The host side is the runtime's
achievable host time (per call, plus the step's graph replay or autograd call). The step takes

    T = max(sum of host, sum of device_i)

(host and device overlap across calls through the launch queue). The interval ends scale with the
estimate (the ratio of the composed step to the op sum).
"""

from __future__ import annotations

COMPOSE_RULE = ("under the runtime: max(runtime host time, sum of the calibrated device times: each op's "
                "calibrated device side where its group's form has one, else its calibrated time x its "
                "achievable device share of the isolated eager call; uncovered ops at their achievable device "
                "time) (calibrate/runtime_step.py)")


def replays_graph(r: dict) -> bool:
    """Whether the prediction ``r``'s runtime replays one captured CUDA graph per step."""
    from ..analytic.runtime import RUNTIMES

    rt = RUNTIMES.get(str((r["total"].get("achievable") or {}).get("runtime")))
    return rt is not None and rt.launch == "graph"


def device_s(o: dict, graph: bool = False) -> float:
    """The calibrated device time of op row ``o`` (with ``calibrated``) inside a step (module docstring);
    ``graph``: the step is a CUDA-graph replay (``replays_graph``)."""
    oa, cal = o["achievable"], o["calibrated"]
    n = float(cal.get("count") or o.get("count") or 1.0)
    if cal.get("device_per_call_s") is not None:  # the form's own device side (achievable-model forms)
        return float(cal["device_per_call_s"]) * n
    g, he = float(oa["gpu_s"]), float(oa.get("host_eager_s", oa.get("host_s", 0.0)))
    c = float(cal["estimate_s"])
    work = sum(float(v) for k, v in (cal.get("terms_per_call_s") or {}).items() if k != "fixed")
    if work * n >= he > 0:  # the calibrated device work alone outlasts the host's issue time
        fixed = (cal.get("terms_per_call_s") or {}).get("fixed")
        if not graph or fixed is None or oa.get("fixed_s") is None:
            return c
        # the form's per-call fixed term, fitted on isolated eager calls, holds their gaps between kernels too;
        # a graph replay leaves none: its calls pay the achievable model's own fixed time (module docstring)
        return max(c - float(fixed) * n, 0.0) + float(oa["fixed_s"])
    return c * (g / max(he, g) if max(he, g) > 0 else 1.0)


def compose(r: dict) -> dict | None:
    """The composed step of a prediction ``r`` with ``total.calibrated`` and an achievable runtime;
    None when the prediction has no runtime. Sets ``total.calibrated`` fields in place."""
    t = r["total"]
    a, cal = t.get("achievable") or {}, t.get("calibrated")
    if not a.get("runtime") or not cal or cal.get("estimate_s") is None:
        return None
    device = host = 0.0
    graph = replays_graph(r)
    for o in r["ops"]:
        oa = o["achievable"]
        g, he = float(oa["gpu_s"]), float(oa.get("host_eager_s", oa["host_s"]))
        host += float(oa["host_s"])
        c = (o.get("calibrated") or {}).get("estimate_s")
        device += g if c is None else device_s(o, graph)
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
