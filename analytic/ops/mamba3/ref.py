"""Plain PyTorch references for ``mamba3`` (see ``mamba3.py``); torch imported lazily.

Shapes: Q, K [B, L, M, N] (one group), V, Z [B, L, H, P], ADT, DT, Trap [B, H, L] (Trap before the
sigmoid), Q_bias, K_bias [H, M, N], Angles [B, L, H, S] (raw: theta = cumsum(pi tanh(angle) dt)),
D [H], psi, zeta, phi [H, M, P] (MIMO; SISO is M = 1 with all three equal to one). Everything is
computed in fp32, or fp64 when given fp64.

- ``mamba3_recurrent_ref``: the recurrence token by token (two input terms per step), the ground
  truth; ``mamba3_step_ref``: one decode step of it with explicit states.
- ``mamba3_siso_chunked_ref`` / ``mamba3_mimo_chunked_ref``: the chunked forms with the kernels'
  structure (one matmul per kernel product, the same-step diagonal apart), so that
  ``torch.utils.flop_counter`` on them reproduces the rules' tensor FLOPs exactly.
Rotary pairing: the SISO kernel rotates interleaved pairs (2i, 2i + 1), the MIMO kernel split halves
(i, i + N/2); both rotate the first S pairs (``interleaved`` selects).
"""

from __future__ import annotations

import math

from ...registry import Reference
from ..common.ref import chunked_scan, mm, pad_tokens, precision_dtype


def _acc(t):
    import torch
    return torch.promote_types(t.dtype, torch.float32)


def _rotate(v, theta, interleaved):
    """Rotate the first S pairs of v [..., N] by theta [..., S] (broadcast)."""
    import torch
    S_ = theta.shape[-1]
    N_ = v.shape[-1]
    c, s = torch.cos(theta), torch.sin(theta)
    out = v.clone()
    if interleaved:
        a, b = v[..., 0:2 * S_:2], v[..., 1:2 * S_:2]
        out[..., 0:2 * S_:2], out[..., 1:2 * S_:2] = a * c - b * s, a * s + b * c
    else:
        a, b = v[..., :S_], v[..., N_ // 2:N_ // 2 + S_]
        out[..., :S_], out[..., N_ // 2:N_ // 2 + S_] = a * c - b * s, a * s + b * c
    return out


def angles_cumsum(Angles, DT):
    """theta [B, L, H, S] = cumsum over L of pi tanh(angle) dt, mod 2 pi (``angle_dt_fwd``)."""
    import torch
    th = torch.cumsum(math.pi * torch.tanh(Angles) * DT.transpose(1, 2)[..., None], dim=1)
    return torch.remainder(th, 2 * math.pi)


def _prep(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, psi, interleaved):
    import torch
    acc = _acc(V)
    Bsz, L_, H_, P_ = V.shape
    theta = angles_cumsum(Angles.to(acc), DT.to(acc))[:, :, :, None, :]  # [B, L, H, 1, S]
    qb = Q.to(acc)[:, :, None] + Q_bias  # [B, L, H, M, N]
    kb = K.to(acc)[:, :, None] + K_bias
    lam = torch.sigmoid(Trap.to(acc)).transpose(1, 2)  # [B, L, H]
    dt = DT.to(acc).transpose(1, 2)
    adt = ADT.to(acc).transpose(1, 2)
    gamma = lam * dt
    shifted = torch.cat([dt[:, 1:] * (1 - lam[:, 1:]), torch.zeros_like(dt[:, :1])], dim=1)
    xr = V.to(acc)[:, :, :, None, :] * psi  # [B, L, H, M, P]
    return dict(q=_rotate(qb, theta, interleaved), k=_rotate(kb, theta, interleaved), qb=qb, kb=kb,
                adt=adt, dt=dt, lam=lam, gamma=gamma, scale=gamma + shifted, xr=xr, acc=acc)


def _gate_out(yr, xr, D, Z, zeta, phi, acc):
    """(y_r + D x psi_r) * silu(z zeta_r) * phi_r, summed over r: yr, xr [..., H, M, P]."""
    import torch.nn.functional as F
    g = F.silu(Z.to(acc)[..., None, :] * zeta)
    return ((yr + D[:, None, None] * xr) * g * phi).sum(-2)


def _ones(H_, P_, like):
    import torch
    return torch.ones(H_, 1, P_, dtype=_acc(like), device=like.device)


def mamba3_recurrent_ref(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, D, Z, psi=None, zeta=None, phi=None,
                         interleaved=None):
    """The recurrence: returns (y [B, L, H, P], final state [B, H, P, N])."""
    import torch
    H_, P_ = V.shape[2], V.shape[3]
    mimo = psi is not None
    if not mimo:
        psi = zeta = phi = _ones(H_, P_, V)
    interleaved = (not mimo) if interleaved is None else interleaved
    p = _prep(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, psi, interleaved)
    q, k, xr = p["q"], p["k"], p["xr"]
    alpha = torch.exp(p["adt"])
    beta = alpha * p["dt"] * (1 - p["lam"])
    h = xr.new_zeros(V.shape[0], H_, P_, Q.shape[-1])
    prev = torch.zeros_like(h)
    ys = []
    for t in range(V.shape[1]):
        cur = torch.einsum("bhrp,bhrn->bhpn", xr[:, t], k[:, t])
        h = alpha[:, t, :, None, None] * h + beta[:, t, :, None, None] * prev + p["gamma"][:, t, :, None, None] * cur
        prev = cur
        yr = torch.einsum("bhpn,bhrn->bhrp", h, q[:, t])
        ys.append(_gate_out(yr, xr[:, t], D, Z[:, t], zeta, phi, p["acc"]))
    return torch.stack(ys, dim=1).to(V.dtype), h


def mamba3_siso_chunked_ref(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, D, Z, chunk=64):
    """The SISO kernel's chunked form (Q, K [B, L, 1, N]; biases [H, 1, N]): (y, final state)."""
    import torch
    import torch.nn.functional as F
    Bsz, L_, H_, P_ = V.shape
    N_ = Q.shape[-1]
    p = _prep(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, _ones(H_, P_, V), True)
    acc = p["acc"]
    tr = lambda t: t.squeeze(3).transpose(1, 2)  # noqa: E731  [B, L, H, 1, X] -> [B, H, L, X]
    q, k, qb, kb = tr(p["q"]), tr(p["k"]), tr(p["qb"]), tr(p["kb"])
    v, z = V.to(acc).transpose(1, 2), Z.to(acc).transpose(1, 2)  # [B, H, L, P]
    adt, gamma, scale = (p[n].transpose(1, 2) for n in ("adt", "gamma", "scale"))  # [B, H, L]
    ones = torch.ones(N_, 1, dtype=acc, device=V.device)
    state = v.new_zeros(Bsz, H_, P_, N_)
    ys = []
    for s0 in range(0, L_, chunk):
        sl = slice(s0, min(s0 + chunk, L_))
        qc, kc, vc = q[:, :, sl], k[:, :, sl] * scale[:, :, sl, None], v[:, :, sl]
        qk = ((qb[:, :, sl] * kb[:, :, sl]) @ ones).squeeze(-1) * gamma[:, :, sl]  # [B, H, c]
        cs = torch.cumsum(adt[:, :, sl], dim=-1)
        last = cs[..., -1:]
        o = (qc @ state.transpose(-1, -2)) * torch.exp(cs)[..., None]
        sb = (qc @ kc.transpose(-1, -2)) * torch.exp(torch.clamp(cs[..., :, None] - cs[..., None, :], max=0.0))
        n = sb.shape[-1]
        sb = torch.where(torch.tril(torch.ones(n, n, dtype=torch.bool, device=V.device), -1), sb, 0.0)
        o = o + sb @ vc + (D[:, None, None] + qk[..., None]) * vc
        ys.append(o * F.silu(z[:, :, sl]))
        state = state * torch.exp(last)[..., None] + (vc * torch.exp(last - cs)[..., None]).transpose(-1, -2) @ kc
    return torch.cat(ys, dim=2).transpose(1, 2).to(V.dtype), state


def mamba3_mimo_chunked_ref(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, D, Z, psi, zeta, phi, chunk=None):
    """The MIMO kernel's chunked form, chunk = 64/M tokens by default: (y, final state)."""
    import torch
    Bsz, L_, H_, P_ = V.shape
    M_, N_ = Q.shape[2], Q.shape[3]
    chunk = chunk or 64 // M_
    p = _prep(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, psi, False)
    acc = p["acc"]
    fuse = lambda t: t.transpose(1, 2).reshape(Bsz, H_, -1, t.shape[-1])  # noqa: E731 [B,L,H,M,X]->[B,H,L*M,X]
    q, k, qb, kb, xr = fuse(p["q"]), fuse(p["k"]), fuse(p["qb"]), fuse(p["kb"]), fuse(p["xr"])
    adt, gamma, scale = (p[n].transpose(1, 2) for n in ("adt", "gamma", "scale"))  # [B, H, L]
    z = Z.to(acc)
    state = xr.new_zeros(Bsz, H_, N_, P_)
    ys = []
    for s0 in range(0, L_, chunk):
        c = min(chunk, L_ - s0)
        rows = slice(s0 * M_, (s0 + c) * M_)
        step = torch.arange(c * M_, device=V.device) // M_
        qc, kc, xc = q[:, :, rows], k[:, :, rows], xr[:, :, rows]
        qk_full = qb[:, :, rows] @ kb[:, :, rows].transpose(-1, -2)  # [B, H, F, F], pre-rotation
        cs = torch.cumsum(adt[:, :, s0:s0 + c], dim=-1)
        last = cs[..., -1:]
        o = qc @ state  # [B, H, F, P]
        ks = kc * scale[:, :, s0:s0 + c].repeat_interleave(M_, dim=-1)[..., None]
        seg = (cs[..., :, None] - cs[..., None, :])[..., step[:, None], step[None, :]]
        sb = torch.where(step[:, None] > step[None, :], (qc @ ks.transpose(-1, -2)) * torch.exp(seg), 0.0)
        o = o * torch.exp(cs).repeat_interleave(M_, dim=-1)[..., None] + sb @ xc
        same = (step[:, None] == step[None, :]).to(acc)  # the same-step M x M blocks, on vector units
        diag = ((qk_full * same)[..., None] * xc[:, :, None, :, :]).sum(-2)  # [B, H, F, P]
        o = o + diag * gamma[:, :, s0:s0 + c].repeat_interleave(M_, dim=-1)[..., None]
        yr = o.reshape(Bsz, H_, c, M_, P_).transpose(1, 2)  # [B, c, H, M, P]
        ys.append(_gate_out(yr, xc.reshape(Bsz, H_, c, M_, P_).transpose(1, 2), D, z[:, s0:s0 + c], zeta, phi, acc))
        kdec = ks * torch.exp(last - cs).repeat_interleave(M_, dim=-1)[..., None]
        state = state * torch.exp(last)[..., None] + kdec.transpose(-1, -2) @ xc
    return torch.cat(ys, dim=1).to(V.dtype), state.transpose(-1, -2)


def mamba3_chunked_ref(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, D, Z, psi=None, zeta=None, phi=None):
    """``siso`` when no MIMO projections are given, else ``mimo``."""
    if psi is None:
        return mamba3_siso_chunked_ref(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, D, Z)
    return mamba3_mimo_chunked_ref(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, D, Z, psi, zeta, phi)


def mamba3_step_ref(state, k_prev, v_prev, angle_state, q_t, k_t, x_t, z_t, A_t, dt_t, trap_t, Q_bias, K_bias,
                    angle_proj_t, D, psi=None, zeta=None, phi=None, interleaved=None):
    """One decode step. state [B, H, P, N] is updated in place; k_prev [B, H, M, N] (rotated) and
    v_prev [B, H, P] are the previous token's; angle_state [B, H, S]; q_t, k_t [B, M, N]; x_t, z_t
    [B, H, P]; A_t, dt_t, trap_t [B, H]; angle_proj_t [B, H, S]. Returns (y_t, k_new, angle_new)."""
    import torch
    H_, P_ = x_t.shape[1], x_t.shape[2]
    mimo = psi is not None
    if not mimo:
        psi = zeta = phi = _ones(H_, P_, x_t)
    interleaved = (not mimo) if interleaved is None else interleaved
    acc = _acc(x_t)
    theta = torch.remainder(angle_state + math.pi * torch.tanh(angle_proj_t) * dt_t[..., None], 2 * math.pi)
    q = _rotate(q_t.to(acc)[:, None] + Q_bias, theta[:, :, None], interleaved)  # [B, H, M, N]
    k = _rotate(k_t.to(acc)[:, None] + K_bias, theta[:, :, None], interleaved)
    lam = torch.sigmoid(trap_t)
    alpha = torch.exp(A_t * dt_t)
    beta, gamma = alpha * dt_t * (1 - lam), lam * dt_t
    x_r, xp_r = x_t.to(acc)[:, :, None] * psi, v_prev.to(acc)[:, :, None] * psi  # [B, H, M, P]
    cur = torch.einsum("bhrp,bhrn->bhpn", x_r, k)
    prev = torch.einsum("bhrp,bhrn->bhpn", xp_r, k_prev)
    state.copy_(alpha[..., None, None] * state + beta[..., None, None] * prev + gamma[..., None, None] * cur)
    yr = torch.einsum("bhpn,bhrn->bhrp", state, q)
    y = _gate_out(yr, x_r, D, z_t, zeta, phi, acc)
    return y.to(x_t.dtype), k, theta


# Kernel-semantics references (the correctness gate of the kernel backends) -------------------------
# Named after the kernel API they mirror; ``hi`` is the gate's precision switch (``common.ref``).

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

    f, w = precision_dtype(hi), V.dtype
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
    scale = gamma + pad_tokens((dt * (1 - lam))[:, 1:], 1)  # [b, L, H]
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

    f, w = precision_dtype(hi), V.dtype
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


def mamba3_prep_ref(dd_A, dd_dt, dt_bias, angles, A_floor: float = 1e-4):
    """Plain PyTorch reference (``mamba3_prep``): Mamba3.forward's pre-processing, verbatim.
    dd_A, dd_dt [B, L, H] (slices of the in-projection), dt_bias [H] fp32, angles [B, L, S].
    Returns DT, ADT [B, L, H] fp32 (the module then views them as [B, H, L]) and angles [B, L, H, S] fp32."""
    import torch
    import torch.nn.functional as F

    _A = -F.softplus(dd_A.to(torch.float32))
    _A = torch.clamp(_A, max=-A_floor)
    DT = F.softplus(dd_dt + dt_bias)
    ADT = _A * DT
    angles = angles.unsqueeze(-2).expand(-1, -1, dd_A.shape[-1], -1).to(torch.float32)
    return DT, ADT, angles


REFERENCES = (
    Reference("mamba3_prep", ("torch_eager",), ("fwd", "bwd", "fwdbwd"), "eager", mamba3_prep_ref),
    Reference("mamba3", ("siso",), ("fwd", "bwd", "fwdbwd"), "gate", mamba3_siso_ref),
    Reference("mamba3", ("siso",), ("decode",), "gate", mamba3_siso_step_ref),
)
RECIPES = ()  # the Mamba-3 implementations are mamba-ssm kernels; no eager form is timed
