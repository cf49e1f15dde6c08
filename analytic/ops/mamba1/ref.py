"""Plain-PyTorch references of the Mamba-1 selective scan (``mamba1_scan_*_ref``: the eager implementations;
``selective_scan_ref`` / ``selective_scan_step_ref``: mamba-ssm's ``selective_scan_fn`` and
``selective_state_update`` semantics, the gate of that backend: h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t,
y_t = C_t h_t + D u_t, out = y * silu(z)).

torch is imported inside each function: importing this module needs no torch.
"""

from __future__ import annotations

from ...registry import Reference
from ..common.inputs import FP32, Input, Recipe, a_real, dt_bias, normal, scale
from ..common.ref import precision_dtype
from .cost import CHUNK


def _acc(t):
    """The dtype the references compute in: fp32, or fp64 when given fp64 (for tight tests)."""
    import torch
    return torch.promote_types(t.dtype, torch.float32)


def mamba1_scan_ref(u, delta, A, B, C, D, z, delta_bias):
    """``naive`` (selective_scan_ref's arithmetic, the launches counted above): returns (out, h_L).

    u, delta, z [B, E, L]; A [E, N]; B, C [B, N, L]; D, delta_bias [E].
    """
    import torch
    import torch.nn.functional as F
    acc = _acc(u)
    u32, d32, b32 = u.to(acc), delta.to(acc), B.to(acc)
    ct = C.to(acc).transpose(1, 2)  # [B, L, N] view: bmm reads the strided slices
    dt = F.softplus(d32 + delta_bias[:, None])  # [B, E, L]
    dtu = dt * u32
    delta_a = torch.exp(dt[..., None] * A[:, None, :])  # [B, E, L, N]
    delta_b_u = dtu[..., None] * b32.transpose(1, 2)[:, None]  # [B, E, L, N]
    h = u32.new_zeros(u.shape[0], A.shape[0], A.shape[1])  # [B, E, N]
    ys = []
    for t in range(u.shape[-1]):
        h = delta_a[:, :, t] * h + delta_b_u[:, :, t]
        ys.append(torch.einsum("bdn,bn->bd", h, ct[:, t]))
    y = torch.stack(ys, dim=-1)  # [B, E, L]
    return ((y + u32 * D[:, None]) * F.silu(z)).to(u.dtype), h


def mamba1_scan_loop_ref(u, delta, A, B, C, D, z, delta_bias):
    """``loop``: one set of small kernels per step, nothing of size [B, E, L, N]: (out, h_L)."""
    import torch
    import torch.nn.functional as F
    acc = _acc(u)
    u32, d32, b32 = u.to(acc), delta.to(acc), B.to(acc)
    ct = C.to(acc).transpose(1, 2)  # [B, L, N] view
    dt = F.softplus(d32 + delta_bias[:, None])  # [B, E, L]
    dtu = dt * u32
    h = u32.new_zeros(u.shape[0], A.shape[0], A.shape[1])  # [B, E, N]
    ys = []
    for t in range(u.shape[-1]):
        da = torch.exp(dt[:, :, t, None] * A)  # [B, E, N]
        dbu = dtu[:, :, t, None] * b32[:, None, :, t]  # [B, E, N]
        h = da * h + dbu
        ys.append((h * ct[:, None, t]).sum(-1))  # [B, E]
    y = torch.stack(ys, dim=-1)
    return ((y + u32 * D[:, None]) * F.silu(z)).to(u.dtype), h


def _assoc_scan(a, b):
    """Inclusive scan along dim 2 of (a, b) pairs under (a1, b1) o (a2, b2) = (a1 a2, a2 b1 + b2),
    by recursive doubling: the associative form a parallel block scan evaluates."""
    import torch
    n, step = a.shape[2], 1
    while step < n:
        a_prev = torch.cat([torch.ones_like(a[:, :, :step]), a[:, :, :-step]], dim=2)
        b_prev = torch.cat([torch.zeros_like(b[:, :, :step]), b[:, :, :-step]], dim=2)
        a, b = a_prev * a, a * b_prev + b
        step *= 2
    return a, b


def mamba1_scan_chunked_ref(u, delta, A, B, C, D, z, delta_bias, chunk=CHUNK):
    """The fused kernel's semantics: chunks of ``chunk`` steps, an associative scan inside each,
    the running (prod a, h) prefix carried across chunks. Returns (out, chunk_states) with
    chunk_states [B, E, nchunks, N, 2] = the (prod a, h) pairs the kernel saves for backward."""
    import torch
    import torch.nn.functional as F
    acc = _acc(u)
    u32, d32 = u.to(acc), delta.to(acc)
    bt, ct = B.to(acc).transpose(1, 2), C.to(acc).transpose(1, 2)  # [B, L, N]
    dt = F.softplus(d32 + delta_bias[:, None])  # [B, E, L]
    Bsz, E_, L_ = u.shape
    pa = u32.new_ones(Bsz, E_, A.shape[1])  # running prefix (prod a, h), [B, E, N]
    ph = u32.new_zeros(Bsz, E_, A.shape[1])
    ys, states = [], []
    for s in range(0, L_, chunk):
        sl = slice(s, min(s + chunk, L_))
        a = torch.exp(dt[:, :, sl, None] * A[:, None, :])  # [B, E, c, N]
        b = (dt[:, :, sl] * u32[:, :, sl])[..., None] * bt[:, None, sl]  # [B, E, c, N]
        sa, sb = _assoc_scan(a, b)
        h = sa * ph[:, :, None] + sb  # prefix o chunk-local scan
        pa, ph = pa * sa[:, :, -1], h[:, :, -1]
        states.append(torch.stack([pa, ph], dim=-1))
        ys.append((h * ct[:, None, sl]).sum(-1))  # [B, E, c]
    y = torch.cat(ys, dim=-1)
    out = (y + u32 * D[:, None]) * F.silu(z.to(acc))
    return out.to(u.dtype), torch.stack(states, dim=2)


def mamba1_step_ref(state, x, dt, A, B, C, D, z, dt_bias):
    """Decode (selective_state_update_ref): state [B, E, N] updated in place; x, dt, z [B, E];
    B, C [B, N]; returns out [B, E]."""
    import torch
    import torch.nn.functional as F
    dt = F.softplus(dt + dt_bias)  # [B, E]
    da = torch.exp(dt[..., None] * A)  # [B, E, N]
    db = dt[..., None] * B[:, None, :]
    state.copy_(state * da + db * x[..., None])
    out = torch.einsum("bdn,bn->bd", state.to(C.dtype), C)
    out = out + (x * D).to(out.dtype)
    return out * F.silu(z)


# Kernel-semantics references (the correctness gate of the kernel backends) -------------------------
# Named after the kernel API they mirror; ``hi`` is the gate's precision switch (``common.ref``).

def selective_scan_ref(u, delta, A, B, C, D, z, delta_bias, hi: bool, chunk: int = 128):
    """Mamba-1 selective scan. u, delta, z [b, E, L]; A [E, N]; B, C [b, N, L]; D, delta_bias [E].
    A step-by-step recurrence (the state is diagonal per channel, no matmul): one fused multiply-add
    per token on the [b, E, N] state; the per-token factors are built a chunk at a time."""
    import torch
    import torch.nn.functional as F

    f, w = precision_dtype(hi), u.dtype
    b, e, l = u.shape
    n = A.shape[1]
    dt = F.softplus(delta.to(f) + delta_bias.to(f)[:, None])  # [b, E, L]
    a = A.to(f)  # [E, N]
    bf, cf = B.to(f), C.to(f)  # [b, N, L]
    du = dt * u.to(f)  # [b, E, L]
    h = torch.zeros(b, e, n, dtype=f, device=u.device)
    ys = []
    for t0 in range(0, l, chunk):
        t1 = min(l, t0 + chunk)
        decay = torch.exp(dt[:, :, t0:t1, None] * a[:, None, :])  # [b, E, c, N]
        inp = du[:, :, t0:t1, None] * bf[:, None, :, t0:t1].transpose(-1, -2)  # [b, E, c, N]
        hs = []
        for a_t, x_t in zip(decay.unbind(2), inp.unbind(2)):
            h = torch.addcmul(x_t, a_t, h)
            hs.append(h)
        ys.append(torch.einsum("becn,bnc->bec", torch.stack(hs, dim=2), cf[:, :, t0:t1]))
    y = torch.cat(ys, dim=-1) + u.to(f) * D.to(f)[:, None]  # [b, E, L]
    return (y * F.silu(z.to(f))).to(w)


def selective_scan_step_ref(state, x, dt, A, B, C, D, z, dt_bias):
    """One Mamba-1 decode step (``selective_state_update`` without heads). state [b, E, N]; x, dt, z
    [b, E]; A [E, N]; B, C [b, N]; D, dt_bias [E]. Returns [out, new_state]; arithmetic at the state's
    dtype (fp32 for lo, fp64 for hi; the kernel also reduces in fp32, no matmul), out at x's dtype."""
    import torch
    import torch.nn.functional as F

    f, w = state.dtype, x.dtype
    dts = F.softplus(dt.to(f) + dt_bias.to(f))  # [b, E]
    h = state * torch.exp(dts[..., None] * A.to(f)) + (dts * x.to(f))[..., None] * B.to(f)[:, None, :]
    y = (h * C.to(f)[:, None, :]).sum(-1) + D.to(f) * x.to(f)  # [b, E]
    return [(y * F.silu(z.to(f))).to(w), h]


REFERENCES = (
    Reference("mamba1_scan", ("naive",), ("fwd", "bwd", "fwdbwd"), "eager", mamba1_scan_ref),
    Reference("mamba1_scan", ("naive",), ("decode",), "eager", mamba1_step_ref),
    Reference("mamba1_scan", ("loop",), ("fwd", "bwd", "fwdbwd"), "eager", mamba1_scan_loop_ref),
    Reference("mamba1_scan", ("fused",), ("fwd", "bwd", "fwdbwd"), "gate", selective_scan_ref),
    Reference("mamba1_scan", ("fused",), ("decode",), "gate", selective_scan_step_ref),
)
_PREFILL = (
    Input("u", normal("B", "E", "L")), Input("delta", normal("B", "E", "L", std=0.5)),
    Input("A", a_real("E", "N"), **FP32), Input("B", normal("B", "N", "L")), Input("C", normal("B", "N", "L")),
    Input("D", scale("E"), **FP32), Input("z", normal("B", "E", "L")), Input("delta_bias", dt_bias("E"), **FP32),
)
RECIPES = (
    Recipe("mamba1_scan", "naive", _PREFILL, step=(
        Input("state", normal("B", "E", "N", std=0.1), cast=False, state=True),
        Input("x", normal("B", "E")), Input("dt", normal("B", "E", std=0.5)),
        Input("A", a_real("E", "N"), **FP32), Input("B", normal("B", "N")), Input("C", normal("B", "N")),
        Input("D", scale("E"), **FP32), Input("z", normal("B", "E")), Input("dt_bias", dt_bias("E"), **FP32))),
    Recipe("mamba1_scan", "loop", _PREFILL, l1_decode=False, backend="torch_ref.loop"),
)
