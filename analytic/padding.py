"""Work a kernel executes on padded tiles beyond the op's count: the factor by which an implementation's
executed vector and special-function work exceeds the cost rule's (``executed_work_factor``), charged by
the energy model (``energy.counts``'s ``work_factor``). The cost rules count the op's own elements; a
kernel whose tile is longer than what is left of the dimension computes the whole tile and masks the
store, so the arithmetic (and its operand delivery, which the per-FLOP energies carry) is spent on every
slot of the tile.

- ``conv1d`` / ``causal_conv1d``, channel-first (``causal_conv1d_fn``; Dao-AILab/causal-conv1d
  csrc/causal_conv1d_fwd.cu and causal_conv1d_bwd.cu): grid (B, E), one block of ``THREADS`` = 128
  threads per (batch, channel) row, each thread ``kNElts`` = 16 bytes / element size consecutive tokens
  (8 for 2-byte types, 4 for fp32), so the block walks L in chunks of 128 x kNElts tokens (1024 for
  bf16 / fp16, 512 for fp32). Every thread computes its kNElts outputs (the K-tap FMAs, the bias and
  the SiLU) whether or not they lie before L; loads past L are filled with zeros and stores masked.
  Executed / counted = ceil(L / chunk) x chunk / L: 8 at L = 128 in bf16, 1 for L a multiple of the
  chunk. The backward kernel has the same chunking (its recompute, silu' and the dx / dweight FMAs run
  on every slot). Decode (``causal_conv1d_update``: one thread per channel, no L) and the channel-last
  kernel (``causal_conv1d_fn`` with channel-last x: chunks of 64 tokens x 64 channels, exact for the
  lengths and widths measured) are 1.

Tensor-core work (``executed_tensor_factor``):

- attention decode on FlashAttention-2 (``fa2`` and ``splitkv`` through flash_attn_with_kvcache, and
  SDPA's flash backend, which vendors the same kernels): one query token per sequence. The kernel packs
  the H / G query heads that share a KV head into the rows (M) of its query tile (``flash_api.cpp``
  ``seqlenq_ngroups_swapped``: seqlen_q becomes H / G, the heads G), and computes QK^T and PV for every
  row of the tile: the rows beyond H / G are zero-filled loads, and their mma.sync instructions still
  fetch the K and V fragments from shared memory into every warp's registers. Executed / counted =
  ceil(rows / M) x M / rows with rows = H / G. The tile M: 64 in the split-KV kernel
  (``run_mha_fwd_splitkv_dispatch``, kBlockM = 64 for every head dim), which flash_attn_with_kvcache
  always uses; mha_fwd (flash_attn_func, ``flash_attn.fa2``, and SDPA's flash backend) uses it only where ``num_splits_heuristic`` picks more than one split,
  i.e. where B x G x ceil(rows / 64) query tiles fill less than ``SPLIT_FILL`` = 0.8 of the SMs and the
  S keys span more than one key block (kBlockN 256 / 128 / 64 for P <= 64 / <= 128 / above); else the
  one-split forward kernel (``run_mha_fwd_hdim<P>``: kBlockM = 128).
  GQA with H / G = 4 at B = 64, G = 8 (512 tiles on 132 SMs): 128 / 4 = 32x the counted tensor FLOPs;
  MHA decode (H = G, one row): 64x or 128x.

The H200 evidence (results/h200/2026-12-02, energy windows): causal_conv1d_fn bf16 forward at
B = 64, E = 4096, L = 128 drew 2.1x and at B = 32, L = 256 1.7x the energy its counted work predicted,
while the same kernel at L >= 1024 was within ~10%. SDPA flash decode at B >= 16 drew 1.6-1.7x (at
the power limit) what its counted work predicted, while cuDNN's decode (a different tile) did not;
charged at the mma.sync energy, the padded rows bring it within ~10% (a coefficient fitted on the
padded FLOPs alone lands at ~1.4 pJ/FLOP beside the mma.sync one at ~1.8).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .conventions import nbytes

THREADS = 128          # kNThreads of causal_conv1d_fwd / bwd
VECTOR_BYTES = 16      # kNBytes: one 16-byte vector load per thread
SPLITKV_TILE_M = 64    # kBlockM of FlashAttention-2's split-KV forward kernel
FWD_TILE_M = 128       # kBlockM of its one-split forward kernel (run_mha_fwd_hdim32 .. hdim256 on sm80+)
SPLIT_FILL = 0.8       # num_splits_heuristic: one split where the query tiles fill this share of the SMs
# backends whose decode runs mha_fwd (flash_attn_func and SDPA's flash backend) and so the split heuristic
MHA_FWD_BACKENDS = ("torch.sdpa.flash", "flash_attn.fa2")
FA2_DECODE_BACKENDS = (None, *MHA_FWD_BACKENDS)


def causal_conv1d_chunk(dtype: str) -> int:
    """Tokens one block of the channel-first causal_conv1d kernel covers per chunk (128 x kNElts)."""
    return THREADS * (VECTOR_BYTES // nbytes(dtype))


def _causal_conv1d(dims: Mapping[str, int], dtype: str, mode: str) -> float:
    if mode == "decode" or "L" not in dims:
        return 1.0
    length = int(dims["L"])
    chunk = causal_conv1d_chunk(dtype)
    return -(-length // chunk) * chunk / length


# (op, implementation, backend) -> factor; backend None: the implementation's default kernel (the one its
# cost rule describes), as a workload call names no backend
PADDED: dict[tuple[str, str, str | None], Callable[[Mapping[str, int], str, str], float]] = {
    ("conv1d", "causal_conv1d", None): _causal_conv1d,
    ("conv1d", "causal_conv1d", "causal_conv1d.causal_conv1d_fn"): _causal_conv1d,
}


def fa2_decode_tile_rows(dims: Mapping[str, int], backend: str | None, sm_count: float | None) -> int:
    """The query-tile rows M of FlashAttention-2's decode kernel (module docstring): the split-KV kernel's 64
    unless mha_fwd's heuristic picks one split (known only with the SM count), then the forward kernel's."""
    if backend not in MHA_FWD_BACKENDS or not sm_count:
        return SPLITKV_TILE_M
    rows = max(int(dims["H"]) // int(dims["G"]), 1)
    tiles = int(dims["B"]) * int(dims["G"]) * -(-rows // SPLITKV_TILE_M)
    key_blocks = -(-int(dims["S"]) // (256 if int(dims["P"]) <= 64 else 128 if int(dims["P"]) <= 128 else 64))
    return SPLITKV_TILE_M if tiles < SPLIT_FILL * sm_count and key_blocks > 1 else FWD_TILE_M


def executed_tensor_factor(op: str, impl: str, dims: Mapping[str, int], mode: str, backend: str | None = None,
                           sm_count: float | None = None) -> float:
    """Executed over counted tensor FLOPs of one call (module docstring); 1 where the kernel's tiles hold
    only the op's rows."""
    if (mode != "decode" or op not in ("attention_causal", "attention_full") or impl not in ("fa2", "splitkv")
            or backend not in FA2_DECODE_BACKENDS):
        return 1.0
    rows = max(int(dims["H"]) // int(dims["G"]), 1)
    m = fa2_decode_tile_rows(dims, backend, sm_count)
    return -(-rows // m) * m / rows


def executed_work_factor(op: str, impl: str, dims: Mapping[str, int], dtype: str, mode: str,
                         backend: str | None = None) -> float:
    """Executed over counted vector and special-function work of one call (module docstring); 1 where the
    kernel computes only the op's elements."""
    fn = PADDED.get((op, impl, backend))
    return 1.0 if fn is None else float(fn(dims, dtype, mode))
