"""Design-space exploration: every design point on every workload, as columns, with Pareto fronts.

One row per (workload, design point), workload-major. Columns (units in the names; ``COLUMN_DOC``):
the design index and the value of every varied key (SI units), the workload (model, phase, batch,
length: prompt, sequence or decode context), the step time, time per token and tokens/s (achievable
estimate, ``step.py``), energy per token and average power (``energy.py``: NaN with the reason in
``energy_note`` where the build has no energy estimate), the binding resource, whether the recurrent
state is kept on chip, whether every op's tiles fit on chip and whether the workload fits in device
memory (null where the capacity is unknown), and the cost proxy where the user declared one.

Fronts (``pareto.py``), per workload, over the design points that fit (tiles and device memory; an
unknown capacity does not exclude): time per token against energy per token, and against the cost
proxy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..achievable import CLASSES
from . import energy, pareto
from .space import Axis, Designs, Param
from .step import LABEL, WorkloadWork, evaluate

UNIT_SUFFIX = {"bandwidth": "B_per_s", "flop_rate": "flop_per_s", "capacity": "B", "time": "s", "power": "W",
               "frequency": "Hz", "energy_per_flop": "J_per_flop", "energy_per_byte": "J_per_B", "energy": "J",
               "count": "count"}
COLUMN_DOC = {
    "design": "index of the design point (the same for every workload)",
    "model": "workload model id", "phase": "prefill, decode or train",
    "batch": "sequences per step", "length": "prompt / sequence length, or decode context (tokens)",
    "step_time_s": "time of one step, s (achievable estimate)",
    "time_per_token_s": "step time / tokens per step, s (achievable estimate)",
    "tokens_per_s": "tokens per step / step time (achievable estimate)",
    "energy_per_token_j": "energy of one step / tokens per step, J (NaN: see energy_note)",
    "avg_power_w": "energy of one step / step time after the power-limit stretch, W (NaN: see energy_note)",
    "energy_note": "what the energy columns are, or why they are empty",
    "binding": "the resource that binds the step: " + ", ".join(CLASSES),
    "state_on_chip": "decode keeps the whole recurrent state in the persistent on-chip level",
    "tiles_fit_on_chip": "every op's working set fits the on-chip level (null: capacity unknown)",
    "fits_in_memory": "weights, KV cache, state and activations fit in device memory (null: unknown)",
    "cost": "cost proxy: sum of weight x value over the --cost keys",
}


def column_name(p: Param) -> str:
    return f"{p.key}_{UNIT_SUFFIX[p.kind]}"


@dataclass(frozen=True)
class Categorical:
    """A column of few distinct strings: codes into ``categories``."""

    codes: np.ndarray
    categories: tuple[str, ...]

    def strings(self) -> np.ndarray:
        return np.asarray(self.categories, dtype=object)[self.codes]

    def __len__(self) -> int:
        return len(self.codes)


@dataclass(frozen=True)
class Front:
    workload: str
    x: str
    y: str
    rows: np.ndarray | None  # row indices into the columns, increasing x; None: not available
    reason: str = ""


@dataclass
class Exploration:
    columns: dict[str, np.ndarray | Categorical]
    fronts: list[Front]
    meta: dict = field(default_factory=dict)

    @property
    def n_rows(self) -> int:
        return len(self.columns["design"])


def explore(designs: Designs, works: Sequence[WorkloadWork], axes: Sequence[Axis],
            cost: Mapping[str, float] | None = None) -> Exploration:
    n = designs.n
    cols: dict[str, list] = {}

    def put(name: str, value) -> None:
        cols.setdefault(name, []).append(value)

    cost_v = None
    if cost:
        cost_v = sum(w * designs.array(k) for k, w in cost.items())
    notes = []
    for ww in works:
        w = ww.workload
        st = evaluate(ww, designs)
        e = energy.step_energy(ww, designs, st.time_s)
        notes.append(e.note)
        put("design", np.arange(n, dtype=np.int64))
        for a in axes:
            put(column_name(a.param), designs.array(a.param.key))
        put("model", w.model.id)
        put("phase", w.phase)
        put("batch", np.full(n, w.batch, dtype=np.int64))
        put("length", np.full(n, w.length, dtype=np.int64))
        put("step_time_s", st.time_s)
        put("time_per_token_s", st.time_s / ww.tokens)
        with np.errstate(divide="ignore"):
            put("tokens_per_s", ww.tokens / st.time_s)
            put("energy_per_token_j", e.energy_j / ww.tokens)
            put("avg_power_w", e.energy_j / e.time_s)  # over the time after the power-limit stretch
        put("energy_note", e.note)
        put("binding", st.binding)
        put("state_on_chip", st.state_on_chip)
        put("tiles_fit_on_chip", st.tiles_fit)
        put("fits_in_memory", st.fits_memory)
        if cost_v is not None:
            put("cost", np.broadcast_to(cost_v, (n,)))
    columns: dict[str, np.ndarray | Categorical] = {}
    for name, parts in cols.items():
        if name in ("model", "phase", "energy_note"):
            cats = tuple(dict.fromkeys(parts))
            columns[name] = Categorical(np.repeat([cats.index(p) for p in parts], n).astype(np.int32), cats)
        elif name == "binding":
            columns[name] = Categorical(np.concatenate(parts).astype(np.int32), CLASSES)
        else:
            columns[name] = np.concatenate(parts)
    fronts = _fronts(columns, works, n, cost_v is not None)
    meta = {"label": LABEL, "base": designs.base.id, "design_points": n, "workloads": [ww.workload.label for ww in works],
            "varied": [{"key": a.param.key, "low": a.lo, "high": a.hi, "as_given": a.text,
                        "column": column_name(a.param)} for a in axes],
            "cost_per_si_unit": dict(cost or {}), "energy_note": notes[0] if notes else energy.UNAVAILABLE,
            "columns": {c: COLUMN_DOC.get(c, "design value in SI units (the key's unit)") for c in columns}}
    return Exploration(columns, fronts, meta)


def _fronts(columns, works, n: int, with_cost: bool) -> list[Front]:
    out = []
    t = columns["time_per_token_s"]
    ok = (columns["tiles_fit_on_chip"] != 0) & (columns["fits_in_memory"] != 0)  # NaN (unknown) counts as fit
    for i, ww in enumerate(works):
        sl = slice(i * n, (i + 1) * n)
        label = ww.workload.label
        ys = [("energy_per_token_j", columns["energy_per_token_j"], columns["energy_note"].categories[0])]
        ys.append(("cost", columns["cost"] if with_cost else None,
                   "no cost proxy declared (--cost KEY=WEIGHT/UNIT, e.g. memory.dram.bandwidth=1/TB/s)"))
        for name, y, why in ys:
            if y is None or np.all(np.isnan(y[sl])):
                out.append(Front(label, "time_per_token_s", name, None, why))
                continue
            rows = pareto.front(t[sl], y[sl], ok[sl]) + i * n
            out.append(Front(label, "time_per_token_s", name, rows,
                             "" if rows.size else "no design point fits and has both values"))
    return out
