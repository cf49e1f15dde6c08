"""Mixture-of-experts FFN over x [B, L, D]: X experts, each a SwiGLU ``gated_mlp`` of width F; a
router sends every token to its top Xk experts and sums their outputs weighted by the renormalized
router probabilities (Mixtral / Jamba style).

Counted (conventions.py), T = B*L tokens:
- router: the ``linear`` rule D -> X over T tokens: 2*T*D*X tensor FLOPs; logits [B, L, X] written.
- softmax + top-k + renormalization, per token: softmax over X (max, subtract, sum, divide: 4X
  vector, X exp), top-k as Xk max-passes over X (Xk*X comparisons), renormalizing the Xk weights
  (Xk adds, Xk divides)  ->  4X + Xk*X + 2Xk vector, X transcendentals.
- experts: the ``gated_mlp``/``fused`` rule over the T*Xk routed token copies (its L replaced by
  L*Xk): 6*T*Xk*D*F tensor FLOPs, i.e. T*Xk times a gated MLP per token. Weights: only the experts
  actually hit are read: the expected number of distinct experts under uniform routing, each token
  choosing Xk of the X experts: an expert is missed by one token with probability 1 - Xk/X, by all T
  with (1 - Xk/X)^T, so X (1 - (1 - Xk/X)^T) experts are hit (Xk for one token, -> X as T grows;
  min(X, T*Xk) overcounts whenever tokens share experts) times 3*D*F elements each. Real routers are
  not uniform (load imbalance is not counted, below): this is an expectation, not a bound.
- combine: y[t] = sum_k w[t, k] * out[t, k]: Xk*D FMAs per token (2*Xk*D vector).
Backward: combine backward (d out = w * dy: Xk*D; d w = <dy, out>: 2*Xk*D), experts'
``gated_mlp`` backward over the routed copies, scatter-add of the Xk dx rows of each token (Xk*D),
softmax/top-k backward per token — recompute the softmax (4X vector, X exp; only the top-k weights
were saved), renormalization backward dp = (dw - <dw, w>) / s (4Xk), softmax backward with the
sparse dp, dz = p * (dp - <dp, p>) (2Xk + 2X): 6X + 6Xk vector, X exp — router GEMM backward, and
the add of the router's and the experts' dx (D). Tensor FLOPs exactly 2x forward; the forward's
top-k selection (Xk*X comparisons) has no backward counterpart.

Compulsory bytes are the op's own: read x, the router weights (D*X) and the hit experts' weights,
write y (backward: read dy, x and those weights; write dx and their gradients). The copies of x
the expert GEMMs gather (Xk per token) are extra ``activations`` reads; everything the kernels pass
to each other (logits, top-k ids and weights, hidden activations, expert outputs) is extra
``intermediates`` (``common.kernels.regroup``).

Implementation ``grouped_gemm`` (vLLM ``fused_moe`` / MegaBlocks style): router GEMM; one fused
softmax-top-k kernel (writes fp32 weights and int32 ids, [B, L, Xk]); one alignment kernel that
sorts the token copies by expert (reads the ids, writes int32 sorted ids); the ``gated_mlp``/``fused``
kernels as grouped GEMMs over all experts at once (each grouped GEMM also reads the sorted ids; x
rows are gathered, not copied); one weighted-combine kernel: 7 launches forward, 11 backward.
Host calls: the router GEMM through cuBLAS; the routing, alignment and combine kernels (and their
backward) are vLLM CUDA custom ops (``topk_softmax``, ``moe_align_block_size``, ``moe_sum``:
``cuda_extension``); the experts' grouped GEMMs and their gate are the op's Triton kernels
(``fused_moe``; the op's ``execution.TRAITS`` class): every launch is one host call.
Decode is the forward with L = 1: with few tokens, the X (1 - (1 - Xk/X)^B) hit experts' weights dominate.
Not counted: padding of expert groups to the GEMM tile (up to one tile of rows per expert), load
imbalance, capacity factors and token dropping, expert parallelism (all-to-all).
"""

from __future__ import annotations

import dataclasses

from ... import execution
from ...conventions import BYTES_PER_ELEMENT, nbytes
from ...cost import Cost
from ...registry import Impl, Op, at_most, register
from ...symbols import B, D, F, L, X, Xk
from ..common.kernels import Kernel, Tensor, kernel_chain, regroup, scale_class
from .cost import gated_mlp_cost, gemm, issued

ROUTING_CLASS = "cuda_extension"  # vLLM's _C custom ops around the grouped GEMMs

T = B * L  # tokens
COPIES = B * L * Xk  # routed token copies
# expected distinct experts T tokens route to, each choosing Xk of X uniformly: X (1 - (1 - Xk/X)^T)
EXPERTS_HIT = X * (1 - (1 - Xk / X) ** T)
ROUTE_BYTES = BYTES_PER_ELEMENT["fp32"]  # top-k weights are fp32; ids and sorted ids int32: also 4 bytes

TOPK_VECTOR = 4 * X + Xk * X + 2 * Xk  # per token
COMBINE_VECTOR = 2 * Xk * D  # per token
SOFTMAX_TOPK_BWD_VECTOR = 6 * X + 6 * Xk  # per token


def _t(name: str, elements, itemsize: int, cls: str = "intermediates") -> Tensor:
    return Tensor(name, cls, elements, itemsize)


def _experts(mode: str, dtype: str) -> Cost:
    routed = gated_mlp_cost("fused", mode, dtype).subs({L: L * Xk})
    routed = dataclasses.replace(routed, tensor=dict(routed.tensor), host={})  # re-issued below as Triton
    return issued(scale_class(routed, "weights", EXPERTS_HIT), execution.host_class("moe", "grouped_gemm", mode=mode))


def _routing(kernels, inputs, outputs) -> Cost:
    return issued(kernel_chain(kernels, inputs, outputs), ROUTING_CLASS)


def _own_bytes(mode: str, dtype: str) -> tuple[dict, dict]:
    e = nbytes(dtype)
    act = T * D * e
    w = (D * X + EXPERTS_HIT * 3 * D * F) * e
    if mode == "fwd":
        return {"activations": act, "weights": w}, {"activations": act}
    return {"activations": 2 * act, "weights": w}, {"activations": act, "weights": w}


def _fwd(dtype: str) -> Cost:
    e = nbytes(dtype)
    logits = _t("logits", T * X, e)  # [B, L, X]
    w_k, ids = _t("topk_w", COPIES, ROUTE_BYTES), _t("topk_ids", COPIES, ROUTE_BYTES)  # [B, L, Xk]
    sorted_ids = _t("sorted_ids", COPIES, ROUTE_BYTES)
    out_k = _t("expert_out", COPIES * D, e)  # [B*L*Xk, D]
    y = _t("y", T * D, e, "activations")
    small = _routing([
        Kernel("topk_softmax", (logits,), (w_k, ids), T * TOPK_VECTOR, T * X),
        Kernel("align_by_expert", (ids,), (sorted_ids,)),
        Kernel("combine", (out_k, w_k), (y,), T * COMBINE_VECTOR),
    ], [logits, out_k], [y])
    # both grouped GEMMs read the sorted ids to gather their rows
    ids_reads = Cost(extra_read={"intermediates": 2 * sorted_ids.nbytes})
    total = gemm("fwd", dtype, D, X) + small + _experts("fwd", dtype) + ids_reads
    return regroup(total, *_own_bytes("fwd", dtype), rereads=COPIES * D * e)


def _bwd(dtype: str) -> Cost:
    e = nbytes(dtype)
    dy, x_dx = _t("dy", T * D, e, "activations"), _t("dx_router", T * D, e)
    logits, d_logits = _t("logits", T * X, e), _t("d_logits", T * X, e)  # [B, L, X]
    w_k, d_w_k = _t("topk_w", COPIES, ROUTE_BYTES), _t("d_topk_w", COPIES, ROUTE_BYTES)  # [B, L, Xk]
    ids = _t("topk_ids", COPIES, ROUTE_BYTES)
    out_k, d_out_k = _t("expert_out", COPIES * D, e), _t("d_expert_out", COPIES * D, e)  # [B*L*Xk, D]
    dx_rows, dx_experts = _t("dx_rows", COPIES * D, e), _t("dx_experts", T * D, e)
    dx = _t("dx", T * D, e, "activations")
    small = _routing([
        Kernel("combine_bwd", (dy, w_k, out_k), (d_out_k, d_w_k), T * 3 * Xk * D),
        Kernel("scatter_add_dx", (dx_rows, ids), (dx_experts,), T * Xk * D),
        Kernel("topk_softmax_bwd", (d_w_k, ids, logits), (d_logits,), T * SOFTMAX_TOPK_BWD_VECTOR, T * X),
        Kernel("add_dx", (x_dx, dx_experts), (dx,), T * D),
    ], [dy, out_k, logits, dx_rows, x_dx], [dx])
    total = small + _experts("bwd", dtype) + gemm("bwd", dtype, D, X)
    return regroup(total, *_own_bytes("bwd", dtype), rereads=COPIES * D * e)


def _grouped_gemm(mode: str, dtype: str) -> Cost:
    if mode == "fwd":
        return _fwd(dtype)
    if mode == "decode":
        return _fwd(dtype).subs({L: 1})
    if mode == "bwd":
        return _bwd(dtype)
    raise ValueError(mode)


MOE = register(Op(
    name="moe",
    family="mlp",
    summary="top-Xk of X SwiGLU experts per token (router GEMM, softmax/top-k, grouped expert GEMMs, combine)",
    dims=("B", "L", "D", "F", "X", "Xk"),
    impls=(Impl("grouped_gemm", "router GEMM, fused softmax-top-k, token alignment, grouped gated-MLP GEMMs, "
                "weighted combine (vLLM fused_moe / MegaBlocks)", _grouped_gemm, ("fwd", "bwd", "decode")),),
    default_impl="grouped_gemm",
    constraints=(at_most("Xk", "X"),),
    reference="ssmbench.analytic.ops.mlp.ref:moe_ref",
))

