"""Attention kernels (ops ``attention_causal``, ``attention_full``): PyTorch SDPA with one backend
forced (the flash-attn package's own kernels: ``flash_attn.py``).

Backends (all impl ``fa2``; modes fwd, bwd, fwdbwd, decode):
- ``torch.sdpa.flash``: ``sdpa_kernel(SDPBackend.FLASH_ATTENTION)``: the FlashAttention-2 kernels
  vendored in PyTorch.
- ``torch.sdpa.cudnn``: ``SDPBackend.CUDNN_ATTENTION``: cuDNN's fused attention. It is a
  FlashAttention-style kernel (tiled, online softmax, scores never in device memory, recompute in
  backward), so its analytic implementation is ``fa2``; its tiling and Hopper instructions are
  cuDNN's own, which the analytic fa2 rule does not model.
- ``torch.sdpa.efficient``: ``SDPBackend.EFFICIENT_ATTENTION``: the memory-efficient (xFormers /
  CUTLASS) kernel, FA2-like in bytes (tiled, online softmax), older tiling.

Layouts: SDPA q [B, H, L, P], k, v [B, G, S, P] (GQA through ``enable_gqa=True`` when G < H).
Prefill and training: causal with L = S uses ``is_causal=True``; causal with L < S uses
``causal_lower_right(L, S)`` (queries aligned to the last keys, as the analytic op defines it).
Decode: one query per sequence against a KV cache of S keys (``is_causal=False``: the new token
sees every cached key), for both ops. Whether a backend supports a configuration is checked with one
call in ``prepare``: "No available kernel" (CUDA) / "No viable backend" becomes Unavailable with
PyTorch's reasons (its warnings).
Reference: ``analytic/ops/attention/ref.py`` ``sdpa_ref``, evaluated per (batch block, KV group, query-head block).
"""

from __future__ import annotations

import warnings

from .base import Backend, Unavailable, register_backend
from .common import KernelSpec, Rand, Slice, dims_of, gate_reference, prepare_diff, require_cuda, torch_dtype

SDPA = {"torch.sdpa.flash": "FLASH_ATTENTION", "torch.sdpa.cudnn": "CUDNN_ATTENTION",
        "torch.sdpa.efficient": "EFFICIENT_ATTENTION"}
REF_BUDGET_BYTES = 8e9  # fp64 scores, probabilities and their gradients of one reference slice


def _shape(case):
    b, s, h, g, p = dims_of(case, ("B", "S", "H", "G", "P"))
    l = 1 if case.mode == "decode" else dims_of(case, ("L",))[0]
    if h % g:
        raise ValueError(f"case {case.key()}: H must be divisible by G")
    if case.mode == "decode" and case.dims.get("L", 1) != 1:
        raise ValueError(f"decode case {case.key()}: L must be 1 (one query per sequence)")
    return b, l, s, h, g, p


def attention_slices(b, l, s, h, g, head_dim: int, q_names=("q",), kv_names=("k", "v")) -> list[Slice]:
    """(batch block, KV group, query-head block) slices; ``head_dim`` is the heads axis (1 for
    [B, H, L, P], 2 for [B, L, H, P])."""
    r = h // g
    per_head = 32.0 * l * s  # bytes per (batch element, query head) in fp64 with autograd
    hb = max(1, min(r, int(REF_BUDGET_BYTES // per_head)))
    bb = max(1, min(b, int(REF_BUDGET_BYTES // (per_head * hb))))
    out = []
    for b0 in range(0, b, bb):
        bs = slice(b0, min(b, b0 + bb))
        for gi in range(g):
            for h0 in range(0, r, hb):
                hs = slice(gi * r + h0, gi * r + min(r, h0 + hb))
                gs = slice(gi, gi + 1)
                q_idx = (bs, hs) if head_dim == 1 else (bs, slice(None), hs)
                kv_idx = (bs, gs) if head_dim == 1 else (bs, slice(None), gs)
                idx = {**{n: q_idx for n in q_names}, **{n: kv_idx for n in kv_names}}
                out.append(Slice(idx, q_idx))
    return out


def _inputs(case, device, seed, heads_first: bool):
    b, l, s, h, g, p = _shape(case)
    dt = torch_dtype(case.dtype)
    r = Rand(device, seed)
    if heads_first:
        x = {"q": r.normal((b, h, l, p), dt), "k": r.normal((b, g, s, p), dt), "v": r.normal((b, g, s, p), dt)}
    else:
        x = {"q": r.normal((b, l, h, p), dt), "k": r.normal((b, s, g, p), dt), "v": r.normal((b, s, g, p), dt)}
    return r, x, (b, l, s, h, g, p)


def _trial(kernel, inputs, mode, what):
    """One call (with backward for bwd modes): turn 'no kernel for this configuration' into Unavailable."""
    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if mode in ("bwd", "fwdbwd"):
                leaves = {k: v.detach().requires_grad_(True) for k, v in inputs.items()}
                out = kernel(leaves)
                torch.autograd.grad(out, list(leaves.values()), torch.ones_like(out))
            else:
                with torch.no_grad():
                    kernel(inputs)
        except RuntimeError as exc:
            msg = str(exc)
            if any(t in msg for t in ("No available kernel", "No viable backend")) or "not supported" in msg.lower():
                why = "; ".join(str(w.message) for w in caught)[:800]
                raise Unavailable(f"{what}: {msg.splitlines()[0]} {why}".strip()) from None
            raise


def _sdpa(name: str):
    def prepare(case, device, seed):
        require_cuda(device)
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.attention.bias import causal_lower_right

        backend = getattr(SDPBackend, SDPA[name])
        r, inputs, (b, l, s, h, g, p) = _inputs(case, device, seed, heads_first=True)
        causal = case.op == "attention_causal" and case.mode != "decode"
        if causal and l > s:
            raise ValueError(f"case {case.key()}: causal attention needs L <= S")
        mask = causal_lower_right(l, s) if causal and l < s else None
        gqa = h != g
        scale = p ** -0.5

        def kernel(x):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(x["q"], x["k"], x["v"], attn_mask=mask,
                                                      is_causal=causal and mask is None, scale=scale, enable_gqa=gqa)

        def reference(x, hi):
            return gate_reference(case)(x["q"], x["k"], x["v"], causal, scale, hi)

        _trial(kernel, inputs, case.mode, f"{name} for this case")
        mode = "fwd" if case.mode == "decode" else case.mode
        what = "decode: 1 query vs a KV cache of S keys" if case.mode == "decode" else (
            "causal, " + ("is_causal=True" if mask is None else "causal_lower_right mask") if causal else "no mask")
        spec = KernelSpec(kernel, reference, inputs, ("q", "k", "v"), attention_slices(b, l, s, h, g, 1),
                          tokens=b * l, out_shape=(b, h, l, p), out_dtype=inputs["q"].dtype,
                          notes=f"F.scaled_dot_product_attention under sdpa_kernel({SDPA[name]}), {what}, "
                                f"enable_gqa={gqa}.")
        return prepare_diff(spec, mode, r)

    return prepare


for _op in ("attention_causal", "attention_full"):
    for _name, _attr in SDPA.items():
        register_backend(Backend(name=_name, op=_op, impl="fa2", modes=("fwd", "bwd", "fwdbwd", "decode"),
                                 devices=("cuda",), prepare=_sdpa(_name),
                                 description=f"torch SDPA forced to SDPBackend.{_attr}"))
