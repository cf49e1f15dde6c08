"""cuDNN's fused attention through PyTorch's SDPA (backend ``torch.sdpa.cudnn``) as sequential chains of the
achievable model (``chain.py``, class ``TILE_LOOP``): its backward, and a forward-backward call's forward then
backward. The forward on its own keeps the throughput terms (the phased engines of ``execution.BACKEND_TRAITS``),
which hold within a few per cent at L >= 4096 (the H200 cases of 2026-12-02/05).

What the backward runs (ncu, results/h100/2026-12-05/cudnn-bwd, B = 4, L = S = 2048, H = 32, P = 64 and B = 2,
L = S = 8192, H = 32, P = 128, bf16, causal), three kernels in order:

1. ``compute_dot_do_o_specialized``: D = rowsum(dO o O), and the fp32 dQ accumulator cleared; DRAM at 78-88 % of
   its peak (45.5 us and 178 us);
2. ``sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x{P}``: a persistent kernel, one CTA of 384 threads per SM
   (grid = SMs; 168 registers a thread, 149-211 KiB of shared memory: nothing else fits), which walks
   (key tile of 64, batch, head) items, each a loop over the query tiles of 64 that see the key tile: per step
   the five GEMMs of a 64 x 64 tile (S = Q K^T recomputed, dP = dO V^T, dV += P^T dO, dK += dS^T Q, dQ = dS K,
   issued as wgmma), P = exp(S - lse) and dS = P (dP - D) between them, dQ added into the fp32 accumulator;
3. ``convert_dq_to_16bits``: dQ = the accumulator at the storage dtype; DRAM at 68-86 % (39 us and 136 us).

The loop is bound by no unit: the tensor pipe 39 % / 62 % busy (exactly the share of the step its GEMMs take at
the wgmma rate: 640 of 1,687 and 1,280 of 2,090 cycles), shared memory (L1/TEX) 55-67 %, L2 57-76 %, DRAM 8-20 %,
issue slots 32-36 %, and registers spilled to local memory. One CTA per SM has nothing resident to hide its
phases, so the step is modelled as they follow one another: its tile's GEMM FLOPs at the SM's share of the
tensor rate, its exponentials and vector work at the SM's share of those engines, and one dependent round trip
to L2 (the next query tile's Q, dO, lse and D tiles, which every key tile re-reads from L2: 83-95 % L2 hit rate):

    t_step = 10 x 64 x 64 x P / (tensor rate / SMs) + 64 x 64 / (exp rate / SMs)
             + 4 x 64 x 64 / (vector rate / SMs) + memory.l2.latency

(0.77 us at P = 64 and 1.21 us at P = 128 on the H100 against 0.77-0.82 us and 1.25-1.30 us per step measured
over the long loops). The items are dispatched in grid order, the longest last (Graham's bound, ``chain_time``);
the two streaming kernels follow as one ``ROW_LOOP`` link of one row: their bytes (``side_bytes``) at the DRAM
bandwidth. Where the chain binds, the call's estimate is the chain (``achievable.achievable_work``), so the small
kernels are counted there and not only inside the overlapped throughput terms.

The forward of a forward-backward call is a tile loop too (``fwd_link``): the fprop kernel is persistent as well
(one CTA per SM, ncu of 2026-12-05 kernel-audit-fill), its steps 64 query rows x 128 keys as the kernel's name
at head dim 64 says (``..._fprop_wgmma_f16_knob_7_64x128x64``), its engines phased (the tensor phase, then the
softmax's exponentials and vector work side by side), no cache round trip: over long loops it is the forward's
throughput estimate, and it adds the causal tail where the longest query tile runs last.

Not modelled: the clock (ncu saw the bprop kernel at 1.77 GHz where the light kernels ran at 1.97 GHz; the
probe's tensor rate is the clock a large GEMM holds), the per-item prologue and epilogue (K and V loaded, dK and
dV written), which show at short loops: at L = 2048 (16 steps per item on average) the H100 calls run 12-16 %
above this chain, at L >= 4096 within 0-6 %.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from .attention_tiles import (
    attention_bwd_step_work,
    attention_fwd_step_work,
    key_tiles_per_query_tile,
    query_tiles_per_key_tile,
)
from .chain import ROW_LOOP, TILE_LOOP, Chain
from .conventions import nbytes

# the bprop kernel's tile (query rows x keys) and the fprop kernel's (query rows x keys), from the kernel names
BWD_TILE = (64, 64)
FWD_TILE = (64, 128)
# CTAs per SM of both persistent kernels (the grid is the SM count; registers and shared memory leave room for one)
CTAS_PER_SM = 1
# dependent L2 round trips one backward step waits for (module docstring)
BWD_L2_ROUND_TRIPS = 1
# bytes of the fp32 dQ accumulator and of the row statistics (lse, D) per element
F32 = 4


def side_bytes(dims: Mapping[str, int], dtype: str) -> float:
    """DRAM bytes of the backward's two streaming kernels (module docstring): D = rowsum(dO o O) reads dO and O
    and writes D (fp32) and the cleared fp32 dQ accumulator; the conversion reads the accumulator and writes dQ."""
    b, h, l_, p = (int(dims[k]) for k in ("B", "H", "L", "P"))
    e = nbytes(dtype)
    rows = b * h * l_
    return float(rows * p * (2 * e + F32) + rows * F32 + rows * p * (F32 + e))


def bwd_links(dims: Mapping[str, int], dtype: str, causal: bool) -> Chain | None:
    """The backward's loop, then its two streaming kernels (module docstring); None for an empty call."""
    b, h, l_, s, p = (int(dims[k]) for k in ("B", "H", "L", "S", "P"))
    if min(b, h, l_, s, p) <= 0:
        return None
    bm, bn = BWD_TILE
    per_tile = query_tiles_per_key_tile(l_, s, causal, bm, bn)
    side = Chain(ROW_LOOP, 1, 1, 1, row_bytes=side_bytes(dims, dtype), memory_phases=0, label="dram")
    work = attention_bwd_step_work(bm, bn, p)
    return Chain(TILE_LOOP, max(per_tile), b * h * len(per_tile), CTAS_PER_SM, total_steps=float(b * h * sum(per_tile)),
                 step_work=work, dtype=dtype, l2_round_trips=BWD_L2_ROUND_TRIPS, label="tensor", then=side)


def fwd_link(dims: Mapping[str, int], dtype: str, causal: bool) -> Chain | None:
    """The forward's loop (module docstring): QK^T and PV over one 64 x 128 tile per step, the online softmax's
    4 vector FLOPs and 1 exponential per entry and its per-row rescale (P + 3 vector, 1 exponential), phased."""
    b, h, l_, s, p = (int(dims[k]) for k in ("B", "H", "L", "S", "P"))
    if min(b, h, l_, s, p) <= 0:
        return None
    bm, bn = FWD_TILE
    per_tile = key_tiles_per_query_tile(l_, s, causal, bm, bn)
    work = attention_fwd_step_work(bm, bn, p)
    return Chain(TILE_LOOP, max(per_tile), b * h * len(per_tile), CTAS_PER_SM, total_steps=float(b * h * sum(per_tile)),
                 step_work=work, dtype=dtype, phased=True, label="tensor")


def cudnn_sdpa_chain(causal: bool):
    """cuDNN's SDPA kernels by mode (module docstring): the backward's loop and streaming kernels, and a
    forward-backward call's forward loop before them; the forward and decode calls have none."""

    def chain(dims: Mapping[str, int], mode: str, dtype: str = "bf16") -> Chain | None:
        if mode not in ("bwd", "fwdbwd"):
            return None
        bwd = bwd_links(dims, dtype, causal)
        fwd = fwd_link(dims, dtype, causal) if mode == "fwdbwd" else None
        if fwd is None or bwd is None:
            return bwd
        return dataclasses.replace(fwd, then=bwd)

    return chain
