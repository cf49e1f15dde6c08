"""Vectorized model analysis: a plan's op costs over (batch, length) grids, projected on many specs.

For one (model, phase) the plan (``phases.py``) is a fixed list of op calls. Each call's compiled cost
(``registry.compiled_cost(...).fn``, a numpy function of the op's dimensions) is evaluated once over
broadcast arrays ``batch`` [nb, 1] and ``tokens`` / ``keys`` [1, nl], multiplied by the call's
multiplicity, and projected on every spec at once (``roofline.project_work``): arrays [n_specs,
n_calls, nb, nl]. The model's time bound is the **sum over calls of each call's max over resources**
(kernels run one after another; within a kernel the resources overlap), labelled an analytic bound.
The sum bound (no overlap anywhere) is reported beside it.

Bottleneck of the model: the resource that bounds the largest share of the total time.

Memory by class (bytes resident in device memory at the step's peak; analytic estimate):

- weights: all parameters (MoE: every expert) x bytes of the dtype; under fp8 (``precision.py``) the
  weights that the fp8 calls read (``read.weights`` of those calls, per weight instance) at 1 byte and
  the rest at bf16.
- kv_cache: attention blocks only: kv bytes per token at the KV-cache dtype x batch x cached tokens
  (prefill: the prompt; decode: context + 1; train: none), at most the window of a sliding-window
  block.
- state: SSM blocks only: conv + SSM state per sequence at the state dtype x batch (prefill and
  decode; train keeps none).
- activations: inference (prefill, decode): the peak live set over the plan's calls. A call holds at
  once its activation inputs and outputs (compulsory ``read.activations`` + ``write.activations``)
  and every intermediate it writes (``write.intermediates`` + ``extra_write.intermediates``: a fused
  MLP's gate and up projections and their product, attention's logsumexp, a scan's chunk states);
  to that the residual stream is added (B x L x d_model at the dtype: the layer input kept for the
  residual add while a block runs). The figure is the max over calls of that sum. A Cost keeps no
  per-kernel timeline, so a call's intermediates count as live together: for a chain whose early
  intermediates are freed before its last kernel this over-counts by those; allocator slack is not
  counted. Training: what the forward writes for backward (outputs and intermediates of every call
  of the prefill plan over all tokens); with recomputation: each layer block's input (B x L x d_in)
  plus one block's forward writes.
- train only: gradients (parameters x dtype bytes) and Adam state (fp32 m and v, plus an fp32 master
  copy when the dtype is not fp32: 8 or 12 bytes per parameter; an assumption, stated in outputs).

Energy (``analyze(..., energy=True)``, the sweep's energy columns by default; only where the spec has an ``energy:``
section): the energy model of ``analytic/energy.py`` at the time bound: static power x bound time plus
FLOPs x J/FLOP per engine and dtype and as-executed bytes x J/B at DRAM and at the device-wide cache.
Terms whose coefficient the spec lacks are listed as excluded. ``predict`` and ``sweep --achievable`` give the energy at
the achievable time instead (``energy_step.py``).

Where a spec keeps the recurrent state on chip (``placement.py``: a device-scope ``sram`` level that
holds the whole state of the batch, decode only), the decode calls' state bytes move from DRAM to that
level (bounds, energy, device-memory capacity); ``GridResult.residency`` says per spec whether they
did. Where a spec's DRAM bandwidth is an in-memory (PIM) rate, ``GridResult.pim`` flags the calls with
tensor-core work that the bound projects with it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..conventions import nbytes
from ..registry import AnalyticError, compiled_cost
from ..roofline import COL, RESOURCES, WORK_COLUMNS, Projected, SpecTable, project_work
from .models import Model
from .phases import OpCall, dim_parts, dim_value, plan
from .placement import StateResidency, apply_residency, pim_caveat, state_residency
from .precision import FP8, Precision, as_precision

ADDITIVE = np.array([c not in ("working_set",) for c in WORK_COLUMNS])
COMPUTE_RESOURCES = ("tensor", "vector", "special_function")


def _term_columns(key: str) -> tuple[int, ...]:
    if key.startswith("tensor."):
        dt = key.split(".", 1)[1]
        return (COL["vector"], COL["tensor.fp32"]) if dt == "fp32" else (COL[f"tensor.{dt}"],)
    if key.startswith(("host.", "path.")):
        return (COL[key],)
    if key in ("vector", "launches", "working_set"):
        return (COL[key],)
    if key == "transcendental":
        return (COL["special_function"],)
    if key.startswith(("read.", "write.")):
        return (COL["dram.compulsory"], COL["dram.executed"])
    if key.startswith(("extra_read.", "extra_write.")):
        return (COL["dram.executed"],)
    raise KeyError(f"cost term {key!r} has no work column")


LIVE_TERMS = ("read.activations", "write.activations", "write.intermediates", "extra_write.intermediates")
SAVED_TERMS = ("write.activations", "write.intermediates", "extra_write.intermediates")


@dataclass(frozen=True)
class _Call:
    call: OpCall
    fn: object
    args: tuple  # per cc.dims: (grid var or None, constant or multiplier, round up to a multiple of)
    cols: tuple  # (term index, column index)
    live: tuple  # term indices
    saved: tuple
    checks: tuple  # (who, constraint): the op's and the implementation's, over the dims this cost uses
    dims: tuple  # the compiled cost's dimensions, in call order
    dtype: str  # the dtype this call runs at (precision.Precision.op_dtype)
    weights: tuple  # term indices of read.weights
    state: tuple = ()  # (term index, compulsory?) of the state-class byte terms


@dataclass(frozen=True)
class CompiledPlan:
    calls: tuple[_Call, ...]
    counts: np.ndarray  # [n_calls]

    @property
    def n(self) -> int:
        return len(self.calls)


@functools.lru_cache(maxsize=1024)
def compile_plan(calls: tuple[OpCall, ...], dtype: str | Precision) -> CompiledPlan:
    prec = as_precision(dtype)
    out = []
    for c in calls:
        d_call = prec.op_dtype(c.op, c.impl, c.mode)
        cc = compiled_cost(c.op, c.impl, c.mode, d_call, state_dtype=prec.state, kv_dtype=prec.kv)
        dims = c.dim_map()
        args = []
        for d in cc.dims:
            if d not in dims:
                raise KeyError(f"plan call {c.label}: op {c.op} needs dimension {d}")
            args.append(dim_parts(dims[d]))
        cols = tuple((i, col) for i, k in enumerate(cc.keys) for col in _term_columns(k))
        live = tuple(i for i, k in enumerate(cc.keys) if k in LIVE_TERMS)
        saved = tuple(i for i, k in enumerate(cc.keys) if k in SAVED_TERMS)
        weights = tuple(i for i, k in enumerate(cc.keys) if k == "read.weights")
        state = tuple((i, k.startswith(("read.", "write."))) for i, k in enumerate(cc.keys) if k.endswith(".state"))
        checks = cc.constraints  # the op's and the implementation's, over dims this cost uses
        out.append(_Call(c, cc.fn, tuple(args), cols, live, saved, checks, cc.dims, d_call, weights, state))
    return CompiledPlan(tuple(out), np.array([c.count for c in calls], dtype=float))


def phase_grid(phase: str, batch, length) -> dict:
    """The grid variables of a plan: ``batch``, ``tokens`` (new tokens per sequence: one in decode) and
    ``keys`` (tokens attended to: the context in decode). Arrays or scalars."""
    if phase == "decode":
        return {"batch": batch, "tokens": length * 0 + 1, "keys": length}
    return {"batch": batch, "tokens": length, "keys": length}


def call_shape(call: OpCall, phase: str, batch: float, length: float) -> dict[str, float]:
    """The dimensions of one plan call at one (batch, length) point, as ``evaluate_plan`` costs them."""
    grid = phase_grid(phase, float(batch), float(length))
    return {d: float(dim_value(grid, *dim_parts(v))) for d, v in call.dims}


@dataclass(frozen=True)
class CallBytes:
    """Per single call [n_calls, *shape]: live set (LIVE_TERMS), saved for backward (SAVED_TERMS),
    weight bytes read (read.weights) and state bytes moved (class state: compulsory, as executed)."""

    live: np.ndarray
    saved: np.ndarray
    weights: np.ndarray
    state_compulsory: np.ndarray
    state_executed: np.ndarray


def evaluate_plan(cp: CompiledPlan, grid: dict[str, np.ndarray], shape: tuple[int, ...]):
    """Work [n_calls, n_cols, *shape] (x multiplicity) and the per-call ``CallBytes``. A call with a
    zero dimension (the part of a windowed attention beyond the window, for a prompt within it) does
    not run: its work is zero, launches included."""
    W = np.zeros((cp.n, len(WORK_COLUMNS)) + shape)
    per = {k: np.zeros((cp.n,) + shape) for k in ("live", "saved", "weights", "state_compulsory", "state_executed")}
    for i, c in enumerate(cp.calls):
        args = [dim_value(grid, *a) for a in c.args]
        for who, k in c.checks:
            if not np.all(k.check(*(args[c.dims.index(d)] for d in k.dims))):
                raise AnalyticError(f"{c.call.label}: {who}: {k.message}")
        runs = np.ones(shape)
        for a in args:
            runs = runs * (np.asarray(a) > 0)
        vals = c.fn(*args)
        for ti, col in c.cols:
            W[i, col] += vals[ti] * runs
        for key, terms in (("live", c.live), ("saved", c.saved), ("weights", c.weights)):
            for ti in terms:
                per[key][i] += vals[ti] * runs
        for ti, compulsory in c.state:
            per["state_executed"][i] += vals[ti] * runs
            if compulsory:
                per["state_compulsory"][i] += vals[ti] * runs
    W[:, ADDITIVE] *= cp.counts.reshape((-1, 1) + (1,) * len(shape))
    return W, CallBytes(**per)


@dataclass
class GridResult:
    """A model on specs over a (batch, length) grid. Arrays are [n_specs, nb, nl] unless noted."""

    model: Model
    phase: str
    dtype: str
    launch: str
    bytes_basis: str
    table: SpecTable
    batch: np.ndarray  # [nb]
    length: np.ndarray  # [nl] prompt / sequence length, or decode context
    time_s: np.ndarray  # NaN where no bound; see fits for capacity
    sum_s: np.ndarray
    bottleneck: np.ndarray  # index into RESOURCES, -1 none
    shares: np.ndarray  # [R, n_specs, nb, nl] seconds bounded by each resource
    memory: dict[str, np.ndarray]  # class -> bytes [nb, nl]
    memory_total: np.ndarray  # [nb, nl]
    fits: np.ndarray  # device-memory capacity; False where it does not fit; True where unknown capacity
    capacity_known: np.ndarray  # [n_specs]
    tokens: np.ndarray  # tokens produced or processed per step [nb, nl]
    not_bounded: list[list[str]]  # per spec: resources with work but no ceiling
    calls: CompiledPlan | None = None
    call_proj: Projected | None = None  # [n_specs, n_calls, nb, nl]
    call_work: np.ndarray | None = None  # [n_calls, n_cols, nb, nl]
    call_state: tuple | None = None  # (compulsory, executed) state bytes [n_calls, nb, nl] x multiplicity
    energy_j: np.ndarray | None = None
    energy_note: list[str] = field(default_factory=list)
    precision: Precision = field(default_factory=Precision)
    residency: list[StateResidency] = field(default_factory=list)  # per spec: recurrent state on chip?
    pim: list[dict | None] = field(default_factory=list)  # per spec: placement.pim_caveat (None: not PIM)

    @property
    def tokens_per_s(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.tokens / self.time_s

    def bottleneck_names(self) -> np.ndarray:
        names = np.array(list(RESOURCES) + ["none"])
        return names[self.bottleneck]


def forward_plan(model: Model, impls, prec: Precision) -> CompiledPlan:
    """The forward whose writes training keeps for backward (``memory_by_class``, phase train)."""
    return compile_plan(plan(model, "prefill", impls, logits="all"), prec)


def _activation_bytes(model: Model, phase: str, prec: Precision, recompute: bool, grid, shape, live, impls,
                      forward=None):
    e = nbytes(prec.base)
    if phase != "train":
        residual = grid["batch"] * grid["tokens"] * model.d_model * e
        return live.max(axis=0) + residual
    if forward is None:
        fwd = forward_plan(model, impls, prec)
        _, fwd_bytes = evaluate_plan(fwd, grid, shape)
    else:
        fwd, fwd_bytes = forward
    saved = fwd_bytes.saved
    per_call = saved * fwd.counts.reshape((-1,) + (1,) * len(shape))
    if not recompute:
        return per_call.sum(axis=0)
    inputs = np.zeros(shape)
    per_block = {}
    for i, c in enumerate(fwd.calls):
        b = c.call.block
        if b:
            per_block[b] = per_block.get(b, 0) + saved[i] * (c.call.count / c.call.instances)
    for b, n in model.block_counts.items():
        blk = model.block(b)
        width = getattr(blk, "d_in", None) or model.d_model
        inputs = inputs + n * grid["batch"] * grid["tokens"] * width * e
    biggest = np.max(np.stack([np.broadcast_to(v, shape) for v in per_block.values()]), axis=0) if per_block else 0
    return inputs + biggest


def _fp8_weight_elements(model: Model, cp: CompiledPlan, weights: np.ndarray) -> np.ndarray:
    """Weight elements read by the fp8 calls (1 byte each), once per weight instance (a shared block's
    weights once however often it runs)."""
    total = np.zeros(weights.shape[1:])
    for i, c in enumerate(cp.calls):
        if c.dtype != FP8:
            continue
        shared = c.call.block and model.block(c.call.block).shared
        total = total + weights[i] / nbytes(FP8) * (c.call.count / c.call.instances if shared else c.call.count)
    return total


def memory_by_class(model: Model, phase: str, dtype: str | Precision, recompute: bool, grid, shape,
                    call_bytes: CallBytes, impls, cp: CompiledPlan, forward=None):
    """Bytes by class [*shape] (module docstring). ``forward``: (``forward_plan``, its ``CallBytes`` on
    ``grid``) where the caller has them (training), else evaluated here."""
    prec = as_precision(dtype)
    e = nbytes(prec.base)
    zeros = np.zeros(shape)
    batch = grid["batch"]
    fp8 = _fp8_weight_elements(model, cp, call_bytes.weights)
    mem = {"weights": zeros + (model.params - fp8) * e + fp8 * nbytes(FP8)}
    if phase == "prefill":
        mem["kv_cache"] = zeros + model.kv_cache_bytes(prec.kv, grid["tokens"]) * batch
    elif phase == "decode":
        mem["kv_cache"] = zeros + model.kv_cache_bytes(prec.kv, grid["keys"] + 1) * batch
    else:
        mem["kv_cache"] = zeros
    mem["state"] = zeros + (model.state_bytes_per_sequence(prec.state) * batch if phase != "train" else 0)
    mem["activations"] = zeros + _activation_bytes(model, phase, prec, recompute, grid, shape, call_bytes.live,
                                                   impls, forward)
    if phase == "train":
        mem["gradients"] = zeros + model.params * e
        mem["optimizer"] = zeros + model.params * (8 if prec.base == "fp32" else 12)
    return mem


_ENERGY_TABLES: dict[tuple, tuple] = {}


def _energy_table(table: SpecTable):
    """``EnergyTable.of`` of the table's specs, cached by the specs' identities (a Spec is frozen: the
    entry keeps the specs, so that their ids are not reused), so that tables of the same specs built
    again (each sweep builds its ``SpecTable``) share it."""
    from ..energy import EnergyTable

    specs = tuple(sc.spec for sc in table.specs)
    key = tuple(id(s) for s in specs)
    hit = _ENERGY_TABLES.get(key)
    if hit is None or any(a is not b for a, b in zip(hit[0], specs)):
        if len(_ENERGY_TABLES) >= 64:
            _ENERGY_TABLES.clear()
        hit = _ENERGY_TABLES[key] = (specs, EnergyTable.of(list(specs)))
    return hit[1]


# What the sweep's energy is, and is not: static power runs over the roofline time bound, a lower bound on
# the step time, and every executed byte crosses DRAM (the bound has no cache reuse).
AT_BOUND = ("static power x the roofline time bound, so a lower estimate of the static part where the "
            "achievable time is longer; predict and explore give the energy at the achievable time")


def _energy(W: np.ndarray, table: SpecTable, time_s: np.ndarray, on_chip: np.ndarray | None = None):
    """Energy [n_specs, *shape] at the time bound (NaN where a spec has no energy section) and per-spec
    notes: ``analytic/energy.py`` with every executed byte crossing DRAM and the device-wide cache
    (the bound has no cache reuse) and fp32 matmul FLOPs on the CUDA cores, as the bound charges them.
    ``on_chip`` [n_specs, *shape]: executed bytes a spec serves from its on-chip state level instead of
    DRAM (charged to that level). The specs that serve none share their counts: one ``energy`` call
    covers them all; a spec that serves some gets its own call."""
    from ..energy import NO_ESTIMATE, counts, energy, label

    tot = W.sum(axis=0)  # [n_cols, *shape]
    et = _energy_table(table)  # measured energy parameters first (analytic/energy.py)
    executed = tot[COL["dram.executed"]]
    serves = [on_chip is not None and bool(np.any(on_chip[s])) for s in range(len(table.specs))]
    # specs that serve no bytes on chip share one set of counts: one energy call covers them all
    everyone = energy(counts(tot, 0.0, executed, on_chip_bytes=0.0), time_s, et) if not all(serves) else None
    parts = []  # (spec, its energy table, its energy arrays, its row in them)
    for s in range(len(table.specs)):
        if not serves[s]:
            parts.append((s, et, everyone, s))
            continue
        moved = on_chip[s]
        c = counts(tot, 0.0, executed - moved, on_chip_bytes=moved)
        parts.append((s, et.row(s), energy(c, time_s[s:s + 1], et.row(s)), 0))
    out = np.full(time_s.shape, np.nan)
    notes = []
    for s, one, arr, i in parts:
        if not et.has_section[s]:
            notes.append(NO_ESTIMATE)
            continue
        out[s] = arr.energy_j[i]
        miss = arr.not_modelled[i]
        notes.append(f"{label(one, i)} at the time bound ({AT_BOUND})"
                     + (f"; excludes {', '.join(sorted(miss))} (unknown in the spec)" if miss else ""))
    return out, notes


def analyze(model: Model, phase: str, table: SpecTable, batch: Sequence[int], length: Sequence[float], *,
            dtype: str | Precision = "bf16", launch: str | None = None, bytes_basis: str = "executed",
            impls: dict | None = None, recompute: bool = False, logits: str = "last",
            keep_calls: bool = False, energy: bool = False, modules: str = "library",
            optimizer: str | None = None) -> GridResult:
    """Analyze ``model`` in ``phase`` over every (batch, length) pair on every spec of ``table``.

    ``length`` is the prompt length (prefill), the sequence length (train) or the context length
    (decode: one token per sequence). ``launch`` defaults to CUDA-graph replay for decode and eager
    launches otherwise. ``modules``: how the runtime's modules split the block into op calls
    (``phases.plan``); ``optimizer``: the train step's parameter update (``phases.plan``).
    """
    launch = launch or ("graph" if phase == "decode" else "eager")
    prec = as_precision(dtype)
    calls = plan(model, phase, impls, recompute, logits, modules, optimizer)
    cp = compile_plan(calls, prec)
    b = np.asarray(batch, dtype=float).reshape(-1, 1)
    ln = np.asarray(length, dtype=float).reshape(1, -1)
    shape = (b.shape[0], ln.shape[1])
    grid = phase_grid(phase, b, ln)
    W, call_bytes = evaluate_plan(cp, grid, shape)
    proj = project_work(np.moveaxis(W, 1, 0), table, launch, bytes_basis)  # [S, n_calls, nb, nl]
    residency = state_residency(model, phase, table, prec.state, b, shape)
    counts = cp.counts.reshape((-1,) + (1,) * len(shape))
    state_c, state_e = call_bytes.state_compulsory * counts, call_bytes.state_executed * counts
    proj = apply_residency(proj, W, state_c, state_e, table, residency, bytes_basis)
    resident = np.stack([r.resident for r in residency])  # [S, nb, nl]
    time_s = proj.bound.sum(axis=1)
    sum_s = proj.sum.sum(axis=1)
    shares = np.stack([np.where(proj.bottleneck == r, proj.bound, 0).sum(axis=1) for r in range(len(RESOURCES))])
    bottleneck = np.where(np.isnan(time_s), -1, shares.argmax(axis=0))

    mem = memory_by_class(model, phase, prec, recompute, grid, shape, call_bytes, impls, cp)
    total = sum(mem.values())
    cap = table.dram_bytes.reshape(-1, 1, 1)
    in_dram = total[None] - np.where(resident, mem["state"][None], 0.0)  # a resident state lives on chip
    fits = ~(in_dram > cap)  # unknown capacity (NaN) compares False: not flagged
    tokens = b * (ln if phase != "decode" else 1) + np.zeros(shape)

    n_specs = len(table.specs)
    unbounded = np.stack([proj.unbounded[r].reshape(n_specs, -1).any(axis=1) for r in RESOURCES], axis=1).tolist()
    not_bounded = [[r for r, u in zip(RESOURCES, row) if u] for row in unbounded]
    res = GridResult(model, phase, prec.dtype, launch, bytes_basis, table, np.asarray(batch), np.asarray(length),
                     time_s, sum_s, bottleneck, shares, mem, total, fits, ~np.isnan(table.dram_bytes),
                     tokens, not_bounded, precision=prec, residency=residency)
    labels = [c.call.label for c in cp.calls]
    res.pim = [pim_caveat(sc, W, proj.bound[s], labels, launch, bytes_basis) for s, sc in enumerate(table.specs)]
    if keep_calls:
        res.calls, res.call_proj, res.call_work, res.call_state = cp, proj, W, (state_c, state_e)
    if energy:
        res.energy_j, res.energy_note = _energy(W, table, time_s, np.where(resident, state_e.sum(axis=0)[None], 0.0))
    return res
