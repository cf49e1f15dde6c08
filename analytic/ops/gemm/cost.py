"""Linear projections (GEMM): y = x W^T, x [B, L, I], W [O, I], y [B, L, O].

Counted (conventions.py): forward 2*B*L*I*O tensor-core FLOPs at the storage dtype's tensor rate.
Backward: dX = dY W (2*B*L*I*O) and dW = dY^T X (2*B*L*I*O): 2x forward. Bias and activation
epilogues are not counted here (elementwise ops count them).

Compulsory bytes, forward: read x and W, write y. Backward: read dY, x, W; write dX and dW
(weights class for W and dW); as executed, the two backward GEMMs each read dY (one extra read). Decode is the same op with L = 1 (a GEMV when B is small): it is
memory bound on reading W, which the byte count shows.

Implementations:
- ``cublas``: one tiled GEMM kernel per call (one for forward, two for backward). Tiles re-read
  operands from L2, not from device memory, for the shapes that matter, so as-executed device bytes
  equal the compulsory bytes. The working set is one 128x128 output tile with its two K-slabs
  (64 deep), double-buffered, at the storage dtype: 2 stages x (128x64 + 128x64) elements.
"""

from __future__ import annotations

from ...conventions import FLOPS_PER_FMA, MATMUL_BACKWARD_MULTIPLIER, TENSOR_DTYPE, nbytes
from ...cost import Cost
from ...registry import Impl, Op, register
from ...symbols import B, I, L, O

TILE_M, TILE_N, TILE_K, STAGES = 128, 128, 64, 2


def _working_set(dtype: str):
    return STAGES * (TILE_M * TILE_K + TILE_N * TILE_K) * nbytes(dtype)


def _cublas(mode: str, dtype: str) -> Cost:
    e = nbytes(dtype)
    fwd_flops = FLOPS_PER_FMA * B * L * I * O
    tdt = TENSOR_DTYPE[dtype]
    if mode in ("fwd", "decode"):
        tokens = B * L if mode == "fwd" else B
        return Cost(
            tensor={tdt: FLOPS_PER_FMA * tokens * I * O},
            read={"activations": tokens * I * e, "weights": I * O * e},
            write={"activations": tokens * O * e},
            launches=1,
            working_set=_working_set(dtype),
        )
    if mode == "bwd":
        return Cost(
            tensor={tdt: MATMUL_BACKWARD_MULTIPLIER * fwd_flops},
            read={"activations": B * L * (O + I) * e, "weights": I * O * e},
            write={"activations": B * L * I * e, "weights": I * O * e},
            # Two GEMMs (dX and dW) each read dY: the second read is beyond the compulsory bytes.
            extra_read={"activations": B * L * O * e},
            launches=2,
            working_set=_working_set(dtype),
        )
    raise ValueError(mode)


LINEAR = register(Op(
    name="linear",
    family="gemm",
    summary="y = x W^T (projection); decode is the L = 1 case",
    dims=("B", "L", "I", "O"),
    impls=(Impl("cublas", "cuBLAS tiled GEMM; operand re-reads served by L2", _cublas, ("fwd", "bwd", "decode")),),
    default_impl="cublas",
    reference="ssmbench.analytic.ops.gemm.ref:linear_ref",
    dtypes=("fp32", "tf32", "bf16", "fp16", "fp8"),
))

