"""Plain-PyTorch references of the MLPs and the MoE FFN.

torch is imported inside each function: importing this module needs no torch.
"""

from __future__ import annotations

import math

from ...registry import Reference
from ..common.inputs import BLD, Input, Recipe, normal, weight


def mlp_ref(x, w_up, w_down):
    """Plain PyTorch reference: x [B, L, D], w_up [F, D], w_down [D, F] -> [B, L, D]."""
    import torch.nn.functional as F_
    return F_.gelu(x @ w_up.transpose(-1, -2), approximate="tanh") @ w_down.transpose(-1, -2)


def gated_mlp_ref(x, w_gate, w_up, w_down):
    """Plain PyTorch reference: x [B, L, D], w_gate, w_up [F, D], w_down [D, F] -> [B, L, D]."""
    import torch.nn.functional as F_
    g = x @ w_gate.transpose(-1, -2)  # [B, L, F]
    u = x @ w_up.transpose(-1, -2)  # [B, L, F]
    return (F_.silu(g) * u) @ w_down.transpose(-1, -2)


def gated_mlp_merged_ref(x, w_fc1, w_down):
    """mamba-ssm's GatedMLP (modules/mlp.py): x [B, L, D], w_fc1 [2F, D] (the up rows, then the gate
    rows), w_down [D, F] -> [B, L, D]; the same function as ``gated_mlp_ref`` with w_fc1 = [w_up; w_gate]."""
    import torch.nn.functional as F_
    u, g = (x @ w_fc1.transpose(-1, -2)).chunk(2, dim=-1)  # strided halves of [B, L, 2F]
    return (u * F_.silu(g)) @ w_down.transpose(-1, -2)


def mlp_relu2_ref(x, w_up, w_down):
    """Plain PyTorch reference: x [B, L, D], w_up [F, D], w_down [D, F] -> [B, L, D]."""
    import torch
    return torch.square(torch.relu(x @ w_up.transpose(-1, -2))) @ w_down.transpose(-1, -2)


def gated_mlp_geglu_ref(x, w_gate, w_up, w_down):
    """Plain PyTorch reference: x [B, L, D], w_gate, w_up [F, D], w_down [D, F] -> [B, L, D]."""
    import torch.nn.functional as F_
    g = x @ w_gate.transpose(-1, -2)  # [B, L, F]
    u = x @ w_up.transpose(-1, -2)  # [B, L, F]
    return (F_.gelu(g, approximate="tanh") * u) @ w_down.transpose(-1, -2)


def moe_ref(x, w_router, w_gate, w_up, w_down, k: int):
    """Plain PyTorch reference: x [B, L, D], w_router [X, D], w_gate / w_up [X, F, D],
    w_down [X, D, F]; top-k routing with renormalized softmax weights -> [B, L, D]."""
    import torch
    import torch.nn.functional as F_
    tokens = x.reshape(-1, x.shape[-1])  # [T, D]
    probs = torch.softmax(tokens @ w_router.transpose(0, 1), dim=-1)  # [T, X]
    top_w, top_i = probs.topk(k, dim=-1)  # [T, k]
    top_w = top_w / top_w.sum(-1, keepdim=True)
    y = torch.zeros_like(tokens)
    for e in range(w_router.shape[0]):
        tok, slot = (top_i == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        h = tokens[tok]  # [n_e, D]
        a = F_.silu(h @ w_gate[e].transpose(0, 1)) * (h @ w_up[e].transpose(0, 1))  # [n_e, F]
        y.index_add_(0, tok, (a @ w_down[e].transpose(0, 1)) * top_w[tok, slot, None])
    return y.reshape(x.shape)


REFERENCES = (
    Reference("mlp", ("torch_eager",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", mlp_ref),
    Reference("mlp_relu2", ("torch_eager",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", mlp_relu2_ref),
    Reference("gated_mlp", ("torch_eager",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", gated_mlp_ref),
    Reference("gated_mlp", ("merged_eager",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", gated_mlp_merged_ref),
    Reference("gated_mlp_geglu", ("torch_eager",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", gated_mlp_geglu_ref),
)
_PLAIN = (Input("x", normal(*BLD)), Input("w_up", weight("F", "D", fan_in="D")),
          Input("w_down", weight("D", "F", fan_in="F")))
_GATED = (Input("x", normal(*BLD)), Input("w_gate", weight("F", "D", fan_in="D")),
          Input("w_up", weight("F", "D", fan_in="D")), Input("w_down", weight("D", "F", fan_in="F")))


def _fc1_weight(d, r, p):
    """GatedMLP's fc1 weight [2F, D] (``weight`` takes named dimensions only)."""
    return r.normal((2 * d["F"], d["D"]), std=1.0 / math.sqrt(d["D"]))


_MERGED = (Input("x", normal(*BLD)), Input("w_fc1", _fc1_weight), Input("w_down", weight("D", "F", fan_in="F")))
RECIPES = (
    *(Recipe(op, "torch_eager", _PLAIN) for op in ("mlp", "mlp_relu2")),
    *(Recipe(op, "torch_eager", _GATED) for op in ("gated_mlp", "gated_mlp_geglu")),
    Recipe("gated_mlp", "merged_eager", _MERGED, backend="torch_ref.merged"),
)
# moe: the only analytic implementation is grouped_gemm; moe_ref's per-expert loop is not it, so no
# torch_ref backend times it (registry.reference has no eager entry for it).
