"""mamba-ssm's chunked-SSD chunk scan as an intake-paced chain of the achievable model (``chain.py``, class
``tile_scan_cta``).

``_chunk_scan_fwd_kernel`` (mamba_ssm/ops/triton/ssd_chunk_scan.py) runs one program per (row block of BLOCK_SIZE_M
rows x column block of BLOCK_SIZE_N head-dim columns, batch x chunk, head). A program of row block m loads its C
rows [BLOCK_SIZE_M, N] and the state entering the chunk [N, BLOCK_SIZE_N] (the inter-chunk term), then walks the
key blocks up to its diagonal, each a CB tile [BLOCK_SIZE_M, BLOCK_SIZE_K] (fp32) and an x tile [BLOCK_SIZE_K,
BLOCK_SIZE_N] with the key rows' dt and dA_cumsum (fp32). With one group (G = 1) every head's programs load the
group's CB and C again, and each column block loads them once more: the kernel moves several times the bytes the
stage's cost counts once (``ops/ssd/stages.py``), and nearly all of them come from L2.

The ncu audit of 2026-12-05 (results/h200/2026-12-05/kernel-audit-fill: B = 16, L = 2048, H = 24, P = 64, N = 128,
chunk 256, the autotuner's pick BLOCK_SIZE_M 32, BLOCK_SIZE_N 64, 2 warps: grid 8 x 128 x 24) found it bound by the
cache hierarchy: L1/TEX 76 %, L2 70 %, DRAM 37 %, the SM issuing 46 % of the time, 298.5 us against the stage's
74 us DRAM-bound estimate. Its tile loads, counted per (batch, chunk, head) (``scan_tile_bytes``: 489 KiB at
that shape), came in at 5.0 TB/s over the 132 SMs, 57 % of the streaming L2 read probe: the programs resident
on an SM share one intake, as the Mamba-1 scan's blocks do (``lane_state_cta``). The chain is that intake: each
(batch, chunk, head) is one program of one step taking in ``scan_tile_bytes`` (its row and column blocks
together), the programs flowing through the SMs, T = ceil(B nc H / SMs) x KiB x the class's time per KiB
(``compute.chain_step.tile_scan_cta``, derived from the audited kernel: 25.43 ns per KiB on the H200; label
``l2``).

The tile is the autotuner's pick, which the first shape a process runs at (chunk, head dim, state) fixes for
every later one (measure/autotune_picks.py): BLOCK_SIZE_M 32, BLOCK_SIZE_N 64 on the H200 (train-issue run,
2026-12-05) and on the H100 (results/h100/2026-12-05/transfer); another pick moves the bytes (BLOCK_SIZE_M 64:
0.72x at the audited shape) and the time with them: the same shape's kernel took 303, 395 and 619 us in three
sessions of 2026-12-03 whose picks were not recorded. Out of sample on the H200 whole-model profiles
(results/h200/2026-12-03/models/characterize/ssd_stage_gap.json, fastest file; H = 24 unless said): B = 1, 4, 8
at L = 2048 took 23.2, 97.0 and 147.1 us against 24.9, 74.6 and 149.2; B = 1 at L = 8192 75.3 against 74.6;
B = 4, L = 4096, H = 32 193.5 against 199.0; B = 4 at L = 32768 1,328 against 1,169. Below one program per SM
the lone programs take longer than their share of an intake (B = 1, L = 1024, H = 32: 128 programs, 18.8 us
against 12.4), as the Mamba-1 scan's last blocks do: not modelled.

The whole call (``ssd_chunked_chain``): its four other kernels (chunk cumsum, CB product, chunk state, state
passing) run before the scan, one after another, so they are added, not overlapped with it: one streaming link
of their stage ops' executed bytes at the DRAM bandwidth (each of them is DRAM-bound or slower: the chunk state,
also cache-bound, takes 1.7-2x its DRAM time in the profiles), then the scan. On the H200's GPU-bound forward calls
(2026-12-02/05) the call's estimate went from 28-41 % under the measurement to 7-19 % under (B = 4, L = 16384,
H = 80: 1.95 -> 2.57 ms against 3.15 measured); what is left is the chunk state's cache-bound excess and the CB
product's (1.5x). The backward kernels have no such term; a forward-backward call carries the forward's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from .chain import KIB, ROW_LOOP, Chain, ssd_state_update_chain
from .conventions import nbytes

# the autotuner's pick of _chunk_scan_fwd_kernel recorded on the H200 and the H100 (module docstring)
SCAN_BLOCK_M = 32
SCAN_BLOCK_N = 64
SCAN_CLASS = "tile_scan_cta"
# the call's kernels before the chunk scan, each a stage op of its own (ops/ssd/stages.py)
PRE_SCAN_STAGES = ("ssd_chunk_cumsum", "ssd_bmm", "ssd_chunk_state", "ssd_state_passing")


def scan_tile_bytes(chunk: int, headdim: int, dstate: int, dtype: str) -> float:
    """Bytes the programs of one (batch, chunk, head) load: per row block m (0-based) and column block, the C
    rows and the entering state tile at the storage width e, then (m + 1) BLOCK_SIZE_M key rows of the CB tile
    (fp32), the x tile (e), and the key rows' dt and dA_cumsum (fp32)."""
    e, f32 = nbytes(dtype), nbytes("fp32")
    n_rows = -(-chunk // SCAN_BLOCK_M)
    n_cols = -(-headdim // SCAN_BLOCK_N)
    total = 0.0
    for m in range(n_rows):
        keys = min((m + 1) * SCAN_BLOCK_M, chunk)
        total += (SCAN_BLOCK_M * dstate * e + dstate * SCAN_BLOCK_N * e
                  + SCAN_BLOCK_M * keys * f32 + keys * SCAN_BLOCK_N * e + 2 * keys * f32)
    return n_cols * total


def ssd_chunk_scan_chain(dims: Mapping[str, int], mode: str, dtype: str = "bf16") -> Chain | None:
    """The chunk scan's intake (module docstring) for a forward or forward-backward call; None for other modes
    and for a call with a zero dimension."""
    if mode not in ("fwd", "fwdbwd"):
        return None
    b, l_, h, p, n, c = (int(dims[k]) for k in ("B", "L", "H", "P", "N", "C"))
    if min(b, l_, h, p, n, c) <= 0:
        return None
    programs = b * -(-l_ // c) * h
    return Chain(SCAN_CLASS, 1, programs, 1, fluid=True, shared_kib=scan_tile_bytes(c, p, n, dtype) / KIB,
                 label="l2")


def pre_scan_bytes(dims: Mapping[str, int], dtype: str) -> float:
    """Executed DRAM bytes of the call's four kernels before the chunk scan (``PRE_SCAN_STAGES``, their stage ops'
    counts at the length padded to whole chunks)."""
    from .registry import cost as analytic_cost  # the registry imports this module
    from .registry import get_op

    c = int(dims["C"])
    padded = {**dims, "L": -(-int(dims["L"]) // c) * c}
    return float(sum(analytic_cost(op, {k: padded[k] for k in get_op(op).dims}, impl="triton", mode="fwd",
                                   dtype=dtype).executed_bytes for op in PRE_SCAN_STAGES))


def ssd_chunked_chain(dims: Mapping[str, int], mode: str, dtype: str = "bf16") -> Chain | None:
    """The chain of a whole chunked-SSD call: the decode state update's programs (``chain.ssd_state_update_chain``),
    or the forward's kernels in launch order: the four before the chunk scan as one streaming link (their bytes at
    the DRAM bandwidth, a ``ROW_LOOP`` of one row; each of them is DRAM-bound or slower, module docstring), then
    the chunk scan's intake."""
    if mode == "decode":
        return ssd_state_update_chain(dims, mode, dtype)
    scan = ssd_chunk_scan_chain(dims, mode, dtype)
    if scan is None:
        return None
    pre = Chain(ROW_LOOP, 1, 1, 1, row_bytes=pre_scan_bytes(dims, dtype), memory_phases=0, label="dram")
    return dataclasses.replace(pre, then=scan)
