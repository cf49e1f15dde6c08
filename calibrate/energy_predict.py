"""Predicted energy per call of one measured case: the report's energy predictor
(``figures/report/models.EnergyPredictor``: ``(case, spec, graph) -> {"energy_j", "label", "source"}``).

The energy model of ``analytic/energy.py`` with the spec's own parameters (measured entries first), at
the case's achievable time (``calibrate/join.resource_bounds``, CUDA-graph launches where the case was
timed as graph replays), charging the same operations and bytes as the energy check of
``calibrate/energy.py``: the warm-cache rule of a measured NVML window (back-to-back calls with no L2
flush), since the prediction stands beside that window's measured energy. None where the spec has no
energy section or the case cannot be costed.
"""

from __future__ import annotations

import numpy as np

from ..analytic import execution
from ..analytic.cases import case_cost
from ..analytic.energy import (
    EnergyTable,
    cache_level,
    counts,
    energy,
    label,
    path_issue_seconds,
)
from ..analytic.roofline import spec_ceiling, work_array
from ..errors import UserError
from ..hwspecs import Spec
from .energy import measured_call_traits, sm_count
from .join import resource_bounds

SOURCE = "analytic/energy.py at the achievable time, with the spec's energy parameters"


def predict_case_energy(case, spec: Spec, graph: bool) -> dict | None:
    """Energy per call of ``case`` on ``spec`` (module docstring), or None where there is none."""
    table = EnergyTable.of([spec])
    if not table.has_section[0]:
        return None
    try:
        b = resource_bounds(spec, case.op, case.impl, case.dims, case.dtype, case.mode, "measured", case.backend,
                            "graph" if graph else "eager")
        cost = execution.as_measured(case_cost(case.op, case.dims, impl=case.impl, mode=case.mode, dtype=case.dtype),
                                     case.backend, case.mode)
    except UserError:
        return None
    ach = b.achievable or {}
    if not np.isfinite(b.achievable_s):
        return None
    cache = cache_level(spec)
    cap = spec_ceiling(spec, f"memory.{cache}.capacity", "measured").value if cache else None
    w = work_array(cost)
    n = counts(w, ach.get("l2_bytes", 0.0), ach.get("dram_bytes", float(cost.executed_bytes)),
               **measured_call_traits(case.op, case.impl, case.dims, case.dtype, case.mode, case.backend, sm_count(spec)),
               warm_l2=True, l2_capacity=np.nan if cap is None else cap, path_issue_s=path_issue_seconds(w, spec))
    arr = energy(n, np.array([b.achievable_s]), table)
    used = [t for t, v in n.items() if float(v) > 0]
    return {"energy_j": float(arr.energy_j[0]), "label": label(table, 0, used), "source": f"{SOURCE} ({spec.id})"}
