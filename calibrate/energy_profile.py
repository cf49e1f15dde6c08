"""The energy fit as part of a calibration profile (``profile.py``), and its use on a prediction.

A profile's optional ``energy`` section holds the parameters ``energy.fit`` found on measured energy
windows (static power, J per unit of each term of ``analytic/energy.TERMS`` that the cases determine,
the tied pairs, the undetermined terms with why, the power limit) with the leave-shape-out check per
family (median and p90 |err| of energy per call at the measured time; ``energy.evaluate``). It is the
*calibrated estimate* of energy: fitted on workload cases, never written into a spec (a spec's
``measured:`` energies come from the isolating probe kernels, ``ssmbench probe --energy``).

``ssmbench energy-fit --out`` writes a profile that holds only this section (``groups`` empty);
``ssmbench calibrate`` adds it to the time profile where the results carry energy windows.
``predict --calibration`` then adds ``total.calibrated.energy``: the step's counted operations and
bytes (``total.energy.counts``, as the analytic estimate charges them) times the fitted coefficients,
plus fitted static power times the calibrated time estimate where there is one (else the achievable
time), with the power-limit stretch of ``analytic/energy.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analytic.energy import TERMS, power_limit_stretch
from ..errors import UserError
from ..hwspecs import Spec
from .energy import TARGET, EnergyFit, energy_cases, evaluate, power_limit
from .join import Joined

LABEL = "calibrated estimate"
RULE = ("static power x time + the step's counted operations and bytes per term x the energies fitted on measured "
        "energy windows (calibrate/energy.py); power-limit stretch as analytic/energy.py")


def profile_section(ev: dict[str, Any]) -> dict[str, Any]:
    """The ``energy`` section of a profile from ``energy.evaluate``'s result: the fit on every case and the
    held-out check per family."""
    checked = {}
    for basis, part in ev["bases"].items():
        checked[basis] = {name: {k: s[k] for k in ("n", "n_shapes", "median_ape_pct", "p90_ape_pct", "meets_target")}
                          for name, s in [("all", part["all"]), *part["families"].items()]}
    return {"label": LABEL, **ev["fit"], "target": TARGET, "leave_shape_out": checked,
            "n_power_limited": ev["n_power_limited"]}


def section_for(joined: Joined, spec: Spec) -> dict[str, Any] | None:
    """The energy section of a profile of ``joined`` on ``spec``, a note where the cases cannot be fitted,
    or None where no case carries an energy window."""
    if not any(c.energy for c in joined.cases):
        return None
    if joined.device_mismatch:
        return {"note": "no energy fit: energy windows are fitted on the spec of the device that measured them"}
    try:
        return profile_section(evaluate(energy_cases(joined, spec), power_limit(spec)))
    except UserError as exc:
        return {"note": f"no energy fit: {exc}"}


def fit_of(section: dict[str, Any]) -> EnergyFit:
    """The ``EnergyFit`` a profile's energy section holds."""
    return EnergyFit(float(section["static_power_w"]), {t: float(v["value"]) for t, v in section["per_term"].items()},
                     dict(section.get("undetermined") or {}), int(section["n_fit_cases"]),
                     float(section["power_limit_w"]), int(section.get("n_bound_cases", 0)))


def step_energy(section: dict[str, Any], counts: dict[str, float], time_s: float,
                tokens: float | None = None) -> dict[str, Any]:
    """The calibrated energy of work with ``counts`` (term -> operations or bytes) taking ``time_s``."""
    f = fit_of(section)
    dyn = {t: f.value(t) * float(counts.get(t, 0.0)) for t in TERMS if counts.get(t)}
    e_dyn = sum(dyn.values())
    stretched, limited = power_limit_stretch(e_dyn, time_s, f.static_w, f.limit_w)
    t = float(stretched)
    e = f.static_w * t + e_dyn
    return {"label": LABEL, "energy_j": e, "energy_per_token_j": e / tokens if tokens else None,
            "avg_power_w": e / t if t > 0 else None, "time_s": time_s, "time_s_after_power_limit": t,
            "power_limited": bool(np.asarray(limited)), "static_j": f.static_w * t, "dynamic_j": dyn, "rule": RULE}
