"""Feed-forward blocks over x [B, L, D] with hidden width F, written as sums of the ``linear`` rule
(cuBLAS GEMMs, substituted for each projection) and the elementwise rules of ``elementwise.py``.
No formula is repeated here: every count comes from those rules.

``mlp``: y = W_down act(W_up x), act = GELU (tanh form, ``conventions.GELU`` = 7 vector FLOPs + 1
  transcendental per element; backward ``GELU_BWD``). Forward tensor FLOPs 2*B*L*D*F twice = 4BLDF.
``gated_mlp`` (SwiGLU): y = W_down (silu(W_gate x) * (W_up x)). Forward tensor FLOPs 6BLDF;
  the gate is the ``silu_gate`` rule with x = up projection, z = gate projection.

Compulsory bytes are the op's own: read x and the weights (2DF or 3DF elements, class ``weights``),
write y; backward reads dy, x and the weights and writes dx and the weight gradients. What the
kernels pass to each other — the pre-activation u, the activation a, their gradients — is counted as
as-executed ``intermediates`` (``common.kernels.regroup``), and a second read of x by a separate GEMM as an
extra ``activations`` read: the parts' executed bytes are kept exactly.

Implementations:
- ``mlp``/``torch_eager``: Linear, GELU, Linear as in ``nn.Sequential`` — GEMM, one activation
  kernel, GEMM (3 launches). Backward (autograd): down GEMM backward (2), gelu_backward (1), up GEMM
  backward (2), using the saved u and a.
- ``mlp``/``fused``: GELU in the up GEMM's epilogue (cuBLASLt ``CUBLASLT_EPILOGUE_GELU``,
  ``torch._addmm_activation``): 2 launches, u never written. Forward and decode only: training with
  this epilogue also writes u as an auxiliary output (``GELU_AUX``) and fuses the activation gradient
  into the down GEMM's backward; that variant is not modelled.
- ``gated_mlp``/``torch_eager``: Hugging Face LlamaMLP, down(silu(gate(x)) * up(x)) — two GEMMs,
  ``silu_gate``/``torch_eager`` (2 kernels), GEMM: 5 launches. Backward: down GEMM backward,
  silu_gate eager backward (3), gate and up GEMM backward (2 each) and one add of their two dx
  contributions (autograd accumulation): 10 launches.
- ``gated_mlp``/``fused``: one merged gate+up GEMM D -> 2F (vLLM / Megatron), ``silu_gate``/``fused``,
  GEMM: 3 launches; x read once. Backward: down GEMM backward, fused gate backward, merged GEMM
  backward (one dx GEMM over 2F, no add): 5 launches.
- ``gated_mlp``/``merged_eager``: mamba-ssm's ``GatedMLP`` (modules/mlp.py): h = fc1(x), one merged
  GEMM D -> 2F, then ``silu_gate``/``chunked_eager`` over h's two halves (``u, g = h.chunk(2, -1)``;
  u * silu(g) as two eager kernels over strided views, at the strided-copy path's rate), fc2: 4
  launches. Backward (autograd): down GEMM backward, the chunked gate's four kernels (two products,
  silu_backward, the chunk's cat into one [B, L, 2F] gradient), merged GEMM backward: 8 launches.

The activation is part of the op's identity (one reference function per op):
- ``mlp_relu2``: y = W_down relu(W_up x)^2 (Nemotron-H), the ``mlp`` rules with ``conventions.RELU2``
  (2 vector FLOPs, no transcendental) and ``RELU2_BWD`` in place of GELU. ``torch_eager`` counts one
  activation kernel (Megatron's ``squared_relu``, compiled into one kernel); Hugging Face's
  ``ReLUSquaredActivation`` runs relu and square as two eager kernels (one more launch and one more
  [B, L, F] write and read; its autograd backward more still): not modelled, left to calibration.
  ``fused`` puts ReLU^2 in the up GEMM's epilogue (a CUTLASS / Triton GEMM with a custom epilogue;
  cuBLASLt has no ReLU^2 epilogue); forward and decode only, as for ``mlp``.
- ``gated_mlp_geglu`` (GeGLU, Zamba2's shared MLP): y = W_down (gelu(W_gate x) * W_up x), the
  ``gated_mlp`` rules with the gate y = x * gelu(z) in place of ``silu_gate``. Eager gate: ``aten.gelu``
  (``unary_cost`` with ``GELU``, its output t kept for backward) and a multiply; backward dx = dy * t,
  dt = dy * x, ``gelu_backward`` (``unary_bwd_cost`` with ``GELU_BWD``): 3 kernels. Fused gate (vLLM's
  ``gelu_and_mul``): one kernel, ``GELU`` + 1 multiply; its backward recomputes gelu(z) (``GELU``),
  multiplies twice and applies ``GELU_BWD``, all in one kernel. That is an upper bound on the fused
  backward's arithmetic: a compiler that shares the tanh between the recomputed gelu and its derivative
  saves 1 transcendental and the argument's arithmetic per element. Zamba2's config says ``gelu``
  (erf form in transformers); the tanh-form count ``GELU`` stands for both.

Host calls (``Cost.host``, what the achievable estimate charges per launch): each GEMM part is
issued through cuBLAS (the ``linear`` rule's class); every elementwise kernel is its own host call
of the class its software path pays (``issued``): an eager aten op (``torch_eager``: the activation,
the gate multiply, autograd's dx accumulation), the fused silu-and-mul kernel of ``silu_gate``/``fused``
(its ``execution.TRAITS`` class), vLLM's ``gelu_and_mul`` custom op (``cuda_extension``). So the
host calls of every implementation add up to its launches; ``gated_mlp``/``torch_eager`` forward is
3 cuBLAS + 2 eager calls, exactly the aten ops its reference dispatches (``mm`` x 3, ``silu``, ``mul``;
tests/test_ops_basic_torch.py).

Decode is the forward with L = 1 (the ``linear`` decode rule is the same as its L = 1 forward).
Not counted: biases, dropout, GEMM epilogue arithmetic other than the activation, Zamba2's LoRA
adapters on the shared MLP's projections.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any, Callable

from ... import execution
from ...conventions import GELU, GELU_BWD, RELU2, RELU2_BWD, nbytes
from ...cost import Cost
from ...registry import Impl, Op, register, symbolic_cost
from ...symbols import B, D, F, I, L, O
from ..common.kernels import Kernel, Tensor, arithmetic, kernel_chain, regroup
from ..elementwise.cost import chunked_silu_gate_cost, silu_gate_cost, unary_bwd_cost, unary_cost

TOKENS = B * L
# vLLM's gelu_and_mul / gelu_and_mul backward are CUDA custom ops (csrc/activation_kernels.cu)
GELU_AND_MUL_CLASS = "cuda_extension"
HIDDEN = B * L * F  # elements of u, a [B, L, F]


def gemm(mode: str, dtype: str, i, o) -> Cost:
    """The ``linear`` op's cuBLAS rule for one projection i -> o over B*L tokens."""
    return symbolic_cost("linear", "cublas", mode, dtype).subs({I: i, O: o})


def issued(cost: Cost, host_class: str) -> Cost:
    """``cost`` (kernels of one software path, no host calls stated) with each launch a host call of
    ``host_class``: a composite's elementwise parts pay their own class, not their GEMMs' cuBLAS."""
    if cost.host:
        raise ValueError(f"issued: the cost already states its host calls {dict(cost.host)}")
    return dataclasses.replace(cost, tensor=dict(cost.tensor), host={host_class: cost.launches})


def _eager(cost: Cost) -> Cost:
    return issued(cost, "torch_eager")


def _own_bytes(mode: str, dtype: str, weight_elements) -> tuple[dict, dict]:
    """The composite op's compulsory read / write bytes (see the module docstring)."""
    e = nbytes(dtype)
    act = TOKENS * D * e  # x, y, dy, dx: [B, L, D]
    w = weight_elements * e
    if mode == "fwd":
        return {"activations": act, "weights": w}, {"activations": act}
    return {"activations": 2 * act, "weights": w}, {"activations": act, "weights": w}


Counts = tuple[int, int]  # (vector FLOPs, transcendentals) per element, as in conventions.py


def _plain_mlp(fwd: Counts, bwd: Counts, impl: str, mode: str, dtype: str) -> Cost:
    """y = W_down act(W_up x) with the activation's forward / backward per-element counts."""
    if mode == "fwd":
        if impl == "torch_eager":
            parts = gemm("fwd", dtype, D, F) + _eager(unary_cost(HIDDEN, fwd, dtype)) + gemm("fwd", dtype, F, D)
        else:
            parts = gemm("fwd", dtype, D, F) + arithmetic(fwd[0] * HIDDEN, fwd[1] * HIDDEN) + gemm("fwd", dtype, F, D)
    elif mode == "bwd":
        parts = gemm("bwd", dtype, F, D) + _eager(unary_bwd_cost(HIDDEN, bwd, dtype)) + gemm("bwd", dtype, D, F)
    else:
        raise ValueError(mode)
    return regroup(parts, *_own_bytes(mode, dtype, 2 * D * F))


def _binary(name: str, n: Any, dtype: str, operands: tuple[str, str, str]) -> Cost:
    """One eager elementwise kernel out = a (op) b over n elements, 1 vector FLOP each."""
    a, b, out = (Tensor(t, "activations", n, nbytes(dtype)) for t in operands)
    return kernel_chain([Kernel(name, (a, b), (out,), n)], [a, b], [out])


def _dx_accumulate(dtype: str) -> Cost:
    """Autograd adds the gate and up branches' dx: one eager kernel over [B, L, D]."""
    return _eager(_binary("aten.add", TOKENS * D, dtype, ("dx_gate", "dx_up", "dx")))


def geglu_gate_cost(n: Any, dtype: str, mode: str, impl: str) -> Cost:
    """y = x * gelu(z) over n elements, forward or backward, ``fused`` or ``torch_eager`` (docstring)."""
    if impl == "torch_eager":
        if mode == "fwd":  # t = gelu(z) [n], kept for backward; y = x * t
            return _eager(unary_cost(n, GELU, dtype) + _binary("aten.mul", n, dtype, ("x", "t", "y")))
        if mode == "bwd":  # dx = dy * t; dt = dy * x; dz = gelu_backward(dt, z)
            return _eager(_binary("aten.mul", n, dtype, ("dy", "t", "dx")) + _binary("aten.mul", n, dtype, ("dy", "x", "dt"))
                          + unary_bwd_cost(n, GELU_BWD, dtype))
        raise ValueError(mode)
    x, z, y, dy, dx, dz = (Tensor(t, "activations", n, nbytes(dtype)) for t in ("x", "z", "y", "dy", "dx", "dz"))
    if mode == "fwd":
        k = Kernel("gelu_and_mul", (x, z), (y,), (GELU[0] + 1) * n, GELU[1] * n)
        return issued(kernel_chain([k], [x, z], [y]), GELU_AND_MUL_CLASS)
    if mode == "bwd":  # recompute gelu(z); dx = dy * gelu(z); dt = dy * x; dz = gelu'(z) * dt
        k = Kernel("gelu_and_mul_bwd", (dy, x, z), (dx, dz), (GELU[0] + 2 + GELU_BWD[0]) * n,
                   (GELU[1] + GELU_BWD[1]) * n)
        return issued(kernel_chain([k], [dy, x, z], [dx, dz]), GELU_AND_MUL_CLASS)
    raise ValueError(mode)


def swiglu_gate_cost(n: Any, dtype: str, mode: str, impl: str) -> Cost:
    """``silu_gate_cost`` with its launches issued as the ``silu_gate`` implementation's (eager ops, or
    the fused kernel's class in ``execution.TRAITS``)."""
    return issued(silu_gate_cost(n, dtype, mode, impl), execution.host_class("silu_gate", impl, mode=mode))


GateRule = Callable[[Any, str, str, str], Cost]  # (elements, dtype, mode, impl) -> Cost


def _chunked_gate(n: Any, dtype: str, mode: str) -> Cost:
    """``silu_gate``/``chunked_eager`` over n elements, its launches eager calls."""
    return _eager(chunked_silu_gate_cost(n, dtype, mode))


def _merged_eager_mlp(impl: str, mode: str, dtype: str) -> Cost:
    """mamba-ssm's GatedMLP: fc1 D -> 2F, the chunked gate, fc2 F -> D (module docstring)."""
    if mode == "fwd":
        parts = gemm("fwd", dtype, D, 2 * F) + _chunked_gate(HIDDEN, dtype, "fwd") + gemm("fwd", dtype, F, D)
    elif mode == "bwd":
        parts = gemm("bwd", dtype, F, D) + _chunked_gate(HIDDEN, dtype, "bwd") + gemm("bwd", dtype, D, 2 * F)
    else:
        raise ValueError(mode)
    return regroup(parts, *_own_bytes(mode, dtype, 3 * D * F))


def merged_eager_parts(dims: dict[str, int]) -> list[tuple[str, str, dict[str, int]]]:
    """The op calls of ``gated_mlp``/``merged_eager``'s kernels, in order: fc1 (D -> 2F), the chunked gate
    over F, fc2 (F -> D) (``analytic/sequential.py`` estimates them one after another)."""
    b, l_, d, f = (int(dims[k]) for k in ("B", "L", "D", "F"))
    return [("linear", "cublas", {"B": b, "L": l_, "I": d, "O": 2 * f}),
            ("silu_gate", "chunked_eager", {"B": b, "L": l_, "D": f}),
            ("linear", "cublas", {"B": b, "L": l_, "I": f, "O": d})]


def _gated_mlp(gate: GateRule, impl: str, mode: str, dtype: str) -> Cost:
    """y = W_down gate(x = W_up x, z = W_gate x) with the gate's rule (``silu_gate_cost`` for SwiGLU)."""
    if mode == "fwd":
        if impl == "torch_eager":
            proj = gemm("fwd", dtype, D, F) + gemm("fwd", dtype, D, F)
        else:
            proj = gemm("fwd", dtype, D, 2 * F)
        parts = proj + gate(HIDDEN, dtype, "fwd", impl) + gemm("fwd", dtype, F, D)
    elif mode == "bwd":
        if impl == "torch_eager":
            proj = gemm("bwd", dtype, D, F) + gemm("bwd", dtype, D, F) + _dx_accumulate(dtype)
        else:
            proj = gemm("bwd", dtype, D, 2 * F)
        parts = gemm("bwd", dtype, F, D) + gate(HIDDEN, dtype, "bwd", impl) + proj
    else:
        raise ValueError(mode)
    # The separate gate and up GEMMs (and their backward GEMMs) each read x.
    rereads = TOKENS * D * nbytes(dtype) if impl == "torch_eager" else 0
    return regroup(parts, *_own_bytes(mode, dtype, 3 * D * F), rereads)


def _rule(builder, impl: str):
    def rule(mode: str, dtype: str) -> Cost:
        if mode == "decode":
            return builder(impl, "fwd", dtype).subs({L: 1})
        return builder(impl, mode, dtype)
    return rule


_gelu_mlp = partial(_plain_mlp, GELU, GELU_BWD)
_relu2_mlp = partial(_plain_mlp, RELU2, RELU2_BWD)
_swiglu = partial(_gated_mlp, swiglu_gate_cost)
_geglu = partial(_gated_mlp, geglu_gate_cost)


def gated_mlp_cost(impl: str, mode: str, dtype: str) -> Cost:
    """The ``gated_mlp`` rule (``moe`` reuses it over its routed tokens)."""
    return _rule(_swiglu, impl)(mode, dtype)


DIMS = ("B", "L", "D", "F")

MLP = register(Op(
    name="mlp",
    family="mlp",
    summary="y = W_down gelu(W_up x), D -> F -> D; decode is the L = 1 case",
    dims=DIMS,
    impls=(
        Impl("torch_eager", "GEMM, GELU kernel, GEMM (nn.Sequential)", _rule(_gelu_mlp, "torch_eager"),
             ("fwd", "bwd", "decode")),
        Impl("fused", "GELU in the up GEMM's epilogue (cuBLASLt), then the down GEMM", _rule(_gelu_mlp, "fused"),
             ("fwd", "decode")),
    ),
    default_impl="torch_eager",
    reference="ssmbench.analytic.ops.mlp.ref:mlp_ref",
))

GATED_MLP = register(Op(
    name="gated_mlp",
    family="mlp",
    summary="SwiGLU: y = W_down (silu(W_gate x) * W_up x), D -> 2 x F -> D; decode is the L = 1 case",
    dims=DIMS,
    impls=(
        Impl("torch_eager", "gate GEMM, up GEMM, silu, mul, down GEMM (Hugging Face LlamaMLP)",
             _rule(_swiglu, "torch_eager"), ("fwd", "bwd", "decode")),
        Impl("fused", "merged gate+up GEMM, fused silu-and-mul, down GEMM (vLLM / Megatron)",
             _rule(_swiglu, "fused"), ("fwd", "bwd", "decode")),
        Impl("merged_eager", "merged gate+up GEMM, eager silu and mul over its strided halves, down GEMM "
             "(mamba-ssm GatedMLP)", _rule(_merged_eager_mlp, "merged_eager"), ("fwd", "bwd", "decode")),
    ),
    default_impl="fused",
    reference="ssmbench.analytic.ops.mlp.ref:gated_mlp_ref",
))

MLP_RELU2 = register(Op(
    name="mlp_relu2",
    family="mlp",
    summary="y = W_down relu(W_up x)^2 (Nemotron-H), D -> F -> D; decode is the L = 1 case",
    dims=DIMS,
    impls=(
        Impl("torch_eager", "GEMM, one ReLU^2 kernel, GEMM (Megatron's compiled squared_relu)",
             _rule(_relu2_mlp, "torch_eager"), ("fwd", "bwd", "decode")),
        Impl("fused", "ReLU^2 in the up GEMM's epilogue (CUTLASS / Triton), then the down GEMM",
             _rule(_relu2_mlp, "fused"), ("fwd", "decode")),
    ),
    default_impl="torch_eager",
    reference="ssmbench.analytic.ops.mlp.ref:mlp_relu2_ref",
))

GATED_MLP_GEGLU = register(Op(
    name="gated_mlp_geglu",
    family="mlp",
    summary="GeGLU: y = W_down (gelu(W_gate x) * W_up x), D -> 2 x F -> D (Zamba2); decode is the L = 1 case",
    dims=DIMS,
    impls=(
        Impl("torch_eager", "gate GEMM, up GEMM, gelu, mul, down GEMM", _rule(_geglu, "torch_eager"),
             ("fwd", "bwd", "decode")),
        Impl("fused", "merged gate+up GEMM, fused gelu-and-mul (vLLM), down GEMM", _rule(_geglu, "fused"),
             ("fwd", "bwd", "decode")),
    ),
    default_impl="fused",
    reference="ssmbench.analytic.ops.mlp.ref:gated_mlp_geglu_ref",
))

