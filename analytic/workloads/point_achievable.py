"""The step's achievable estimate at one point as generated straight-line Python: the fast path of
``point.step_achievable``.

``step_achievable`` evaluates the plan's work (``point.plan_work``) and calls
``achievable.achievable_work`` on the [work column, call] array (and once more per call with a
sequential chain); for one point its time is numpy's overhead on arrays of a few dozen elements. Here
the same rules are written out per call, for one spec, as one Python function ``f(batch, length)``:

- each call's work as ``plan_work`` computes it (the same dimensions, constraint checks, "a call with a
  zero dimension does not run" rule, and the terms added to their columns in the same order);
- each call's achievable times as ``achievable_work`` computes them for that call: the engines
  (tensor per dtype, at the mma.sync rate where the call issues mma.sync; fp32 matmul FLOPs on TF32
  where the call does and the spec knows the rate; the software paths' FLOPs and bytes at their own
  rates), the L2-resident share of the re-read bytes, DRAM with its per-kernel latency, the graph-node
  and GEMM fixed times, the host's time per backend class (eager) or none (a graph, replayed once for
  the step), the max over the engines (or their sum where the call's engines run one after another),
  the chain (``execution.chain_of`` at this point, its count times in a row: computed at run time by
  the same functions as ``achievable_work``), the kernel's cache re-reads (``point.reread_bytes`` at
  this point: an l2 term, and one more phase of a serial kernel's engines), and the label (the largest engine, the first of equals;
  latency where the fixed time or the chain binds; host/launch where the host does);
- the step combined as ``step_achievable`` does.

The spec's parameters (``achievable.AchievableTable``) enter as constants, each computed by the same
numpy expression as in ``achievable_work`` (NaN -> 0 through ``achievable._z``) and written in exactly
(``repr`` of a float); only the columns a call's cost fills appear. Sums over tensor dtypes and host
classes add the same terms in another order than numpy's ``tensordot`` (to rounding). Where a constant
is not finite (a zero rate: numpy's product would be NaN), ``generate`` returns None and the caller
keeps ``step_achievable``. tests/test_point_fast.py compares both with the general path.
"""

from __future__ import annotations

import math

import numpy as np

from ...hwspecs.schema import COMPUTE_PATHS, DRAM_PATHS, HOST_CLASSES, LIBRARY_KERNEL_CLASSES
from ..achievable import (CLASSES, L2_RESIDENT_FRACTION, AchievableTable, _l2_latency, _lib_s, _z, chain_step_time,
                          host_cost)
from ..chain import chain_time
from ..fa2_split import split_kv_after
from ..registry import AnalyticError
from ..roofline import COL, TENSOR_DTYPES
from .train_host import KEY as BACKWARD
from .train_host import backward_launches, pays_backward


def _f(x) -> float:
    return float(np.asarray(x).reshape(-1)[0])


def _constants(t: AchievableTable) -> dict | None:
    """One spec's constants of ``achievable_work`` (its first spec), or None where one is not finite."""
    nt = len(TENSOR_DTYPES)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_t = np.where(np.isnan(t.rate_tensor), 0.0, 1.0 / t.rate_tensor)[0]
        rate_mma = np.where(np.isnan(t.rate_mma_sync), t.rate_tensor, t.rate_mma_sync)
        inv_m = np.where(np.isnan(rate_mma), 0.0, 1.0 / rate_mma)[0]
        tf32_rate = t.rate_tensor[:1, TENSOR_DTYPES.index("tf32")]
        k = {"inv_t": [float(x) for x in inv_t], "inv_m": [float(x) for x in inv_m],
             "ztf": _f(_z(1.0 / tf32_rate)), "tf32_known": not bool(np.isnan(tf32_rate[0])),
             "zv": _f(_z(1.0 / t.rate_vector[:1])), "zs": _f(_z(1.0 / t.rate_sfu[:1])),
             "lim": _f(L2_RESIDENT_FRACTION * t.l2_capacity[:1]), "known_l2": not bool(np.isnan(t.l2_bw[0])),
             "zl2": _f(_z(1.0 / t.l2_bw[:1])), "zlat": _f(_z(t.dram_latency[:1])), "zd": _f(_z(1.0 / t.dram_bw[:1])),
             "znode": _f(_z(t.node_s[:1])), "zgemm": _f(_z(t.gemm_s[:1])), "zlib": _f(_z(_lib_s(t)[:1])),
             "zh": [float(x) for x in _z(t.host_s)[0]]}
        cpath, dpath = {}, {}
        for i, p in enumerate(COMPUTE_PATHS):
            rate = np.full(1, np.nan) if t.path_rate is None else t.path_rate[:1, i]
            if not np.isnan(rate[0]):
                cpath[p] = _f(_z(1.0 / rate) - _z(1.0 / t.rate_vector[:1]))
        for i, p in enumerate(DRAM_PATHS):
            bw = np.full(1, np.nan) if t.path_bw is None else t.path_bw[:1, i]
            if not np.isnan(bw[0]):
                dpath[p] = _f(_z(1.0 / bw) - _z(1.0 / t.dram_bw[:1]))
    k["cpath"], k["dpath"] = cpath, dpath
    if len(k["inv_t"]) != nt or not all(math.isfinite(x) for x in k["inv_t"] + k["inv_m"]):
        return None
    return k


def chain_seconds(table: AchievableTable, c, phase: str, batch: float, length: float) -> tuple[float, float]:
    """The chain time of plan call ``c`` at this point on the table's first spec, and the time after the max of
    its terms (a split-KV kernel's last step and combine, fa2_split.py), as ``step_achievable`` and
    ``achievable_work`` compute them ((0, 0) where the call has no chain here)."""
    from ..execution import chain_of
    from .evaluate import call_shape

    chain = chain_of(c.op, c.impl, {k: round(v) for k, v in call_shape(c, phase, batch, length).items()}, c.mode,
                     c.backend)
    if chain is None:
        return 0.0, 0.0
    chain = chain.repeated(c.count)
    sms = np.asarray(table.sm_count).reshape(-1, 1)

    def step(link):
        return np.asarray(chain_step_time(link, table)).reshape(-1, 1)

    after = split_kv_after(chain, sms, step, np.reshape(table.node_s, (-1, 1)),
                           np.reshape(table.dram_latency, (-1, 1)), np.reshape(_l2_latency(table), (-1, 1)))
    return _f(chain_time(chain, sms, step)), _f(after)


def _call_lines(i: int, c, k: dict, tf32: bool, serial: int, mma: bool, launch: str, chained: bool,
                rereads: bool = False) -> list[str]:
    """The body that computes call ``i``'s (host, gpu, class) into h, g, q from its work columns w<col>
    (``serial``: the engine mode, ``execution.ENGINE_CODES``)."""
    cols = {col for _, col, _ in c.cols}

    def w(name: str) -> str:
        return f"w{COL[name]}" if COL[name] in cols else "0.0"

    nt = len(TENSOR_DTYPES)
    inv = k["inv_m"] if mma else k["inv_t"]
    terms = [f"{inv[d]!r} * w{COL[f'tensor.{TENSOR_DTYPES[d]}']}" for d in range(nt)
             if COL[f"tensor.{TENSOR_DTYPES[d]}"] in cols]
    out = [f"t = {' + '.join(terms) if terms else '0.0'}"]
    moved = "0.0"
    if tf32 and COL["tensor.fp32"] in cols:
        out.append(f"t = t + w{COL['tensor.fp32']} * {k['ztf']!r}")
        if k["tf32_known"]:
            moved = f"w{COL['tensor.fp32']}"
    vec = w("vector") if moved == "0.0" else f"({w('vector')} - {moved})"  # x - 0.0 is x
    out.append(f"vec = {vec} * {k['zv']!r}")
    for p, d in k["cpath"].items():
        if COL[f"path.compute.{p}"] in cols:
            out.append(f"vec = vec + w{COL[f'path.compute.{p}']} * {d!r}")
    out.append(f"sfu = {w('special_function')} * {k['zs']!r}")
    lau, ex, co = w("launches"), w("dram.executed"), w("dram.compulsory")
    # (conditional expressions in place of the builtin max: the same value, a fraction of the time)
    fits = (f"{ex} / ({lau} if {lau} > 1.0 else 1.0) <= {k['lim']!r}" if k["known_l2"] and not math.isnan(k["lim"])
            else "False")
    out.append(f"l2b = ({ex} - {co} if {ex} - {co} > 0.0 else 0.0) if {fits} else 0.0")
    out.append(f"db = {ex} - l2b")
    out.append(f"l2 = l2b * {k['zl2']!r}")
    if rereads:  # the kernel's cache re-reads: one more l2 term, and a phase of a serial kernel's engines
        out.append(f"rr = _reread{i}(batch, length) * {k['zl2']!r}")
        out.append("l2 = l2 + rr")
    out.append(f"dram = {lau} * {k['zlat']!r} + db * {k['zd']!r}")
    paths = [(p, d) for p, d in k["dpath"].items() if COL[f"path.dram.{p}"] in cols]
    if paths:
        out.append(f"served = db / {ex} if {ex} > 0 else 0.0")
        out += [f"dram = dram + w{COL[f'path.dram.{p}']} * served * {d!r}" for p, d in paths]
    gemm = f" + {w('host.cublas')} * {k['zgemm']!r}" if COL["host.cublas"] in cols else ""  # + 0.0 left out
    gemm += "".join(f" + {w(f'host.{c}')} * {k['zlib']!r}" for c in LIBRARY_KERNEL_CLASSES if COL[f"host.{c}"] in cols)
    out.append(f"node = {lau} * {k['znode']!r}{gemm}")
    out.append(f"fixed = node + {lau} * {k['zlat']!r}")
    # the largest engine, the first of equals (argmax over tensor, vector, special_function, dram, l2)
    out.append(f"top = t; e = {CLASSES.index('tensor')}")
    for n, x in enumerate(("vec", "sfu", "dram", "l2"), start=CLASSES.index("tensor") + 1):
        out.append(f"if {x} > top: top = {x}; e = {n}")
    if serial == 1 and rereads:
        out.append("top = t + vec + sfu + rr")
        out.append("m = dram if dram >= l2 - rr else l2 - rr")
        out.append("if m > top: top = m")
    elif serial == 1:
        out.append("top = t + vec + sfu + 0.0")
        out.append("m = dram if dram >= l2 else l2")
        out.append("if m > top: top = m")
    elif serial == 2:  # the tensor phase, then the special-function and CUDA-core work side by side
        out.append("top = t + (vec if vec >= sfu else sfu)")
        out.append("m = dram if dram >= l2 else l2")
        out.append("if m > top: top = m")
    if chained:
        out.append(f"cs, after = _chain{i}(batch, length)")
        out.append("binds = cs > 0 and cs >= top")
        out.append("if cs > top: top = cs")
        out.append("g = node + top + after")
    else:
        out.append("binds = False")
        out.append("g = node + top")
    if launch == "eager":
        hterms = [f"{k['zh'][n]!r} * w{COL[f'host.{h}']}" for n, h in enumerate(HOST_CLASSES)
                  if COL[f"host.{h}"] in cols]
        out.append(f"h = {' + '.join(hterms) if hterms else '0.0'}")
    else:
        out.append("h = 0.0")
    out.append(f"q = {CLASSES.index('latency')} if fixed >= top or binds else e")
    out.append(f"if h >= g: q = {CLASSES.index('host/launch')}")
    return out


def generate(pp, table: AchievableTable, launch: str, phase: str):
    """``f(batch, length) -> dict`` (``step_achievable``'s) for the compiled point plan ``pp`` on the
    table's first spec, or None where a constant is not finite or a call moves its bytes on a DRAM kernel
    path (module docstring)."""
    from .point import call_prologue, reread_bytes

    k = _constants(table)
    # a call whose whole device-memory traffic moves on a kernel path (execution.dram_path_index: the
    # runtimes' KV-cache copies) is not written out here: step_achievable takes the plan
    if k is None or (np.asarray(pp.dram_path) >= 0).any():
        return None
    chained, rereading = dict(pp.chained), dict(pp.rereading)
    env: dict = {"_ceil": math.ceil, "AnalyticError": AnalyticError, "CLASSES": CLASSES}
    lines = ["def achievable(batch, length):",
             f"    tokens = {'1.0' if phase == 'decode' else 'length'}",
             "    keys = length",
             "    host = 0.0",
             "    gpu = 0.0",
             "    by = {}"]
    for i, c in enumerate(pp.calls):
        opening, args = call_prologue(i, c, env)
        lines += opening
        cols: dict[int, list[str]] = {}
        for ti, col, m in c.cols:  # x * 1.0 is x
            cols.setdefault(col, []).append(f"v[{ti}]" if m == 1.0 else f"v[{ti}] * {m!r}")
        # a constant dimension > 0 needs no test at run time
        runs = " and ".join(f"{a} > 0" for a, parts in zip(args, c.args) if parts[0] is not None or not parts[1] > 0)
        runs = runs or "True"
        lines.append(f"    if {runs}:")
        lines.append(f"        v = f{i}({', '.join(args)})")
        lines += [f"        w{j} = 0.0 + {' + '.join(terms)}" for j, terms in cols.items()]
        if cols:
            lines.append("    else:")
            lines += [f"        w{j} = 0.0" for j in cols]
        if i in chained:
            call = chained[i]
            env[f"_chain{i}"] = (lambda b, n, call=call: chain_seconds(table, call, phase, b, n))
        if i in rereading:
            call = rereading[i]
            env[f"_reread{i}"] = (lambda b, n, call=call: reread_bytes(call, pp.dtype, phase, b, n))
        body = _call_lines(i, c, k, bool(pp.tf32[i]), int(pp.serial[i]), bool(pp.mma_sync[i]), launch, i in chained,
                           i in rereading)
        lines += [f"    {b}" for b in body]
        lines += ["    host += h", "    gpu += g", "    name = CLASSES[q]",
                  "    by[name] = by.get(name, 0.0) + (g if g > h else h)"]
    extra = 0.0
    if launch == "graph":
        extra = host_cost(table, "cuda_graph")
    if phase == "train" and launch == "eager":
        extra = host_cost(table, "autograd")
    if launch == "graph" or (phase == "train" and launch == "eager"):
        lines.append(f"    host += {extra!r}")
    per_bwd = host_cost(table, BACKWARD)
    if pays_backward(phase, launch) and per_bwd:  # the backward's per-launch host cost (train_host.py)
        env["_bwd"] = (lambda b, n: backward_launches(pp.op_calls, pp.precision, phase, b, n))
        lines.append(f"    host += _bwd(batch, length) * {per_bwd!r}")
    lines.append("    return {'time_s': max(host, gpu), 'host_s': host, 'gpu_s': gpu,"
                 " 'bottleneck': 'host/launch' if host >= gpu else max(by, key=by.get)}")
    exec(compile("\n".join(lines), f"<achievable point plan of {len(pp.calls)} calls>", "exec"), env)  # noqa: S102
    return env["achievable"]
