"""Plain-PyTorch references of dense projections.

torch is imported inside each function: importing this module needs no torch.
"""

from __future__ import annotations

from ...registry import Reference
from ..common.inputs import Input, Recipe, normal, weight


def linear_ref(x, w):
    """Plain PyTorch reference: x [B, L, I], w [O, I] -> [B, L, O]."""
    return x @ w.transpose(-1, -2)


REFERENCES = (
    Reference("linear", ("cublas",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", linear_ref),
)
RECIPES = (
    Recipe("linear", "cublas", (Input("x", normal("B", "L", "I")), Input("w", weight("O", "I", fan_in="I")))),
)
