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

The H200 evidence (results/h200/2026-12-02, energy windows): causal_conv1d_fn bf16 forward at
B = 64, E = 4096, L = 128 drew 2.1x and at B = 32, L = 256 1.7x the energy its counted work predicted,
while the same kernel at L >= 1024 was within ~10%.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .conventions import nbytes

THREADS = 128          # kNThreads of causal_conv1d_fwd / bwd
VECTOR_BYTES = 16      # kNBytes: one 16-byte vector load per thread


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


def executed_work_factor(op: str, impl: str, dims: Mapping[str, int], dtype: str, mode: str,
                         backend: str | None = None) -> float:
    """Executed over counted vector and special-function work of one call (module docstring); 1 where the
    kernel computes only the op's elements."""
    fn = PADDED.get((op, impl, backend))
    return 1.0 if fn is None else float(fn(dims, dtype, mode))
