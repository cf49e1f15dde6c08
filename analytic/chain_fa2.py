"""FlashAttention-2's kernels as sequential chains of the achievable model (``chain.py``, class ``TILE_LOOP``).

FlashAttention-2's forward kernel (``flash_fwd_kernel``, csrc/flash_attn/src/flash_fwd_kernel.h,
the kernel PyTorch's SDPA flash backend vendors) runs one CTA per (query tile of kBlockM rows, batch,
head), grid (ceil(L / kBlockM), B, H) with the query tile fastest; each CTA loops over its key tiles
of kBlockN (``FA2_FWD_TILES``): QK^T, the online softmax, PV, one after another on the same four
warps. One step is one key tile of the full kBlockM x kBlockN tile (rows beyond L are computed and
discarded: a decode's one query row costs a whole tile). Its MMAs take their operands from shared memory (K
and V, each read by all four warps through ldmatrix after cp.async wrote it there, and Q's fragments again each
step) and registers (P): ``fa2_fwd_smem_bytes``, itemsize x (2 x 4 x kBlockN + kBlockM) x P, 160 KiB at head
dim 128. ncu on an H100
(results/h100/2026-12-05/attention-paths, the unsplit decode at B = 64, S = 8192) found the tensor pipe 55.7 %
and the shared-memory data pipe 47.4 % busy: 103 % together, the two one after the other at the SM's scale,
with nothing left over for the softmax, which the other resident CTA issues meanwhile. So the step is
t_step = CTAs sharing the SM x max(tile tensor FLOPs / (mma.sync rate / SMs) + shared-memory bytes /
(memory.shared.bandwidth / SMs), tile exponentials / (special-function rate / SMs) + tile vector FLOPs /
(vector rate / SMs)) (``Chain.side_overlapped``), with two CTAs per SM, the register file's limit (the fp32
accumulators O [kBlockM, P] and S [kBlockM, kBlockN] over 128 threads: 128 + 64 registers per thread at
P = 128, tile 128 x 64; ncu: 255 registers, two blocks by registers and by shared memory). A grid of no
more CTAs than SMs leaves each CTA its SM, which then runs all of it in series at the whole SM's rates:
the H200's lone CTAs of L = 512, S = 8192 (128 CTAs of 128 steps) took 1.9 us per step where the pairs
of the long calls take 3.1-3.3 us. Causal CTAs (bottom-right aligned) differ in length: the query tile m
sees min(ceil((S - L + (m + 1) kBlockM) / kBlockN), ceil(S / kBlockN)) key tiles. The block scheduler
hands CTAs out in grid order (query tile fastest, then batch, then head) to the first free slot, which
``block_schedule.list_schedule`` simulates; programs of one length run in whole waves. Over the 110 stored H200
calls through SDPA's flash backend (2026-12-02/05: forward, decode, backward, forward-backward) this and the same
schedule for the backward take the achievable estimate's median |error| from 14.3 % (the forward's step at the
CTAs' share without its operands, Graham's bound) to 8.2 %: the long
calls at head dim 128 sit at 0.97-1.04x (they were 0.85-0.94x causal, 1.09-1.18x at equal lengths, whose
whole waves Graham's bound overstates by a program), the unsplit decode at B = 16-256 at 0.89-0.95x
(1.09-1.17x); head dim 64 (128 x 128 tiles, twice the softmax per step) lands at 0.71-0.92x (ncu on an H100,
results/h100/2026-12-06/fa2-paths: its tensor and shared-memory pipes add to 80-86 % of the time, not all of it;
the rest, the warps' dependent softmax and MMAs, is not modelled). A grid
smaller than 0.8 x 2 x SMs query tiles of 64 rows makes FlashAttention split the key loop over more
CTAs (``num_splits_heuristic``, csrc/flash_attn/flash_api.cpp): a split kernel of 64 x kBlockN tiles
(``fa2_splitkv_chain``) and a combine kernel run instead, timed in ``fa2_split.py``: on the H100's graph-timed
decode calls at B = 1-2 (results/h100/2026-12-05/fa2-fwd-oos, 2026-12-06/fa2-paths) 0.56-0.86x before, 0.88-1.04x
with them; on the 13 stored H200 split calls (eager) that the host does not pace 0.35-1.02x before (median
0.63), 0.71-1.05x (median 0.80). Out of sample 0.87-1.00x on the H100 and 0.69-0.93x on the H200; the H100's figure
leans on its spec's timed-call intercept (8.98 us; another H100 read 4.38 us, results/h100/2026-12-06/probe-recheck),
so the split calls carry 5-13 us the rule does not explain. On the 2026-12-02/03 H200 SDPA-flash cases the
tile-loop term took the achievable estimate's median |error| over forward and decode from 36 % to 16 %.

FlashAttention-2's backward kernel (``flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel``, flash_bwd_kernel.h; grid
(ceil(S / kBlockN), B, H), the key tile fastest) runs one CTA per (key tile, batch, query head), looping over the
query tiles from the causal diagonal (``m_block_min = (n kBlockN + L - S) / kBlockM``, bottom-right aligned) to the
end: per step one kBlockM x kBlockN tile of five GEMMs (S = Q K^T recomputed, dP = dO V^T, dV += P^T dO, dK += dS^T
Q, dQ = dS K), P = exp(S - lse) and dS = P (dP - D) between them (``fa2_bwd_chain``; tiles and warp layouts by head
dim, ``ops/attention/common.FA2_BWD_TRAITS``). Its shared-memory tiles (144 KB at head dims 64 and 128) leave room
for one CTA per SM, whose 8 warps go through the GEMMs together, a barrier between each. Every GEMM's operands
reach the mma.sync instructions from shared memory through ldmatrix: the warps of a GEMM laid out a x (W / a)
over its M x N read K (W M / a + N a) elements (``fa2_bwd_smem_bytes``: 576 KiB per step at head dim 128, and
64 KiB written: P, dS and the next Q and dO tiles), which at 128 B per clock per SM takes 5,120 cycles against
the MMAs' 4,379 at the mma.sync rate. With one CTA per SM nothing else is resident to fill the gaps, so the step
is modelled with the delivery in series: t_step = tile FLOPs / (mma.sync rate / SMs) + shared-memory bytes /
(memory.shared.bandwidth / SMs) + the softmax's vector and exp work (``Chain.smem_bytes``), label ``tensor`` (the
MMAs and their operand delivery). What ncu measured on the H200 (results/h200/2026-12-05/kernel-audit-fill; B = 4,
L = S = 8192, H = 32, P = 128): shared memory (L1/TEX) 70 % busy, DRAM 3 %, 7,592 SM cycles per step against
5,837 with the delivery fully overlapped and 10,216 in series (tests/test_chain_fa2_bwd.py): the warps overlap
part of it, so the serial step is the high end, 19 % above the profiled kernel's 4.32 us per step and 13-20 %
above the timed backward calls at S = 8192. Over the 25 H200 backward calls (2026-12-02/05) the estimate went from
0.36-0.96x of the measurement (median 0.52) to 0.48-1.20x (median 1.03; the two under 0.6 are calls at L = S = 512
whose host paces them or nearly), over the 13 forward-backward calls from 0.36-1.45x (median 0.61) to 0.65-1.45x
(median 1.09). Not in the chain: the backward's small kernels (D = rowsum(dO O), the dQ conversion, GQA's head
sums), which the throughput terms count.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from .attention_tiles import (
    attention_bwd_step_work,
    attention_fwd_step_work,
    key_tiles_per_query_tile,
    query_tiles_per_key_tile,
)
from .chain import TILE_LOOP, Chain
from .conventions import nbytes
from .fa2_split import FA2_SPLIT_BLOCK_M

# FlashAttention-2 forward CTAs per SM (module docstring: the register file's limit)
FA2_FWD_CTAS_PER_SM = 2
# FlashAttention-2 forward warps per CTA (Flash_fwd_kernel_traits' kNWarps at every head dim SDPA dispatches)
FA2_FWD_WARPS = 4
# FlashAttention-2 backward CTAs per SM: its shared-memory tiles (144 KB at head dims 64 and 128) leave room for
# one in the 228 KB of an sm90 SM (module docstring)
FA2_BWD_CTAS_PER_SM = 1


def fa2_fwd_chain(causal: bool):
    """FlashAttention-2's forward kernel as SDPA's flash backend runs it (module docstring): prefill
    (dims B, H, G, L, S, P) and decode (L = 1; with G < H the kernel packs the H / G query heads of a
    KV head into the query tile's rows, flash_api.cpp ``seqlenq_ngroups_swapped``)."""

    def chain(dims: Mapping[str, int], mode: str, dtype: str = "bf16") -> Chain | None:
        # imports the registry, which imports this module
        from .ops.attention.common import FA2_FWD_TILES, by_head_dim

        if mode not in ("fwd", "decode"):
            return None
        b, h, g, p, s = (int(dims[k]) for k in ("B", "H", "G", "P", "S"))
        rows, heads, is_causal = (int(dims["L"]), h, causal) if mode == "fwd" else (1, h, False)
        if mode == "decode" and g < h:
            rows, heads = h // g, g
        if min(b, heads, rows, s, p) <= 0:  # a call with a zero dimension runs no kernel
            return None
        bm, bn = by_head_dim(FA2_FWD_TILES, p)
        per_tile = key_tiles_per_query_tile(rows, s, is_causal, bm, bn)
        work = attention_fwd_step_work(bm, bn, p)  # one key tile over the full tile
        return Chain(TILE_LOOP, max(per_tile), b * heads * len(per_tile), FA2_FWD_CTAS_PER_SM,
                     total_steps=float(b * heads * sum(per_tile)), step_work=work, mma_sync=True,
                     split=fa2_splitkv_chain(b * heads * math.ceil(rows / FA2_SPLIT_BLOCK_M), s, p, dtype),
                     group_steps=tuple(per_tile), smem_bytes=fa2_fwd_smem_bytes(p, bn, dtype, bm), side_overlapped=True,
                     label="tensor")

    return chain


def fa2_splitkv_chain(grid_blocks: int, keys: int, head_dim: int, dtype: str) -> Chain:
    """The split-KV kernel FlashAttention-2 runs where its grid is small (fa2_split.py) as a chain template:
    ``grid_blocks`` programs (the grid's 64-row query blocks) over ceil(S / kBlockN) key blocks all told, tile
    64 x kBlockN (``FA2_SPLITKV_TILES``), its step as the forward's (two CTAs per SM, the K and V operands
    through shared memory in series with the MMAs, the softmax beside them); ``fa2_split.split_link`` gives the
    chain at a number of splits. Causal masking of prefill query tiles is not counted (each split's key blocks
    all told: an upper bound there)."""
    from .ops.attention.common import FA2_SPLITKV_TILES, by_head_dim

    bm, bn = by_head_dim(FA2_SPLITKV_TILES, head_dim)
    return Chain(TILE_LOOP, math.ceil(keys / bn), grid_blocks, FA2_FWD_CTAS_PER_SM,
                 step_work=attention_fwd_step_work(bm, bn, head_dim),
                 dtype=dtype if dtype in ("bf16", "fp16") else "bf16", mma_sync=True,
                 smem_bytes=fa2_fwd_smem_bytes(head_dim, bn, dtype, bm), side_overlapped=True, label="tensor")


def fa2_fwd_smem_bytes(head_dim: int, block_n: int, dtype: str, block_m: int | None = None) -> float:
    """Bytes one step of the forward kernel reads from shared memory through its load pipe (module docstring): its
    K and V tiles, read by each of its W warps as the B operands of S = Q K^T and O += P V (ldmatrix), and its
    Q tile, whose A fragments the warps load again each step (Is_Q_in_regs is false), P staying in registers:
    itemsize x (2 W kBlockN + kBlockM) x head dim (``block_m`` 2 x ``block_n`` where not given). The cp.async
    copies that write K and V there do not go through that pipe: ncu's shared-memory wavefronts on an H100
    (results/h100/2026-12-05/attention-paths, 2026-12-06/fa2-paths) were 172 KB per step against 164 KB
    counted for the 128 x 64 tile at head dim 128, 287 against 279 KB for the split kernel's 64 x 128 tile, and
    156-162 against 147 KB for the 128 x 128 tile at head dim 64, where the former count, the writes of K and V
    in place of Q's reads, gave 164, 328 and 164 KB."""
    block_m = 2 * block_n if block_m is None else block_m
    return float(nbytes(dtype) * (2 * FA2_FWD_WARPS * block_n + block_m) * head_dim)


def fa2_bwd_smem_bytes(head_dim: int, dtype: str) -> float:
    """Bytes one step of FlashAttention-2's backward kernel (one kBlockM x kBlockN tile) moves through shared
    memory (module docstring): each warp's operands of the five GEMMs (ldmatrix), P and dS stored for the
    GEMMs that read them, the next Q and dO tiles written by cp.async. With W warps laid out a along a GEMM's M
    and W / a along its N, over a reduction of length K, the warps read K (W M / a + N a) elements: S = Q K^T
    and dP = dO V^T (M = kBlockM, N = kBlockN, K = head dim; V's part not where V stays in registers),
    dV = P^T dO and dK = dS^T Q (M = kBlockN, N = head dim, K = kBlockM), dQ = dS K (M = kBlockM, N = head dim,
    K = kBlockN). At head dim 128: 576 KiB read and 64 KiB written per step."""
    from .ops.attention.common import (
        fa2_bwd_traits,  # imports the registry, which imports this module
    )

    bm, bn, w, a_s, a_n, a_q, v_in_regs = fa2_bwd_traits(head_dim)
    p = head_dim
    s_gemm = p * (w * bm / a_s + bn * a_s)
    dp_gemm = p * (w * bm / a_s + (0 if v_in_regs else bn * a_s))
    dkv_gemm = bm * (w * bn / a_n + p * a_n)
    dq_gemm = bn * (w * bm / a_q + p * a_q)
    stored = 2 * bm * bn + 2 * bm * p
    return float(nbytes(dtype) * (s_gemm + dp_gemm + 2 * dkv_gemm + dq_gemm + stored))


def fa2_bwd_chain(causal: bool):
    """FlashAttention-2's backward kernel ``flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel`` (module docstring):
    one CTA per (key tile, batch, query head), looping over its query tiles; dims B, H, L, S, P."""

    def chain(dims: Mapping[str, int], mode: str, dtype: str = "bf16") -> Chain | None:
        from .ops.attention.common import (
            fa2_bwd_traits,  # imports the registry, which imports this module
        )

        if mode != "bwd":
            return None
        b, h, l_, s, p = (int(dims[k]) for k in ("B", "H", "L", "S", "P"))
        if min(b, h, l_, s, p) <= 0:  # a call with a zero dimension runs no kernel
            return None
        bm, bn = fa2_bwd_traits(p)[:2]
        # the first query tile of key tile n under the bottom-right causal mask (m_block_min in the kernel)
        per_tile = query_tiles_per_key_tile(l_, s, causal, bm, bn)
        work = attention_bwd_step_work(bm, bn, p)
        return Chain(TILE_LOOP, max(per_tile), b * h * len(per_tile), FA2_BWD_CTAS_PER_SM,
                     total_steps=float(b * h * sum(per_tile)), step_work=work, mma_sync=True, dtype=dtype,
                     smem_bytes=fa2_bwd_smem_bytes(p, dtype), label="tensor", group_steps=tuple(per_tile))

    return chain


def fa2_chain(causal: bool):
    """FlashAttention-2's kernels by mode: the forward's key-tile loop (forward and decode), the backward's
    query-tile loop, and a forward-backward call's forward then backward."""
    fwd_of, bwd_of = fa2_fwd_chain(causal), fa2_bwd_chain(causal)

    def chain(dims: Mapping[str, int], mode: str, dtype: str = "bf16") -> Chain | None:
        if mode != "fwdbwd":
            return fwd_of(dims, mode, dtype) if mode in ("fwd", "decode") else bwd_of(dims, mode, dtype)
        fwd, bwd = fwd_of(dims, "fwd", dtype), bwd_of(dims, "bwd", dtype)
        return bwd if fwd is None else dataclasses.replace(fwd, then=bwd)

    return chain
