"""The Cost algebra: what one op (or a block, layer, model) costs, split by engine and by tensor class.

A Cost holds sympy expressions (symbolic rules) or numbers / numpy arrays (evaluated costs); the same
algebra serves both. ``a + b`` is running a then b; ``n * a`` is running a n times. FLOPs, bytes and
launches add; the on-chip working set does not (kernels run one after another), so ``+`` keeps the
larger of the two and ``*`` leaves it unchanged.

Fields (conventions in ``conventions.py``):
- ``tensor``: {dtype: FLOPs on tensor cores}; ``vector``: fp32 FLOPs on CUDA cores;
  ``transcendental``: special-function evaluations (exp, log, rsqrt, ...).
- ``read`` / ``write``: compulsory device-memory bytes by tensor class (each tensor moved once).
- ``extra_read`` / ``extra_write``: what a named implementation moves beyond the compulsory bytes
  (re-reads, materialized intermediates, spills). As-executed bytes = compulsory + extra.
- ``launches``: kernel launches. ``working_set``: on-chip bytes one SM must hold at once.
- ``host``: {backend class: calls the host issues through that software path} (the classes of
  ``hwspecs.schema.HOST_CLASSES``: an eager PyTorch op, a Triton launch, a CUDA-extension call, ...);
  the registry fills it from the implementation's execution traits (``execution.py``) when a rule
  leaves it empty, so composites (blocks, models) sum the host work of their parts.
- ``path``: work that runs through a software kernel path whose attained rate differs from the
  engine or memory ceiling it uses (``PATH_KEYS``): ``dram.<p>`` bytes (already part of the
  as-executed bytes) moved by ATen's non-vectorized kernels (``hwspecs.schema.DRAM_PATHS``:
  broadcast, cast_copy, reduction), ``compute.<p>`` FLOPs (already part of ``vector``) of a kernel
  with its own attained rate (``hwspecs.schema.COMPUTE_PATHS``: conv_depthwise). The roofline bound
  ignores it (datasheet peaks); the achievable model times that work at the path's attained rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import sympy as sp

from ..hwspecs.schema import COMPUTE_PATHS, DRAM_PATHS, HOST_CLASSES
from .conventions import TENSOR_CLASSES


def _add_maps(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out[k] + v if k in out else v
    return out


def _scale_map(a: Mapping[str, Any], s: Any) -> dict[str, Any]:
    return {k: v * s for k, v in a.items()}


def _max(a: Any, b: Any) -> Any:
    if isinstance(a, sp.Basic) or isinstance(b, sp.Basic):
        if a == 0:
            return b
        if b == 0 or a == b:
            return a
        # evaluate=False: sympy's Max simplification of symbolic sums is slow (seconds per model)
        # and buys nothing, since the expression is only compiled to numpy afterwards.
        return sp.Max(a, b, evaluate=False)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return max(a, b)


_MAP_FIELDS = ("tensor", "read", "write", "extra_read", "extra_write", "host", "path")
# Cost.path keys: bytes through an ATen DRAM path, FLOPs through a compute path (module docstring)
PATH_KEYS = tuple(f"dram.{p}" for p in DRAM_PATHS) + tuple(f"compute.{p}" for p in COMPUTE_PATHS)
_SCALAR_FIELDS = ("vector", "transcendental", "launches")


@dataclass(frozen=True)
class Cost:
    tensor: Mapping[str, Any] = field(default_factory=dict)
    vector: Any = 0
    transcendental: Any = 0
    read: Mapping[str, Any] = field(default_factory=dict)
    write: Mapping[str, Any] = field(default_factory=dict)
    extra_read: Mapping[str, Any] = field(default_factory=dict)
    extra_write: Mapping[str, Any] = field(default_factory=dict)
    launches: Any = 0
    working_set: Any = 0
    host: Mapping[str, Any] = field(default_factory=dict)
    path: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        bad_host = set(self.host) - set(HOST_CLASSES)
        if bad_host:
            raise ValueError(f"Cost.host: unknown backend class(es) {sorted(bad_host)}; known: {HOST_CLASSES}")
        bad_path = set(self.path) - set(PATH_KEYS)
        if bad_path:
            raise ValueError(f"Cost.path: unknown kernel path(s) {sorted(bad_path)}; known: {PATH_KEYS}")
        for name in ("read", "write", "extra_read", "extra_write"):
            bad = set(getattr(self, name)) - set(TENSOR_CLASSES)
            if bad:
                raise ValueError(f"Cost.{name}: unknown tensor class(es) {sorted(bad)}; known: {TENSOR_CLASSES}")

    def __add__(self, other: "Cost") -> "Cost":
        if not isinstance(other, Cost):
            return NotImplemented
        kw = {f: _add_maps(getattr(self, f), getattr(other, f)) for f in _MAP_FIELDS}
        kw.update({f: getattr(self, f) + getattr(other, f) for f in _SCALAR_FIELDS})
        kw["working_set"] = _max(self.working_set, other.working_set)
        return Cost(**kw)

    def __radd__(self, other):
        if other == 0:  # so that sum() works
            return self
        return NotImplemented

    def __mul__(self, s: Any) -> "Cost":
        if isinstance(s, Cost):
            return NotImplemented
        kw = {f: _scale_map(getattr(self, f), s) for f in _MAP_FIELDS}
        kw.update({f: getattr(self, f) * s for f in _SCALAR_FIELDS})
        kw["working_set"] = self.working_set
        return Cost(**kw)

    __rmul__ = __mul__

    # Totals -----------------------------------------------------------------------------------
    @property
    def tensor_flops(self) -> Any:
        return sum(self.tensor.values(), 0)

    @property
    def flops(self) -> Any:
        """All arithmetic FLOPs (tensor + vector); transcendentals are counted apart."""
        return self.tensor_flops + self.vector

    @property
    def bytes_read(self) -> Any:
        return sum(self.read.values(), 0)

    @property
    def bytes_written(self) -> Any:
        return sum(self.write.values(), 0)

    @property
    def bytes(self) -> Any:
        """Compulsory device-memory bytes, read + written."""
        return self.bytes_read + self.bytes_written

    @property
    def executed_read(self) -> Any:
        return self.bytes_read + sum(self.extra_read.values(), 0)

    @property
    def executed_written(self) -> Any:
        return self.bytes_written + sum(self.extra_write.values(), 0)

    @property
    def executed_bytes(self) -> Any:
        return self.executed_read + self.executed_written

    # Symbolic helpers ---------------------------------------------------------------------------
    def terms(self) -> dict[str, Any]:
        """Flat {name: value} view, e.g. 'tensor.bf16', 'read.weights', 'launches'."""
        out: dict[str, Any] = {}
        for f in _MAP_FIELDS:
            for k, v in getattr(self, f).items():
                out[f"{f}.{k}"] = v
        for f in _SCALAR_FIELDS + ("working_set",):
            out[f] = getattr(self, f)
        return out

    @classmethod
    def from_terms(cls, terms: Mapping[str, Any]) -> "Cost":
        kw: dict[str, Any] = {f: {} for f in _MAP_FIELDS}
        for name, v in terms.items():
            if "." in name:
                f, k = name.split(".", 1)
                kw[f][k] = v
            else:
                kw[name] = v
        return cls(**kw)

    def simplify(self) -> "Cost":
        return Cost.from_terms({k: sp.simplify(v) if isinstance(v, sp.Basic) else v for k, v in self.terms().items()})

    def free_symbols(self) -> set[sp.Symbol]:
        out: set[sp.Symbol] = set()
        for v in self.terms().values():
            if isinstance(v, sp.Basic):
                out |= v.free_symbols
        return out

    def subs(self, values: Mapping[Any, Any]) -> "Cost":
        return Cost.from_terms(
            {k: (v.subs(values) if isinstance(v, sp.Basic) else v) for k, v in self.terms().items()}
        )


ZERO = Cost()


def traffic(read: Mapping[str, Any] | None = None, write: Mapping[str, Any] | None = None,
            extra_read: Mapping[str, Any] | None = None, extra_write: Mapping[str, Any] | None = None) -> Cost:
    """A Cost with bytes only (convenience for rules)."""
    return Cost(read=dict(read or {}), write=dict(write or {}),
                extra_read=dict(extra_read or {}), extra_write=dict(extra_write or {}))
