"""Decode costs of the attention ops: one new query token per sequence against S cached keys.

Identity of a decode case: dims B, S, H, G, P (L is not used: one query per sequence). Causal and
full attention are the same in decode (the one query sees every cached key), so both ops share
these rules. Per (batch, head) S score entries: tensor-core FLOPs 4*B*H*S*P (QK^T and PV), on tensor
cores in every implementation (FlashAttention packs the H/G query heads of a KV head into the M
dimension of one tile; the rows of the 64-row tile beyond H/G are padding the MMA computes but the
count leaves out).

Compulsory bytes: read q [B, H, P] (activations) and the cached k, v [B, G, S, P] (class kv_cache:
2*G*P*e bytes per token per layer; at ``kv_dtype`` when the rule is given one, registry
``Impl.storage``: an fp8 cache is read at 1 byte and converted on load), write o [B, H, P].
Not counted: appending the new token's k, v to the cache (2*B*G*P*e written; flash_attn_with_kvcache can fuse it, vLLM's reshape_and_cache is a
separate kernel): the caller counts it with the cache update. Paged KV (block tables) and its
gather indexing are not modelled.

Implementations
---------------
- ``naive``: the reference with L = 1: q * scale (B*H*P vector; q_scaled written and read back),
  the grouped GEMM q k^T writing scores [B, H, 1, S], softmax (reads scores, writes probabilities;
  4 vector + 1 exp per entry), the GEMM with v. 4 launches. Extra bytes: 4*B*H*S*e for scores and
  probabilities plus 2*B*H*P*e for q_scaled.
- ``fa2``: ``flash_attn_with_kvcache(..., num_splits=1)``: FA2's split-KV kernel (which the kvcache
  path always uses) with one split: reads q, k, v once, writes o and lse [B, H] fp32. GQA decode
  swaps the H/G query heads into the query-length dimension (``seqlenq_ngroups_swapped``; views, no
  copy). Tiles ``FA2_SPLITKV_TILES`` (64 x 128 at P = 128); vector FLOPs from ``online_softmax``
  with B*H rows. 1 launch. Working set (kBlockM + 2*kBlockN)*P*e.
- ``splitkv`` (flash-decoding: Dao, Haziza, Massa, Sizov 2023): the same kernel with the S keys split
  into n chunks processed by separate CTAs, then a combine kernel. Each split writes its normalized
  partial output out_accum [n, B, H, P] and its logsumexp lse_accum [n, B, H], both fp32; the
  combine kernel reads them and writes o and lse. Extra bytes 2*4*n*B*H*(P + 1). FLOPs: the tensor
  FLOPs are those of ``fa2``; the vector FLOPs add the per-split finalization ((n - 1)*B*H*(P + 3)
  vector, (n - 1)*B*H logs) and the combine, per (batch, head): max over splits (n), n exps of
  lse_i - max with n subtracts and n adds, log of the sum and an add (1 log, 1 add), n scale
  factors exp(lse_i - lse) (n subtracts, n exps), o = sum_i scale_i * o_i (2*P*n):
  n*(2P + 4) + 1 vector, 2n + 1 transcendentals. 2 launches.
  Number of splits: FlashAttention chooses it at run time from the SM count (``num_splits_heuristic``:
  about SMs / (B * G) when B*G < 0.8 SMs, else 1; at most 128), which a hardware-independent rule
  cannot express. The model uses a fixed split length of ``SPLITKV_CHUNK`` = 512 keys, n =
  ceil(S / 512), the fixed partition of vLLM's PagedAttention v2 (PARTITION_SIZE = 512). A
  measurement must pass num_splits = ceil(S / 512) (FA2 caps it at 128, i.e. S <= 65,536). The split
  count only moves the small extra bytes above (n*(P + 1)*8 per (batch, head) against 2*S*P*e/(H/G)
  of KV cache) and the combine FLOPs.
"""

from __future__ import annotations

import sympy as sp

from ...conventions import nbytes
from ...cost import Cost
from ...symbols import B, H, P, S
from ..common.kernels import Kernel, Tensor, kernel_chain
from .common import (F32, FA2_SPLITKV_TILES, check_dtype, kv_tensor, lse_tensor, matmuls, o_tensor, online_softmax,
                     q_tensor, softmax_row_working_set, tile)

SPLITKV_CHUNK = 512  # keys per split (vLLM PagedAttention v2 PARTITION_SIZE)
# cuBLAS tile as in linear.py: 2 stages x (128 x 64 + 128 x 64) operand elements in shared memory.
GEMM_SMEM_ELEMENTS = 2 * (128 * 64 + 128 * 64)


def num_splits():
    return sp.ceiling(S / SPLITKV_CHUNK)


def _io(dtype: str, kv_dtype: str | None):
    return (q_tensor(dtype, tokens=1), kv_tensor("k", dtype, True, kv_dtype), kv_tensor("v", dtype, True, kv_dtype),
            o_tensor(dtype, tokens=1))


def naive_decode(dtype: str, kv_dtype: str | None = None) -> Cost:
    check_dtype("naive", dtype, ("fp32", "bf16", "fp16"), "plain PyTorch matmul and softmax")
    e = nbytes(dtype)
    q, k, v, o = _io(dtype, kv_dtype)
    qs = Tensor("q_scaled", "intermediates", B * H * P, e)  # [B, H, 1, P]
    scores = Tensor("scores", "intermediates", B * H * S, e)  # [B, H, 1, S]
    probs = Tensor("probs", "intermediates", B * H * S, e)
    gemm_ws, gemm = GEMM_SMEM_ELEMENTS * e, matmuls(dtype, S, 1)
    kernels = [
        Kernel("aten.mul (q * scale)", (q,), (qs,), B * H * P),
        Kernel("aten.bmm (q k^T)", (qs, k), (scores,), working_set=gemm_ws, tensor=gemm),
        Kernel("aten._softmax", (scores,), (probs,), 4 * B * H * S, B * H * S, working_set=softmax_row_working_set()),
        Kernel("aten.bmm (p v)", (probs, v), (o,), working_set=gemm_ws, tensor=gemm),
    ]
    return kernel_chain(kernels, [q, k, v], [o])


def _split_kernel_smem(dtype: str):
    return (tile(FA2_SPLITKV_TILES, 0) + 2 * tile(FA2_SPLITKV_TILES, 1)) * P * nbytes(dtype)


def fa2_decode(dtype: str, kv_dtype: str | None = None) -> Cost:
    check_dtype("fa2", dtype, ("bf16", "fp16"), "FlashAttention-2 supports fp16 and bf16 only")
    q, k, v, o = _io(dtype, kv_dtype)
    lse = lse_tensor(tokens=1)
    vec, exps = online_softmax(B * H, B * H * S, tile(FA2_SPLITKV_TILES, 1))
    kern = Kernel("flash_fwd_splitkv (1 split)", (q, k, v), (o, lse), vec, exps, working_set=_split_kernel_smem(dtype),
                  tensor=matmuls(dtype, S))
    return kernel_chain([kern], [q, k, v], [o])


def combine_flops(n) -> tuple:
    """(vector, transcendental) of the split-KV combine kernel for n splits, all (batch, head)."""
    return B * H * (n * (2 * P + 4) + 1), B * H * (2 * n + 1)


def splitkv_decode(dtype: str, kv_dtype: str | None = None) -> Cost:
    check_dtype("splitkv", dtype, ("bf16", "fp16"), "FlashAttention-2 split-KV supports fp16 and bf16 only")
    n = num_splits()
    q, k, v, o = _io(dtype, kv_dtype)
    lse = lse_tensor(tokens=1)
    out_acc = Tensor("out_accum", "intermediates", n * B * H * P, F32)  # [n, B, H, P] fp32
    lse_acc = lse_tensor("lse_accum", tokens=1, splits=n)  # [n, B, H] fp32
    vec, exps = online_softmax(n * B * H, B * H * S, tile(FA2_SPLITKV_TILES, 1))
    cvec, cexp = combine_flops(n)
    kernels = [
        Kernel("flash_fwd_splitkv", (q, k, v), (out_acc, lse_acc), vec, exps, working_set=_split_kernel_smem(dtype),
               tensor=matmuls(dtype, S)),
        Kernel("flash_fwd_splitkv_combine", (out_acc, lse_acc), (o, lse), cvec, cexp),
    ]
    return kernel_chain(kernels, [q, k, v], [o])


def splitkv_rule(mode: str, dtype: str, kv_dtype: str | None = None) -> Cost:
    if mode == "decode":
        return splitkv_decode(dtype, kv_dtype)
    raise ValueError(mode)
