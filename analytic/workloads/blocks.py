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
calibration join).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

from ..cost import Cost
from ..registry import AnalyticError, compiled_cost, cost
from .models import parse_model
from .phases import OpCall, dim_parts, dim_value, plan

_PHASE = {"fwd": "prefill", "fwdbwd": "train", "decode": "decode"}
_IMPLS = {"block:gated_mlp": {"eager": {"gated_mlp": "torch_eager"}},
          "block:attention": {"sdpa": {"kv_append": "index_copy"}}}
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


def block_calls(op: str, dims: Mapping[str, int], impl: str | None = None, mode: str = "fwd",
                dtype: str = "bf16") -> list[tuple[OpCall, Cost]]:
    """The op calls of one block case (their dims resolved at these dims) with their costs at these dims
    (x their count in the block)."""
    if mode not in _PHASE:
        raise AnalyticError(f"unknown mode {mode!r} for a block case; valid: {', '.join(_PHASE)}")
    D, blk = _block(op, dims)
    B, L = _need(dims, op, "B", "L") if mode != "decode" else (_need(dims, op, "B")[0], 1)
    S = _need(dims, op, "S")[0] if mode == "decode" and op == "block:attention" else L
    model = parse_model({
        "schema_version": 1, "id": "block-case", "name": op, "family": "hybrid",
        "sources": {"case": {"title": "a measured block case", "tag": "D"}},
        "d_model": D, "vocab": 1, "tie_embeddings": True, "norm": "rmsnorm",
        "blocks": {"b": blk}, "layers": [{"blocks": ["b"]}]}, origin=op)
    grid = {"batch": B, "tokens": L, "keys": S}
    out = []
    for c in plan(model, _PHASE[mode], _IMPLS.get(op, {}).get(impl or "", {})):
        if c.block != "b" or _left_out(c.label, mode):
            continue
        used = compiled_cost(c.op, c.impl, c.mode, dtype).dims  # decode rules do not use L
        values = {k: dim_value(grid, *dim_parts(v)) for k, v in c.dims if k in used}
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


def composed_bound(op: str, dims: Mapping[str, int], spec, impl: str | None = None, mode: str = "fwd",
                   dtype: str = "bf16", prefer: str = "measured", launch: str | None = None) -> dict:
    """A block case's analytic bound composed from its op calls on ``spec``: the sum over calls of each
    call's roofline bound (max over resources), beside the bound of the block's summed cost.
    ``launch`` defaults to graph replay for decode (the measured decode step is a CUDA graph) and
    eager launches otherwise."""
    from ..roofline import project

    from ..achievable import AchievableTable, estimate, host_cost
    from ..execution import AUTOGRAD_MODES, fp32_matmul_on_tf32, l2_reread_bytes, serial_engines, tensor_instr

    launch = launch or ("graph" if mode == "decode" else "eager")
    calls, rows, total = block_calls(op, dims, impl, mode, dtype), [], Cost()
    host = gpu = 0.0
    for c, k in calls:
        p = project(k, spec, prefer=prefer, launch=launch)
        # the achievable estimate of the call; under graph replay the block is one replay (added below)
        a = estimate(k, spec, tf32=fp32_matmul_on_tf32(c.op, c.impl), serial=serial_engines(c.op, c.impl),
                     launch=launch, mma_sync=tensor_instr(c.op, c.impl) == "mma_sync",
                     l2_reread=l2_reread_bytes(c.op, c.impl, c.dim_map(), dtype, c.mode) * c.count)
        h = a.host_s if launch == "eager" else 0.0
        host, gpu = host + h, gpu + a.gpu_s
        rows.append({"label": c.label.removeprefix("b."), "op": c.op, "impl": c.impl, "mode": c.mode,
                     "count": c.count, "bound_s": p.time_s, "bottleneck": p.bottleneck,
                     "achievable_s": max(h, a.gpu_s), "achievable_bottleneck": a.bottleneck})
        total = total + k
    whole = project(total, spec, prefer=prefer, launch=launch)
    known = [r["bound_s"] for r in rows if r["bound_s"] is not None]
    table = AchievableTable.of([spec])
    if launch == "graph":
        host = host_cost(table, "cuda_graph")  # one CUDAGraph.replay per block call
    if mode in AUTOGRAD_MODES and launch == "eager":
        host += host_cost(table, "autograd")  # one torch.autograd.grad per measured call
    return {"label": "analytic bound", "launch": launch, "calls": rows,
            "composed_s": sum(known) if len(known) == len(rows) else None,
            "summed_cost_bound_s": whole.time_s,
            # the achievable estimate composed the way a model step is: host and device overlap across
            # the block's calls, so the block takes max(sum of host times, sum of device times)
            "achievable": {"label": "achievable estimate", "time_s": max(host, gpu), "host_s": host, "gpu_s": gpu}}
