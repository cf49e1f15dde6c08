"""The probe's rates of ATen's software kernel paths and eager host costs (issue #13), for the achievable-time
model's ``memory.dram.path.<p>`` and ``compute.path.<p>`` keys (``analytic/achievable.py``, "Software kernel
paths"); ``_probe_achievable.run_achievable`` calls them.

- ATen kernel paths: attained DRAM bandwidth of a broadcast multiply in fp32 and in bf16, a bf16 -> fp32 cast
  and a row mean on [PATH_ROWS, PATH_COLS] operands, L2 flushed (``memory.dram.path.<path>``); a contiguous
  multiply beside them as an observation. Why the broadcast is measured in both element sizes: ATen's
  non-vectorized ``elementwise_kernel<128, 4>`` is bound by the elements it indexes, not by their bytes (the
  eager softmax's bf16 ``sub`` and ``div`` ran at 375-403 G elements/s, 1.50-1.61 TB/s, where the fp32 probe
  gives 331 G elements/s at 2.65 TB/s: results/h200/2026-12-05/conv-fwdbwd/README.md), so a 16-bit broadcast
  moves its bytes at about half the fp32 bandwidth.
- Depthwise convolution: F.conv1d(groups=channels) at the largest suite shape, FLOPs as the cost rule counts
  them (``compute.path.conv_depthwise``). Softplus: F.softplus at the largest suite shape, bf16, FLOPs as the
  cost rule counts them (``compute.path.softplus``).
- Eager host times of ops that allocate, broadcast, reduce or cast (observations beside
  ``launch.host.torch_eager``, whose op is a one-element in-place add_).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._probe_achievable import HOST_CALLS, HOST_REPEATS, WARMUP_CALLS, Ctx, _sync
from ._probe_math import conv_flops, host_per_call

PATH_ROWS, PATH_COLS = 65536, 1024  # [rows, cols] operands of the ATen path measurements (256 MiB in fp32)
CONV_DIMS = {"B": 4, "E": 5120, "L": 8192, "K": 4}  # the 2026-12-02 suite's largest torch.conv1d case
SOFTPLUS_DIMS = {"B": 1, "L": 32768, "D": 8192}  # the 2026-12-02 suite's largest softplus case


def _bandwidth(ctx: Ctx, name: str, call: Callable[[], Any], nbytes: float) -> tuple[float, str]:
    call()
    med, reps = ctx.timed(name, call, True)
    return nbytes / med, f"L2 flushed before each call, CUDA events, median of {reps}"


def aten_paths(ctx: Ctx) -> None:
    """Attained DRAM bandwidth of ATen's kernel paths on [PATH_ROWS, PATH_COLS] operands (bytes = read
    + written, what the cost rules count): a broadcast multiply [R, C] x [R, 1] (elementwise_kernel
    <128, ...>, not vectorized: the operands' shapes differ) in fp32 and in bf16 (``broadcast_16bit``: the
    kernel is bound by elements, so its bandwidth depends on their size; module docstring), a bf16 -> fp32
    cast (unrolled_elementwise_kernel<direct_copy>), a row mean over the last dimension (reduce_kernel);
    beside them a contiguous multiply of equal shapes (vectorized_elementwise_kernel), an observation."""
    import torch

    R, C = PATH_ROWS, PATH_COLS
    a = torch.rand(R, C, device=ctx.device)
    col = torch.rand(R, 1, device=ctx.device)
    b = torch.rand(R, C, device=ctx.device)
    out = torch.empty_like(a)
    half = a.to(torch.bfloat16)
    red = torch.empty(R, 1, device=ctx.device)
    col_half = col.to(torch.bfloat16)
    out_half = torch.empty_like(half)
    for x, c, o, name in ((a, col, out, "fp32"), (half, col_half, out_half, "bf16")):
        torch.mul(x, c, out=o)
        if not torch.equal(o, x * c):
            raise RuntimeError(f"broadcast multiply ({name}): wrong result")
    shape = f"[{R}, {C}] fp32"
    for key, label, call, nbytes in (
            ("memory.dram.path.broadcast", f"torch.mul(a, b, out=) with a {shape} and b [{R}, 1]",
             lambda: torch.mul(a, col, out=out), 2 * R * C * 4 + R * 4),
            ("memory.dram.path.broadcast_16bit", f"torch.mul(a, b, out=) with a [{R}, {C}] bf16 and b [{R}, 1] bf16",
             lambda: torch.mul(half, col_half, out=out_half), 2 * R * C * 2 + R * 2),
            ("memory.dram.path.cast_copy", f"out.copy_(x) of x [{R}, {C}] bf16 into fp32",
             lambda: out.copy_(half), R * C * (2 + 4)),
            ("memory.dram.path.reduction", f"torch.mean(a, -1, keepdim=True, out=) of a {shape}",
             lambda: torch.mean(a, -1, keepdim=True, out=red), R * C * 4 + R * 4)):
        bw, how = _bandwidth(ctx, key, call, nbytes)
        ctx.measure(key, bw, f"{label}: bytes read + written / time, {how}; {ctx.ver}")
    bw, how = _bandwidth(ctx, "vectorized", lambda: torch.mul(a, b, out=out), 3 * R * C * 4)
    ctx.observe("path.vectorized.bandwidth", bw, "bandwidth",
                f"torch.mul(a, b, out=) of two {shape} operands (vectorized elementwise kernel): bytes read + "
                f"written / time, {how}; {ctx.ver}")


def conv_depthwise(ctx: Ctx) -> None:
    """Attained FLOP rate of F.conv1d(groups=channels) (PyTorch's depthwise kernel), FLOPs as the
    conv1d/torch_conv rule counts them (``conv_flops``), bf16 and fp32 (fp32 an observation)."""
    import torch
    import torch.nn.functional as F

    d = CONV_DIMS
    for dt, name in ((torch.bfloat16, "bf16"), (torch.float32, "fp32")):
        x = torch.randn(d["B"], d["E"], d["L"], device=ctx.device, dtype=dt)
        w = torch.randn(d["E"], 1, d["K"], device=ctx.device, dtype=dt)
        bias = torch.randn(d["E"], device=ctx.device, dtype=dt)

        def call(x=x, w=w, bias=bias):
            return F.conv1d(x, w, bias, padding=d["K"] - 1, groups=d["E"])

        call()
        med, reps = ctx.timed(f"conv_depthwise {name}", call, True)
        rate = conv_flops(**d) / med
        how = (f"F.conv1d(x [{d['B']}, {d['E']}, {d['L']}] {name}, w [{d['E']}, 1, {d['K']}], bias, padding={d['K'] - 1}, "
               f"groups={d['E']}): (2K + 1) FLOPs per output x B x E x (L + K - 1) outputs / time, L2 flushed "
               f"before each call, CUDA events, median of {reps}; {ctx.ver}")
        if name == "bf16":
            ctx.measure("compute.path.conv_depthwise", rate, how)
        else:
            ctx.observe("conv_depthwise.fp32", rate, "flop_rate", how)


def softplus_rate(ctx: Ctx) -> None:
    """Attained FLOP rate of F.softplus (PyTorch's softplus kernel: accurate expf and log1pf, an IEEE divide),
    bf16, FLOPs as the softplus rule counts them (``conventions.SOFTPLUS``: 1 vector FLOP per element)."""
    import torch
    import torch.nn.functional as F

    from ..analytic.conventions import SOFTPLUS

    d = SOFTPLUS_DIMS
    x = torch.randn(d["B"], d["L"], d["D"], device=ctx.device, dtype=torch.bfloat16)

    def call(x=x):
        return F.softplus(x)

    call()
    med, reps = ctx.timed("softplus bf16", call, True)
    rate = SOFTPLUS[0] * x.numel() / med
    how = (f"F.softplus(x [{d['B']}, {d['L']}, {d['D']}] bf16): {SOFTPLUS[0]} FLOP per element x elements / time, "
           f"L2 flushed before each call, CUDA events, median of {reps}; {ctx.ver}")
    ctx.measure("compute.path.softplus", rate, how)


def eager_op_hosts(ctx: Ctx) -> None:
    """Host time per call of eager ops that do more than the one-element in-place add_ of
    launch.host.torch_eager (observations): an out-of-place add (allocates its output), a broadcast
    multiply, a row sum (reduction setup), a dtype cast."""
    import torch

    x = torch.zeros(4, 8, device=ctx.device)
    c = torch.zeros(4, 1, device=ctx.device)
    for name, call in (("add_out_of_place", lambda: x + 1.0), ("mul_broadcast", lambda: x * c),
                       ("sum_last_dim", lambda: x.sum(-1)), ("cast_bf16", lambda: x.to(torch.bfloat16))):
        for _ in range(WARMUP_CALLS):
            call()
        host = host_per_call(call, HOST_CALLS, HOST_REPEATS, _sync)
        reps = ctx.spread_text(f"eager host {name}", host)
        ctx.observe(f"launch.host.torch_eager.{name}", float(np.median(host)), "time",
                    f"host CPU time per call of {name} on a [4, 8] fp32 tensor, {HOST_CALLS} calls back to back, "
                    f"median of {reps} batches; {ctx.ver}")
