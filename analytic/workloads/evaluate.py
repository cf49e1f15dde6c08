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

- weights: all parameters (MoE: every expert) x bytes of the dtype.
- kv_cache: attention blocks only: kv bytes per token x batch x cached tokens (prefill: the prompt;
  decode: context + 1; train: none).
- state: SSM blocks only: conv + SSM state per sequence x batch (prefill and decode; train keeps none).
- activations: inference: the largest single call's activation inputs plus outputs (compulsory
  ``activations`` bytes read and written: they coexist while the kernel runs); a lower bound on the
  peak, which also holds the residual stream and allocator slack. Training: what the forward
  writes for backward (outputs and intermediates of every call of the prefill plan over all tokens);
  with recomputation: each layer block's input (B x L x d_in) plus one block's forward writes.
- train only: gradients (parameters x dtype bytes) and Adam state (fp32 m and v, plus an fp32 master
  copy when the dtype is not fp32: 8 or 12 bytes per parameter; an assumption, stated in outputs).

Energy (analytic estimate, only where the spec has ``energy:`` data): FLOPs x J/FLOP per engine, DRAM
bytes (as executed) x J/B for dram and for every device-wide level they cross, plus idle power x time
bound. Terms whose coefficient the spec lacks are listed as excluded.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..conventions import nbytes
from ..registry import AnalyticError, compiled_cost
from ..roofline import COL, RESOURCES, TENSOR_DTYPES, WORK_COLUMNS, Projected, SpecTable, project_work, spec_ceiling
from .models import Model
from .phases import OpCall, plan

ADDITIVE = np.array([c not in ("working_set",) for c in WORK_COLUMNS])
COMPUTE_RESOURCES = ("tensor", "vector", "special_function")


def _term_columns(key: str) -> tuple[int, ...]:
    if key.startswith("tensor."):
        dt = key.split(".", 1)[1]
        return (COL["vector"],) if dt == "fp32" else (COL[f"tensor.{dt}"],)
    if key in ("vector", "launches", "working_set"):
        return (COL[key],)
    if key == "transcendental":
        return (COL["special_function"],)
    if key.startswith(("read.", "write.")):
        return (COL["dram.compulsory"], COL["dram.executed"])
    if key.startswith(("extra_read.", "extra_write.")):
        return (COL["dram.executed"],)
    raise KeyError(f"cost term {key!r} has no work column")


LIVE_TERMS = ("read.activations", "write.activations")
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


@dataclass(frozen=True)
class CompiledPlan:
    calls: tuple[_Call, ...]
    counts: np.ndarray  # [n_calls]

    @property
    def n(self) -> int:
        return len(self.calls)


def _dim_arg(v) -> tuple:
    """A plan dimension as (grid variable or None, constant or multiplier, round up to a multiple of)."""
    if isinstance(v, str):
        return (v, 1, 1)
    if isinstance(v, tuple):
        return v
    return (None, v, 1)


@functools.lru_cache(maxsize=1024)
def compile_plan(calls: tuple[OpCall, ...], dtype: str) -> CompiledPlan:
    out = []
    for c in calls:
        cc = compiled_cost(c.op, c.impl, c.mode, dtype)
        dims = c.dim_map()
        args = []
        for d in cc.dims:
            if d not in dims:
                raise KeyError(f"plan call {c.label}: op {c.op} needs dimension {d}")
            args.append(_dim_arg(dims[d]))
        cols = tuple((i, col) for i, k in enumerate(cc.keys) for col in _term_columns(k))
        live = tuple(i for i, k in enumerate(cc.keys) if k in LIVE_TERMS)
        saved = tuple(i for i, k in enumerate(cc.keys) if k in SAVED_TERMS)
        checks = cc.constraints  # the op's and the implementation's, over dims this cost uses
        out.append(_Call(c, cc.fn, tuple(args), cols, live, saved, checks, cc.dims))
    return CompiledPlan(tuple(out), np.array([c.count for c in calls], dtype=float))


def _value(grid: dict, var: str | None, mult, step: int):
    if var is None:
        return mult
    v = grid[var]
    return (np.ceil(v / step) * step if step != 1 else v) * mult


def phase_grid(phase: str, batch, length) -> dict:
    """The grid variables of a plan: ``batch``, ``tokens`` (new tokens per sequence: one in decode) and
    ``keys`` (tokens attended to: the context in decode). Arrays or scalars."""
    if phase == "decode":
        return {"batch": batch, "tokens": length * 0 + 1, "keys": length}
    return {"batch": batch, "tokens": length, "keys": length}


def call_shape(call: OpCall, phase: str, batch: float, length: float) -> dict[str, float]:
    """The dimensions of one plan call at one (batch, length) point, as ``evaluate_plan`` costs them."""
    grid = phase_grid(phase, float(batch), float(length))
    return {d: float(_value(grid, *_dim_arg(v))) for d, v in call.dims}


def evaluate_plan(cp: CompiledPlan, grid: dict[str, np.ndarray], shape: tuple[int, ...]):
    """Work [n_calls, n_cols, *shape] (x multiplicity), live and saved activation bytes [n_calls, *shape]
    (per single call)."""
    W = np.zeros((cp.n, len(WORK_COLUMNS)) + shape)
    live = np.zeros((cp.n,) + shape)
    saved = np.zeros((cp.n,) + shape)
    for i, c in enumerate(cp.calls):
        args = [_value(grid, v, m, step) for v, m, step in c.args]
        for who, k in c.checks:
            if not np.all(k.check(*(args[c.dims.index(d)] for d in k.dims))):
                raise AnalyticError(f"{c.call.label}: {who}: {k.message}")
        vals = c.fn(*args)
        for ti, col in c.cols:
            W[i, col] += vals[ti]
        for ti in c.live:
            live[i] += vals[ti]
        for ti in c.saved:
            saved[i] += vals[ti]
    W[:, ADDITIVE] *= cp.counts.reshape((-1, 1) + (1,) * len(shape))
    return W, live, saved


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
    energy_j: np.ndarray | None = None
    energy_note: list[str] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.tokens / self.time_s

    def bottleneck_names(self) -> np.ndarray:
        names = np.array(list(RESOURCES) + ["none"])
        return names[self.bottleneck]


def _activation_bytes(model: Model, phase: str, dtype: str, recompute: bool, grid, shape, live, impls):
    if phase != "train":
        return live.max(axis=0)
    fwd = compile_plan(plan(model, "prefill", impls, logits="all"), dtype)
    _, _, saved = evaluate_plan(fwd, grid, shape)
    per_call = saved * fwd.counts.reshape((-1,) + (1,) * len(shape))
    if not recompute:
        return per_call.sum(axis=0)
    e = nbytes(dtype)
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


def memory_by_class(model: Model, phase: str, dtype: str, recompute: bool, grid, shape, live, impls):
    e = nbytes(dtype)
    zeros = np.zeros(shape)
    batch = grid["batch"]
    mem = {"weights": zeros + model.params * e}
    if phase == "prefill":
        mem["kv_cache"] = zeros + model.kv_bytes_per_token(dtype) * batch * grid["tokens"]
    elif phase == "decode":
        mem["kv_cache"] = zeros + model.kv_bytes_per_token(dtype) * batch * (grid["keys"] + 1)
    else:
        mem["kv_cache"] = zeros
    mem["state"] = zeros + (model.state_bytes_per_sequence(dtype) * batch if phase != "train" else 0)
    mem["activations"] = zeros + _activation_bytes(model, phase, dtype, recompute, grid, shape, live, impls)
    if phase == "train":
        mem["gradients"] = zeros + model.params * e
        mem["optimizer"] = zeros + model.params * (8 if dtype == "fp32" else 12)
    return mem


def _energy(W: np.ndarray, table: SpecTable, time_s: np.ndarray):
    """Energy [n_specs, *shape] where a spec has energy data (NaN otherwise) and per-spec notes."""
    tot = W.sum(axis=0)  # [n_cols, *shape]
    out = np.full(time_s.shape, np.nan)
    notes = []
    for s, sc in enumerate(table.specs):
        spec = sc.spec
        if spec.energy is None:
            notes.append("no energy estimate: the spec has no energy data")
            continue
        excluded, e = [], np.zeros(time_s.shape[1:])
        terms = [("energy.per_flop.tensor", sum(tot[COL[f"tensor.{d}"]] for d in TENSOR_DTYPES)),
                 ("energy.per_flop.vector", tot[COL["vector"]]),
                 ("energy.per_flop.special_function", tot[COL["special_function"]]),
                 ("energy.per_byte.dram", tot[COL["dram.executed"]])]
        terms += [(f"energy.per_byte.{lvl}", tot[COL["dram.executed"]]) for lvl, m in spec.memory.items()
                  if lvl != "dram" and m.scope == "device"]
        for key, work in terms:
            if not np.any(work > 0):
                continue
            c = spec_ceiling(spec, key, sc.prefer)
            if c.value is None:
                excluded.append(key)
            else:
                e = e + work * c.value
        idle = spec_ceiling(spec, "power.idle", sc.prefer)
        if idle.value is None:
            excluded.append("power.idle")
        else:
            e = e + idle.value * time_s[s]
        out[s] = e
        notes.append("analytic estimate" + (f"; excludes {', '.join(excluded)} (unknown in the spec)" if excluded else ""))
    return out, notes


def analyze(model: Model, phase: str, table: SpecTable, batch: Sequence[int], length: Sequence[float], *,
            dtype: str = "bf16", launch: str | None = None, bytes_basis: str = "executed",
            impls: dict | None = None, recompute: bool = False, logits: str = "last",
            keep_calls: bool = False, energy: bool = False) -> GridResult:
    """Analyze ``model`` in ``phase`` over every (batch, length) pair on every spec of ``table``.

    ``length`` is the prompt length (prefill), the sequence length (train) or the context length
    (decode: one token per sequence). ``launch`` defaults to CUDA-graph replay for decode and eager
    launches otherwise.
    """
    launch = launch or ("graph" if phase == "decode" else "eager")
    calls = plan(model, phase, impls, recompute, logits)
    cp = compile_plan(calls, dtype)
    b = np.asarray(batch, dtype=float).reshape(-1, 1)
    ln = np.asarray(length, dtype=float).reshape(1, -1)
    shape = (b.shape[0], ln.shape[1])
    grid = phase_grid(phase, b, ln)
    W, live, _ = evaluate_plan(cp, grid, shape)
    proj = project_work(np.moveaxis(W, 1, 0), table, launch, bytes_basis)  # [S, n_calls, nb, nl]
    time_s = proj.bound.sum(axis=1)
    sum_s = proj.sum.sum(axis=1)
    shares = np.stack([np.where(proj.bottleneck == r, proj.bound, 0).sum(axis=1) for r in range(len(RESOURCES))])
    bottleneck = np.where(np.isnan(time_s), -1, shares.argmax(axis=0))

    mem = memory_by_class(model, phase, dtype, recompute, grid, shape, live, impls)
    total = sum(mem.values())
    cap = table.dram_bytes.reshape(-1, 1, 1)
    fits = ~(total[None] > cap)  # unknown capacity (NaN) compares False: not flagged
    tokens = b * (ln if phase != "decode" else 1) + np.zeros(shape)

    not_bounded = []
    for s in range(len(table.specs)):
        names = [r for r in RESOURCES if bool(proj.unbounded[r][s].any())]
        not_bounded.append(names)
    res = GridResult(model, phase, dtype, launch, bytes_basis, table, np.asarray(batch), np.asarray(length),
                     time_s, sum_s, bottleneck, shares, mem, total, fits, ~np.isnan(table.dram_bytes),
                     tokens, not_bounded)
    if keep_calls:
        res.calls, res.call_proj, res.call_work = cp, proj, W
    if energy:
        res.energy_j, res.energy_note = _energy(W, table, time_s)
    return res
