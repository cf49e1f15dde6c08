"""The one boundary through which energy enters ``explore`` and ``require``.

Energy per step is the energy model of ``analytic/energy.py`` (static power x time, energy per FLOP per
engine and dtype, energy per byte per memory level, and the clock stretch of the power limit), vectorised
over design points, exactly as ``predict`` charges a step (``workloads/energy_step.py``):

- each call's operations and bytes are those the achievable estimate charges on that design point:
  ``achievable.achievable_work`` splits its executed bytes between the device-wide cache and DRAM (the
  split depends on the design's cache capacity), fp32 matmul FLOPs on TF32 where the implementation
  does so; where the design keeps the recurrent state on chip (``step.py``'s rule), the state's executed
  bytes are charged to that level instead of DRAM;
- static power runs over the step's achievable time ``time_s`` (the device stays clocked up while the
  host issues calls), and the power limit is checked on the step's average power.

The energy parameters are design values (``PARAMS``, read from the base spec preferring ``measured:``
entries, as ``predict`` does), so ``explore --vary energy.per_byte.dram=...`` varies them. Every number
is an **analytic estimate** (a **calibrated estimate** where the base spec's parameter was fitted on
measured cases). Where the base spec has no energy section the energy is NaN with a note saying so:
never zero, never a number made up here.

``require --target energy_per_token_j=E`` (``time_limit``): at fixed energy parameters the step's energy
is P_static x T + E_dyn (E_dyn from the base design's counts), so the target is a step-time limit
T_E = (E x tokens - E_dyn) / P_static, met by every resource the time requirements solve. Below the
power-limit stretch time (E_dyn / (limit - P_static)) the energy no longer falls with T (the clocks drop
and the time stretches), and a target at or below E_dyn is met by no step time: both are errors that
name what would have to change (the energy parameters).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import UserError
from ..achievable import achievable_work
from ..energy import (
    NO_ESTIMATE,
    TERMS,
    EnergyTable,
    counts,
    label,
    path_issue_at,
    power_limit_stretch,
)
from ..roofline import COL, TENSOR_DTYPES

AVAILABLE = True
UNAVAILABLE = NO_ESTIMATE
STATIC = "energy.static_power"
LIMIT = "power.tdp"
# key -> (direction, what it serves); "overhead": less is better. The per-level byte keys are added per
# base spec by ``params`` (the device-wide cache's name is the base's).
PARAMS: dict[str, tuple[str, str]] = {
    STATIC: ("overhead", "static power x step time"),
    **{f"energy.per_flop.tensor.{d}": ("overhead", f"energy of tensor-core FLOPs at {d}") for d in TENSOR_DTYPES},
    "energy.per_flop.vector.fp32": ("overhead", "energy of vector FLOPs"),
    "energy.per_flop.special_function": ("overhead", "energy of transcendentals"),
    "energy.per_byte.dram": ("overhead", "energy of DRAM bytes"),
}


def params(base) -> dict[str, tuple[str, str]]:
    """``PARAMS`` with the base spec's device-wide cache and on-chip state level (``EnergyTable``'s keys)."""
    out = dict(PARAMS)
    keys = EnergyTable.of([base]).keys[0]
    for t in ("cache", "on_chip"):
        if t in keys:
            out.setdefault(keys[t], ("overhead", f"energy of bytes crossing {keys[t].rsplit('.', 1)[1]}"))
    return out


@dataclass(frozen=True)
class StepEnergy:
    """Energy of one step on each design [n] in J (NaN where not estimated), and what it means."""

    energy_j: np.ndarray
    note: str
    time_s: np.ndarray | None = None      # [n] s: the step time after the power-limit stretch
    dynamic_j: np.ndarray | None = None   # [n] J: the dynamic part (static power x time excluded)
    power_limited: np.ndarray | None = None  # [n] bool


def _table(designs) -> tuple[EnergyTable, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """The base's energy table, and per design [n]: static power, power limit, and J per unit per term."""
    table = EnergyTable.of([designs.base])
    static = designs.array(STATIC) if STATIC in designs.values else np.full(designs.n, table.static_w[0])
    limit = designs.array(LIMIT) if LIMIT in designs.values else np.full(designs.n, table.limit_w[0])
    per = {}
    for t in TERMS:
        key = table.keys[0].get(t)
        per[t] = designs.array(key) if key in designs.values else np.full(designs.n, table.per_term[t][0])
    return table, static, limit, per


def _counts(ww, designs) -> dict[str, np.ndarray]:
    """Each term's count on every design [n], summed over the step's calls."""
    from .space import state_level
    level = state_level(designs.base)
    cap = designs.get(level and f"memory.{level}.capacity")
    bw = designs.get(level and f"memory.{level}.bandwidth")
    resident = (ww.state_bytes > 0) & ~np.isnan(bw) & (ww.state_bytes <= cap)
    kw = {"tf32": ww.tf32, "serial": ww.serial, "launch": ww.launch, "graph_replays": 0.0, "mma_sync": ww.mma_sync}
    table = designs.table()
    a = achievable_work(ww.work, table, **kw)
    l2, dram = np.array(a.l2_bytes), np.array(a.dram_bytes)  # [n, n_calls]
    on_chip = np.zeros_like(dram)
    if resident.any():
        moved = ww.work.copy()
        moved[COL["dram.compulsory"]] -= ww.state_compulsory
        moved[COL["dram.executed"]] -= ww.state_executed
        b = achievable_work(moved, designs.take(resident).table(), **kw)
        l2[resident], dram[resident] = b.l2_bytes, b.dram_bytes
        on_chip[resident] = ww.state_executed
    c = counts(ww.work, l2, dram, tf32=ww.tf32, on_chip_bytes=on_chip, mma_sync=ww.mma_sync, l2_reread=ww.l2_reread,
               path_issue_s=path_issue_at(ww.work, table.path_bw, table.path_rate, table.dram_bw,
                                           table.rate_vector))
    return {t: np.broadcast_to(np.asarray(v, dtype=float), dram.shape).sum(axis=1) for t, v in c.items()}


def step_energy(work, designs, time_s: np.ndarray) -> StepEnergy:
    """Energy of one step of ``work`` (``step.WorkloadWork``) on every design point of ``designs``
    (``space.Designs``) whose step takes ``time_s`` [n]."""
    table, static, limit, per = _table(designs)
    if not table.has_section[0]:
        return StepEnergy(np.full(np.shape(time_s), np.nan), f"{designs.base.id}: {NO_ESTIMATE}",
                          np.asarray(time_s, dtype=float))
    c = _counts(work, designs)
    e_dyn = sum(np.nan_to_num(per[t]) * c[t] for t in TERMS)
    static = np.nan_to_num(static)
    stretched, limited = power_limit_stretch(e_dyn, np.asarray(time_s, dtype=float), static, limit)
    used = [t for t in TERMS if np.any(c[t] > 0)]
    missing = sorted({table.keys[0].get(t, t) for t in used if np.any(np.isnan(per[t]))})
    note = (f"{label(table, 0, used)}: static power x achievable step time + dynamic energy per FLOP and per "
            "byte (analytic/energy.py)" + (f"; excludes {', '.join(missing)} (unknown in the spec)" if missing else ""))
    if limited.any():
        note += "; where power.tdp binds, the clocks drop and avg_power_w is over the stretched step time"
    return StepEnergy(static * stretched + e_dyn, note, stretched, e_dyn, limited)


def time_limit(ww, designs, energy_per_token_j: float) -> float:
    """The largest step time at which the step's energy per token meets ``energy_per_token_j``, the
    energy parameters held at the design's (module docstring); UserError where no step time meets it."""
    table, static, limit, _ = _table(designs)
    if not table.has_section[0]:
        raise UserError(f"--target energy_per_token_j: {designs.base.id}: {NO_ESTIMATE}")
    e = step_energy(ww, designs, np.full(designs.n, np.inf))
    e_star = energy_per_token_j * ww.tokens
    dyn, p_s = float(e.dynamic_j[0]), float(np.nan_to_num(static[0]))
    if e_star <= dyn or p_s <= 0:
        raise UserError(f"--target energy_per_token_j={energy_per_token_j:g} J: the step's dynamic energy alone is "
                        f"{dyn / ww.tokens:.4g} J per token on {designs.base.id}; no step time meets the target "
                        "(it needs lower energy per FLOP or per byte: vary the energy.* values with explore)")
    t_e = (e_star - dyn) / p_s
    headroom = float(limit[0]) - p_s
    if np.isfinite(headroom) and headroom > 0 and t_e < dyn / headroom:
        raise UserError(f"--target energy_per_token_j={energy_per_token_j:g} J: it needs a step time of {t_e:.4g} s, "
                        f"below the {dyn / headroom:.4g} s to which power.tdp = {float(limit[0]):g} W stretches the "
                        "step; no step time meets it (lower energy per FLOP or per byte would)")
    return t_e
