"""One model analysis at one (batch, length) point, in plain Python: the fast path of a single point.

``evaluate.analyze`` evaluates a plan over numpy grids and projects it on many specs; for one point
its numpy overhead (hundreds of small array operations) dominates. ``analyze_point`` computes the same
numbers for one point with Python floats, from the same sources:

- **Work.** Each plan call's cost terms come from the same symbolic Cost as ``registry.compiled_cost``
  (``symbolic_cost``), lambdified for Python scalars (``modules="math"``), on the call's dimensions
  ``phases.dim_parts`` (scalar ``dim_value``), with the same constraint checks, the same "a call with
  a zero dimension does not run" rule and the same term -> work-column map (``evaluate._term_columns``
  through ``evaluate.compile_plan``).
- **Bound.** ``roofline.project_work`` is linear in the work columns: each resource's time is
  sum_j A[r, j] x work_j with A >= 0. A (and which columns leave a resource unbounded) is read off
  ``project_work`` itself, applied to the unit work vectors, per (spec ceilings, launch regime, bytes
  basis): nothing of the projection is re-written here. Per call: bound = max over resources (ties to
  the first of ``RESOURCES``), NaN where work has no known ceiling; the model: the sum over calls, the
  bottleneck the resource bounding the largest share (``evaluate.analyze``'s rules).
- **Achievable estimate** (``achievable=True``): ``step_achievable``: ``achievable.achievable_work``
  called once on the [work column, call] array of the plan (one call per column, with each
  implementation's tf32 / serial / mma.sync traits as arrays), combined over the step as
  ``report.achievable_rows`` does (max of the summed host and device times). Its rules written out per
  call as one generated function per (plan, spec, launch regime, phase) (``point_achievable.py``,
  cached beside the bound's) give it; ``step_achievable`` itself runs where that function cannot be
  written (a spec constant that is not finite).

Where it does not apply, ``analyze_point`` takes the general path (``analyze`` plus
``report.achievable_rows``) and says so in ``PointResult.path``: a spec with a persistent on-chip level
in decode (``placement.py`` moves state bytes there). Memory by class, capacity and energy are not
computed here (``analyze`` and ``predict`` have them). Caches: the compiled plan is
keyed on the plan's (frozen) op calls and the precision, as ``compile_plan``; the projection constants
and the generated function on the spec table (an immutable snapshot: ``roofline.SpecTable`` keeps
read-only private copies of its arrays), the spec's index, the launch regime, the bytes basis and the
phase; the achievable table likewise, built from the table's spec. An edited spec needs a new table, which gets
its own constants: nothing stale is reused.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sympy as sp

from ..registry import AnalyticError, symbolic_cost
from ..roofline import RESOURCES, WORK_COLUMNS, SpecTable, project_work
from ..symbols import SYMBOLS
from .evaluate import ADDITIVE, analyze, compile_plan
from .models import Model
from .phases import OpCall, plan
from .placement import persistent_level
from .precision import Precision, as_precision

NCOL = len(WORK_COLUMNS)
_PROJECTIONS: dict[tuple, object] = {}  # keyed on id(table) and the table, so that the id stays its own
_ACHIEVABLE_TABLES: dict[tuple, object] = {}
CACHE_LIMIT = 256  # entries per cache; a full cache is emptied (specs are few; this bounds memory)
FAST = "plain-Python one-point path"
GENERAL = "general path (evaluate.analyze)"


@dataclass(frozen=True)
class PointResult:
    """One (model, phase, batch, length) point on one spec. ``time_s``, ``sum_s``: analytic bound
    (NaN where no bound); ``bottleneck``: the resource of the largest share, None where no bound;
    ``shares_s``: seconds bounded by each resource; ``not_bounded``: resources with work but no
    ceiling; ``achievable``: the step's achievable estimate (time_s, host_s, gpu_s, bottleneck), when
    asked; ``path``: which path computed it (``FAST`` or ``GENERAL``)."""

    spec_id: str
    time_s: float
    sum_s: float
    bottleneck: str | None
    shares_s: dict[str, float]
    not_bounded: tuple[str, ...]
    tokens: float
    achievable: dict | None
    path: str


@dataclass(frozen=True)
class _PCall:
    fn: object  # scalar cost function over dims, returns the Cost terms in order
    args: tuple  # dim_parts per dim
    cols: tuple  # (term index, column index, multiplier: the call count on additive columns)
    checks: tuple  # (who, constraint, arg positions) over grid-dependent dims
    label: str


@dataclass(frozen=True)
class _PointPlan:
    calls: tuple[_PCall, ...]
    tf32: np.ndarray  # [n_calls] bool, the achievable traits
    serial: np.ndarray  # [n_calls] int, execution.ENGINE_CODES
    mma_sync: np.ndarray
    dram_path: np.ndarray  # [n_calls] int, execution.dram_path_index
    chained: tuple[tuple[int, OpCall], ...] = ()  # (index, call) of the calls with a sequential chain trait
    # (index, call) of the calls whose kernel re-reads bytes from the device-wide cache (Traits.l2_rereads)
    rereading: tuple[tuple[int, OpCall], ...] = ()
    dtype: str = "bf16"  # the step's dtype (the re-read bytes' element size, as energy_step.call_rereads)
    op_calls: tuple[OpCall, ...] = ()  # the plan's calls (train_host.backward_launches of a train step)
    precision: object = "bf16"  # the plan's precision (as compile_plan took it)


@functools.lru_cache(maxsize=4096)
def _scalar_fn(op: str, impl: str, mode: str, dtype: str, state: str | None, kv: str | None, dims: tuple):
    cost = symbolic_cost(op, impl, mode, dtype, state, kv)
    terms = cost.terms()
    return sp.lambdify([SYMBOLS[d] for d in dims], [terms[k] for k in terms], modules="math", cse=True)


_PLANS: dict[tuple, tuple] = {}


def point_plan(calls: tuple[OpCall, ...], prec: Precision) -> _PointPlan:
    """``compile_point_plan`` cached on the identity of ``calls`` (``phases.plan`` returns the same
    tuple of frozen op calls for the same arguments; the entry keeps the tuple, so its id cannot be
    reused while the entry lives): no hashing of every op call per analysis."""
    key = (id(calls), prec)
    hit = _PLANS.get(key)
    if hit is None or hit[0] is not calls:
        if len(_PLANS) >= CACHE_LIMIT:
            _PLANS.clear()
        hit = _PLANS[key] = (calls, compile_point_plan(calls, prec), {})
    return hit


@functools.lru_cache(maxsize=1024)
def compile_point_plan(calls: tuple[OpCall, ...], dtype: str | Precision) -> _PointPlan:
    """The plan of ``compile_plan`` with scalar cost functions (cached on the same key)."""
    from ..execution import (
        dram_path_index,
        fp32_matmul_on_tf32,
        is_composite,
        serial_engines,
        tensor_instr,
    )
    from ..execution import traits as traits_of

    prec = as_precision(dtype)
    cp = compile_plan(calls, prec)
    out = []
    for c, count in zip(cp.calls, cp.counts):
        call = c.call
        fn = _scalar_fn(call.op, call.impl, call.mode, c.dtype, prec.state, prec.kv, c.dims)
        cols = tuple((ti, col, float(count) if ADDITIVE[col] else 1.0) for ti, col in c.cols)
        checks = tuple((who, k, tuple(c.dims.index(d) for d in k.dims)) for who, k in c.checks)
        out.append(_PCall(fn, c.args, cols, checks, call.label))
    traits = [(fp32_matmul_on_tf32(c.op, c.impl, c.backend), serial_engines(c.op, c.impl, c.backend),
               tensor_instr(c.op, c.impl, c.backend) == "mma_sync") for c in calls]
    tr = np.array(traits, dtype=int).reshape(-1, 3)  # the engine mode is a code (execution.ENGINE_CODES)
    chained = tuple((i, c) for i, c in enumerate(calls)
                    if not is_composite(c.op) and traits_of(c.op, c.impl, c.backend).chain)
    rereading = tuple((i, c) for i, c in enumerate(calls)
                      if not is_composite(c.op) and traits_of(c.op, c.impl, c.backend).l2_rereads)
    paths = np.array([dram_path_index(c.op, c.impl, c.backend) for c in calls], dtype=int)
    return _PointPlan(tuple(out), tr[:, 0].astype(bool), tr[:, 1].copy(), tr[:, 2].astype(bool), paths,
                      chained, rereading,
                      prec.dtype, tuple(calls), prec)


def reread_bytes(c: OpCall, dtype: str, phase: str, batch: float, length: float) -> float:
    """Bytes plan call ``c`` re-reads from the device-wide cache at this point (its count times), as
    ``energy_step.call_rereads`` and ``report.achievable_rows`` charge them."""
    from ..execution import l2_reread_bytes
    from .evaluate import call_shape

    dims = {k: round(v) for k, v in call_shape(c, phase, batch, length).items()}
    return c.count * l2_reread_bytes(c.op, c.impl, dims, dtype, c.mode, c.backend)


def _dim(grid: dict, var, mult, step, minus=0, cap=None) -> float:
    """``phases.dim_value`` on Python floats."""
    if var is None:
        return mult
    v = grid[var]
    if step != 1:
        v = float(math.ceil(v / step) * step)
    if minus:
        v = max(v - minus, 0.0)
    if cap is not None:
        v = float(min(v, cap))
    return v * mult


def plan_work(pp: _PointPlan, phase: str, batch: float, length: float) -> list[list[float]]:
    """Work per call at one point: [n_calls][n_cols] (x multiplicity), as ``evaluate_plan``."""
    grid = {"batch": batch, "tokens": 1.0 if phase == "decode" else length, "keys": length}
    work = []
    for c in pp.calls:
        args = [_dim(grid, *a) for a in c.args]
        for who, k, pos in c.checks:
            if not np.all(k.check(*(args[p] for p in pos))):
                raise AnalyticError(f"{c.label}: {who}: {k.message}")
        w = [0.0] * NCOL
        if all(a > 0 for a in args):
            vals = c.fn(*args)
            for ti, col, m in c.cols:
                w[col] += vals[ti] * m
        work.append(w)
    return work


@dataclass(frozen=True)
class _Proj:
    coef: tuple  # per resource: ((column, seconds per unit), ...)
    work_cols: tuple  # columns whose work needs a ceiling (project_work's has_work)
    unbounded: tuple  # per resource: columns whose work leaves it unbounded




def _projection(table: SpecTable, s: int, launch: str, bytes_basis: str) -> _Proj:
    """The linear map of ``project_work`` for spec ``s``, read off the unit work vectors; cached on
    the table (an immutable snapshot, by identity: the entry keeps the table, so that its id is not
    reused while the entry lives), the spec's index, launch and basis."""
    ck = (id(table), s, launch, bytes_basis)
    hit = _PROJECTIONS.get(ck)
    if hit is None or hit[0] is not table:
        if len(_PROJECTIONS) >= CACHE_LIMIT:
            _PROJECTIONS.clear()
        hit = _PROJECTIONS[ck] = (table, _make_projection(table, s, launch, bytes_basis))
    return hit[1]


def _make_projection(table: SpecTable, s: int, launch: str, bytes_basis: str) -> _Proj:
    one = SpecTable(specs=table.specs[s:s + 1], inv_tensor=table.inv_tensor[s:s + 1],
                    known_tensor=table.known_tensor[s:s + 1], inv_vector=table.inv_vector[s:s + 1],
                    inv_sfu=table.inv_sfu[s:s + 1], inv_dram=table.inv_dram[s:s + 1],
                    inv_cache=table.inv_cache[s:s + 1], launch_s={k: v[s:s + 1] for k, v in table.launch_s.items()},
                    known={k: v[s:s + 1] for k, v in table.known.items()},
                    on_chip_bytes=table.on_chip_bytes[s:s + 1], dram_bytes=table.dram_bytes[s:s + 1])
    p = project_work(np.eye(NCOL), one, launch, bytes_basis)  # [1, NCOL]: column j's unit work
    coef = tuple(tuple((j, float(p.times[r][0, j])) for j in range(NCOL) if p.times[r][0, j] != 0) for r in RESOURCES)
    unbounded = tuple(tuple(j for j in range(NCOL) if p.unbounded[r][0, j]) for r in RESOURCES)
    # a column is work (project_work's some_work) when alone it gets a bound or is left without one
    work_cols = tuple(j for j in range(NCOL) if np.isnan(p.bound[0, j]) or p.bottleneck[0, j] >= 0)
    return _Proj(coef, work_cols, unbounded)


def bound_of(work: list[list[float]], pj: _Proj) -> tuple[float, float, int, list[float], tuple[str, ...]]:
    """(time, sum, bottleneck index or -1, shares per resource, unbounded resources) of a plan's
    per-call work on one spec, by the rules of ``project_work`` and ``analyze``."""
    nr = len(RESOURCES)
    shares = [0.0] * nr
    time = total = 0.0
    unb = [False] * nr
    for w in work:
        times = [sum(a * w[j] for j, a in cf) for cf in pj.coef]
        top = max(times)
        total += sum(times)
        if top > 0:
            shares[times.index(top)] += top
            time += top
        elif any(w[j] > 0 for j in pj.work_cols):
            time = math.nan
        for r in range(nr):
            if not unb[r] and any(w[j] > 0 for j in pj.unbounded[r]):
                unb[r] = True
    bottleneck = -1 if math.isnan(time) else shares.index(max(shares))
    return time, total, bottleneck, shares, tuple(r for r, u in zip(RESOURCES, unb) if u)


def call_prologue(i: int, c, env: dict) -> tuple[list[str], list[str]]:
    """(lines, argument names) that open plan call ``i`` (``c``: its cost function, arguments and constraint
    checks) in a generated step function: its arguments ``a<i>_<k>`` at this point and the kernel
    constraints, which raise ``AnalyticError`` as the general path does; the callables go into ``env``."""
    env[f"f{i}"] = c.fn
    args = [f"a{i}_{k}" for k in range(len(c.args))]
    lines = [f"    {a} = {_dim_src(*parts)}" for a, parts in zip(args, c.args)]
    for n, (who, con, pos) in enumerate(c.checks):
        env[f"k{i}_{n}"] = con.check
        env[f"m{i}_{n}"] = f"{c.label}: {who}: {con.message}"
        lines.append(f"    if not k{i}_{n}({', '.join(args[p] for p in pos)}):")
        lines.append(f"        raise AnalyticError(m{i}_{n})")
    return lines, args


def _dim_src(var, mult, step, minus=0, cap=None) -> str:
    """``_dim`` as a Python expression over the grid variables (same operations, same order)."""
    if var is None:
        return repr(mult)
    v = var
    if step != 1:
        v = f"float(_ceil({v} / {step!r}) * {step!r})"
    if minus:
        v = f"max({v} - {minus!r}, 0.0)"
    if cap is not None:
        v = f"float(min({v}, {cap!r}))"
    return f"({v}) * {mult!r}"


def _merged(calls: tuple[_PCall, ...]) -> list[_PCall]:
    """Calls with the same cost function on the same dimensions, merged (first one's place and label;
    additive columns at the summed count): their work differs only by the count, so the sum of their
    bounds is the bound of the merged call, to rounding (a few ulps)."""
    groups: dict[tuple, list[_PCall]] = {}
    for c in calls:
        groups.setdefault((id(c.fn), c.args, tuple((ti, col) for ti, col, _ in c.cols)), []).append(c)
    out = []
    for group in groups.values():
        first = group[0]
        cols = tuple((ti, col, sum(g.cols[n][2] for g in group) if ADDITIVE[col] else m)
                     for n, (ti, col, m) in enumerate(first.cols))
        out.append(_PCall(first.fn, first.args, cols, first.checks, first.label))
    return out


def generate(pp: _PointPlan, pj: _Proj, phase: str):
    """One straight-line Python function ``f(batch, length) -> (time, sum, shares, unbounded)`` for a
    compiled plan projected on one spec: ``plan_work`` and ``bound_of`` unrolled over the plan's calls,
    with the projection's constants (``_Proj``, read off ``project_work``) written in. Only the columns
    a call's cost fills appear; a resource none of them feeds has time 0 and is left out of its max."""
    nr = len(RESOURCES)
    env: dict = {"_ceil": math.ceil, "_nan": math.nan, "AnalyticError": AnalyticError}
    lines = ["def point(batch, length):",
             f"    tokens = {'1.0' if phase == 'decode' else 'length'}",
             "    keys = length",
             "    time = 0.0",
             "    total = 0.0"]
    lines += [f"    s{r} = 0.0" for r in range(nr)] + [f"    u{r} = False" for r in range(nr)]
    for i, c in enumerate(_merged(pp.calls)):
        opening, args = call_prologue(i, c, env)
        lines += opening
        cols: dict[int, list[str]] = {}
        for ti, col, m in c.cols:
            cols.setdefault(col, []).append(f"v[{ti}] * {m!r}")
        body = [f"v = f{i}({', '.join(args)})"]
        body += [f"w{j} = {' + '.join(terms)}" for j, terms in cols.items()]
        present = []
        for r, cf in enumerate(pj.coef):
            terms = [f"{a!r} * w{j}" for j, a in cf if j in cols]
            if terms:
                body.append(f"r{r} = {' + '.join(terms)}")
                present.append(r)
        work = [j for j in pj.work_cols if j in cols]
        if present:
            body.append(f"top = max({', '.join(f'r{r}' for r in present)})" if len(present) > 1 else f"top = r{present[0]}")
            body.append(f"total += {' + '.join(f'r{r}' for r in present)}")
            body.append("if top > 0:")
            body.append("    time += top")
            for n, r in enumerate(present):
                body.append(f"    {'if' if n == 0 else 'elif'} r{r} == top:")
                body.append(f"        s{r} += top")
            if work:
                body.append(f"elif {' or '.join(f'w{j} > 0' for j in work)}:")
                body.append("    time = _nan")
        elif work:
            body.append(f"if {' or '.join(f'w{j} > 0' for j in work)}:")
            body.append("    time = _nan")
        for r, unb in enumerate(pj.unbounded):
            here = [j for j in unb if j in cols]
            if here:
                body.append(f"if {' or '.join(f'w{j} > 0' for j in here)}:")
                body.append(f"    u{r} = True")
        runs = " and ".join(f"{a} > 0" for a in args) or "True"
        lines.append(f"    if {runs}:")
        lines += [f"        {b}" for b in body]
    lines.append(f"    return time, total, [{', '.join(f's{r}' for r in range(nr))}], "
                 f"({', '.join(f'u{r}' for r in range(nr))},)")
    exec(compile("\n".join(lines), f"<point plan of {len(pp.calls)} calls>", "exec"), env)  # noqa: S102
    return env["point"]


def _achievable_table(table: SpecTable, s: int):
    """``AchievableTable.of`` of spec ``s`` of ``table``, cached with the table (an immutable snapshot,
    by identity): built from the table's spec on first use."""
    from ..achievable import AchievableTable
    key = (id(table), s)
    hit = _ACHIEVABLE_TABLES.get(key)
    if hit is None or hit[0] is not table:
        if len(_ACHIEVABLE_TABLES) >= CACHE_LIMIT:
            _ACHIEVABLE_TABLES.clear()
        hit = _ACHIEVABLE_TABLES[key] = (table, AchievableTable.of([table.specs[s].spec], "measured"))
    return hit[1]


def step_achievable(pp: _PointPlan, work: list[list[float]], table: SpecTable, s: int, launch: str,
                    phase: str, batch: float = 1.0, length: float = 1.0) -> dict:
    """The step's achievable estimate as ``report.achievable_rows`` (no runtime, state in DRAM), from one
    ``achievable_work`` call over the plan's calls, with each call's cache re-reads (``reread_bytes``); a call with a sequential chain (``execution.chain_of``
    at this point, its count times in a row, as ``achievable_rows`` charges it) is estimated again on its
    own with that chain, since ``achievable_work`` takes one chain for all its elements."""
    from ..achievable import CLASSES, achievable_work, host_cost
    from ..execution import chain_of
    from .evaluate import call_shape
    from .train_host import KEY as BACKWARD
    from .train_host import backward_launches, pays_backward

    table = _achievable_table(table, s)
    w = np.array(work).T  # [n_cols, n_calls]
    rr = np.zeros(w.shape[1])
    for i, c in pp.rereading:
        rr[i] = reread_bytes(c, pp.dtype, phase, batch, length)
    a = achievable_work(w, table, tf32=pp.tf32, serial=pp.serial, launch=launch, graph_replays=0.0,
                        mma_sync=pp.mma_sync, dram_path=pp.dram_path, l2_reread=rr)
    hs, gs, ks = a.host[0].tolist(), a.gpu[0].tolist(), a.bottleneck[0].tolist()
    for i, c in pp.chained:
        chain = chain_of(c.op, c.impl, {k: round(v) for k, v in call_shape(c, phase, batch, length).items()}, c.mode,
                         c.backend)
        if chain is None:
            continue
        one = achievable_work(w[:, i:i + 1], table, tf32=pp.tf32[i:i + 1], serial=pp.serial[i:i + 1], launch=launch,
                              graph_replays=0.0, mma_sync=pp.mma_sync[i:i + 1], dram_path=pp.dram_path[i:i + 1],
                              chain=chain.repeated(c.count), l2_reread=rr[i:i + 1])
        hs[i], gs[i], ks[i] = float(one.host[0, 0]), float(one.gpu[0, 0]), int(one.bottleneck[0, 0])
    host = gpu = 0.0
    by_class: dict[str, float] = {}
    for h, g, k in zip(hs, gs, ks):
        host += h
        gpu += g
        by_class[CLASSES[k]] = by_class.get(CLASSES[k], 0.0) + max(h, g)
    if launch == "graph":
        host += host_cost(table, "cuda_graph")
    if phase == "train" and launch == "eager":
        host += host_cost(table, "autograd")
    if pays_backward(phase, launch):  # the backward's per-launch host cost (train_host.py)
        host += backward_launches(pp.op_calls, pp.precision, phase, batch, length) * host_cost(table, BACKWARD)
    return {"time_s": max(host, gpu), "host_s": host, "gpu_s": gpu,
            "bottleneck": "host/launch" if host >= gpu else max(by_class, key=by_class.get)}


def _achievable(pp: _PointPlan, generated: dict, table: SpecTable, s: int, launch: str, phase: str, batch: float,
                length: float) -> dict:
    """``step_achievable`` at this point, by the function ``point_achievable.generate`` writes for the plan
    on spec ``s`` (cached beside the bound's), or by ``step_achievable`` itself where it writes none."""
    from . import point_achievable

    gk = ("achievable", id(table), s, launch, phase)
    hit = generated.get(gk)
    if hit is None or hit[0] is not table:
        if len(generated) >= CACHE_LIMIT:
            generated.clear()
        hit = generated[gk] = (table, point_achievable.generate(pp, _achievable_table(table, s), launch, phase))
    if hit[1] is None:
        return step_achievable(pp, plan_work(pp, phase, batch, length), table, s, launch, phase, batch, length)
    return hit[1](batch, length)


def _general(model, phase, table, batch, length, kw, achievable) -> tuple[PointResult, ...]:
    from .report import achievable_rows
    res = analyze(model, phase, table, [batch], [length], keep_calls=achievable, **kw)
    out = []
    for s, sc in enumerate(table.specs):
        t, ssum = float(res.time_s[s, 0, 0]), float(res.sum_s[s, 0, 0])
        b = int(res.bottleneck[s, 0, 0])
        ach = None
        if achievable:
            one = analyze(model, phase, SpecTable.of([sc.spec], sc.prefer), [batch], [length], keep_calls=True,
                          **kw) if len(table.specs) > 1 else res
            full = achievable_rows(one, sc.spec, [{} for _ in one.calls.calls])
            ach = {k: full[k] for k in ("time_s", "host_s", "gpu_s", "bottleneck")}
        out.append(PointResult(sc.spec.id, t, ssum, None if b < 0 else RESOURCES[b],
                               {r: float(res.shares[i, s, 0, 0]) for i, r in enumerate(RESOURCES)},
                               tuple(res.not_bounded[s]), float(res.tokens[0, 0]), ach, GENERAL))
    return tuple(out)


def analyze_point(model: Model, phase: str, table: SpecTable, batch: float, length: float, *,
                  dtype: str | Precision = "bf16", launch: str | None = None, bytes_basis: str = "executed",
                  impls: dict | None = None, recompute: bool = False, logits: str = "last",
                  achievable: bool = False, force_general: bool = False
                  ) -> tuple[PointResult, ...]:
    """``analyze(model, phase, table, [batch], [length], ...)`` at one point: one ``PointResult`` per
    spec of ``table``. ``achievable``: add the step's achievable estimate (``report.achievable_rows``).
    The plain-Python path is taken wherever it applies (see the module docstring); ``force_general``
    takes the general one (the equivalence tests compare the two)."""
    launch = launch or ("graph" if phase == "decode" else "eager")
    kw = {"dtype": dtype, "launch": launch, "bytes_basis": bytes_basis, "impls": impls, "recompute": recompute, "logits": logits}
    resident = phase == "decode" and any(persistent_level(sc)[0] is not None for sc in table.specs)
    if force_general or resident:
        return _general(model, phase, table, batch, length, kw, achievable)
    prec = as_precision(dtype)
    _, pp, generated = point_plan(plan(model, phase, impls, recompute, logits), prec)
    batch, length = float(batch), float(length)
    tokens = batch * (length if phase != "decode" else 1.0)
    out = []
    for s, sc in enumerate(table.specs):
        gk = (id(table), s, launch, bytes_basis, phase)
        hit = generated.get(gk)
        if hit is None or hit[0] is not table:
            if len(generated) >= CACHE_LIMIT:
                generated.clear()
            hit = generated[gk] = (table, generate(pp, _projection(table, s, launch, bytes_basis), phase))
        t, ssum, shares, unb = hit[1](batch, length)
        b = -1 if math.isnan(t) else shares.index(max(shares))
        ach = _achievable(pp, generated, table, s, launch, phase, batch, length) if achievable else None
        out.append(PointResult(sc.spec.id, t, ssum, None if b < 0 else RESOURCES[b], dict(zip(RESOURCES, shares)),
                               tuple(r for r, u in zip(RESOURCES, unb) if u), tokens, ach, FAST))
    return tuple(out)


def analyze_points(model: Model, phase: str, table: SpecTable, points: Sequence[tuple[float, float]],
                   **kw) -> list[tuple[PointResult, ...]]:
    """``analyze_point`` at each (batch, length) of ``points``."""
    return [analyze_point(model, phase, table, b, n, **kw) for b, n in points]
