"""The kernel path of a calibrated case (``analytic/execution.kernel_path``), with the device's SM count
that FlashAttention's split heuristic depends on, taken from the spec the case was costed on.

Calibration groups its cases by path (fit.py ``group_key``) and a profile finds a prediction's group by
it (profile.py ``Profile.find``). A spec that cannot be resolved by its id (a spec file given by path)
gives no SM count, so no split path: its cases stay in the backend's usual group, as before paths.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from ..analytic import execution
from ..analytic.roofline import spec_ceiling
from ..errors import UserError
from ..hwspecs import SpecError, get_spec


@lru_cache(maxsize=32)
def sm_count_of(spec_id: str | None) -> float | None:
    """``compute.sm_count`` of the built-in spec ``spec_id`` (None where the id or the value is unknown)."""
    if not spec_id:
        return None
    try:
        value = spec_ceiling(get_spec(spec_id), "compute.sm_count", "measured").value
    except (SpecError, UserError):
        return None
    return None if value is None else float(value)


def case_path(op: str, impl: str, dims: Mapping[str, int], mode: str, backend: str | None,
              spec_id: str | None) -> str:
    """The kernel path of one call (``execution.kernel_path``) on the device of spec ``spec_id``."""
    return execution.kernel_path(op, impl, dims, mode, backend, sm_count_of(spec_id))
