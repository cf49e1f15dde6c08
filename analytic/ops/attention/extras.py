"""The attention block's ops beside attention itself: rotary position embedding and the KV-cache append.

- ``rope`` (B, L, H, G, P; P = the rotated dims of each head, the whole head dim for Llama-style
  RoPE, fewer for partial rotary): q [B, L, H, P] and k [B, L, G, P] rotated by their position's
  angle, pairs (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin): 4 multiplies and 2 adds per pair = 3
  vector FLOPs per element, no transcendentals (cos and sin come from a table). ``fused``: one kernel
  over q and k in place (vLLM ``rotary_embedding``, flash-attn ``apply_rotary_emb_qkv_``), reading q,
  k and each token's cos and sin row (P elements per token at the dtype) and writing q and k.
  Backward: the same kernel with sin negated on dq and dk. Decode is L = 1.
- ``kv_append`` (B, L, G, P): the L new tokens' k and v [B, L, G, P] written into the KV cache (class
  ``kv_cache``, at ``kv_dtype`` when given: an fp8 cache converts on store). ``index_copy``: one copy
  kernel each for K and V (``k_cache[:, :, pos] = k``: what the measured attention block runs, and
  what any cache update by indexing does); ``fused``: one kernel for both (vLLM ``reshape_and_cache``).
  Prefill (``fwd``: the prompt's L tokens, which decode then reads) and decode (L = 1). Training
  keeps no cache.
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
                ("fwd", "bwd", "decode")),),
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
