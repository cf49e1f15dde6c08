"""Costs of kernel sequences described tensor by tensor, shared by every op family.

A rule lists the kernels an implementation launches. A ``Kernel`` reads and writes named ``Tensor``s
(whole-launch traffic), does vector, transcendental and tensor-core arithmetic (``tensor``: FLOPs by
tensor dtype), and may be launched ``count`` identical times (e.g. L per-step launches of a Python
loop, whose tensors are one step's slices: ``Tensor.per``). ``kernel_chain`` turns the list (one
kernel for a fused implementation, one per dispatched op for an eager PyTorch composition) into a
``Cost``:

- compulsory bytes: each of the op's inputs read once and each of its outputs written once, under
  the tensor's class (``conventions.TENSOR_CLASSES``);
- as-executed extra bytes: everything else the kernels move (re-reads of inputs, temporaries one
  kernel writes and the next reads back, class ``intermediates``; statistics and states saved for
  backward; per-step state traffic), computed as executed minus compulsory per class, so the split
  can never be inconsistent with the kernel list;
- FLOPs by engine (summed over kernels, times ``count``); launches: the sum of the counts;
  working set: the largest kernel's (kernels run one after another).

Bytes are counted at kernel granularity: every kernel reads its operands from and writes its results
to device memory. Reuse that L2 would provide between kernels (small per-step tensors of a loop, an
operand re-read by every channel of a fused kernel) is not device traffic where a family's docstring
says so; it is the calibrated efficiency's job.

``regroup`` re-splits an op built as a sum of other ops' costs (MLP, MoE): the composite's
compulsory bytes are its own inputs and outputs, and the activations its parts pass to each other
become ``intermediates``. ``with_io`` does the plain re-split (compulsory = the composite's own
inputs and outputs, everything else extra) for the SSD stage sum.

Working-set conventions (nominal; on-chip residency, never a capacity concern for these kernels
unless a row is long):
- a kernel that declares its working set (a tiled or row-resident kernel) holds that;
- otherwise, by default, it is a streaming kernel (elementwise, or a reduction that accumulates as
  it streams) holding one block of ``STREAM_BLOCK`` elements of each operand it touches;
- the state-space families (conv1d, s4, mamba1, ssd, mamba3) instead leave the working set of their
  eager PyTorch kernels and library calls unmodelled: ``kernel_chain(..., stream_working_sets=False)``
  counts 0 for a kernel that declares none;
- a row kernel (fused norm, row-resident softmax) holds whole rows in fp32 registers / shared
  memory, one row per operand it keeps: ``row_working_set``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import sympy as sp

from ...conventions import BYTES_PER_ELEMENT, STATE_DTYPE, TENSOR_CLASSES
from ...cost import PATH_KEYS, Cost

# Elements per operand that one thread block of a streaming kernel holds: Triton's usual
# BLOCK_SIZE = 1024; PyTorch's vectorized elementwise loop holds 128 threads x 4 elements x unroll 2.
STREAM_BLOCK = 1024
# Reductions and row kernels accumulate in fp32 whatever the storage dtype (conventions.py).
ACC_BYTES = BYTES_PER_ELEMENT[STATE_DTYPE]
BROADCAST, BROADCAST_16BIT, CAST_COPY = "dram.broadcast", "dram.broadcast_16bit", "dram.cast_copy"


@dataclass(frozen=True)
class Tensor:
    """A tensor: ``elements`` (sympy) of ``itemsize`` bytes, in one tensor class."""

    name: str
    cls: str  # a tensor class from conventions.TENSOR_CLASSES
    elements: Any  # sympy expression
    itemsize: int  # bytes per element
    whole: Any = None  # when this is a slice (``per``): the elements of the whole tensor

    def __post_init__(self):
        if self.cls not in TENSOR_CLASSES:
            raise ValueError(f"tensor {self.name}: unknown class {self.cls!r}; known: {TENSOR_CLASSES}")

    @property
    def nbytes(self) -> Any:
        return self.elements * self.itemsize

    def per(self, n: Any) -> "Tensor":
        """One of ``n`` equal slices of this tensor (one step of a per-step loop), same name."""
        return dataclasses.replace(self, elements=sp.cancel(self.elements / n), whole=self._identity()[2])

    def _identity(self) -> tuple:
        return (self.cls, self.itemsize, self.elements if self.whole is None else self.whole)


@dataclass(frozen=True)
class Kernel:
    """One kernel launch (``count`` identical ones); ``reads``/``writes`` are one launch's traffic."""

    name: str  # the kernel or aten op it models, e.g. "aten.mul"
    reads: tuple[Tensor, ...] = ()
    writes: tuple[Tensor, ...] = ()
    vector: Any = 0
    transcendental: Any = 0
    working_set: Any = None  # None: see the module docstring (streaming, or unmodelled)
    tensor: Mapping[str, Any] = field(default_factory=dict)  # {tensor dtype: FLOPs} per launch
    count: Any = 1
    # the software path it runs through where its attained rate is not the engine's or the memory's
    # (``cost.PATH_KEYS``): "dram.<p>" puts its bytes, "compute.<p>" its vector FLOPs in Cost.path.
    # Rules name the path of the ATen op; the element sizes pick the kernel PyTorch really runs:
    # - a "dram.broadcast" kernel whose results are all 16-bit runs on "dram.broadcast_16bit": ATen's
    #   non-vectorized elementwise kernel is bound by the elements it indexes, so its bandwidth depends on their
    #   size (hwspecs.schema.DRAM_PATHS);
    # - a "dram.cast_copy" kernel that narrows (fp32 to a 16-bit type) runs on no special path: PyTorch's copy
    #   has vectorized float -> bfloat16 / half kernels (aten/src/ATen/native/cuda/Copy.cu,
    #   bfloat16_copy_kernel_cuda, float16_copy_kernel_cuda), while a widening copy goes through the casting
    #   unrolled_elementwise_kernel<direct_copy>. Measured in the HF models' profiles on the H200
    #   (results/h200/2026-12-03/models, qwen2.5-0.5b prefill at 1 x 2048: 51 float -> bf16 copies of 11 MB at
    #   2.77 us each, ~4.0 TB/s with the launch in it; 51 bf16 -> float copies at 5.77 us, 1.9 TB/s).
    path: str | None = None

    def __post_init__(self):
        if self.path == BROADCAST and self.writes and all(t.itemsize == 2 for t in self.writes):
            object.__setattr__(self, "path", BROADCAST_16BIT)
        if (self.path == CAST_COPY and self.reads and self.writes
                and max(t.itemsize for t in self.writes) < min(t.itemsize for t in self.reads)):
            object.__setattr__(self, "path", None)
        if self.path is not None and self.path not in PATH_KEYS:
            raise ValueError(f"kernel {self.name}: unknown path {self.path!r}; known: {PATH_KEYS}")

    @property
    def path_work(self) -> Any:
        """One launch's work through ``path``: bytes read + written (dram), vector FLOPs (compute)."""
        if self.path is None:
            return 0
        if self.path.startswith("dram."):
            return sum((t.nbytes for t in (*self.reads, *self.writes)), 0)
        return self.vector


def stream_working_set(tensors: Iterable[Tensor]) -> int:
    return STREAM_BLOCK * sum(t.itemsize for t in tensors)


def row_working_set(row_length: Any, rows_held: int) -> Any:
    """fp32 rows a row kernel keeps on chip, one per operand it holds."""
    return rows_held * row_length * ACC_BYTES


def _by_class(pairs: Iterable[tuple[Tensor, Any]]) -> dict[str, Any]:
    """Bytes by tensor class of (tensor, times moved) pairs."""
    out: dict[str, Any] = {}
    for t, n in pairs:
        out[t.cls] = out.get(t.cls, 0) + n * t.nbytes
    return out


def _subtract(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = {c: sp.expand(a.get(c, 0) - b.get(c, 0)) for c in set(a) | set(b)}
    return {c: v for c, v in sorted(out.items()) if v != 0}


def _check_tensors(kernels: tuple[Kernel, ...], inputs: tuple[Tensor, ...], outputs: tuple[Tensor, ...]) -> None:
    seen: dict[str, tuple] = {}
    for t in (*inputs, *outputs, *(t for k in kernels for t in (*k.reads, *k.writes))):
        if seen.setdefault(t.name, t._identity()) != t._identity():
            raise ValueError(f"tensor {t.name!r} declared twice with different shapes or classes")
    read_names = {t.name for k in kernels for t in k.reads}
    write_names = {t.name for k in kernels for t in k.writes}
    for t in inputs:
        if t.name not in read_names:
            raise ValueError(f"input {t.name!r} is read by no kernel")
    for t in outputs:
        if t.name not in write_names:
            raise ValueError(f"output {t.name!r} is written by no kernel")


def kernel_chain(kernels: Iterable[Kernel], inputs: Iterable[Tensor], outputs: Iterable[Tensor], *,
                 stream_working_sets: bool = True) -> Cost:
    """Cost of running ``kernels`` in order for an op that reads ``inputs`` and writes ``outputs``.

    A kernel without a declared working set holds a streaming block of each operand, or nothing
    (not modelled) with ``stream_working_sets=False``.
    """
    kernels, inputs, outputs = tuple(kernels), tuple(inputs), tuple(outputs)
    _check_tensors(kernels, inputs, outputs)
    compulsory_read = _by_class((t, 1) for t in inputs)
    compulsory_write = _by_class((t, 1) for t in outputs)
    executed_read = _by_class((t, k.count) for k in kernels for t in k.reads)
    executed_write = _by_class((t, k.count) for k in kernels for t in k.writes)
    tensor: dict[str, Any] = {}
    for k in kernels:
        for d, v in k.tensor.items():
            tensor[d] = tensor.get(d, 0) + k.count * v
    ws = [k.working_set if k.working_set is not None else stream_working_set((*k.reads, *k.writes))
          for k in kernels if k.working_set is not None or stream_working_sets]
    path: dict[str, Any] = {}
    for k in kernels:
        if k.path is not None:
            path[k.path] = path.get(k.path, 0) + k.count * k.path_work
    return Cost(
        tensor={d: v for d, v in tensor.items() if v != 0},
        vector=sum((k.count * k.vector for k in kernels), 0),
        transcendental=sum((k.count * k.transcendental for k in kernels), 0),
        read=compulsory_read,
        write=compulsory_write,
        extra_read=_subtract(executed_read, compulsory_read),
        extra_write=_subtract(executed_write, compulsory_write),
        launches=sum((k.count for k in kernels), 0),
        working_set=(sp.Max(*ws) if len(ws) > 1 else ws[0]) if ws else 0,
        path=path,
    )


def _executed(compulsory: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    return {c: compulsory.get(c, 0) + extra.get(c, 0) for c in set(compulsory) | set(extra)}


def with_io(cost: Cost, inputs: Iterable[Tensor], outputs: Iterable[Tensor]) -> Cost:
    """Re-split a sum of stage costs for the composite op that reads ``inputs`` and writes
    ``outputs``: executed bytes, FLOPs, launches and working set are kept; compulsory bytes become
    the composite's own, and the rest of what the stages move becomes extra."""
    read = _by_class((t, 1) for t in inputs)
    write = _by_class((t, 1) for t in outputs)
    return dataclasses.replace(
        cost, tensor=dict(cost.tensor), read=read, write=write,
        extra_read=_subtract(_executed(cost.read, cost.extra_read), read),
        extra_write=_subtract(_executed(cost.write, cost.extra_write), write))


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
    return dataclasses.replace(
        total, tensor=dict(total.tensor), read=dict(read), write=dict(write),
        extra_read=_split(_executed(total.read, total.extra_read), read, rereads),
        extra_write=_split(_executed(total.write, total.extra_write), write, 0))


def scale_class(cost: Cost, cls: str, factor: Any) -> Cost:
    """``cost`` with the bytes of one tensor class (compulsory and extra) multiplied by ``factor``."""
    def scaled(m: Mapping[str, Any]) -> dict[str, Any]:
        return {c: (v * factor if c == cls else v) for c, v in m.items()}
    return dataclasses.replace(cost, tensor=dict(cost.tensor), read=scaled(cost.read), write=scaled(cost.write),
                               extra_read=scaled(cost.extra_read), extra_write=scaled(cost.extra_write))


def arithmetic(vector: Any = 0, transcendental: Any = 0) -> Cost:
    """FLOPs only: arithmetic fused into another kernel (no bytes, no launch)."""
    return Cost(vector=vector, transcendental=transcendental)
