"""The arithmetic of the achievable-model probe (``_probe_achievable.py``), runnable anywhere and tested
on the CPU: host time per call, the fixed-plus-rate fit of copy time, the per-step latency of a
pointer chase, the knee of a read-bandwidth sweep, the chase's chain, the kernel summary of a profile,
a linear slope, and the FLOP count of the depthwise convolution it times."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def host_per_call(call: Callable[[], Any], n: int, repeats: int, sync: Callable[[], Any],
                  clock: Callable[[], int] = time.perf_counter_ns) -> list[float]:
    """Host seconds per call: for each of ``repeats`` batches, ``sync()`` (not timed), then ``n`` calls
    back to back with no synchronisation, (clock after - clock before) / n."""
    if n < 1 or repeats < 1:
        raise ValueError(f"need n >= 1 and repeats >= 1, got n={n}, repeats={repeats}")
    out = []
    for _ in range(repeats):
        sync()
        t0 = clock()
        for _ in range(n):
            call()
        out.append((clock() - t0) * 1e-9 / n)
    sync()
    return out


def fit_fixed_plus_rate(nbytes: Sequence[float], times_s: Sequence[float]) -> dict[str, float]:
    """Fit t = t0 + bytes / bandwidth by least squares on the relative error ((fit - t) / t), so that
    microsecond and millisecond points weigh alike. Returns t0_s, bandwidth (B/s) and the largest
    relative residual. Needs two or more distinct sizes and positive times; a fit whose bandwidth is
    not positive (times that do not grow with bytes) is an error, not a number."""
    b = np.asarray(nbytes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    if b.shape != t.shape or b.ndim != 1:
        raise ValueError("bytes and times must be equal-length 1-D sequences")
    if np.unique(b).size < 2:
        raise ValueError("need at least two distinct sizes to fit a fixed term and a bandwidth")
    if not (np.all(t > 0) and np.all(b > 0)):
        raise ValueError("bytes and times must be positive")
    (t0, inv_bw), *_ = np.linalg.lstsq(np.stack([1 / t, b / t], axis=1), np.ones_like(t), rcond=None)
    if not inv_bw > 0:
        raise ValueError(f"the fitted time per byte is {inv_bw:.3g} s/B: the times do not grow with the bytes")
    resid = (t0 + b * inv_bw - t) / t
    return {"t0_s": float(t0), "bandwidth": float(1 / inv_bw), "max_rel_residual": float(np.abs(resid).max()),
            "n": int(b.size)}


def per_step(t_short_s: float, t_long_s: float, steps_short: int, steps_long: int) -> float:
    """Seconds per step from two walks of different lengths: the difference removes the fixed part
    (launch, kernel start and end). A long walk that is not slower is an error."""
    if steps_long <= steps_short:
        raise ValueError(f"the long walk ({steps_long} steps) must be longer than the short one ({steps_short})")
    d = (t_long_s - t_short_s) / (steps_long - steps_short)
    if not d > 0:
        raise ValueError(f"{steps_long} steps took {t_long_s:.3g} s, no longer than {steps_short} steps "
                         f"({t_short_s:.3g} s): the walk's time does not follow its length")
    return d


def knee(footprints: Sequence[float], bandwidths: Sequence[float],
         plateau_upto: float | None = None) -> dict[str, float] | None:
    """Where a read-bandwidth-vs-footprint curve falls from its cache plateau to its memory floor: the
    last footprint at or above the midpoint between the plateau and the floor (the bandwidth at the
    largest footprint), and the first one after it below. The plateau is the median bandwidth of the
    footprints up to ``plateau_upto`` (default: the largest bandwidth), so that a few small footprints
    served faster than the rest of the cache do not set it. None when the curve has no such step (the
    plateau is not at least 1.5x the floor)."""
    f = np.asarray(footprints, dtype=float)
    bw = np.asarray(bandwidths, dtype=float)
    order = np.argsort(f)
    f, bw = f[order], bw[order]
    head = bw[f <= plateau_upto] if plateau_upto is not None else bw[:0]
    plateau, floor = (float(np.median(head)) if head.size else float(bw.max())), float(bw[-1])
    if plateau < 1.5 * floor:
        return None
    mid = (plateau + floor) / 2
    start = int(np.searchsorted(f, plateau_upto, side="right")) - 1 if head.size else int(np.argmax(bw))
    below = next((i for i in range(max(start, 0), f.size) if bw[i] < mid), None)
    if below is None or below == 0:
        return None
    return {"last_above": float(f[below - 1]), "first_below": float(f[below]), "plateau": plateau,
            "floor": floor}


def make_chain(n_slots: int, slot_elems: int, device, seed: int = 0):
    """An int64 buffer of ``n_slots * slot_elems`` elements in which the first element of each slot holds
    the element index of the next slot of one random cycle through all slots, and the start index."""
    import torch

    if n_slots < 2:
        raise ValueError(f"a chain needs at least 2 slots, got {n_slots}")
    gen = torch.Generator(device=device).manual_seed(seed)
    perm = torch.randperm(n_slots, generator=gen, device=device)
    buf = torch.zeros(n_slots * slot_elems, dtype=torch.int64, device=device)
    buf[perm * slot_elems] = torch.roll(perm, -1) * slot_elems
    return buf, int(perm[0]) * slot_elems


def walk(buf, start: int, steps: int) -> int:
    """Where ``steps`` links of the chain lead from ``start`` (the reference for the kernel)."""
    p = start
    for _ in range(steps):
        p = int(buf[p])
    return p


def summarize_kernels(kernels: Sequence[tuple[str, float]], calls: int) -> dict[str, Any]:
    """GPU activities (name, seconds) recorded over ``calls`` calls: busy time and count per call, and
    each distinct name with its count per call and time per call, longest first."""
    if calls < 1:
        raise ValueError("calls must be >= 1")
    by: dict[str, list[float]] = {}
    for name, s in kernels:
        by.setdefault(name, []).append(s)
    names = sorted(({"name": n, "per_call": len(v) / calls, "time_per_call_s": sum(v) / calls}
                    for n, v in by.items()), key=lambda d: -d["time_per_call_s"])
    return {"busy_s": sum(s for _, s in kernels) / calls, "kernels": len(kernels) / calls, "names": names}


def slope(xs: Sequence[float], ys: Sequence[float]) -> dict[str, float]:
    """Least-squares line y = intercept + slope * x (the per-node cost of a chain of x nodes). A slope
    that is not positive (times that do not grow with the chain) is an error, not a number."""
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or np.unique(x).size < 2:
        raise ValueError("need equal-length 1-D sequences with at least two distinct x")
    k, c = np.polyfit(x, y, 1)
    if not k > 0:
        raise ValueError(f"the fitted slope is {k:.3g}: the times do not grow with the chain length")
    resid = (c + k * x - y) / y
    return {"slope": float(k), "intercept": float(c), "max_rel_residual": float(np.abs(resid).max())}


def conv_flops(B: int, E: int, L: int, K: int) -> int:
    """FLOPs of F.conv1d(x [B, E, L], w [E, 1, K], bias, padding=K - 1, groups=E) as the cost rule of
    conv1d/torch_conv counts them: (2K + 1) per output, B x E x (L + K - 1) outputs."""
    return (2 * K + 1) * B * E * (L + K - 1)
