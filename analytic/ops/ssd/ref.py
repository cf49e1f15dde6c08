"""Plain PyTorch references for Mamba-2 SSD (``stages.py``, ``cost.py``); torch imported lazily.

Shapes: x [B, L, H, P], dt [B, L, H], A [H], B and C [B, L, G, N], D and dt_bias [H]; heads are
grouped as h = g * (H / G) + j. Everything is computed in fp32, or fp64 when given fp64 (so the
tests can compare implementations tightly); ``ssd_quadratic_ref`` and ``ssd_recurrent_ref`` run the
launch sequences ``cost.py`` counts.
"""

from __future__ import annotations

from ...registry import Reference
from ..common.inputs import FP32, Input, Recipe, a_heads, dt_bias, normal, scale
from ..common.ref import chunked_scan, precision_dtype


def _acc(t):
    import torch
    return torch.promote_types(t.dtype, torch.float32)


def _heads(t, G, dim=-2):
    """Split the head dimension ``dim`` (size H) into (G, H/G)."""
    dim = dim % t.dim()
    return t.reshape(*t.shape[:dim], G, t.shape[dim] // G, *t.shape[dim + 1:])


def ssd_chunk_cumsum_ref(dt, A, dt_bias, chunk):
    """Stage 1: dt [B, L, H] -> (dt_out, dA_cumsum), each [B, H, nc, C] (softplus(dt + dt_bias))."""
    import torch.nn.functional as F
    acc = _acc(dt)
    Bsz, L_, H_ = dt.shape
    d = F.softplus(dt + dt_bias).to(acc)  # [B, L, H]
    d = d.transpose(1, 2).reshape(Bsz, H_, L_ // chunk, chunk)  # [B, H, nc, C]
    return d, (d * A[None, :, None, None]).cumsum(-1)


def ssd_bmm_ref(C, B, chunk):
    """Stage 2: CB[b, c, g, l, s] = C[b, c*C + l, g] . B[b, c*C + s, g] (the full [C, C])."""
    import torch
    acc = _acc(C)
    Bsz, L_, G_, N_ = C.shape
    c = C.to(acc).reshape(Bsz, L_ // chunk, chunk, G_, N_)
    b = B.to(acc).reshape(Bsz, L_ // chunk, chunk, G_, N_)
    return torch.einsum("bclgn,bcsgn->bcgls", c, b)  # [B, nc, G, C, C]


def ssd_chunk_state_ref(x, B, dt_out, dA_cumsum):
    """Stage 3: each chunk's state from zero: states [B, nc, H, P, N]."""
    import torch
    acc = _acc(x)
    Bsz, L_, H_, P_ = x.shape
    nc, chunk = dA_cumsum.shape[2], dA_cumsum.shape[3]
    G_ = B.shape[2]
    scale = torch.exp((dA_cumsum[..., -1:] - dA_cumsum).clamp(max=0.0)) * dt_out  # [B, H, nc, C]
    scale = _heads(scale.permute(0, 2, 3, 1), G_, -1)  # [B, nc, C, G, H/G]
    b = B.to(acc).reshape(Bsz, nc, chunk, G_, -1)  # [B, nc, C, G, N]
    xs = _heads(x.to(acc).reshape(Bsz, nc, chunk, H_, P_), G_)  # [B, nc, C, G, H/G, P]
    bs = b[:, :, :, :, None, :] * scale[..., None]  # [B, nc, C, G, H/G, N]: B scaled per (step, n)
    st = torch.einsum("bclgjp,bclgjn->bcgjpn", xs, bs)
    return st.reshape(Bsz, nc, H_, P_, -1)


def ssd_state_passing_ref(states, dA_last, initial=None):
    """Stage 4: sequential over chunks. states [B, nc, H, P, N], dA_last [B, H, nc] ->
    (states_in [B, nc, H, P, N]: the state entering each chunk, final [B, H, P, N])."""
    import torch
    s = torch.zeros_like(states[:, 0]) if initial is None else initial
    ins = []
    for c in range(states.shape[1]):
        ins.append(s)
        s = torch.exp(dA_last[:, :, c])[..., None, None] * s + states[:, c]
    return torch.stack(ins, dim=1), s


def ssd_chunk_scan_ref(CB, x, dt_out, dA_cumsum, C, states_in, D):
    """Stage 5: y [B, L, H, P] = decayed C . s_in + causal (CB decay dt) x + D x."""
    import torch
    acc = _acc(x)
    Bsz, L_, H_, P_ = x.shape
    nc, chunk = dA_cumsum.shape[2], dA_cumsum.shape[3]
    G_ = C.shape[2]
    c = C.to(acc).reshape(Bsz, nc, chunk, G_, -1)  # [B, nc, C, G, N]
    xs = _heads(x.to(acc).reshape(Bsz, nc, chunk, H_, P_), G_)  # [B, nc, C, G, H/G, P]
    cs = _heads(dA_cumsum.permute(0, 2, 3, 1), G_, -1)  # [B, nc, C, G, H/G]
    dts = _heads(dt_out.permute(0, 2, 3, 1), G_, -1)
    s_in = states_in.reshape(Bsz, nc, G_, H_ // G_, P_, -1)  # [B, nc, G, H/G, P, N]
    y_off = torch.einsum("bclgn,bcgjpn->bclgjp", c, s_in.to(acc)) * torch.exp(cs)[..., None]
    seg = cs[:, :, :, None] - cs[:, :, None, :]  # [B, nc, C(l), C(s), G, H/G]
    mask = torch.tril(torch.ones(chunk, chunk, dtype=torch.bool, device=x.device))[None, None, :, :, None, None]
    decay = torch.where(mask, torch.exp(torch.where(mask, seg, torch.zeros_like(seg))), torch.zeros_like(seg))
    m = CB.permute(0, 1, 3, 4, 2)[..., None] * decay * dts[:, :, None, :]  # [B, nc, C, C, G, H/G]
    y_diag = torch.einsum("bclsgj,bcsgjp->bclgjp", m, xs)
    y = y_off + y_diag + xs * D.reshape(G_, -1)[..., None]
    return y.reshape(Bsz, L_, H_, P_)


def ssd_chunked_ref(x, dt, A, B, C, D, dt_bias, chunk):
    """``chunked``: the five stages in order -> (y [B, L, H, P], final state [B, H, P, N])."""
    dt_out, cs = ssd_chunk_cumsum_ref(dt, A, dt_bias, chunk)
    cb = ssd_bmm_ref(C, B, chunk)
    states = ssd_chunk_state_ref(x, B, dt_out, cs)
    states_in, final = ssd_state_passing_ref(states, cs[..., -1])
    return ssd_chunk_scan_ref(cb, x, dt_out, cs, C, states_in, D), final


def ssd_quadratic_ref(x, dt, A, B, C, D, dt_bias):
    """``quadratic``: the masked attention-like L x L form, as ``cost.py`` counts its launches."""
    import torch
    import torch.nn.functional as F
    acc = _acc(x)
    Bsz, L_, H_, P_ = x.shape
    G_, N_ = B.shape[2], B.shape[3]
    d = F.softplus(dt + dt_bias).transpose(1, 2).contiguous()  # [B, H, L]
    cs = torch.cumsum(d * A[:, None], dim=-1)  # [B, H, L]
    seg = cs[..., :, None] - cs[..., None, :]  # [B, H, L, L]
    upper = torch.ones(L_, L_, dtype=torch.bool, device=x.device).triu(1)
    decay = torch.exp(seg).masked_fill_(upper, 0.0)
    cg = C.permute(0, 2, 1, 3).to(acc, memory_format=torch.contiguous_format)  # [B, G, L, N]
    bg = B.permute(0, 2, 1, 3).to(acc, memory_format=torch.contiguous_format)
    cb = cg @ bg.transpose(-1, -2)  # [B, G, L, L]
    m = decay.view(Bsz, G_, H_ // G_, L_, L_) * cb[:, :, None]
    m = m * d.view(Bsz, G_, H_ // G_, 1, L_)
    xh = x.permute(0, 2, 1, 3).to(acc, memory_format=torch.contiguous_format)  # [B, H, L, P]
    xg = xh.view(Bsz, G_, H_ // G_, L_, P_)
    y = m @ xg  # [B, G, H/G, L, P]
    y = y + xg * D.view(G_, H_ // G_, 1, 1)
    out = y.reshape(Bsz, H_, L_, P_).permute(0, 2, 1, 3).to(x.dtype, memory_format=torch.contiguous_format)
    w = torch.exp(cs[..., -1:] - cs) * d  # [B, H, L]
    bw = bg[:, :, None] * w.view(Bsz, G_, H_ // G_, L_, 1)  # [B, G, H/G, L, N]
    final = xg.transpose(-1, -2) @ bw  # [B, G, H/G, P, N]
    return out, final.reshape(Bsz, H_, P_, N_)


def ssd_step_ref(state, x_t, dt_t, A, B_t, C_t, D, dt_bias):
    """One step (decode): state [B, H, P, N] updated in place; x_t [B, H, P], dt_t [B, H],
    B_t, C_t [B, G, N]; returns y_t [B, H, P]."""
    import torch.nn.functional as F
    Bsz, H_, P_, N_ = state.shape
    G_ = B_t.shape[1]
    d = F.softplus(dt_t + dt_bias)  # [B, H]
    da = (d * A).exp()
    dtx = d[..., None] * x_t  # [B, H, P]
    outer = (dtx.view(Bsz, G_, H_ // G_, P_, 1) * B_t.view(Bsz, G_, 1, 1, N_)).view(Bsz, H_, P_, N_)
    state.copy_(state * da[..., None, None] + outer)
    y = (state.view(Bsz, G_, H_ // G_, P_, N_) * C_t.view(Bsz, G_, 1, 1, N_)).sum(-1).view(Bsz, H_, P_)
    return (y + x_t * D[:, None]).to(x_t.dtype)


def ssd_recurrent_ref(x, dt, A, B, C, D, dt_bias):
    """``recurrent``: one step at a time from h = 0 -> (y [B, L, H, P], final state [B, H, P, N])."""
    import torch
    import torch.nn.functional as F
    acc = _acc(x)
    Bsz, L_, H_, P_ = x.shape
    G_, N_ = B.shape[2], B.shape[3]
    d = F.softplus(dt + dt_bias)  # [B, L, H]
    da = torch.exp(d * A)
    xa, ba, ca = x.to(acc), B.to(acc), C.to(acc)
    dtx = d[..., None] * xa  # [B, L, H, P]
    h = xa.new_zeros(Bsz, H_, P_, N_)
    ys = []
    for t in range(L_):
        outer = dtx[:, t].view(Bsz, G_, H_ // G_, P_, 1) * ba[:, t].view(Bsz, G_, 1, 1, N_)
        h = h * da[:, t, :, None, None] + outer.view(Bsz, H_, P_, N_)
        hc = h.view(Bsz, G_, H_ // G_, P_, N_) * ca[:, t].view(Bsz, G_, 1, 1, N_)
        ys.append(hc.sum(-1).view(Bsz, H_, P_))
    y = torch.stack(ys, dim=1)  # [B, L, H, P]
    return (y + xa * D[:, None]).to(x.dtype), h


# Kernel-semantics references (the correctness gate of the kernel backends) -------------------------
# Named after the kernel API they mirror; ``hi`` is the gate's precision switch (``common.ref``).

def ssd_state_update_ref(state, x, dt, A, B, C, D, dt_bias):
    """One Mamba-2 decode step (``selective_state_update`` with heads, as ``Mamba2.step`` calls it,
    z=None). state [b, H, P, N]; x [b, H, P]; dt [b, H]; A, D, dt_bias [H]; B, C [b, G, N]."""
    import torch
    import torch.nn.functional as F

    f, w = state.dtype, x.dtype
    h_, g = state.shape[1], B.shape[1]
    dts = F.softplus(dt.to(f) + dt_bias.to(f))  # [b, H]
    bh = B.to(f).repeat_interleave(h_ // g, dim=1)  # [b, H, N]
    ch = C.to(f).repeat_interleave(h_ // g, dim=1)  # [b, H, N]
    decay = torch.exp(dts * A.to(f))  # [b, H]
    hnew = state * decay[..., None, None] + (dts[..., None] * x.to(f))[..., None] * bh[:, :, None, :]
    y = (hnew * ch[:, :, None, :]).sum(-1) + D.to(f)[:, None] * x.to(f)  # [b, H, P]
    return [y.to(w), hnew]


def ssd_ref(x, dt, A, B, C, D, dt_bias, hi: bool, chunk: int = 128):
    """Mamba-2 SSD. x [b, L, H, P]; dt [b, L, H] (before softplus); A, D, dt_bias [H]; B, C [b, L, G, N]."""
    import torch.nn.functional as F

    f, w = precision_dtype(hi), x.dtype
    b, l, h, p = x.shape
    g = B.shape[2]
    r = h // g
    dts = F.softplus(dt.to(f) + dt_bias.to(f))  # [b, L, H]
    xr = x.reshape(b, l, g, r, p)
    v = xr.to(f) * dts.reshape(b, l, g, r)[..., None]  # [b, L, G, r, P]
    log_a = (dts * A.to(f)).reshape(b, l, g, r)  # [b, L, G, r]
    y = chunked_scan(C, B, v, log_a, chunk, w, f, strict=False)  # [b, L, G, r, P]
    y = y + xr.to(f) * D.to(f).reshape(g, r)[..., None]
    return y.reshape(b, l, h, p).to(w)


REFERENCES = (
    Reference("ssd", ("quadratic",), ("fwd", "bwd", "fwdbwd"), "eager", ssd_quadratic_ref),
    Reference("ssd", ("recurrent",), ("fwd", "bwd", "fwdbwd"), "eager", ssd_recurrent_ref),
    Reference("ssd", ("recurrent",), ("decode",), "eager", ssd_step_ref),
    Reference("ssd", ("chunked",), ("fwd", "bwd", "fwdbwd"), "gate", ssd_ref),
    Reference("ssd", ("chunked",), ("decode",), "gate", ssd_state_update_ref),
)
_PREFILL = (
    Input("x", normal("B", "L", "H", "P")), Input("dt", normal("B", "L", "H", std=0.5)),
    Input("A", a_heads("H"), **FP32), Input("B", normal("B", "L", "G", "N")), Input("C", normal("B", "L", "G", "N")),
    Input("D", scale("H"), **FP32), Input("dt_bias", dt_bias("H"), **FP32),
)
# ssd_chunked_ref (the op's definition, impl 'chunked') is not timed: 'chunked' is the Triton kernel's
# algorithm, whose gate is ssd_ref; the stages likewise (their Triton kernels are the implementation).
RECIPES = (
    Recipe("ssd", "quadratic", _PREFILL, l1_decode=False, backend="torch_ref.quadratic"),
    Recipe("ssd", "recurrent", _PREFILL, step=(
        Input("state", normal("B", "H", "P", "N", std=0.1), cast=False, state=True),
        Input("x_t", normal("B", "H", "P")), Input("dt_t", normal("B", "H", std=0.5)),
        Input("A", a_heads("H"), **FP32), Input("B_t", normal("B", "G", "N")), Input("C_t", normal("B", "G", "N")),
        Input("D", scale("H"), **FP32), Input("dt_bias", dt_bias("H"), **FP32)), backend="torch_ref.recurrent"),
)
