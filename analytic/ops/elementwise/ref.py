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


REFERENCES = (
    Reference("silu", ("torch_eager",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", silu_ref),
    Reference("softplus", ("torch_eager",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", softplus_ref),
    Reference("silu_gate", ("torch_eager",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", silu_gate_ref),
)
RECIPES = (
    Recipe("silu", "torch_eager", (Input("x", normal(*BLD)),)),
    Recipe("softplus", "torch_eager", (Input("x", normal(*BLD)),)),
    Recipe("silu_gate", "torch_eager", (Input("x", normal(*BLD)), Input("z", normal(*BLD)))),
)
