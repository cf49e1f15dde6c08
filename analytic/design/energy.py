"""The one boundary through which energy enters ``explore`` and ``require``.

Energy per step is to come from the energy estimate of issue #14 (static power x time, energy per FLOP
per engine, energy per byte per memory level, and the clock stretch of a power limit). That estimate is
not part of this build, so ``step_energy`` returns NaN for every design with a note that says why:
never zero, never a number made up here. Wiring the estimate in is this module alone: ``AVAILABLE``,
the design values it reads (``PARAMS``: key -> (direction, what it serves), which ``space.model_params``
adds to what a design may vary) and ``step_energy``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

AVAILABLE = False
UNAVAILABLE = ("energy model not available in this build: the energy estimate of issue #14 (static power x "
               "time + energy per FLOP per engine + energy per byte per memory level) is not merged; energy "
               "columns are empty (NaN), never zero")
PARAMS: dict[str, tuple[str, str]] = {}


@dataclass(frozen=True)
class StepEnergy:
    """Energy of one step on each design [n] in J (NaN where not estimated), and what it means."""

    energy_j: np.ndarray
    note: str


def step_energy(work, designs, time_s: np.ndarray) -> StepEnergy:
    """Energy of one step of ``work`` (``step.WorkloadWork``) on every design point of ``designs``
    (``space.Designs``) whose step takes ``time_s`` [n]."""
    return StepEnergy(np.full(np.shape(time_s), np.nan), UNAVAILABLE)
