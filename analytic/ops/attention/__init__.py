"""Attention (prefill, training, decode with a KV cache; MHA/GQA/MQA): naive, FlashAttention-2/-3 and split-KV rules.

``cost.py`` holds the registered cost rules; ``ref.py`` the plain-PyTorch references (imported only
where torch is wanted, through ``registry.reference``)."""

from . import cost, extras  # noqa: F401  (registers the family's ops; extras: RoPE, KV-cache append)
