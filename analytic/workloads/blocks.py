"""Analytic cost of a whole block, for the block-level measurement cases (``block:...`` op names of
``measure/backends/blocks.py``): the sum of the op costs that ``phases.py`` plans for that block.

Case identity -> block (dims in the measurement's letters; the modules' defaults fill the rest):

- ``block:mamba1`` (B, L, D, N): Mamba-1 mixer, expand 2, d_conv 4, dt_rank ceil(D / 16).
- ``block:mamba2`` (B, L, D, N, P, G, optional C = 256): Mamba-2 mixer, expand 2, d_conv 4.
- ``block:mamba3`` (B, L, D, N, P): Mamba-3 SISO mixer, expand 2, chunk 64.
- ``block:attention`` (B, L, D, H, G, P, S for decode): fused QKV projection, causal attention,
  output projection.
- ``block:gated_mlp`` (B, L, D, F): down(silu(gate(x)) * up(x)).

Modes: ``fwd`` is the prefill plan, ``fwdbwd`` the training plan, ``decode`` the decode plan (S keys
for attention). The pre-norm and the residual add of the model's layer are not part of these modules
and are left out; so are the embedding and LM head, and the KV-cache write of attention prefill (the
measured block's forward keeps no cache; its decode writes the new k, v by indexing: ``kv_append``
``index_copy``). The result is a ``Cost`` of numbers (labelled an analytic count by its callers).

``block_calls`` lists the block's op calls with their costs; ``composed_bound`` projects each call on
a spec and sums the per-call bounds (kernels run one after another), the way the model-level
evaluator composes a model, beside the bound of the summed cost (what ``block_cost`` gives the
calibration join). The join's achievable estimate of a block case is the composed one
(``composed_estimate``): on the stored H200 data (scripts/calibrate_h200.sh into a scratch folder) this
takes the achievable estimate's median |error| over all 870 cases from 20.6 % to 19.7 % and the block
family's calibrated leave-shape-out p90 from 20.5 % to 17.8 % (80 % coverage 68 % -> 70 %).

Execution of each call as the measured module runs it: the implementation the plan names, on the
backend of ``_BACKENDS`` where the module's call path differs from what the implementation implies
(the attention block's SDPA picks cuDNN on the H200 stack: host class ``cudnn``, engines phased;
its decode step is SDPA too, not ``flash_attn_with_kvcache``).

Composition of the achievable estimate (``compose_achievable``): one host thread issues the calls in
plan order onto one stream; call i starts once the host has issued it and the device has finished
call i - 1 (``achievable.issue_pipeline``). An eager block pays each call's host time, a backward one
autograd engine call (``torch.autograd.grad``), a forward-backward one also ``launch.host.backward_launch`` per
backward kernel (its graph is recorded and freed in the call, as in a train step: ``execution.as_measured``),
a decode step one CUDA-graph replay for all its kernels. The timing loop (``measure/timing.py``) flushes L2
before every sample, so the device starts
each sample with the flush's lead when the host is the slower side, and never waits when the host
keeps ahead of flush and call (``achievable.timed_call_lead``). The estimate is the steady state of
back-to-back samples, max(sum of host, sum of device + the timed call's extra fixed time of the first
kernel after the flush), as ``analytic/timed.py`` composes one op call on the evidence given there (the
measured samples do not show the flush's lead); ``report.achievable_rows`` uses the same steady state
for a model step. The short pipeline with the lead (``achievable.issue_pipeline``) is kept as a
diagnostic (``pipeline_s``). On the 63 H200 block cases of scripts/model_targets.py this takes the
composed achievable estimate's median |error| from 37.3 % to 34.1 % and the measurement-composed one's
from 17.2 % to 12.0 %.

Host time of the module code (``_RUNTIMES``, ``block_runtime``). The ops' host classes are measured on
the library calls alone; mamba-ssm's modules add Python around them (einops rearranges, splits and
asserts, the custom autograd function's wrapper and saved tensors: read in mamba_simple.py, mamba2.py,
mamba3.py and ssd_combined.py's ``MambaSplitConv1dScanCombinedFn`` of mamba-ssm 2.3.2.post1). On the
host-bound block cases the measured time less the plan's host time is 31-34 us per op call for Mamba
(10 calls), 63-144 us for Mamba2 (6) and 121-134 us for Mamba3 (6). The composition charges it as
``predict --runtime mamba-ssm`` charges a model: per op call, the forward's ``launch.host.ssm_forward``,
``ssm_forward_mamba2`` or ``ssm_forward_mamba3`` (on the H200 the medians of these very cases,
``calibrate/runtime_host.block_rows``: 32.8, 57.22 and 127.2 us; so a block's forward is in sample for its
host term), a backward's and a decode step's ``launch.host.ssm_module`` (``runtime.call_host_s``). The
figures below are those of the single ``ssm_module`` value (89.05 us) that came before. On the 63 cases
the composed achievable estimate's median |error| goes from 24.7 % to 21.6 % (Mamba2 fwd 47 -> 15 %,
Mamba3 fwd 43 -> 20 %; Mamba fwd -65 % -> +110 %: one value per op call for every module is the
runtime's approximation, and the model-level records show the same split, mamba-130m prefill
predicted 1.8x, mamba2-130m 0.7-0.8x). The remaining block error is the ops' device time, not the
composition: decode steps of small kernels (-13 to -34 %; CUDA-graph profiles of mamba2-130m put
causal_conv1d_update at 3.0 us, the SSD state update at 2.1 us, the gated norm at 1.8 us per kernel
against 1.5-1.8 us in the estimate), SSD's chunked scan at long L (3x), cuDNN attention and large GEMMs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from ..cost import Cost
from ..registry import AnalyticError, compiled_cost, cost
from .models import parse_model
from .phases import OpCall, dim_parts, dim_value, plan

_PHASE = {"fwd": "prefill", "fwdbwd": "train", "decode": "decode"}
_IMPLS = {"block:gated_mlp": {"eager": {"gated_mlp": "torch_eager"}},
          "block:attention": {"sdpa": {"kv_append": "index_copy", "attention_causal": "fa2"}}}
# Calls that run on a measured backend other than the one their implementation implies. The attention
# block calls F.scaled_dot_product_attention with no backend forced: PyTorch's sdp_utils.cpp
# (check_prefer_cudnn_attention, PyTorch >= 2.9) puts cuDNN first in the priority order on sm90 / sm100
# when the runtime cuDNN is newer than 9.15.0 (the H200 measurements: PyTorch 2.11.0+cu130, cuDNN
# 9.19.0, ``meta.env``), so its attention runs cuDNN's kernels behind cuDNN's call path in every mode.
_BACKENDS = {"block:attention": {"attention_causal": "torch.sdpa.cudnn"}}
# The runtime (``analytic/runtime.py``) whose host rule an eager block call follows: mamba-ssm's Mamba,
# Mamba2 and Mamba3 are library kernels called from eager PyTorch modules, the runtime ``mamba-ssm`` of
# ``predict --runtime``: each op call also pays ``launch.host.ssm_module`` for the module's Python around
# its kernels (rearranges, splits, asserts, the custom autograd function's wrapper and saved tensors),
# which the ops' own host classes, measured on the library calls alone, leave out. The attention and
# gated-MLP blocks are ``measure/backends/blocks.py``'s own torch modules: a forward of the op calls and a
# few views, no runtime beyond the ops' host classes.
_RUNTIMES = {"block:mamba1": "mamba-ssm", "block:mamba2": "mamba-ssm", "block:mamba3": "mamba-ssm"}
# calls of a model layer that the measured modules do not run (per mode: None = every mode)
_LEFT_OUT = {".norm": None, ".residual": None, ".kv_append": ("fwd",)}


def _need(dims: Mapping[str, int], op: str, *names: str) -> list[int]:
    missing = [n for n in names if n not in dims]
    if missing:
        raise AnalyticError(f"{op} needs dimension(s) {', '.join(missing)}")
    return [int(dims[n]) for n in names]


def _block(op: str, dims: Mapping[str, int]) -> tuple[int, dict]:
    if op == "block:mamba1":
        (D, N) = _need(dims, op, "D", "N")
        return D, {"kind": "mamba1", "d_state": N, "d_conv": 4, "expand": 2, "dt_rank": math.ceil(D / 16)}
    if op == "block:mamba2":
        D, N, P, G = _need(dims, op, "D", "N", "P", "G")
        return D, {"kind": "mamba2", "d_state": N, "d_conv": 4, "expand": 2, "headdim": P, "ngroups": G,
                   "chunk_size": int(dims.get("C", 256))}
    if op == "block:mamba3":
        D, N, P = _need(dims, op, "D", "N", "P")
        return D, {"kind": "mamba3", "d_state": N, "expand": 2, "headdim": P, "mimo_rank": 1, "chunk_size": 64}
    if op == "block:attention":
        D, H, G, P = _need(dims, op, "D", "H", "G", "P")
        return D, {"kind": "attention", "heads": H, "kv_heads": G, "head_dim": P}
    if op == "block:gated_mlp":
        D, F = _need(dims, op, "D", "F")
        return D, {"kind": "mlp", "d_ff": F, "activation": "silu", "gated": True}
    raise AnalyticError(f"no analytic block for {op!r}; known: block:mamba1, block:mamba2, block:mamba3, "
                        "block:attention, block:gated_mlp")


def _left_out(label: str, mode: str) -> bool:
    return any(label.endswith(suffix) and (modes is None or mode in modes) for suffix, modes in _LEFT_OUT.items())


def _grid(op: str, dims: Mapping[str, int], mode: str) -> dict:
    B, L = _need(dims, op, "B", "L") if mode != "decode" else (_need(dims, op, "B")[0], 1)
    S = _need(dims, op, "S")[0] if mode == "decode" and op == "block:attention" else L
    return {"batch": B, "tokens": L, "keys": S}


def _values(c: OpCall, grid: Mapping[str, int], dtype: str) -> dict:
    used = compiled_cost(c.op, c.impl, c.mode, dtype).dims  # decode rules do not use L
    return {k: int(dim_value(grid, *dim_parts(v))) for k, v in c.dims if k in used}


def call_dims(op: str, c: OpCall, dims: Mapping[str, int], mode: str, dtype: str = "bf16") -> dict:
    """The op dimensions of one call of block case ``op`` (as an op measurement of it names them)."""
    return _values(c, _grid(op, dims, mode), dtype)


def block_calls(op: str, dims: Mapping[str, int], impl: str | None = None, mode: str = "fwd",
                dtype: str = "bf16") -> list[tuple[OpCall, Cost]]:
    """The op calls of one block case (their dims resolved at these dims) with their costs at these dims
    (x their count in the block)."""
    if mode not in _PHASE:
        raise AnalyticError(f"unknown mode {mode!r} for a block case; valid: {', '.join(_PHASE)}")
    D, blk = _block(op, dims)
    grid = _grid(op, dims, mode)
    model = parse_model({
        "schema_version": 1, "id": "block-case", "name": op, "family": "hybrid",
        "sources": {"case": {"title": "a measured block case", "tag": "D"}},
        "d_model": D, "vocab": 1, "tie_embeddings": True, "norm": "rmsnorm",
        "blocks": {"b": blk}, "layers": [{"blocks": ["b"]}]}, origin=op)
    out = []
    for c in plan(model, _PHASE[mode], _IMPLS.get(op, {}).get(impl or "", {})):
        if c.block != "b" or _left_out(c.label, mode):
            continue
        values = _values(c, grid, dtype)
        if any(v == 0 for v in values.values()):
            continue  # a call with a zero dimension does not run (as in evaluate.evaluate_plan)
        # the call with its dims resolved at this case (the execution traits read them: l2_reread_bytes)
        out.append((dataclasses.replace(c, dims=tuple(values.items())),
                    cost(c.op, values, impl=c.impl, mode=c.mode, dtype=dtype) * c.count))
    return out


def block_cost(op: str, dims: Mapping[str, int], impl: str | None = None, mode: str = "fwd",
               dtype: str = "bf16") -> Cost:
    """The Cost of one block case: the sum of its planned op costs at these dims (pre-norm and
    residual add excluded)."""
    total = Cost()
    for _, c in block_calls(op, dims, impl, mode, dtype):
        total = total + c
    return total


def call_backend(op: str, call: OpCall) -> str | None:
    """The measured backend whose execution a block's call follows, where it differs from what its
    implementation implies (``_BACKENDS``), else None."""
    return _BACKENDS.get(op, {}).get(call.op)


def flush_times(spec, table=None) -> tuple[float, float]:
    """(host s, device s) of the L2 flush that ``measure/timing.py`` runs before every timed sample:
    one eager ``zero_`` of 2 x the device-wide cache's capacity, written at the attained DRAM bandwidth
    (0 where the spec lacks either value)."""
    import numpy as np

    from ..achievable import AchievableTable, host_cost

    table = table or AchievableTable.of([spec])
    flush_bytes = 2 * float(np.nan_to_num(table.l2_capacity[0]))
    bw = float(table.dram_bw[0])
    return host_cost(table, "torch_eager"), (flush_bytes / bw if np.isfinite(bw) and bw > 0 else 0.0)


def timed_call_extra(spec) -> float:
    """The first kernel's extra fixed device time in a timed sample (``analytic/timed.py``):
    launch.timed_call - (launch.graph_node + memory.dram.latency), 0 where the spec lacks a value."""
    from ..roofline import spec_ceiling

    vals = [spec_ceiling(spec, k, "measured").value for k in ("launch.timed_call", "launch.graph_node",
                                                               "memory.dram.latency")]
    if vals[0] is None:
        return 0.0
    return max(float(vals[0]) - sum(float(v or 0.0) for v in vals[1:]), 0.0)


def compose_achievable(rows: list[dict], spec, mode: str, launch: str, gpu_key: str = "gpu_s",
                       flush: tuple[float, float] | None = None) -> dict:
    """The achievable time of one measured block call from its op calls' host and device times
    (``rows``: dicts with ``host_s`` and ``gpu_key``), in the steady state of one launch queue
    (module docstring; the pipeline with the flush's lead as ``pipeline_s``): eager calls issue their own host work; a CUDA-graph replay
    issues everything at once for one ``launch.host.cuda_graph``; a backward adds one autograd engine
    call (``torch.autograd.grad``) ahead of the backward kernels, placed here before the block's calls
    (it changes the issue order's tail only). The device's lead at the start comes from the timing
    loop (``achievable.timed_call_lead``: the flush ahead of each sample); ``flush`` = (host s,
    device s) of that flush (default ``flush_times(spec)``; (0, 0): no flush)."""
    from ..achievable import AchievableTable, host_cost, issue_pipeline, timed_call_lead
    from ..execution import AUTOGRAD_MODES

    table = AchievableTable.of([spec])
    host = [r["host_s"] if launch == "eager" else 0.0 for r in rows]
    gpu = [r[gpu_key] for r in rows]
    if launch == "graph":  # one CUDAGraph.replay per block call issues every kernel
        host, gpu = [host_cost(table, "cuda_graph")] + host, [0.0] + gpu
    elif mode in AUTOGRAD_MODES:
        host, gpu = [host_cost(table, "autograd")] + host, [0.0] + gpu
    flush_h, flush_g = flush if flush is not None else flush_times(spec, table)
    lead = timed_call_lead(sum(host), sum(gpu), flush_h, flush_g)
    extra = timed_call_extra(spec) if any(g > 0 for g in gpu) else 0.0
    return {"label": "achievable estimate", "time_s": max(sum(host), sum(gpu) + extra), "host_s": sum(host),
            "gpu_s": sum(gpu), "lead_s": lead, "timed_call_extra_s": extra,
            "pipeline_s": issue_pipeline(host, gpu, lead), "steady_state_s": max(sum(host), sum(gpu))}


def _counted(chain, count: int):
    """A call's chain run ``count`` times one after another (its kernel launched ``count`` times)."""
    return None if chain is None else chain.repeated(count)


def block_runtime(op: str):
    """The runtime (``analytic.runtime.Runtime``) whose host rule block case ``op``'s eager calls follow
    (``_RUNTIMES``), or None: the ops' own host classes only."""
    from ..runtime import RUNTIMES

    return RUNTIMES[_RUNTIMES[op]] if op in _RUNTIMES else None


def composed_bound(op: str, dims: Mapping[str, int], spec, impl: str | None = None, mode: str = "fwd",
                   dtype: str = "bf16", prefer: str = "measured", launch: str | None = None,
                   flush: tuple[float, float] | None = None, module_runtime: bool = True) -> dict:
    """A block case's analytic bound composed from its op calls on ``spec``: the sum over calls of each
    call's roofline bound (max over resources), beside the bound of the block's summed cost, and the
    achievable estimate composed through the launch queue (``compose_achievable``).
    ``launch`` defaults to graph replay for decode (the measured decode step is a CUDA graph) and
    eager launches otherwise. Each call is executed as its block runs it (``call_backend``: SDPA's
    cuDNN kernels in the attention block). Under eager launches each call's host time follows the
    block's runtime (``block_runtime``: the module's Python per op call of mamba-ssm's modules,
    ``analytic.runtime.call_host_s``, as ``predict --runtime mamba-ssm`` composes a model);
    ``module_runtime=False`` leaves it out (the ops' host classes alone: a diagnostic). Each row keeps
    its ops' host time (``host_ops_s``) beside the module's (``host_module_s``)."""
    from ..achievable import AchievableTable, estimate, host_cost
    from ..execution import (
        BACKWARD_LAUNCH,
        ENGINE_CODES,
        as_measured,
        call_backward_launches,
        chain_of,
        l2_reread_bytes,
        traits,
    )
    from ..roofline import project
    from ..runtime import call_host_s

    launch = launch or ("graph" if mode == "decode" else "eager")
    rt = block_runtime(op) if module_runtime and launch == "eager" else None
    table, kind = AchievableTable.of([spec]), _block(op, dims)[1]["kind"]
    calls, rows, total = block_calls(op, dims, impl, mode, dtype), [], Cost()
    for c, k in calls:
        backend = call_backend(op, c)
        t = traits(c.op, c.impl, backend)
        k = as_measured(k, backend)  # host calls on the backend's own call path
        p = project(k, spec, prefer=prefer, launch=launch)
        # the achievable estimate of the call; under graph replay the block is one replay (compose_achievable)
        a = estimate(k, spec, tf32=t.fp32_matmul == "tf32", serial=ENGINE_CODES[t.engines], launch=launch,
                     mma_sync=t.tensor_instr == "mma_sync",
                     l2_reread=l2_reread_bytes(c.op, c.impl, c.dim_map(), dtype, c.mode, backend) * c.count,
                     chain=_counted(chain_of(c.op, c.impl, c.dim_map(), c.mode, backend, dtype), c.count))
        h_ops = a.host_s if launch == "eager" else 0.0
        if launch == "eager" and c.mode == "fwdbwd":  # the call's backward kernels, of a graph freed per step
            h_ops += call_backward_launches(c.op, c.impl, c.dim_map(), dtype, c.mode) * c.count * \
                host_cost(table, BACKWARD_LAUNCH)
        h = h_ops if rt is None else call_host_s(rt, h_ops, float(k.launches), float(c.module_calls),
                                                 lambda cls: host_cost(table, cls), kind, _PHASE[mode])
        rows.append({"label": c.label.removeprefix("b."), "op": c.op, "impl": c.impl, "mode": c.mode,
                     "backend": backend, "count": c.count, "module_calls": c.module_calls,
                     "dims": call_dims(op, c, dims, mode, dtype),
                     "bound_s": p.time_s, "bottleneck": p.bottleneck,
                     "host_s": h, "host_ops_s": h_ops, "host_module_s": h - h_ops, "gpu_s": a.gpu_s,
                     "achievable_s": max(h, a.gpu_s), "achievable_bottleneck": a.bottleneck,
                     "times_s": a.times_s, "fixed_s": a.fixed_s, "chain_s": a.chain_s, "l2_bytes": a.l2_bytes,
                     "dram_bytes": a.dram_bytes, "not_modelled": a.not_modelled})
        total = total + k
    whole = project(total, spec, prefer=prefer, launch=launch)
    known = [r["bound_s"] for r in rows if r["bound_s"] is not None]
    return {"label": "analytic bound", "launch": launch, "calls": rows,
            "composed_s": sum(known) if len(known) == len(rows) else None,
            "summed_cost_bound_s": whole.time_s,
            "achievable": compose_achievable(rows, spec, mode, launch, flush=flush),
            "achievable_ops_host": (compose_achievable([{**r, "host_s": r["host_ops_s"]} for r in rows], spec, mode,
                                                       launch, flush=flush) if rt is not None else None)}


def composed_estimate(op: str, dims: Mapping[str, int], spec, impl: str | None = None, mode: str = "fwd",
                      dtype: str = "bf16", launch: str | None = None) -> tuple[dict, dict]:
    """A block case's composed achievable estimate in the two forms the calibration join records for a
    measured call (``calibrate/join.resource_bounds``): the plain estimate (``achievable.Estimate.to_dict``:
    the steady state max(host, device) of the composition, no timed-call term) and the estimate as
    measured (``compose_achievable``'s time with the timed call's extra, ``analytic/timed.py``'s fields).
    Terms: host_s and gpu_s the composition's sums (the module's Python, one graph replay or autograd call
    included); times_s each resource's time summed over the calls; fixed_s = gpu_s - max of those sums
    (the calls' per-kernel fixed times, and what the calls' overlap within each call leaves beyond the
    largest summed resource), so that the calibration's achievable forms with every parameter at 1
    reproduce the composed estimate; chain_s the largest call's chain."""
    from ..sequential import summed
    from ..timed import LABEL as TIMED_LABEL

    b = composed_bound(op, dims, spec, impl=impl, mode=mode, dtype=dtype, launch=launch)
    comp, calls = b["achievable"], b["calls"]
    host, gpu = comp["host_s"], comp["gpu_s"]
    plain = summed(calls, host, gpu, spec.id, b["launch"])
    neck = plain["bottleneck"]
    extra = comp["timed_call_extra_s"]
    timed = {**plain, "label": TIMED_LABEL, "time_s": comp["time_s"], "steady_state_s": plain["time_s"],
             "gpu_s": gpu + extra, "timed_call_extra_s": extra, "lead_s": comp["lead_s"],
             "pipeline_s": comp["pipeline_s"], "calls": len(calls),
             "bottleneck": "host/launch" if host > gpu + extra else neck}
    return plain, timed
