"""Kernel-sequence accounting for the state-space op families (conv1d, s4, mamba1, ssd, mamba3).

A rule lists the launches an implementation makes; each ``Launch`` names the tensors it reads and
writes and the arithmetic it does, and may repeat (``count``: e.g. L per-step launches of a Python
loop). ``chain`` turns the list into a ``Cost``:

- compulsory bytes: the op's inputs read once and its outputs written once, by tensor class;
- as-executed extra bytes: everything the launches move beyond that (re-reads, temporaries, saved
  tensors, per-step state traffic), computed as executed minus compulsory per class, so the split
  can never be inconsistent with the launch list;
- FLOPs by engine, launches (sum of counts), working set (the largest launch's; ``None`` counts as 0:
  a streaming elementwise kernel keeps no resident tile worth a capacity check).

Bytes are counted at kernel granularity: every launch reads its operands from and writes its results
to device memory. Reuse that L2 would provide between launches (small per-step tensors of a loop, a
[B, N, L] operand re-read by every channel of a fused kernel) is not modelled as device traffic where
the docstrings say so; it is the calibrated efficiency's job.

This mirrors ``_kernels.py`` of the basic families and adds what the scan families need: tensor-core
FLOPs on a launch and repeated launches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import sympy as sp

from ..conventions import TENSOR_CLASSES
from ..cost import Cost


@dataclass(frozen=True)
class T:
    """A tensor: ``elements`` (sympy) of ``itemsize`` bytes, in one tensor class."""

    name: str
    cls: str
    elements: Any
    itemsize: int

    def __post_init__(self):
        if self.cls not in TENSOR_CLASSES:
            raise ValueError(f"tensor {self.name}: unknown class {self.cls!r}; known: {TENSOR_CLASSES}")

    @property
    def nbytes(self) -> Any:
        return self.elements * self.itemsize


@dataclass(frozen=True)
class Launch:
    """One kernel launch (``count`` identical ones); ``reads``/``writes`` are whole-launch traffic."""

    name: str
    reads: tuple[T, ...] = ()
    writes: tuple[T, ...] = ()
    vector: Any = 0
    transcendental: Any = 0
    tensor: Mapping[str, Any] = field(default_factory=dict)
    count: Any = 1
    working_set: Any = None


def _by_class(pairs: Iterable[tuple[T, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t, n in pairs:
        out[t.cls] = out.get(t.cls, 0) + n * t.nbytes
    return out


def _minus(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for c in sorted(set(a) | set(b)):
        v = sp.expand(a.get(c, 0) - b.get(c, 0))
        if v != 0:
            out[c] = v
    return out


def chain(launches: Iterable[Launch], inputs: Iterable[T], outputs: Iterable[T]) -> Cost:
    """Cost of ``launches`` run in order, for an op that reads ``inputs`` and writes ``outputs``."""
    launches, inputs, outputs = tuple(launches), tuple(inputs), tuple(outputs)
    read_names = {t.name for k in launches for t in k.reads}
    write_names = {t.name for k in launches for t in k.writes}
    for t in inputs:
        if t.name not in read_names:
            raise ValueError(f"input {t.name!r} is read by no launch")
    for t in outputs:
        if t.name not in write_names:
            raise ValueError(f"output {t.name!r} is written by no launch")
    compulsory_read = _by_class((t, 1) for t in inputs)
    compulsory_write = _by_class((t, 1) for t in outputs)
    executed_read = _by_class((t, k.count) for k in launches for t in k.reads)
    executed_write = _by_class((t, k.count) for k in launches for t in k.writes)
    tensor: dict[str, Any] = {}
    for k in launches:
        for d, v in k.tensor.items():
            tensor[d] = tensor.get(d, 0) + k.count * v
    ws = [k.working_set for k in launches if k.working_set is not None]
    return Cost(
        tensor={d: sp.expand(v) for d, v in tensor.items() if v != 0},
        vector=sp.expand(sum((k.count * k.vector for k in launches), sp.Integer(0))),
        transcendental=sp.expand(sum((k.count * k.transcendental for k in launches), sp.Integer(0))),
        read=compulsory_read,
        write=compulsory_write,
        extra_read=_minus(executed_read, compulsory_read),
        extra_write=_minus(executed_write, compulsory_write),
        launches=sp.expand(sum((k.count for k in launches), sp.Integer(0))),
        working_set=(sp.Max(*ws) if len(ws) > 1 else ws[0]) if ws else 0,
    )


def with_io(cost: Cost, inputs: Iterable[T], outputs: Iterable[T]) -> Cost:
    """Re-split a sum of stage costs for the composite op that reads ``inputs`` and writes
    ``outputs``: executed bytes, FLOPs, launches and working set are kept; compulsory bytes become
    the composite's own, and the rest of what the stages move becomes extra."""
    read = _by_class((t, 1) for t in inputs)
    write = _by_class((t, 1) for t in outputs)
    executed_read = {c: cost.read.get(c, 0) + cost.extra_read.get(c, 0) for c in set(cost.read) | set(cost.extra_read)}
    executed_write = {c: cost.write.get(c, 0) + cost.extra_write.get(c, 0)
                      for c in set(cost.write) | set(cost.extra_write)}
    return Cost(tensor=dict(cost.tensor), vector=cost.vector, transcendental=cost.transcendental,
                read=read, write=write,
                extra_read=_minus(executed_read, read), extra_write=_minus(executed_write, write),
                launches=cost.launches, working_set=cost.working_set)
