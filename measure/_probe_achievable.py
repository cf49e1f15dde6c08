"""The probe's measurements for the achievable-time model (issue #13): per-call cost by backend class
(host vs GPU), load-to-use latency per memory level, L2 bandwidth with a read-bandwidth-vs-footprint
sweep, and copy time vs bytes per kernel fitted as a fixed term plus bytes over a bandwidth.

The arithmetic (fits, per-step latency, the L2 knee, the host-time loop, the pointer chain) is plain
Python / PyTorch and runs anywhere; the measurements themselves need CUDA (and Triton for the
kernels in ``_probe_kernels``). ``measure/probe.py`` calls ``run_achievable`` with a ``Ctx`` that turns
values into spec entries and observations.

Why each measurement is built as it is:

- Host time per call: N calls issued back to back without synchronising, CPU wall time / N. The
  GPU work of every call is a few microseconds, so N = 200 calls queue far fewer kernels than the
  launch queue holds: the host never blocks on a full queue, and the time is the software path's
  (dispatcher, launcher, binding) alone. GPU time per call: the sum of the kernel durations that
  torch.profiler records for one call (CUPTI), and the wall time per call back to back (CUDA events
  around N calls / N), which is whichever of host and GPU is slower.
- Latency: one program walks a random cyclic permutation of 128-byte slots (one line each), every
  load's address the previous load's value. The time of 2S steps minus that of S steps, over S,
  removes the launch and the kernel's start and end. DRAM: 1 GiB (about 17x the L2), L2 flushed
  before each timed call and every call continuing where the last ended, so each step is an L2
  miss; random lines over 1 GiB also miss the TLBs of some, which is part of what a random access
  costs. L2: 8 MiB, read once before timing and never flushed.
- L2 bandwidth: a grid-stride read of a 16 MiB buffer repeated in one launch (~2 GiB read per
  call), no flush: after the first call the buffer is L2-resident. The sweep over footprints shows
  where the buffer stops fitting.
- Copy time vs bytes: a one-block-per-program Triton copy and ``copy_`` (cudaMemcpyAsync, device to
  device), L2 flushed before each call, 4 KiB .. 1 GiB; t = t0 + bytes / BW by least squares on the
  relative error (times span five decades), bytes = read + written. ``copy_``'s t0 is
  ``launch.timed_call``: the fixed device time of one kernel timed exactly as measure/timing.py times
  a call (after the flush, between two events).
- Backward-graph nodes: the host time of ``torch.autograd.grad`` over chains of k view nodes; the
  slope is ``launch.host.autograd_node`` (a view's backward issues no kernel).
- ATen kernel paths (broadcast, cast, reduction), the depthwise convolution's and softplus's rates and
  the eager host times of ops that allocate, broadcast, reduce or cast: ``_probe_paths.py`` says how.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..hwspecs.schema import HOST_CLASSES, LIBRARY_CALL_HOST_CLASSES, RUNTIME_HOST_CLASSES
from . import _probe_mma

HOST_CALLS = 200  # calls per host-time batch
HOST_REPEATS = 30  # batches; the median is reported
WARMUP_CALLS = 20
PROFILE_CALLS = 50  # calls under torch.profiler for the kernel time per call

SLOT_BYTES = 128  # one pointer per 128-byte line
CHASE_STEPS = 4096  # the short walk; the long walk is twice this
DRAM_CHASE_MIB = 1024
L2_CHASE_MIB = 8
LATENCY_SWEEP_MIB = (4, 16, 32, 48, 64, 96, 128, 256, 1024)
L2_BW_MIB = 16
READ_SWEEP_MIB = (1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 128, 256, 512)
READ_BYTES_PER_CALL = 2 * 2**30
READ_BLOCK = 4096  # fp32 elements per block read (16 KiB)
PROGRAMS_PER_SM = 8
COPY_SWEEP_BYTES = tuple(4096 * 4**k for k in range(10))  # 4 KiB .. 1 GiB
COPY_BLOCK = 4096  # int32 elements per program (16 KiB)
AUTOGRAD_CHAIN = (1, 2, 4, 8, 16, 32, 64)  # view nodes behind the one-node graph of launch.host.autograd


# The arithmetic (runs anywhere) is in _probe_math.py; its names stay importable from here.
from ._probe_math import (  # noqa: F401
    conv_flops,
    fit_fixed_plus_rate,
    host_per_call,
    knee,
    make_chain,
    per_step,
    slope,
    summarize_kernels,
    walk,
)

# ---- measurements (CUDA) ----------------------------------------------------------------------------


@dataclass
class Ctx:
    """What the probe gives these measurements: the device, its timer and its sinks."""
    device: Any
    timed: Callable[..., tuple[float, str]]  # (name, call, flush=False, target_s=None) -> (median s, 'N (p90/p10 X)')
    measure: Callable[[str, float, str], None]  # (spec key, SI value, method)
    observe: Callable[[str, float, str, str], None]  # (name, SI value, unit kind, method)
    spread_text: Callable[[str, Sequence[float]], str]  # records a spread; returns 'N (p90/p10 X)'
    ver: str
    target_s: float
    log: Callable[[str], None] = print
    curves: list[dict[str, Any]] = field(default_factory=list)
    per_call: list[dict[str, Any]] = field(default_factory=list)


def _sync():
    import torch

    torch.cuda.synchronize()


def profile_gpu(call: Callable[[], Any], calls: int,
                cpu: bool = False) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """GPU activities (kernels, memcpy, memset) over ``calls`` calls as (name, seconds) from
    torch.profiler, and with ``cpu`` the CPU-side events (runtime API calls among them) likewise. Range
    annotations mirrored onto the GPU timeline (``record_function`` ranges such as torch.optim's
    ``Optimizer.step#AdamW.step``, which kineto reports as CUDA-side events when CPU activity is collected)
    are not activities: their spans cover kernels already listed, so they are skipped."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CUDA] + ([ProfilerActivity.CPU] if cpu else [])
    _sync()
    with profile(activities=acts) as prof:
        for _ in range(calls):
            call()
        _sync()
    gpu, host = [], []
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            if getattr(e, "is_user_annotation", False):
                continue
            gpu.append((e.name, e.time_range.elapsed_us() * 1e-6))
        elif cpu:
            host.append((e.name, e.time_range.elapsed_us() * 1e-6))
    return gpu, host


def chase_ns(ctx: Ctx, mib: int, flush: bool, steps: int = CHASE_STEPS, target_s: float | None = None,
             seed: int = 0) -> tuple[float, str]:
    """Seconds per dependent load over a chain of ``mib`` MiB, and the repeats text."""
    import torch

    from ._probe_kernels import chase

    slot = SLOT_BYTES // 8
    n_slots = mib * 2**20 // SLOT_BYTES
    buf, start = make_chain(n_slots, slot, ctx.device, seed)
    state = torch.tensor([start], dtype=torch.int64, device=ctx.device)
    check = 64
    chase[(1,)](buf, state, check, num_warps=1)
    want = walk(buf, start, check)
    if int(state.item()) != want:
        raise RuntimeError(f"chase kernel: {check} steps from {start} ended at {int(state.item())}, expected {want}")
    if not flush:
        buf.sum()  # read once: a chain that fits is L2-resident before timing
    name = f"latency {mib} MiB{' (L2 flushed)' if flush else ''}"
    t1, r1 = ctx.timed(f"{name}, {steps} steps", lambda: chase[(1,)](buf, state, steps, num_warps=1), flush, target_s)
    t2, r2 = ctx.timed(f"{name}, {2 * steps} steps", lambda: chase[(1,)](buf, state, 2 * steps, num_warps=1), flush,
                       target_s)
    return per_step(t1, t2, steps, 2 * steps), f"medians of {r1} and {r2}"


def latency(ctx: Ctx) -> None:
    how = (f"one Triton program walks a random cyclic permutation of {SLOT_BYTES}-byte slots (.cg loads, each "
           f"address the previous load's value); (time of {2 * CHASE_STEPS} steps - time of {CHASE_STEPS}) / "
           f"{CHASE_STEPS}")
    s, reps = chase_ns(ctx, DRAM_CHASE_MIB, flush=True)
    ctx.measure("memory.dram.latency", s, f"{how}, {DRAM_CHASE_MIB} MiB chain, L2 flushed before each call and "
                                          f"each call continuing the walk (every step an L2 miss; random lines "
                                          f"over 1 GiB include TLB misses), {reps}; {ctx.ver}")
    s, reps = chase_ns(ctx, L2_CHASE_MIB, flush=False)
    ctx.measure("memory.l2.latency", s, f"{how}, {L2_CHASE_MIB} MiB chain read once before timing, no flush "
                                        f"(L2-resident; an average over near and far L2 partitions), {reps}; {ctx.ver}")
    points = []
    for mib in LATENCY_SWEEP_MIB:
        s, _ = chase_ns(ctx, mib, flush=False, target_s=ctx.target_s / 5)
        points.append([mib * 2**20, s])
    ctx.curves.append({"name": "latency_vs_footprint", "x": "footprint_bytes", "y": "seconds_per_load",
                       "points": points, "method": f"{how}, no flush (steady state: lines may stay in L2 from "
                                                   f"earlier steps), median per point; {ctx.ver}"})


def read_bandwidth(ctx: Ctx, mib: int, target_s: float | None = None) -> tuple[float, str]:
    """Bytes per second of the repeated grid-stride read of an ``mib`` MiB fp32 buffer, no flush."""
    import torch

    from ._probe_kernels import read_sum

    n = mib * 2**20 // 4
    n_blocks = n // READ_BLOCK
    reps = max(1, READ_BYTES_PER_CALL // (mib * 2**20))
    total = reps * n_blocks
    sms = torch.cuda.get_device_properties(ctx.device).multi_processor_count
    grid = (min(total, sms * PROGRAMS_PER_SM),)
    x = torch.rand(n_blocks * READ_BLOCK, device=ctx.device)
    out = torch.empty(grid[0], device=ctx.device)

    def call():
        read_sum[grid](x, out, n_blocks, total, BLOCK=READ_BLOCK, num_warps=8)

    call()
    got, want = out.double().sum().item(), reps * x.double().sum().item()
    if abs(got - want) > 1e-4 * abs(want):
        raise RuntimeError(f"read_sum over {mib} MiB: sum {got:.6g}, expected {want:.6g}")
    med, r = ctx.timed(f"read {mib} MiB x {reps}", call, False, target_s)
    return reps * n_blocks * READ_BLOCK * 4 / med, f"{reps} passes per call, {grid[0]} programs, median of {r}"


def l2_bandwidth(ctx: Ctx) -> None:
    how = (f"Triton grid-stride read ({READ_BLOCK * 4 // 1024} KiB blocks, .cg loads, fp32 sum per program) of "
           f"a buffer repeated in one launch (~{READ_BYTES_PER_CALL // 2**30} GiB read per call), no flush")
    bw, reps = read_bandwidth(ctx, L2_BW_MIB)
    ctx.measure("memory.l2.bandwidth", bw, f"{how}, {L2_BW_MIB} MiB buffer (L2-resident after the first call), "
                                           f"bytes read / median time, {reps}; {ctx.ver}")
    points = []
    for mib in READ_SWEEP_MIB:
        bw, _ = read_bandwidth(ctx, mib, target_s=ctx.target_s / 5)
        points.append([mib * 2**20, bw])
    k = knee([p[0] for p in points], [p[1] for p in points], plateau_upto=L2_BW_MIB * 2**20)
    ctx.curves.append({"name": "read_bandwidth_vs_footprint", "x": "footprint_bytes", "y": "bytes_per_second",
                       "points": points, "knee": k, "method": f"{how}, median per point; {ctx.ver}"})
    if k is not None:
        ctx.observe("read_bandwidth.knee", k["first_below"], "capacity",
                    f"first footprint of the read sweep whose bandwidth is below the midpoint of the L2 plateau "
                    f"(median up to {L2_BW_MIB} MiB) and the DRAM floor (last above: {k['last_above'] / 2**20:g} MiB); "
                    f"the L2 capacity knee")
        ctx.observe("read_bandwidth.dram", k["floor"], "bandwidth",
                    f"the read sweep at {READ_SWEEP_MIB[-1]} MiB (read only, no writes), {how}; {ctx.ver}")


def copy_curves(ctx: Ctx) -> None:
    import torch

    from ._probe_kernels import copy

    for name, label in (("triton_copy", "Triton copy kernel (one 16 KiB block per program)"),
                        ("copy_", "Tensor.copy_ (cudaMemcpyAsync device to device)")):
        points = []
        for nbytes in COPY_SWEEP_BYTES:
            n = nbytes // 4
            src = torch.randint(0, 2**31 - 1, (n,), dtype=torch.int32, device=ctx.device)
            dst = torch.empty_like(src)
            if name == "triton_copy":
                grid = ((n + COPY_BLOCK - 1) // COPY_BLOCK,)

                def call(src=src, dst=dst, grid=grid, n=n):
                    copy[grid](src, dst, n, BLOCK=COPY_BLOCK, num_warps=4)
            else:
                def call(src=src, dst=dst):
                    dst.copy_(src)
            call()
            if not torch.equal(src, dst):
                raise RuntimeError(f"{label}: {nbytes} bytes copied wrongly")
            med, _ = ctx.timed(f"{name} {nbytes} B", call, True, ctx.target_s / 5)
            points.append([2 * nbytes, med])
        fit = fit_fixed_plus_rate([p[0] for p in points], [p[1] for p in points])
        method = (f"{label}, {COPY_SWEEP_BYTES[0] // 1024} KiB .. {COPY_SWEEP_BYTES[-1] // 2**30} GiB copied, L2 "
                  f"flushed before each call, CUDA events, median per size; t = t0 + bytes / BW by least squares "
                  f"on the relative error, bytes = read + written, largest residual "
                  f"{fit['max_rel_residual']:.0%}; {ctx.ver}")
        ctx.curves.append({"name": f"{name}_time_vs_bytes", "x": "bytes_read_plus_written", "y": "seconds",
                           "points": points, "fit": fit, "method": method})
        ctx.observe(f"{name}.t0", fit["t0_s"], "time", f"fixed term of {method}")
        if name == "copy_":  # one kernel timed as measure/timing.py times a call: after a flush, in events
            ctx.measure("launch.timed_call", fit["t0_s"], f"fixed term of {method}")
        ctx.observe(f"{name}.bandwidth", fit["bandwidth"], "bandwidth", f"bandwidth term of {method}")


EXT_CPP = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>
void add_one_launch(float* p, void* stream);
void add_one(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.numel() >= 1, "add_one: a CUDA fp32 tensor");
  at::cuda::CUDAGuard guard(x.device());
  add_one_launch(x.data_ptr<float>(), at::cuda::getCurrentCUDAStream().stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add_one", &add_one); }
"""
EXT_CU = r"""
#include <cuda_runtime.h>
__global__ void add_one_kernel(float* p) { p[0] += 1.0f; }
void add_one_launch(float* p, void* stream) { add_one_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(p); }
"""


def build_extension():
    """The tiny CUDA extension (checks, device guard, current stream, one <<<1, 1>>> launch), as a
    library's pybind11 op does it; built with torch.utils.cpp_extension.load_inline (nvcc, ninja) in a
    folder named by a hash of the sources and the PyTorch version, so that a second build on the same
    machine (a device script may build it ahead, while other compilers run anyway) is ninja's no-op."""
    import hashlib
    import os
    import tempfile

    import torch
    from torch.utils.cpp_extension import load_inline

    tag = hashlib.sha1((EXT_CPP + EXT_CU + torch.__version__).encode()).hexdigest()[:12]
    folder = os.path.join(tempfile.gettempdir(), f"ssmbench_probe_ext_{tag}")
    os.makedirs(folder, exist_ok=True)
    return load_inline(name="ssmbench_probe_ext", cpp_sources=EXT_CPP, cuda_sources=EXT_CU,
                       build_directory=folder, verbose=False)


def _build_off_the_measuring_cores():
    """Run the build (and the compilers it starts, which inherit this thread's affinity) on the CPUs
    this process is not pinned to, where there are any: a compiler on a measuring core would slow the
    host-time measurements that run meanwhile (Linux: the affinity of the calling thread)."""
    import os

    with contextlib.suppress(AttributeError, OSError):
        mine = os.sched_getaffinity(0)
        others = set(range(os.cpu_count() or 0)) - mine
        if others:
            os.sched_setaffinity(0, others)
    return build_extension()


def class_call(cls: str, device, ext_future) -> tuple[Callable[[], Any], Any, str]:
    """(call, context to hold around the calls, description) of the smallest call of one backend class."""
    import torch

    if cls == "torch_eager":
        t = torch.zeros(1, device=device)
        return (lambda: t.add_(1.0)), contextlib.nullcontext(), "a one-element Tensor.add_"
    if cls == "triton":
        from ._probe_kernels import add_one

        t = torch.zeros(1, device=device)
        return (lambda: add_one[(1,)](t, num_warps=1)), contextlib.nullcontext(), \
            "a one-element @triton.jit kernel through its Python launcher"
    if cls == "triton_autotune":
        from ._probe_kernels import add_one_autotuned

        t = torch.zeros(1, device=device)
        return (lambda: add_one_autotuned[(1,)](t, 1)), contextlib.nullcontext(), \
            "a one-element kernel behind triton.autotune (2 configs, key n; config cached after the warm-up)"
    if cls == "cuda_graph":
        t = torch.zeros(1, device=device)
        side = torch.cuda.Stream(device=device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            t.add_(1.0)
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            t.add_(1.0)
        return graph.replay, contextlib.nullcontext(), "CUDAGraph.replay() of a captured one-node graph (a one-element add_)"
    if cls == "autograd":
        x = torch.zeros(1, device=device, requires_grad=True)
        y = x * 2.0
        go = torch.ones(1, device=device)
        return (lambda: torch.autograd.grad(y, x, go, retain_graph=True)), contextlib.nullcontext(), \
            "torch.autograd.grad of a retained one-node graph (y = 2x, one element; its backward is one eager kernel)"
    if cls == "cuda_extension":
        ext = ext_future.result()  # raises the build's error
        t = torch.zeros(1, device=device)
        return (lambda: ext.add_one(t)), contextlib.nullcontext(), \
            "a load_inline pybind11 op (checks, device guard, current stream, one <<<1, 1>>> kernel)"
    if cls == "cublas":
        a, b = (torch.randn(64, 64, device=device, dtype=torch.bfloat16) for _ in range(2))
        c = torch.empty(64, 64, device=device, dtype=torch.bfloat16)
        return (lambda: torch.matmul(a, b, out=c)), contextlib.nullcontext(), "a 64x64x64 bf16 torch.matmul(out=)"
    if cls == "sdpa":
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        q, k, v = (torch.randn(1, 1, 128, 64, device=device, dtype=torch.bfloat16) for _ in range(3))
        return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)), \
            sdpa_kernel(SDPBackend.FLASH_ATTENTION), \
            "a causal SDPA call under sdpa_kernel(FLASH_ATTENTION), [1, 1, 128, 64] bf16"
    if cls == "cudnn":
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        q, k, v = (torch.randn(1, 1, 128, 64, device=device, dtype=torch.bfloat16) for _ in range(3))
        return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)), \
            sdpa_kernel(SDPBackend.CUDNN_ATTENTION), \
            "a causal SDPA call under sdpa_kernel(CUDNN_ATTENTION), [1, 1, 128, 64] bf16"
    raise ValueError(f"unknown backend class {cls!r}; expected one of {list(HOST_CLASSES)}")


def per_call_cost(ctx: Ctx, cls: str, ext_future) -> None:
    call, hold, what = class_call(cls, ctx.device, ext_future)
    with hold:
        for _ in range(WARMUP_CALLS):
            call()
        _sync()
        host = host_per_call(call, HOST_CALLS, HOST_REPEATS, _sync)
        host_s = float(np.median(host))
        host_reps = ctx.spread_text(f"launch.host.{cls}", host)

        def batch():
            for _ in range(HOST_CALLS):
                call()

        wall, wall_reps = ctx.timed(f"launch.wall.{cls}", batch)
        gpu = summarize_kernels(profile_gpu(call, PROFILE_CALLS)[0], PROFILE_CALLS)
    wall /= HOST_CALLS
    names = ", ".join(f"{d['name'][:60]} x{d['per_call']:g}" for d in gpu["names"][:3])
    own, less = host_s, ""
    if cls == "autograd":
        # the engine's own cost: its backward's one eager kernel is launch.host.torch_eager's
        eager = next((c["host_s"] for c in ctx.per_call if c["class"] == "torch_eager"), None)
        if eager is None:
            raise RuntimeError("launch.host.autograd needs launch.host.torch_eager measured first")
        own, less = host_s - eager, f", minus launch.host.torch_eager ({eager * 1e6:.3g} us: its one backward kernel)"
        if not own > 0:
            raise RuntimeError(f"autograd.grad host time {host_s:.3g} s is not above one eager launch {eager:.3g} s")
    ctx.measure(f"launch.host.{cls}", own,
                f"host CPU time to issue {HOST_CALLS} calls of {what} back to back without synchronising "
                f"(perf_counter_ns) / {HOST_CALLS}, median of {host_reps} batches{less}; the GPU runs "
                f"{gpu['busy_s'] * 1e6:.3g} us of kernels per call, so the launch queue stays short; {ctx.ver}")
    ctx.observe(f"launch.gpu.{cls}", gpu["busy_s"], "time",
                f"GPU time per call of {what}: kernel durations from torch.profiler over {PROFILE_CALLS} calls / "
                f"{PROFILE_CALLS} ({gpu['kernels']:g} kernels per call: {names}); {ctx.ver}")
    ctx.observe(f"launch.wall.{cls}", wall, "time",
                f"wall time per call of {what} back to back: CUDA events around {HOST_CALLS} calls / {HOST_CALLS}, "
                f"median of {wall_reps}; the larger of host and GPU time per call; {ctx.ver}")
    ctx.per_call.append({"class": cls, "call": what, "host_s": host_s, "gpu_busy_s": gpu["busy_s"], "wall_s": wall,
                         "kernels_per_call": gpu["kernels"], "kernels": gpu["names"]})


def autograd_node_cost(ctx: Ctx) -> None:
    """Host time per further node of a backward graph: torch.autograd.grad of y = view(...view(2x)) with
    k view nodes behind the one-node graph of launch.host.autograd, k in AUTOGRAD_CHAIN; the slope of
    host time per call over k. A view's backward issues no kernel, so the slope is the engine's cost
    per node (its dispatch of the node's function included)."""
    import torch

    points = []
    for k in AUTOGRAD_CHAIN:
        x = torch.zeros(1, device=ctx.device, requires_grad=True)
        y = x * 2.0
        for _ in range(k):
            y = y.view(-1)
        go = torch.ones(1, device=ctx.device)

        def call(y=y, x=x, go=go):
            return torch.autograd.grad(y, x, go, retain_graph=True)

        for _ in range(WARMUP_CALLS):
            call()
        host = host_per_call(call, HOST_CALLS, HOST_REPEATS, _sync)
        reps = ctx.spread_text(f"autograd.grad, {k} view nodes", host)
        points.append([k, float(np.median(host)), reps])
    fit = slope([p[0] for p in points], [p[1] for p in points])
    method = (f"slope of host CPU time per torch.autograd.grad (retain_graph) over the number k of view nodes "
              f"behind a one-node graph (y = 2x, one element), k = {', '.join(str(k) for k in AUTOGRAD_CHAIN)}; "
              f"{HOST_CALLS} calls back to back per batch, median of {HOST_REPEATS} batches per k; intercept "
              f"{fit['intercept'] * 1e6:.3g} us, largest residual {fit['max_rel_residual']:.0%}; {ctx.ver}")
    ctx.curves.append({"name": "autograd_grad_host_vs_nodes", "x": "view_nodes", "y": "host_seconds_per_call",
                       "points": [p[:2] for p in points], "fit": fit, "method": method})
    ctx.measure("launch.host.autograd_node", fit["slope"], method)


def start_extension_build():
    """Build the extension in a background thread (nvcc takes tens of seconds) while the probe
    measures the GPU; ``per_call_cost`` waits for it."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="probe-ext-build")
    future = pool.submit(_build_off_the_measuring_cores)
    pool.shutdown(wait=False)
    return future


def run_achievable(ctx: Ctx, attempt: Callable[[str, Callable[[], None]], None], ext_future) -> None:
    """The measurements above, each through ``attempt`` (a failure is listed and the others still run).
    The per-call costs run last, with the GPU otherwise idle."""
    from . import _probe_paths  # imports this module's Ctx and host-loop settings
    attempt("load-to-use latency", lambda: latency(ctx))
    attempt("L2 bandwidth", lambda: l2_bandwidth(ctx))
    attempt("copy time vs bytes", lambda: copy_curves(ctx))
    # before the host-time measurements: its nvcc build must not compete with them
    attempt("mma.sync tensor rate", lambda: _probe_mma.measure(ctx))
    if ext_future is not None:  # no compiler may compete with the host-time measurements
        with contextlib.suppress(Exception):  # a failed build is reported by its own class's attempt
            ext_future.result()
    attempt("ATen kernel paths", lambda: _probe_paths.aten_paths(ctx))
    attempt("depthwise conv rate", lambda: _probe_paths.conv_depthwise(ctx))
    attempt("softplus rate", lambda: _probe_paths.softplus_rate(ctx))
    for cls in HOST_CLASSES:
        if cls in RUNTIME_HOST_CLASSES or cls in LIBRARY_CALL_HOST_CLASSES or cls == "autograd_node":
            # runtimes: measure/models/runtime_probe.py; library calls: scripts/percall_split.py;
            # autograd_node: a slope over chains, measured after launch.host.autograd
            continue
        attempt(f"per-call cost {cls}", lambda cls=cls: per_call_cost(ctx, cls, ext_future))
    attempt("per-call cost autograd_node", lambda: autograd_node_cost(ctx))
    attempt("eager op host times", lambda: _probe_paths.eager_op_hosts(ctx))
