"""Attention kernels of the flash-attn package (ops ``attention_causal``, ``attention_full``), when
it is importable: ``flash_attn.fa2`` (impl fa2; fwd, bwd, fwdbwd, decode) is ``flash_attn_func``,
``flash_attn.fa3`` (impl fa3; fwd, bwd, fwdbwd) is FlashAttention-3's
``flash_attn_interface.flash_attn_func``; [B, L, H, P] layout, GQA native. Unavailable unless the
package imports (it needs a long CUDA build). Inputs, slices and the one-call support check are
SDPA's (``sdpa.py``); the gate reference is the registry's (``sdpa_ref``).
"""

from __future__ import annotations

from ..extensions import import_or_unavailable
from .base import Backend, register_backend
from .common import KernelSpec, gate_reference, prepare_diff, require_cuda
from .sdpa import _inputs, _trial, attention_slices


def _flash_attn(module: str, attr: str, name: str):
    def prepare(case, device, seed):
        require_cuda(device)
        mod = import_or_unavailable(module, "the flash-attn package is optional: it needs a long CUDA build "
                                            "(FLASH_ATTENTION_SKIP_CUDA_BUILD unset); install it to enable this backend")
        fn = getattr(mod, attr)
        r, inputs, (b, l, s, h, g, p) = _inputs(case, device, seed, heads_first=False)
        causal = case.op == "attention_causal" and case.mode != "decode"
        scale = p ** -0.5

        def kernel(x):
            out = fn(x["q"], x["k"], x["v"], softmax_scale=scale, causal=causal)
            return out[0] if isinstance(out, tuple) else out  # FA3 versions differ: out or (out, lse)

        def reference(x, hi):
            t = gate_reference(case)(x["q"].transpose(1, 2), x["k"].transpose(1, 2), x["v"].transpose(1, 2), causal, scale, hi)
            return t.transpose(1, 2)

        _trial(kernel, inputs, case.mode, f"{name} for this case")
        mode = "fwd" if case.mode == "decode" else case.mode
        spec = KernelSpec(kernel, reference, inputs, ("q", "k", "v"), attention_slices(b, l, s, h, g, 2),
                          tokens=b * l, out_shape=(b, l, h, p), out_dtype=inputs["q"].dtype,
                          notes=f"{module}.{attr}(causal={causal}) on [B, L, H, P] tensors (GQA native).")
        return prepare_diff(spec, mode, r)

    return prepare


for _op in ("attention_causal", "attention_full"):
    register_backend(Backend(name="flash_attn.fa2", op=_op, impl="fa2", modes=("fwd", "bwd", "fwdbwd", "decode"),
                             devices=("cuda",), prepare=_flash_attn("flash_attn", "flash_attn_func", "flash_attn.fa2"),
                             description="flash-attn package flash_attn_func (FlashAttention-2), when importable",
                             dtypes=("bf16", "fp16")))
    register_backend(Backend(name="flash_attn.fa3", op=_op, impl="fa3", modes=("fwd", "bwd", "fwdbwd"),
                             devices=("cuda",), prepare=_flash_attn("flash_attn_interface", "flash_attn_func",
                                                                   "flash_attn.fa3"),
                             description="FlashAttention-3 flash_attn_interface.flash_attn_func (Hopper), when importable",
                             dtypes=("bf16", "fp16")))
