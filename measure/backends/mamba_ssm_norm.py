"""mamba-ssm's Triton RMSNorms: the norm every mamba-ssm block runs (op ``rmsnorm``, impl ``fused``) and Mamba-2's
gated norm (op ``gated_rmsnorm``, impl ``fused``).

Backends (op / impl / modes):
- ``mamba_ssm.rms_norm_fn``: rmsnorm / fused / fwd, bwd, fwdbwd --
  ``rms_norm_fn(x, weight, None, eps=1e-6)`` (mamba_ssm/ops/triton/layer_norm.py, mamba-ssm 2.3.x), x [B, L, D]
  contiguous at the case dtype, weight [D] at the case dtype (a model's ``RMSNorm`` parameter after
  ``.to(dtype)``), no residual. The forward is ``_layer_norm_fwd_1pass_kernel``, one row per program (grid
  B x L, warps autotuned); the backward is ``_layer_norm_bwd_kernel`` on a grid of one program per SM, each
  looping over ceil(B L / SMs) rows one after another (``analytic/chain.py``, ``ROW_LOOP``), then
  ``_dw.sum(0)`` of the per-program partial weight gradients and its cast to the weight's dtype.
- ``mamba_ssm.rmsnorm_gated_fn``: gated_rmsnorm / fused / fwd, bwd, fwdbwd -- mamba_ssm/ops/triton/layernorm_gated.py
  ``rmsnorm_fn(x, weight, None, z=z, eps=1e-5, group_size=None, norm_before_gate=False)`` as ``Mamba2`` calls it
  with one group (x, z [B, L, D], weight [D] at the case dtype). The backward kernel runs ceil(4 / num_warps)
  programs per SM, each looping over its rows (``analytic/chain.py``, ``gated_norm_bwd_chain``).
Gradients compared: x, weight (and z). References: ``analytic/ops/norm/ref.py`` ``rmsnorm_fused_ref``,
``gated_rmsnorm_fused_ref`` (the row in fp64 or fp32, one rounding at the end).
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
GATED_EPS = 1e-5  # Mamba2's RMSNormGated eps


def _norm(module: str, gated: bool, notes: str):
    """The ``prepare`` of one of the norms: x (and z for the gated norm) [B, L, D] and the weight [D] at the case
    dtype, the library call, its gate reference; gradients of every input."""
    eps = GATED_EPS if gated else EPS
    acts = ("x", "z") if gated else ("x",)

    def prepare(case, device, seed):
        require_cuda(device)
        ln = import_mamba_ssm(module)
        b, l, d = dims_of(case, ("B", "L", "D"))
        dt = torch_dtype(case.dtype)
        r = Rand(device, seed)
        inputs = {**{a: r.normal((b, l, d), dt) for a in acts}, "w": r.normal((d,), dt, std=0.1, mean=1.0)}
        ref = gate_reference(case)

        def kernel(x):
            if gated:
                return ln.rmsnorm_fn(x["x"], x["w"], None, z=x["z"], eps=eps, group_size=None, norm_before_gate=False)
            return ln.rms_norm_fn(x["x"], x["w"], None, eps=eps)

        def reference(x, hi):
            return ref(*(x[a] for a in acts), x["w"], hi, eps)

        spec = KernelSpec(kernel, reference, inputs, (*acts, "w"), batch_slices(b, b, acts, inputs), tokens=b * l,
                          out_shape=(b, l, d), out_dtype=dt, notes=notes)
        return prepare_diff(spec, case.mode, r)

    return prepare


# (backend, op, module, gated, notes, description)
NORMS = (
    ("mamba_ssm.rms_norm_fn", "rmsnorm", "mamba_ssm.ops.triton.layer_norm", False,
     ("mamba-ssm rms_norm_fn (Triton layer_norm: forward one row per program; backward one program per SM looping "
      "over its rows, then the partial dw sum), no residual"),
     "mamba-ssm's Triton RMSNorm (rms_norm_fn: the norm of every mamba-ssm block)"),
    ("mamba_ssm.rmsnorm_gated_fn", "gated_rmsnorm", "mamba_ssm.ops.triton.layernorm_gated", True,
     ("mamba-ssm layernorm_gated rmsnorm_fn(z, norm_before_gate=False), one group (Mamba2's RMSNormGated): backward "
      "ceil(4 / num_warps) programs per SM looping over their rows"),
     "mamba-ssm's Triton gated RMSNorm (layernorm_gated rmsnorm_fn with z: Mamba-2's RMSNormGated)"),
)
for _name, _op, _module, _gated, _notes, _description in NORMS:
    register_backend(Backend(name=_name, op=_op, impl="fused", modes=("fwd", "bwd", "fwdbwd"), devices=("cuda",),
                             dtypes=("bf16", "fp16", "fp32"), prepare=_norm(_module, _gated, _notes),
                             description=_description))
