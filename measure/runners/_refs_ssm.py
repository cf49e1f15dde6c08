"""Plain-PyTorch references for the state-space kernels (Mamba-1 scan, Mamba-2 SSD, Mamba-3 SISO),
used by the correctness gate of the GPU backends.

Why here and not in ``analytic/ops``: these are written for the gate on the GPU -- chunked so that an
fp64 evaluation of a 16k-token case is a few hundred matmuls rather than 16k Python steps, and with
one precision switch ``hi`` that the gate needs (``_kernel_util`` docstring):
- ``hi=True``: every tensor fp64 (the caller casts the inputs);
- ``hi=False``: the kernel's inputs as they are; matmul operands and results at the activation dtype
  (fp32 accumulation inside, as cuBLAS does), decays / cumulative sums / recurrent state in fp32.
Outputs are returned at the activation dtype. The analytic op modules keep the small, literal
references of each op's definition; tests check these chunked forms against step-by-step recurrences.

Semantics follow the kernels exactly (mamba-ssm 2.3.2.post1):
- ``selective_scan_ref``: ``selective_scan_fn(u, delta, A, B, C, D, z, delta_bias, delta_softplus=True)``;
  h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t, y_t = C_t h_t + D u_t, out = y * silu(z).
- ``ssd_ref``: ``mamba_chunk_scan_combined(x, dt, A, B, C, chunk, D, z=None, dt_bias, dt_softplus=True)``
  with grouped B/C (ngroups G, nheads H = G * heads-per-group).
- ``mamba3_siso_ref``: ``mamba3_siso_combined`` (Mamba-3 SISO, trapezoidal discretization):
  theta_t = sum_{r<=t} tanh(angle_r) pi dt_r (rotary angles, adjacent pairs (2i, 2i+1));
  q = rot(Q + Q_bias), k = rot(K + K_bias); alpha = exp(ADT), lambda = sigmoid(Trap),
  h_t = alpha_t h_{t-1} + alpha_t dt_t (1 - lambda_t) v_{t-1} k_{t-1}^T + lambda_t dt_t v_t k_t^T,
  y_t = h_t q_t + D v_t, out = y * silu(Z). Unrolled: the weight of v_s k_s^T in h_t (s < t) is
  (lambda_s dt_s + dt_{s+1}(1 - lambda_{s+1})) exp(sum_{r=s+1..t} ADT_r), and lambda_t dt_t for s = t:
  the chunked form below uses exactly that (the kernel's ``scale`` and ``qk_dot`` terms).
"""

from __future__ import annotations

import math


def _f(hi: bool):
    import torch

    return torch.float64 if hi else torch.float32


def mm(a, b, w):
    """Matmul with both operands at dtype ``w``; the result is at ``w`` (fp32 accumulation inside)."""
    import torch

    return torch.matmul(a.to(w), b.to(w))


def _pad_l(t, pad: int):
    """Zero-pad dim 1 (tokens) at the end."""
    import torch.nn.functional as F

    if pad == 0:
        return t
    spec = [0, 0] * (t.dim() - 2) + [0, pad]
    return F.pad(t, spec)


def chunked_scan(q, k, v, log_a, chunk: int, w, f, strict: bool):
    """y[b, t, g, r, :] = sum_{s <= t} (q_t . k_s) exp(A_t - A_s) v_s  (s < t if ``strict``),
    A = cumsum(log_a) over tokens. Shapes: q, k [b, l, g, n]; v [b, l, g, r, p]; log_a [b, l, g, r].
    Returns y [b, l, g, r, p] in dtype ``f``. The SSD chunked algorithm: intra-chunk quadratic form,
    per-chunk states, a sequential pass over chunks, state-to-output."""
    import torch

    b, l, g, n = q.shape
    r, p = v.shape[3], v.shape[4]
    pad = (-l) % chunk
    q, k, v, log_a = (_pad_l(t, pad) for t in (q, k, v, log_a))
    nc, c = (l + pad) // chunk, chunk
    qc = q.reshape(b, nc, c, g, n).permute(0, 1, 3, 2, 4)  # [b, nc, g, c, n]
    kc = k.reshape(b, nc, c, g, n).permute(0, 1, 3, 2, 4)  # [b, nc, g, c, n]
    vc = v.reshape(b, nc, c, g, r, p).permute(0, 1, 3, 4, 2, 5)  # [b, nc, g, r, c, p]
    cs = torch.cumsum(log_a.to(f).reshape(b, nc, c, g, r).permute(0, 1, 3, 4, 2), dim=-1)  # [b, nc, g, r, c]

    scores = mm(qc, kc.transpose(-1, -2), w)  # [b, nc, g, c(t), c(s)]
    keep = torch.tril(torch.ones(c, c, dtype=torch.bool, device=q.device), diagonal=-1 if strict else 0)
    seg = (cs[..., :, None] - cs[..., None, :]).masked_fill(~keep, float("-inf"))  # [b, nc, g, r, t, s]
    weights = scores.to(f)[:, :, :, None] * torch.exp(seg)  # [b, nc, g, r, t, s]
    y = mm(weights, vc, w).to(f)  # [b, nc, g, r, c, p]

    decay_to_end = torch.exp(cs[..., -1:] - cs)  # [b, nc, g, r, c]
    states = mm((vc.to(f) * decay_to_end[..., None]).transpose(-1, -2), kc[:, :, :, None], w).to(f)  # [b, nc, g, r, p, n]
    chunk_decay = torch.exp(cs[..., -1])  # [b, nc, g, r]
    prev = torch.zeros(b, g, r, p, n, dtype=f, device=q.device)
    entering = []
    for i in range(nc):
        entering.append(prev)
        prev = prev * chunk_decay[:, i, :, :, None, None] + states[:, i]
    s_in = torch.stack(entering, dim=1)  # [b, nc, g, r, p, n]
    y = y + mm(qc[:, :, :, None], s_in.transpose(-1, -2), w).to(f) * torch.exp(cs)[..., None]
    return y.permute(0, 1, 4, 2, 3, 5).reshape(b, nc * c, g, r, p)[:, :l]  # [b, l, g, r, p]


def selective_scan_ref(u, delta, A, B, C, D, z, delta_bias, hi: bool, chunk: int = 128):
    """Mamba-1 selective scan. u, delta, z [b, E, L]; A [E, N]; B, C [b, N, L]; D, delta_bias [E].
    A step-by-step recurrence (the state is diagonal per channel, no matmul): one fused multiply-add
    per token on the [b, E, N] state; the per-token factors are built a chunk at a time."""
    import torch
    import torch.nn.functional as F

    f, w = _f(hi), u.dtype
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


def ssd_step_ref(state, x, dt, A, B, C, D, dt_bias):
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

    f, w = _f(hi), x.dtype
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


def rotate_pairs(x, theta):
    """Rotate adjacent pairs (2i, 2i+1), i < theta.shape[-1], of x's last dim by theta; the rest unchanged."""
    import torch

    s = theta.shape[-1]
    head = x[..., : 2 * s].reshape(*x.shape[:-1], s, 2)
    x0, x1 = head[..., 0], head[..., 1]
    cos, sin = torch.cos(theta), torch.sin(theta)
    rot = torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).reshape(*x.shape[:-1], 2 * s)
    return torch.cat([rot, x[..., 2 * s:]], dim=-1)


def mamba3_siso_ref(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, D, Z, hi: bool, chunk: int = 64):
    """Mamba-3 SISO prefill. Q, K [b, L, Hq, N]; V, Z [b, L, H, P]; ADT, DT, Trap [b, H, L];
    Q_bias, K_bias [H, N]; Angles [b, L, H, S]; D [H]. Returns out [b, L, H, P]."""
    import torch
    import torch.nn.functional as F

    f, w = _f(hi), V.dtype
    b, l, hq, n = Q.shape
    h = V.shape[2]
    dt = DT.to(f).transpose(1, 2)  # [b, L, H]
    adt = ADT.to(f).transpose(1, 2)  # [b, L, H]
    lam = torch.sigmoid(Trap.to(f)).transpose(1, 2)  # [b, L, H]
    theta = torch.cumsum(torch.tanh(Angles.to(f)) * math.pi * dt[..., None], dim=1)  # [b, L, H, S]
    qb = Q.to(f).repeat_interleave(h // hq, dim=2) + Q_bias.to(f)  # [b, L, H, N]
    kb = K.to(f).repeat_interleave(h // hq, dim=2) + K_bias.to(f)  # [b, L, H, N]
    q, k = rotate_pairs(qb, theta), rotate_pairs(kb, theta)
    gamma = lam * dt  # [b, L, H]
    scale = gamma + _pad_l((dt * (1 - lam))[:, 1:], 1)  # [b, L, H]
    y = chunked_scan(q, k * scale[..., None], V.to(f)[:, :, :, None], adt[..., None], chunk, w, f, strict=True)
    y = y[:, :, :, 0]  # [b, L, H, P]
    diag = gamma * (qb * kb).sum(-1) + D.to(f)  # [b, L, H]
    y = (y + diag[..., None] * V.to(f)) * F.silu(Z.to(f))
    return y.to(w)


def mamba3_siso_step_ref(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, D, Z, angle_state, ssm_state,
                         k_state, v_state, hi: bool):
    """One Mamba-3 SISO decode step (``mamba3_siso_step``). Q, K [b, Hq, N]; V, Z [b, H, P];
    ADT, DT, Trap [b, H]; Angles, angle_state [b, H, S]; ssm_state [b, H, P, N]; k_state [b, H, N];
    v_state [b, H, P]. Returns [out, new angle state (mod 2 pi), new ssm state, new k state]."""
    import torch
    import torch.nn.functional as F

    f, w = _f(hi), V.dtype
    h, hq = V.shape[1], Q.shape[1]
    dt = DT.to(f)  # [b, H]
    ang = angle_state.to(f) + torch.tanh(Angles.to(f)) * math.pi * dt[..., None]  # [b, H, S]
    ang = ang - 2 * math.pi * torch.floor(ang / (2 * math.pi))
    qb = Q.to(f).repeat_interleave(h // hq, dim=1) + Q_bias.to(f)  # [b, H, N]
    kb = K.to(f).repeat_interleave(h // hq, dim=1) + K_bias.to(f)  # [b, H, N]
    q, k = rotate_pairs(qb, ang), rotate_pairs(kb, ang)
    alpha = torch.exp(ADT.to(f))  # [b, H]
    lam = torch.sigmoid(Trap.to(f))
    beta, gamma = alpha * dt * (1 - lam), lam * dt
    v = V.to(f)
    hs = (ssm_state.to(f) * alpha[..., None, None]
          + beta[..., None, None] * v_state.to(f)[..., :, None] * k_state.to(f)[..., None, :]
          + gamma[..., None, None] * v[..., :, None] * k[..., None, :])  # [b, H, P, N]
    y = mm(hs, q[..., None], w)[..., 0].to(f) + D.to(f)[:, None] * v  # [b, H, P]
    y = y * F.silu(Z.to(f))
    return [y.to(w), ang, hs, k]
