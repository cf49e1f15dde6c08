"""The sequential-chain term of the achievable model: a kernel whose programs each loop over steps
(tokens, chunks) with a dependence from one step to the next cannot finish before its longest
program's chain of steps does, however little work each step holds.

For a kernel of ``programs`` programs (CTAs) that each run ``steps`` dependent steps, on a device
that holds ``slots`` = SMs x ``programs_per_sm`` programs at once:

    T_chain = steps x ceil(programs / slots) x t_step

t_step is the time of one step of that kernel class (``compute.chain_step.<class>`` of the spec,
``hwspecs.schema.CHAIN_CLASSES``). While programs <= slots every program runs at once and the time
is the chain of one program; the engines and the memory system then sit mostly idle, which the
throughput terms (``achievable.py``) cannot see: they would run the same work on every SM. When the
programs fill the device many times over, the throughput terms exceed T_chain and bind instead.

Where t_step comes from. On the H200 each class's value is an attained latency: the slope of
measured time over steps between two measured cases of one kernel at one grid (the spec's
``measured:`` entries name the cases, the date and the method). That slope is a physical quantity
of the kernel class (the step's dependent memory round trips, warp reductions, layout conversions
and barriers), but it is derived from measurements, not from a probe or a datasheet: for these two
kernel classes the achievable estimate is not free of fitted parameters, and only their other shapes
and grids are predictions. For scale: one token step of fla's one-warp recurrence (1.30 us) is 3.7 x
the H200's DRAM load-to-use latency (351.5 ns, ``memory.dram.latency``); one 64-token chunk of
Mamba-3's SISO kernel (10.0 us) holds two passes of loads, five tile matmuls and the state update.

Kernel classes (grids and loops read from the kernels' sources):

- ``token_recurrent_warp``: fla ``fused_recurrent_gated_delta_rule_fwd_kernel``
  (fla/ops/gated_delta_rule/fused_recurrent.py): grid (NV x B x HV,) with NV = ceil(V / BV),
  BV = min(8, next_pow2(V)), ``num_warps=1``; each program loops ``for _ in tl.range(0, T)`` over
  the tokens with its [K, BV] state slice in registers: steps = L (1 for a decode step).
  Programs per SM: at most 32 resident blocks per SM on compute capability 9.0 (CUDA C++ Programming
  Guide, technical specifications per compute capability); the registers may allow fewer, so the
  term is optimistic where the grid exceeds 132 x 32 programs (where the throughput terms bind anyway).
- ``chunk_recurrent_cta``: mamba-ssm ``mamba3_siso_fwd_kernel`` (mamba_ssm/ops/triton/mamba3/
  mamba3_siso_fwd.py): grid (H, B); each program runs two loops over the L / 64 chunks (the
  preprocessing of q, k; then the chunk outputs and the state update, state in registers): one step =
  one chunk through both. Programs per SM: 1, as measured: at B = 4 the H = 64 grid (256 programs)
  takes 1.79 x (L = 2048) and 1.86 x (L = 8192) the time of the H = 32 grid (128 programs), two waves
  against one (results/h200/2026-12-02/default/run-20261202T172122.267473Z-1902.jsonl).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..hwspecs.schema import CHAIN_CLASSES

# Resident blocks per SM on compute capability 9.0 (CUDA C++ Programming Guide, Table "Technical
# Specifications per Compute Capability": maximum number of resident blocks per SM, 32)
SM90_MAX_BLOCKS_PER_SM = 32
# mamba-ssm Mamba-3 SISO: tokens per chunk (mamba3_siso_combined's chunk_size=64; the cost rule's
# analytic/ops/mamba3/cost.py SISO_CHUNK, which imports the registry, hence not imported here;
# tests/test_chain.py checks they agree)
SISO_CHUNK = 64
# fla fused_recurrent: the value block of one program (BV = min(8, next_pow2(V)))
FLA_RECURRENT_BV = 8


@dataclass(frozen=True)
class Chain:
    """One kernel's sequential chain: ``steps`` dependent steps in each of ``programs`` programs, of
    which ``programs_per_sm`` fit on one SM at once, of kernel class ``cls`` (CHAIN_CLASSES)."""

    cls: str
    steps: float
    programs: float
    programs_per_sm: float

    def __post_init__(self):
        if self.cls not in CHAIN_CLASSES:
            raise ValueError(f"unknown chain class {self.cls!r}; known: {CHAIN_CLASSES}")

    @property
    def key(self) -> str:
        return f"compute.chain_step.{self.cls}"


def chain_time(chain: Chain, sm_count, step_s):
    """T_chain = steps x ceil(programs / (sm_count x programs_per_sm)) x step_s (module docstring);
    ``sm_count`` and ``step_s`` may be arrays (one per spec); an unknown (NaN) step gives 0."""
    slots = np.asarray(sm_count, dtype=float) * chain.programs_per_sm
    waves = np.ceil(chain.programs / slots)
    return np.nan_to_num(chain.steps * waves * np.asarray(step_s, dtype=float), nan=0.0)


def _next_pow2(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


def fla_recurrent_chain(dims: Mapping[str, int], mode: str) -> Chain | None:
    """fla's fused recurrent gated delta rule, forward and decode (the backward is another kernel)."""
    if mode not in ("fwd", "decode"):
        return None
    v = int(dims.get("Pv", dims["P"]))
    nv = math.ceil(v / min(FLA_RECURRENT_BV, _next_pow2(v)))
    steps = 1 if mode == "decode" else int(dims["L"])
    return Chain("token_recurrent_warp", steps, nv * int(dims["B"]) * int(dims["H"]), SM90_MAX_BLOCKS_PER_SM)


def mamba3_siso_chain(dims: Mapping[str, int], mode: str) -> Chain | None:
    """mamba-ssm's Mamba-3 SISO forward kernel (decode runs mamba3_siso_step, the backward other kernels)."""
    if mode != "fwd":
        return None
    return Chain("chunk_recurrent_cta", math.ceil(int(dims["L"]) / SISO_CHUNK),
                 int(dims["B"]) * int(dims["H"]), 1)
