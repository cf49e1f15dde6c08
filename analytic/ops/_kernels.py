"""Costs of kernel sequences described tensor by tensor, shared by the basic op families.

A ``Kernel`` reads and writes named ``Tensor``s and does some vector and transcendental arithmetic.
``kernel_chain`` turns a list of kernels (one for a fused implementation, one per dispatched op for
an eager PyTorch composition) into a ``Cost``:

- compulsory bytes: each of the op's inputs read once and each of its outputs written once, under
  the tensor's class (``conventions.TENSOR_CLASSES``);
- as-executed extra bytes: everything else the kernels move — re-reads of inputs, temporaries one
  kernel writes and the next reads back (class ``intermediates``), statistics saved for backward;
- launches: one per kernel; working set: the largest kernel's (kernels run one after another).

``regroup`` does the same re-split for an op built as a sum of other ops' costs (MLP, MoE): the
composite's compulsory bytes are its own inputs and outputs, and the activations its parts pass
to each other become ``intermediates``.

Working-set conventions (nominal; on-chip residency, never a capacity concern for these kernels
unless a row is long):
- a streaming kernel (elementwise, or a reduction that accumulates as it streams) holds one block
  of ``STREAM_BLOCK`` elements of each operand it touches;
- a row kernel (fused norm, row-resident softmax) holds whole rows in fp32 registers / shared
  memory, one row per operand it keeps: ``row_working_set``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import sympy as sp

from ..conventions import BYTES_PER_ELEMENT, STATE_DTYPE, TENSOR_CLASSES
from ..cost import Cost

# Elements per operand that one thread block of a streaming kernel holds: Triton's usual
# BLOCK_SIZE = 1024; PyTorch's vectorized elementwise loop holds 128 threads x 4 elements x unroll 2.
STREAM_BLOCK = 1024
# Reductions and row kernels accumulate in fp32 whatever the storage dtype (conventions.py).
ACC_BYTES = BYTES_PER_ELEMENT[STATE_DTYPE]


@dataclass(frozen=True)
class Tensor:
    name: str
    cls: str  # a tensor class from conventions.TENSOR_CLASSES
    elements: Any  # sympy expression
    itemsize: int  # bytes per element

    def __post_init__(self):
        if self.cls not in TENSOR_CLASSES:
            raise ValueError(f"tensor {self.name}: unknown class {self.cls!r}; known: {TENSOR_CLASSES}")

    @property
    def nbytes(self) -> Any:
        return self.elements * self.itemsize


@dataclass(frozen=True)
class Kernel:
    name: str  # the kernel or aten op it models, e.g. "aten.mul"
    reads: tuple[Tensor, ...]
    writes: tuple[Tensor, ...]
    vector: Any = 0
    transcendental: Any = 0
    working_set: Any = None  # None: a streaming kernel (stream_working_set of its operands)


def stream_working_set(tensors: Iterable[Tensor]) -> int:
    return STREAM_BLOCK * sum(t.itemsize for t in tensors)


def row_working_set(row_length: Any, rows_held: int) -> Any:
    """fp32 rows a row kernel keeps on chip, one per operand it holds."""
    return rows_held * row_length * ACC_BYTES


def _by_class(tensors: Iterable[Tensor]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t in tensors:
        out[t.cls] = out.get(t.cls, 0) + t.nbytes
    return out


def _subtract(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = {c: sp.expand(a.get(c, 0) - b.get(c, 0)) for c in set(a) | set(b)}
    return {c: v for c, v in sorted(out.items()) if v != 0}


def kernel_chain(kernels: Iterable[Kernel], inputs: Iterable[Tensor], outputs: Iterable[Tensor]) -> Cost:
    """Cost of running ``kernels`` in order for an op that reads ``inputs`` and writes ``outputs``."""
    kernels, inputs, outputs = tuple(kernels), tuple(inputs), tuple(outputs)
    seen: dict[str, Tensor] = {}
    for t in (*inputs, *outputs, *(t for k in kernels for t in (*k.reads, *k.writes))):
        if seen.setdefault(t.name, t) != t:
            raise ValueError(f"tensor {t.name!r} declared twice with different shapes or classes")
    read_names = {t.name for k in kernels for t in k.reads}
    write_names = {t.name for k in kernels for t in k.writes}
    for t in inputs:
        if t.name not in read_names:
            raise ValueError(f"input {t.name!r} is read by no kernel")
    for t in outputs:
        if t.name not in write_names:
            raise ValueError(f"output {t.name!r} is written by no kernel")

    compulsory_read, compulsory_write = _by_class(inputs), _by_class(outputs)
    executed_read = _by_class(t for k in kernels for t in k.reads)
    executed_write = _by_class(t for k in kernels for t in k.writes)
    ws = [k.working_set if k.working_set is not None else stream_working_set((*k.reads, *k.writes))
          for k in kernels]
    return Cost(
        vector=sum((k.vector for k in kernels), 0),
        transcendental=sum((k.transcendental for k in kernels), 0),
        read=compulsory_read,
        write=compulsory_write,
        extra_read=_subtract(executed_read, compulsory_read),
        extra_write=_subtract(executed_write, compulsory_write),
        launches=len(kernels),
        working_set=sp.Max(*ws) if len(ws) > 1 else ws[0],
    )


def _executed(compulsory: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    return {c: compulsory.get(c, 0) + extra.get(c, 0) for c in set(compulsory) | set(extra)}


def _split(executed: Mapping[str, Any], compulsory: Mapping[str, Any], rereads: Any) -> dict[str, Any]:
    extra = _subtract(executed, compulsory)
    # Activations beyond the composite's own inputs and outputs (and its known re-reads of them) are
    # what its parts pass to each other.
    passed = sp.expand(extra.pop("activations", 0) - rereads)
    if rereads != 0:
        extra["activations"] = rereads
    if passed != 0:
        extra["intermediates"] = sp.expand(extra.get("intermediates", 0) + passed)
    return extra


def regroup(total: Cost, read: Mapping[str, Any], write: Mapping[str, Any], rereads: Any = 0) -> Cost:
    """Re-split the bytes of ``total`` (a sum of parts) for one composite op whose own compulsory
    traffic is ``read`` / ``write`` and whose parts read its input activations ``rereads`` more bytes
    than once; as-executed bytes, FLOPs, launches and working set are kept."""
    return Cost(
        tensor=dict(total.tensor),
        vector=total.vector,
        transcendental=total.transcendental,
        read=dict(read),
        write=dict(write),
        extra_read=_split(_executed(total.read, total.extra_read), read, rereads),
        extra_write=_split(_executed(total.write, total.extra_write), write, 0),
        launches=total.launches,
        working_set=total.working_set,
    )


def scale_class(cost: Cost, cls: str, factor: Any) -> Cost:
    """``cost`` with the bytes of one tensor class (compulsory and extra) multiplied by ``factor``."""
    def scaled(m: Mapping[str, Any]) -> dict[str, Any]:
        return {c: (v * factor if c == cls else v) for c, v in m.items()}
    return Cost(tensor=dict(cost.tensor), vector=cost.vector, transcendental=cost.transcendental,
                read=scaled(cost.read), write=scaled(cost.write),
                extra_read=scaled(cost.extra_read), extra_write=scaled(cost.extra_write),
                launches=cost.launches, working_set=cost.working_set)


def arithmetic(vector: Any = 0, transcendental: Any = 0) -> Cost:
    """FLOPs only: arithmetic fused into another kernel (no bytes, no launch)."""
    return Cost(vector=vector, transcendental=transcendental)
