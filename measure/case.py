"""The identity of one measured case: op, implementation, backend, dims, dtype, mode.

The same identity is what ``analytic`` costs (op, impl, dims, dtype, mode) and what ``calibrate``
joins on; ``backend`` names the real code that was timed. ``key()`` is a stable string id used to
skip finished cases on ``--resume`` and to join results across runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from ..errors import UserError

CASE_DTYPES = ("fp32", "bf16", "fp16")
CASE_MODES = ("fwd", "bwd", "fwdbwd", "decode")
# Block- and model-level cases use a prefixed op name and have no analytic op (yet).
COMPOSITE_PREFIXES = ("block:", "model:")


def is_composite(op: str) -> bool:
    return op.startswith(COMPOSITE_PREFIXES)


@dataclass(frozen=True)
class Case:
    op: str
    impl: str
    backend: str
    dims: Mapping[str, int]
    dtype: str
    mode: str

    def __post_init__(self):
        if self.dtype not in CASE_DTYPES:
            raise UserError(f"case {self.op}/{self.impl}: dtype {self.dtype!r} is not one of {', '.join(CASE_DTYPES)}")
        if self.mode not in CASE_MODES:
            raise UserError(f"case {self.op}/{self.impl}: mode {self.mode!r} is not one of {', '.join(CASE_MODES)}")
        dims: dict[str, int] = {}
        for k, v in self.dims.items():
            # bool is an int subclass; True as a dimension is a typo, not 1
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise UserError(f"case {self.op}/{self.impl}: dimension {k} must be a positive integer, got {v!r}")
            dims[str(k)] = int(v)
        # A read-only, sorted copy: the case is immutable and its key does not depend on input order.
        object.__setattr__(self, "dims", MappingProxyType(dict(sorted(dims.items()))))

    def key(self) -> str:
        dims = ",".join(f"{k}={v}" for k, v in sorted(self.dims.items()))
        return f"{self.op}/{self.impl}/{self.backend}/{self.dtype}/{self.mode}/{dims}"

    def __hash__(self) -> int:
        return hash(self.key())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Case) and self.key() == other.key()

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "impl": self.impl, "backend": self.backend, "dims": dict(self.dims),
                "dtype": self.dtype, "mode": self.mode}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Case":
        missing = [k for k in ("op", "impl", "backend", "dims", "dtype", "mode") if k not in d]
        if missing:
            raise UserError(f"case record lacks field(s) {', '.join(missing)}")
        return cls(d["op"], d["impl"], d["backend"], dict(d["dims"]), d["dtype"], d["mode"])

    def __str__(self) -> str:
        return self.key()
