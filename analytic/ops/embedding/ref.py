"""Plain-PyTorch references of the embedding gather and the LM head.

torch is imported inside each function: importing this module needs no torch.
"""

from __future__ import annotations

from ...registry import Reference
from ..common.inputs import BLD, Input, Recipe, index, normal, weight


def embedding_ref(idx, w):
    """Plain PyTorch reference: idx [B, L] int64, w [V, D] -> w[idx] [B, L, D]."""
    import torch.nn.functional as F
    return F.embedding(idx, w)


def lm_head_ref(h, w):
    """Plain PyTorch reference: h [B, L, D], w [V, D] -> logits [B, L, V]."""
    return h @ w.transpose(-1, -2)


REFERENCES = (
    Reference("embedding", ("gather_scatter",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", embedding_ref),
    Reference("lm_head", ("cublas",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", lm_head_ref),
)
RECIPES = (
    Recipe("lm_head", "cublas", (Input("h", normal(*BLD)), Input("w", weight("V", "D", fan_in="D")))),
    Recipe("embedding", "gather_scatter",
           (Input("idx", index("B", "L", high="V"), grad=False), Input("w", normal("V", "D")))),
)
