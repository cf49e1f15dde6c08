"""Plain-PyTorch references of softmax.

torch is imported inside each function: importing this module needs no torch.
"""

from __future__ import annotations

from ...registry import Reference
from ..common.inputs import Input, Recipe, normal


def softmax_ref(x):
    """Plain PyTorch reference (the ``torch_eager`` kernels): softmax over the last dim of x."""
    m = x.amax(-1, keepdim=True)  # [B, H, L, 1]
    e = (x - m).exp()  # [B, H, L, S]
    return e / e.sum(-1, keepdim=True)


REFERENCES = (
    Reference("softmax", ("torch_eager",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", softmax_ref),
)
RECIPES = (
    Recipe("softmax", "torch_eager", (Input("x", normal("B", "H", "L", "S")),)),
)
