"""Analytic cost of a measured case, whatever its level: a registered op, or a block case
("block:mamba2", "block:attention", ...) costed as the sum of the ops the workload layer plans for
that block. Measurement and calibration join on this one function."""

from __future__ import annotations

from typing import Any, Mapping

from .cost import Cost
from .registry import cost as op_cost
from .registry import get_op

BLOCK_PREFIX = "block:"


def case_cost(op: str, dims: Mapping[str, Any], impl: str | None = None, mode: str = "fwd",
              dtype: str = "bf16") -> Cost:
    if op.startswith(BLOCK_PREFIX):
        from .workloads.blocks import block_cost

        return block_cost(op, dims, impl=impl, mode=mode, dtype=dtype)
    return op_cost(op, dims, impl=impl, mode=mode, dtype=dtype)


def case_family(op: str) -> str:
    """The op family ('ssd', 'attention', ...); every block case is in family 'block'."""
    return "block" if op.startswith(BLOCK_PREFIX) else get_op(op).family
