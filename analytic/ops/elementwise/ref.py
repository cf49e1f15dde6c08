"""Plain-PyTorch references of the elementwise activations.

torch is imported inside each function: importing this module needs no torch.
"""

from __future__ import annotations

from ...registry import Reference
from ..common.inputs import BLD, Input, Recipe, normal


def silu_ref(x):
    """Plain PyTorch reference: x [B, L, D] -> silu(x) [B, L, D]."""
    import torch.nn.functional as F
    return F.silu(x)


def softplus_ref(x):
    """Plain PyTorch reference: x [B, L, D] -> softplus(x) [B, L, D]."""
    import torch.nn.functional as F
    return F.softplus(x)


def silu_gate_ref(x, z):
    """Plain PyTorch reference (the ``torch_eager`` kernels): x, z [B, L, D] -> x * silu(z)."""
    import torch.nn.functional as F
    return x * F.silu(z)


def silu_gate_chunked_ref(h):
    """Plain PyTorch reference (``chunked_eager``, mamba-ssm's GatedMLP gate): h [B, L, 2D] -> x * silu(z)
    [B, L, D] with x, z = h.chunk(2, dim=-1), strided views of h."""
    import torch.nn.functional as F
    x, z = h.chunk(2, dim=-1)
    return x * F.silu(z)


def copy_ref(x):
    """Plain PyTorch reference (``copy``): a layout copy, x [B, L, D] -> x.transpose(-2, -1).contiguous()."""
    return x.transpose(-2, -1).contiguous()


def cast_ref(x):
    """Plain PyTorch reference (``cast``): x.to(torch.float32); no kernel when x is fp32 already."""
    import torch
    return x.to(torch.float32)


def add_ref(x, y):
    """Plain PyTorch reference (``add``, torch_eager): the residual add x + y [B, L, D]."""
    return x + y


def a_from_log_ref(a_log):
    """Plain PyTorch reference (``a_from_log``): A = -exp(A_log.float()) as mamba-ssm's Mamba / Mamba2
    compute it on every call; A_log [E, N] (Mamba-2: [H])."""
    import torch
    return -torch.exp(a_log.float())


def _merged_halves(d, r, p):
    """The [B, L, 2D] tensor whose halves ``chunked_eager`` gates (``normal`` takes named dimensions only)."""
    return r.normal((d["B"], d["L"], 2 * d["D"]))


REFERENCES = (
    Reference("silu", ("torch_eager",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", silu_ref),
    Reference("softplus", ("torch_eager",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", softplus_ref),
    Reference("silu_gate", ("torch_eager",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", silu_gate_ref),
    Reference("silu_gate", ("chunked_eager",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", silu_gate_chunked_ref),
    Reference("copy", ("torch_eager",), ("fwd", "decode"), "eager", copy_ref),
    Reference("cast", ("to_fp32", "param_to_fp32"), ("fwd", "bwd", "fwdbwd", "decode"), "eager", cast_ref),
    Reference("add", ("torch_eager",), ("fwd", "decode"), "eager", add_ref),
    Reference("a_from_log", ("fp32_param", "cast_param"), ("fwd", "bwd", "fwdbwd", "decode"), "eager", a_from_log_ref),
)
RECIPES = (
    Recipe("silu", "torch_eager", (Input("x", normal(*BLD)),)),
    Recipe("softplus", "torch_eager", (Input("x", normal(*BLD)),)),
    Recipe("silu_gate", "torch_eager", (Input("x", normal(*BLD)), Input("z", normal(*BLD)))),
    Recipe("silu_gate", "chunked_eager", (Input("h", _merged_halves),), backend="torch_ref.chunked"),
    Recipe("copy", "torch_eager", (Input("x", normal(*BLD)),)),
    Recipe("cast", "to_fp32", (Input("x", normal(*BLD)),)),
    # add's backward rule is the accumulation where two gradient paths meet, which x + y alone never runs
    Recipe("add", "torch_eager", (Input("x", normal(*BLD)), Input("y", normal(*BLD))), exclude_modes=("bwd", "fwdbwd")),
    Recipe("a_from_log", "fp32_param", (Input("a_log", normal("E", "N"), cast=False),), l1_decode=False,
           tokens=lambda d: 1, backend="torch_ref.fp32_param"),
    Recipe("a_from_log", "cast_param", (Input("a_log", normal("E", "N")),), l1_decode=False, tokens=lambda d: 1,
           backend="torch_ref.cast_param"),
)
