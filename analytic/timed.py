"""The achievable estimate *as measured*: one op call inside the timing loop of ``measure/timing.py``,
beside the plain estimate (``achievable.estimate``: back-to-back calls in steady state, what predict
uses for model steps). Both are labelled **achievable estimate**; this one says "as measured".

How a sample is taken: before each sample the loop writes a buffer of ``flush_bytes`` (2 x the L2
size, recorded in every result's ``timing``) with one eager ``zero_``, records a CUDA event, issues
the call, records a second event; samples follow each other without synchronising.

- **The timed call's fixed device time** (``launch.timed_call``): a kernel bracketed by two events
  right after the flush costs more fixed device time than a node of a replayed graph (event
  records, a cold start after 2 x L2 of writes). The probe measures it as the fixed term of copy
  time vs bytes in exactly this setup; the first kernel of a sample pays it in place of its
  launch.graph_node + memory.dram.latency (the larger of the two).
- **Host and device** then combine as in the steady state: samples follow each other through one
  launch queue, so a sample takes max(T_host, T_gpu + timed-call extra).

What is left out, on evidence. The flush keeps the device busy for flush_bytes / DRAM bandwidth
(~30 us on an H200) while the host already issues the call; a model in which a host-bound call
starts behind that lead (``achievable.timed_call_lead``, the call issued kernel by kernel through
``achievable.issue_pipeline``) subtracts up to the flush's device time from the host time. On the
844 measured H200 cases of scripts/calibrate_h200.sh (2026-12-03: default suites of 2026-12-02,
results/h200/2026-12-03/achievable call1 and call2, pairs-blocks), the 340 cases whose host time
exceeds their device time measure at estimate / measured = 0.70 (median) with the steady state and
0.49 with the flush lead: the measured samples do not show the lead (a host-bound sample takes at
least its host time), so subtracting it moves every host-bound estimate away from the measurement
(median |error| 36.9 % -> 53.8 %). On the 504 device-bound cases the timed-call term brings the
median |error| from 30.3 % (plain) to 26.6 %. Over all cases: steady state + timed call 29.6 %,
plain 31.3 %, with the flush lead 32.7 %. The lead and the short pipeline's time are still reported
(``lead_s``, ``pipeline_s``) as diagnostics, not used.

A spec that does not know ``launch.timed_call`` gives no such term and names it under
``not_modelled``. A record without timing settings has no as-measured estimate (the calibration join
then compares the plain one).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..hwspecs import Spec
from .achievable import Estimate, issue_pipeline, timed_call_lead
from .roofline import Prefer, spec_ceiling

LABEL = "achievable estimate (as measured: in the timing loop, after the L2 flush)"


def _known(spec: Spec, key: str, prefer: Prefer, missing: dict[str, str]) -> float:
    c = spec_ceiling(spec, key, prefer)
    if c.value is None:
        missing[key] = f"{key} ({c.provenance})"
        return 0.0
    return float(c.value)


def flush_cost(spec: Spec, flush_bytes: float, prefer: Prefer = "measured",
               missing: dict[str, str] | None = None) -> tuple[float, float]:
    """(host s, device s) of the timing loop's flush: one eager op (launch.host.torch_eager) that writes
    ``flush_bytes`` at the attained DRAM bandwidth (the copy bandwidth counts read + written bytes,
    so a write-only stream of B bytes takes B / bandwidth)."""
    missing = {} if missing is None else missing
    if not flush_bytes:
        return 0.0, 0.0
    host = _known(spec, "launch.host.torch_eager", prefer, missing)
    bw = _known(spec, "memory.dram.bandwidth", prefer, missing)
    return host, (float(flush_bytes) / bw if bw > 0 else 0.0)


def as_timed(est: Estimate, spec: Spec, *, calls: float, head_host_s: float, timing: Mapping,
             prefer: Prefer = "measured", notes: Mapping[str, str] | None = None) -> dict:
    """The as-measured achievable time of one call whose plain estimate is ``est`` (its host time
    includes ``head_host_s``, a one-off host cost that issues no kernel), issued as ``calls`` kernel
    calls, under the timing settings ``timing`` of its result record (flush_l2, flush_bytes,
    cuda_graph); ``notes``: terms the caller could not model, added to ``not_modelled``. Returns the
    estimate's dict with ``time_s`` as measured, the plain time as ``steady_state_s`` and the timing
    terms (``lead_s`` and ``pipeline_s``: the flush-lead model's, diagnostics only)."""
    missing = {**est.not_modelled, **(notes or {})}
    flush_bytes = float(timing.get("flush_bytes") or 0.0) if timing.get("flush_l2") else 0.0
    flush = flush_cost(spec, flush_bytes, prefer, missing)
    cold = _known(spec, "launch.timed_call", prefer, missing)
    per_kernel = (_known(spec, "launch.graph_node", prefer, {}) + _known(spec, "memory.dram.latency", prefer, {}))
    extra = max(cold - per_kernel, 0.0) if est.gpu_s > 0 else 0.0
    n = max(round(calls), 1)
    rest = max(est.host_s - head_host_s, 0.0)
    host = ([head_host_s] if head_host_s > 0 else []) + [rest / n] * n
    gpu = ([0.0] if head_host_s > 0 else []) + [est.gpu_s / n] * n
    gpu[-n] += extra  # the first kernel starts cold after the flush, between two event records
    lead = timed_call_lead(sum(host), sum(gpu), *flush)
    t = max(sum(host), sum(gpu))  # the steady state with the timed call's extra (module docstring)
    host_visible = sum(host) > sum(gpu)
    d = est.to_dict()
    d.update({"label": LABEL, "time_s": t, "steady_state_s": est.time_s, "gpu_s": sum(gpu),
              "pipeline_s": issue_pipeline(host, gpu, lead),
              "timed_call_extra_s": extra, "lead_s": lead, "flush_s": {"host": flush[0], "device": flush[1]},
              "calls": n, "not_modelled": missing,
              "bottleneck": "host/launch" if host_visible else _gpu_class(est, extra)})
    return d


def _gpu_class(est: Estimate, extra: float) -> str:
    """The device-side bottleneck: 'latency' when the fixed parts (with the timed call's) exceed every
    engine and bandwidth time, else the sequential chain's class where it does (latency, or the intake
    that paces it: ``Chain.label``), else the largest resource."""
    top = max(est.times_s, key=est.times_s.get)
    if est.fixed_s + extra >= est.times_s[top]:
        return "latency"
    return est.chain_label if est.chain_s >= est.times_s[top] else top
