"""Plain-PyTorch references for causal conv1d, attention and the gated delta rule, for the correctness
gate of the GPU backends. Same precision switch as ``_refs_ssm`` (``hi``: fp64 throughout; lo: matmul
operands and results at the activation dtype, softmax / decays / states / accumulations in fp32).

- ``causal_conv1d_ref``: depthwise causal conv of width K plus bias, then SiLU, as
  ``causal_conv1d_fn(x, weight, bias, activation="silu")``; written as K shifted multiply-adds.
- ``causal_conv1d_update_ref``: one decode step of ``causal_conv1d_update`` with a state of W >= K-1
  past inputs: the window is [state, x], the new state drops the oldest column.
- ``attention_ref``: softmax(q k^T * scale [+ causal mask]) v with grouped KV heads (GQA); the
  causal mask is the usual one for L = S (the prefill cases).
- ``gated_delta_rule_ref``: with S' = exp(g_t) S_{t-1} (state [K, V]),
  S_t = S' + k_t (beta_t (v_t - S'^T k_t))^T and o_t = scale S_t^T q_t: the gated delta rule of fla's
  ``chunk_gated_delta_rule`` (scale = K^-1/2 by default), evaluated chunk by
  chunk in the WY form of fla's ``naive_chunk_gated_delta_rule`` with the unit-lower-triangular
  inverse done by ``torch.linalg.solve_triangular``.
- ``gated_delta_rule_step_ref``: one token of the recurrence (``fused_recurrent_gated_delta_rule``).
"""

from __future__ import annotations

from ._refs_ssm import _f, mm


def causal_conv1d_ref(x, weight, bias, hi: bool):
    """x [b, E, L] (any memory layout); weight [E, K]; bias [E]. Returns silu(conv) [b, E, L]."""
    import torch.nn.functional as F

    f, w = _f(hi), x.dtype
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

    f, w = _f(hi), x.dtype
    k = weight.shape[1]
    window = torch.cat([conv_state.to(f), x.to(f)[..., None]], dim=-1)  # [b, E, W + 1]
    y = bias.to(f) + (window[..., -k:] * weight.to(f)).sum(-1)  # [b, E]
    return [F.silu(y).to(w), window[..., 1:].to(conv_state.dtype)]


def attention_ref(q, k, v, causal: bool, scale: float, hi: bool):
    """q [b, H, L, P]; k, v [b, G, S, P] (G divides H). Returns [b, H, L, P]."""
    import torch

    f, w = _f(hi), q.dtype
    h, g = q.shape[1], k.shape[1]
    kk = k.repeat_interleave(h // g, dim=1)  # [b, H, S, P]
    vv = v.repeat_interleave(h // g, dim=1)
    s = mm(q, kk.transpose(-1, -2), w).to(f) * scale  # [b, H, L, S]
    if causal:
        lq, sk = s.shape[-2], s.shape[-1]
        keep = torch.ones(lq, sk, dtype=torch.bool, device=q.device).tril(diagonal=sk - lq)
        s = s.masked_fill(~keep, float("-inf"))
    pr = torch.softmax(s, dim=-1)
    return mm(pr, vv, w).to(w)


def gated_delta_rule_ref(q, k, v, g, beta, scale: float, hi: bool, chunk: int = 64):
    """q, k [b, L, H, K]; v [b, L, H, V]; g (log decay), beta [b, L, H]. Returns o [b, L, H, V]."""
    import torch
    import torch.nn.functional as F

    f, w = _f(hi), v.dtype
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

    f, w = _f(hi), v.dtype
    s = state.to(f) * torch.exp(g.to(f)[:, 0])[..., None, None]  # [b, H, K, V]
    kk, vv = k.to(f)[:, 0], v.to(f)[:, 0]  # [b, H, K], [b, H, V]
    v_new = (vv - torch.einsum("bhkv,bhk->bhv", s, kk)) * beta.to(f)[:, 0, :, None]
    s = s + kk[..., None] * v_new[..., None, :]
    o = torch.einsum("bhk,bhkv->bhv", q.to(f)[:, 0] * scale, s)
    return [o[:, None].to(w), s.to(state.dtype if not hi else f)]
