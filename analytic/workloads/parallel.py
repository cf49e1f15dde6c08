"""Multi-GPU prediction: one GPU's share of a step (``shard.py``) costed like ``predict`` costs one GPU,
plus its communication on the spec's interconnect (``analytic/collectives.py``), composed into a
step time.

Per microbatch of the heaviest pipeline stage:

    t_compute   = sum over the rank's op calls of each call's roofline bound (as ``evaluate.analyze``),
                  layer blocks plus the larger model end (both ends when pp = 1);
    t_dependent = communication the next computation waits for: TP all-reduces, EP all-to-alls, the
                  SSM state chain of context parallelism, TP's vocab-parallel collectives;
    t_overlap   = communication that can run beside computation: ring-attention K/V passes (or the
                  K/V all-gather), pipeline send/recv of activations;
    t_mb        = t_compute + t_dependent + t_overlap                        (--comm-overlap none)
                = t_compute + t_dependent + max(0, t_overlap - t_compute)     (--comm-overlap full)

``full`` hides overlappable communication behind any computation of the microbatch: the most overlap
can give (a bound of the benefit), not what a given framework achieves. Step time:

    t_step = (m + pp - 1) x t_mb + t_dp,   t_dp exposed = all of the gradient all-reduce (none) or
             what exceeds the step's computation, m x t_compute (full).

Bubble fraction (pp - 1) / (m + pp - 1). Tokens per step: batch x seqlen (prefill, train) or batch
(decode: one token per sequence; at the mean context, as ``predict``). The same composition with
every degree 1 is the single-GPU prediction (its time equals ``predict``'s analytic bound), which
gives the speedup and scaling efficiency.

Validation: none yet. The issue's targets (TP blocks within 15% median of measurement) need
multi-GPU runs (``docs/multi_gpu.md`` gives the command); every output says "not validated".

Per-GPU memory (analytic estimate): weights of the heaviest stage at the storage dtype
(``shard.rank_params``); KV cache and recurrent state of the rank's B / dp sequences on its layers;
activations: inference, the largest live set of one call plus the residual stream of a microbatch;
training, what the forward saves for backward of one microbatch times the microbatches in flight
(1F1B: min(pp, m); GPipe: m); gradients at the dtype and Adam state (8 B per parameter, 12 with an
fp32 master copy), unsharded (no ZeRO).
"""

from __future__ import annotations

import numpy as np

from ...errors import UserError
from ..collectives import for_spec
from ..conventions import nbytes
from ..roofline import SpecTable, project_work
from .evaluate import compile_plan, evaluate_plan, phase_grid
from .models import Model
from .phases import plan
from .precision import as_precision
from .report import ADAM_NOTE, check_positive_int, decode_point
from .shard import (
    Parallel,
    check,
    comm_events,
    is_end,
    rank_cache_bytes,
    rank_calls,
    rank_params,
)

LABEL = "analytic bound (compute: roofline of the rank's ops; communication: interconnect model)"
NOT_VALIDATED = ("not validated: no multi-GPU measurement yet (the multi-GPU device command in docs/multi_gpu.md "
                 "produces one)")


def _compute(model: Model, phase: str, par: Parallel, table: SpecTable, b_mb: float, length: float, prec,
             launch: str, bytes_basis: str, impls, recompute: bool, logits: str):
    calls = rank_calls(model, plan(model, phase, impls, recompute, logits), par)
    cp = compile_plan(calls, prec)
    grid = phase_grid(phase, np.array([[b_mb]]), np.array([[length]]))
    W, cb = evaluate_plan(cp, grid, (1, 1))
    bound = project_work(np.moveaxis(W, 1, 0), table, launch, bytes_basis).bound[0, :, 0, 0]
    ends = {c.label: float(bound[i]) for i, c in enumerate(calls) if is_end(c)}
    layers = float(sum(bound[i] for i, c in enumerate(calls) if not is_end(c)))
    first = ends.get("embedding", 0.0)
    last = sum(v for k, v in ends.items() if k != "embedding")
    stage = layers + (first + last if par.pp == 1 else max(first, last))
    live = float(cb.live[:, 0, 0].max()) if len(calls) else 0.0
    return {"stage_microbatch_s": stage, "layers_s": layers, "first_end_s": first, "last_end_s": last,
            "calls": len(calls)}, live


def _saved_bytes(model: Model, par: Parallel, prec, b_mb: float, length: float, impls) -> float:
    """What one microbatch's forward saves for backward on this rank (the sharded prefill plan, all logits)."""
    calls = rank_calls(model, plan(model, "prefill", impls, logits="all"), par)
    cp = compile_plan(calls, prec)
    _, cb = evaluate_plan(cp, phase_grid("prefill", np.array([[b_mb]]), np.array([[length]])), (1, 1))
    return float((cb.saved[:, 0, 0] * cp.counts).sum())


def predict_parallel(model: Model, spec, phase: str, batch: int, seqlen: int, context: int | None = None, *,
                     par: Parallel, dtype="bf16", prefer: str = "measured", launch: str | None = None,
                     bytes_basis: str = "executed", impls: dict | None = None, recompute: bool = False,
                     logits: str = "last", link: str | None = None, with_reference: bool = True) -> dict:
    """The multi-GPU prediction of one point as plain data (module docstring)."""
    batch, seqlen = check_positive_int("batch", batch), check_positive_int("seqlen", seqlen)
    if context is not None and phase != "decode":
        raise UserError("--context applies to the decode phase only")
    if recompute and not par.trivial:
        raise UserError("--recompute with parallel options is not modelled (the per-GPU activation memory of "
                        "recomputation under pipeline schedules); leave one of them out")
    m = check(par, model, phase, batch, seqlen)
    prec = as_precision(dtype)
    e = nbytes(prec.base)
    launch = launch or ("graph" if phase == "decode" else "eager")
    table = SpecTable.of([spec], prefer)
    if phase == "decode":
        length, generated = decode_point(seqlen, context)
        tokens_local, cached = 1.0, length + 1
        step_tokens = float(batch)
    else:
        length, generated = float(seqlen) / par.cp, None
        tokens_local, cached = length, length
        step_tokens = float(batch * seqlen)
    b_rank = batch / par.dp
    b_mb = b_rank / m
    comp, live = _compute(model, phase, par, table, b_mb, length, prec, launch, bytes_basis, impls, recompute, logits)
    t_c = comp["stage_microbatch_s"]

    events = comm_events(model, phase, par, b_mb, tokens_local, prec, logits)
    lm = for_spec(spec, link, prefer) if events else None
    rows, dep, ovl, dp_t = [], 0.0, 0.0, 0.0
    for ev in events:
        ct = lm.time(spec, ev.collective, ev.bytes, ev.ranks, prefer)
        total = ct.time_s * ev.count
        rows.append({"what": ev.what, "group": ev.group, "collective": ev.collective, "ranks": ev.ranks,
                     "bytes": ev.bytes, "count": ev.count, "per": ev.per, "time_each_s": ct.time_s,
                     "latency_each_s": ct.latency_s, "time_s": total, "latency_known": ct.latency_known,
                     "overlappable": not ev.dependent, "origin": ct.origin, "provenance": ct.provenance,
                     "note": ev.note})
        if ev.per == "step":
            dp_t += total
        elif ev.dependent:
            dep += total
        else:
            ovl += total
    full = par.overlap == "full"
    t_mb = t_c + dep + (max(0.0, ovl - t_c) if full else ovl)
    steps = m + par.pp - 1
    dp_exposed = max(0.0, dp_t - m * t_c) if full else dp_t
    step = steps * t_mb + dp_exposed
    time = {
        "label": LABEL, "compute_microbatch_s": t_c, "dependent_comm_microbatch_s": dep,
        "overlappable_comm_microbatch_s": ovl, "microbatch_s": t_mb, "microbatches": m, "pipeline_steps": steps,
        "bubble_fraction": (par.pp - 1) / steps, "dp_comm_s": dp_t, "dp_comm_exposed_s": dp_exposed,
        "step_s": step, "tokens_per_step": step_tokens, "tokens_per_s": step_tokens / step if step > 0 else None,
        "overlap": ("full: overlappable communication hidden behind the microbatch's computation (the most "
                    "overlap can give)" if full else "none: every communication after the computation it follows"),
        "latency_unknown": sorted({r["collective"] for r in rows if not r["latency_known"]}),
    }
    if np.isnan(step):
        raise UserError(f"{spec.id}: the time bound is unknown (a ceiling the rank's ops need is unknown in the spec); "
                        f"ssmbench predict --hw {spec.id} without parallel options names it")
    mem = {"weights": rank_params(model, par) * e, **rank_cache_bytes(model, phase, par, prec, b_rank, cached)}
    if phase == "train":
        in_flight = min(par.pp, m) if par.pp_schedule == "1f1b" else m
        mem["activations"] = _saved_bytes(model, par, prec, b_mb, length, impls) * in_flight
        params = rank_params(model, par)
        mem["gradients"] = params * e
        mem["optimizer"] = params * (8 if prec.base == "fp32" else 12)
    else:
        mem["activations"] = live + b_mb * tokens_local * model.d_model * e
    need = sum(mem.values())
    cap = table.dram_bytes[0]
    fits = None if np.isnan(cap) else bool(need <= cap)
    out = {
        "label": LABEL, "validation": NOT_VALIDATED,
        "model": model.id, "spec": spec.id, "phase": phase, "batch": batch, "seqlen": seqlen, "context": context,
        "generated": generated, "dtype": prec.dtype,
        "parallel": {**par.describe(), "microbatches": m},
        "per_gpu": {"sequences": b_rank, "microbatch_sequences": b_mb, "tokens_per_sequence": tokens_local,
                    "keys_per_query": length if phase == "decode" else None},
        "compute": {"label": "analytic bound (roofline)", **comp, "launch": launch, "bytes_basis": bytes_basis},
        "link": None if lm is None else {"spec": spec.id, "index": lm.index, "name": lm.name,
                                         "bandwidth_per_direction": lm.per_direction.value,
                                         "origin": lm.per_direction.origin, "provenance": lm.per_direction.provenance,
                                         "latency": lm.latency.value, "latency_provenance": lm.latency.provenance},
        "communication": rows,
        "time": time,
        "memory": {"label": "analytic estimate", "per_gpu_bytes": mem, "total_bytes": need,
                   "capacity_bytes": None if np.isnan(cap) else float(cap), "fits": fits,
                   "status": ("capacity unknown" if fits is None else "fits" if fits else
                              f"does not fit: needs {need / 1e9:.4g} GB per GPU, {spec.id} has {cap / 1e9:.4g} GB"),
                   "notes": [ADAM_NOTE + "; not sharded (no ZeRO)"] if phase == "train" else []},
    }
    if with_reference and not par.trivial:
        one = predict_parallel(model, spec, phase, batch, seqlen, context, par=Parallel(), dtype=dtype, prefer=prefer,
                               launch=launch, bytes_basis=bytes_basis, impls=impls, recompute=recompute,
                               logits=logits, with_reference=False)
        t1 = one["time"]["step_s"]
        out["single_gpu"] = {"label": "analytic bound (one GPU, same point)", "step_s": t1,
                             "speedup": t1 / step if step > 0 else None,
                             "scaling_efficiency": t1 / step / par.world if step > 0 else None,
                             "fits": one["memory"]["fits"]}
    return out
