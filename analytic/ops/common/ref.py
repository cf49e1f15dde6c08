"""Plain-PyTorch helpers shared by the families' kernel-semantics references (the correctness gate).

The gate's precision switch ``hi`` (see ``measure/backends/common.py``):
- ``hi=True``: every tensor fp64 (the caller casts the inputs);
- ``hi=False``: the kernel's inputs as they are; matmul operands and results at the activation dtype
  (fp32 accumulation inside, as cuBLAS does), decays / cumulative sums / recurrent state in fp32.
torch is imported inside each function: importing this module needs no torch.
"""

from __future__ import annotations


def precision_dtype(hi: bool):
    import torch

    return torch.float64 if hi else torch.float32


def mm(a, b, w):
    """Matmul with both operands at dtype ``w``; the result is at ``w`` (fp32 accumulation inside)."""
    import torch

    return torch.matmul(a.to(w), b.to(w))


def pad_tokens(t, pad: int):
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
    q, k, v, log_a = (pad_tokens(t, pad) for t in (q, k, v, log_a))
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

