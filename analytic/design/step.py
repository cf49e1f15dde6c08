"""One workload's step on many design points at once: the achievable estimate, vectorised over designs.

A workload is (model, phase, batch, length): length is the prompt (prefill), the sequence (train) or the
context (decode, one token per sequence). Its plan's work per op call does not depend on the hardware,
so it is evaluated once (``workloads/evaluate.analyze``) and kept as a matrix [work column, call]; every
design point is then a row of ``AchievableTable`` and ``achievable.achievable_work`` projects the calls
on all of them in one call. The step composes the calls exactly as ``predict`` does
(``report.achievable_rows``):

- per call c: host_c and gpu_c from ``achievable_work`` (under CUDA-graph replay host_c = 0), with its
  kernel's cache re-reads (``energy_step.call_rereads``) and the
  sequential chain of its kernel (``chain.py``) where it has one, as ``predict`` charges it; where the
  design keeps the recurrent state on chip (``placement.py``: a persistent on-chip level that holds the
  whole state of the batch, decode only) the call's state bytes leave DRAM and its device time is at
  least its per-kernel fixed time + state bytes / that level's bandwidth;
- step host time H = sum_c host_c, plus one CUDA-graph replay (graph) or one autograd call and the
  backward's per-launch host cost (training, eager: ``workloads/train_host.py``); step device time G = sum_c gpu_c; step time T = max(H, G): the host runs ahead of the device;
- binding resource: ``host/launch`` when H >= G, else the class (``achievable.CLASSES``) that bounds the
  largest share of sum_c max(host_c, gpu_c).

Every number is an **achievable estimate**. ``tests/test_design.py`` checks that the base design gives
``predict``'s achievable total.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import UserError
from ...hwspecs import Spec
from ..achievable import CLASSES, achievable_work
from ..chain import Chain
from ..execution import chain_of, fp32_matmul_on_tf32, serial_engines, tensor_instr
from ..roofline import COL, SpecTable
from ..workloads.energy_step import call_rereads
from ..workloads.evaluate import analyze, call_shape
from ..workloads.models import Model
from ..workloads.phases import PHASES
from ..workloads.train_host import KEY as BACKWARD
from ..workloads.train_host import backward_launches, pays_backward
from ..workloads.precision import as_precision
from .space import Designs, state_level, tile_level

LABEL = "achievable estimate"
# Design points evaluated together: [chunk, n_calls] arrays stay in the CPU's caches.
CHUNK = 8192


@dataclass(frozen=True)
class Workload:
    model: Model
    phase: str
    batch: int
    length: int
    dtype: str = "bf16"
    launch: str | None = None  # None: CUDA-graph replay in decode, eager otherwise (as predict)

    def __post_init__(self):
        if self.phase not in PHASES:
            raise UserError(f"unknown phase {self.phase!r}; valid phases: {', '.join(PHASES)}")
        for name in ("batch", "length"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise UserError(f"workload {self.model.id} {self.phase}: {name} must be a positive integer, got {v!r}")

    @property
    def label(self) -> str:
        what = "context" if self.phase == "decode" else "length"
        return f"{self.model.id} {self.phase} batch {self.batch} {what} {self.length}"


@dataclass(frozen=True)
class WorkloadWork:
    """A workload's plan as work: everything about it that does not depend on the hardware."""

    workload: Workload
    launch: str
    labels: tuple[str, ...]
    work: np.ndarray  # [n_cols, n_calls] WORK_COLUMNS x call (x multiplicity)
    state_compulsory: np.ndarray  # [n_calls] state-class bytes in the work
    state_executed: np.ndarray
    tf32: np.ndarray  # [n_calls] fp32 matmuls on TF32 tensor cores
    serial: np.ndarray  # [n_calls] how engine times combine (execution.ENGINE_CODES: 0 overlap, 1 add, 2 phased)
    mma_sync: np.ndarray  # [n_calls] tensor FLOPs issued as mma.sync
    l2_reread: np.ndarray  # [n_calls] bytes re-read from the device-wide cache (time and energy charge them)
    tokens: float
    memory_total: float  # bytes in device memory (weights, KV cache, state, activations, ...)
    state_bytes: float  # the recurrent state of the whole batch (0: none, or not decode)
    working_set: float  # the largest on-chip working set of one op call
    step_host_classes: tuple[str, ...] = field(default=())  # host calls of the step itself
    # (call index, its sequential chain, its kernel run count times in a row) as predict charges it
    chains: tuple[tuple[int, Chain], ...] = field(default=())
    backward_launches: float = 0.0  # kernel launches of the step's backward (train_host.py; eager training)

    @classmethod
    def of(cls, w: Workload, base: Spec) -> WorkloadWork:
        res = analyze(w.model, w.phase, SpecTable.of([base], "measured"), [w.batch], [float(w.length)],
                      dtype=w.dtype, launch=w.launch, keep_calls=True)
        cp = res.calls
        work = np.array(res.call_work[:, :, 0, 0].T)
        state_c, state_e = (np.array(x[:, 0, 0]) for x in res.call_state)
        prec = as_precision(w.dtype)
        per_seq = w.model.state_bytes_per_sequence(prec.state)
        state = float(w.batch * per_seq) if w.phase == "decode" else 0.0
        step = ("cuda_graph",) if res.launch == "graph" else (("autograd",) if w.phase == "train" else ())
        chains = []
        for i, c in enumerate(cp.calls):
            ch = chain_of(c.call.op, c.call.impl, {k: round(v) for k, v in call_shape(
                c.call, res.phase, float(w.batch), float(w.length)).items()}, c.call.mode, c.call.backend)
            if ch is not None:
                chains.append((i, ch.repeated(c.call.count)))
        return cls(w, res.launch, tuple(c.call.label for c in cp.calls), work, state_c, state_e,
                   np.array([fp32_matmul_on_tf32(c.call.op, c.call.impl, c.call.backend) for c in cp.calls]),
                   np.array([serial_engines(c.call.op, c.call.impl, c.call.backend) for c in cp.calls]),
                   np.array([tensor_instr(c.call.op, c.call.impl, c.call.backend) == "mma_sync" for c in cp.calls]),
                   call_rereads(res), float(res.tokens[0, 0]), float(res.memory_total[0, 0]), state,
                   float(work[COL["working_set"]].max(initial=0.0)), step, tuple(chains),
                   backward_launches(tuple(c.call for c in cp.calls), res.dtype, res.phase, float(w.batch),
                                     float(w.length)) if pays_backward(res.phase, res.launch) else 0.0)


@dataclass(frozen=True)
class Step:
    """The step on each design point [n]: times in s, the binding class (index into ``CLASSES``), whether
    the state is kept on chip, whether the tiles and the workload fit (None-like NaN: not checked)."""

    time_s: np.ndarray
    host_s: np.ndarray
    gpu_s: np.ndarray
    binding: np.ndarray
    state_on_chip: np.ndarray  # bool
    tiles_fit: np.ndarray  # float: 1 fits, 0 does not, NaN capacity unknown
    fits_memory: np.ndarray  # float: 1, 0, NaN

    def binding_names(self) -> np.ndarray:
        return np.asarray(CLASSES, dtype=object)[self.binding]


def _chunk(ww: WorkloadWork, d: Designs) -> Step:
    level = state_level(d.base)
    state_cap = d.get(level and f"memory.{level}.capacity")
    state_bw = d.get(level and f"memory.{level}.bandwidth")
    # placement.state_residency: a level with known capacity and bandwidth that holds the whole state
    resident = (ww.state_bytes > 0) & ~np.isnan(state_bw) & (ww.state_bytes <= state_cap)
    a = achievable_work(ww.work, d.table(), tf32=ww.tf32, serial=ww.serial, launch=ww.launch, graph_replays=0.0,
                        mma_sync=ww.mma_sync, l2_reread=ww.l2_reread)
    host, gpu, cls = np.array(a.host), np.array(a.gpu), np.array(a.bottleneck)
    if resident.any():
        moved = ww.work.copy()
        moved[COL["dram.compulsory"]] -= ww.state_compulsory
        moved[COL["dram.executed"]] -= ww.state_executed
        r = d.take(resident)
        b = achievable_work(moved, r.table(), tf32=ww.tf32, serial=ww.serial, launch=ww.launch, graph_replays=0.0,
                            mma_sync=ww.mma_sync, l2_reread=ww.l2_reread)
        node = b.gpu - np.max(np.stack(list(b.times.values())), axis=0)
        g = np.where(ww.state_executed > 0, np.maximum(b.gpu, node + ww.state_executed / state_bw[resident, None]),
                     b.gpu)
        host[resident], gpu[resident], cls[resident] = b.host, g, b.bottleneck
    for i, chain in ww.chains:  # device time n x node + max(engines, memory, chain): at least node + chain
        one = achievable_work(ww.work[:, i:i + 1], d.table(), tf32=ww.tf32[i:i + 1], serial=ww.serial[i:i + 1],
                              launch=ww.launch, graph_replays=0.0, mma_sync=ww.mma_sync[i:i + 1], chain=chain,
                              l2_reread=ww.l2_reread[i:i + 1])
        g1, c1 = np.array(one.gpu[:, 0]), np.array(one.bottleneck[:, 0])
        if resident.any():  # where the state is on chip, the chained call as above (predict's order of terms)
            b1 = achievable_work(moved[:, i:i + 1], r.table(), tf32=ww.tf32[i:i + 1], serial=ww.serial[i:i + 1],
                                 launch=ww.launch, graph_replays=0.0, mma_sync=ww.mma_sync[i:i + 1], chain=chain,
                                 l2_reread=ww.l2_reread[i:i + 1])
            node1 = (b1.gpu - np.max(np.stack(list(b1.times.values())), axis=0))[:, 0]
            st = ww.state_executed[i]
            g1[resident] = np.maximum(b1.gpu[:, 0], node1 + st / state_bw[resident]) if st > 0 else b1.gpu[:, 0]
            c1[resident] = b1.bottleneck[:, 0]
        binds = g1 > gpu[:, i]
        gpu[:, i] = np.where(binds, g1, gpu[:, i])
        cls[:, i] = np.where(binds, c1, cls[:, i])
    h = host.sum(axis=1)
    for c in ww.step_host_classes:  # unknown host cost: no term (the estimate's not_modelled names it)
        h = h + np.nan_to_num(d.array(f"launch.host.{c}"))
    if ww.backward_launches:
        h = h + ww.backward_launches * np.nan_to_num(d.array(f"launch.host.{BACKWARD}"))
    g = gpu.sum(axis=1)
    per_call = np.maximum(host, gpu)
    n, k = per_call.shape[0], len(CLASSES)
    by_class = np.bincount((np.arange(n)[:, None] * k + cls).ravel(), weights=per_call.ravel(),
                           minlength=n * k).reshape(n, k)
    binding = np.where(h >= g, CLASSES.index("host/launch"), by_class.argmax(axis=1))
    tiles = tile_level(d.base)
    tile_cap = d.get(tiles and f"memory.{tiles}.capacity")
    tiles_fit = np.where(np.isnan(tile_cap), np.nan, (ww.working_set <= tile_cap).astype(float))
    in_dram = ww.memory_total - np.where(resident, ww.state_bytes, 0.0)
    cap = d.array("memory.dram.capacity")
    fits = np.where(np.isnan(cap), np.nan, (in_dram <= cap).astype(float))
    return Step(np.maximum(h, g), h, g, binding, resident, tiles_fit, fits)


def evaluate(ww: WorkloadWork, designs: Designs, chunk: int = CHUNK) -> Step:
    """The step of ``ww`` on every design point, ``chunk`` points at a time."""
    parts = [_chunk(ww, designs.slice(i, min(i + chunk, designs.n))) for i in range(0, designs.n, chunk)]
    return Step(*(np.concatenate([getattr(p, f) for p in parts]) for f in Step.__dataclass_fields__))
