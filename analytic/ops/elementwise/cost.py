"""Elementwise activations over x [B, L, D]: ``silu``, ``softplus`` and the gate ``silu_gate``
(y = x * silu(z), Mamba's output gate and the core of SwiGLU).

Counted per element (conventions.py, all at fp32 whatever the storage dtype):
- silu(x) = x / (1 + exp(-x)): ``SILU`` = 3 vector FLOPs (add, divide, multiply) + 1 exp.
  Backward dx = dy * s * (1 + x (1 - s)), s = sigmoid(x) recomputed: ``SILU_BWD`` = 7 + 1 exp.
- softplus(x) = log(1 + exp(x)): ``SOFTPLUS`` = 1 add + 2 transcendentals (exp, log). PyTorch's
  threshold test (x > 20 returns x) is a compare-and-select, not counted. Backward
  dx = dy * sigmoid(x): ``SOFTPLUS_BWD`` = 3 + 1 exp. PyTorch's forward kernel computes
  log1p(exp(x beta)) / beta in fp32 through the CUDA math library's accurate ``expf`` and ``log1pf`` (software
  routines of range reduction and polynomial, tens of instructions each, not one special-function
  instruction) and an IEEE divide: it is bound by instruction issue, its FLOPs timed at
  ``compute.path.softplus`` (``SOFTPLUS_PATH``). On the H200 (2026-12-02/03) its bf16 forward took 1.59 -
  1.95x the time its bytes take at the DRAM bandwidth, the same ~533 G elements/s at every shape from 8.4 M
  elements on (the spec's ``measured:`` entry); the backward (expf and a divide, no log1pf) runs at its bytes.
- silu_gate: silu(z) (``SILU``) + 1 multiply by x. Backward: dx = dy * silu(z) (recompute silu,
  1 multiply) and dz = (dy * x) * silu'(z): 1 multiply + ``SILU_BWD`` without its sigmoid recompute
  (``SILU_BWD - SIGMOID`` = 5 vector FLOPs, the sigmoid being shared with the silu recompute).

Bytes (storage dtype e bytes per element, n = B*L*D elements): compulsory forward reads the inputs
and writes y once; backward reads dy and the forward inputs and writes their gradients.

Implementations:
- ``torch_eager`` for silu / softplus: the one native PyTorch kernel (``F.silu``, ``F.softplus``
  and their ``*_backward`` ops), which moves exactly the compulsory bytes. A Triton kernel moves the
  same bytes, so there is no second implementation to tell apart.
- ``fused`` for silu_gate: one kernel reading x and z and writing y (backward: one kernel reading
  dy, x, z and writing dx, dz; silu recomputed, nothing saved).
- ``torch_eager`` for silu_gate: ``x * F.silu(z)`` is two kernels; the silu output t [B, L, D] is
  written, read back by the multiply, and kept for backward. Backward (autograd): dx = dy * t,
  dt = dy * x, dz = silu_backward(dt, z): three kernels, t and dt as intermediates.
- ``chunked_eager`` for silu_gate: mamba-ssm's ``GatedMLP`` gate, ``x, z = h.chunk(2, dim=-1)`` of one
  [B, L, 2D] tensor h, then ``x * F.silu(z)``: the ``torch_eager`` kernels, with x and z strided views
  of h (row stride 2D). ATen vectorizes an elementwise loop only when every operand is contiguous, so
  each kernel that reads a half runs the non-vectorized ``elementwise_kernel<128, 4>`` (per-element
  offset arithmetic, 2-byte accesses), the template of a strided copy: its bytes move at
  ``memory.dram.path.strided_copy`` (``STRIDED``). Backward: dx = dy * t reads contiguous tensors
  (vectorized), dt = dy * x and silu_backward(dt, z) read a half; the chunk's backward writes
  [dx | dz] into one [B, L, 2D] gradient (a cat, vectorized): four kernels. Evidence (H200,
  results/h200/2026-12-03/models-b, transformerpp-125m prefill at B = 4, L = 32768: 2.7e8 elements per
  kernel): silu 766 us and mul 745 us per call, both non-vectorized, against 640 and 950 us at the
  strided-copy rate (1.69 TB/s): the path is paced per element more than per byte (silu -16 %, mul
  +28 %), the pair within 6 %.

Decode is the forward with L = 1. Not counted: address arithmetic, the threshold select in softplus,
any dtype conversion inside the kernels (registers only).

``unary_cost`` / ``unary_bwd_cost`` / ``silu_gate_cost`` take the element count, so that composite
ops (MLP, MoE) reuse these rules over their own tensors.
"""

from __future__ import annotations

from typing import Any

from ...conventions import SIGMOID, SILU, SILU_BWD, SOFTPLUS, SOFTPLUS_BWD, nbytes
from ...cost import Cost
from ...registry import Impl, Op, register
from ...symbols import B, D, L
from ..common.kernels import Kernel, Tensor, kernel_chain

ELEMENTS = B * L * D  # [B, L, D]
# dz of the gate given the already recomputed sigmoid: SILU_BWD without its sigmoid recompute.
SILU_GRAD_GIVEN_SIGMOID = SILU_BWD[0] - SIGMOID[0]


def _act(name: str, n: Any, dtype: str) -> Tensor:
    return Tensor(name, "activations", n, nbytes(dtype))


def _tmp(name: str, n: Any, dtype: str) -> Tensor:
    return Tensor(name, "intermediates", n, nbytes(dtype))


def unary_cost(n: Any, counts: tuple[int, int], dtype: str, path: str | None = None) -> Cost:
    """Forward y = f(x) over n elements, one kernel; ``counts`` = (vector, transcendental) per element;
    ``path``: the kernel's software path (``Kernel.path``), where its FLOPs run at an attained rate of their own."""
    x, y = _act("x", n, dtype), _act("y", n, dtype)
    k = Kernel("unary", (x,), (y,), counts[0] * n, counts[1] * n, path=path)
    return kernel_chain([k], [x], [y])


def unary_bwd_cost(n: Any, counts: tuple[int, int], dtype: str) -> Cost:
    """Backward dx = f'(x) * dy over n elements, one kernel (reads dy and x, writes dx)."""
    dy, x, dx = _act("dy", n, dtype), _act("x", n, dtype), _act("dx", n, dtype)
    k = Kernel("unary_backward", (dy, x), (dx,), counts[0] * n, counts[1] * n)
    return kernel_chain([k], [dy, x], [dx])


def silu_gate_cost(n: Any, dtype: str, mode: str, impl: str) -> Cost:
    """y = x * silu(z) over n elements, forward or backward, ``fused``, ``torch_eager`` or ``chunked_eager``."""
    if impl == "chunked_eager":
        return chunked_silu_gate_cost(n, dtype, mode)
    x, z, y = _act("x", n, dtype), _act("z", n, dtype), _act("y", n, dtype)
    dy, dx, dz = _act("dy", n, dtype), _act("dx", n, dtype), _act("dz", n, dtype)
    silu_v, silu_t = SILU[0] * n, SILU[1] * n
    if mode == "fwd":
        if impl == "fused":
            kernels = [Kernel("silu_gate_fwd", (x, z), (y,), silu_v + n, silu_t)]
        else:
            t = _tmp("t", n, dtype)  # t = silu(z), kept for backward
            kernels = [Kernel("aten.silu", (z,), (t,), silu_v, silu_t),
                       Kernel("aten.mul", (x, t), (y,), n)]
        return kernel_chain(kernels, [x, z], [y])
    if mode == "bwd":
        if impl == "fused":
            # recompute silu(z) (SILU) ; dx = dy * silu (1) ; dz = (dy * x) (1) * silu'(z) given sigmoid
            kernels = [Kernel("silu_gate_bwd", (dy, x, z), (dx, dz),
                              silu_v + n + n + SILU_GRAD_GIVEN_SIGMOID * n, silu_t)]
        else:
            t, dt = _tmp("t", n, dtype), _tmp("dt", n, dtype)
            kernels = [Kernel("aten.mul", (dy, t), (dx,), n),
                       Kernel("aten.mul", (dy, x), (dt,), n),
                       Kernel("aten.silu_backward", (dt, z), (dz,), SILU_BWD[0] * n, SILU_BWD[1] * n)]
        return kernel_chain(kernels, [dy, x, z], [dx, dz])
    raise ValueError(mode)


# the kernel path of an elementwise kernel reading a strided half (``chunked_eager``)
STRIDED = "dram.strided_copy"


def chunked_silu_gate_cost(n: Any, dtype: str, mode: str) -> Cost:
    """y = x * silu(z) over the strided halves [x | z] of one [.., 2n] tensor, eager kernels, forward or
    backward (``chunked_eager`` in the module docstring)."""
    x, z, y, t = _act("x", n, dtype), _act("z", n, dtype), _act("y", n, dtype), _tmp("t", n, dtype)
    silu_v, silu_t = SILU[0] * n, SILU[1] * n
    if mode == "fwd":  # t = silu(z), kept for backward; y = x * t
        kernels = [Kernel("aten.silu", (z,), (t,), silu_v, silu_t, path=STRIDED),
                   Kernel("aten.mul", (x, t), (y,), n, path=STRIDED)]
        return kernel_chain(kernels, [x, z], [y])
    if mode == "bwd":
        dy, dx, dz, dt = _act("dy", n, dtype), _act("dx", n, dtype), _act("dz", n, dtype), _tmp("dt", n, dtype)
        dh = _act("dh", 2 * n, dtype)
        kernels = [Kernel("aten.mul", (dy, t), (dx,), n),
                   Kernel("aten.mul", (dy, x), (dt,), n, path=STRIDED),
                   Kernel("aten.silu_backward", (dt, z), (dz,), SILU_BWD[0] * n, SILU_BWD[1] * n, path=STRIDED),
                   Kernel("aten.cat", (dx, dz), (dh,))]  # the chunk's backward
        return kernel_chain(kernels, [dy, t, x, z], [dh])
    raise ValueError(mode)


# the kernel path of PyTorch's softplus forward kernel (module docstring)
SOFTPLUS_PATH = "compute.softplus"


def _unary_rule(fwd: tuple[int, int], bwd: tuple[int, int], fwd_path: str | None = None):
    def rule(mode: str, dtype: str) -> Cost:
        if mode in ("fwd", "decode"):
            c = unary_cost(ELEMENTS, fwd, dtype, fwd_path)
            return c.subs({L: 1}) if mode == "decode" else c
        if mode == "bwd":
            return unary_bwd_cost(ELEMENTS, bwd, dtype)
        raise ValueError(mode)
    return rule


def _gate_rule(impl: str):
    def rule(mode: str, dtype: str) -> Cost:
        if mode == "decode":
            return silu_gate_cost(ELEMENTS, dtype, "fwd", impl).subs({L: 1})
        return silu_gate_cost(ELEMENTS, dtype, mode, impl)
    return rule


MODES = ("fwd", "bwd", "decode")
DIMS = ("B", "L", "D")

SILU_OP = register(Op(
    name="silu",
    family="elementwise",
    summary="y = silu(x) = x * sigmoid(x); decode is the L = 1 case",
    dims=DIMS,
    impls=(Impl("torch_eager", "one native PyTorch kernel (F.silu; backward silu_backward)",
                _unary_rule(SILU, SILU_BWD), MODES),),
    default_impl="torch_eager",
    reference="ssmbench.analytic.ops.elementwise.ref:silu_ref",
))

SOFTPLUS_OP = register(Op(
    name="softplus",
    family="elementwise",
    summary="y = softplus(x) = log(1 + exp(x)); decode is the L = 1 case",
    dims=DIMS,
    impls=(Impl("torch_eager", "one native PyTorch kernel (F.softplus; backward softplus_backward)",
                _unary_rule(SOFTPLUS, SOFTPLUS_BWD, SOFTPLUS_PATH), MODES),),
    default_impl="torch_eager",
    reference="ssmbench.analytic.ops.elementwise.ref:softplus_ref",
))

SILU_GATE_OP = register(Op(
    name="silu_gate",
    family="elementwise",
    summary="y = x * silu(z) (output gate, SwiGLU core); decode is the L = 1 case",
    dims=DIMS,
    impls=(
        Impl("fused", "one kernel reading x, z and writing y; backward recomputes silu", _gate_rule("fused"), MODES),
        Impl("torch_eager", "x * F.silu(z): two kernels, silu(z) materialized and kept for backward",
             _gate_rule("torch_eager"), MODES),
        Impl("chunked_eager", "x, z = h.chunk(2, -1); x * F.silu(z): the eager kernels over strided halves "
             "(mamba-ssm GatedMLP)", _gate_rule("chunked_eager"), MODES),
    ),
    default_impl="fused",
    reference="ssmbench.analytic.ops.elementwise.ref:silu_gate_ref",
))

