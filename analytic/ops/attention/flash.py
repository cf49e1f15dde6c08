"""FlashAttention-2 and FlashAttention-3 prefill / training costs (forward and backward) for the
``attention_causal`` and ``attention_full`` ops registered in ``attention.py``.

Counting (conventions.py; A = score entries per (batch, head), ``common.score_entries``):
tensor-core FLOPs 4*B*H*A*P forward (QK^T and PV), 10*B*H*A*P backward (S = QK^T recomputed, dV = P^T dO,
dP = dO V^T, dQ = dS K, dK = dS^T Q: 5 matmuls vs 2, i.e. 2.5x forward). Both libraries skip key
tiles above the causal diagonal, so causal halves every matmul (diagonal tiles, computed in full and
masked, are ignored by the convention).

How executed device bytes are modelled
--------------------------------------
One CTA owns a (query tile, batch, head) in forward and a (key tile, batch, head) in backward, and
loops over the other sequence. K/V tiles are therefore re-read once per query tile (forward), and
Q, dO, lse, D once per key tile (backward), but from L2, not device memory: the grid launches the
tiles of one (batch, head) together, so the re-read operand (2*S*P*e bytes for one KV head, 4 MiB at
S = 8192, P = 128, bf16) stays resident in L2 (50 MB on H100/H200) while they run. Device bytes
count each such operand once; the L2->SM traffic they imply (e.g. forward K/V: B*H*(L/kBlockM)*S*P*2e
bytes, GQA heads of a group each re-reading their KV head) is not a Cost field and is not counted.
For S*P*e beyond a few MB per head the assumption weakens; calibration absorbs it.

FlashAttention-2 (Dao 2023; flash_attn 2.x, sm80 kernels also used on H100/H200)
-------------------------------------------------------------------------------
Forward, one kernel: reads q, k, v; writes o and the logsumexp lse [B, H, L] fp32 (always written;
backward needs it). Online softmax vector FLOPs and exps: ``online_softmax`` (tiles kBlockN by head
dim, ``FA2_FWD_TILES``). Working set: the shared-memory tiles Q [kBlockM, P] + K, V [kBlockN, P]
(one stage), (kBlockM + 2*kBlockN)*P*e: 64 KiB at P = 128 bf16. Register accumulators (O, S) are not
part of the working set (the roofline compares it with shared memory per SM).

Backward, the launches of ``mha_bwd`` (csrc/flash_attn/flash_api.cpp):
1. ``flash_bwd_dot_do_o``: D = rowsum(dO * O) [B, H, L] fp32 (2*B*H*L*P vector) and zeroes the fp32
   dQ accumulator dq_accum [B, H, L, P].
2. ``flash_bwd_dq_dk_dv_loop_seqk_parallel``: reads q, k, v, dO, lse, D; recomputes P = exp2(S*scale
   - lse) (FMA + exp per entry), dS = P * (dP - D) (2 per entry): 4 vector, 1 exp per entry; scales
   dK (B*H*S*P); writes dK, dV and atomically adds dQ into dq_accum. The atomics are read-modify-
   writes served by L2; modelled as one read and one write-back of dq_accum. With the zeroing in
   step 1 and the read in step 3 that is 4 passes over B*H*L*P*4 bytes: the case of an accumulator
   larger than L2 (for a smaller one, part of this traffic stays in L2 and the count is an upper
   bound; calibration absorbs the difference).
3. ``convert_dQ``: dQ = dq_accum * scale (B*H*L*P vector), reads dq_accum, writes dQ.
GQA (G < H): the kernel writes per-query-head dK, dV [B, S, H, P] ("dk_expanded", "dv_expanded"),
then two ``at::sum_out`` kernels reduce the H/G heads of each group: +2 launches, +2*B*S*H*P*e
written and read, +2*B*S*(H - G)*P vector FLOPs. O is read in step 1 although it is not an input of
the gradient (extra activation bytes). Working set: the hdim-128 tile (``FA2_BWD_TILE``) smem,
Q double-buffered and dO (3*kBlockM*P), K, V (2*kBlockN*P), P and dS (2*kBlockM*kBlockN), at e:
144 KiB at P = 128, matching the "144KB" note in the launch template.

FlashAttention-3 (Shah et al. 2024; hopper/ in the flash-attention repository)
------------------------------------------------------------------------------
Same FLOPs and the same forward device bytes as FA2 (q, k, v, o, lse). What differs:
- Execution (not in the counts; it changes achieved rates): warp specialization (a producer warp
  issues TMA loads, two consumer warpgroups run wgmma), ping-pong scheduling of softmax against the
  matmuls, intra-warpgroup overlap.
- Tiles (``fa3_fwd_tiles``: hopper/tile_size.h): 128 x 128 causal / 128 x 176 otherwise at P = 128,
  which changes the per-tile rescale FLOPs of the online softmax and the working set. Two K/V stages:
  smem (kBlockM + 2*stages*kBlockN)*P*e (160 KiB causal, 208 KiB otherwise at P = 128 bf16). The
  output staging buffer is assumed to alias the Q/K/V buffers: 128 x 176 at P = 128 only fits the
  227 KiB per-block limit that way (the tile_size.h comments say 128 x 192 "hits the limit of smem").
- fp8 (e4m3) forward: q, k, v read at 1 byte, both matmuls on fp8 tensor cores, the output written
  in bf16 (FA3's fp8 path returns bf16); V is transposed in shared memory for the k-major wgmma
  operand (no extra device bytes). Tiles 128 x 224 at P = 128. No fp8 backward exists: an error.
- Backward launches (hopper/flash_api.cpp, mha_bwd): preprocess (D = rowsum(dO*O); also writes
  lse*log2(e) as softmax_lse_log2 [B, H, L] fp32, B*H*L vector; zeroes dq_accum), the main kernel
  (reads the log2 lse instead of lse), postprocess dQ (dq_accum * scale). GQA: dK, dV accumulate in
  fp32 buffers dk_accum, dv_accum [B, G, S, P] (zeroed by two ``torch::zeros`` memsets), by atomics
  from the H/G query heads (modelled like dq_accum: one read and one write-back each), then two
  postprocess kernels convert them (the dK one applies the softmax scale, B*G*S*P vector, which the
  main kernel applies per query head in MHA): +4 launches and fp32 traffic instead of FA2's
  expanded dK/dV.
  Tiles ``fa3_bwd_tile``; working set Q and dO (two stages each, 4*kBlockM*P), K, V (2*kBlockN*P),
  P and dS (2*kBlockM*kBlockN) at e.

Not counted (either library): dropout, softcap, ALiBi, paged KV, varlen bookkeeping, semaphores for
deterministic mode, the padding of head dims to a multiple of 8.
"""

from __future__ import annotations

from typing import Any

from ...conventions import nbytes
from ...cost import Cost
from ...symbols import B, G, H, L, P, S
from ..common.kernels import Kernel, Tensor, kernel_chain
from .common import (F32, FA2_BWD_TILE, FA2_FWD_TILES, FA3_STAGES, GQA, check_dtype, fa3_bwd_tile, fa3_fwd_tiles,
                     kv_tensor, lse_tensor, matmuls, o_tensor, online_softmax, q_tensor, score_entries, select, tile)

BWD_MATMULS = 5  # per score entry, against the forward's 2: documented, tested (2.5x forward)


def _fwd(impl: str, causal: bool, dtype: str) -> Cost:
    if impl == "fa2":
        check_dtype(impl, dtype, ("bf16", "fp16"), "FlashAttention-2 supports fp16 and bf16 only")
        table, stages = FA2_FWD_TILES, 1
    else:
        check_dtype(impl, dtype, ("bf16", "fp16", "fp8"), "FlashAttention-3 supports fp16, bf16 and fp8 e4m3")
        table, stages = fa3_fwd_tiles(dtype, causal), FA3_STAGES
    block_m, block_n = tile(table, 0), tile(table, 1)
    a = score_entries(causal)
    q, k, v, o, lse = q_tensor(dtype), kv_tensor("k", dtype), kv_tensor("v", dtype), o_tensor(dtype), lse_tensor()
    vec, exps = online_softmax(B * H * L, B * H * a, block_n)
    smem = (block_m + 2 * stages * block_n) * P * nbytes(dtype)
    kern = Kernel(f"{impl}_fwd", (q, k, v), (o, lse), vec, exps, working_set=smem, tensor=matmuls(dtype, a))
    return kernel_chain([kern], [q, k, v], [o])


def _bwd_chain(impl: str, causal: bool, dtype: str, gqa: bool) -> Cost:
    e = nbytes(dtype)
    a = score_entries(causal)
    q, k, v = q_tensor(dtype), kv_tensor("k", dtype), kv_tensor("v", dtype)
    do, o = q_tensor(dtype, "do"), q_tensor(dtype, "o")
    dq, dk, dv = q_tensor(dtype, "dq"), kv_tensor("dk", dtype), kv_tensor("dv", dtype)
    lse, d = lse_tensor(), lse_tensor("D")
    dq_accum = Tensor("dq_accum", "intermediates", B * H * L * P, F32)  # [B, H, L, P] fp32
    block_m, block_n = FA2_BWD_TILE if impl == "fa2" else fa3_bwd_tile(causal)
    q_do_smem = (3 if impl == "fa2" else 4) * block_m * P
    smem = (q_do_smem + 2 * block_n * P + 2 * block_m * block_n) * e
    # recompute P (FMA + exp), dS = P * (dP - D): 4 vector and 1 exp per entry; dK *= scale
    main_vec, main_exp = 4 * B * H * a + B * H * S * P, B * H * a
    mm = matmuls(dtype, a, BWD_MATMULS)
    kernels = []
    if impl == "fa2":
        kernels.append(Kernel("flash_bwd_dot_do_o", (do, o), (d, dq_accum), 2 * B * H * L * P))
        if gqa:
            dk_x = Tensor("dk_expanded", "intermediates", B * S * H * P, e)  # [B, S, H, P]
            dv_x = Tensor("dv_expanded", "intermediates", B * S * H * P, e)
            kernels += [
                Kernel("flash_bwd_dq_dk_dv", (q, k, v, do, lse, d, dq_accum), (dq_accum, dk_x, dv_x),
                       main_vec, main_exp, working_set=smem, tensor=mm),
                Kernel("convert_dQ", (dq_accum,), (dq,), B * H * L * P),
                Kernel("at::sum_out dk", (dk_x,), (dk,), B * S * (H - G) * P),
                Kernel("at::sum_out dv", (dv_x,), (dv,), B * S * (H - G) * P),
            ]
        else:
            kernels += [
                Kernel("flash_bwd_dq_dk_dv", (q, k, v, do, lse, d, dq_accum), (dq_accum, dk, dv),
                       main_vec, main_exp, working_set=smem, tensor=mm),
                Kernel("convert_dQ", (dq_accum,), (dq,), B * H * L * P),
            ]
    else:
        lse2 = lse_tensor("lse_log2")
        kernels.append(Kernel("flash_bwd_preprocess", (do, o, lse), (d, lse2, dq_accum),
                              2 * B * H * L * P + B * H * L))
        if gqa:
            dk_acc = Tensor("dk_accum", "intermediates", B * G * S * P, F32)  # [B, G, S, P] fp32
            dv_acc = Tensor("dv_accum", "intermediates", B * G * S * P, F32)
            # dK is scaled once per KV head by its postprocess kernel instead of per query head
            kernels += [
                Kernel("torch::zeros dk_accum", (), (dk_acc,)),
                Kernel("torch::zeros dv_accum", (), (dv_acc,)),
                Kernel("flash_bwd_sm90", (q, k, v, do, lse2, d, dq_accum, dk_acc, dv_acc),
                       (dq_accum, dk_acc, dv_acc), main_vec - B * H * S * P, main_exp, working_set=smem, tensor=mm),
                Kernel("flash_bwd_postprocess dQ", (dq_accum,), (dq,), B * H * L * P),
                Kernel("flash_bwd_postprocess dK", (dk_acc,), (dk,), B * G * S * P),
                Kernel("flash_bwd_postprocess dV", (dv_acc,), (dv,)),
            ]
        else:
            kernels += [
                Kernel("flash_bwd_sm90", (q, k, v, do, lse2, d, dq_accum), (dq_accum, dk, dv),
                       main_vec, main_exp, working_set=smem, tensor=mm),
                Kernel("flash_bwd_postprocess dQ", (dq_accum,), (dq,), B * H * L * P),
            ]
    return kernel_chain(kernels, [q, k, v, do], [dq, dk, dv])


def _bwd(impl: str, causal: bool, dtype: str) -> Cost:
    if impl == "fa2":
        check_dtype(impl, dtype, ("bf16", "fp16"), "FlashAttention-2 supports fp16 and bf16 only")
    else:
        check_dtype(impl, dtype, ("bf16", "fp16"), "FlashAttention-3 has no fp8 backward")
    return select(GQA, _bwd_chain(impl, causal, dtype, True), _bwd_chain(impl, causal, dtype, False))


def flash_rule(impl: str, causal: bool, decode_rule=None):
    """The rule of ``impl`` ('fa2' or 'fa3') for one op; decode goes to ``decode_rule`` if given."""
    def rule(mode: str, dtype: str, kv_dtype: str | None = None) -> Cost:
        if mode == "fwd":
            return _fwd(impl, causal, dtype)
        if mode == "bwd":
            return _bwd(impl, causal, dtype)
        if mode == "decode" and decode_rule is not None:
            return decode_rule(dtype, kv_dtype)
        raise ValueError(mode)
    return rule


def fa_smem_fwd(impl: str, causal: bool, dtype: str) -> Any:
    """Forward working set, exposed for tests and reports."""
    table, stages = (FA2_FWD_TILES, 1) if impl == "fa2" else (fa3_fwd_tiles(dtype, causal), FA3_STAGES)
    return (tile(table, 0) + 2 * stages * tile(table, 1)) * P * nbytes(dtype)
