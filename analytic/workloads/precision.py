"""Storage dtypes of one prediction: weights and activations, the KV cache, the recurrent state.

- ``dtype``: weights and activations. ``fp8`` (e4m3, the hwspecs ``compute.tensor.fp8`` peak) applies
  only to the op calls whose (op, implementation, mode) has an fp8 rule: the GEMMs (``linear``,
  ``lm_head``) and FlashAttention-3's forward (``attention_*``/``fa3``, fwd). Every other call (norms,
  scans, convolutions, the fused MLP ops, FlashAttention-2, backward of attention) runs at
  ``FP8_FALLBACK`` (bf16); ``op_dtypes`` lists which call runs at which dtype, for the output.
- ``kv_dtype``: the KV cache (memory, and the bytes the decode attention rules read). Default: the
  16-bit dtype the attention ops run at (``base``).
- ``state_dtype``: conv and SSM state (memory, and the state bytes of the decode rules that take it,
  ``registry.Impl.storage``). Default: ``base``, the model dtype, as mamba-ssm allocates its inference
  cache (see ``models.py``); fp32 is an explicit choice. Mamba-3's SSM and angle states stay fp32
  (the library allocates them so).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..conventions import BYTES_PER_ELEMENT
from ..registry import AnalyticError, get_op, symbolic_cost

FP8 = "fp8"
FP8_FALLBACK = "bf16"  # what an op without an fp8 rule runs at under --dtype fp8


@functools.lru_cache(maxsize=None)
def has_rule(op: str, impl: str, mode: str, dtype: str) -> bool:
    """Whether (op, impl, mode) has a cost rule at ``dtype`` (rules raise AnalyticError otherwise)."""
    if dtype not in get_op(op).dtypes:
        return False
    try:
        symbolic_cost(op, impl, mode, dtype)
    except AnalyticError:
        return False
    return True


@dataclass(frozen=True)
class Precision:
    dtype: str = "bf16"
    kv_dtype: str | None = None
    state_dtype: str | None = None

    def __post_init__(self):
        for name in ("dtype", "kv_dtype", "state_dtype"):
            v = getattr(self, name)
            if v is not None and v not in BYTES_PER_ELEMENT:
                raise AnalyticError(f"unknown {name} {v!r}; valid: {', '.join(BYTES_PER_ELEMENT)}")

    @property
    def base(self) -> str:
        """The dtype of the ops without an fp8 rule (the dtype itself unless it is fp8)."""
        return FP8_FALLBACK if self.dtype == FP8 else self.dtype

    @property
    def kv(self) -> str:
        return self.kv_dtype or self.base

    @property
    def state(self) -> str:
        return self.state_dtype or self.base

    def op_dtype(self, op: str, impl: str, mode: str) -> str:
        if self.dtype == FP8 and has_rule(op, impl, mode, FP8):
            return FP8
        return self.base

    def describe(self) -> dict:
        return {"dtype": self.dtype, "kv_dtype": self.kv, "state_dtype": self.state,
                "kv_dtype_source": "given" if self.kv_dtype else f"default: the ops' dtype {self.base}",
                "state_dtype_source": "given" if self.state_dtype else
                f"default: the model dtype {self.base}, as mamba-ssm allocate_inference_cache keeps it"}


def as_precision(dtype: "str | Precision") -> Precision:
    return dtype if isinstance(dtype, Precision) else Precision(dtype)
