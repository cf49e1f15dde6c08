"""The one timing primitive. Every measured time in ssm-bench comes from ``time_call``.

CUDA: each sample is one call bracketed by two CUDA events on the current stream. Before each call a
buffer of twice the L2 size (``torch.cuda.get_device_properties(...).L2_cache_size``) is written, so
the call starts with a cold L2 as it would inside a model where other layers ran in between; the
flush runs before the start event and is not part of the sample. Warm-up calls run first (at least
``warmup_calls`` and at least ``warmup_s``); their median sets the repeat count so the samples fill
``target_s`` (clamped to [min_repeats, max_repeats]). With ``cuda_graph`` the call is captured once
into a CUDA graph and the graph replays are timed: this removes the host-side launch cost, the
regime that matters for decode steps made of many small kernels.

What a sample includes: the GPU time from the start event to the end event, which contains any gap
while the host is still launching the call's kernels (the flush kernel ahead of it hides a launch of
a few microseconds, not a Python loop of hundreds of launches).

CPU: each sample is ``time.perf_counter_ns`` around one synchronous call; no cache flush (there is no
portable way to size or flush a CPU's caches), which the settings record.

Statistics: median, p20, p80, p95 (numpy linear interpolation), mean, min, max, n, all in seconds.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np


class TimingError(RuntimeError):
    """The call could not be timed as asked (e.g. CUDA graph capture failed); message = reason."""


class CaptureFailed(TimingError):
    """CUDA graph capture of the call failed. A failed capture can leave PyTorch's CUDA random-number
    generator in its capture state: every later ``torch.randn`` on that device in the process then
    raises "Offset increment outside graph capture encountered unexpectedly" (seen on the H200 with
    torch 2.11, in the gpu tests after a deliberately failed capture). Whoever catches this should not
    run more CUDA work in the same process: the sweep ends its run after recording the case."""


@dataclass(frozen=True)
class TimingSettings:
    target_s: float = 0.5  # time budget for the timed samples of one case, seconds
    warmup_calls: int = 3
    warmup_s: float = 0.05  # warm up for at least this long, seconds
    min_repeats: int = 5
    max_repeats: int = 2000
    flush_l2: bool = True  # CUDA only
    cuda_graph: bool = False  # CUDA only: time graph replays

    def __post_init__(self):
        if not (self.target_s > 0 and self.warmup_s >= 0):
            raise ValueError("target_s must be > 0 and warmup_s >= 0 (seconds)")
        if not (1 <= self.min_repeats <= self.max_repeats) or self.warmup_calls < 1:
            raise ValueError("need 1 <= min_repeats <= max_repeats and warmup_calls >= 1")

    def replace(self, **kw) -> "TimingSettings":
        return TimingSettings(**{**asdict(self), **kw})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TimingResult:
    samples_s: tuple[float, ...]
    settings: dict[str, Any]  # what was asked plus what was done (method, repeats, flush bytes, ...)

    def stats(self) -> dict[str, float | int]:
        a = np.asarray(self.samples_s, dtype=float)
        p20, p50, p80, p95 = np.percentile(a, [20, 50, 80, 95])
        return {"median": float(p50), "p20": float(p20), "p80": float(p80), "p95": float(p95),
                "mean": float(a.mean()), "min": float(a.min()), "max": float(a.max()), "n": int(a.size)}

    @property
    def median(self) -> float:
        return float(np.median(self.samples_s))


_FLUSH: dict[int, Any] = {}


def _flush_buffer(device):
    """A cached int8 buffer of 2x the device's L2 size (writing it evicts everything in L2)."""
    import torch

    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _FLUSH:
        l2 = int(torch.cuda.get_device_properties(idx).L2_cache_size)
        if l2 <= 0:
            raise TimingError(f"device {idx} reports L2_cache_size = {l2}; cannot size the L2 flush")
        _FLUSH[idx] = torch.empty(2 * l2, dtype=torch.int8, device=f"cuda:{idx}")
    return _FLUSH[idx]


def release_flush_buffers() -> None:
    _FLUSH.clear()


def make_timed_callable(fn: Callable[[], Any], device, settings: TimingSettings) -> tuple[Callable[[], Any], Any]:
    """The callable that ``time_call`` and the energy window run: ``fn`` itself, or the replay of a
    CUDA graph that captured one call of ``fn``. Returns (callable, keepalive): hold ``keepalive``
    (the graph and its static output) as long as the callable is used."""
    if not (settings.cuda_graph and device.type == "cuda"):
        return fn, None
    import torch

    try:
        # Warm up on a side stream before capture, as the PyTorch CUDA-graph docs require (lazy
        # initialisation inside libraries must not happen during capture).
        side = torch.cuda.Stream(device=device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = fn()
        torch.cuda.synchronize(device)
    except Exception as exc:  # capture fails for calls that sync with the host or allocate dynamically
        raise CaptureFailed(f"CUDA graph capture failed: {type(exc).__name__}: {exc}") from exc
    return graph.replay, (graph, static_out)


def _cuda_samples(call, n: int, flush) -> list[float]:
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        if flush is not None:
            flush.zero_()
        starts[i].record()
        call()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends)]  # elapsed_time is in ms


def _cpu_samples(call, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        call()
        out.append((time.perf_counter_ns() - t0) * 1e-9)
    return out


def _repeats(per_call_wall_s: float, settings: TimingSettings) -> int:
    if per_call_wall_s <= 0:
        return settings.max_repeats
    return int(min(settings.max_repeats, max(settings.min_repeats, math.ceil(settings.target_s / per_call_wall_s))))


def time_call(call: Callable[[], Any], device, settings: TimingSettings) -> TimingResult:
    """Time ``call`` (from ``make_timed_callable``) on ``device`` (a torch.device)."""
    cuda = device.type == "cuda"
    if cuda:
        import torch

        torch.cuda.synchronize(device)
        flush = _flush_buffer(device) if settings.flush_l2 else None

        def sample(n):
            with torch.cuda.device(device):
                return _cuda_samples(call, n, flush)
    else:
        flush = None

        def sample(n):
            return _cpu_samples(call, n)

    # Warm-up: one call at a time until both minimums are met; the wall time per warm-up call
    # (including the flush and host overhead) sizes the timed run.
    warm, t0 = [], time.perf_counter_ns()
    while True:
        warm += sample(1)
        elapsed = (time.perf_counter_ns() - t0) * 1e-9
        if len(warm) >= settings.warmup_calls and elapsed >= settings.warmup_s:
            break
        if len(warm) >= 10 * settings.max_repeats:  # a call so fast that warmup_s would take forever
            break
    n = _repeats(elapsed / len(warm), settings)
    samples = sample(n)
    done: dict[str, Any] = {
        **settings.to_dict(),
        "method": "cuda_events" if cuda else "perf_counter_ns",
        "device": str(device),
        "warmup_done": len(warm),
        "repeats": n,
    }
    if cuda:
        done["flush_l2"] = flush is not None
        done["flush_bytes"] = int(flush.numel()) if flush is not None else 0
        done["cuda_graph"] = settings.cuda_graph
    else:
        done["flush_l2"] = False
        done["flush_note"] = "no cache flush on CPU"
        done["cuda_graph"] = False
    return TimingResult(tuple(samples), done)
