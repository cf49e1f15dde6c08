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

- ``lane_chunk_cta``: causal-conv1d's channel-first forward kernel (``causal_conv1d_fwd_kernel``,
  csrc/causal_conv1d_fwd.cu): grid (B, E), one block of kNThreads = 128 threads per (batch, channel)
  lane; each block loops over its lane's L in chunks of 128 x kNElts elements (one 16-byte load per
  thread: kNElts = 8 for 2-byte, 4 for 4-byte types), each chunk a load, four barriers and a store:
  steps = ceil(L / (128 kNElts)). Programs per SM: 16, the thread limit (2048 resident threads per SM on
  compute capability 9.0 / 128; the 2 KiB of shared memory per block allow more; the registers may allow
  fewer). A short sequence leaves each block one short step (at L = 128 only 16 of its 128 threads load
  256 bytes), so a large batch of short sequences is a long queue of tiny blocks whose lifetime (launch,
  round trip, exit), not the bandwidth, sets the time: B = 64, L = 128, E = 4096 (262144 blocks, 125 waves)
  takes 237 us on the H200 where its 134 MB would stream in 32 us. The step (1.87 us, five DRAM
  load-to-use latencies) is derived from two such cases (the spec's ``measured:`` entry); from L = 2048
  on, the streaming terms exceed the chain. The channel-last kernel (``causal_conv1d_channellast_fwd_kernel``:
  64 x 64 tiles of (L, E)) has no such chain.
- ``lane_chunk_cta_unaligned``: the same kernel where L is not a multiple of kNElts. The launcher compiles it
  with kIsVecLoad = (L % kNElts == 0); otherwise each chunk comes in through cub's bounds-checked
  ``BlockLoad`` of one element per item and goes out through its ``BlockStore``, a longer step. Its own step,
  read off two measured unaligned cases (the spec's ``measured:`` entry): on the H200 at E = 768 (results/h200/
  2026-12-04/vim-scan, conv-unaligned) L = 196 took 307.8 us against 179.6 us at L = 200 (one step in 94 waves),
  L = 3135 284.7 us against 178.2 us at L = 3136 (four steps in 24 waves).
- ``lane_chunk_cta_bwd`` and ``lane_chunk_cta_bwd_unaligned``: causal-conv1d's channel-first backward kernel
  (``causal_conv1d_bwd_kernel``, csrc/causal_conv1d_bwd.cu), on the forward's grid and blocks (occupancy taken
  as the forward's thread limit: its registers were not read), walking its lane's chunks in reverse: each
  chunk loads x and dout, recomputes the SiLU'd output, exchanges dout across threads through shared memory
  (four barriers), stores dx and adds to the thread's dweight; after the last chunk the block sums dweight
  (width 4) and dbias over its 128 threads (five barriers and block reductions) and adds them to the
  channel's gradients with atomics. Steps = chunks + 1: the closing reductions take about one chunk step.
  The steps are read off whole-model profiles (kernel time per call, torch.profiler), aligned and unaligned
  (the spec's ``measured:`` entries): at E = 96 (graph-mamba-style train) one chunk at B = 256, L = 128 and at
  B = 128, L = 512 give 2.93 and 2.92 us per step; the two-chunk call of mamba-130m train (B = 8, L = 2048,
  E = 1536, 50.0 us) is 5 % below that estimate; the unaligned one-chunk call of vim-s-bidir train (B = 128,
  L = 196, E = 768, 326.6 us: 47 waves) gives 3.47 us. Before, the backward had no chain, and the vim train
  step's conv1d (11.8 % of its profiled time) was predicted at 4.5 %.

- ``state_tile_cta``: mamba-ssm's decode state update ``_selective_scan_update_kernel``
  (mamba_ssm/ops/triton/selective_state_update.py): grid (ceil(P / BLOCK_SIZE_M), B, H), each program
  one [BLOCK_SIZE_M, N] tile of the state, which it loads with the step's dt, A, B, C, x, updates and
  stores back: one step per program (BLOCK_SIZE_M = 32, 16, 8, 4 for N <= 16, 32, 64, 128; 4 warps).
  Programs per SM: 16, the thread limit (2048 / 128 threads). The programs are many and short, and the
  block scheduler refills a slot as soon as its program exits, so the kernel runs at a throughput of
  programs, not in whole waves (``Chain.fluid``): T = programs / slots x t_step. Its time follows the
  grid, not the bytes: on the H200 the fp32-state cases of 2026-12-02 (N = 128, P = 64: B = 16 to 256 at
  H = 24, 80 and 128) take 2.42 us per 2112 programs at every size, 3.59 TB/s of state traffic, and the
  bf16 state of a model's inference cache (half the bytes per program) takes the same time per program
  (the Mamba-2 whole-model decode at B = 32: 16.2 us per kernel where its 25 MB would stream in 6 us):
  each program keeps only its tile's loads in flight, and its lifetime under load (a few dependent DRAM
  round trips) sets the rate. The step is the slope of time over programs / slots between those cases
  (the spec's ``measured:`` entry). Measured at N = 128 only: Mamba-1's [32, 16] tiles (N = 16) are
  not given the chain.
- ``lane_state_cta``: mamba-ssm's selective-scan kernels (csrc/selective_scan/selective_scan_fwd_kernel.cuh,
  selective_scan_bwd_kernel.cuh, mamba-ssm 2.3.2): grid (B, E), one block per (batch, channel) lane of
  kNThreads threads x kNItems items (by L: <= 128: 32 x 4; <= 256: 32 x 8; <= 512: 32 x 16; <= 1024: 64 x 16;
  else 128 x 16, chunks of 2048). For each chunk and each state n the block loads that chunk's B[b, n, :] and
  C[b, n, :] rows (16-byte loads, warp-transposed through shared memory), takes exp2 of its items, runs a
  block scan (carried over chunks by a running prefix) and adds to its outputs: steps = ceil(L / chunk) x N,
  one after another. Blocks per SM from the kernels' registers and shared memory (ptxas -v of the sm_90
  build, nvcc 13.0, the measured variant: even length, variable B and C, z; ``MAMBA1_FWD_RESOURCES``): 4
  (2-byte types) and 3 (fp32) at 128 threads, 3 for the backward. What paces a step is not its latency but
  the SM's intake of the steps' B and C rows: over the measured grids the time per step, divided by the
  blocks per SM and by the step's B and C bytes, is one constant (34.6 - 36.7 ns per KiB at grids of 16 waves
  and more: 4 blocks of 8 KiB (bf16, fp16, L = 2048), 3 blocks of 16 KiB (fp32, L = 2048), 8 and 6 blocks
  of 4 and 8 KiB (L = 1024), 23 one-warp blocks of 1 KiB (bf16, fp16, L = 256); results/h200/2026-12-02
  and 2026-12-03), so the fp32 scan takes twice the bf16 time at the same exponential
  count and the same occupancy-independent rate: the blocks resident on an SM share one intake.
  The blocks flow through an SM's slots (the scheduler starts a block as one leaves, and the blocks of a
  grid drift apart), so an SM's time is the KiB-steps of its ceil(programs / SMs) blocks at the shared rate,
  not whole waves; and the last block on an SM, left alone, does not step faster: a 128-thread block's own
  step (load the two rows, transpose them through shared memory, 16 exponentials and a block scan per thread)
  takes about as long as its share of the intake, so it adds k - 1 blocks' worth of shared steps after the
  others have left (``Chain.tail_programs``). The evidence: at L = 2048 and B = 1 the measured time over
  E = 1536 - 8192 is a line in ceil(E / 132) of 4.63 us per block with an intercept of 12.8 us, where
  3 x 16 x 8 KiB x 36 ns = 13.8 us; whole waves put the E = 1536 case 12 % below its measurement. The smaller
  tiles (32 and 64 threads, 8 - 23 blocks per SM) end without that tail (their measured grids follow the fluid
  count within 1 %: B = 32, L = 256 and B = 8, L = 1024; the host-bound B = 1, E = 4096, L = 512 call took
  45 us, below the tail's 59 us).
  T = steps x (ceil(programs / SMs) + tail) x step KiB x t_KiB, the step time of the class
  (``compute.chain_step.lane_state_cta``) being per KiB of one SM's intake (``Chain.shared_kib``); the label
  where it binds is ``l2`` (the B and C rows are re-read from L2 by every channel's block: they are the
  ``execution.mamba1_scan_l2_rereads`` bytes, taken in at about 3.7 TB/s over 132 SMs against 8.7 TB/s of
  the streaming L2 read probe). The backward kernel (``lane_state_cta_bwd``) steps the same way in reverse,
  loading B and C and adding its dB, dC contributions with fp32 atomics: its step takes in 2 x chunk x (e + 4)
  bytes, at its own time per KiB, longer than the forward's (48.7 against 35.9 ns on the H200): each of its
  steps also re-runs the chunk's forward scan from the saved chunk state before the reverse scan, and reduces
  dB and dC over the block before the atomics (selective_scan_bwd_kernel.cuh). Measured as the forward-backward
  calls less the forward's chain, its time per KiB is one constant within 4 % over five calls of two tiles,
  one and two chunks (47.1 - 48.9 ns; results/h200/2026-12-02/default, 2026-12-03/fill). A forward-backward
  call runs the forward kernel, then the backward one (``Chain.then``, each at its class's step). Not
  modelled: the intake is slower for several chunks per lane, the more so at one batch (at L = 8192 the
  estimate is 9 - 13 % below the B = 4 cases and from 2 % above to 16 % below the B = 1 ones, the lower the
  larger E; 16 % below at L = 32768, B = 1); the cause is not isolated (candidates: the per-chunk u, delta,
  z loads and out stores; all SMs reading one batch's rows at once; the B and C rows of a batch fitting the
  SM's L1 at one chunk and not at four); a
  one-warp block's own step latency at L = 128 (49.8 ns per KiB: the estimate 29 % below) and the fp32
  one-warp blocks at L = 256, faster than the intake (28.9 ns per KiB: the estimate 24 % above); the backward
  kernel at one batch and several chunks, slower like the forward (B = 1, L = 8192: 54.3 ns per KiB, the
  estimate 8 % below).
- ``lane_state_cta_uneven``: the same kernels where L is not a whole number of chunks. The launchers compile
  them with kIsEvenLen = (L % chunk == 0), and the uneven variant loads every B and C row (``load_weight``) and
  its inputs through cub's bounds-checked ``BlockLoad`` of one element per item instead of the 16-byte vector
  loads: the same bytes through 8 times the load instructions, a slower intake. Its own step per KiB, read off
  two measured uneven cases (the spec's ``measured:`` entry; the registers and shared memory of the even
  variant are kept): on the H200 at the vision model's shapes (E = 768, N = 16; results/h200/2026-12-04/vim-scan)
  L = 196 took 1537 us against 856 us at L = 256 (the same one chunk of 256 tokens, 64.4 against 35.9 ns per KiB),
  L = 3136 5556 us against 3781 us at L = 4096 (two chunks of 2048: 57.7 against 39.3 ns). The backward kernel
  takes the forward's uneven step (its loads take the same path; not measured on its own: the one uneven
  forward-backward call, B = 128, E = 768, L = 196, is 6 % above the estimate).

Two classes have no step parameter of their own: their step time follows from the engines' rates (and, where a
step moves its operands through shared memory in series with them, memory.shared.bandwidth: ``TILE_LOOP``) or from
the memory system's latency and bandwidth (``ROW_LOOP``).

``ROW_LOOP``: mamba-ssm's Triton norm backward ``_layer_norm_bwd_kernel`` (mamba_ssm/ops/triton/layer_norm.py,
``_layer_norm_bwd``: RMSNorm and LayerNorm, with or without the fused residual): grid (SMs,), rows_per_program =
ceil(B L / SMs); each program loops ``for row in range(row_start, row_end)``, one row of D elements per step
(load x, dy and the saved rstd, two reductions over the row, store dx, add to the program's partial dw), with no
prefetch of the next row: T = ceil(B L / SMs) x t_row, written as B L one-step programs one per SM (the same
waves). Mamba-2's gated norm backward (mamba_ssm/ops/triton/layernorm_gated.py ``_layer_norm_bwd``) loops the
same way on its own grid: num_warps = min(max(BLOCK_N / 256, 1), 8) with BLOCK_N = next_pow2(D),
ceil(SMs x ceil(4 / num_warps)) programs (one group), so ceil(4 / num_warps) programs share an SM where D < 1024
(``gated_norm_bwd_chain``). The forwards (one row per program) have no loop. One row is a latency-bound
exchange with DRAM:

    t_row = phases x memory.dram.latency + row_bytes / (memory.dram.bandwidth / programs running at once)

row_bytes is what the backward moves per row (read and written: the op's backward bytes over its B L rows,
which tests/test_chain.py checks against the cost rules), at the program's share of the device's bandwidth
(min(B L, slots) programs run at once); phases is the number of dependent memory round trips a row waits
for: 2 for the norm (the intercept of the measured row time over row bytes, 0.69-0.71 us on the H200 at
D = 768-4096, is two DRAM latencies of 351.5 ns), 1 more where the kernel adds the residual's gradient (the
``dresidual`` load comes after the row's reductions, layer_norm.py; ``fused_residual_bwd_chain``, the
``fused_norm`` add of mamba-ssm's fused_add_norm, its fp32 residual stream's 8 bytes per element). On the
H200 (results/h200/2026-12-05/norm-rope, percall_split_2.json: profiled kernel times per call) this is
within -6 to +11 % of ten op calls whose rows come from DRAM (rmsnorm bf16 at B = 8, D = 768-4096 and B = 32,
D = 768 and 2048, fp32 at B = 32, D = 768; the gated norm at D = 512 (two programs per SM), 1536 (B = 8 and 32)
and 4096), and within 0-3 % of the whole-model profiles with the fused residual (D = 768: mamba-130m and
Transformer++ train; D = 384: vim-s-bidir), where the earlier spec step of 1.376 us per row, read off the two
D = 768 profiles, put the op call at B = 32 76 % over. A forward-backward call runs the forward kernel's bytes at
the full bandwidth first, then the loop: seven such calls timed as graph replays (results/h200/2026-12-05/
norm-graph), whose estimates were written before the run, land 12 % under to 2 % over. Not modelled: rows still
in L2 (two op calls profiled back to back whose 19-38 MB stay L2-resident between calls, B = 2, D = 768 and
B = 8, D = 384: 0.48 and 0.43 us per row where this gives 0.85 and 0.78, 78-80 % over; graph-mamba-style's
D = 96 training step, 0.59-0.61 us per row where this gives 1.10, 81-85 % over), and the gated backward inside
mamba-ssm's fused Mamba-2 path (the whole-model profiles: ~247 us per call at B L = 16384, D = 1536, where this
gives 148 us and the op call took 154 us; that path also recomputes the norm's output for out_proj's weight
gradient).

FlashAttention-2's forward and backward tile loops (class ``TILE_LOOP``) are in ``chain_fa2.py``; cuDNN's and
SDPA's memory-efficient ones in ``chain_cudnn.py`` and ``chain_memeff.py``. A tile loop's CTAs share their SM's
engines with the others resident there: min(programs_per_sm, ceil(programs / SMs)) of them, so a grid of no more
CTAs than SMs gives each its SM's full rates. Programs of different lengths (causal tiles) are scheduled as the
block scheduler does where the chain knows the grid's order (``Chain.group_steps``: each CTA in grid order to
the slot that frees first, ``list_schedule``); else (cuDNN's persistent kernels, whose own tile schedulers hand out
the work) by Graham's bound, (total - longest) / slots + longest steps. Programs of one length run in whole waves.

"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..hwspecs.schema import CHAIN_CLASSES
from .block_schedule import list_schedule
from .conventions import nbytes
from .fa2_split import split_kv_parts

# Resident blocks per SM on compute capability 9.0 (CUDA C++ Programming Guide, Table "Technical
# Specifications per Compute Capability": maximum number of resident blocks per SM, 32)
SM90_MAX_BLOCKS_PER_SM = 32
# mamba-ssm Mamba-3 SISO: tokens per chunk (mamba3_siso_combined's chunk_size=64; the cost rule's
# analytic/ops/mamba3/cost.py SISO_CHUNK, which imports the registry, hence not imported here;
# tests/test_chain.py checks they agree)
SISO_CHUNK = 64
# fla fused_recurrent: the value block of one program (BV = min(8, next_pow2(V)))
FLA_RECURRENT_BV = 8
# causal-conv1d forward (csrc/causal_conv1d_fwd.cu): threads per block (kNThreads), bytes each thread loads
# per chunk (kNElts x sizeof(input_t) = 16), and resident threads per SM on compute capability 9.0 (CUDA C++
# Programming Guide, technical specifications per compute capability: 2048)
CONV1D_FWD_THREADS = 128
CONV1D_FWD_LOAD_BYTES = 16
SM90_MAX_THREADS_PER_SM = 2048
# mamba-ssm's selective scan (module docstring, lane_state_cta): (kNThreads, kNItems) by sequence length
# (selective_scan_{fwd,bwd}_cuda: the first bound L fits under), and per kernel, element size and
# (kNThreads, kNItems): (registers per thread, dynamic shared memory bytes per block) of the measured variant
# (even length, variable B and C, with z; bwd also delta_softplus), from ptxas -v of mamba-ssm 2.3.2.post1
# compiled for sm_90 with nvcc 13.0 and the package's flags, and the launcher's kSmemSize
MAMBA1_SCAN_TILES = ((128, 32, 4), (256, 32, 8), (512, 32, 16), (1024, 64, 16), (None, 128, 16))
# the tile whose lone block steps no faster than its share of the SM's intake (module docstring, lane_state_cta):
# the last block on an SM adds (blocks per SM - 1) blocks' worth of shared steps
MAMBA1_KNEE_THREADS = 128
MAMBA1_FWD_RESOURCES = {
    2: {(32, 4): (61, 2592), (32, 8): (84, 3136), (32, 16): (125, 4192), (64, 16): (128, 6304),
        (128, 16): (128, 10560)},
    4: {(32, 4): (64, 3104), (32, 8): (93, 4192), (32, 16): (141, 6304), (64, 16): (145, 10528),
        (128, 16): (144, 19008)},
}
MAMBA1_BWD_RESOURCES = {
    2: {(32, 4): (138, 8376), (32, 8): (192, 10008), (32, 16): (255, 13176), (64, 16): (254, 20160),
        (128, 16): (168, 34640)},
    4: {(32, 4): (125, 8888), (32, 8): (184, 11064), (32, 16): (245, 15288), (64, 16): (254, 24384),
        (128, 16): (168, 43088)},
}
# Compute capability 9.0 (CUDA C++ Programming Guide, technical specifications per compute capability; the
# occupancy calculator's allocation rules): 64 K 32-bit registers per SM, allocated per warp in units of 256
# (8 per thread); 228 KiB of shared memory per SM, 1 KiB of it reserved per resident block
SM90_REGISTERS_PER_SM = 65536
SM90_REGISTER_UNIT = 8
SM90_SMEM_PER_SM = 228 * 1024
SM90_SMEM_RESERVED_PER_BLOCK = 1024
# the unit of a lane_state_cta step: its spec value is the time per KiB of one SM's intake
KIB = 1024
# mamba-ssm's Triton norms fuse a row of at most 64 KiB (layer_norm.py, layernorm_gated.py: MAX_FUSED_SIZE)
LAYERNORM_MAX_FUSED_BYTES = 65536
# The chain classes whose step time follows from the engine rates, or from the memory's latency and bandwidth,
# not from a spec parameter
TILE_LOOP = "tile_loop"
ROW_LOOP = "row_loop"
# dependent DRAM round trips of one row of mamba-ssm's Triton norm backward, and what the fused residual's
# gradient adds (module docstring, ROW_LOOP); the fp32 residual stream's bytes per element in that backward
# (dresidual read, dresidual_in written)
NORM_BWD_PHASES = 2
RESIDUAL_BWD_PHASES = 1
RESIDUAL_BWD_BYTES_PER_ELEMENT = 4 + 4
# the spec key of the shared-memory bandwidth a tile loop's step moves its operands at
SMEM_BANDWIDTH_KEY = "memory.shared.bandwidth"
# the spec key of the device-wide cache's round trip a tile loop's step waits for (``Chain.l2_round_trips``)
L2_LATENCY_KEY = "memory.l2.latency"


def chain_only_key(key: str) -> bool:
    """Whether spec key ``key`` enters an estimate only through a sequential chain (a class's step time, the SM
    count, the shared-memory bandwidth of a tile loop's step): an estimate names it as not modelled only where
    its work has such a chain."""
    return key.startswith("compute.chain_step.") or key in ("compute.sm_count", SMEM_BANDWIDTH_KEY, L2_LATENCY_KEY)


@dataclass(frozen=True)
class Chain:
    """One kernel's sequential chain: ``steps`` dependent steps in each of ``programs`` programs, of
    which ``programs_per_sm`` fit on one SM at once, of kernel class ``cls`` (CHAIN_CLASSES)."""

    cls: str
    steps: float
    programs: float
    programs_per_sm: float
    # TILE_LOOP only: steps summed over the programs when they differ (the longest, ``steps``, is
    # dispatched last); one step's work (tensor FLOPs, vector FLOPs, transcendentals) at the CTA's
    # share of its SM, the tensor FLOPs at the mma.sync rate of ``dtype`` where ``mma_sync``
    total_steps: float | None = None
    step_work: tuple[float, float, float] | None = None
    dtype: str = "bf16"
    mma_sync: bool = False
    # TILE_LOOP only: the split-KV kernel FlashAttention runs instead where its grid is small (fa2_split.py), as a
    # chain of programs = the grid's 64-row query blocks and steps = its key blocks all told; None: never splits
    split: Chain | None = None
    # programs flow through the slots (the scheduler refills a slot as its program exits): the chain is
    # steps x programs / slots x step, not whole waves (``state_tile_cta``); with shared_kib, an SM's
    # ceil(programs / SMs) programs (``lane_state_cta``)
    fluid: bool = False
    # KiB each program takes in per step where the programs resident on an SM share one intake (an SM's time
    # is then its programs' steps x shared_kib x the class's time per KiB: lane_state_cta); None: the
    # class's step time is one program's step
    shared_kib: float | None = None
    # the class (achievable.CLASSES) one op's estimate is labelled with where this chain binds
    label: str = "latency"
    # shared_kib only: the programs' worth of shared steps the last program on an SM adds once the others have
    # left it (its own step is no shorter than the shared one; ``lane_state_cta``); 0: it speeds up alone
    tail_programs: float = 0.0
    # the chain of a kernel launched after this one (a forward-backward call's backward kernel), of its own
    # class: the chain times add, each at its class's step
    then: Chain | None = None
    # ROW_LOOP only: bytes one program moves per step (read and written), and the dependent DRAM round trips
    # each step waits for
    row_bytes: float | None = None
    memory_phases: int = 0
    # TILE_LOOP only: bytes one step moves through shared memory (the MMAs' operands, the tiles stored for the
    # next GEMM), in series with its engines at the CTA's share of the SM's shared-memory bandwidth; 0 where
    # the CTAs resident on an SM hide it (chain_fa2.py: FlashAttention-2's backward)
    smem_bytes: float = 0.0
    # TILE_LOOP only: dependent round trips to the device-wide cache one step waits for, in series with its
    # engines (memory.l2.latency each; chain_cudnn.py: cuDNN's backward, one CTA per SM with nothing to hide them)
    l2_round_trips: int = 0
    # TILE_LOOP only: the step's vector and special-function work run side by side after its tensor phase (the
    # backend's "phased" engines, execution.py) instead of one after the other
    phased: bool = False
    # TILE_LOOP only: the step counts of one group of programs in the grid's dispatch order (one (batch, head)'s
    # tiles), the grid being ``programs / len(group_steps)`` such groups one after another: the block scheduler's
    # list schedule over the slots is then simulated (``list_schedule``) instead of bounded
    group_steps: tuple[int, ...] | None = None
    # TILE_LOOP only: the step's vector and special-function work run beside its tensor phase and its
    # shared-memory operand delivery, which follow one another (the other CTA resident on the SM issues its
    # softmax while this one's MMAs and ldmatrix run: chain_fa2.py, FlashAttention-2's forward); the step is the
    # longer of the two
    side_overlapped: bool = False

    def __post_init__(self):
        if self.cls not in CHAIN_CLASSES + (TILE_LOOP, ROW_LOOP):
            raise ValueError(f"unknown chain class {self.cls!r}; known: {CHAIN_CLASSES + (TILE_LOOP, ROW_LOOP)}")
        if (self.cls == TILE_LOOP) != (self.step_work is not None):
            raise ValueError(f"chain class {self.cls!r}: step_work is given exactly for {TILE_LOOP!r}")
        if (self.cls == ROW_LOOP) != (self.row_bytes is not None):
            raise ValueError(f"chain class {self.cls!r}: row_bytes is given exactly for {ROW_LOOP!r}")

    def repeated(self, count) -> Chain:
        """The chain of ``count`` launches of this kernel one after another."""
        total = None if self.total_steps is None else self.total_steps * count
        then = None if self.then is None else self.then.repeated(count)
        return dataclasses.replace(self, steps=self.steps * count, total_steps=total, then=then)

    @property
    def launches(self) -> float:
        """How many launches of the kernel the chain stands for (``repeated`` scales ``steps``): steps over one
        launch's longest program where the grid's order is known (``group_steps``), else 1."""
        return self.steps / max(self.group_steps) if self.group_steps else 1.0

    @property
    def key(self) -> str:
        """The spec key of the step time ("" for TILE_LOOP and ROW_LOOP: derived from the engine rates, or from
        the memory's latency and bandwidth)."""
        return "" if self.cls in (TILE_LOOP, ROW_LOOP) else f"compute.chain_step.{self.cls}"

    @property
    def links(self) -> tuple[Chain, ...]:
        """This kernel's chain and those of the kernels launched after it (``then``), in order."""
        return (self,) + (() if self.then is None else self.then.links)

    @property
    def keys(self) -> tuple[str, ...]:
        """The spec keys of every link's step time, each once (the shared-memory bandwidth where a tile loop's
        step moves bytes through it; the device-wide cache's round trip where a step waits on it; a split-KV
        combine's, which only a spec's SM count decides, ``fa2_split.split_keys``)."""
        keys = [link.key for link in self.links if link.key]
        keys += [SMEM_BANDWIDTH_KEY for link in self.links if link.smem_bytes > 0]
        keys += [L2_LATENCY_KEY for link in self.links if link.l2_round_trips > 0]
        return tuple(dict.fromkeys(keys))


def chain_time(chain: Chain, sm_count, step_s):
    """T_chain = steps x ceil(programs / (sm_count x programs_per_sm)) x step_s (a fluid chain: without the
    ceil), or for programs of different lengths ((total - longest) / slots + longest) x step_s, or where the
    resident programs share the SM's intake (``Chain.shared_kib``) steps x (an SM's programs + tail_programs) x
    shared_kib x step_s, an SM's programs being ceil(programs / sm_count) where they flow through its slots
    (fluid), else ceil(programs / slots) x programs_per_sm (whole waves), plus the chain of the kernel that
    follows (``Chain.then``) (module docstring); ``sm_count`` and ``step_s`` may be arrays (one per spec);
    ``step_s`` may instead be a function of a link giving its step (the links of a chain may be of different
    classes: a forward kernel, then its backward); an unknown (NaN) step gives 0."""
    if not callable(step_s) and len({link.cls for link in chain.links}) > 1:
        raise ValueError(f"chain links of classes {[link.cls for link in chain.links]} take one step each: "
                         "give step_s as a function of the link")
    sms = np.asarray(sm_count, dtype=float)
    slots = sms * chain.programs_per_sm
    if chain.shared_kib is not None:  # the resident programs share the SM's intake of their steps' bytes
        per_sm = (np.ceil(chain.programs / sms) if chain.fluid
                  else np.ceil(chain.programs / slots) * chain.programs_per_sm)
        steps = chain.steps * (per_sm + chain.tail_programs) * chain.shared_kib
    elif chain.fluid:
        steps = chain.steps * chain.programs / slots
    elif chain.group_steps is not None:
        steps = chain.launches * np.vectorize(lambda s: list_schedule(chain.group_steps, round(chain.programs / len(
            chain.group_steps)), int(s)), otypes=[float])(slots)
    elif chain.total_steps is None or chain.total_steps == chain.programs * chain.steps:
        # programs of one length run in whole waves (Graham's bound below would add a program's length to them)
        steps = chain.steps * np.ceil(chain.programs / slots)
    else:
        steps = np.where(chain.programs <= slots, chain.steps,
                         (chain.total_steps - chain.steps) / slots + chain.steps)
    step = step_s(chain) if callable(step_s) else step_s
    t = np.nan_to_num(steps * np.asarray(step, dtype=float), nan=0.0)
    if chain.split is not None:  # the split kernel's steps but its last where the key loop splits (fa2_split.py)
        inside, _, n = split_kv_parts(chain, sms, step_s if callable(step_s) else (lambda link: step_s))
        t = np.where(n > 1, inside, t)
    return t if chain.then is None else t + chain_time(chain.then, sm_count, step_s)


def tile_step_time(chain: Chain, sm_count, rate_tensor, rate_vector, rate_sfu, smem_bw=np.nan, l2_latency=np.nan):
    """The TILE_LOOP step time: one step's work at the CTA's share of an SM's engines, its shared-memory
    bytes at its share of the SM's shared-memory bandwidth (``Chain.smem_bytes``) and its dependent round trips
    to the device-wide cache (``Chain.l2_round_trips`` x ``l2_latency``), the phases one after another (module
    docstring; with ``Chain.phased`` the vector and special-function work side by side); arguments may be
    arrays (one per spec); NaN where an engine rate the step needs is unknown. An unknown shared-memory bandwidth
    or cache latency adds nothing (the estimate names the key as not modelled): the step keeps its engines'
    time."""
    tf, vf, sf = chain.step_work
    # the CTAs that share an SM: programs_per_sm, or fewer where the grid does not fill every SM's slots (a CTA
    # alone on its SM has the SM's engines to itself)
    resident = np.minimum(chain.programs_per_sm, np.ceil(chain.programs / np.asarray(sm_count, dtype=float)))
    per_sm = np.asarray(sm_count, dtype=float) * resident  # rate / SMs / CTAs sharing the SM

    def t(work, rate):
        return 0.0 if work == 0 else work * per_sm / np.asarray(rate, dtype=float)

    smem = t(chain.smem_bytes, smem_bw)
    l2 = chain.l2_round_trips * np.asarray(l2_latency, dtype=float) if chain.l2_round_trips else 0.0
    side = np.maximum(t(vf, rate_vector), t(sf, rate_sfu)) if chain.phased else t(vf, rate_vector) + t(sf, rate_sfu)
    delivered = t(tf, rate_tensor) + np.where(np.isnan(smem), 0.0, smem) + np.where(np.isnan(l2), 0.0, l2)
    # a lone CTA has no neighbour whose softmax fills its MMA and operand-delivery phases
    return np.where(chain.side_overlapped & (resident >= 2), np.maximum(delivered, side), delivered + side)


def row_step_time(chain: Chain, sm_count, dram_bw, dram_latency):
    """The ROW_LOOP step time (module docstring): ``memory_phases`` DRAM latencies plus the row's bytes at the
    program's share of the DRAM bandwidth, shared by the min(programs, slots) programs that run at once;
    arguments may be arrays (one per spec); NaN where the latency or the bandwidth is unknown."""
    running = np.minimum(chain.programs, np.asarray(sm_count, dtype=float) * chain.programs_per_sm)
    return (chain.memory_phases * np.asarray(dram_latency, dtype=float)
            + chain.row_bytes * running / np.asarray(dram_bw, dtype=float))


def _next_pow2(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


def fla_recurrent_chain(dims: Mapping[str, int], mode: str, dtype: str = "bf16") -> Chain | None:
    """fla's fused recurrent gated delta rule, forward and decode (the backward is another kernel)."""
    if mode not in ("fwd", "decode"):
        return None
    v = int(dims.get("Pv", dims["P"]))
    nv = math.ceil(v / min(FLA_RECURRENT_BV, _next_pow2(v)))
    steps = 1 if mode == "decode" else int(dims["L"])
    return Chain("token_recurrent_warp", steps, nv * int(dims["B"]) * int(dims["H"]), SM90_MAX_BLOCKS_PER_SM)


def causal_conv1d_chain(dims: Mapping[str, int], mode: str, dtype: str = "bf16") -> Chain | None:
    """causal-conv1d's channel-first kernels (module docstring): the forward, steps = ceil(L / chunk), chunk = 128
    threads x (16 bytes / element size); the backward, one step more (its closing block reductions); a
    forward-backward call, the forward then the backward. The decode update is another kernel (no chain)."""
    if mode not in ("fwd", "bwd", "fwdbwd"):
        return None
    elts = CONV1D_FWD_LOAD_BYTES // nbytes(dtype)
    l_ = int(dims["L"])
    chunks = math.ceil(l_ / (CONV1D_FWD_THREADS * elts))
    # kIsVecLoad = (L % kNElts == 0): otherwise the bounds-checked element loads (module docstring)
    aligned = l_ % elts == 0
    lanes, per_sm = int(dims["B"]) * int(dims["E"]), SM90_MAX_THREADS_PER_SM // CONV1D_FWD_THREADS
    fwd = Chain("lane_chunk_cta" if aligned else "lane_chunk_cta_unaligned", chunks, lanes, per_sm)
    bwd = Chain("lane_chunk_cta_bwd" if aligned else "lane_chunk_cta_bwd_unaligned", chunks + 1, lanes, per_sm)
    return {"fwd": fwd, "bwd": bwd, "fwdbwd": dataclasses.replace(fwd, then=bwd)}[mode]


# mamba-ssm selective_state_update: rows of the state tile per program by state size N (BLOCK_SIZE_M), and
# threads per program (num_warps = 4 up to N = 128)
STATE_UPDATE_BLOCK_M = ((16, 32), (32, 16), (64, 8), (128, 4))
STATE_UPDATE_THREADS = 128


def ssd_state_update_chain(dims: Mapping[str, int], mode: str, dtype: str = "bf16") -> Chain | None:
    """mamba-ssm's decode state update of Mamba-2 (module docstring, ``state_tile_cta``): one step per
    program, B x H x ceil(P / BLOCK_SIZE_M) programs; other modes run the chunked kernels (no such chain),
    and N above the measured 128 is left without it."""
    n = int(dims["N"])
    if mode != "decode" or n > STATE_UPDATE_BLOCK_M[-1][0]:
        return None
    block_m = next(m for top, m in STATE_UPDATE_BLOCK_M if n <= top)
    return Chain("state_tile_cta", 1, int(dims["B"]) * int(dims["H"]) * math.ceil(int(dims["P"]) / block_m),
                 SM90_MAX_THREADS_PER_SM // STATE_UPDATE_THREADS, fluid=True)


def _row_loop(dims: Mapping[str, int], mode: str, per_sm: int, fwd_elements: int, bwd_elements: int, itemsize: int,
              phases: int) -> Chain | None:
    """A norm backward's row loop (module docstring, ``ROW_LOOP``): B L one-step programs, ``per_sm`` to an SM
    (the same waves as the kernel's programs looping over their rows), each row ``bwd_elements`` elements of
    ``itemsize`` bytes moved in ``phases`` round trips; the forward and decode have none. A forward-backward
    call runs the forward kernel first (one row per program: no loop, its ``fwd_elements`` per row at the full
    bandwidth, all rows at once), then the loop: the forward's bytes add to the loop, not overlap it."""
    if mode not in ("bwd", "fwdbwd"):
        return None
    rows = int(dims["B"]) * int(dims["L"])
    loop = Chain(ROW_LOOP, 1, rows, per_sm, row_bytes=float(bwd_elements * itemsize), memory_phases=phases)
    if mode == "bwd":
        return loop
    return Chain(ROW_LOOP, 1, rows, rows, row_bytes=float(fwd_elements * itemsize), memory_phases=0, then=loop)


def layer_norm_bwd_chain(dims: Mapping[str, int], mode: str, dtype: str = "bf16") -> Chain | None:
    """mamba-ssm's Triton layer-norm backward: ceil(B L / SMs) rows one after another in each of the SMs'
    programs; a row moves x and dy in and dx out (3 D elements at the dtype; the forward x in, y out: 2 D)."""
    d = int(dims["D"])
    return _row_loop(dims, mode, 1, 2 * d, 3 * d, nbytes(dtype), NORM_BWD_PHASES)


def gated_norm_bwd_chain(dims: Mapping[str, int], mode: str, dtype: str = "bf16") -> Chain | None:
    """Mamba-2's Triton gated norm backward: ceil(4 / num_warps) programs per SM, each looping over its rows; a
    row moves x, z and dy in and dx, dz out (5 D elements at the dtype; the forward x, z in, y out: 3 D)."""
    d = int(dims["D"])
    block_n = min(LAYERNORM_MAX_FUSED_BYTES // nbytes(dtype), _next_pow2(d))
    return _row_loop(dims, mode, math.ceil(4 / min(max(block_n // 256, 1), 8)), 3 * d, 5 * d, nbytes(dtype),
                     NORM_BWD_PHASES)


def fused_residual_bwd_chain(dims: Mapping[str, int], mode: str, dtype: str = "bf16") -> Chain | None:
    """The residual add that mamba-ssm's fused_add_norm does inside the norm's kernels (add / fused_norm): in
    the backward each row of the norm's loop also loads the residual's gradient after its reductions and
    stores the updated one, both fp32 (module docstring, ``ROW_LOOP``): one more round trip and 8 D bytes (the
    forward: the residual in and out, 8 D bytes as well)."""
    d = int(dims["D"])
    return _row_loop(dims, mode, 1, d, d, RESIDUAL_BWD_BYTES_PER_ELEMENT, RESIDUAL_BWD_PHASES)


def mamba3_siso_chain(dims: Mapping[str, int], mode: str, dtype: str = "bf16") -> Chain | None:
    """mamba-ssm's Mamba-3 SISO forward kernel (decode runs mamba3_siso_step, the backward other kernels)."""
    if mode != "fwd":
        return None
    return Chain("chunk_recurrent_cta", math.ceil(int(dims["L"]) / SISO_CHUNK),
                 int(dims["B"]) * int(dims["H"]), 1)


def _mamba1_tile(seqlen: int) -> tuple[int, int]:
    """(kNThreads, kNItems) of mamba-ssm's selective-scan launchers for a sequence of ``seqlen``."""
    return next((t, i) for bound, t, i in MAMBA1_SCAN_TILES if bound is None or seqlen <= bound)


def blocks_per_sm(threads: int, registers: int, smem_bytes: int) -> int:
    """Resident blocks per SM on compute capability 9.0 of a kernel of ``threads`` threads per block,
    ``registers`` per thread and ``smem_bytes`` of shared memory per block: the least of the register
    file's, shared memory's, the thread limit's and the block limit's counts (allocation rules above)."""
    per_warp = math.ceil(registers / SM90_REGISTER_UNIT) * SM90_REGISTER_UNIT * 32
    by_regs = (SM90_REGISTERS_PER_SM // per_warp) // math.ceil(threads / 32)
    by_smem = SM90_SMEM_PER_SM // (smem_bytes + SM90_SMEM_RESERVED_PER_BLOCK)
    return min(by_regs, by_smem, SM90_MAX_THREADS_PER_SM // threads, SM90_MAX_BLOCKS_PER_SM)


def mamba1_scan_chain(dims: Mapping[str, int], mode: str, dtype: str = "bf16") -> Chain | None:
    """mamba-ssm's selective scan (module docstring, ``lane_state_cta``): the forward kernel, and for a
    forward-backward call the backward kernel after it; decode runs selective_state_update (no chain).
    Each step takes in the chunk's B and C rows at the storage width (2 x chunk x e bytes), the backward
    step also its fp32 atomic adds of dB and dC (2 x chunk x 4 bytes)."""
    if mode not in ("fwd", "bwd", "fwdbwd"):
        return None
    b, e_, l_, n = (int(dims[k]) for k in ("B", "E", "L", "N"))
    if min(b, e_, l_, n) <= 0:  # a call with a zero dimension runs no kernel
        return None
    threads, items = _mamba1_tile(l_)
    chunk = threads * items
    e = nbytes(dtype)

    def kernel(resources, extra_bytes: int, cls: str) -> Chain:
        regs, smem = resources[e][(threads, items)]
        k = blocks_per_sm(threads, regs, smem)
        return Chain(cls, math.ceil(l_ / chunk) * n, b * e_, k, fluid=True,
                     tail_programs=k - 1 if threads == MAMBA1_KNEE_THREADS else 0,
                     shared_kib=2 * chunk * (e + extra_bytes) / KIB, label="l2")

    # the launchers build the kernels with kIsEvenLen = (L % chunk == 0): otherwise every load of a B or C
    # row is bounds-checked element by element (module docstring); the backward kernel's step has its own
    # class where the length is even, the uneven loads' where it is not
    even = l_ % chunk == 0
    fwd = kernel(MAMBA1_FWD_RESOURCES, 0, "lane_state_cta" if even else "lane_state_cta_uneven")
    bwd = kernel(MAMBA1_BWD_RESOURCES, nbytes("fp32"), "lane_state_cta_bwd" if even else "lane_state_cta_uneven")
    return {"fwd": fwd, "bwd": bwd, "fwdbwd": dataclasses.replace(fwd, then=bwd)}[mode]
