"""Plain-PyTorch references of attention (``attention_ref``: the ``naive`` kernels, timed by the torch_ref backend; ``sdpa_ref``: SDPA's
semantics with a scale and grouped KV heads, the gate of the SDPA / flash-attn backends).

torch is imported inside each function: importing this module needs no torch.
"""

from __future__ import annotations

from ...registry import Reference
from ..common.inputs import Input, Recipe, normal
from ..common.ref import mm, precision_dtype


def causal_mask(L: int, S: int, device=None):
    """Bool [L, S], True where query i (aligned to the last of S keys) must not see key j."""
    import torch

    return torch.ones(L, S, dtype=torch.bool, device=device).triu(S - L + 1)


def attention_ref(q, k, v, causal: bool = False, mask=None):
    """Naive attention, the ``naive`` implementation's kernels: q [B, H, L, P], k, v [B, G, S, P].

    Query heads are grouped by KV head (head h uses KV head h // (H / G)) by viewing q as
    [B, G, (H/G)*L, P], so the GEMMs read each KV head once without copying k or v. ``mask`` is the
    precomputed ``causal_mask(L, S)`` (built here if not given).
    """
    Bq, Hq, Lq, Pq = q.shape
    Gk, Sk = k.shape[1], k.shape[2]
    qs = q * Pq**-0.5  # [B, H, L, P]
    scores = (qs.reshape(Bq, Gk, (Hq // Gk) * Lq, Pq) @ k.transpose(-1, -2)).view(Bq, Hq, Lq, Sk)  # [B, H, L, S]
    if causal:
        scores = scores.masked_fill(causal_mask(Lq, Sk, q.device) if mask is None else mask, float("-inf"))
    probs = scores.softmax(-1)  # [B, H, L, S]
    return (probs.view(Bq, Gk, (Hq // Gk) * Lq, Sk) @ v).view(Bq, Hq, Lq, Pq)  # [B, H, L, P]


def attention_causal_ref(q, k, v, mask=None):
    return attention_ref(q, k, v, causal=True, mask=mask)


def attention_full_ref(q, k, v):
    return attention_ref(q, k, v, causal=False)


# Kernel-semantics references (the correctness gate of the kernel backends) -------------------------
# Named after the kernel API they mirror; ``hi`` is the gate's precision switch (``common.ref``).

def sdpa_ref(q, k, v, causal: bool, scale: float, hi: bool):
    """q [b, H, L, P]; k, v [b, G, S, P] (G divides H). Returns [b, H, L, P]."""
    import torch

    f, w = precision_dtype(hi), q.dtype
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


def rope_ref(q, k, cos, sin, hi: bool):
    """Rotary embedding (``rope``, fused kernels' semantics, rotate-half pairing): q [b, L, H, P],
    k [b, L, G, P]; cos, sin [b, L, P / 2] (each token's angle). Returns rotated (q, k)."""
    import torch

    f, w = precision_dtype(hi), q.dtype

    def rot(x):
        x1, x2 = x.to(f).chunk(2, dim=-1)
        c, s = cos.to(f).unsqueeze(2), sin.to(f).unsqueeze(2)
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(w)

    return rot(q), rot(k)


def kv_append_ref(k_cache, v_cache, k, v, pos: int):
    """KV-cache append (``kv_append``, index_copy): k, v [b, G, L, P] written at positions pos .. pos + L - 1
    of the caches [b, G, S, P] (in place); returns the caches."""
    n = k.shape[2]
    k_cache[:, :, pos:pos + n] = k
    v_cache[:, :, pos:pos + n] = v
    return k_cache, v_cache


def rope_torch_eager_ref(q, k, cos, sin):
    """Hugging Face ``apply_rotary_pos_emb`` (``rope``/``torch_eager``) as its attention modules call it: q
    [b, L, H, P] and k [b, L, G, P] as the projections write them, viewed as [b, H, L, P] / [b, G, L, P]
    (``.view(...).transpose(1, 2)``: every kernel reads a non-contiguous view); cos, sin [b, L, P / 2] (each
    token's angle, doubled to P as HF's rotary module does, ``unsqueeze_dim=1``). Returns the rotated
    [b, H, L, P] and [b, G, L, P]."""
    import torch

    c = torch.cat([cos, cos], dim=-1).unsqueeze(1)
    s = torch.cat([sin, sin], dim=-1).unsqueeze(1)

    def rotate_half(x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    qt, kt = q.transpose(1, 2), k.transpose(1, 2)
    return qt * c + rotate_half(qt) * s, kt * c + rotate_half(kt) * s


def _half_angles(d, r, p):
    """cos or sin inputs [B, L, P / 2]: values of a cosine (the timing does not depend on them)."""
    return r.normal((d["B"], d["L"], d["P"] // 2)).cos()


def repeat_kv_ref(k, v, n_rep: int):
    """Hugging Face ``repeat_kv`` of k and v [b, G, S, P] to [b, G * n_rep, S, P]."""
    def rep(x):
        b, g, s, p = x.shape
        return x[:, :, None].expand(b, g, n_rep, s, p).reshape(b, g * n_rep, s, p)
    return rep(k), rep(v)


REFERENCES = (
    Reference("attention_causal", ("naive",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", attention_causal_ref),
    Reference("attention_full", ("naive",), ("fwd", "bwd", "fwdbwd", "decode"), "eager", attention_full_ref),
    *(Reference(op, ("fa2", "fa3"), ("fwd", "bwd", "fwdbwd", "decode"), "gate", sdpa_ref) for op in ("attention_causal", "attention_full")),
    Reference("rope", ("fused",), ("fwd", "bwd", "fwdbwd", "decode"), "gate", rope_ref),
    Reference("kv_append", ("index_copy",), ("fwd", "decode"), "eager", kv_append_ref),
    Reference("rope", ("torch_eager",), ("fwd", "decode"), "eager", rope_torch_eager_ref),
    Reference("repeat_kv", ("torch_eager", "repeat_interleave"), ("fwd", "decode"), "eager", repeat_kv_ref),
)
_ATTN = (Input("q", normal("B", "H", "L", "P")), Input("k", normal("B", "G", "S", "P")),
         Input("v", normal("B", "G", "S", "P")))
RECIPES = (
    Recipe("attention_causal", "naive", _ATTN),
    Recipe("rope", "torch_eager", (Input("q", normal("B", "L", "H", "P")), Input("k", normal("B", "L", "G", "P")),
                                   Input("cos", _half_angles), Input("sin", _half_angles)),
           exclude_modes=("bwd", "fwdbwd"), notes="Hugging Face layout: q, k transposed views (rope_torch_eager_ref)"),
    Recipe("attention_full", "naive", _ATTN),
)
