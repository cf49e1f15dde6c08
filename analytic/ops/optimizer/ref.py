"""Plain-PyTorch reference of the AdamW update.

torch is imported inside each function: importing this module needs no torch.
"""

from __future__ import annotations

from ...registry import Reference

LR, BETAS, EPS, WEIGHT_DECAY = 1e-4, (0.9, 0.999), 1e-8, 1e-2  # the model runs' AdamW (lr) and torch's defaults


def adamw_ref(p, g, m, v, step: int = 1):
    """One AdamW step on flat tensors p, g, m, v [Np] (decoupled weight decay, bias-corrected moments,
    as torch.optim.AdamW): returns the updated (p, m, v)."""
    import torch
    b1, b2 = BETAS
    p = p * (1 - LR * WEIGHT_DECAY)
    m = torch.lerp(m, g, 1 - b1)
    v = v * b2 + (1 - b2) * g * g
    s = (v.sqrt() / (1 - b2 ** step) ** 0.5) + EPS
    p = p - (LR / (1 - b1 ** step)) * m / s
    return p, m, v


REFERENCES = (
    Reference("adamw", ("foreach",), ("fwd",), "eager", adamw_ref),
)
RECIPES = ()
