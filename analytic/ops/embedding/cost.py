"""Token embedding and LM head.

``embedding``: y[b, l] = W[idx[b, l]], a gather of B*L rows of the table W [V, D] -> y [B, L, D].
  Forward: no arithmetic. Compulsory bytes: the int64 indices (8 bytes each, what F.embedding takes),
  the distinct table rows touched, at most min(V, B*L) rows of D elements (``weights``), and y.
  As executed, the gather kernel reads one table row per token: the B*L - min(V, B*L) repeated rows
  are extra ``weights`` reads (served from L2 when hot; counted as device reads, an upper bound).
  Backward: dW [V, D] = scatter-add of dy rows at idx. Compulsory: read dy and the indices, write
  the dense dW once (all V rows, zeros included: the gradient is a dense tensor). As executed
  (implementation ``gather_scatter``): one kernel zero-fills dW (that is the compulsory write), then
  one kernel adds each token's dy row into its dW row with atomics: a read-modify-write of B*L rows
  (extra ``weights`` read and write of B*L*D*e). Arithmetic: B*L*D adds (vector).
  Not counted: PyTorch's CUDA backward for more than 3072 indices first sorts the indices and
  reduces segments (radix sort, several kernels, O(B*L) index traffic); the dW traffic is the same
  order, the extra launches are not in this count. padding_idx, max_norm and scale_grad_by_freq are
  not modelled.

``lm_head``: logits = h W^T, h [B, L, D], W [V, D] -> [B, L, V]. Exactly the ``linear`` op with
  I = D, O = V (its rule, substituted): 2*B*L*D*V tensor-core FLOPs forward, 2x that backward,
  read h and W, write the logits; decode is L = 1 (reading W dominates). The softmax / cross-entropy
  over V is not part of this op.

Decode of ``embedding`` is the forward with L = 1.
"""

from __future__ import annotations

import sympy as sp

from ...conventions import nbytes
from ...cost import Cost
from ...registry import Impl, Op, register, symbolic_cost
from ...symbols import B, D, I, L, O, V
from ..common.kernels import Kernel, Tensor, kernel_chain

INDEX_BYTES = 8  # int64 token ids, as F.embedding takes them
TOKENS = B * L
ROWS_TOUCHED = sp.Min(V, TOKENS)  # distinct table rows a batch can touch


def _gather_scatter(mode: str, dtype: str) -> Cost:
    e = nbytes(dtype)
    idx = Tensor("idx", "activations", TOKENS, INDEX_BYTES)  # [B, L]
    if mode in ("fwd", "decode"):
        rows = Tensor("W_rows", "weights", ROWS_TOUCHED * D, e)  # distinct rows of W [V, D]
        reread = Tensor("W_rows_repeated", "weights", (TOKENS - ROWS_TOUCHED) * D, e)
        y = Tensor("y", "activations", TOKENS * D, e)  # [B, L, D]
        c = kernel_chain([Kernel("gather", (idx, rows, reread), (y,))], [idx, rows], [y])
        return c.subs({L: 1}) if mode == "decode" else c
    if mode == "bwd":
        dy = Tensor("dy", "activations", TOKENS * D, e)  # [B, L, D]
        dw = Tensor("dW", "weights", V * D, e)  # [V, D], dense
        dw_rows = Tensor("dW_rows_rmw", "weights", TOKENS * D, e)  # rows hit, read-modify-write
        kernels = [Kernel("zero_fill", (), (dw,)),
                   Kernel("scatter_add", (idx, dy, dw_rows), (dw_rows,), TOKENS * D)]
        return kernel_chain(kernels, [idx, dy], [dw])
    raise ValueError(mode)


def _lm_head(mode: str, dtype: str) -> Cost:
    return symbolic_cost("linear", "cublas", mode, dtype).subs({I: D, O: V})


EMBEDDING = register(Op(
    name="embedding",
    family="embedding",
    summary="y = W[idx]: gather of B*L rows of the [V, D] table; backward scatter-adds into dW",
    dims=("B", "L", "D", "V"),
    impls=(Impl("gather_scatter", "row gather; backward zero-fill + atomic scatter-add of dy rows",
                _gather_scatter, ("fwd", "bwd", "decode")),),
    default_impl="gather_scatter",
    reference="ssmbench.analytic.ops.embedding.ref:embedding_ref",
))

LM_HEAD = register(Op(
    name="lm_head",
    family="embedding",
    summary="logits = h W^T with W [V, D] (the linear rule with I = D, O = V); decode is L = 1",
    dims=("B", "L", "D", "V"),
    impls=(Impl("cublas", "cuBLAS GEMM, as linear", _lm_head, ("fwd", "bwd", "decode")),),
    default_impl="cublas",
    reference="ssmbench.analytic.ops.embedding.ref:lm_head_ref",
    dtypes=("fp32", "tf32", "bf16", "fp16", "fp8"),
))

