"""Plain-PyTorch references of causal conv1d (``conv1d_ref`` / ``conv1d_update_ref``: the ``torch_conv`` kernels;
``causal_conv1d_ref`` / ``causal_conv1d_update_ref``: causal-conv1d's ``causal_conv1d_fn`` with SiLU and
``causal_conv1d_update`` with a state of W >= K-1 past inputs, the gate of that backend).

torch is imported inside each function: importing this module needs no torch.
"""

from __future__ import annotations

from ...registry import Reference
from ..common.inputs import Input, Recipe, normal, weight
from ..common.ref import precision_dtype


def conv1d_ref(x, weight, bias):
    """Plain PyTorch reference (the ``torch_conv`` kernels): x [B, E, L], weight [E, K], bias [E]."""
    import torch.nn.functional as F
    E_, K_ = weight.shape
    L_ = x.shape[-1]
    return F.silu(F.conv1d(x, weight.unsqueeze(1), bias, padding=K_ - 1, groups=E_)[..., :L_])


def conv1d_causal_ref(x, weight, bias):
    """The causal_conv1d kernel's arithmetic: a bias-initialized sum of K shifted, weighted copies."""
    import torch
    import torch.nn.functional as F
    K_ = weight.shape[-1]
    L_ = x.shape[-1]
    xp = F.pad(x, (K_ - 1, 0))
    out = bias[None, :, None].expand_as(x).clone()
    for k in range(K_):
        out = out + weight[None, :, k, None] * xp[..., k:k + L_]
    return torch.nn.functional.silu(out)


def conv1d_update_ref(x_t, conv_state, weight, bias):
    """Decode step (Mamba.step's fallback): x_t [B, E], conv_state [B, E, K] updated in place."""
    import torch
    import torch.nn.functional as F
    conv_state.copy_(torch.roll(conv_state, shifts=-1, dims=-1))
    conv_state[:, :, -1] = x_t
    return F.silu(torch.sum(conv_state * weight, dim=-1) + bias)


# Kernel-semantics references (the correctness gate of the kernel backends) -------------------------
# Named after the kernel API they mirror; ``hi`` is the gate's precision switch (``common.ref``).

def causal_conv1d_ref(x, weight, bias, hi: bool):
    """x [b, E, L] (any memory layout); weight [E, K]; bias [E]. Returns silu(conv) [b, E, L]."""
    import torch.nn.functional as F

    f, w = precision_dtype(hi), x.dtype
    e, k = weight.shape
    l = x.shape[-1]
    xp = F.pad(x.to(f), (k - 1, 0))  # [b, E, L + K - 1]
    wf = weight.to(f)
    y = bias.to(f)[:, None] + sum(wf[:, j, None] * xp[..., j:j + l] for j in range(k))
    return F.silu(y).to(w)


def causal_conv1d_update_ref(x, conv_state, weight, bias, hi: bool):
    """x [b, E]; conv_state [b, E, W] (W >= K - 1); weight [E, K]; bias [E]. Returns [out, new_state]."""
    import torch
    import torch.nn.functional as F

    f, w = precision_dtype(hi), x.dtype
    k = weight.shape[1]
    window = torch.cat([conv_state.to(f), x.to(f)[..., None]], dim=-1)  # [b, E, W + 1]
    y = bias.to(f) + (window[..., -k:] * weight.to(f)).sum(-1)  # [b, E]
    return [F.silu(y).to(w), window[..., 1:].to(conv_state.dtype)]


REFERENCES = (
    Reference("conv1d", ("torch_conv",), ("fwd", "bwd", "fwdbwd"), "eager", conv1d_ref),
    Reference("conv1d", ("torch_conv",), ("decode",), "eager", conv1d_update_ref),
    Reference("conv1d", ("causal_conv1d", "torch_conv"), ("fwd", "bwd", "fwdbwd"), "gate", causal_conv1d_ref),
    Reference("conv1d", ("causal_conv1d", "torch_conv"), ("decode",), "gate", causal_conv1d_update_ref),
)
RECIPES = (
    Recipe("conv1d", "torch_conv",
           (Input("x", normal("B", "E", "L")), Input("weight", weight("E", "K", fan_in="K")),
            Input("bias", normal("E", std=0.1))),
           step=(Input("x_t", normal("B", "E")), Input("conv_state", normal("B", "E", "K"), state=True),
                 Input("weight", weight("E", "K", fan_in="K")), Input("bias", normal("E", std=0.1)))),
)
