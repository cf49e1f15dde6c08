"""``ssmbench probe --collectives``: latency and bus bandwidth of torch.distributed collectives.

Launch on every rank with torchrun (``torchrun --nproc-per-node N -m ssmbench probe --collectives
--device cuda --out FILE``); rank 0 writes the file. Per collective of ``COLLECTIVES`` and message
size S (a geometric range: 1 KiB to 1 GiB on CUDA, 1 KiB to 1 MiB on the CPU):

- all_reduce (sum) of an S-byte buffer; all_gather into an S-byte output (S / n per rank);
  reduce_scatter of an S-byte input (S / n out per rank); all_to_all_single of an S-byte buffer;
  send_recv: every rank sends S bytes to rank + 1 and receives S bytes from rank - 1 at once
  (``batch_isend_irecv``), as nccl-tests' sendrecv does. S follows nccl-tests' definitions
  (``analytic/collectives.py``), fp32 elements.
- Timing: warm-up, then the iteration count every rank uses is fixed from the slowest rank's
  first timed call (an all_reduce MAX, so that all ranks issue the same calls); REPEATS timed regions
  of that many back-to-back calls, each between a barrier and a device synchronise
  (``time.perf_counter``); per region the slowest rank's time (a collective ends when its last rank
  does); the median region / iterations is the time per call.
- Per size: algbw = S / t and busbw = algbw x factor(n) (nccl-tests doc/PERFORMANCE.md). Per
  collective a fit of t = alpha + S x factor / busbw, least squares on relative error (each size
  weighs the same, whatever its time); an intercept that comes out negative (noise at large
  sizes) is replaced by the smallest size's time, which is then an upper bound on alpha.

What was measured is labelled by its transport: NCCL on CUDA (NVLink / NVSwitch within a node, the
network across nodes, as NCCL chose: its topology is recorded where ``NCCL_*`` variables set it),
or gloo on the CPU, which is TCP over loopback between processes on one host: a test of the path,
never an interconnect ceiling of a GPU. Only NCCL fits become ``measured:`` entries, keyed
``interconnect.<link>.collectives.<name>.{latency,bus_bandwidth}`` for ``specs new --probe``; a gloo
run writes its fits as observations and an empty ``measured:`` list.
"""

from __future__ import annotations

import datetime as _dt
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..analytic.collectives import bus_factor
from ..hwspecs.schema import COLLECTIVES
from ..hwspecs.units import format_quantity
from .distributed import time_regions
from .environment import collect

REPEATS = 5  # timed regions per size; the median is reported
WARMUP_CALLS = 3
MAX_ITERS = 1000
ELEMENT_BYTES = 4  # fp32 buffers


@dataclass(frozen=True)
class CollectiveSizes:
    min_bytes: int
    max_bytes: int
    factor: int
    target_s: float  # timed seconds per size (all repeats)

    @classmethod
    def default(cls, device_type: str) -> CollectiveSizes:
        if device_type == "cuda":
            return cls(1 << 10, 1 << 30, 2, 0.05)
        return cls(1 << 10, 1 << 20, 4, 0.02)

    def sizes(self, n: int) -> list[int]:
        """Sizes in bytes, each a whole number of fp32 elements per rank (n x 4 B granularity)."""
        out, s = [], self.min_bytes
        step = n * ELEMENT_BYTES
        while s <= self.max_bytes:
            out.append(max(step, s // step * step))
            s *= self.factor
        return sorted(set(out))


def _ops(dist, device, size: int, n: int, rank: int) -> dict[str, Callable[[], Any]]:
    import torch

    numel = size // ELEMENT_BYTES
    full = torch.zeros(numel, device=device)  # zeros: repeated sums stay finite
    out = torch.empty(numel, device=device)
    part = torch.zeros(numel // n, device=device)
    part_out = torch.empty(numel // n, device=device)
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

    def send_recv():
        ops = [dist.P2POp(dist.isend, full, (rank + 1) % n), dist.P2POp(dist.irecv, out, (rank - 1) % n)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()

    return {"all_reduce": lambda: dist.all_reduce(full), "all_gather": lambda: gather(out, part),
            "reduce_scatter": lambda: scatter(part_out, full), "all_to_all": lambda: dist.all_to_all_single(out, full),
            "send_recv": send_recv}


def _time_one(dist, device, call: Callable[[], Any], sync: Callable[[], None], target_s: float) -> tuple[float, int]:
    """(median time per call over REPEATS regions, the slowest rank's per region; iterations per region)."""
    per, iters = time_regions(dist, device, call, sync, target_s, warmup=WARMUP_CALLS, repeats=REPEATS,
                              max_iters=MAX_ITERS)
    return statistics.median(per), iters


def fit(points: list[dict[str, float]]) -> dict[str, Any]:
    """t = alpha + wire / busbw over ``points`` ({wire_bytes, time_s}), least squares on relative error."""
    wire = np.array([p["wire_bytes"] for p in points], dtype=float)
    t = np.array([p["time_s"] for p in points], dtype=float)
    A = np.stack([np.ones_like(wire), wire], axis=1) / t[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(A, np.ones_like(t), rcond=None)
    note = "least squares on relative error"
    if alpha < 0 or beta <= 0:
        alpha = float(t[np.argmin(wire)])
        big = wire > 0
        beta = float(np.median((t[big] - alpha).clip(min=1e-12) / wire[big])) if big.any() else 0.0
        note = ("the fitted intercept was negative (noise at large sizes): latency = the smallest size's time "
                "(an upper bound), bus bandwidth = median of wire bytes / (t - latency)")
    pred = alpha + wire * beta
    return {"latency_s": float(alpha), "bus_bandwidth_bytes_per_s": float(1.0 / beta) if beta > 0 else None,
            "max_relative_error": float(np.max(np.abs(pred - t) / t)), "method": note, "points": len(points)}


def transport(backend: str, device_type: str) -> str:
    if backend == "nccl":
        return ("NCCL on CUDA GPUs: NVLink / NVSwitch within a node, the network across nodes, as NCCL chose "
                "(NCCL_* settings: " + (", ".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                                                  if k.startswith("NCCL_")) or "none") + ")")
    return (f"gloo on {device_type}: TCP over loopback between processes of one host; a test of the path, not an "
            "interconnect ceiling of any GPU")


def measured_entries(fits: dict[str, dict[str, Any]], link_index: int, method: str,
                     today: _dt.date) -> list[dict[str, Any]]:
    """``measured:`` entries (spec format) of the fits, keyed on link ``link_index`` of a spec."""
    out = []
    for name, f in fits.items():
        base = f"interconnect.{link_index}.collectives.{name}"
        if f["latency_s"] > 0:
            out.append({"key": f"{base}.latency", "value": format_quantity(f["latency_s"], "time", digits=4),
                        "date": today, "method": f"{method}; fitted latency (alpha) of {name}: {f['method']}"})
        if f["bus_bandwidth_bytes_per_s"]:
            out.append({"key": f"{base}.bus_bandwidth",
                        "value": format_quantity(f["bus_bandwidth_bytes_per_s"], "bandwidth", digits=4),
                        "date": today, "method": f"{method}; fitted bus bandwidth (nccl-tests busbw) of {name}"})
    return out


def run_collectives(rank, sizes: CollectiveSizes, link_index: int, argv: list[str] | None = None,
                    log: Callable[[str], None] = print) -> dict[str, Any] | None:
    """Measure every collective on every rank of the initialised group; the probe document on rank 0
    (None elsewhere). ``rank``: ``distributed.Rank``."""
    import torch
    import torch.distributed as dist

    from .distributed import gather_to_rank0, rank_meta

    device = torch.device(rank.device)
    n = rank.world_size
    cuda = device.type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    curves: dict[str, list[dict[str, float]]] = {c: [] for c in COLLECTIVES}
    failed = []
    for size in sizes.sizes(n):
        ops = _ops(dist, device, size, n, rank.rank)
        for name in COLLECTIVES:
            if n == 1 and name == "send_recv":
                continue
            try:
                t, iters = _time_one(dist, device, ops[name], sync, sizes.target_s)
            except RuntimeError as exc:  # e.g. a collective the backend lacks: the same on every rank
                failed.append({"name": f"{name} {size} B", "reason": f"{type(exc).__name__}: {exc}"})
                continue
            alg = size / t
            curves[name].append({"bytes": size, "wire_bytes": size * bus_factor(name, n), "time_s": t,
                                 "algbw_bytes_per_s": alg, "busbw_bytes_per_s": alg * bus_factor(name, n),
                                 "iterations": iters})
        del ops
        if rank.rank == 0:
            log(f"collectives: {format_quantity(size, 'capacity')} done")
    env = collect(device, seed=0, argv=argv)
    everyone = gather_to_rank0({**rank_meta(rank), "device": env["device"]})
    if rank.rank != 0:
        return None
    label = transport(rank.backend, device.type)
    fits = {c: fit(p) for c, p in curves.items() if len(p) >= 2}
    today = _dt.datetime.now(_dt.timezone.utc).date()
    method = (f"torch.distributed {rank.backend} {'/'.join(sorted(fits))} over {n} ranks, "
              f"{sizes.min_bytes}-{sizes.max_bytes} B x{sizes.factor}, median of {REPEATS} regions, slowest rank; "
              f"torch {torch.__version__}")
    measured = measured_entries(fits, link_index, method, today) if rank.backend == "nccl" else []
    observations = [{"name": f"{c} {k} (gloo, CPU)", "value": format_quantity(v, kind, digits=4), "method": label}
                    for c, f in fits.items() for k, kind, v in
                    (("latency", "time", f["latency_s"]), ("bus bandwidth", "bandwidth", f["bus_bandwidth_bytes_per_s"]))
                    if v and rank.backend != "nccl"]
    return {
        "schema_version": 1, "kind": "ssmbench-probe",
        "label": f"measurement (collectives; {label})",
        "meta": {**env, "distributed": {"world_size": n, "backend": rank.backend, "ranks": everyone}},
        "sizes": {**sizes.__dict__, "ranks": n, "element_bytes": ELEMENT_BYTES},
        "measured": measured, "observations": observations, "failed": failed, "warnings": [],
        "collectives": {"transport": label, "link_index": link_index, "ranks": n,
                        "bus_factor": {c: bus_factor(c, n) for c in COLLECTIVES},
                        "convention": "nccl-tests doc/PERFORMANCE.md: algbw = S / t, busbw = algbw x factor(n)",
                        "curves": curves, "fits": fits},
        "how_to_use": ("ssmbench specs new --from SPEC --probe THIS_FILE --out NEW.yaml merges the 'measured' "
                       "entries (NCCL runs only) into interconnect link "
                       f"{link_index} of a copy of SPEC; predict --tp/--cp/--ep/--dp then uses them"),
    }
