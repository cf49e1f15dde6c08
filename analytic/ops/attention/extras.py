"""The attention block's ops beside attention itself: rotary position embedding and the KV-cache append.

- ``rope`` (B, L, H, G, P; P = the rotated dims of each head, the whole head dim for Llama-style
  RoPE, fewer for partial rotary): q [B, L, H, P] and k [B, L, G, P] rotated by their position's
  angle, pairs (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin): 4 multiplies and 2 adds per pair = 3
  vector FLOPs per element, no transcendentals (cos and sin come from a table). ``fused``: one kernel
  over q and k in place (vLLM ``rotary_embedding``, flash-attn ``apply_rotary_emb_qkv_``), reading q,
  k and each token's cos and sin row (P elements per token at the dtype) and writing q and k.
  Backward: the same kernel with sin negated on dq and dk. Decode is L = 1. ``torch_eager``: Hugging
  Face's ``apply_rotary_pos_emb``, q * cos + rotate_half(q) * sin with rotate_half(x) = cat(-x2, x1),
  as eager aten ops for q and for k: mul (x * cos), neg (of the half x2), cat, mul (* sin), add: 5
  kernels per tensor, 10 launches, each materializing its [B, L, heads, P] output (the neg's half);
  cos and sin [B, L, P] are read by both multiplies of each tensor. FLOPs: 3 per element as fused plus
  the neg's half. HF's attention modules pass q and k as transposed views ([B, heads, L, P] of the
  projections' [B, L, heads, P]), so ATen runs its non-vectorized ``elementwise_kernel<128, 4>`` and a cat of
  non-contiguous halves (the whole-model profiles of 2026-12-03 name only those): the achievable model times
  these bytes at ``memory.dram.path.strided_copy`` (``execution.TRAITS``). Backward (autograd through the
  composition, node by node from the output: AddBackward,
  MulBackward dy * sin, CatBackward's halves, NegBackward's neg, the chunk's cat of the halves'
  gradients, MulBackward dy * cos, the accumulation of the two paths) is the same five kernels per
  tensor on the gradients, with the same bytes (cos and sin need no gradient).
- ``kv_append`` (B, L, G, P): the L new tokens' k and v [B, L, G, P] written into the KV cache (class
  ``kv_cache``, at ``kv_dtype`` when given: an fp8 cache converts on store). ``index_copy``: one copy
  kernel each for K and V (``k_cache[:, :, pos] = k``: what the measured attention block runs, and
  what any cache update by indexing does); ``fused``: one kernel for both (vLLM ``reshape_and_cache``).
  Prefill (``fwd``: the prompt's L tokens, which decode then reads) and decode (L = 1). Training
  keeps no cache.
- ``repeat_kv`` (B, L, H, G, P; L = the cached keys S): Hugging Face's ``repeat_kv`` before SDPA
  where grouped-query attention is not handed to the kernel (decode with a cache and a mask):
  ``k[:, :, None].expand(B, G, H / G, S, P).reshape(B, H, S, P)`` and the same for v, each one copy
  kernel that reads the G cached heads and writes H heads: 2 launches, reads 2 x B S G P, writes
  2 x B S H P elements. ``torch_eager``: Hugging Face's expand + reshape (a copy of an expanded view);
  ``repeat_interleave``: mamba-ssm's MHA without flash-attn (``modules/mha.py``: ``k, v = kv.unbind(-3)``
  of the interleaved [B, S, 2, G, P] cache, then ``torch.repeat_interleave(k, dim=2, repeats=H / G)``),
  which copies k and v even at H = G: the same bytes, a copy of a strided view. Both are eager modules'
  code, not a kernel library's; their copies run ATen's non-vectorized copy kernel (``execution.py``'s
  ``dram_path``).
"""

from __future__ import annotations

from ...conventions import nbytes
from ...cost import Cost
from ...registry import Impl, Op, divisible, register
from ...symbols import B, G, H, L, P
from ..common.kernels import Kernel, Tensor, kernel_chain

ROPE_FLOPS_PER_ELEMENT = 3  # per pair: 4 multiplies + 2 adds


def _rope_rule(mode: str, dtype: str) -> Cost:
    e = nbytes(dtype)
    tokens = 1 if mode == "decode" else L
    pre = "d" if mode == "bwd" else ""
    q = Tensor(f"{pre}q", "activations", B * tokens * H * P, e)
    k = Tensor(f"{pre}k", "activations", B * tokens * G * P, e)
    q2 = Tensor(f"{pre}q_rotated", "activations", B * tokens * H * P, e)
    k2 = Tensor(f"{pre}k_rotated", "activations", B * tokens * G * P, e)
    table = Tensor("cos_sin_rows", "weights", B * tokens * P, e)  # each token's cos and sin, P / 2 each
    flops = ROPE_FLOPS_PER_ELEMENT * B * tokens * (H + G) * P
    return kernel_chain([Kernel("rotary_embedding", (q, k, table), (q2, k2), flops)], [q, k, table], [q2, k2])


def _rope_eager_rule(mode: str, dtype: str) -> Cost:
    e = nbytes(dtype)
    tokens = 1 if mode == "decode" else L
    table = Tensor("cos_sin_rows", "weights", B * tokens * P, e)  # cos and sin [B, L, P] (P / 2 each, doubled)
    kernels, ins, outs = [], [table], []
    # backward (autograd through the composition): dy * sin, NegBackward's neg of a half, the chunk's cat of
    # the halves' gradients, dy * cos, the accumulation of the two paths: the forward's five kernels on dy
    pre = "d" if mode == "bwd" else ""
    for name, heads in ((f"{pre}q", H), (f"{pre}k", G)):
        n = B * tokens * heads * P
        x, y = Tensor(name, "activations", n, e), Tensor(f"{name}_rotated", "activations", n, e)
        xc, neg = Tensor(f"{name}_cos", "intermediates", n, e), Tensor(f"{name}_neg_half", "intermediates", n / 2, e)
        rot, xs = Tensor(f"{name}_rot", "intermediates", n, e), Tensor(f"{name}_sin", "intermediates", n, e)
        kernels += [Kernel("aten.mul (x * cos)", (x, table), (xc,), n),
                    Kernel("aten.neg", (x.per(2),), (neg,), n / 2),
                    Kernel("aten.cat", (neg, x.per(2)), (rot,)),
                    Kernel("aten.mul (* sin)", (rot, table), (xs,), n),
                    Kernel("aten.add", (xc, xs), (y,), n)]
        ins.append(x)
        outs.append(y)
    return kernel_chain(kernels, ins, outs)


def _repeat_kv_rule(mode: str, dtype: str, kv_dtype: str | None = None) -> Cost:
    e = nbytes(kv_dtype or dtype)
    kernels, ins, outs = [], [], []
    for name in ("k", "v"):
        src = Tensor(f"{name}_cache", "kv_cache", B * L * G * P, e)
        out = Tensor(f"{name}_repeated", "activations", B * L * H * P, e)
        kernels.append(Kernel(f"aten.copy_ ({name} expand + reshape)", (src,), (out,)))
        ins.append(src)
        outs.append(out)
    return kernel_chain(kernels, ins, outs)


def _kv_append_rule(kernels: int):
    def rule(mode: str, dtype: str, kv_dtype: str | None = None) -> Cost:
        tokens = 1 if mode == "decode" else L
        n = B * tokens * G * P
        k, v = Tensor("k_new", "activations", n, nbytes(dtype)), Tensor("v_new", "activations", n, nbytes(dtype))
        kc = Tensor("k_cache_rows", "kv_cache", n, nbytes(kv_dtype or dtype))
        vc = Tensor("v_cache_rows", "kv_cache", n, nbytes(kv_dtype or dtype))
        ks = ([Kernel("aten.copy_ (k_cache)", (k,), (kc,)), Kernel("aten.copy_ (v_cache)", (v,), (vc,))]
              if kernels == 2 else [Kernel("reshape_and_cache", (k, v), (kc, vc))])
        return kernel_chain(ks, [k, v], [kc, vc])
    return rule


ROPE_OP = register(Op(
    name="rope",
    family="attention",
    summary="rotary position embedding of q and k (P = rotated dims per head); decode is L = 1",
    dims=("B", "L", "H", "G", "P"),
    impls=(Impl("fused", "one kernel rotating q and k in place (vLLM rotary_embedding)", _rope_rule,
                ("fwd", "bwd", "decode")),
           Impl("torch_eager", "Hugging Face apply_rotary_pos_emb: 5 eager kernels each for q and k",
                _rope_eager_rule, ("fwd", "bwd", "decode"))),
    default_impl="fused",
    constraints=(divisible("H", "G"),),
    reference="ssmbench.analytic.ops.attention.ref:rope_ref",
    dtypes=("fp32", "bf16", "fp16"),
))

KV_APPEND_OP = register(Op(
    name="kv_append",
    family="attention",
    summary="the new tokens' k and v written into the KV cache (prefill: L tokens; decode: one)",
    dims=("B", "L", "G", "P"),
    impls=(
        Impl("index_copy", "k_cache[..., pos] = k and the same for v: two copy kernels", _kv_append_rule(2),
             ("fwd", "decode"), storage=("kv_dtype",)),
        Impl("fused", "one kernel writing k and v (vLLM reshape_and_cache)", _kv_append_rule(1),
             ("fwd", "decode"), storage=("kv_dtype",)),
    ),
    default_impl="fused",
    reference="ssmbench.analytic.ops.attention.ref:kv_append_ref",
    dtypes=("fp32", "bf16", "fp16", "fp8"),
))

REPEAT_KV_OP = register(Op(
    name="repeat_kv",
    family="attention",
    summary=("the G cached k and v heads copied to H heads before attention (Hugging Face repeat_kv, mamba-ssm's "
             "SDPA fallback); L = keys"),
    dims=("B", "L", "H", "G", "P"),
    impls=(Impl("torch_eager", "expand + reshape: one copy kernel each for k and v", _repeat_kv_rule,
                ("fwd", "decode"), storage=("kv_dtype",)),
           Impl("repeat_interleave", "mamba-ssm MHA's repeat_interleave of the cache's k and v views: one copy "
                "kernel each", _repeat_kv_rule, ("fwd", "decode"), storage=("kv_dtype",))),
    default_impl="torch_eager",
    constraints=(divisible("H", "G"),),
    reference="ssmbench.analytic.ops.attention.ref:repeat_kv_ref",
    dtypes=("fp32", "bf16", "fp16", "fp8"),
))
