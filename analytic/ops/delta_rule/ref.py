"""Plain-PyTorch references of the gated delta rule (``gated_delta_rule_ref``: the recurrence; ``gated_delta_rule_chunked_ref``:
the WY chunked algorithm; ``chunk_gated_delta_rule_ref`` / ``gated_delta_rule_step_ref``: fla's
``chunk_gated_delta_rule`` and ``fused_recurrent_gated_delta_rule`` semantics, the gate of the fla backend:
S' = exp(g_t) S_{t-1}, S_t = S' + k_t (beta_t (v_t - S'^T k_t))^T, o_t = scale S_t^T q_t).

torch is imported inside each function: importing this module needs no torch.
"""

from __future__ import annotations

from ...registry import Reference
from ..common.ref import mm, precision_dtype


def gated_delta_rule_ref(q, k, v, g, beta, scale=None, initial_state=None):
    """Recurrent reference: q, k [B, L, H, P], v [B, L, H, Pv], g (log decay), beta [B, L, H].

    Returns o [B, L, H, Pv] and the final state [B, H, P, Pv]. Differentiable (no in-place updates).
    """
    import torch

    Bq, Lq, Hq, Pq = q.shape
    scale = Pq**-0.5 if scale is None else scale
    S = q.new_zeros(Bq, Hq, Pq, v.shape[-1]) if initial_state is None else initial_state  # [B, H, P, Pv]
    outs = []
    for t in range(Lq):
        S = S * g[:, t].exp()[..., None, None]
        u = beta[:, t, :, None] * (v[:, t] - torch.einsum("bhpv,bhp->bhv", S, k[:, t]))  # [B, H, Pv]
        S = S + torch.einsum("bhp,bhv->bhpv", k[:, t], u)
        outs.append(torch.einsum("bhpv,bhp->bhv", S, q[:, t] * scale))
    return torch.stack(outs, 1), S


def gated_delta_rule_chunked_ref(q, k, v, g, beta, chunk_size, scale=None, initial_state=None):
    """Chunked (WY) reference in plain PyTorch, the algorithm of the ``chunked`` implementation.

    Its matmuls are exactly the tensor-core FLOPs the ``chunked`` forward counts; the triangular
    inverse uses ``torch.linalg.solve_triangular``. L must be divisible by ``chunk_size``.
    """
    import torch

    Bq, Lq, Hq, Pq = q.shape
    Pvv, C = v.shape[-1], chunk_size
    N = Lq // C
    scale = Pq**-0.5 if scale is None else scale

    def chunks(x):  # [B, L, H, ...] -> [B, H, N, C, ...]
        return x.transpose(1, 2).reshape(Bq, Hq, N, C, *x.shape[3:])

    qc, kc, vc, bc = chunks(q), chunks(k), chunks(v), chunks(beta)
    gc = chunks(g).cumsum(-1)  # [B, H, N, C]
    lower = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    strict = lower.tril(-1)
    gap = gc[..., :, None] - gc[..., None, :]  # [B, H, N, C, C]
    decay_strict = gap.masked_fill(~strict, float("-inf")).exp()
    decay_lower = gap.masked_fill(~lower, float("-inf")).exp()
    A = bc[..., None] * (kc @ kc.transpose(-1, -2)) * decay_strict  # [B, H, N, C, C]
    eye = torch.eye(C, dtype=q.dtype, device=q.device).expand_as(A)
    Ai = torch.linalg.solve_triangular(eye + A, eye, upper=False)
    w = Ai @ (kc * (bc * gc.exp())[..., None])  # [B, H, N, C, P]
    u = Ai @ (vc * bc[..., None])  # [B, H, N, C, Pv]
    S = q.new_zeros(Bq, Hq, Pq, Pvv) if initial_state is None else initial_state  # [B, H, P, Pv]
    outs = []
    for n in range(N):
        v_new = u[:, :, n] - w[:, :, n] @ S  # [B, H, C, Pv]
        inter = (qc[:, :, n] * gc[:, :, n].exp()[..., None]) @ S
        intra = ((qc[:, :, n] @ kc[:, :, n].transpose(-1, -2)) * decay_lower[:, :, n]) @ v_new
        outs.append((inter + intra) * scale)
        g_last = gc[:, :, n, -1]  # [B, H]
        k_decayed = kc[:, :, n] * (g_last[..., None] - gc[:, :, n]).exp()[..., None]
        S = S * g_last.exp()[..., None, None] + k_decayed.transpose(-1, -2) @ v_new
    o = torch.stack(outs, 2).reshape(Bq, Hq, Lq, Pvv).transpose(1, 2)  # [B, L, H, Pv]
    return o, S


# Kernel-semantics references (the correctness gate of the kernel backends) -------------------------
# Named after the kernel API they mirror; ``hi`` is the gate's precision switch (``common.ref``).

def chunk_gated_delta_rule_ref(q, k, v, g, beta, scale: float, hi: bool, chunk: int = 64):
    """q, k [b, L, H, K]; v [b, L, H, V]; g (log decay), beta [b, L, H]. Returns o [b, L, H, V]."""
    import torch
    import torch.nn.functional as F

    f, w = precision_dtype(hi), v.dtype
    b, l, h, dk = q.shape
    dv = v.shape[-1]
    pad = (-l) % chunk
    nc, c = (l + pad) // chunk, chunk

    def heads_first(t):  # [b, L, H, ...] -> [b, H, nc, c, ...], zero-padded in L
        t = t.transpose(1, 2)
        t = F.pad(t, [0, 0] * (t.dim() - 3) + [0, pad])
        return t.reshape(b, h, nc, c, *t.shape[3:])

    qf = heads_first(q.to(f)) * scale  # [b, H, nc, c, K]
    kf = heads_first(k.to(f))  # [b, H, nc, c, K]
    bt = heads_first(beta.to(f))  # [b, H, nc, c]
    vb = heads_first(v.to(f)) * bt[..., None]  # [b, H, nc, c, V]
    kb = kf * bt[..., None]
    gc = torch.cumsum(heads_first(g.to(f)), dim=-1)  # [b, H, nc, c]
    lower = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    decay = torch.exp((gc[..., :, None] - gc[..., None, :]).masked_fill(~lower, float("-inf")))  # [b, H, nc, c, c]
    strict = torch.ones(c, c, dtype=torch.bool, device=q.device).tril(diagonal=-1)
    a = (mm(kb, kf.transpose(-1, -2), w).to(f) * decay).masked_fill(~strict, 0.0)  # [b, H, nc, c, c]
    eye = torch.eye(c, dtype=f, device=q.device)
    t_inv = torch.linalg.solve_triangular(a + eye, eye.expand_as(a), upper=False, unitriangular=True)
    u = mm(t_inv, vb, w).to(f)  # [b, H, nc, c, V]
    wk = mm(t_inv, kb * torch.exp(gc)[..., None], w).to(f)  # [b, H, nc, c, K]
    state = torch.zeros(b, h, dk, dv, dtype=f, device=q.device)
    outs = []
    for i in range(nc):
        qi, ki, gi = qf[:, :, i], kf[:, :, i], gc[:, :, i]
        attn = mm(qi, ki.transpose(-1, -2), w).to(f) * decay[:, :, i]  # [b, H, c, c] (lower incl. diagonal)
        v_new = u[:, :, i] - mm(wk[:, :, i], state, w).to(f)  # [b, H, c, V]
        outs.append(mm(qi * torch.exp(gi)[..., None], state, w).to(f) + mm(attn, v_new, w).to(f))
        k_to_end = ki * torch.exp(gi[..., -1:] - gi)[..., None]  # [b, H, c, K]
        state = state * torch.exp(gi[..., -1])[..., None, None] + mm(k_to_end.transpose(-1, -2), v_new, w).to(f)
    o = torch.stack(outs, dim=2).reshape(b, h, nc * c, dv)[:, :, :l]  # [b, H, L, V]
    return o.transpose(1, 2).to(w)


def gated_delta_rule_step_ref(q, k, v, g, beta, state, scale: float, hi: bool):
    """One token: q, k [b, 1, H, K]; v [b, 1, H, V]; g, beta [b, 1, H]; state [b, H, K, V].
    Returns [o [b, 1, H, V], new state]."""
    import torch

    f, w = precision_dtype(hi), v.dtype
    s = state.to(f) * torch.exp(g.to(f)[:, 0])[..., None, None]  # [b, H, K, V]
    kk, vv = k.to(f)[:, 0], v.to(f)[:, 0]  # [b, H, K], [b, H, V]
    v_new = (vv - torch.einsum("bhkv,bhk->bhv", s, kk)) * beta.to(f)[:, 0, :, None]
    s = s + kk[..., None] * v_new[..., None, :]
    o = torch.einsum("bhk,bhkv->bhv", q.to(f)[:, 0] * scale, s)
    return [o[:, None].to(w), s.to(state.dtype if not hi else f)]


REFERENCES = (
    Reference("gated_delta_rule", ("chunked", "recurrent"), ("fwd", "bwd", "fwdbwd"), "gate", chunk_gated_delta_rule_ref),
    Reference("gated_delta_rule", ("recurrent",), ("decode",), "gate", gated_delta_rule_step_ref),
)
# No torch_ref backend: both analytic implementations are fla Triton kernels; the plain-PyTorch
# recurrence and chunked forms are their definition and gate, not an implementation the cost model describes.
RECIPES = ()
