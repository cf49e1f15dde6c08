"""The achievable estimate *as measured*: one op call inside the timing loop of ``measure/timing.py``,
beside the plain estimate (``achievable.estimate``: back-to-back calls in steady state, what predict
uses for model steps). Both are labelled **achievable estimate**; this one says "as measured".

How a sample is taken: before each sample the loop writes a buffer of ``flush_bytes`` (2 x the L2
size, recorded in every result's ``timing``) with one eager ``zero_``, records a CUDA event, issues
the call, records a second event; samples follow each other without synchronising. Three effects
separate the timed sample from the steady-state time max(T_host, T_gpu):

- **Flush lead.** The flush keeps the device busy for flush_bytes / DRAM bandwidth (~30 us on an
  H200) while the host already issues the call. When the host issues flush and call faster than the
  device runs them, the device never waits and the sample is the call's device time; otherwise the
  call starts behind the flush with that lead (``achievable.timed_call_lead``).
- **A short pipeline.** An op of n kernel calls is issued call by call onto one stream
  (``achievable.issue_pipeline``): here the op's host and device times are split evenly over
  max(launches, host calls) calls; a one-off host cost that issues no kernel (the autograd engine's
  ``torch.autograd.grad``, one ``CUDAGraph.replay``) comes first.
- **The timed call's fixed device time** (``launch.timed_call``): a kernel bracketed by two events
  right after the flush costs more fixed device time than a node of a replayed graph (event
  records, a cold start after 2 x L2 of writes). The probe measures it as the fixed term of copy
  time vs bytes in exactly this setup; the first kernel of a sample pays it in place of its
  launch.graph_node + memory.dram.latency (the larger of the two).

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
    cuda_graph); ``notes``: terms the caller could not model, added to ``not_modelled``. Returns the estimate's dict with ``time_s`` as measured, the
    plain time as ``steady_state_s`` and the timing terms."""
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
    t = issue_pipeline(host, gpu, lead)
    host_visible = t > sum(gpu) * (1 + 1e-9)
    d = est.to_dict()
    d.update({"label": LABEL, "time_s": t, "steady_state_s": est.time_s, "gpu_s": sum(gpu),
              "timed_call_extra_s": extra, "lead_s": lead, "flush_s": {"host": flush[0], "device": flush[1]},
              "calls": n, "not_modelled": missing,
              "bottleneck": "host/launch" if host_visible else _gpu_class(est, extra)})
    return d


def _gpu_class(est: Estimate, extra: float) -> str:
    """The device-side bottleneck: 'latency' when the fixed parts (with the timed call's) exceed every
    engine and bandwidth time, else the largest resource."""
    top = max(est.times_s, key=est.times_s.get)
    return "latency" if est.fixed_s + extra >= est.times_s[top] else top
