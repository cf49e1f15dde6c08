"""Re-read bytes the SM's own L1 serves: blocks resident on one SM at the same time that load the same
operand tile fetch it once from the device-wide cache, and the others hit in L1. The energy model
charges the re-reads (``execution.l2_reread_bytes``) at the cache's energy per byte only for the share
that reaches it (``l2_reread_share``); an L1 hit is per-SM traffic, which the cost model does not count
(its energy rides with the per-FLOP terms, as for shared memory and registers: ``energy.py``).

Mamba-1 selective scan (mamba-ssm csrc/selective_scan): grid (B, E) with the batch index fastest
(blockIdx.x = b, blockIdx.y = channel), so block i belongs to batch i mod B. Every block of a batch
loads the same B[b, :, chunk] and C[b, :, chunk] as it walks the chunks, all at the same pace (equal
work per block). The block scheduler hands the blocks of a wave to the S SMs one each in turn, so the
r blocks resident on one SM are ids k, k + S, ..., k + (r - 1) S, whose batches are k + j S mod B:
d = min(r, B / gcd(B, S)) distinct batches. One of each batch's r / d blocks fetches a chunk from L2,
the others find it in L1: the L2 serves d / r of the re-reads. r is the occupancy the kernel's
``__launch_bounds__(kNThreads, kMinBlocks)`` guarantees (registers capped so that kMinBlocks blocks
fit): forward ``kMinBlocks = kNThreads < 128 ? 5 : 3``, backward ``kNThreads == 128 ? 3 : 2``, with
kNThreads = 32 up to L = 512, 64 up to 1024, 128 above (``selective_scan_fwd_kernel.cuh``,
``selective_scan_bwd_kernel.cuh``). On the H200 (S = 132): at B = 1, 2 or 4 every SM holds blocks of
one batch (d = 1: 1/3 of the re-reads reach L2); at B = 64 with 128-thread blocks d = 3 (all of them).
The backward's dB, dC ``atomicAdd`` run at L2 whatever L1 holds; only its loads share.

The H200 evidence (results/h200/2026-12-02, energy windows, leave-shape-out at the measured time):
charged in full at L2, the forward at B = 1 was predicted 10-30% high (384-485 W) and at B = 64,
L = 128 30% low (630 W); with the share, Mamba-1's median / p90 |err| went from 14.9 / 20.1% to
7.3 / 14.4%, and SSD's, which shares the re-read coefficient, from 13.4 / 21.5% to 5.6 / 20.5%. Open:
the fitted re-read energy rises to ~105 pJ/B, 2.6x the probe's L2-resident read (40.4 pJ/B), so the
term also carries work that scales as the re-reads do (the scan's per-(element, state) instructions
beyond its counted FLOPs), and with the probe's parameters (no fit) Mamba-1 is predicted lower still
(median |err| 26.7% -> 41.7%: those parameters already missed that overhead). The check on the device:
ncu's lts__t_sectors_srcunit_tex_op_read.sum of selective_scan_fwd_kernel at B = 1 against B = 64
(same B x E x L) should differ by about the factor 3 this module predicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import gcd

from .conventions import nbytes


def scan_threads(length: int) -> int:
    """kNThreads of mamba-ssm's selective-scan launchers for a sequence of ``length`` tokens."""
    return 32 if length <= 512 else 64 if length <= 1024 else 128


def scan_blocks_per_sm(length: int, backward: bool = False) -> int:
    """The occupancy guaranteed by the selective-scan kernel's launch bounds (kMinBlocks)."""
    threads = scan_threads(length)
    if backward:
        return 3 if threads == 128 else 2
    return 5 if threads < 128 else 3


def l1_share(batch: int, blocks_per_sm: int, sm_count: int) -> float:
    """Share of a batch-shared operand's loads that reach L2 (module docstring): d / r."""
    distinct = min(blocks_per_sm, batch // gcd(batch, sm_count))
    return distinct / blocks_per_sm


def mamba1_scan_l2_reread_share(dims: Mapping[str, int], dtype: str, mode: str, sm_count: int) -> float:
    """Share of ``execution.mamba1_scan_l2_rereads`` that the L2 serves (module docstring): the loads of
    B and C of each pass at that pass's share, the backward's atomics in full."""
    if mode == "decode":
        return 1.0
    b, e_, l_, n = (int(dims[k]) for k in ("B", "E", "L", "N"))
    loads = 2.0 * b * e_ * l_ * n * nbytes(dtype)  # B and C re-read by one pass
    atomics = 2.0 * b * e_ * l_ * n * nbytes("fp32")
    fwd = loads * l1_share(b, scan_blocks_per_sm(l_), sm_count)
    bwd = loads * l1_share(b, scan_blocks_per_sm(l_, backward=True), sm_count) + atomics
    served, total = {"fwd": (fwd, loads), "bwd": (bwd, loads + atomics),
                     "fwdbwd": (fwd + bwd, 2 * loads + atomics)}[mode]
    return served / total


def l2_reread_share(op: str, impl: str, dims: Mapping[str, int], dtype: str, mode: str,
                    backend: str | None = None, sm_count: float | None = None) -> float:
    """Share of one call's cache re-reads (``execution.l2_reread_bytes``) that reach the device-wide cache;
    1 where no sharing is modelled or the SM count is unknown."""
    if not sm_count or op != "mamba1_scan" or impl != "fused" or backend not in (None, "mamba_ssm.selective_scan_cuda"):
        return 1.0
    return mamba1_scan_l2_reread_share(dims, dtype, mode, int(sm_count))
