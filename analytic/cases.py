"""The identity of one measured case, and its analytic cost whatever its level.

A case is (op, implementation, backend, dims, dtype, mode). The same identity is what ``analytic``
costs (op, impl, dims, dtype, mode), what ``measure`` runs and what ``calibrate`` joins on;
``backend`` names the real code that was timed. ``Case.key()`` is a stable string id used to skip
finished cases on ``--resume`` and to join results across runs.

An op is a registered op, or a composite case with a prefixed name: a block case
("block:mamba2", "block:attention", ...) is costed as the sum of the ops the workload layer plans
for that block; a model case ("model:...") has no analytic cost (yet). ``case_cost`` is the one
function measurement and calibration cost a case with.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import UserError
from .conventions import MODES

if TYPE_CHECKING:
    from .cost import Cost

CASE_DTYPES = ("fp32", "bf16", "fp16")
BLOCK_PREFIX = "block:"
MODEL_PREFIX = "model:"
# Block- and model-level cases use a prefixed op name; of these only block cases have an analytic cost.
COMPOSITE_PREFIXES = (BLOCK_PREFIX, MODEL_PREFIX)


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
        if self.mode not in MODES:
            raise UserError(f"case {self.op}/{self.impl}: mode {self.mode!r} is not one of {', '.join(MODES)}")
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


# The registry (sympy, every op family) is imported on first use: importing ``Case`` stays cheap for
# suites, backends and sweep workers.

def case_cost(op: str, dims: Mapping[str, Any], impl: str | None = None, mode: str = "fwd",
              dtype: str = "bf16") -> "Cost":
    if op.startswith(BLOCK_PREFIX):
        from .workloads.blocks import block_cost

        return block_cost(op, dims, impl=impl, mode=mode, dtype=dtype)
    from .registry import cost as op_cost

    return op_cost(op, dims, impl=impl, mode=mode, dtype=dtype)


def case_family(op: str) -> str:
    """The op family ('ssd', 'attention', ...); every block case is in family 'block'."""
    if op.startswith(BLOCK_PREFIX):
        return "block"
    from .registry import get_op

    return get_op(op).family
