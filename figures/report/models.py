"""What the models say about one side of a pair at any length: the analytic bound, the achievable
estimate and, with a calibration profile, the calibrated estimate, each a time in seconds with its
label; and the side's case moved to another length (``at_length``).

Every number comes from the same functions calibration uses (``calibrate.join.resource_bounds``:
roofline bound and achievable estimate of the case's analytic cost on the spec, eager launches or
graph replay as the record was timed; ``calibrate.estimate.estimate_detail``). Results are cached per
case: a crossover search asks for the same lengths for every series of a regime.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache
from typing import Any

from ...analytic.cases import Case
from ...calibrate.estimate import estimate_detail
from ...calibrate.join import Bounds, resource_bounds
from ...calibrate.profile import Profile
from ...errors import UserError
from ...hwspecs import Spec
from ...measure.results import Record
from .pairs import graph_timed

# An optional provider of predicted energy (issue #14): (case, spec, graph) -> {"energy_j": J per call,
# "label": "...", "source": "..."} or None where it has no prediction. The report shows predicted energy
# columns only when one is given.
EnergyPredictor = Callable[[Case, Spec, bool], "dict[str, Any] | None"]


def at_length(rec: Record, length: int) -> Case:
    """The record's case at another length: prefill and training set L (and attention's S = L);
    decode sets attention's KV-cache length S; an SSM decode step has no length and stays as it is."""
    case = rec.case
    dims = dict(case.dims)
    if case.mode == "decode":
        if "S" in dims:
            dims["S"] = length
    else:
        dims["L"] = length
        if "S" in dims:
            dims["S"] = length
    return replace(case, dims=dims)


class Models:
    def __init__(self, spec: Spec, profile: Profile | None, prefer: str = "measured",
                 energy: EnergyPredictor | None = None):
        self.spec, self.profile, self.prefer, self.energy = spec, profile, prefer, energy
        self._bounds = lru_cache(maxsize=None)(self._bounds_uncached)
        self._calibrated = lru_cache(maxsize=None)(self._calibrated_uncached)

    def _bounds_uncached(self, case: Case, graph: bool) -> Bounds | None:
        try:
            return resource_bounds(self.spec, case.op, case.impl, case.dims, case.dtype, case.mode, self.prefer,
                                   case.backend, "graph" if graph else "eager")
        except UserError:
            return None  # a length the op's constraints reject (e.g. L not a multiple of the chunk)

    def bounds(self, case: Case, graph: bool) -> Bounds | None:
        return self._bounds(case, graph)

    def bound_s(self, case: Case, graph: bool) -> float:
        b = self.bounds(case, graph)
        return b.bound_s if b and b.times else float("nan")

    def achievable_s(self, case: Case, graph: bool) -> float:
        b = self.bounds(case, graph)
        return b.achievable_s if b else float("nan")

    def _calibrated_uncached(self, case: Case) -> tuple[float, bool, str | None]:
        """(estimate in s or NaN, extrapolated, reason where there is none)."""
        if self.profile is None:
            return float("nan"), False, "no calibration profile given (--calibration)"
        try:
            d = estimate_detail(self.profile, case.op, case.impl, case.dims, case.dtype, case.mode, spec=self.spec,
                                backend=case.backend)
        except UserError as exc:
            return float("nan"), False, str(exc)
        return d["estimate_s"], bool(d["extrapolated"]), None

    def calibrated(self, case: Case) -> tuple[float, bool, str | None]:
        return self._calibrated(case)

    def predicted_energy(self, rec: Record) -> dict | None:
        return None if self.energy is None else self.energy(rec.case, self.spec, graph_timed(rec))
