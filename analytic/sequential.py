"""Ops whose implementation runs kernels of different kinds one after another: their achievable
estimate, part by part.

One op call's achievable estimate (``achievable.py``) lets the call's engines and memory overlap: right
for one kernel, and for kernels whose resources are alike. A composite whose kernels bind on different
resources and run one after another takes the sum of its kernels' times instead. mamba-ssm's GatedMLP
(``gated_mlp``/``merged_eager``: two cuBLAS GEMMs around two eager elementwise kernels over strided views)
measured 35 % above its one-call estimate at every shape (results/h200/2026-12-04/strided-gate: 809 us at
B = 16, L = 2048, D = 768, F = 2048 against 530 us): the GEMMs' tensor time and the gate's memory time
were overlapped in the estimate, and they are not in the kernels.

``PARTS`` names such implementations and the op calls of their kernels; ``composed`` estimates each
part as its own measured call (``execution.as_measured``; its implementation's traits: host class, TF32,
chains, kernel paths) and adds them up as one host thread issuing them onto one stream, in the steady
state: host = the sum of the parts' host times, device = the sum of their device times, time = max(host,
device), the composition ``workloads/blocks.compose_achievable`` uses for block cases. A backward is one
``torch.autograd.grad`` over the whole graph: where each part measured alone pays an engine call
(``launch.host.autograd``), the composite pays one; in a backward-only call (a retained graph) its other parts'
first nodes are nodes of the same graph (``launch.host.autograd_node``), and in a forward-backward call every
part's backward kernels already pay ``launch.host.backward_launch`` each (``execution.as_measured``).
Whole-model plans list such a module's parts as op calls of their own
(``phases._Builder.merged_gated_mlp``), so this is the op-level case of the same rule.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from . import achievable, execution
from .ops.mlp.cost import merged_eager_parts
from .registry import cost as analytic_cost

# (op, implementation) -> the op calls (op, implementation, dims) of its kernels, in order
PARTS: dict[tuple[str, str], Callable[[Mapping[str, int]], list[tuple[str, str, dict[str, int]]]]] = {
    ("gated_mlp", "merged_eager"): merged_eager_parts,
}


def parts_of(op: str, impl: str, dims: Mapping[str, int]) -> list[tuple[str, str, dict[str, int]]] | None:
    """The op calls of (op, impl)'s kernels where it is estimated part by part (``PARTS``), else None."""
    rule = PARTS.get((op, impl))
    return None if rule is None else rule(dims)


def composed(spec, op: str, impl: str, dims: Mapping[str, int], dtype: str, mode: str, launch: str = "eager",
             prefer: str = "measured") -> dict[str, Any]:
    """The achievable estimate of one call of a ``PARTS`` implementation as the sum of its parts'
    (module docstring), in ``achievable.Estimate.to_dict``'s form: times_s each resource summed over the
    parts, fixed_s the device time beyond the largest of those sums."""
    table = achievable.AchievableTable.of([spec], prefer)
    parts = []
    for p_op, p_impl, p_dims in parts_of(op, impl, dims):
        c = execution.measured_call(analytic_cost(p_op, p_dims, impl=p_impl, mode=mode, dtype=dtype), None, p_op,
                                    p_impl, p_dims, dtype, mode, launch)
        parts.append(execution.estimate_call(c, spec, p_op, p_impl, p_dims, dtype, mode, launch=launch,
                                             prefer=prefer).to_dict())
    host = sum(p["host_s"] for p in parts)
    if launch == "eager" and mode in execution.AUTOGRAD_MODES:  # one torch.autograd call for the whole graph
        # a backward-only part's autograd call becomes one more node of the retained graph; a forward-backward
        # part's backward kernels already pay their per-launch cost (execution.as_measured)
        swap = achievable.host_cost(table, "autograd") - (0.0 if mode == "fwdbwd" else
                                                          achievable.host_cost(table, "autograd_node"))
        host -= (len(parts) - 1) * swap
    return summed(parts, host, sum(p["gpu_s"] for p in parts), spec.id, launch)


def summed(calls: list[dict[str, Any]], host: float, gpu: float, spec_id: str, launch: str) -> dict[str, Any]:
    """Calls issued one after another (``calls``: their estimates' dicts) as one estimate with the given host
    and device totals: times_s each resource summed over the calls, fixed_s the device time beyond the
    largest of those sums, the bottleneck host/launch where the host is the slower side, else latency
    where the fixed part outlasts every resource, else the resource with the largest sum."""
    times: dict[str, float] = {}
    missing: dict[str, str] = {}
    for c in calls:
        for r, t in c["times_s"].items():
            times[r] = times.get(r, 0.0) + t
        missing.update(c["not_modelled"])
    top = max(times.values(), default=0.0)
    fixed = max(gpu - top, 0.0)
    if host >= gpu:
        neck = "host/launch"
    else:
        neck = "latency" if fixed >= top else max(times, key=times.get)
    return {"label": achievable.LABEL, "spec": spec_id, "time_s": max(host, gpu), "host_s": host, "gpu_s": gpu,
            "fixed_s": fixed, "times_s": times, "bottleneck": neck,
            "l2_bytes": sum(c["l2_bytes"] for c in calls), "dram_bytes": sum(c["dram_bytes"] for c in calls),
            "launch_regime": launch, "not_modelled": missing,
            "chain_s": max((c["chain_s"] for c in calls), default=0.0)}
