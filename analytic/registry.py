"""The strict op registry: registering twice raises, an unknown op or implementation raises with the
known names, and an op without a cost rule for a mode is an error, never a silent zero.

Constraints on dimension values belong to an op (every implementation: L divisible by C for SSD's
chunks) or to one implementation (a kernel's limits: causal-conv1d's widths 2..4, the Mamba-3 MIMO
kernel's chunking); ``validate_dims`` checks both, each over the dimensions the compiled cost uses.

Each op family package in ``ops/`` registers its ops at import (``ops/<family>/cost.py``);
``ops/__init__`` imports them all. The family's plain-PyTorch references (``ops/<family>/ref.py``)
declare, in ``REFERENCES``, which (op, implementations, modes) each function computes and how
(``Reference``); ``reference`` resolves one, importing the ref module only then (torch is wanted).
Symbolic costs are built once per (op, impl, mode, dtype) and compiled with ``sympy.lambdify`` into
numpy functions, so evaluating a cost over arrays of shapes costs a few numpy operations.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import sympy as sp

from ..errors import UserError
from . import execution
from .conventions import BYTES_PER_ELEMENT, MODES
from .cost import Cost
from .symbols import DESCRIPTIONS, SYMBOLS


class AnalyticError(UserError):
    """Bad input to the analytic model; ``str()`` is the message a user sees."""


@dataclass(frozen=True)
class Constraint:
    """A condition over dimension values; ``check`` works on ints and numpy arrays alike."""

    dims: tuple[str, ...]
    check: Callable[..., Any]
    message: str


def divisible(a: str, b: str) -> Constraint:
    return Constraint((a, b), lambda x, y: np.asarray(x) % np.asarray(y) == 0, f"{a} must be divisible by {b}")


def at_most(a: str, b: str) -> Constraint:
    return Constraint((a, b), lambda x, y: np.asarray(x) <= np.asarray(y), f"{a} must be at most {b}")


def in_range(a: str, lo: int, hi: int, why: str) -> Constraint:
    """``lo <= a <= hi``; ``why`` says whose limit it is (a kernel's, with its source)."""
    return Constraint((a,), lambda x: (np.asarray(x) >= lo) & (np.asarray(x) <= hi),
                      f"{a} must be between {lo} and {hi} ({why})")


STORAGE_KEYWORDS = ("state_dtype", "kv_dtype")


@dataclass(frozen=True)
class Impl:
    """A named implementation: ``rule(mode, dtype) -> Cost`` of sympy expressions over ``symbols``;
    ``constraints`` hold for this implementation only, in addition to the op's. ``storage`` names the
    storage-dtype keywords the rule also takes (``STORAGE_KEYWORDS``: the dtype of the recurrent state
    or of the KV cache in device memory, when it differs from ``dtype``); without them the rule keeps
    the dtype its docstring states (the one the measured kernels use)."""

    name: str
    summary: str
    rule: Callable[..., Cost]
    modes: tuple[str, ...]
    constraints: tuple[Constraint, ...] = ()
    storage: tuple[str, ...] = ()

    def __post_init__(self):
        bad = [k for k in self.storage if k not in STORAGE_KEYWORDS]
        if bad:
            raise ValueError(f"implementation {self.name}: unknown storage keyword(s) {bad}; known {STORAGE_KEYWORDS}")

    def supports(self, mode: str) -> bool:
        return mode in self.modes or (mode == "fwdbwd" and "fwd" in self.modes and "bwd" in self.modes)


@dataclass(frozen=True)
class Op:
    name: str
    family: str
    summary: str
    dims: tuple[str, ...]
    impls: tuple[Impl, ...]
    default_impl: str
    constraints: tuple[Constraint, ...] = ()
    reference: str | None = None  # "module:function" of the plain PyTorch reference
    dtypes: tuple[str, ...] = ("fp32", "bf16", "fp16")
    notes: str = ""
    impl_map: dict[str, Impl] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        unknown = [d for d in self.dims if d not in SYMBOLS]
        if unknown:
            raise ValueError(f"op {self.name}: unknown dimension(s) {unknown}; declare them in symbols.py")
        names = [i.name for i in self.impls]
        if len(set(names)) != len(names):
            raise ValueError(f"op {self.name}: duplicate implementation names {names}")
        if self.default_impl not in names:
            raise ValueError(f"op {self.name}: default_impl {self.default_impl!r} not in {names}")
        for impl in self.impls:
            bad = [m for m in impl.modes if m not in MODES]
            if bad:
                raise ValueError(f"op {self.name}/{impl.name}: unknown mode(s) {bad}; known {MODES}")
        for owner, constraints in _owned_constraints(self, self.impls):
            stray = [d for c in constraints for d in c.dims if d not in self.dims]
            if stray:
                raise ValueError(f"{owner}: constraint on dimension(s) {stray} not in op.dims")
        object.__setattr__(self, "impl_map", {i.name: i for i in self.impls})

    @property
    def modes(self) -> tuple[str, ...]:
        return tuple(m for m in MODES if any(i.supports(m) for i in self.impls))

    def impl(self, name: str | None) -> Impl:
        name = name or self.default_impl
        if name not in self.impl_map:
            raise AnalyticError(
                f"op {self.name!r} has no implementation {name!r}; valid: {', '.join(self.impl_map)}"
            )
        return self.impl_map[name]


REFERENCE_KINDS = ("eager", "gate")


@dataclass(frozen=True)
class Reference:
    """A plain-PyTorch reference of ``op`` under ``impls`` in ``modes`` (declared in the family's
    ``ref.py``). ``kind``:
    - "eager": the eager algorithm itself, run at the inputs' dtype (the torch_ref backends time it
      and hold the kernels to it);
    - "gate": a kernel library's semantics with the gate's precision switch ``hi`` (fp64 throughout,
      or the kernel's own precision: ``ops/common/ref.py``); the kernel backends check against it.
    """

    op: str
    impls: tuple[str, ...]
    modes: tuple[str, ...]
    kind: str
    fn: Callable[..., Any]

    def __post_init__(self):
        if self.kind not in REFERENCE_KINDS:
            raise ValueError(f"reference {self.fn.__name__}: kind {self.kind!r} is not one of {REFERENCE_KINDS}")


def family_ref_module(family: str):
    """A family's ``ref.py`` module (torch is imported lazily inside its functions: importing it needs
    no torch)."""
    import importlib

    return importlib.import_module(f"{__package__}.ops.{family}.ref")


def family_references(family: str) -> tuple[Reference, ...]:
    """Every ``Reference`` a family's ``ref.py`` declares."""
    return tuple(getattr(family_ref_module(family), "REFERENCES", ()))


def reference(op_name: str, impl_name: str | None, mode: str, kind: str = "gate") -> Callable[..., Any]:
    """The reference function of (op, implementation, mode) of ``kind``; an error naming what exists
    when none is declared (never another implementation's reference silently)."""
    op = get_op(op_name)
    impl = op.impl(impl_name)
    if kind not in REFERENCE_KINDS:
        raise AnalyticError(f"unknown reference kind {kind!r}; valid: {', '.join(REFERENCE_KINDS)}")
    refs = [r for r in family_references(op.family) if r.op == op.name]
    for r in refs:
        if r.kind == kind and impl.name in r.impls and mode in r.modes:
            return r.fn
    have = ", ".join(f"{r.fn.__name__} ({r.kind}: {'/'.join(r.impls)} {'/'.join(r.modes)})" for r in refs) or "none"
    raise AnalyticError(f"op {op.name!r}, implementation {impl.name!r} has no {kind} reference for mode {mode!r}; "
                        f"its references: {have}")


_REGISTRY: dict[str, Op] = {}


def register(op: Op) -> Op:
    if op.name in _REGISTRY:
        raise ValueError(f"op {op.name!r} is already registered (by family {_REGISTRY[op.name].family!r})")
    _REGISTRY[op.name] = op
    return op


def _ensure_loaded() -> None:
    from . import ops  # noqa: F401  (importing registers every family)


def all_ops() -> dict[str, Op]:
    _ensure_loaded()
    return dict(_REGISTRY)


def get_op(name: str) -> Op:
    _ensure_loaded()
    if name not in _REGISTRY:
        raise AnalyticError(f"unknown op {name!r}; valid ops: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def _check_mode_dtype(op: Op, impl: Impl, mode: str, dtype: str) -> None:
    if mode not in MODES:
        raise AnalyticError(f"unknown mode {mode!r}; valid modes: {', '.join(MODES)}")
    if not impl.supports(mode):
        valid = [m for m in MODES if impl.supports(m)]
        raise AnalyticError(
            f"op {op.name!r}, implementation {impl.name!r} has no cost rule for mode {mode!r}; "
            f"valid modes: {', '.join(valid)}"
        )
    if dtype not in op.dtypes:
        raise AnalyticError(f"op {op.name!r} has no dtype {dtype!r}; valid dtypes: {', '.join(op.dtypes)}")


def _storage_kwargs(impl: Impl, state_dtype: str | None, kv_dtype: str | None) -> dict[str, str]:
    """The storage dtypes ``impl``'s rule takes, among those given (the others do not apply to it)."""
    given = {"state_dtype": state_dtype, "kv_dtype": kv_dtype}
    for k, v in given.items():
        if v is not None and v not in BYTES_PER_ELEMENT:
            raise AnalyticError(f"unknown {k} {v!r}; known: {', '.join(BYTES_PER_ELEMENT)}")
    return {k: v for k, v in given.items() if v is not None and k in impl.storage}


def _with_host(op: Op, impl: Impl, cost: Cost, mode: str) -> Cost:
    """``cost`` (a rule's in ``mode``) with its host term: every launch issued through the implementation's
    backend class in that mode (execution.py), where the rule does not state its host calls itself."""
    if not isinstance(cost, Cost):
        raise TypeError(f"op {op.name}/{impl.name}: rule returned {type(cost).__name__}, expected Cost")
    if not cost.host and cost.launches != 0:
        cost = dataclasses.replace(cost, host={execution.host_class(op.name, impl.name, mode=mode): cost.launches})
    return cost


@functools.lru_cache(maxsize=None)
def symbolic_cost(op_name: str, impl_name: str | None = None, mode: str = "fwd", dtype: str = "bf16",
                  state_dtype: str | None = None, kv_dtype: str | None = None) -> Cost:
    """The symbolic Cost (sympy expressions over the dimension symbols). ``state_dtype`` / ``kv_dtype``
    reach the rules that declare them (``Impl.storage``)."""
    op = get_op(op_name)
    impl = op.impl(impl_name)
    _check_mode_dtype(op, impl, mode, dtype)
    kw = _storage_kwargs(impl, state_dtype, kv_dtype)
    if mode == "fwdbwd" and "fwdbwd" not in impl.modes:
        # each pass's launches are issued through that pass's backend class (execution.Traits.host_class_for)
        cost = _with_host(op, impl, impl.rule("fwd", dtype, **kw), "fwd") + _with_host(
            op, impl, impl.rule("bwd", dtype, **kw), "bwd")
    else:
        cost = _with_host(op, impl, impl.rule(mode, dtype, **kw), mode)
    stray = {s.name for s in cost.free_symbols()} - set(op.dims)
    if stray:
        raise ValueError(f"op {op.name}/{impl.name}: cost uses dimension(s) {sorted(stray)} not in op.dims")
    return cost


def _owned_constraints(op: Op, impls: tuple[Impl, ...]) -> list[tuple[str, tuple[Constraint, ...]]]:
    """(who, constraints) pairs: the op's own, then each implementation's, named for messages."""
    return [(f"op {op.name!r}", op.constraints)] + [
        (f"op {op.name!r}, implementation {i.name!r}", i.constraints) for i in impls]


def active_constraints(op: Op, impl: Impl | None, dims: tuple[str, ...]) -> tuple[tuple[str, Constraint], ...]:
    """The (who, constraint) pairs that bind a cost over ``dims``: the op's and ``impl``'s constraints
    whose dimensions the cost uses (decode ignores L, so L % C is moot there)."""
    return tuple((who, c) for who, cs in _owned_constraints(op, (impl,) if impl else ())
                 for c in cs if all(d in dims for d in c.dims))


@dataclass(frozen=True)
class CompiledCost:
    op: Op
    impl: Impl
    mode: str
    dtype: str
    dims: tuple[str, ...]  # the dimensions this cost depends on, in call order
    keys: tuple[str, ...]  # Cost.terms() names, in output order
    fn: Callable[..., tuple]

    @property
    def constraints(self) -> tuple[tuple[str, Constraint], ...]:
        """(who, constraint) pairs to check before evaluating: see ``active_constraints``."""
        return active_constraints(self.op, self.impl, self.dims)

    def evaluate(self, values: Mapping[str, Any]) -> Cost:
        args = [values[d] for d in self.dims]
        shape = np.broadcast(*args).shape if args else ()
        if not shape:
            return Cost.from_terms({k: float(v) for k, v in zip(self.keys, self.fn(*args))})
        n = int(np.prod(shape))
        flat = [np.broadcast_to(a, shape).reshape(-1) for a in args]
        outs = {k: np.empty(n) for k in self.keys}
        # Blocks keep the temporaries of one evaluation in cache: on large arrays this is ~1.5-2x
        # faster than one pass over everything.
        for lo in range(0, n, EVAL_BLOCK):
            hi = min(n, lo + EVAL_BLOCK)
            for k, v in zip(self.keys, self.fn(*(a[lo:hi] for a in flat))):
                outs[k][lo:hi] = v
        return Cost.from_terms({k: v.reshape(shape) for k, v in outs.items()})


EVAL_BLOCK = 16384


@functools.lru_cache(maxsize=None)
def compiled_cost(op_name: str, impl_name: str | None = None, mode: str = "fwd", dtype: str = "bf16",
                  state_dtype: str | None = None, kv_dtype: str | None = None) -> CompiledCost:
    op = get_op(op_name)
    impl = op.impl(impl_name)
    cost = symbolic_cost(op_name, impl.name, mode, dtype, state_dtype, kv_dtype)
    names = {s.name for s in cost.free_symbols()}
    dims = tuple(d for d in op.dims if d in names)
    terms = cost.terms()
    keys = tuple(terms)
    fn = sp.lambdify([SYMBOLS[d] for d in dims], [terms[k] for k in keys], modules="numpy", cse=True)
    return CompiledCost(op, impl, mode, dtype, dims, keys, fn)


def validate_dims(op: Op, values: Mapping[str, Any], required: tuple[str, ...],
                  impl: Impl | None = None) -> dict[str, Any]:
    """Dimension values checked (known to the op, present where ``required``, positive integers,
    meeting the op's and ``impl``'s constraints over ``required``) and converted for evaluation."""
    unknown = [k for k in values if k not in op.dims]
    if unknown:
        raise AnalyticError(
            f"op {op.name!r} has no dimension(s) {', '.join(unknown)}; its dimensions: "
            + ", ".join(f"{d} ({DESCRIPTIONS[d]})" for d in op.dims)
        )
    missing = [d for d in required if d not in values]
    if missing:
        raise AnalyticError(
            f"op {op.name!r} needs dimension(s) {', '.join(missing)}: "
            + ", ".join(f"{d} ({DESCRIPTIONS[d]})" for d in missing)
        )
    out = {}
    for k, v in values.items():
        a = np.asarray(v)
        if a.dtype.kind in "iu":
            ok = a.size == 0 or a.min() > 0
        elif a.dtype.kind == "f":
            ok = bool(np.all(np.isfinite(a)) and np.all(a == np.floor(a)) and np.all(a > 0))
        else:
            ok = False
        if not ok:
            raise AnalyticError(f"dimension {k} must be a positive integer, got {v!r}")
        # Arrays are evaluated in float64: int64 products of large dimensions (B*H*L*L*P) would wrap
        # around silently; float64 is exact per dimension up to 2**53 and never wraps.
        out[k] = a.astype(np.float64) if a.ndim else int(a)
    for who, c in active_constraints(op, impl, tuple(d for d in required if d in out)):
        if not np.all(c.check(*(out[d] for d in c.dims))):
            scalar = all(np.ndim(out[d]) == 0 for d in c.dims)
            got = ", ".join(f"{d}={values[d]}" for d in c.dims) if scalar else "some shapes"
            raise AnalyticError(f"{who}: {c.message} (got {got})")
    return out


def cost(op_name: str, dims: Mapping[str, Any], impl: str | None = None, mode: str = "fwd",
         dtype: str = "bf16", state_dtype: str | None = None, kv_dtype: str | None = None) -> Cost:
    """Numeric Cost of an op; ``dims`` values may be ints or numpy arrays (broadcast together)."""
    cc = compiled_cost(op_name, impl, mode, dtype, state_dtype, kv_dtype)
    values = validate_dims(cc.op, dims, cc.dims, cc.impl)
    return cc.evaluate(values)


def element_bytes(dtype: str) -> int:
    return BYTES_PER_ELEMENT[dtype]
