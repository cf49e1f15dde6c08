"""The probe's energy kernels (issue #14, ``ssmbench probe --energy``): one NVML energy window of at
least ``WINDOW_S`` per kernel, each built so that one term of the energy model (``analytic/energy.py``)
dominates, and the idle power measured the same way (``measure/energy.py``: counter difference over a
window aligned to counter updates).

Kernels, and what each one's energy per call is charged as (counts per call in brackets):

- ``empty``: back-to-back one-element ``add_`` launches issued by the host: the device is clocked up and
  runs nothing counted, so its average power is **static power** [time].
- ``fma``: the probe's Triton loop of dependent FMAs on a few MiB (``_probe_triton.fma_loop``)
  [2 x n x ITERS vector FLOPs].
- ``exp``: dependent ``y = exp(-y)`` (``exp_loop``) [n x ITERS transcendentals, plus n x ITERS FMA-pipe
  FLOPs: ``tl.exp`` scales by log2(e) before ``ex2``].
- ``l2``: a grid-stride read of a ``L2_MIB`` buffer repeated in one launch, no flush: after the first
  call every byte is served by L2 [bytes read crossing L2; one fp32 add per 4 bytes].
- ``dram``: ``copy_`` of ``DRAM_MIB`` MiB (much larger than L2) [read + written bytes crossing DRAM and L2].
- ``gemm.<dtype>``: n x n x n matmuls, bf16, fp16, fp8 (``torch._scaled_mm``) and tf32 (fp32 with TF32
  allowed) [2 n^3 tensor FLOPs; 3 n^2 elements crossing DRAM and L2].
- ``path.conv_depthwise``: PyTorch's depthwise ``F.conv1d`` (bf16 x [``PATH_B``, ``PATH_E``, ``PATH_L``],
  K = ``PATH_K``, padding K - 1, groups E: the kernel that measures ``compute.path.conv_depthwise``),
  instruction-bound far below the vector rate [(2K + 1) FLOPs per output as vector FLOPs, x read and the
  full output written crossing DRAM and L2, and the seconds it runs beyond its FLOPs at the ``fma``
  window's attained vector rate: ``energy.path_power`` is what is left over those seconds
  (``analytic/energy.path_issue_seconds``)].
- ``mma.<dtype>``: the probe's register-only ``mma.sync.m16n8k16`` loop (``_probe_mma``, the kernel that
  measures ``compute.tensor_mma_sync``), bf16 and fp16 [its FLOPs, as mma.sync tensor FLOPs]. Its operands
  never leave the registers, so it gives the instruction class's datapath and register-file energy; a
  real sm80 kernel adds the ldmatrix traffic from shared memory, which the workload fit sees
  (``analytic/energy.py``).

Solved in that order (``solve``), each term's energy = (E - P_static x T - the terms already known) /
its count: static, vector, special function, L2, DRAM, path power, tensor per dtype, mma.sync per dtype. A GEMM window that runs at
the power limit (average power within ``POWER_LIMITED_FRACTION`` of it) measures the energy per FLOP
at the clocks the limit allows; the method says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

WINDOW_S = 1.0
DRAM_MIB = 1024
L2_MIB = 16
L2_BYTES_PER_CALL = 2 * 2**30
READ_BLOCK = 4096
GEMM_N = 8192
FMA_NUMEL = 1 << 22
FMA_ITERS = 4096
POWER_LIMITED_FRACTION = 0.95
MMA_DTYPES = ("bf16", "fp16")
MMA_ITERS = 1 << 16
PATH_B, PATH_E, PATH_L, PATH_K = 4, 5120, 8192, 4  # the depthwise conv1d of compute.path.conv_depthwise
ORDER = ("empty", "fma", "exp", "l2", "dram", "path.conv_depthwise", "gemm.bf16", "gemm.fp16", "gemm.fp8",
         "gemm.tf32", *(f"mma.{d}" for d in MMA_DTYPES))
TERM_OF = {"fma": ("energy.per_flop.vector.fp32", "vector"), "exp": ("energy.per_flop.special_function", "sfu"),
           "l2": ("energy.per_byte.l2", "l2"), "dram": ("energy.per_byte.dram", "dram"),
           "path.conv_depthwise": ("energy.path_power", "path_issue"),
           **{f"gemm.{d}": (f"energy.per_flop.tensor.{d}", f"tensor.{d}") for d in ("bf16", "fp16", "fp8", "tf32")},
           **{f"mma.{d}": (f"energy.per_flop.tensor_mma_sync.{d}", f"tensor_mma_sync.{d}") for d in MMA_DTYPES}}


@dataclass(frozen=True)
class Window:
    """One kernel's energy window: energy and time per call, average power, and its counts per call
    (keys: vector, sfu, l2 bytes, dram bytes (also crossing L2), tensor.<dtype> FLOPs, path_flops: FLOPs
    run on a software path)."""

    name: str
    joules_per_call: float
    time_s: float
    avg_power_w: float
    counts: dict[str, float]
    what: str


def solve(windows: dict[str, Window], limit_w: float | None = None) -> list[tuple[str, float, str]]:
    """(spec key, value in SI units, method) per energy parameter, solved in ``ORDER``; a window that is
    missing, or leaves no positive energy for its term, gives no entry."""
    known: dict[str, float] = {}
    out: list[tuple[str, float, str]] = []

    def rest(w: Window) -> float:
        e = w.joules_per_call - known["static"] * w.time_s
        for k, n in w.counts.items():
            if k in known:
                e -= known[k] * n
            if k == "dram" and "l2" in known:
                e -= known["l2"] * n  # a DRAM byte crosses L2 too
        return e

    def count(w: Window, term: str) -> float:
        if term != "path_issue":
            return w.counts.get(term, 0.0)
        fma = windows.get("fma")  # seconds beyond the path FLOPs at the attained vector rate
        if fma is None or not fma.counts.get("vector"):
            return 0.0
        return w.time_s - w.counts.get("path_flops", 0.0) * fma.time_s / fma.counts["vector"]

    if "empty" not in windows:
        return out
    w0 = windows["empty"]
    known["static"] = w0.avg_power_w
    out.append(("energy.static_power", w0.avg_power_w,
                f"{w0.what}: average power over the window ({w0.time_s * 1e6:.3g} us per call)"))
    for name in ORDER[1:]:
        w = windows.get(name)
        if w is None:
            continue
        key, term = TERM_OF[name]
        n = count(w, term)
        e = rest(w)
        if n <= 0 or e <= 0:
            continue
        known[term] = e / n
        note = ""
        if limit_w and w.avg_power_w >= POWER_LIMITED_FRACTION * limit_w:
            note = f"; ran at the power limit ({w.avg_power_w:.0f} W of {limit_w:.0f} W): energy at the clocks it allows"
        out.append((key, e / n, f"{w.what}: (energy - static power x time - the terms solved before) / count, "
                                f"{w.avg_power_w:.0f} W average{note}"))
    return out


def run_energy(ctx, attempt: Callable[[str, Callable[[], None]], None]) -> list[dict[str, Any]]:
    """Measure every window (CUDA with NVML), solve, and hand the entries to ``ctx.measure``; returns the
    windows as plain data for the probe's ``energy_windows``."""
    import torch

    from . import energy as nvml_energy

    nv, why = nvml_energy.open_device(ctx.device)
    if nv is None:
        raise RuntimeError(f"energy probe needs NVML: {why}")
    sync = torch.cuda.synchronize
    try:  # the limit is context for the method text only
        limit = nv.nvml.nvmlDeviceGetEnforcedPowerLimit(nv.handle) / 1000.0
    except nv.nvml.NVMLError:
        limit = None
    idle = nvml_energy.idle_power(nv, sync, WINDOW_S)
    windows: dict[str, Window] = {}
    records: list[dict[str, Any]] = [{"name": "idle", **idle}]

    def window(name: str, call: Callable[[], Any], counts: dict[str, float], what: str) -> None:
        per_call, reps = ctx.timed(f"energy.{name}", call)
        rec, before, after = nvml_energy.energy_window(call, sync, nv, per_call, 0, WINDOW_S, idle["idle_power_w"])
        w = Window(name, rec["joules_per_call"], rec["wall_s_per_call"], rec["avg_power_w"], counts,
                   f"{what}, NVML energy counter over {rec['window_s']:.2f} s ({rec['calls']} calls back to back), "
                   f"idle {idle['idle_power_w']:.1f} W measured the same way; {ctx.ver}")
        windows[name] = w
        records.append({"name": name, "counts": counts, "timed_median_s": per_call, "timed_repeats": reps,
                        "energy": rec, "clocks_before": before, "clocks_after": after})

    def empty():
        t = torch.zeros(1, device=ctx.device)
        window("empty", lambda: t.add_(1.0), {}, "back-to-back one-element add_ launches")

    def fma_and_exp():
        from ._probe_triton import exp_loop, fma_loop
        x = torch.rand(FMA_NUMEL, device=ctx.device)
        block = 1024
        grid = ((FMA_NUMEL + block - 1) // block,)
        flops = 2.0 * FMA_NUMEL * FMA_ITERS
        window("fma", lambda: fma_loop[grid](x, FMA_NUMEL, 0.999, 0.001, ITERS=FMA_ITERS, BLOCK=block),
               {"vector": flops}, f"Triton loop of {FMA_ITERS} dependent FMAs on {FMA_NUMEL} fp32 elements")
        window("exp", lambda: exp_loop[grid](x, FMA_NUMEL, ITERS=FMA_ITERS, BLOCK=block),
               {"sfu": float(FMA_NUMEL * FMA_ITERS), "vector": float(FMA_NUMEL * FMA_ITERS)},
               f"Triton loop of {FMA_ITERS} dependent exp (tl.exp: one FMA-pipe multiply each) on {FMA_NUMEL} elements")

    def l2():
        from ._probe_kernels import read_sum
        n_blocks = L2_MIB * 2**20 // (4 * READ_BLOCK)
        total = L2_BYTES_PER_CALL // (4 * READ_BLOCK)
        x = torch.rand(n_blocks * READ_BLOCK, device=ctx.device)
        progs = torch.cuda.get_device_properties(ctx.device).multi_processor_count * 8
        out = torch.empty(progs, device=ctx.device)
        nbytes = float(total * READ_BLOCK * 4)
        window("l2", lambda: read_sum[(progs,)](x, out, n_blocks, total, BLOCK=READ_BLOCK),
               {"l2": nbytes, "vector": nbytes / 4}, f"Triton grid-stride read of a {L2_MIB} MiB buffer, "
               f"{nbytes / 2**30:.0f} GiB per call, no flush (L2-resident)")

    def dram():
        n = DRAM_MIB * 2**20
        src = torch.empty(n, dtype=torch.uint8, device=ctx.device).random_(0, 255)
        dst = torch.empty_like(src)
        window("dram", lambda: dst.copy_(src), {"dram": 2.0 * n}, f"{DRAM_MIB} MiB copy_ (read + written)")

    def path():
        import torch.nn.functional as F
        b, e, length, k = PATH_B, PATH_E, PATH_L, PATH_K
        x = torch.randn(b, e, length, device=ctx.device, dtype=torch.bfloat16)
        wt = torch.randn(e, 1, k, device=ctx.device, dtype=torch.bfloat16)
        bias = torch.randn(e, device=ctx.device, dtype=torch.bfloat16)
        flops = float((2 * k + 1) * b * e * (length + k - 1))
        nbytes = float(2 * b * e * length + 2 * b * e * (length + k - 1))
        window("path.conv_depthwise", lambda: F.conv1d(x, wt, bias, padding=k - 1, groups=e),
               {"vector": flops, "dram": nbytes, "path_flops": flops},
               f"F.conv1d(x [{b}, {e}, {length}] bf16, w [{e}, 1, {k}], bias, padding={k - 1}, groups={e}): PyTorch's "
               "depthwise kernel; path power over its time beyond its FLOPs at the fma window's attained vector rate")

    def gemm(dt: str):
        n = GEMM_N
        flops = 2.0 * n**3
        if dt == "fp8":
            a = torch.randn(n, n, device=ctx.device).to(torch.float8_e4m3fn)
            b = torch.randn(n, n, device=ctx.device).to(torch.float8_e4m3fn).t()
            one = torch.ones((), device=ctx.device)
            def call():
                return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            size = 1
        else:
            tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}[dt]
            a = torch.randn(n, n, device=ctx.device, dtype=tdt)
            b = torch.randn(n, n, device=ctx.device, dtype=tdt)
            c = torch.empty(n, n, device=ctx.device, dtype=tdt)
            def call():
                return torch.matmul(a, b, out=c)
            size = a.element_size()
        prev = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = dt == "tf32"
        try:
            window(f"gemm.{dt}", call, {f"tensor.{dt}": flops, "dram": 3.0 * n * n * size},
                   f"{dt} {n}^3 matmul on random data")
        finally:
            torch.backends.cuda.matmul.allow_tf32 = prev

    def mma(dt: str):
        from . import _probe_mma
        ext = _probe_mma.build()
        blocks = torch.cuda.get_device_properties(ctx.device).multi_processor_count * _probe_mma.BLOCKS_PER_SM
        out = torch.empty(blocks * 32 * _probe_mma.WARPS_PER_BLOCK, device=ctx.device)
        window(f"mma.{dt}", lambda: ext.mma_loop(out, blocks, MMA_ITERS, dt == "bf16"),
               {f"tensor_mma_sync.{dt}": float(_probe_mma.mma_flops(blocks, MMA_ITERS))},
               f"register-only loop of mma.sync.aligned.m16n8k16 {dt} ({blocks} blocks x {_probe_mma.WARPS_PER_BLOCK} "
               f"warps, {MMA_ITERS} rounds of {_probe_mma.CHAINS} per warp)")

    attempt("energy: empty launches", empty)
    attempt("energy: FMA and exp loops", fma_and_exp)
    attempt("energy: L2-resident reads", l2)
    attempt("energy: DRAM copy", dram)
    attempt("energy: depthwise conv1d (software path)", path)
    for dt in ("bf16", "fp16", "fp8", "tf32"):
        attempt(f"energy: {dt} GEMM", lambda dt=dt: gemm(dt))
    for dt in MMA_DTYPES:
        attempt(f"energy: {dt} mma.sync loop", lambda dt=dt: mma(dt))
    for key, value, method in solve(windows, limit):
        if math.isfinite(value) and value > 0:
            ctx.measure(key, value, method)
    return records
