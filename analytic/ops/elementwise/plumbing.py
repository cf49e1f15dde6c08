"""The small ops a block runs around its big kernels: layout copies, dtype casts, the residual add and
the decay ``A = -exp(A_log)`` that the Mamba modules recompute on every call.

Each is one or a few aten kernels; what they cost is exactly what their eager reference dispatches
(``ref.py``; tests trace the aten kernels and their bytes). n = B*L*D elements; e bytes of the dtype.

- ``copy`` (B, L, D), ``torch_eager``: ``x.contiguous()``, ``rearrange(...).contiguous()``, a slice
  assignment ``y[:, a:b] = x`` or a ``torch.cat`` of pieces: one copy kernel reading n and writing n
  elements at the dtype, no FLOPs. Forward and decode only: the copies that plans count run inside
  custom autograd functions (mamba-ssm's fast paths) or are themselves backward work (the ``cat`` of
  a split's gradients), so they never have an autograd backward of their own.
- ``cast`` (B, L, D): ``to_fp32``: ``x.to(torch.float32)`` of an activation, one kernel reading n at
  e and writing n at 4 bytes; backward (autograd's ``ToCopyBackward``) casts the fp32 gradient back,
  reading 4n and writing e*n. At fp32 both are no-ops (``.to`` returns its input): nothing runs. The widening
  copy is ATen's casting copy (``Cost.path`` ``dram.cast_copy``); the narrowing one is PyTorch's vectorized
  float -> bfloat16 / half copy, at the copy bandwidth (``common/kernels.Kernel``).
  ``param_to_fp32``: ``bias.float()`` of a parameter at the dtype (Mamba-1's ``dt_proj.bias``), the
  same kernel with the input in class ``weights``.
- ``add`` (B, L, D): the residual add ``x + block(x)``: 1 vector FLOP per element. ``torch_eager``:
  one kernel reading 2n and writing n; backward: the gradient reaching x from both paths is
  accumulated by one add (reads 2n, writes n). ``fused_norm``: mamba-ssm's ``fused_add_norm``, the
  add done by the next norm's kernel: no launch of its own; it reads the residual (n) and writes the
  updated residual stream (n) on top of what the norm moves (the norm reads the block output
  either way); backward the same bytes and FLOPs inside the norm's backward kernel. The residual
  stream is fp32 (4 bytes per element) whatever the dtype: mamba-ssm's models run with
  ``residual_in_fp32=True`` (the default of its ``MambaConfig``, and what measure/models/configs.py
  builds), and its Triton ``layer_norm_fn`` then reads and writes the residual at fp32. The whole-model
  profiles show it: transformerpp-125m prefill at 4 x 32768 moves its 25 ``_layer_norm_fwd_1pass_kernel``
  calls in 10.74 ms, 0.43 ms each for 1e8 elements, more than the 2 + 2 bytes per element of the norm
  alone allow at the copy bandwidth (results/h200/2026-12-03/models-b).
- ``a_from_log`` (E, N): ``A = -torch.exp(A_log.float())`` over an [E, N] parameter (Mamba-1: E
  channels x N; Mamba-2: E = H heads, N = 1), recomputed on every forward and every decode step.
  ``fp32_param`` (Mamba-1 keeps A_log in fp32): exp (1 transcendental) and neg (1 vector FLOP), two
  kernels over fp32. ``cast_param`` (Mamba-2 stores A_log at the model dtype): a cast kernel first
  (three kernels; at fp32 the cast is a no-op). Backward (autograd): neg's backward (a neg) and exp's
  (grad times the saved result: 1 FLOP), then the cast back for ``cast_param`` at a narrower dtype.
"""

from __future__ import annotations

from typing import Any

from ...conventions import EXP, nbytes
from ...cost import Cost
from ...registry import Impl, Op, register
from ...symbols import B, D, E, L, N
from ..common.kernels import CAST_COPY, Kernel, Tensor, kernel_chain

F32 = 4
ELEMENTS = B * L * D  # [B, L, D]


def _t(name: str, cls: str, n: Any, itemsize: int) -> Tensor:
    return Tensor(name, cls, n, itemsize)


def copy_cost(n: Any, dtype: str) -> Cost:
    """One copy kernel over n elements at the dtype (activations in and out)."""
    x, y = _t("x", "activations", n, nbytes(dtype)), _t("y", "activations", n, nbytes(dtype))
    return kernel_chain([Kernel("aten.copy_", (x,), (y,))], [x], [y])


def _at_l1(rule):
    def wrapped(mode: str, dtype: str) -> Cost:
        if mode == "decode":
            return rule("fwd", dtype).subs({L: 1})
        return rule(mode, dtype)
    return wrapped


def _copy_rule(mode: str, dtype: str) -> Cost:
    return copy_cost(ELEMENTS, dtype)


def _cast_rule(cls: str):
    def rule(mode: str, dtype: str) -> Cost:
        if dtype == "fp32":
            return Cost()  # .to(torch.float32) of an fp32 tensor returns it: no kernel
        e = nbytes(dtype)
        if mode == "fwd":
            x, y = _t("x", cls, ELEMENTS, e), _t("x_fp32", "activations" if cls == "activations" else "intermediates",
                                                 ELEMENTS, F32)
            return kernel_chain([Kernel("aten._to_copy", (x,), (y,), path=CAST_COPY)], [x], [y])
        if mode == "bwd":
            dy, dx = _t("dy_fp32", "activations", ELEMENTS, F32), _t("dx", "activations", ELEMENTS, e)
            return kernel_chain([Kernel("aten._to_copy", (dy,), (dx,), path=CAST_COPY)], [dy], [dx])
        raise ValueError(mode)
    return rule


def _add_rule(impl: str):
    def rule(mode: str, dtype: str) -> Cost:
        e = nbytes(dtype)
        if impl == "torch_eager":
            a, b, y = (_t(n, "activations", ELEMENTS, e) for n in ("x", "block_out", "y"))
            return kernel_chain([Kernel("aten.add", (a, b), (y,), ELEMENTS)], [a, b], [y])
        # fused into the next norm: the residual stream in and out, kept at fp32 (RESIDUAL_FP32); no launch
        r, y = _t("residual", "activations", ELEMENTS, F32), _t("residual_new", "activations", ELEMENTS, F32)
        return Cost(vector=ELEMENTS, read={"activations": r.nbytes}, write={"activations": y.nbytes})
    return rule


def _a_from_log_rule(cast: bool):
    def rule(mode: str, dtype: str) -> Cost:
        n = E * N
        casting = cast and dtype != "fp32"
        a_log = _t("A_log", "weights", n, nbytes(dtype) if cast else F32)
        a = _t("A", "intermediates", n, F32)
        if mode in ("fwd", "decode"):
            kernels, src = [], a_log
            if casting:
                src = _t("A_log_fp32", "intermediates", n, F32)
                kernels.append(Kernel("aten._to_copy", (a_log,), (src,), path=CAST_COPY))
            ex = _t("exp_A_log", "intermediates", n, F32)
            kernels += [Kernel("aten.exp", (src,), (ex,), EXP[0] * n, EXP[1] * n), Kernel("aten.neg", (ex,), (a,), n)]
            return kernel_chain(kernels, [a_log], [a], stream_working_sets=False)
        if mode == "bwd":
            da = _t("dA", "intermediates", n, F32)
            dex, ex = _t("d_exp", "intermediates", n, F32), _t("exp_A_log", "intermediates", n, F32)
            dlog = _t("dA_log_fp32" if casting else "dA_log", "intermediates" if casting else "weights", n, F32)
            kernels = [Kernel("aten.neg", (da,), (dex,), n), Kernel("aten.mul", (dex, ex), (dlog,), n)]
            out = dlog
            if casting:
                out = _t("dA_log", "weights", n, nbytes(dtype))
                kernels.append(Kernel("aten._to_copy", (dlog,), (out,), path=CAST_COPY))
            return kernel_chain(kernels, [da, ex], [out], stream_working_sets=False)
        raise ValueError(mode)
    return rule


DIMS = ("B", "L", "D")

COPY_OP = register(Op(
    name="copy",
    family="elementwise",
    summary="a layout copy (contiguous / rearrange / slice assignment / cat): one kernel, n read, n written",
    dims=DIMS,
    impls=(Impl("torch_eager", "one aten copy kernel at the dtype", _at_l1(_copy_rule), ("fwd", "decode")),),
    default_impl="torch_eager",
    reference="ssmbench.analytic.ops.elementwise.ref:copy_ref",
))

CAST_OP = register(Op(
    name="cast",
    family="elementwise",
    summary="x.to(torch.float32): one kernel (none at fp32); backward casts the gradient back",
    dims=DIMS,
    impls=(
        Impl("to_fp32", "an activation cast to fp32", _at_l1(_cast_rule("activations")), ("fwd", "bwd", "decode")),
        Impl("param_to_fp32", "a parameter cast to fp32 (bias.float())", _at_l1(_cast_rule("weights")),
             ("fwd", "bwd", "decode")),
    ),
    default_impl="to_fp32",
    reference="ssmbench.analytic.ops.elementwise.ref:cast_ref",
))

ADD_OP = register(Op(
    name="add",
    family="elementwise",
    summary="residual add x + block(x): one kernel (or fused into the next norm); backward one add",
    dims=DIMS,
    impls=(
        Impl("torch_eager", "one add kernel; backward: the gradient accumulation add", _at_l1(_add_rule("torch_eager")),
             ("fwd", "bwd", "decode")),
        Impl("fused_norm", "done by the next norm's kernel (mamba-ssm fused_add_norm): bytes, no launch",
             _at_l1(_add_rule("fused_norm")), ("fwd", "bwd", "decode")),
    ),
    default_impl="torch_eager",
    reference="ssmbench.analytic.ops.elementwise.ref:add_ref",
))

A_FROM_LOG_OP = register(Op(
    name="a_from_log",
    family="elementwise",
    summary="A = -exp(A_log.float()) over an [E, N] parameter, recomputed every call",
    dims=("E", "N"),
    impls=(
        Impl("fp32_param", "A_log kept in fp32 (Mamba-1): exp, neg", _a_from_log_rule(False), ("fwd", "bwd", "decode")),
        Impl("cast_param", "A_log at the model dtype (Mamba-2): cast, exp, neg", _a_from_log_rule(True),
             ("fwd", "bwd", "decode")),
    ),
    default_impl="fp32_param",
    reference="ssmbench.analytic.ops.elementwise.ref:a_from_log_ref",
))
