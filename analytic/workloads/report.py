"""One prediction as plain data: per-op and per-layer rows and totals, every number labelled.

``predict`` analyzes one (model, spec, phase, batch, length) point with the vectorized evaluator and
turns it into a dict (the JSON of ``ssmbench predict``): ``total`` (time bound, sum bound, bottleneck,
tokens/s, memory by class and the capacity verdict, the energy estimate at the achievable time
(``energy_step.py``: ``energy``, and ``energy_j``, ``energy_per_token_j``, ``avg_power_w`` beside it),
the launch regimes of decode), ``ops`` (one row per op call of the plan: FLOPs by engine, bytes,
intensity, bound per resource, bottleneck, on-chip fit, ``shape``: the call's dimensions at this
point), ``layers`` (one row per block of the model) and ``spec.ceilings`` (each ceiling used, with its
origin and provenance).

Calibrated estimates are added to such a prediction by ``add_calibration`` of ``calibrate/apply.py``
(``ssmbench predict --calibration``); the analytic model does not import the calibration package.

Decode with ``context`` S and ``seqlen`` L generates L tokens after a cached context of S and reports
the mean per-token step, evaluated at the mean context S + (L - 1) / 2. FLOPs and bytes of every op
are affine in the context, so their means are exact; the max over resources is convex, so the time at
the mean context is at most the mean time: the result is still a lower bound. Without ``context``,
``seqlen`` is the context and one token is decoded.
"""

from __future__ import annotations

import numpy as np

from ...errors import UserError
from ...hwspecs.schema import LIBRARY_KERNEL_CLASSES
from ..registry import AnalyticError, get_op
from ..roofline import (
    COL,
    LABEL,
    RESOURCES,
    TENSOR_DTYPES,
    SpecTable,
    describe,
    not_bounded_reasons,
)
from .energy_step import step_energy
from .evaluate import COMPUTE_RESOURCES, GridResult, analyze, call_shape
from .models import Model
from .phases import plan
from .precision import Precision
from .train_host import KEY as BACKWARD
from .train_host import backward_launches, pays_backward

ADAM_NOTE = ("train memory assumes Adam with fp32 moments (8 B/parameter) and an fp32 master copy "
             "(4 B/parameter) unless the dtype is fp32; gradients at the dtype")


def _f(x) -> float | None:
    x = float(x)
    return None if np.isnan(x) else x


def check_positive_int(name: str, value, limit: int = 1 << 40) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= limit:
        raise UserError(f"{name} must be a positive integer (at most {limit}), got {value!r}")
    return int(value)


def ops_run(model: Model, phase: str, impls: dict | None = None, recompute: bool = False,
            logits: str = "last") -> set[str]:
    """The ops ``model`` runs in ``phase`` (an op the plan lists kernel by kernel, ``OpCall.part_of``, included)."""
    calls = plan(model, phase, impls, recompute, logits)
    return {c.op for c in calls} | {c.part_of for c in calls if c.part_of is not None}


def check_impls(models: list[Model], phase: str, impls: dict | None, recompute: bool = False,
                logits: str = "last") -> None:
    """Every requested (op, implementation) is registered, has a rule for the phase (``plan`` checks),
    and names an op that one of ``models`` runs in ``phase``: a request that changes nothing is an error."""
    impls = impls or {}
    for op, impl in impls.items():
        try:
            get_op(op).impl(impl)
        except AnalyticError as exc:
            raise UserError(f"--impl {op}={impl}: {exc}") from None
    runs = set().union(*(ops_run(m, phase, impls, recompute, logits) for m in models))
    stray = sorted(set(impls) - runs)
    if stray:
        raise UserError(f"--impl names op(s) {', '.join(stray)}, which {', '.join(m.id for m in models)} does not "
                        f"run in {phase}; its ops: {', '.join(sorted(runs))}")


def verdict(model: Model, baseline: Model, table: SpecTable, phase: str, batch: int, length: float, seqlen: int,
            model_time: float | None, model_fits: bool, **kw) -> dict:
    """The model against its attention baseline at the requested point (same phase, batch, length and
    spec; ``kw``: the prediction's options), as plain data: both time bounds and the speedup."""
    rb = analyze(baseline, phase, table, [batch], [length], **kw)
    tb = _f(rb.time_s[0, 0, 0])
    speedup = tb / model_time if tb is not None and model_time else None
    fits = {"model": model_fits, "baseline": bool(rb.fits[0, 0, 0])}
    out = {"label": LABEL, "baseline": baseline.id, "phase": phase, "batch": batch, "length": seqlen,
           "model_time_s": model_time, "baseline_time_s": tb, "speedup": speedup, "fits": fits,
           "meaning": "speedup = baseline time bound / model time bound at this phase, batch and length on "
                      "this spec (> 1: the model is faster); bounds regardless of device-memory capacity"}
    if speedup is None:
        return {**out, "result": "no speedup: a time bound is unknown on this spec"}
    unfit = [k for k, v in fits.items() if not v]
    return {**out, "result": f"speedup {speedup:.3g}x over {baseline.id}"
                             + (f" ({' and '.join(unfit)} does not fit in device memory)" if unfit else "")}


def decode_point(seqlen: int, context: int | None) -> tuple[float, int]:
    """(mean context, tokens generated) of a decode request."""
    if context is None:
        return float(seqlen), 1
    return context + (seqlen - 1) / 2, seqlen


def ceilings_used(table: SpecTable, launch: str) -> list[dict]:
    sc = table.specs[0]
    items = [("tensor", c) for c in sc.tensor.values()] + [
        ("vector", sc.vector), ("special_function", sc.special_function), ("dram", sc.dram)]
    items += [("cache", c) for c in sc.caches] + [("launch", sc.launch[launch])]
    items += [("on_chip_capacity", sc.on_chip)] if sc.on_chip is not None else []
    items += [("dram_capacity", sc.dram_capacity)]
    return [{"resource": r, "key": c.key, "value": c.value, "origin": c.origin, "provenance": c.provenance}
            for r, c in items]


def _op_rows(res: GridResult) -> list[dict]:
    sc = res.table.specs[0]
    cp, proj, W = res.calls, res.call_proj, res.call_work
    on_chip = sc.on_chip_capacity()
    resident = res.residency[0] if res.residency and bool(res.residency[0].resident[0, 0]) else None
    rows = []
    for i, c in enumerate(cp.calls):
        w = W[i, :, 0, 0].copy()
        moved_c = float(res.call_state[0][i, 0, 0]) if resident else 0.0
        moved_e = float(res.call_state[1][i, 0, 0]) if resident else 0.0
        w[COL["dram.compulsory"]] -= moved_c  # served by the on-chip level that holds the state
        w[COL["dram.executed"]] -= moved_e
        by_dtype = {d: float(w[COL[f"tensor.{d}"]]) for d in TENSOR_DTYPES if w[COL[f"tensor.{d}"]] > 0}
        flops = sum(by_dtype.values()) + float(w[COL["vector"]])
        executed = float(w[COL["dram.executed"]])
        bounds, missing = {}, []
        for r in RESOURCES:
            t = float(proj.times[r][0, i, 0, 0])
            if bool(proj.unbounded[r][0, i, 0, 0]):
                missing.append(not_bounded_reasons(sc, r, res.launch, by_dtype))
            bounds[r] = t if t > 0 else None
        b = int(proj.bottleneck[0, i, 0, 0])
        ws = float(w[COL["working_set"]])
        rows.append({
            "label": c.call.label, "block": c.call.block or None, "op": c.call.op, "impl": c.call.impl,
            "backend": c.call.backend, "mode": c.call.mode, "dtype": c.dtype, "count": c.call.count,
            "module_calls": c.call.module_calls, "dims": {k: v for k, v in c.call.dims},
            "shape": {k: int(v) if v.is_integer() else v
                      for k, v in call_shape(c.call, res.phase, res.batch[0], res.length[0]).items()},
            "flops_tensor": by_dtype, "flops_vector": float(w[COL["vector"]]),
            "transcendentals": float(w[COL["special_function"]]),
            "bytes_compulsory": float(w[COL["dram.compulsory"]]), "bytes_executed": executed,
            "bytes_on_chip": {resident.level: moved_e} if resident and moved_e else {},
            "intensity_flop_per_byte": flops / executed if executed > 0 else None,
            "launches": float(w[COL["launches"]]),
            "bound_s": bounds, "time_s": _f(proj.bound[0, i, 0, 0]),
            "bottleneck": RESOURCES[b] if b >= 0 else None, "not_bounded": missing,
            "working_set_bytes": ws,
            "fits_on_chip": None if on_chip is None else bool(ws <= on_chip),
        })
    return rows


def _layer_rows(res: GridResult, ops: list[dict], total: float | None) -> list[dict]:
    model = res.model
    rows = []
    for name, n in model.block_counts.items():
        mine = [o for o in ops if o["block"] == name]
        t = sum(o["time_s"] or 0.0 for o in mine)
        shares: dict[str, float] = {}
        for o in mine:
            if o["bottleneck"]:
                shares[o["bottleneck"]] = shares.get(o["bottleneck"], 0.0) + (o["time_s"] or 0.0)
        rows.append({
            "block": name, "kind": model.block(name).kind, "count": n, "time_s": t,
            "time_per_instance_s": t / n, "share_of_total": (t / total) if total else None,
            "bottleneck": max(shares, key=shares.get) if shares else None,
            "flops": sum(sum(o["flops_tensor"].values()) + o["flops_vector"] for o in mine),
            "bytes_executed": sum(o["bytes_executed"] for o in mine),
        })
    for label in ("embedding", "final.norm", "lm_head"):
        mine = [o for o in ops if o["label"] == label]
        if mine:
            o = mine[0]
            rows.append({"block": label, "kind": o["op"], "count": 1, "time_s": o["time_s"],
                         "time_per_instance_s": o["time_s"],
                         "share_of_total": (o["time_s"] / total) if total and o["time_s"] else None,
                         "bottleneck": o["bottleneck"],
                         "flops": sum(o["flops_tensor"].values()) + o["flops_vector"],
                         "bytes_executed": o["bytes_executed"]})
    return rows


def _layers_text(layers: tuple[int, ...]) -> str:
    """Layer indices as ranges: 0-3, 8, 10-11."""
    runs: list[list[int]] = []
    for i in layers:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def model_notes(model: Model, res: GridResult, ops: list[dict]) -> list[str]:
    """What the prediction assumed about windows and dtypes, one sentence each."""
    notes = []
    for block, (window, layers) in model.windowed_attention().items():
        notes.append(f"sliding-window attention: block {block} attends the last {window} tokens on layers "
                     f"{_layers_text(layers)} (of {len(model.layer_sequence)}): its KV cache keeps min(context, "
                     f"{window}) tokens per sequence, each query attends min(position, {window}) keys.")
    prec = res.precision
    if prec.dtype == "fp8":
        at = {}
        for o in ops:
            at.setdefault(o["dtype"], []).append(o["label"])
        notes.append("--dtype fp8 applies where an op has an fp8 rule: "
                     + "; ".join(f"{d}: {', '.join(labels)}" for d, labels in at.items()) + ".")
    if model.count_kind("attention"):
        notes.append(f"KV cache at {prec.kv} ({prec.describe()['kv_dtype_source']}).")
    if model.count_kind("mamba1", "mamba2", "mamba3"):
        fixed = (" (Mamba-3's SSM and angle states fp32, as mamba-ssm allocates them)"
                 if model.count_kind("mamba3") else "")
        notes.append(f"recurrent (conv + SSM) state at {prec.state} ({prec.describe()['state_dtype_source']}){fixed}.")
    return notes


def _dram_path_factor(a, w: np.ndarray, table) -> float:
    """How much longer a call's DRAM bytes take at the attained bandwidths of the kernel paths that move them
    (``memory.dram.path.<p>``: ATen's non-vectorized kernels) than at the copy bandwidth: the achievable
    DRAM time without its per-kernel latency over the bytes at ``memory.dram.bandwidth``; 1 where no path
    applies or the spec knows no rate."""
    bw, lat = float(table.dram_bw[0]), float(table.dram_latency[0])
    nbytes = float(a.dram_bytes[0, 0, 0])
    if not nbytes > 0 or not bw > 0:
        return 1.0
    stream = float(a.times["dram"][0, 0, 0]) - float(w[COL["launches"], 0, 0]) * (0.0 if np.isnan(lat) else lat)
    return max(1.0, stream / (nbytes / bw))


def achievable_rows(res: GridResult, spec, ops: list[dict], runtime=None) -> dict:
    """The achievable estimate (``analytic/achievable.py``) of every op call of ``res`` (first spec,
    first grid point), added to its row, and of the whole step.

    The step's host and device overlap across op calls (the launch queue lets the host run ahead of the
    device while it issues later calls), so the step takes max(sum of host times, sum of device times),
    not the sum of per-call maxima; under CUDA-graph replay the host term is zero. Each call's device time
    holds the bytes its kernel re-reads from the device-wide cache (``execution.Traits.l2_rereads``: Mamba-1's
    scan re-reads B and C once per channel), as the op-level estimate (``calibrate/join.py``) and the
    energy model (``energy_step.call_rereads``) charge them."""
    from ..achievable import LABEL as ACH_LABEL
    from ..achievable import AchievableTable, achievable_work, host_cost
    from ..chain import chain_only_key
    from ..execution import (
        DRAM_PATHS,
        chain_of,
        dram_path_index,
        fp32_matmul_on_tf32,
        serial_engines,
        tensor_instr,
    )
    # attained ceilings where the spec has them whatever the bound's ceiling rule: the estimate is of what
    # runs, the bound of what could
    table = AchievableTable.of([spec], "measured")
    from ..runtime import RUNTIMES, call_host_s, used_keys
    from .energy_step import call_rereads
    rereads = call_rereads(res)  # bytes each call re-reads from the device-wide cache (execution.l2_reread_bytes)
    host = gpu = 0.0
    by_class: dict[str, float] = {}
    eager_parts = []  # per call (host under the plain eager model, launches, op calls, block kind): the runtime comparison
    residency = res.residency[0] if res.residency else None
    resident = residency is not None and bool(residency.resident[0, 0])
    chain_keys = set()
    mma_keys = set()  # compute.tensor_mma_sync.<dtype> that an mma.sync call of this step really uses
    path_keys = set()  # memory.dram.path.<path> that a call of this step moves its bytes on
    for i, c in enumerate(res.calls.calls):
        op, impl, be = c.call.op, c.call.impl, c.call.backend  # be: the backend the modules call (phases.SDPA_BACKEND)
        path = dram_path_index(op, impl, be)
        if path >= 0:
            path_keys.add(f"memory.dram.path.{DRAM_PATHS[path]}")
        w = np.array(res.call_work[i, :, :1, :1])
        mma = tensor_instr(op, impl, be) == "mma_sync"
        if mma:
            mma_keys |= {f"compute.tensor_mma_sync.{d}" for d in TENSOR_DTYPES if w[COL[f"tensor.{d}"], 0, 0] > 0}
        # the call's sequential chain at the first grid point, its kernel run count times in a row
        chain = chain_of(op, impl, {k: round(v) for k, v in call_shape(
            c.call, res.phase, float(res.batch[0]), float(res.length[0])).items()}, c.call.mode, be)
        if chain is not None:
            chain = chain.repeated(c.call.count)
            chain_keys |= set(chain.keys) | {"compute.sm_count"}
        state_bytes = 0.0
        if resident:  # the state lives in the spec's persistent on-chip level (placement.py), not in DRAM
            state_c, state_e = (float(x[i, 0, 0]) for x in res.call_state)
            w[COL["dram.compulsory"]] -= state_c
            w[COL["dram.executed"]] -= state_e
            state_bytes = state_e
        tf32, serial = fp32_matmul_on_tf32(op, impl, be), serial_engines(op, impl, be)
        a = achievable_work(w, table, tf32=tf32, serial=serial, launch=res.launch, graph_replays=0.0,
                            mma_sync=mma, chain=chain, dram_path=path, l2_reread=rereads[i])
        h, g = float(a.host[0, 0, 0]), float(a.gpu[0, 0, 0])
        h_eager = h if res.launch == "eager" else float(achievable_work(
            w, table, tf32=tf32, serial=serial, launch="eager").host[0, 0, 0])
        kind = res.model.block(c.call.block).kind if c.call.block else None
        eager_parts.append((h_eager, float(w[COL["launches"], 0, 0]), float(c.call.module_calls), kind))
        if runtime is not None:
            h = call_host_s(runtime, h, eager_parts[-1][1], eager_parts[-1][2], lambda k: host_cost(table, k), kind,
                            res.phase)
        if state_bytes:
            node = float(a.gpu[0, 0, 0] - np.max([t[0, 0, 0] for t in a.times.values()]))
            g = max(g, node + state_bytes / residency.bandwidth)
        cls = str(a.bottleneck_names()[0, 0, 0])
        if runtime is not None and cls == "host/launch" and h < g:  # the runtime took the host cost away
            cls = _gpu_class(a)
        elif runtime is not None and h >= g:
            cls = "host/launch"
        ops[i]["achievable"] = {"label": ACH_LABEL, "time_s": max(h, g), "host_s": h, "gpu_s": g, "bottleneck": cls,
                                "host_eager_s": eager_parts[-1][0], "fixed_s": float(a.fixed[0, 0, 0]),
                                "l2_bytes": float(a.l2_bytes[0, 0, 0]), "dram_bytes": float(a.dram_bytes[0, 0, 0]),
                                "dram_path_factor": _dram_path_factor(a, w, table),
                                "on_chip_bytes": state_bytes}
        host += h
        gpu += g
        by_class[cls] = by_class.get(cls, 0.0) + max(h, g)
    if res.launch == "graph":  # the whole step is one captured graph, replayed once
        host += host_cost(table, "cuda_graph")
    if res.phase == "train" and res.launch == "eager":
        # the step's backward is one autograd engine call (its kernels are counted with their ops)
        host += host_cost(table, "autograd")
    n_bwd = backward_launches(tuple(c.call for c in res.calls.calls), res.dtype, res.phase, float(res.batch[0]),
                              float(res.length[0]))
    bwd_host = n_bwd * host_cost(table, BACKWARD) if pays_backward(res.phase, res.launch, runtime) else 0.0
    host += bwd_host  # the backward's per-launch host cost (train_host.py)
    t = max(host, gpu)
    host_used = {f"launch.{col}" for col in COL if col.startswith("host.") and res.call_work[:, COL[col], 0, 0].sum() > 0}
    if res.phase == "train":
        host_used.add("launch.host.autograd")
        if pays_backward(res.phase, res.launch, runtime) and n_bwd:
            host_used.add(f"launch.host.{BACKWARD}")
    if res.launch == "graph":
        host_used = {"launch.host.cuda_graph"}
    if runtime is not None:
        host_used = ({k for k in host_used if k == "launch.host.autograd"} if runtime.launch_class else host_used)
        host_used |= used_keys(runtime, {p[3] for p in eager_parts}, res.phase)
    used = {k for k in table.missing[0] if (not k.startswith("launch.host.") or k in host_used)
            and (not chain_only_key(k) or k in chain_keys)
            and (not k.startswith("compute.tensor_mma_sync.") or k in mma_keys)
            and (not k.startswith("memory.dram.path.") or k in path_keys)
            and (k != "launch.gemm_fixed" or res.call_work[:, COL["host.cublas"], 0, 0].sum() > 0)
            and (k != "launch.library_fixed"
                 or sum(res.call_work[:, COL[f"host.{c}"], 0, 0].sum() for c in LIBRARY_KERNEL_CLASSES) > 0)}
    out = {"label": ACH_LABEL, "time_s": t, "host_s": host, "gpu_s": gpu,
           "bottleneck": "host/launch" if host >= gpu else max(by_class, key=by_class.get),
           "time_by_class_s": by_class, "launch_regime": res.launch,
           "not_modelled": {k: table.missing[0][k] for k in sorted(used)},
           "note": "per call: max(host issue time, device time); the step: max(sum of host, sum of device)",
           "backward_launches": n_bwd, "backward_host_s": bwd_host}
    if runtime is not None:
        out["runtime"] = runtime.name
        out["host_share"] = host / t if t > 0 else None
        out["runtimes"] = _runtime_comparison(RUNTIMES, eager_parts, gpu, table, res, host_cost, n_bwd)
    return out


def _gpu_class(a) -> str:
    """The device-side class of one achievable call (its bottleneck with the host term left out)."""
    fixed, top = float(a.fixed[0, 0, 0]), max(float(t[0, 0, 0]) for t in a.times.values())
    if fixed >= top or float(a.chain[0, 0, 0]) >= top > 0:
        return "latency"
    return max(a.times, key=lambda r: float(a.times[r][0, 0, 0]))


def _runtime_comparison(runtimes, parts, gpu: float, table, res, host_cost, n_bwd: float = 0.0) -> dict:
    """The step under every runtime, same device time: {runtime: {time_s, host_s, saving_s}} (saving
    against the slowest); the host terms a spec does not know count zero and are named per runtime."""
    from ..runtime import call_host_s, used_keys
    out = {}
    for name, rt in runtimes.items():
        h = sum(call_host_s(rt, he, n, calls, lambda k: host_cost(table, k), kind, res.phase)
                for he, n, calls, kind in parts)
        if rt.launch == "graph":
            h += host_cost(table, "cuda_graph")
        elif res.phase == "train":
            h += host_cost(table, "autograd")
        backward = pays_backward(res.phase, rt.launch, rt) and n_bwd > 0
        h += n_bwd * host_cost(table, BACKWARD) if backward else 0.0
        keys = used_keys(rt, {p[3] for p in parts}, res.phase) | ({"launch.host.cuda_graph"} if rt.launch == "graph" else set()) \
            | ({f"launch.host.{BACKWARD}"} if backward else set())
        missing = sorted(k for k in keys if k in table.missing[0])
        out[name] = {"time_s": max(h, gpu), "host_s": h, "gpu_s": gpu, "host_unknown": missing}
    worst = max(v["time_s"] for v in out.values())
    for v in out.values():
        v["saving_s"] = worst - v["time_s"]
    return out


def module_style(rt, flash_attn: bool = True) -> str:
    """How the runtime ``rt``'s modules split a block into op calls (``phases.MODULE_STYLES``)."""
    modules = rt.modules if rt is not None else "library"
    return "library_sdpa" if modules == "library" and not flash_attn else modules


def predict(model: Model, spec, phase: str, batch: int, seqlen: int, context: int | None = None, *,
            dtype: str | Precision = "bf16", prefer: str = "measured", launch: str | None = None,
            bytes_basis: str = "executed", impls: dict | None = None, recompute: bool = False,
            logits: str = "last", with_searches: bool = True, runtime: str | None = None,
            flash_attn: bool = True, optimizer: str | None = None) -> dict:
    """The prediction for one point, as plain data (see the module docstring). ``runtime``
    (``analytic/runtime.py``) sets the launch regime and the host terms of the achievable estimate.
    ``flash_attn``: whether flash-attn is installed beside the library modules; without it mamba-ssm's
    MHA runs its SDPA fallback (``phases.MODULE_STYLES``: ``library_sdpa``). ``optimizer`` (train): the
    parameter update the step ends with (``phases.plan``; None: none, the step ends with the backward)."""
    from ..runtime import get_runtime
    rt = get_runtime(runtime, launch)
    if rt is not None:
        launch = rt.launch
    batch = check_positive_int("batch", batch)
    seqlen = check_positive_int("seqlen", seqlen)
    if context is not None:
        if phase != "decode":
            raise UserError(f"--context applies to the decode phase only (got phase {phase!r}); "
                            "for prefill and train, --seqlen is the prompt / sequence length")
        context = check_positive_int("context", context)
    if phase == "decode" and logits == "all":
        raise UserError("--logits all applies to prefill only: decode computes one token's logits per "
                        "sequence (--logits last)")
    check_impls([model], phase, impls, recompute, logits)
    from ..runtime import runtime_impls
    impls = {**runtime_impls(rt, phase), **(impls or {})} or None
    table = SpecTable.of([spec], prefer)
    length, generated = decode_point(seqlen, context) if phase == "decode" else (float(seqlen), None)
    res = analyze(model, phase, table, [batch], [length], dtype=dtype, launch=launch,
                  bytes_basis=bytes_basis, impls=impls, recompute=recompute, logits=logits,
                  keep_calls=True, modules=module_style(rt, flash_attn), optimizer=optimizer)
    ops = _op_rows(res)
    t = _f(res.time_s[0, 0, 0])
    mem = {k: float(v[0, 0]) for k, v in res.memory.items()}
    need = float(res.memory_total[0, 0])
    cap = _f(table.dram_bytes[0])
    fits = bool(res.fits[0, 0, 0])
    sc = table.specs[0]
    if cap is None:
        status = f"capacity not checked: memory.dram.capacity unknown ({sc.dram_capacity.provenance})"
    elif fits:
        status = "fits"
    else:
        parts = ", ".join(f"{k} {v / 1e9:.3g} GB" for k, v in mem.items() if v > 0)
        status = (f"does not fit: needs {need / 1e9:.4g} GB ({parts}) but {spec.id} has {cap / 1e9:.4g} GB "
                  f"of device memory ({describe(sc.dram_capacity)})")
    tokens = float(res.tokens[0, 0])
    shares = {RESOURCES[r]: float(res.shares[r, 0, 0, 0]) for r in range(len(RESOURCES)) if res.shares[r, 0, 0, 0] > 0}
    b = int(res.bottleneck[0, 0, 0])
    not_bounded = []
    for r in res.not_bounded[0]:
        by_dtype = {d: 1.0 for d in TENSOR_DTYPES if any(o["flops_tensor"].get(d) for o in ops)}
        not_bounded.append(not_bounded_reasons(sc, r, res.launch, by_dtype))
    if sc.per_sm_levels:
        not_bounded.append(f"per-SM levels {', '.join(sc.per_sm_levels)} (traffic at these levels is not "
                           "counted by the cost model)")
    total = {
        "label": LABEL,
        "time_s": t if fits else None,
        "time_s_ignoring_capacity": t,
        "sum_s": _f(res.sum_s[0, 0, 0]),
        "bottleneck": RESOURCES[b] if b >= 0 else None,
        "compute_bound": (RESOURCES[b] in COMPUTE_RESOURCES) if b >= 0 else None,
        "time_by_bottleneck_s": shares,
        "tokens": tokens,
        "tokens_per_s": (tokens / t) if t and fits else None,
        "time_per_token_s": (t / tokens) if t is not None else None,
        "fits": fits, "status": status,
        "memory_bytes": mem, "memory_total_bytes": need, "memory_capacity_bytes": cap,
        "not_bounded": not_bounded,
        "ops_not_fitting_on_chip": [o["label"] for o in ops if o["fits_on_chip"] is False],
        "on_chip_capacity_bytes": sc.on_chip_capacity(),
        "launch_regime": res.launch, "bytes_basis": bytes_basis,
    }
    ach = achievable_rows(res, spec, ops, rt)
    ach["tokens_per_s"] = tokens / ach["time_s"] if ach["time_s"] > 0 and fits else None
    total["achievable"] = ach
    e = step_energy(res, spec, ops, ach["time_s"], tokens)
    total["energy"] = e
    total.update(energy_j=e["energy_j"] if fits else None,
                 energy_per_token_j=e["energy_per_token_j"] if fits else None,
                 avg_power_w=e["avg_power_w"] if fits else None, energy_note=e["note"])
    notes = model_notes(model, res, ops)
    if phase == "decode" and model.state_bytes_per_sequence(res.precision.state) > 0:
        total["state_residency"] = res.residency[0].at()
        notes.append(total["state_residency"]["result"] + ".")
    pim = res.pim[0] if res.pim else None
    if pim is not None:
        host = pim["time_s_host_gemms"]
        total["pim_caveat"] = {**pim, "time_s_host_gemms": None if host is None else float(np.asarray(host)[0, 0]),
                               "label": LABEL}
        notes.append("caveat: " + pim["result"] + ".")
    if phase == "decode":
        regimes = {}
        for regime in ("eager", "graph"):
            r2 = analyze(model, phase, table, [batch], [length], dtype=dtype, launch=regime,
                         bytes_basis=bytes_basis, impls=impls, logits=logits)
            rb = int(r2.bottleneck[0, 0, 0])
            regimes[regime] = {"time_s": _f(r2.time_s[0, 0, 0]), "bottleneck": RESOURCES[rb] if rb >= 0 else None,
                               "launch_not_bounded": "launch" in r2.not_bounded[0]}
        total["regimes"] = regimes
        total["generated_tokens"] = generated
        total["mean_context"] = length
        notes.append("decode time is per step (one token per sequence)"
                     + (f", mean over {generated} steps evaluated at the mean context {length:g}" if context else ""))
    if phase == "train":
        notes.append(ADAM_NOTE)
    if with_searches:
        from .. import sweep
        if phase == "decode":
            total["compute_bound_batch"] = sweep.compute_bound_batch(
                model, spec, int(round(length)), dtype=dtype, prefer=prefer, launch=res.launch,
                bytes_basis=bytes_basis, impls=impls)
            total["max_batch_in_memory"] = sweep.max_batch_in_memory(
                model, spec, "decode", int(round(length)), dtype=dtype, prefer=prefer, impls=impls)
            cb, most = total["compute_bound_batch"], total["max_batch_in_memory"]["batch"]
            if cb["batch"] is None and most is not None:
                cb["result"] += f" (the search ignores capacity: batches above {most} do not fit in device memory)"
        if model.spec.family != "transformer":
            baseline = sweep.default_baseline(model)
            total["verdict"] = verdict(model, baseline, table, phase, batch, length, seqlen, t, fits, dtype=dtype,
                                       launch=res.launch, bytes_basis=bytes_basis, impls=impls,
                                       recompute=recompute, logits=logits)
            total["crossover"] = sweep.crossover(model, baseline, spec, phase, batch, dtype=dtype, prefer=prefer,
                                                 bytes_basis=bytes_basis, recompute=recompute, impls=impls)
    return {
        "label": LABEL,
        "model": model.summary(),
        "spec": {"id": spec.id, "name": spec.name, "prefer": prefer, "hypothetical": spec.hypothetical,
                 "ceilings": ceilings_used(table, res.launch)},
        "phase": phase, "batch": batch, "seqlen": seqlen, "context": context, "dtype": res.precision.dtype,
        "precision": res.precision.describe(),
        "recompute": recompute, "total": total, "layers": _layer_rows(res, ops, t), "ops": ops,
        "units": {"time": "s", "bytes": "B", "flops": "FLOP", "energy": "J", "intensity": "FLOP/B",
                  "tokens_per_s": "tokens/s"},
        "notes": notes,
    }
