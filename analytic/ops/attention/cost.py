"""Softmax attention: ``attention_causal`` and ``attention_full``, o = softmax(q k^T / sqrt(P)) v.

Dimensions: B batch, L queries, S keys, H query heads, G KV heads (GQA: H divisible by G; G = H is
MHA, G = 1 is MQA), P head dim. q [B, H, L, P], k and v [B, G, S, P], o [B, H, L, P]. Modes:
``fwd`` and ``bwd`` process L queries against S keys (self-attention prefill and training use S = L;
S > L is prefill after a cached prefix); ``decode`` is one query token per sequence against S cached
keys (``decode.py``; L is not used).

Counting conventions (conventions.py)
-------------------------------------
- Score entries per (batch, head), A: L*S full; causal L*S - L^2/2, i.e. L^2/2 = CAUSAL_FRACTION * L*S
  for S = L (the diagonal's extra L/2 ignored), with queries aligned to the last keys when S > L
  (FlashAttention >= 2.1 and KV-cache semantics), hence the constraint L <= S for the causal op.
- Tensor-core FLOPs: QK^T and PV, 2 FMAs of P per entry: 4*B*H*A*P forward at the storage dtype's
  tensor rate (fp32 has no tensor-core path: the roofline runs it at the vector rate).
- Softmax on the vector units / SFUs: exp counted once per evaluation as a transcendental.
- PyTorch's ``torch.utils.flop_counter`` counts causal attention in full (its sdpa formula has no
  causal term) and counts the backward of the fused kernels with the recomputation (5 matmuls), the
  backward of the math path without it (4 matmuls): tests/test_ops_attention_torch.py checks both.
- G changes the bytes of k and v only, never the FLOPs, except in the FlashAttention backward, whose
  GQA path reduces (FA2) or converts and scales (FA3) dK, dV per KV head in extra kernels.

Implementations (tiles, kernels and byte models in ``flash.py`` / ``decode.py``)
----------------------------------------------------------------------------------------------
``naive``: the plain PyTorch reference below (``attention_ref``), as eager PyTorch runs it: every
intermediate materialized in device memory at the storage dtype. Forward kernels:
1. q_scaled = q * P^-0.5 (B*H*L*P vector);
2. scores = q_scaled k^T as one batched GEMM per KV head (the H/G query heads of a group stacked
   along M: no copy of k) -> [B, H, L, S];
3. causal only: scores.masked_fill(mask, -inf), reading the bool mask [L, S] (built once per model
   forward and shared by its layers; building it is not counted) and writing a masked copy (out of
   place: an in-place fill of the GEMM output's view makes autograd add several copy kernels);
4. probabilities = softmax(scores) (one row-resident kernel; 4 vector + 1 exp per entry, as the
   ``softmax`` op's ``fused`` count; rows longer than the persistent kernel re-read from L1/L2);
5. o = probabilities v (grouped GEMM).
The GEMM computes every entry: naive causal attention executes the FLOPs of full attention (the
CAUSAL_FRACTION saving needs a kernel that skips masked tiles), and the count says so.
Backward, as autograd dispatches the reference's backward: dV = P^T dO and dP = dO V^T (the PV
GEMM's two grads), the softmax backward dS = P * (dP - rowsum(dP * P)) (4 vector per entry), the
mask's backward (causal), dQs = dS K and dK = dS^T Qs (the QK^T GEMM's grads), dQ = dQs * scale.
6 launches (7 causal); 8*B*H*L*S*P tensor FLOPs (2x forward: no recomputation, the probabilities
were saved). The saved q_scaled stands in for the compulsory read of q. Working sets: the cuBLAS
tile of ``linear.py`` (2 stages x 2 x 128 x 64 elements in shared memory), one fp32 row of
min(S, 1024) for the softmax (PyTorch's persistent-row limit), streaming blocks for elementwise kernels.

``fa2``, ``fa3``: FlashAttention-2 and -3 (``flash.py``): same tensor FLOPs per entry as
``naive`` full (causal halves them by skipping tiles), scores kept on chip. ``splitkv``: decode only.

Compulsory bytes (storage dtype e): forward reads q, k, v and writes o (all activations); backward
reads q, k, v, dO and writes dQ, dK, dV; decode reads k, v as kv_cache. Not counted anywhere:
dropout, ALiBi, softcap, sliding windows, padding masks, RoPE (a separate op), the KV-cache append.
"""

from __future__ import annotations

from functools import partial

from ...conventions import nbytes
from ...cost import Cost
from ...registry import Impl, Op, at_most, divisible, register
from ...symbols import B, H, L, P, S
from ..common.kernels import Kernel, Tensor, kernel_chain
from .common import (check_dtype, kv_cache_bytes_per_token, kv_tensor, matmuls, o_tensor, q_tensor,
                     softmax_row_working_set)
from .decode import GEMM_SMEM_ELEMENTS, fa2_decode, naive_decode, splitkv_rule
from .flash import flash_rule

NAIVE_DTYPES = ("fp32", "bf16", "fp16")
__all__ = ["ATTENTION_CAUSAL", "ATTENTION_FULL", "kv_cache_bytes_per_token"]


def _naive_tensors(dtype: str):
    e = nbytes(dtype)
    n = B * H * L * S
    return dict(
        q_scaled=Tensor("q_scaled", "intermediates", B * H * L * P, e),  # [B, H, L, P]
        scores=Tensor("scores", "intermediates", n, e),  # [B, H, L, S]
        scores_masked=Tensor("scores_masked", "intermediates", n, e),
        probs=Tensor("probs", "intermediates", n, e),
        mask=Tensor("mask", "intermediates", L * S, 1),  # [L, S] bool
        gemm_ws=GEMM_SMEM_ELEMENTS * e,
        gemm=matmuls(dtype, L * S, 1),  # one [L, P] x [P, S]-shaped GEMM over every entry (no masked skip)
    )


def _naive_fwd(causal: bool, dtype: str) -> Cost:
    t = _naive_tensors(dtype)
    q, k, v, o = q_tensor(dtype), kv_tensor("k", dtype), kv_tensor("v", dtype), o_tensor(dtype)
    kernels = [
        Kernel("aten.mul (q * scale)", (q,), (t["q_scaled"],), B * H * L * P),
        Kernel("aten.bmm (q k^T)", (t["q_scaled"], k), (t["scores"],), working_set=t["gemm_ws"], tensor=t["gemm"]),
    ]
    scores = t["scores"]
    if causal:
        kernels.append(Kernel("aten.masked_fill", (scores, t["mask"]), (t["scores_masked"],)))
        scores = t["scores_masked"]
    kernels += [
        Kernel("aten._softmax", (scores,), (t["probs"],), 4 * B * H * L * S, B * H * L * S,
               working_set=softmax_row_working_set()),
        Kernel("aten.bmm (p v)", (t["probs"], v), (o,), working_set=t["gemm_ws"], tensor=t["gemm"]),
    ]
    return kernel_chain(kernels, [q, k, v], [o])


def _naive_bwd(causal: bool, dtype: str) -> Cost:
    e = nbytes(dtype)
    t = _naive_tensors(dtype)
    n = B * H * L * S
    # The saved q_scaled (same shape and dtype as q) is what the backward reads in place of q.
    q, k, v = q_tensor(dtype), kv_tensor("k", dtype), kv_tensor("v", dtype)
    do, dq, dk, dv = q_tensor(dtype, "do"), q_tensor(dtype, "dq"), kv_tensor("dk", dtype), kv_tensor("dv", dtype)
    dprobs = Tensor("dprobs", "intermediates", n, e)
    dscores = Tensor("dscores", "intermediates", n, e)
    dscores_m = Tensor("dscores_masked", "intermediates", n, e)
    dqs = Tensor("dq_scaled", "intermediates", B * H * L * P, e)
    ws, mm = t["gemm_ws"], t["gemm"]
    kernels = [
        Kernel("aten.bmm (dP = dO v^T)", (do, v), (dprobs,), working_set=ws, tensor=mm),
        Kernel("aten.bmm (dV = P^T dO)", (t["probs"], do), (dv,), working_set=ws, tensor=mm),
        Kernel("aten._softmax_backward_data", (dprobs, t["probs"]), (dscores,), 4 * n,
               working_set=softmax_row_working_set(2)),
    ]
    ds = dscores
    if causal:
        kernels.append(Kernel("aten.masked_fill (grad)", (dscores, t["mask"]), (dscores_m,)))
        ds = dscores_m
    kernels += [
        Kernel("aten.bmm (dQs = dS k)", (ds, k), (dqs,), working_set=ws, tensor=mm),
        Kernel("aten.bmm (dK = dS^T q_scaled)", (ds, q), (dk,), working_set=ws, tensor=mm),
        Kernel("aten.mul (dQ = dQs * scale)", (dqs,), (dq,), B * H * L * P),
    ]
    return kernel_chain(kernels, [q, k, v, do], [dq, dk, dv])


def _naive_rule(causal: bool, mode: str, dtype: str, kv_dtype: str | None = None) -> Cost:
    check_dtype("naive", dtype, NAIVE_DTYPES, "plain PyTorch matmul and softmax; fp8 has no eager path")
    if mode == "fwd":
        return _naive_fwd(causal, dtype)
    if mode == "bwd":
        return _naive_bwd(causal, dtype)
    if mode == "decode":
        return naive_decode(dtype, kv_dtype)
    raise ValueError(mode)


def _splitkv(mode: str, dtype: str, kv_dtype: str | None = None) -> Cost:
    return splitkv_rule(mode, dtype, kv_dtype)


def _impls(causal: bool) -> tuple[Impl, ...]:
    return (
        Impl("naive", "plain PyTorch: scores and probabilities materialized in device memory",
             partial(_naive_rule, causal), ("fwd", "bwd", "decode"), storage=("kv_dtype",)),
        Impl("fa2", "FlashAttention-2: tiled online softmax, scores on chip, recompute in backward",
             flash_rule("fa2", causal, fa2_decode), ("fwd", "bwd", "decode"), storage=("kv_dtype",)),
        Impl("fa3", "FlashAttention-3 (Hopper): TMA + wgmma warp specialization, fp8 forward",
             flash_rule("fa3", causal), ("fwd", "bwd")),
        Impl("splitkv", "flash-decoding: KV split into 512-key chunks, partial outputs combined by a 2nd kernel",
             _splitkv, ("decode",), storage=("kv_dtype",)),
    )


_COMMON = dict(
    family="attention",
    dims=("B", "L", "S", "H", "G", "P"),
    default_impl="fa2",
    dtypes=("fp32", "bf16", "fp16", "fp8"),
    notes="decode: one query per sequence against S cached keys (L unused); fp32 only on naive, fp8 only on fa3",
)
GQA_CONSTRAINT = divisible("H", "G")

ATTENTION_CAUSAL = register(Op(
    name="attention_causal",
    summary="causal softmax attention (queries aligned to the last keys); decode = 1 query vs S cached keys",
    impls=_impls(True),
    constraints=(GQA_CONSTRAINT, at_most("L", "S")),
    reference="ssmbench.analytic.ops.attention.ref:attention_causal_ref",
    **_COMMON,
))

ATTENTION_FULL = register(Op(
    name="attention_full",
    summary="bidirectional (unmasked) softmax attention; decode = 1 query vs S cached keys",
    impls=_impls(False),
    constraints=(GQA_CONSTRAINT,),
    reference="ssmbench.analytic.ops.attention.ref:attention_full_ref",
    **_COMMON,
))

