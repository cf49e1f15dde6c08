"""The energy model: static power x time plus dynamic energy per FLOP by engine and dtype and per byte
by memory level, with the power limit stretching time where the work would draw more than it allows.

It follows the achievable-time model's terms (``achievable.py``): the same FLOPs by engine (fp32 matmul
FLOPs on TF32 tensor cores where the implementation's matmuls do so) and the same split of bytes
between DRAM and the device-wide cache. Every parameter is a spec value (``energy:`` and ``power:``):
measured by ``ssmbench probe --energy`` or calibrated from measured cases (``measured:`` entries),
from sourced estimates for other real devices, or design assumptions for hypothetical ones (a value
fitted on measured cases belongs in a calibration profile, not in a spec).

Terms, for work taking time T (seconds):

- **static**: ``energy.static_power`` x T. Static power is the power drawn while the device runs work,
  before any counted operation: clocks and voltage up, leakage at working temperature, the front end
  issuing kernels. It is measured over back-to-back empty launches and is at or above ``power.idle``
  (the power at rest, lowest clocks): on the H200 idle is ~117-128 W. A device that idles between
  host-bound calls stays clocked up, so static power is charged over the whole time, not only the
  time the engines are busy.
- **compute**: tensor FLOPs of dtype d x ``energy.per_flop.tensor.<d>``; vector FLOPs (CUDA cores,
  including fp32 matmul FLOPs not on TF32) x ``energy.per_flop.vector.fp32``; transcendental
  evaluations x ``energy.per_flop.special_function``. Each is the energy one more operation adds,
  with its operand delivery from registers and shared memory (the cost model does not count per-SM
  traffic, so that energy is folded into the per-FLOP terms; a spec's ``per_byte`` of a per-SM level is
  therefore not charged, and the result says so).
- **tensor instruction class**: tensor FLOPs of a kernel that issues the warp-level ``mma.sync`` (code
  written for sm80: FlashAttention-2 and the kernels SDPA vendors from it, ``execution.Traits.tensor_instr``)
  x ``energy.per_flop.tensor_mma_sync.<d>``, the instruction class the time model already rates apart
  (``compute.tensor_mma_sync.<d>``). Why it costs more per FLOP: an m16n8k16 mma.sync reads its A and B
  fragments from the register file for every 4096 FLOPs of one warp, after ``ldmatrix`` brought them
  from shared memory into each warp's registers; a Hopper ``wgmma`` (m64nNk16, cuBLAS, cuDNN, FA3)
  reads B straight from shared memory once for the four warps of a warpgroup and N up to 256 columns.
  So per FLOP mma.sync moves several times the register-file and shared-memory operand bytes. Where a
  spec does not know the value, the FLOP is charged as a full-rate one (``fallback_term``) and the
  note says so. On the H200 the workload fit puts it at ~1.75 pJ/FLOP against ~1.0 for wgmma kernels
  (``ssmbench energy-fit``), which took the attention family from 7.4 / 40.3% (median / p90 |err|,
  leave-shape-out) to 4.8 / 33.6%: FlashAttention-2 through SDPA had drawn 1.3-1.7x the energy its
  counted work predicted while cuDNN's attention, on the same FLOPs and bytes, was within ~10%.
- **memory**: bytes that cross DRAM x ``energy.per_byte.dram`` (DRAM core, I/O, the link to the
  cache), and every byte the SMs move to or from device memory x ``energy.per_byte.<cache>`` of the
  device-wide cache level (``l2``, ``llc`` or a device ``sram``) it crosses: DRAM bytes plus the extra
  bytes the achievable model serves from that level. A recurrent state kept on chip (``placement.py``)
  is charged to that level instead of DRAM.
- **cache re-reads**: the bytes a kernel's SMs read again from the device-wide cache beyond its
  device-memory bytes (``execution.Traits.l2_rereads``, which the time model already charges at the
  cache's bandwidth) x the same ``energy.per_byte.<cache>``: the Mamba-1 selective scan re-reads
  B and C [B, N, L] from L2 once per channel block (4 B per element-state in bf16 forward), many
  times its DRAM bytes. Fitted on its own on the H200 cases it comes out at 33-40 pJ/B, the probe's
  L2-resident read (40.4 pJ/B): the missing scan energy was cache traffic, not FLOPs. Only the share
  that reaches the cache is charged: blocks resident on one SM that share an operand hit in L1
  (``reuse.py``: the scan's blocks of one batch).
- **padded tiles**: a kernel whose tile is longer than the op's dimension computes every slot of it
  (``padding.py``: causal_conv1d's 1024-token chunk, FlashAttention-2 decode's 64- or 128-row query
  tile holding H / G query rows): the vector, special-function and tensor counts are scaled by the
  executed over counted work (``counts``'s ``work_factor``, ``tensor_factor``).
- **software paths**: a kernel on one of ATen's non-vectorized paths or PyTorch's depthwise
  convolution (``Cost.path``; the time model times its work at ``memory.dram.path.<p>`` /
  ``compute.path.<p>``) is bound by instruction issue, not by its bytes or FLOPs: its SMs draw
  ``energy.path_power`` over the time it takes beyond its bytes at the DRAM bandwidth or its FLOPs at
  the vector rate (``path_issue_seconds``). On the H200 the case fit puts it at ~290 W (the eager
  RMSNorm's broadcast, cast and reduction kernels, the depthwise conv1d at 0.9 TFLOP/s); with it the
  depthwise conv1d, drawn 2x its counted energy before, is predicted within ~1%.

Power limit (``power.tdp``, the board power limit): the average power P = E / T. Where P exceeds the
limit the clocks drop until it does not: holding each operation's dynamic energy fixed, the time
stretches to T' = E_dyn / (limit - static) and the energy becomes limit x T'. (Lower clocks also run at
lower voltage, which lowers the energy per operation, so the stretched energy is an upper estimate
and the stretched time a lower one; memory-bound work stretches less than this, since DRAM does not
slow with the SM clock.) The result says when the limit binds.

Warm cache (``warm_l2=True``, for measured energy windows): ``measure/energy.py`` times its window
over back-to-back calls without an L2 flush, so a call whose compulsory bytes fit in half of the cache
(``WARM_L2_RESIDENT_FRACTION``) is served from it: its bytes cross the cache only, never DRAM. Half, not
the quarter the achievable model gives one kernel's traffic within a call (``achievable.py``, "Cache
level": data one kernel's SMs write and another kernel's SMs read is held in only one of the L2's two
partitions): the next call of the same op runs the same grid on the same SMs, which find their data
in their own partition. On the H200 energy windows (2026-12-02/03) the quarter for this rule takes the
energy fit's held-out median |error| from 4.9 % to 5.3 % (p90 22.9 % to 24.9 %). Predictions (``predict``, ``sweep``) use the cold rule, as the time
model does.

Probe and workload cases (H200, 2026-12-03). ``ssmbench probe --energy`` measures each parameter on a
kernel built so that one term dominates (the spec's values); ``ssmbench energy-fit`` fits the same terms
on measured workload cases (the calibrated layer, in the gap report; never in a spec). Where they differ
the model's counts are the reason, not the energies:

- **vector and special function** (probe 2.05 pJ/FLOP and 31.8 pJ; case fit ~18 pJ and ~0): the
  probe's loops are dependent FMAs / exps on registers, so its energy is the datapath's. A real kernel's
  counted FLOP comes with operand delivery the cost model does not count (loads and stores through
  shared memory and L1, address arithmetic, conversions, loop control, synchronisation); the fit folds
  what is left of it into the vector term. What could be counted now is: the cache re-reads and the
  mma.sync class above. Before them the Mamba-1 scan drew 2.0x and the SSD forward 1.4-2.0x what the
  probe's parameters predicted (481 W against 226 W for the scan); the re-reads are 4 B per
  element-state of the scan, several times its DRAM bytes, and 1.8x the DRAM bytes of a large SSD
  forward. With the special-function term the fit now finds no energy beside the others (the exps of
  the cases ride with their vector and byte terms; the fit says "fitted zero").
- **DRAM and L2** (probe 74.9 + 40.4 pJ/B; fit ~34 + 86 pJ/B, re-reads 40-54 pJ/B): a DRAM byte crosses
  L2 too, so both charge it; per DRAM byte the probe gives 115.3 pJ and the fit ~120 pJ, the same. The
  workload cases cannot split the two (nearly all their cache bytes are DRAM bytes), so the fit gives
  the re-reads their own coefficient: it lands on the probe's L2-resident read.
- **tensor** (probe 0.83 pJ/FLOP bf16; fit ~1.02 for wgmma kernels, ~1.8 for mma.sync ones): the probe's
  8192^3 GEMM runs at the power limit near peak; GEMM and MLP cases are predicted within ~2-7% by the
  probe's value.
- **static** (probe 124.8 W over empty launches, idle 124.2 W; fit ~127-131 W): with no SM busy the
  device draws its idle power. One SM-busy power charged over the whole time (42 W fitted) made the
  leave-shape-out errors worse (15.2 / 41.5% against 7.9 / 33.8%), and one over the achievable device
  time fitted zero: the busy power is in the per-operation and per-byte terms, not in time.

Where it stands (H200, 383 cases with energy windows, leave-shape-out at the measured time, median /
p90 |err|; ``ssmbench energy-fit``, the gap report's energy section): all 4.4 / 17.8% (4.9 / 22.9%
before the padded tiles, the L1 share of the scan's re-reads, the path power and the power-limited
windows as lower bounds of the fit, ``calibrate/energy.py``); every family within the issue's target
(median <= 10%, p90 <= 25%) but conv1d (3.9 / 31.9%: causal_conv1d_update's decode step at large batch,
~30% under, and PyTorch's conv1d backward). What is left is named, not fitted: a written byte looks
~15% dearer than a read one (the residuals fall with the share of written bytes within most
families, and the copy probe's 115 pJ/B sits between a read-only GEMV's ~106 and the eager norms'
~140); the Mamba-2 decode step at the power limit still draws ~20% more than its counted work.

A term with work whose coefficient the spec does not know contributes nothing and is named under
``not_modelled``; without an ``energy:`` section there is no estimate at all, and the reason says so.
Energy parameters are read preferring ``measured:`` entries whatever the ceiling preference of the
time bound (``prefer``): they are not peaks that a fair comparison would hold to the datasheet, and a
measured or calibrated value is the best knowledge of them. The label is **calibrated estimate** when a parameter used was fitted on measured workload cases (a
``measured:`` entry whose method starts with ``CALIBRATED_METHOD``), else **analytic estimate**.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..hwspecs import Spec
from .achievable import Achieved
from .roofline import COL, TENSOR_DTYPES, Prefer, spec_ceiling

LABEL = "analytic estimate"
# Share of the device-wide cache that a call's compulsory bytes may take and still be found there by the
# next call of the same op (warm energy windows; module docstring)
WARM_L2_RESIDENT_FRACTION = 0.5
CALIBRATED_LABEL = "calibrated estimate"
# A ``measured:`` entry fitted on measured workload cases (``calibrate/energy.py``) says so first in its
# method; an entry an isolating probe kernel measured does not.
CALIBRATED_METHOD = "calibrated from"
# Dynamic terms, in order: tensor FLOPs per dtype issued as full-rate instructions (wgmma), tensor FLOPs
# per dtype issued as warp-level mma.sync, vector FLOPs, transcendentals, DRAM bytes, bytes crossing the
# device-wide cache, bytes the SMs re-read from that cache beyond them, bytes served by a persistent
# on-chip level (recurrent state), seconds a kernel spends on a software path beyond its engine's or its
# memory's time (``path_issue_seconds``).
TENSOR_TERMS = tuple(f"tensor.{d}" for d in TENSOR_DTYPES)
MMA_SYNC_TERMS = tuple(f"tensor_mma_sync.{d}" for d in TENSOR_DTYPES)
TERMS = TENSOR_TERMS + MMA_SYNC_TERMS + ("vector.fp32", "special_function", "dram", "cache", "cache_reread",
                                         "on_chip", "path_issue")
NO_ESTIMATE = "no energy estimate: the spec has no energy section, or every value in it is unknown"
TERM_UNITS = {**{t: "FLOP" for t in TENSOR_TERMS + MMA_SYNC_TERMS}, "vector.fp32": "FLOP",
              "special_function": "evaluations", "dram": "B", "cache": "B", "cache_reread": "B", "on_chip": "B",
              "path_issue": "s"}


def term_key(term: str, cache_level: str | None, on_chip_level: str | None = "sram") -> str | None:
    """The spec key of a term's coefficient (None: the spec has no level for it). A re-read byte crosses the
    same cache as any other (``cache_reread`` and ``cache`` share the key)."""
    if term.startswith(("tensor.", "tensor_mma_sync.", "vector.")) or term == "special_function":
        return f"energy.per_flop.{term}"
    if term == "dram":
        return "energy.per_byte.dram"
    if term == "path_issue":
        return "energy.path_power"
    if term in ("cache", "cache_reread"):
        return None if cache_level is None else f"energy.per_byte.{cache_level}"
    return None if on_chip_level is None else f"energy.per_byte.{on_chip_level}"


def fallback_term(term: str) -> str | None:
    """The term whose coefficient stands in where a spec does not know this one's: an mma.sync FLOP is
    charged as a full-rate tensor FLOP of its dtype (the time model's rule for the mma.sync rate,
    ``achievable.achievable_work``), which undercounts its operand delivery (module docstring)."""
    return f"tensor.{term.split('.', 1)[1]}" if term in MMA_SYNC_TERMS else None


def cache_level(spec: Spec) -> str | None:
    """The device-wide level between the SMs and DRAM (the one the achievable model serves reuse from)."""
    return next((n for n, lvl in spec.memory.items() if lvl.scope == "device" and n != "dram"), None)


def _calibrated(spec: Spec, key: str, prefer: str) -> bool:
    return prefer == "measured" and any(m.key == key and m.method.startswith(CALIBRATED_METHOD)
                                        for m in spec.measured)


def _value(spec: Spec, key: str, prefer: str, origins: dict[str, str], calibrated: set[str]) -> float:
    """A parameter's value (NaN where unknown), recording its origin and whether it was calibrated."""
    c = spec_ceiling(spec, key, prefer)
    origins[key] = f"{c.origin}: {c.provenance}"
    if c.value is not None and _calibrated(spec, key, prefer):
        calibrated.add(key)
    return np.nan if c.value is None else float(c.value)


@dataclass(frozen=True)
class EnergyTable:
    """Energy parameters of several specs as arrays [n_specs]; NaN where unknown."""

    spec_ids: tuple[str, ...]
    has_section: np.ndarray            # [S] bool: the spec has an energy section with a known value
    static_w: np.ndarray               # [S]
    limit_w: np.ndarray                # [S] power.tdp
    per_term: dict[str, np.ndarray]    # term -> [S] J per unit
    keys: tuple[dict[str, str], ...]   # per spec: term -> spec key ('static' included)
    origins: tuple[dict[str, str], ...]  # per spec: key -> "origin: provenance" or "unknown: why"
    calibrated: tuple[frozenset[str], ...]  # per spec: keys whose value was fitted on measured cases
    uncounted: tuple[tuple[str, ...], ...]  # per spec: per-SM levels with an energy the model cannot charge
    fallbacks: tuple[dict[str, str], ...] = ()  # per spec: term -> the unknown key its fallback_term replaces

    @classmethod
    def of(cls, specs: Sequence[Spec], prefer: Prefer = "measured") -> EnergyTable:
        has, static, limit, keys, origins, calibrated, uncounted, fallbacks = [], [], [], [], [], [], [], []
        per_term: dict[str, list] = {t: [] for t in TERMS}
        for spec in specs:
            has.append(spec.energy is not None)
            k = {"static": "energy.static_power"}
            cache = cache_level(spec)
            # the persistent on-chip level that may hold a recurrent state (workloads/placement.py), which may
            # also be the spec's device-wide cache
            onchip = "sram" if "sram" in spec.memory and spec.memory["sram"].scope == "device" else None
            for t in TERMS:
                key = term_key(t, cache, onchip)
                if key is not None:
                    k[t] = key
            org: dict[str, str] = {}
            cal: set[str] = set()
            static.append(_value(spec, "energy.static_power", prefer, org, cal) if spec.energy is not None else np.nan)
            limit.append(_value(spec, "power.tdp", prefer, org, cal))
            for t in TERMS:
                per_term[t].append(_value(spec, k[t], prefer, org, cal) if t in k and spec.energy is not None else np.nan)
            fb: dict[str, str] = {}
            for t in TERMS:
                alt = fallback_term(t)
                if alt is not None and np.isnan(per_term[t][-1]) and not np.isnan(per_term[alt][-1]):
                    fb[t] = k[t]
                    per_term[t][-1] = per_term[alt][-1]
                    k[t] = k[alt]
            fallbacks.append(fb)
            if has[-1] and np.isnan(static[-1]) and all(np.isnan(per_term[t][-1]) for t in TERMS):
                has[-1] = False  # an energy section whose every value is unknown gives no estimate
            keys.append(k)
            origins.append(org)
            calibrated.append(frozenset(cal))
            per_sm = [lvl for lvl in (spec.energy.per_byte if spec.energy else {})
                      if spec.memory[lvl].scope == "per_sm"]
            uncounted.append(tuple(per_sm))
        return cls(tuple(s.id for s in specs), np.array(has, dtype=bool), np.array(static, dtype=float),
                   np.array(limit, dtype=float), {t: np.array(v, dtype=float) for t, v in per_term.items()},
                   tuple(keys), tuple(origins), tuple(calibrated), tuple(uncounted), tuple(fallbacks))


    def row(self, s: int) -> EnergyTable:
        """The table of spec ``s`` alone."""
        sl = slice(s, s + 1)
        return EnergyTable(self.spec_ids[sl], self.has_section[sl], self.static_w[sl], self.limit_w[sl],
                           {t: v[sl] for t, v in self.per_term.items()}, self.keys[sl], self.origins[sl],
                           self.calibrated[sl], self.uncounted[sl], self.fallbacks[sl])


def path_issue_seconds(work: np.ndarray, spec: Spec, prefer: Prefer = "measured") -> np.ndarray:
    """Seconds the work's software-path kernels (``Cost.path``: ATen's non-vectorized DRAM paths, PyTorch's
    depthwise convolution) spend beyond the time their bytes or FLOPs take at the spec's DRAM bandwidth
    or vector rate: sum over paths p of n_p x (1 / rate_p - 1 / base rate). Such a kernel is bound by
    instruction issue (index arithmetic, scalar loads and stores, per-element bounds checks), and its
    SMs draw ``energy.path_power`` over that extra time, power the per-FLOP and per-byte terms do not
    see. 0 for a path whose rate the spec does not know (the time model then times its work at the
    base rate: no extra time), or that is not slower than its base."""
    from ..hwspecs.schema import COMPUTE_PATHS, DRAM_PATHS

    def value(key: str) -> float:
        v = spec_ceiling(spec, key, prefer).value
        return np.nan if v is None else float(v)

    return path_issue_at(work, np.array([[value(f"memory.dram.path.{p}") for p in DRAM_PATHS]]),
                         np.array([[value(f"compute.path.{p}") for p in COMPUTE_PATHS]]),
                         np.array([value("memory.dram.bandwidth")]), np.array([value("compute.vector.fp32")]))[0]


def path_issue_at(work: np.ndarray, path_bw: np.ndarray | None, path_rate: np.ndarray | None, dram_bw: np.ndarray,
                  vector_rate: np.ndarray) -> np.ndarray:
    """``path_issue_seconds`` on S sets of rates at once ([S, *work shape]): path_bw [S, len(DRAM_PATHS)],
    path_rate [S, len(COMPUTE_PATHS)] (None: all unknown), dram_bw and vector_rate [S]; NaN: unknown."""
    from ..hwspecs.schema import COMPUTE_PATHS, DRAM_PATHS

    out = np.zeros((len(dram_bw),) + np.shape(work)[1:])
    for engine, names, rates, base in (("dram", DRAM_PATHS, path_bw, dram_bw),
                                       ("compute", COMPUTE_PATHS, path_rate, vector_rate)):
        if rates is None:
            continue
        for i, p in enumerate(names):
            rate = rates[:, i]
            slower = ~np.isnan(rate) & ~np.isnan(base) & (rate > 0) & (rate < base)
            extra = np.where(slower, 1.0 / np.where(slower, rate, 1.0) - 1.0 / np.where(slower, base, 1.0), 0.0)
            out = out + extra.reshape((-1,) + (1,) * (np.ndim(work) - 1)) * work[COL[f"path.{engine}.{p}"]]
    return out


def counts(work: np.ndarray, l2_bytes, dram_bytes, *, tf32=False, on_chip_bytes=0.0, l2_capacity=np.nan,
           warm_l2: bool = False, mma_sync=False, l2_reread=0.0, work_factor=1.0,
           tensor_factor=1.0, path_issue_s=0.0) -> dict[str, np.ndarray]:
    """The operations and bytes each dynamic term charges, from a work array (``roofline.work_array``:
    [len(WORK_COLUMNS), *shape]) and the achievable model's split of its executed bytes between the
    device-wide cache (``l2_bytes``) and DRAM (``dram_bytes``), broadcastable to the work shape.
    ``tf32``: fp32 matmul FLOPs run on TF32 tensor cores; ``mma_sync``: the tensor FLOPs are issued as
    mma.sync (``execution.tensor_instr``); ``l2_reread``: bytes the kernel's SMs re-read from the cache
    (``execution.l2_reread_bytes``); ``warm_l2``: the measured-window rule of the module docstring, with
    ``l2_capacity`` the cache's size in bytes; ``work_factor``: executed over counted vector and
    special-function work, the tile padding of ``padding.executed_work_factor`` (the vector FLOPs of fp32
    matmuls moved to TF32 are not scaled); ``tensor_factor``: the same for tensor FLOPs
    (``padding.executed_tensor_factor``); ``path_issue_s``: ``path_issue_seconds``. Each of tf32,
    mma_sync, l2_reread, work_factor, tensor_factor and path_issue_s is a number or an array broadcastable
    to the work shape."""
    tf32 = np.asarray(tf32, dtype=bool)
    mma = np.asarray(mma_sync, dtype=bool)
    moved = np.where(tf32, work[COL["tensor.fp32"]], 0.0)
    tpad = np.asarray(tensor_factor, dtype=float)
    tensor = {d: work[COL[f"tensor.{d}"]] * tpad for d in TENSOR_DTYPES}
    tensor["tf32"] = tensor["tf32"] + moved * tpad
    out = {f"tensor.{d}": np.where(mma, 0.0, v) for d, v in tensor.items()}
    out.update({f"tensor_mma_sync.{d}": np.where(mma, v, 0.0) for d, v in tensor.items()})
    pad = np.asarray(work_factor, dtype=float)
    out["vector.fp32"] = (work[COL["vector"]] - moved) * pad
    out["special_function"] = work[COL["special_function"]] * pad
    dram = np.asarray(dram_bytes, dtype=float) + 0.0 * work[0]
    if warm_l2:
        fits = work[COL["dram.compulsory"]] <= WARM_L2_RESIDENT_FRACTION * l2_capacity  # NaN capacity: False
        dram = np.where(fits, 0.0, dram)
    out["dram"] = dram
    out["cache"] = np.asarray(dram_bytes, dtype=float) + np.asarray(l2_bytes, dtype=float) + 0.0 * work[0]
    out["cache_reread"] = np.asarray(l2_reread, dtype=float) + 0.0 * work[0]
    out["on_chip"] = np.asarray(on_chip_bytes, dtype=float) + 0.0 * work[0]
    out["path_issue"] = np.asarray(path_issue_s, dtype=float) + 0.0 * work[0]
    return out


def counts_of_achieved(work: np.ndarray, a: Achieved, *, tf32=False, **kw) -> dict[str, np.ndarray]:
    """``counts`` with the byte split of an achievable result ``a`` of the same work (first spec)."""
    return counts(work, a.l2_bytes[0], a.dram_bytes[0], tf32=tf32, **kw)


@dataclass(frozen=True)
class EnergyArrays:
    """Energy of work on specs; arrays [n_specs, *shape]."""

    energy_j: np.ndarray          # NaN where the spec has no energy section
    time_s: np.ndarray            # after the power-limit stretch
    static_j: np.ndarray
    dynamic_j: dict[str, np.ndarray]  # term -> J
    avg_power_w: np.ndarray
    power_limited: np.ndarray     # bool: the limit binds (time stretched)
    not_modelled: tuple[dict[str, str], ...]  # per spec: key -> why (terms with work, unknown coefficient)


def power_limit_stretch(e_dyn, time, static_w, limit_w) -> tuple[np.ndarray, np.ndarray]:
    """The time after the power limit (module docstring) and whether the limit binds, elementwise:
    T' = E_dyn / (limit - static) where static + E_dyn / T exceeds the limit, else T. A NaN limit
    compares False (no stretch where it is unknown)."""
    e_dyn, time = np.broadcast_arrays(np.asarray(e_dyn, dtype=float), np.asarray(time, dtype=float))
    headroom = limit_w - static_w
    p = static_w + np.divide(e_dyn, time, out=np.full(time.shape, np.inf), where=time > 0)
    limited = (p > limit_w) & (headroom > 0)
    return np.where(limited, e_dyn / np.where(headroom > 0, headroom, 1.0), time), limited


def energy(term_counts: Mapping[str, np.ndarray], time_s: np.ndarray, table: EnergyTable) -> EnergyArrays:
    """Energy of work with ``term_counts`` (``counts``: arrays over the work shape) taking ``time_s``
    ([n_specs, *shape] or broadcastable) on every spec of ``table``."""
    S = len(table.spec_ids)
    shape = np.broadcast_shapes(np.shape(time_s), (S,) + np.shape(next(iter(term_counts.values()))))
    extra = (1,) * (len(shape) - 1)

    def ps(a):
        return np.asarray(a).reshape((-1,) + extra)

    time = np.broadcast_to(np.asarray(time_s, dtype=float), shape)
    dyn = {t: np.broadcast_to(np.nan_to_num(ps(table.per_term[t])) * np.asarray(term_counts[t]), shape)
           for t in TERMS}
    e_dyn = sum(dyn.values())
    static_w = np.nan_to_num(ps(table.static_w))
    stretched, limited = power_limit_stretch(e_dyn, time, static_w, ps(table.limit_w))
    static = static_w * stretched
    total = np.where(ps(table.has_section), static + e_dyn, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        power = np.where(stretched > 0, total / stretched, np.nan)
    used = {t for t in TERMS if np.any(np.asarray(term_counts[t]) > 0)}
    missing = tuple(not_modelled(table, s, used) for s in range(S))
    return EnergyArrays(total, stretched, static, dyn, power, np.broadcast_to(limited, shape), missing)


def not_modelled(table: EnergyTable, s: int, used: set[str]) -> dict[str, str]:
    """Spec ``s``'s parameters that work in the terms ``used`` (those with counts > 0) needs and the
    spec leaves unknown: key -> why (``EnergyArrays.not_modelled``)."""
    miss: dict[str, str] = {}
    if table.has_section[s]:
        if np.isnan(table.static_w[s]):
            miss["energy.static_power"] = table.origins[s].get("energy.static_power", "unknown")
        for t in TERMS:
            if t in used and np.isnan(table.per_term[t][s]):
                key = table.keys[s].get(t)
                miss[key or f"energy.per_byte.<{t} level>"] = (
                    table.origins[s].get(key, "unknown") if key else "the spec has no such level")
        if np.isnan(table.limit_w[s]):
            miss["power.tdp"] = "power limit unknown: no stretch check"
    return miss


def label(table: EnergyTable, s: int, used_terms: Sequence[str] = TERMS) -> str:
    keys = {"energy.static_power"} | {table.keys[s][t] for t in used_terms if t in table.keys[s]}
    return CALIBRATED_LABEL if keys & table.calibrated[s] else LABEL


def summary(arr: EnergyArrays, table: EnergyTable, term_counts: Mapping[str, np.ndarray], time_s: float,
            tokens: float | None = None, s: int = 0, index: tuple = ()) -> dict:
    """One point of ``arr`` (spec ``s``, work index ``index``) as plain data: the JSON of an energy
    estimate (``predict``'s ``total.energy``, ``api.energy``)."""
    at = (s,) + index
    if not table.has_section[s]:
        return {"label": None, "energy_j": None, "energy_per_token_j": None, "avg_power_w": None,
                "note": NO_ESTIMATE}
    e = float(arr.energy_j[at])
    used = [t for t in TERMS if float(np.asarray(term_counts[t])[index]) > 0]
    lab = label(table, s, used)
    miss = arr.not_modelled[s]
    limited = bool(arr.power_limited[at])
    note = f"{lab}: static power x time + dynamic energy per FLOP and per byte"
    if limited:
        note += (f"; power-limited: the work would draw more than power.tdp = {table.limit_w[s]:g} W, so the time "
                 f"stretches from {time_s:.4g} s to {float(arr.time_s[at]):.4g} s")
    if miss:
        note += f"; partial: excludes {', '.join(sorted(miss))} (unknown in the spec)"
    fb = {t: k for t, k in (table.fallbacks[s] if table.fallbacks else {}).items() if t in used}
    if fb:
        note += "; " + ", ".join(f"{t} FLOPs charged at {table.keys[s][t]} ({k} unknown)" for t, k in sorted(fb.items()))
    if table.uncounted[s]:
        note += (f"; per-SM levels {', '.join(table.uncounted[s])} not charged (the cost model does not count "
                 "their traffic; it is folded into the per-FLOP energies)")
    return {
        "label": lab, "energy_j": e, "energy_per_token_j": e / tokens if tokens else None,
        "avg_power_w": float(arr.avg_power_w[at]), "time_s": time_s, "time_s_after_power_limit": float(arr.time_s[at]),
        "power_limited": limited, "power_limit_w": None if np.isnan(table.limit_w[s]) else float(table.limit_w[s]),
        "static_j": float(arr.static_j[at]),
        "dynamic_j": {t: float(arr.dynamic_j[t][at]) for t in used},
        "counts": {t: float(np.asarray(term_counts[t])[index]) for t in used},
        "units": {t: TERM_UNITS[t] for t in used},
        "parameters": {k: table.origins[s][k] for k in sorted({table.keys[s].get(t) for t in used + ["static"]} - {None})
                       if k in table.origins[s]},
        "not_modelled": dict(miss), "note": note,
    }


def estimate(cost, spec: Spec, *, tf32: bool = False, serial: bool = False, launch: str = "eager",
             prefer: Prefer = "measured", tokens: float | None = None, mma_sync: bool = False,
             l2_reread: float = 0.0) -> dict:
    """The energy of one numeric Cost (one op call) on one spec at its achievable time (``achievable.py``),
    as ``summary`` gives it."""
    from .achievable import AchievableTable, achievable_work
    from .roofline import work_array
    w = work_array(cost)
    a = achievable_work(w, AchievableTable.of([spec], prefer), tf32=tf32, serial=serial, launch=launch,
                        mma_sync=mma_sync, l2_reread=l2_reread)
    c = counts_of_achieved(w, a, tf32=tf32, mma_sync=mma_sync, l2_reread=l2_reread,
                           path_issue_s=path_issue_seconds(w, spec, prefer))
    table = EnergyTable.of([spec], prefer)
    arr = energy(c, a.time, table)
    return summary(arr, table, c, float(a.time[0]), tokens)
