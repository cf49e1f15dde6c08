"""Softmax over the last dim of x [B, H, L, S] (attention probabilities): y = exp(x - max) / sum.

Rows R = B*H*L of S elements. Counted per row (conventions.py: fp32 arithmetic; a comparison counts
as 1 vector FLOP; S - 1 comparisons or adds of a reduction are counted as S):

- safe softmax, row resident (``fused``, ``torch_eager``): max (S), x - max (S), exp (S transc.),
  sum (S), divide (S)  ->  4S vector, S transcendentals.
- ``three_pass`` (row streamed from device memory three times): pass 1 max (S); pass 2
  sum of exp(x - max) (2S, S transc.); pass 3 exp(x - max) / sum (2S, S transc.)
  ->  5S vector, 2S transcendentals: the exp is recomputed.
- ``online`` (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax", Alg. 3,
  counted as published, per element): pass 1 m' = max(m, x) (1), d = d * exp(m - m') + exp(x - m')
  (2 subtracts, 1 multiply, 1 add, 2 exp); pass 2 exp(x - m) / d (2, 1 exp)
  ->  7S vector, 3S transcendentals, one device-memory pass fewer than ``three_pass``.
- backward (all but ``torch_eager``): dx = y * (dy - sum(dy * y)): dot (2S), subtract (S),
  multiply (S)  ->  4S vector, no transcendental.

Compulsory bytes (storage dtype, e bytes): forward reads x and writes y, R*S*e each; backward reads
dy and y (the saved output) and writes dx.

Implementations:
- ``fused``: one kernel that holds the row on chip (PyTorch's persistent / shared-memory softmax,
  a Triton row softmax with BLOCK = S): x read once. Working set one fp32 row of S. Backward: one
  kernel, the y and dy rows on chip.
- ``three_pass``: one kernel per row-block that streams the row three times from device memory
  (the row does not fit on chip): 2 extra reads of x. Backward streams twice (dot, then output):
  an extra read of y and dy.
- ``online``: one kernel, two streaming passes: 1 extra read of x. Backward as ``three_pass``.
- ``torch_eager``: the reference's five aten ops (amax, sub, exp, sum, div), each materializing its
  output in the storage dtype: [B, H, L, 1] max and sum, [B, H, L, S] x - max and exp. Forward and
  decode only: autograd's backward of this composition (about a dozen kernels, including the
  gradient of amax) is not modelled; asking for it is an error.

Decode (one query token against S keys) is the forward with L = 1. Not counted: masking (attention
applies it before the softmax), scaling by 1/sqrt(P), address arithmetic.
"""

from __future__ import annotations

from ...conventions import nbytes
from ...cost import Cost
from ...registry import Impl, Op, register
from ...symbols import B, H, L, S
from ..common.kernels import Kernel, Tensor, kernel_chain, row_working_set, stream_working_set

R = B * H * L  # rows
N = B * H * L * S  # elements, [B, H, L, S]

FWD = {"fused": (4 * S, S), "torch_eager": (4 * S, S), "three_pass": (5 * S, 2 * S), "online": (7 * S, 3 * S)}
BWD = 4 * S
# Times each streaming implementation reads x in forward and (y, dy) in backward.
FWD_PASSES = {"fused": 1, "three_pass": 3, "online": 2}
BWD_PASSES = {"fused": 1, "three_pass": 2, "online": 2}


def _act(name: str, dtype: str, n=N) -> Tensor:
    return Tensor(name, "activations", n, nbytes(dtype))


def _single_kernel(impl: str, mode: str, dtype: str) -> Cost:
    x, y, dy, dx = (_act(n, dtype) for n in ("x", "y", "dy", "dx"))
    if mode == "fwd":
        v, t = FWD[impl]
        ws = row_working_set(S, 1) if impl == "fused" else stream_working_set((x, y))
        k = Kernel(f"softmax_{impl}_fwd", (x,) * FWD_PASSES[impl], (y,), R * v, R * t, working_set=ws)
        return kernel_chain([k], [x], [y])
    if mode == "bwd":
        passes = BWD_PASSES[impl]
        ws = row_working_set(S, 2) if impl == "fused" else stream_working_set((y, dy, dx))
        k = Kernel(f"softmax_{impl}_bwd", (dy, y) * passes, (dx,), R * BWD, 0, working_set=ws)
        return kernel_chain([k], [dy, y], [dx])
    raise ValueError(mode)


def _eager(dtype: str) -> Cost:
    x, y = _act("x", dtype), _act("y", dtype)
    m, s = Tensor("max", "intermediates", R, nbytes(dtype)), Tensor("sum", "intermediates", R, nbytes(dtype))
    xm, ex = Tensor("x_minus_max", "intermediates", N, nbytes(dtype)), Tensor("exp", "intermediates", N, nbytes(dtype))
    # ATen paths (Cost.path): two reductions along the last dim, two ops broadcasting a [.., 1] statistic
    kernels = [Kernel("aten.amax", (x,), (m,), N, path="dram.reduction"),
               Kernel("aten.sub", (x, m), (xm,), N, path="dram.broadcast"),
               Kernel("aten.exp", (xm,), (ex,), 0, N),
               Kernel("aten.sum", (ex,), (s,), N, path="dram.reduction"),
               Kernel("aten.div", (ex, s), (y,), N, path="dram.broadcast")]
    return kernel_chain(kernels, [x], [y])


def _rule(impl: str):
    def rule(mode: str, dtype: str) -> Cost:
        m = "fwd" if mode == "decode" else mode
        if impl == "torch_eager":
            if m != "fwd":
                raise ValueError(mode)
            c = _eager(dtype)
        else:
            c = _single_kernel(impl, m, dtype)
        return c.subs({L: 1}) if mode == "decode" else c
    return rule


SOFTMAX = register(Op(
    name="softmax",
    family="softmax",
    summary="y = softmax(x) over the last dim of [B, H, L, S]; decode is the L = 1 case",
    dims=("B", "H", "L", "S"),
    impls=(
        Impl("fused", "one kernel, row held on chip (x read once)", _rule("fused"), ("fwd", "bwd", "decode")),
        Impl("online", "one kernel, online max/sum then output: x streamed twice", _rule("online"),
             ("fwd", "bwd", "decode")),
        Impl("three_pass", "one kernel, max / sum / output passes: x streamed three times", _rule("three_pass"),
             ("fwd", "bwd", "decode")),
        Impl("torch_eager", "amax, sub, exp, sum, div as five PyTorch kernels", _rule("torch_eager"),
             ("fwd", "decode")),
    ),
    default_impl="fused",
    reference="ssmbench.analytic.ops.softmax.ref:softmax_ref",
))

