"""Plain-PyTorch references of the norms.

torch is imported inside each function: importing this module needs no torch.
"""

from __future__ import annotations

from ...registry import Reference
from ..common.inputs import BLD, Input, Recipe, normal, scale


def rmsnorm_ref(x, w, eps: float = 1e-6):
    """Plain PyTorch reference (the ``torch_eager`` kernels): x [B, L, D], w [D] -> [B, L, D]."""
    import torch
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)  # [B, L, 1]
    return w * (xf * rstd).to(x.dtype)


def rmsnorm_fused_ref(x, w, hi: bool, eps: float = 1e-6):
    """The fused kernels' semantics (``rmsnorm``/``fused``: mamba-ssm's Triton ``rms_norm_fn``, the row in
    fp32 on chip, one rounding to the storage dtype at the end): x [B, L, D], w [D] -> [B, L, D], computed
    at fp64 (``hi``) or fp32 and returned at x's dtype."""
    from ..common.ref import precision_dtype

    return _rms_rows(x.to(precision_dtype(hi)), w, eps).to(x.dtype)


def gated_rmsnorm_fused_ref(x, z, w, hi: bool, eps: float = 1e-5):
    """The fused kernel's semantics (``gated_rmsnorm``/``fused``: mamba-ssm's layernorm_gated ``rmsnorm_fn`` with z,
    norm_before_gate=False, one group): rmsnorm(x * silu(z)) * w with the row at fp64 (``hi``) or fp32 and one
    rounding to x's dtype at the end; x, z [B, L, D], w [D]."""
    import torch

    from ..common.ref import precision_dtype

    f = precision_dtype(hi)
    return _rms_rows(x.to(f) * torch.nn.functional.silu(z.to(f)), w, eps).to(x.dtype)


def _rms_rows(u, w, eps: float):
    """u * rsqrt(mean(u^2) + eps) * w over the last dim, at u's dtype."""
    import torch

    return u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + eps) * w.to(u.dtype)


def layernorm_ref(x, w, b, eps: float = 1e-5):
    """Plain PyTorch reference (the ``torch_eager`` kernels): x [B, L, D], w, b [D] -> [B, L, D]."""
    import torch
    xf = x.float()
    xc = xf - xf.mean(-1, keepdim=True)
    rstd = torch.rsqrt(xc.pow(2).mean(-1, keepdim=True) + eps)  # [B, L, 1]
    return (xc * rstd).to(x.dtype) * w + b


def gated_rmsnorm_ref(x, z, w, eps: float = 1e-6):
    """Plain PyTorch reference (the ``torch_eager`` kernels): rmsnorm(x * silu(z)) * w, all [B, L, D]
    but w [D]; computed in fp32 like mamba-ssm's ``rms_norm_ref`` (upcast=True)."""
    import torch
    import torch.nn.functional as F
    u = x.float() * F.silu(z.float())
    rstd = torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + eps)  # [B, L, 1]
    return w * (u * rstd).to(x.dtype)


REFERENCES = (
    Reference("rmsnorm", ("fused",), ("fwd", "bwd", "fwdbwd", "decode"), "gate", rmsnorm_fused_ref),
    Reference("gated_rmsnorm", ("fused",), ("fwd", "bwd", "fwdbwd", "decode"), "gate", gated_rmsnorm_fused_ref),
    Reference("rmsnorm", ("torch_eager",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", rmsnorm_ref),
    Reference("layernorm", ("torch_eager",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", layernorm_ref),
    Reference("gated_rmsnorm", ("torch_eager",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", gated_rmsnorm_ref),
)
RECIPES = (
    Recipe("rmsnorm", "torch_eager", (Input("x", normal(*BLD)), Input("w", scale("D")))),
    Recipe("layernorm", "torch_eager", (Input("x", normal(*BLD)), Input("w", scale("D")), Input("b", normal("D", std=0.1)))),
    Recipe("gated_rmsnorm", "torch_eager", (Input("x", normal(*BLD)), Input("z", normal(*BLD)), Input("w", scale("D")))),
)
