"""The achievable-time model: what an op should take on a device, from physical terms, between the
roofline bound (``roofline.py``: work at datasheet peaks, a true lower bound) and a calibrated fit.

Every parameter is a spec value: attained ceilings (``measured:`` entries, read by ``ssmbench probe``
on a real GPU) for real devices, design assumptions for hypothetical ones; nothing is fitted here.
One exception, named as such: the step latencies of the sequential-chain term
(``compute.chain_step.<class>``, ``chain.py``) are derived from two measured cases of each kernel
class (the spec's ``measured:`` entries name them), so for those two kernel classes the estimate is
not free of parameters taken from measurements; their other shapes and grids are predictions.
The label of every number is **achievable estimate**.

Terms, for one call of an op whose kernels launch back to back (``launches`` = n):

- **Engine times** at attained rates (``prefer="measured"``): T_tensor = sum_d FLOPs_d / rate_d;
  fp32 matmul FLOPs go to the TF32 tensor-core rate where the implementation's matmuls are Triton
  ``tl.dot`` (``execution.py``), else to the CUDA cores with the other vector FLOPs; T_vector,
  T_sfu (transcendentals).
- **Cache level**: a kernel's extra traffic (intermediates one kernel writes and the next reads,
  re-reads of its inputs: as-executed minus compulsory bytes) is served by the device-wide cache
  when one kernel's traffic fits in a quarter of it (``L2_RESIDENT_FRACTION``): those bytes cross L2
  (T_l2 = bytes / memory.l2.bandwidth) instead of DRAM. Why a quarter: the L2 of NVIDIA's A100 and
  Hopper parts is two partitions, each caching the accesses of the SMs on its side (A100 whitepaper,
  "L2 cache"; the H100's keeps that structure), so a tensor that every SM writes and the next kernel's
  SMs read anywhere is held within one partition's half of the capacity at best, and half of that is
  left to the streaming operands. Evidence (H200, 60 MiB L2, 2026-12-02 calibration-torchref, eager
  chains whose device time shows above their host time): rmsnorm [1, 1024, 4096] (19 MB per kernel)
  measured 71 us, gated_rmsnorm at the same shape (24 MB) 108 us, softmax [1, 8, 1024, 1024] (27 MB)
  71 us: each about its all-DRAM share of a twin whose bytes all cross DRAM (rmsnorm and
  gated_rmsnorm at D = 8192: 125 and 196 us, half of it; softmax at 32 heads: 273 us, a quarter),
  where the half-of-L2 rule (31 MB) had predicted 24, 39 and 18 us. Compulsory bytes always cross
  DRAM (the measurements flush L2 between calls).
- **Software kernel paths** (``Cost.path``): bytes that ATen's non-vectorized kernels move
  (``memory.dram.path.<p>``: a broadcast elementwise op, with fp32 or with 16-bit results (the kernel is
  bound by the elements it indexes, so 16-bit elements move about half the fp32 bandwidth:
  ``broadcast_16bit``), a dtype-converting copy, a reduction along the last dimension;
  ``hwspecs.schema.DRAM_PATHS``) cross DRAM at that path's attained bandwidth,
  the rest at memory.dram.bandwidth (the copy's, which contiguous vectorized kernels reach):
  T_dram_bytes = (B_dram - sum_p B_p) / BW + sum_p B_p / BW_p, each path's bytes scaled by the
  share of the executed bytes that DRAM (not L2) serves. FLOPs of a kernel with its own attained
  rate (``compute.path.<p>``: PyTorch's depthwise convolution) take FLOPs_p / rate_p on the
  vector engine instead of FLOPs_p / compute.vector.fp32. Source: the probe's ``aten_paths`` and
  ``conv_depthwise`` (``measure/_probe_achievable.py``); the measured cases they explain are the
  eager norms and softmax (1.35-1.9x over their DRAM term at copy bandwidth, 2026-12-02
  calibration-torchref) and ``torch.conv1d`` (0.16x). A path the spec does not know leaves its work
  at the engine's or memory's rate and is named under ``not_modelled``.
- **Memory latency** (Little's law): a kernel cannot stream before its first loads return, so each
  kernel pays one DRAM load-to-use latency before bandwidth binds: T_mem = n x memory.dram.latency +
  DRAM bytes / memory.dram.bandwidth. For a kernel that moves fewer bytes than the device keeps in
  flight (bandwidth x latency, ~3 MB on an H200) the latency is most of its memory time.
- **GPU fixed cost per kernel**: n x launch.graph_node, the device-side time of a kernel that does no
  work (launch, block scheduling, drain), as measured on back-to-back nodes of a CUDA graph, where
  no host cost is in the way.
- **GEMM fixed cost** (``launch.gemm_fixed``): a cuBLAS GEMM kernel (Hopper's wgmma ``nvjet``
  kernels) pays more fixed device time than a trivial node: it prefetches TMA descriptors, sets up its
  pipeline barriers and fills its K-loop pipeline (the first stage's loads wait a full DRAM latency
  before the first wgmma), and stores through shared memory in its epilogue. n_cublas x gemm_fixed
  is added to the fixed time of the calls' cuBLAS kernels (``host.cublas`` counts them); at small M
  (a decode step's projections) it is most of a GEMM's time: measured from the CUDA-graph decode
  profiles, where nothing else hides it (``calibrate/runtime_host.py``).
- **Library-kernel fixed cost** (``launch.library_fixed``): a Triton or CUDA-extension kernel
  (``hwspecs.schema.LIBRARY_KERNEL_CLASSES``; ``host.<class>`` counts them) pays more fixed device time
  than the trivial ATen node of ``launch.graph_node``, even on a few kilobytes: its loads come in
  dependent phases (a fused norm loads its weight only after the block-wide reduction of its row, a
  decode state update its state tile after the step's dt and A), each phase a full DRAM latency with
  nothing else in flight, and its block-wide reductions wait on barriers. n_lib x library_fixed is added
  to the fixed time like ``gemm_fixed``; measured from the CUDA-graph decode profiles, where a decode
  step's norms, conv updates and state updates are each a few microseconds of such phases
  (``calibrate/runtime_host.py``).
- **Tensor-instruction class** (``execution.Traits.tensor_instr``): the matmul FLOPs of a kernel built
  on the warp-synchronous ``mma.sync`` (sm80 code: FlashAttention-2) run at
  ``compute.tensor_mma_sync.<dtype>`` instead of ``compute.tensor.<dtype>``: on Hopper only the
  asynchronous ``wgmma`` reaches the full rate (FlashAttention-3 paper, Sec. 2); the H200 spec's value
  is the probe's mma.sync loop (626 TFLOP/s bf16 against 787 for a cuBLAS GEMM). A spec without the
  key runs them at the full rate and names the key under ``not_modelled``.
- **Cache re-reads** (``execution.Traits.l2_rereads``): bytes every block of a kernel reads again from
  the device-wide cache beyond its device-memory bytes (Mamba-1's selective scan re-reads B and C
  [B, N, L] once per channel): T_reread = bytes / memory.l2.bandwidth. Like the engines, they overlap
  with the other resources, or, in a kernel whose phases run one after another, add to the engines.
- **Sequential chain** (``chain.py``): a kernel whose programs loop over dependent steps (fla's
  one-warp token recurrence, Mamba-3 SISO's chunk loop) takes at least
  T_chain = steps x ceil(programs / (SMs x programs per SM)) x compute.chain_step.<class>; it is one
  more term of the max below (a kernel with few programs leaves the engines idle while its chain runs).
  FlashAttention-2's forward key-tile loop is such a chain whose step is its full tile's work at the
  CTA's share of the SM's engines (``chain.TILE_LOOP``: no spec parameter beyond the engine rates),
  with the causal grid's uneven CTAs scheduled longest-last; its backward's query-tile loop (one CTA per
  SM) adds to each step the bytes its GEMMs' operands move through shared memory, at the CTA's share of
  memory.shared.bandwidth, in series with the MMAs (``chain_fa2.fa2_bwd_chain``; labelled ``tensor`` where it
  binds), and so does SDPA's memory-efficient forward, whose 32 x 32 warp tiles read every operand from shared
  memory (``chain_memeff.py``). Mamba-1's selective scan steps over (chunk,
  state) with the blocks resident on an SM sharing its intake of the steps' B and C rows
  (``chain.lane_state_cta``): its chain is paced by bytes, and where it binds the label is ``l2``; so is
  the chunked SSD's chunk scan, whose programs share their SM's intake of the tiles they load from L2
  (``chain_ssd.tile_scan_cta``, at the autotuner's recorded tile). The
  Triton norms' backward loops over rows on one program per SM, each row a few DRAM round trips and its
  bytes at the program's share of the bandwidth (``chain.ROW_LOOP``: no spec parameter beyond
  memory.dram.latency and memory.dram.bandwidth).
- GPU time: T_gpu = n x graph_node + n_cublas x gemm_fixed + n_lib x library_fixed
  + max(T_tensor, T_vector, T_sfu, T_mem, T_l2 + T_reread, T_chain) + T_after: the engines and the memory
  system overlap within a call; the per-kernel fixed costs do not. T_after is what runs once the streaming
  is done: where FlashAttention-2 splits its key loop (``fa2_split.py``), the split kernel's last step and the
  combine kernel (one launch, (splits + 1) round trips to the device-wide cache); 0 elsewhere. For a kernel whose
  phases run one after another on the same warps (FlashAttention-2's softmax between its two GEMMs;
  the selective scan's B/C loads, exponentials and block scan between barriers;
  ``execution.Traits.engines``) those times add: max(T_tensor + T_vector + T_sfu + T_reread, T_mem, T_l2).
  For a kernel whose asynchronous GEMMs wait on a softmax phase run by the same warpgroup (cuDNN's Hopper
  attention, ``engines="phased"``) the tensor phase and that phase add, the phase's special-function and
  CUDA-core work side by side: max(T_tensor + max(T_vector, T_sfu), T_mem, T_l2).
- **Host time** (eager launch regime): T_host = sum over backend classes c of calls_c x
  launch.host.<c>, the CPU time to issue the calls (eager PyTorch op, Triton launcher, CUDA
  extension, cuBLAS, cuDNN). The host issues asynchronously, so back-to-back calls take
  max(T_host, T_gpu): a call is host-bound when issuing it takes longer than running it. Under
  CUDA-graph replay (``launch="graph"``) the host issues one captured graph per call, whatever its
  kernels: T_host = launch.host.cuda_graph.
- Achievable time T = max(T_host, T_gpu).

Bottleneck classes: ``host/launch`` when T_host >= T_gpu; else ``latency`` when the fixed and latency
parts (n x graph_node + n x dram latency) or the sequential chain exceed every engine and bandwidth
time (in one op's ``estimate``, a chain paced by an intake of bytes takes its own label, ``Chain.label``;
the vectorised ``achievable_work`` that whole-model steps use labels every binding chain ``latency``); else
the resource
with the largest time (tensor, vector, special_function, dram, l2).

A parameter the spec does not know (``unknown`` or not listed) contributes no term, and the result
names it under ``not_modelled``: the estimate is then optimistic in that term, never silently zero
with a claim of completeness.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..hwspecs import Spec
from ..hwspecs.schema import (CHAIN_CLASSES, COMPUTE_PATHS, DRAM_PATHS, HOST_CLASS_FALLBACK, HOST_CLASSES,
                              LIBRARY_KERNEL_CLASSES)
from .chain import (L2_LATENCY_KEY, ROW_LOOP, SMEM_BANDWIDTH_KEY, TILE_LOOP, Chain, chain_only_key, chain_time,
                    row_step_time, tile_step_time)
from .cost import Cost
from .fa2_split import split_keys, split_kv_after
from .roofline import COL, TENSOR_DTYPES, Prefer, check_choice, spec_ceiling, work_array

LABEL = "achievable estimate"
# Share of the device-wide cache one kernel's traffic may use and still be served from it: half of
# one of the two L2 partitions (module docstring, "Cache level").
L2_RESIDENT_FRACTION = 0.25
CLASSES = ("host/launch", "latency", "tensor", "vector", "special_function", "dram", "l2")
GPU_RESOURCES = ("tensor", "vector", "special_function", "dram", "l2")


def _val(spec: Spec, key: str, prefer: str) -> tuple[float, str]:
    c = spec_ceiling(spec, key, prefer)
    if c.value is None:
        return np.nan, f"{key} ({c.provenance})"
    return float(c.value), ""


@dataclass(frozen=True)
class AchievableTable:
    """The achievable model's parameters of several specs as arrays [n_specs]; NaN where unknown."""

    spec_ids: tuple[str, ...]
    rate_tensor: np.ndarray   # [S, len(TENSOR_DTYPES)]
    rate_mma_sync: np.ndarray  # [S, len(TENSOR_DTYPES)] compute.tensor_mma_sync.<dtype>; NaN where not listed
    rate_vector: np.ndarray
    rate_sfu: np.ndarray
    dram_bw: np.ndarray
    dram_latency: np.ndarray
    l2_bw: np.ndarray
    l2_capacity: np.ndarray
    node_s: np.ndarray        # launch.graph_node
    gemm_s: np.ndarray        # launch.gemm_fixed
    host_s: np.ndarray        # [S, len(HOST_CLASSES)]
    sm_count: np.ndarray      # compute.sm_count
    chain_step: np.ndarray    # [S, len(CHAIN_CLASSES)] compute.chain_step.<class>; NaN where unknown
    missing: tuple[dict[str, str], ...]  # per spec: parameter -> why unknown
    # [S, len(DRAM_PATHS)] memory.dram.path.<p>, [S, len(COMPUTE_PATHS)] compute.path.<p>; None: all unknown
    path_bw: np.ndarray | None = None
    path_rate: np.ndarray | None = None
    lib_s: np.ndarray | None = None  # launch.library_fixed; None: unknown for every spec
    smem_bw: np.ndarray | None = None  # memory.shared.bandwidth; None: unknown for every spec
    l2_latency: np.ndarray | None = None  # memory.<device-wide cache>.latency; None: unknown for every spec

    @classmethod
    def of(cls, specs: Sequence[Spec], prefer: Prefer = "measured") -> "AchievableTable":
        rows: dict[str, list] = {k: [] for k in ("tensor", "mma", "vector", "sfu", "dram", "lat", "l2", "l2cap",
                                                 "node", "gemm", "lib", "host", "sms", "chain", "pbw", "prate",
                                                 "smem", "l2lat")}
        missing = []
        for spec in specs:
            miss: dict[str, str] = {}

            def get(key: str) -> float:
                v, why = _val(spec, key, prefer)
                if why:
                    miss[key] = why
                return v

            rows["tensor"].append([_val(spec, f"compute.tensor.{d}", prefer)[0] for d in TENSOR_DTYPES])
            rows["mma"].append([_mma_sync_rate(spec, d, prefer, miss) for d in TENSOR_DTYPES])
            rows["vector"].append(get("compute.vector.fp32"))
            rows["sfu"].append(get("compute.special_function"))
            rows["dram"].append(get("memory.dram.bandwidth"))
            rows["lat"].append(get("memory.dram.latency"))
            cache = next((n for n, lvl in spec.memory.items() if lvl.scope == "device" and n != "dram"), None)
            if cache is None:
                miss["cache"] = "the spec lists no device-wide level between the SMs and DRAM"
                rows["l2"].append(np.nan)
                rows["l2cap"].append(np.nan)
                rows["l2lat"].append(np.nan)
            else:
                rows["l2"].append(get(f"memory.{cache}.bandwidth"))
                rows["l2cap"].append(get(f"memory.{cache}.capacity"))
                # a tile loop's cache round trip (chain.L2_LATENCY_KEY names it as the spec's l2 level)
                lat, why = _val(spec, f"memory.{cache}.latency", prefer)
                if why:
                    miss[L2_LATENCY_KEY] = why
                rows["l2lat"].append(lat)
            rows["node"].append(get("launch.graph_node"))
            rows["gemm"].append(get("launch.gemm_fixed"))
            rows["lib"].append(get("launch.library_fixed"))
            host = [get(f"launch.host.{c}") for c in HOST_CLASSES]
            for c, general in HOST_CLASS_FALLBACK.items():
                key = f"launch.host.{c}"
                if key in miss and not np.isnan(host[HOST_CLASSES.index(general)]):
                    miss.pop(key)  # modelled, at the general class (host_fallback)
            rows["host"].append(host_fallback(np.array([host], dtype=float))[0])
            rows["sms"].append(get("compute.sm_count"))
            rows["chain"].append([get(f"compute.chain_step.{c}") for c in CHAIN_CLASSES])
            rows["pbw"].append([get(f"memory.dram.path.{p}") for p in DRAM_PATHS])
            rows["prate"].append([get(f"compute.path.{p}") for p in COMPUTE_PATHS])
            rows["smem"].append(get(SMEM_BANDWIDTH_KEY))
            missing.append(miss)
        arr = {k: np.array(v, dtype=float) for k, v in rows.items()}
        return cls(tuple(s.id for s in specs), arr["tensor"].reshape(len(specs), -1),
                   arr["mma"].reshape(len(specs), -1), arr["vector"], arr["sfu"],
                   arr["dram"], arr["lat"], arr["l2"], arr["l2cap"], arr["node"], arr["gemm"],
                   arr["host"].reshape(len(specs), -1), arr["sms"], arr["chain"].reshape(len(specs), -1),
                   tuple(missing), arr["pbw"].reshape(len(specs), -1), arr["prate"].reshape(len(specs), -1),
                   arr["lib"], arr["smem"], arr["l2lat"])


def host_fallback(host_s: np.ndarray) -> np.ndarray:
    """``host_s`` [S, len(HOST_CLASSES)] with each class of ``HOST_CLASS_FALLBACK`` that a spec does not
    know (NaN) taken at its general class's value: a library's own launcher cost refines the general
    class's, which is the better estimate where the refinement was not measured (such a key is not named
    as not modelled where the general class is known)."""
    out = np.array(host_s, dtype=float)
    for c, general in HOST_CLASS_FALLBACK.items():
        i, g = HOST_CLASSES.index(c), HOST_CLASSES.index(general)
        out[:, i] = np.where(np.isnan(out[:, i]), out[:, g], out[:, i])
    return out


def library_kernels(work: np.ndarray) -> np.ndarray:
    """The library kernels (``LIBRARY_KERNEL_CLASSES``: Triton, CUDA extension) of ``work`` (columns first)."""
    return sum(work[COL[f"host.{c}"]] for c in LIBRARY_KERNEL_CLASSES)


def _lib_s(table: AchievableTable) -> np.ndarray:
    """launch.library_fixed per spec of ``table`` (NaN where unknown)."""
    return table.lib_s if table.lib_s is not None else np.full(len(table.spec_ids), np.nan)


def _mma_sync_rate(spec: Spec, dtype: str, prefer: Prefer, miss: dict[str, str]) -> float:
    """compute.tensor_mma_sync.<dtype> of ``spec`` (NaN where the spec does not list it or knows no value;
    for a dtype with a tensor rate the reason is kept, reported only where an mma.sync kernel uses it)."""
    key = f"compute.tensor_mma_sync.{dtype}"
    if dtype not in spec.compute.tensor_mma_sync:
        if dtype in spec.compute.tensor:
            miss[key] = (f"{key} (not in the spec: kernels of the mma.sync class are estimated at "
                         f"compute.tensor.{dtype})")
        return np.nan
    v, why = _val(spec, key, prefer)
    if why:
        miss[key] = why
    return v


def host_cost(table: AchievableTable, cls: str, spec_index: int = 0) -> float:
    """One call's host time of backend class ``cls`` on a spec of ``table`` (0 where unknown: the
    estimate's ``not_modelled`` names it)."""
    return float(np.nan_to_num(table.host_s[spec_index, HOST_CLASSES.index(cls)]))


@dataclass(frozen=True)
class Achieved:
    """Achievable times of work on specs; arrays have shape [n_specs, *work_shape], seconds."""

    time: np.ndarray
    host: np.ndarray
    gpu: np.ndarray
    fixed: np.ndarray          # n x graph_node + n x dram latency
    times: dict[str, np.ndarray]  # GPU_RESOURCES -> s (dram includes the per-kernel latency)
    bottleneck: np.ndarray     # index into CLASSES
    l2_bytes: np.ndarray       # bytes served by the device-wide cache instead of DRAM
    dram_bytes: np.ndarray
    chain: np.ndarray          # the sequential chain's time (chain.py; 0 where none)

    def bottleneck_names(self) -> np.ndarray:
        return np.asarray(CLASSES, dtype=object)[self.bottleneck]


def _z(a: np.ndarray) -> np.ndarray:
    """``np.nan_to_num(a, nan=0.0)`` (NaN: unknown, counted as 0), without its cost where ``a`` holds no
    infinity (the common case: ``nan_to_num`` spends most of a one-point estimate's time)."""
    a = np.asarray(a, dtype=float)
    out = np.where(np.isnan(a), 0.0, a)
    return np.nan_to_num(a, nan=0.0) if np.isinf(out).any() else out


def path_spec_key(path: str) -> str:
    """The spec key of a ``Cost.path`` key: dram.<p> -> memory.dram.path.<p>, compute.<p> -> compute.path.<p>."""
    engine, name = path.split(".", 1)
    return f"memory.dram.path.{name}" if engine == "dram" else f"compute.path.{name}"


def _path_column(a: np.ndarray | None, i: int, n_specs: int) -> np.ndarray:
    """Column i of a table's path parameters [S, n_paths]; NaN (unknown) where the table has none."""
    return np.full(n_specs, np.nan) if a is None else a[:, i]


def chain_step_time(chain: Chain, table: AchievableTable) -> np.ndarray:
    """One step of ``chain`` per spec of ``table`` [n_specs]: a tile loop's step is its tile's work at the
    CTA's share of the SM's engines (``chain.tile_step_time``; mma.sync FLOPs at their own rate where the
    spec has one), a row loop's its DRAM round trips and its row's bytes at the program's share of the DRAM
    bandwidth (``chain.row_step_time``), any other class's is the spec's ``compute.chain_step.<class>``."""
    if chain.cls == ROW_LOOP:
        return row_step_time(chain, table.sm_count, table.dram_bw, table.dram_latency)
    if chain.cls != TILE_LOOP:
        return table.chain_step[:, CHAIN_CLASSES.index(chain.cls)]
    d = TENSOR_DTYPES.index(chain.dtype)
    rate_t = table.rate_tensor[:, d]
    if chain.mma_sync:
        rate_t = np.where(np.isnan(table.rate_mma_sync[:, d]), rate_t, table.rate_mma_sync[:, d])
    smem = table.smem_bw if table.smem_bw is not None else np.full(len(table.spec_ids), np.nan)
    return tile_step_time(chain, table.sm_count, rate_t, table.rate_vector, table.rate_sfu, smem, _l2_latency(table))


def _l2_latency(table: AchievableTable) -> np.ndarray:
    """The device-wide cache's round trip per spec of ``table``; NaN where unknown."""
    return table.l2_latency if table.l2_latency is not None else np.full(len(table.spec_ids), np.nan)


def achievable_work(work: np.ndarray, table: AchievableTable, *, tf32: np.ndarray | bool = False,
                    serial: np.ndarray | bool = False, launch: str = "eager", graph_replays: float = 1.0,
                    mma_sync: np.ndarray | bool = False, l2_reread: np.ndarray | float = 0.0,
                    chain: Chain | None = None, chain_s: np.ndarray | None = None,
                    dram_path: np.ndarray | int = -1) -> Achieved:
    """Achievable time of ``work`` [len(WORK_COLUMNS), *shape] on every spec of ``table``.

    ``tf32``: where fp32 matmul FLOPs run on TF32 tensor cores; ``serial``: how the engine times (tensor,
    vector, special function) combine (``execution.ENGINE_CODES`` of ``execution.Traits.engines``): 0 / False
    overlap (the largest), 1 / True serial (they add), 2 phased (T_tensor + max(T_vector, T_sfu)).
    ``mma_sync``: where the tensor FLOPs are issued as mma.sync (``execution.Traits.tensor_instr``);
    ``l2_reread``: bytes re-read from the device-wide cache (``execution.l2_reread_bytes``);
    ``chain``: the sequential chain of the work's kernel (``execution.chain_of``), one for all elements;
    ``chain_s`` instead: each element's chain time (``chain.chain_time`` of its own chain; 0 where none),
    broadcastable to [n_specs, *shape], for work whose elements are different kernels.
    ``dram_path``: index into ``DRAM_PATHS`` of the kernel path whose attained bandwidth all the call's
    device-memory bytes move at (``execution.dram_path_index``; -1, or a path the spec does not know: the copy
    rate); the ``path.dram.<p>`` work columns instead move only the bytes a kernel tagged with its path.
    Each is a bool (a number), or an array over the work shape (one implementation per element).
    ``graph_replays``: CUDA-graph replays the host issues for the work under ``launch="graph"`` (one
    per measured call; 0 for one op of a model step whose single replay is counted once for the step)."""
    check_choice("launch regime", launch, ("eager", "graph"))
    extra = (1,) * (work.ndim - 1)

    def ps(a: np.ndarray) -> np.ndarray:  # one value per spec, broadcast over the work shape
        return np.asarray(a).reshape((-1,) + extra)

    nt = len(TENSOR_DTYPES)
    inv_tensor = np.where(np.isnan(table.rate_tensor), 0.0, 1.0 / table.rate_tensor)
    tensor = np.tensordot(inv_tensor, work[:nt], axes=([1], [0]))
    mma_sync = np.asarray(mma_sync, dtype=bool)
    if mma_sync.any():  # the same FLOPs at the mma.sync rate where the spec knows it
        rate_mma = np.where(np.isnan(table.rate_mma_sync), table.rate_tensor, table.rate_mma_sync)
        inv_mma = np.where(np.isnan(rate_mma), 0.0, 1.0 / rate_mma)
        tensor = np.where(mma_sync, np.tensordot(inv_mma, work[:nt], axes=([1], [0])), tensor)
    tf32 = np.asarray(tf32, dtype=bool)
    fp32_mm = work[COL["tensor.fp32"]]
    on_tf32 = np.where(tf32, fp32_mm, 0.0)
    tf32_rate = ps(table.rate_tensor[:, TENSOR_DTYPES.index("tf32")])
    tensor = tensor + on_tf32 * _z(1.0 / tf32_rate)
    # fp32 matmul FLOPs move to TF32 only where the spec knows a TF32 rate
    moved = np.where(np.isnan(tf32_rate), 0.0, on_tf32)
    vector = (work[COL["vector"]] - moved) * _z(1.0 / ps(table.rate_vector))
    for i, p in enumerate(COMPUTE_PATHS):  # FLOPs of a kernel path at its own attained rate, where known
        rate = ps(_path_column(table.path_rate, i, len(table.spec_ids)))
        flops = np.where(np.isnan(rate), 0.0, work[COL[f"path.compute.{p}"]])
        vector = vector + flops * (_z(1.0 / rate) - _z(1.0 / ps(table.rate_vector)))
    sfu = work[COL["special_function"]] * _z(1.0 / ps(table.rate_sfu))

    launches = work[COL["launches"]]
    executed = work[COL["dram.executed"]]
    compulsory = work[COL["dram.compulsory"]]
    extra_bytes = np.maximum(executed - compulsory, 0.0)
    per_kernel = executed / np.maximum(launches, 1.0)
    fits = per_kernel <= L2_RESIDENT_FRACTION * ps(table.l2_capacity)  # NaN capacity compares False
    known_l2 = ~np.isnan(ps(table.l2_bw))
    l2_bytes = np.where(fits & known_l2, extra_bytes, 0.0)
    dram_bytes = executed - l2_bytes
    l2 = l2_bytes * _z(1.0 / ps(table.l2_bw))
    reread = np.asarray(l2_reread, dtype=float) * _z(1.0 / ps(table.l2_bw))
    dram_path = np.asarray(dram_path, dtype=int)
    bw = ps(table.dram_bw)
    if table.path_bw is not None and (dram_path >= 0).any():  # the path's attained rate where the spec knows it
        on_path = np.take(table.path_bw, np.maximum(dram_path, 0), axis=1).reshape((-1,) + np.shape(dram_path))
        on_path = on_path.reshape(on_path.shape + (1,) * (work.ndim - 1 - dram_path.ndim))
        bw = np.where((dram_path.reshape(dram_path.shape + (1,) * (work.ndim - 1 - dram_path.ndim)) >= 0)
                      & ~np.isnan(on_path), on_path, bw)
    dram = launches * _z(ps(table.dram_latency)) + dram_bytes * _z(1.0 / bw)
    served = np.where(executed > 0, dram_bytes / np.where(executed > 0, executed, 1.0), 0.0)  # DRAM's share
    for i, p in enumerate(DRAM_PATHS):  # bytes of ATen's non-vectorized kernels at their path's bandwidth
        bw_p = ps(_path_column(table.path_bw, i, len(table.spec_ids)))
        moved_b = np.where(np.isnan(bw_p), 0.0, work[COL[f"path.dram.{p}"]] * served)
        dram = dram + moved_b * (_z(1.0 / bw_p) - _z(1.0 / ps(table.dram_bw)))

    node = (launches * _z(ps(table.node_s)) + work[COL["host.cublas"]] * _z(ps(table.gemm_s))
            + library_kernels(work) * _z(ps(_lib_s(table))))
    fixed = node + launches * _z(ps(table.dram_latency))
    times = {"tensor": tensor, "vector": vector, "special_function": sfu, "dram": dram, "l2": l2 + reread}
    shape = np.broadcast_shapes(*(np.shape(t) for t in times.values()), np.shape(reread),
                                (len(table.spec_ids),) + work.shape[1:])
    stacked = np.stack([np.broadcast_to(times[r], shape) for r in GPU_RESOURCES])
    mode = np.broadcast_to(np.asarray(serial, dtype=int), shape)
    reread = np.broadcast_to(reread, shape)
    # tensor + vector + special_function (+ the re-read phase), when they run one after another
    engines = stacked[:3].sum(axis=0) + reread
    # the tensor phase, then one whose special-function and CUDA-core work run side by side
    phased = stacked[0] + np.maximum(stacked[1], stacked[2])
    top = np.where(mode == 1, np.maximum(engines, np.maximum(stacked[3], stacked[4] - reread)),
                   np.where(mode == 2, np.maximum(phased, np.maximum(stacked[3], stacked[4])), stacked.max(axis=0)))
    after = 0.0
    if chain is not None:
        def step(link):
            return ps(chain_step_time(link, table))

        chain_s = np.broadcast_to(chain_time(chain, ps(table.sm_count), step), shape)
        # a split-KV kernel's last step and its combine kernel run after the streaming (fa2_split.py)
        after = split_kv_after(chain, ps(table.sm_count), step, ps(table.node_s), ps(table.dram_latency),
                               ps(_l2_latency(table)))
    else:
        chain_s = np.zeros(shape) if chain_s is None else np.broadcast_to(np.asarray(chain_s, dtype=float), shape)
    chain_binds = (chain_s > 0) & (chain_s >= top)
    top = np.maximum(top, chain_s)
    gpu = node + top + after

    if launch == "eager":
        host_cols = np.stack([work[COL[f"host.{c}"]] for c in HOST_CLASSES])  # [H, *shape]
        host = np.tensordot(_z(table.host_s), host_cols, axes=([1], [0]))
    else:  # the host replays one captured graph per call, whatever its kernels
        host = graph_replays * ps(_z(table.host_s[:, HOST_CLASSES.index("cuda_graph")])) + np.zeros(shape)
    host = np.broadcast_to(host, shape)
    time = np.maximum(host, gpu)

    # the label of a serial kernel is its largest phase (the re-reads count as l2)
    engine = stacked.argmax(axis=0) + CLASSES.index("tensor")
    cls = np.where((np.broadcast_to(fixed, shape) >= top) | chain_binds, CLASSES.index("latency"), engine)
    cls = np.where(host >= gpu, CLASSES.index("host/launch"), cls)
    return Achieved(time, host, np.broadcast_to(gpu, shape), np.broadcast_to(fixed, shape),
                    {r: np.broadcast_to(t, shape) for r, t in times.items()}, cls,
                    np.broadcast_to(l2_bytes, shape), np.broadcast_to(dram_bytes, shape), chain_s)


@dataclass(frozen=True)
class Estimate:
    """One op's achievable time on one spec, with its terms, each in seconds."""

    spec_id: str
    time_s: float
    host_s: float
    gpu_s: float
    fixed_s: float
    times_s: dict[str, float]
    bottleneck: str
    l2_bytes: float
    dram_bytes: float
    launch_regime: str
    not_modelled: dict[str, str]
    label: str = LABEL
    chain_s: float = 0.0
    # the class where the chain binds (``Chain.label``: latency, or the intake that paces it)
    chain_label: str = "latency"

    def to_dict(self) -> dict:
        return {"label": self.label, "spec": self.spec_id, "time_s": self.time_s, "host_s": self.host_s,
                "gpu_s": self.gpu_s, "fixed_s": self.fixed_s, "times_s": self.times_s,
                "bottleneck": self.bottleneck, "l2_bytes": self.l2_bytes, "dram_bytes": self.dram_bytes,
                "launch_regime": self.launch_regime, "not_modelled": self.not_modelled, "chain_s": self.chain_s}


def estimate(cost: Cost, spec: Spec, *, tf32: bool = False, serial: bool | int = False, launch: str = "eager",
             prefer: Prefer = "measured", mma_sync: bool = False, l2_reread: float = 0.0,
             chain: Chain | None = None, dram_path: int = -1) -> Estimate:
    """The achievable time of one numeric Cost on one spec, with its terms and what is not modelled
    (``chain``: the sequential chain of its kernel, ``execution.chain_of``; None: none; ``dram_path``:
    ``execution.dram_path_index``)."""
    table = AchievableTable.of([spec], prefer)
    work = work_array(cost)
    a = achievable_work(work, table, tf32=tf32, serial=serial, launch=launch, mma_sync=mma_sync,
                        l2_reread=l2_reread, chain=chain, dram_path=dram_path)
    miss = dict(table.missing[0])
    used_paths = {path_spec_key(k) for k, v in cost.path.items() if float(v) > 0}
    # a DRAM path's rate is named only where the work moves its bytes on that path (the whole call's, or a
    # tagged kernel's)
    miss = {k: v for k, v in miss.items() if not k.startswith("memory.dram.path.") or k in used_paths
            or (dram_path >= 0 and k == f"memory.dram.path.{DRAM_PATHS[dram_path]}")}
    # a chain class's step is named only where the work has that chain; the SM count only with a chain
    miss = {k: v for k, v in miss.items() if not chain_only_key(k)
            or (chain is not None and k in chain.keys + ("compute.sm_count",) + split_keys(chain, table.sm_count))}
    # a software path's rate is named only where the work runs through it; its work then stays at the
    # engine's or the memory's rate
    miss = {k: (v if k not in used_paths else f"{v}; its work is timed at the "
                + ("memory.dram.bandwidth" if k.startswith("memory.") else "compute.vector.fp32") + " rate")
            for k, v in miss.items() if not k.startswith("compute.path.") or k in used_paths}
    used_mma = {f"compute.tensor_mma_sync.{d}" for d, v in cost.tensor.items() if mma_sync and float(v) > 0}
    miss = {k: v for k, v in miss.items() if not k.startswith("compute.tensor_mma_sync.") or k in used_mma}
    if not float(cost.host.get("cublas", 0)) > 0:  # the GEMM fixed time is named only with a cuBLAS kernel
        miss.pop("launch.gemm_fixed", None)
    if not sum(float(cost.host.get(c, 0)) for c in LIBRARY_KERNEL_CLASSES) > 0:  # likewise a library kernel's
        miss.pop("launch.library_fixed", None)
    if launch == "graph":
        miss = {k: v for k, v in miss.items() if not k.startswith("launch.host.") or k == "launch.host.cuda_graph"}
    else:
        used = {f"launch.host.{c}" for c, v in cost.host.items() if float(v) > 0}
        miss = {k: v for k, v in miss.items() if not k.startswith("launch.host.") or k in used}
    name = str(a.bottleneck_names()[0])
    label = "latency" if chain is None else _longest_link(chain, table).label
    if chain is not None and name == "latency" and float(a.chain[0]) > float(a.fixed[0]):
        # the chain binds (not the fixed parts): the call takes the chain's own class, latency or what paces it
        # (Chain.label: the selective scan's B and C rows, l2; FlashAttention-2's backward tile, tensor), that of
        # its longest link where the call runs several kernels' chains (a forward, then its backward)
        name = label
    return Estimate(spec.id, float(a.time[0]), float(a.host[0]), float(a.gpu[0]), float(a.fixed[0]),
                    {r: float(t[0]) for r, t in a.times.items()}, name,
                    float(a.l2_bytes[0]), float(a.dram_bytes[0]), launch, miss, chain_s=float(a.chain[0]),
                    chain_label=label)


def _longest_link(chain: Chain, table: AchievableTable) -> Chain:
    """The link of ``chain`` (its kernel, or one launched after it) whose own chain time is the longest on the
    table's first spec."""
    def own(link: Chain) -> float:
        alone = dataclasses.replace(link, then=None)
        return float(np.ravel(chain_time(alone, table.sm_count, chain_step_time(alone, table)))[0])
    return max(chain.links, key=own)


def issue_pipeline(host_s: Sequence[float], gpu_s: Sequence[float], lead_s: float = float("inf")) -> float:
    """Time from the first call's start on the device to the last call's end, for calls that one host
    thread issues in order onto one stream (the launch queue lets the host run ahead of the device).

    Call i can start on the device only once the host has issued it and the device has finished call
    i - 1: with H_i = host_s[0] + ... + host_s[i] (issue times, the host starting at 0) and the device
    free from ``lead_s`` on (what it still had to do when the host began issuing: a cache flush ahead
    of a timed call; ``inf`` when the host is so far ahead that it waits on a full launch queue),

        end_i = max(H_i, end_{i-1}) + gpu_s[i],  end_{-1} = lead_s,   time = end_last - lead_s.

    Limits: lead inf -> sum(gpu) (device-bound); lead 0 and one call -> host + gpu (an isolated call);
    always >= max(sum(gpu), sum(host) - lead). A model step repeated back to back has the steady-state
    time max(sum(host), sum(gpu)) per step (``report.achievable_rows``): the same queue, over many steps.
    A host-only entry (gpu 0: the autograd engine's call, a graph replay) delays every later call."""
    if len(host_s) != len(gpu_s):
        raise ValueError(f"issue_pipeline: {len(host_s)} host times for {len(gpu_s)} device times")
    if lead_s == float("inf"):
        return float(sum(gpu_s))
    issued, end = 0.0, float(lead_s)
    for h, g in zip(host_s, gpu_s):
        issued += float(h)
        end = max(issued, end) + float(g)
    return end - float(lead_s)


def timed_call_lead(call_host_s: float, call_gpu_s: float, flush_host_s: float, flush_gpu_s: float) -> float:
    """The device's lead over the host when a timed call starts (``measure/timing.py``: samples back to
    back, each after an L2 flush that writes 2x the L2 size, CUDA events around the call, no
    synchronisation between samples). When the host issues a sample (flush + call) faster than the
    device runs it, its lead grows from sample to sample until the launch queue is full: the device
    never waits (``inf``). Otherwise the device drains the queue every sample and the call starts
    behind the flush that the host has just issued: the lead is the flush's device time."""
    if call_host_s + flush_host_s <= call_gpu_s + flush_gpu_s:
        return float("inf")
    return float(flush_gpu_s)
