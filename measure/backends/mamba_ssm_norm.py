"""mamba-ssm's Triton RMSNorm (op ``rmsnorm``, impl ``fused``): the norm every mamba-ssm block runs.

Backend (op / impl / modes):
- ``mamba_ssm.rms_norm_fn``: rmsnorm / fused / fwd, bwd, fwdbwd --
  ``rms_norm_fn(x, weight, None, eps=1e-6)`` (mamba_ssm/ops/triton/layer_norm.py, mamba-ssm 2.3.x), x [B, L, D]
  contiguous at the case dtype, weight [D] at the case dtype (a model's ``RMSNorm`` parameter after
  ``.to(dtype)``), no residual. The forward is ``_layer_norm_fwd_1pass_kernel``, one row per program (grid
  B x L, warps autotuned); the backward is ``_layer_norm_bwd_kernel`` on a grid of one program per SM, each
  looping over ceil(B L / SMs) rows one after another (``analytic/chain.py``, ``row_loop_cta``), then
  ``_dw.sum(0)`` of the per-program partial weight gradients and its cast to the weight's dtype.
Gradients compared: x, weight. Reference: ``analytic/ops/norm/ref.py`` ``rmsnorm_fused_ref`` (the row in
fp64 or fp32, one rounding at the end).
"""

from __future__ import annotations

from ..extensions import import_mamba_ssm
from .base import Backend, register_backend
from .common import (
    KernelSpec,
    Rand,
    batch_slices,
    dims_of,
    gate_reference,
    prepare_diff,
    require_cuda,
    torch_dtype,
)

EPS = 1e-6  # mamba-ssm RMSNorm's default eps


def _rms_norm(case, device, seed):
    require_cuda(device)
    ln = import_mamba_ssm("mamba_ssm.ops.triton.layer_norm")
    b, l, d = dims_of(case, ("B", "L", "D"))
    dt = torch_dtype(case.dtype)
    r = Rand(device, seed)
    inputs = {"x": r.normal((b, l, d), dt), "w": r.normal((d,), dt, std=0.1, mean=1.0)}
    ref = gate_reference(case)

    def kernel(x):
        return ln.rms_norm_fn(x["x"], x["w"], None, eps=EPS)

    def reference(x, hi):
        return ref(x["x"], x["w"], hi, EPS)

    spec = KernelSpec(kernel, reference, inputs, ("x", "w"), batch_slices(b, b, ("x",), inputs), tokens=b * l,
                      out_shape=(b, l, d), out_dtype=dt,
                      notes="mamba-ssm rms_norm_fn (Triton layer_norm: forward one row per program; backward one "
                            "program per SM looping over its rows, then the partial dw sum), no residual")
    return prepare_diff(spec, case.mode, r)


register_backend(Backend(
    name="mamba_ssm.rms_norm_fn", op="rmsnorm", impl="fused", modes=("fwd", "bwd", "fwdbwd"),
    devices=("cuda",), prepare=_rms_norm, dtypes=("bf16", "fp16", "fp32"),
    description="mamba-ssm's Triton RMSNorm (rms_norm_fn: the norm of every mamba-ssm block)"))
