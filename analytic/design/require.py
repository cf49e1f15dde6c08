"""Requirements inversion: the least of each resource at which a workload meets its targets.

Targets (``tokens_per_s``, ``time_per_token_s``, ``energy_per_token_j``) become one step time T* (the
smallest that any target allows; an energy target is the step time at which static power x T plus the
step's dynamic energy meets it, ``energy.time_limit``). For one spec value x, the others held at the
base spec, the achievable step time T(x)
(``step.py``) is a sum and max of terms each linear in 1/x (a ``rate``: engine rates, bandwidths) or
in x (an ``overhead``: latency, per-kernel and per-call times), so T is continuous, monotone and
piecewise linear in 1/x (or x):

- rate: the requirement is x* = 1 / u*, u* = sup{u : T(1/u) <= T*}; none exists when T with the
  resource infinitely fast (u = 0) still exceeds T* (other terms floor the step);
- overhead: x* = sup{x : T(x) <= T*}; none when T(0) > T*.

The crossing is bracketed by doubling / halving from the base value and found by Brent's method (the
root of a piecewise-linear function: exact to the tolerance, 1e-13 relative). On the linear piece that
holds x* the step time is T = a + b u (rate) or a + b x (overhead); ``formula`` reports that closed
form, from which x* = b / (T* - a) (rate) or (T* - a) / b (overhead).

Capacities are thresholds with closed forms: the device-wide cache serves a kernel's extra traffic from
2 x that kernel's executed bytes (it must fit in half the cache), the persistent on-chip level keeps the
state from the whole state of the batch, the tiles need the largest working set of an op, device memory
the whole footprint. The time-relevant ones (cache, state level) are solved as the least threshold
whose step time meets T*.

``design``: one design that meets every target, grown from the base one resource at a time: the
resource of the step's binding class is grown to its requirement; where it cannot meet the targets
alone it is grown until it stops binding and the next binding resource follows. The last resource
grown binds: the design misses the targets when it is reduced (``tests/test_design.py`` checks the
round trip through ``ssmbench specs new --from-requirements``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from ...errors import UserError
from ..roofline import COL, TENSOR_DTYPES
from . import energy
from .space import Designs, Param, cache_level, state_level
from .step import WorkloadWork, evaluate

TARGETS = ("tokens_per_s", "time_per_token_s", "energy_per_token_j")
# A requirement is written this much beyond the crossing, on the side that meets the target, so that a
# value read back from a file (decimal text) still meets it.
SAFETY = 1e-9
RTOL = 1e-13
MAX_STEPS = 200  # doublings / halvings of the bracket search (a factor 2^200 either way)


def parse_targets(texts) -> dict[str, float]:
    out = {}
    for item in texts or []:
        for part in (p.strip() for p in item.split(",") if p.strip()):
            name, sep, value = (s.strip() for s in part.partition("="))
            if not sep or name not in TARGETS:
                raise UserError(f"--target {part!r}: expected NAME=VALUE with NAME one of {', '.join(TARGETS)} "
                                "(e.g. tokens_per_s=20000)")
            if name == "energy_per_token_j" and not energy.AVAILABLE:
                raise UserError(f"--target {name}: {energy.UNAVAILABLE}")
            try:
                v = float(value)
            except ValueError:
                raise UserError(f"--target {name}: {value!r} is not a number (tokens_per_s in tokens/s, "
                                "time_per_token_s in s, energy_per_token_j in J)") from None
            if not (np.isfinite(v) and v > 0):
                raise UserError(f"--target {name}: must be a positive number, got {value!r}")
            if name in out:
                raise UserError(f"--target {name}: given twice")
            out[name] = v
    if not out:
        raise UserError("give at least one --target, e.g. --target tokens_per_s=20000")
    return out


def target_time(targets: dict[str, float], tokens: float, ww=None, base=None) -> float:
    """The largest step time that meets every target. An energy target (``energy_per_token_j``) is a step-time
    limit at the base's energy parameters (``energy.time_limit``; it needs the workload ``ww`` and ``base``)."""
    limits = []
    if "energy_per_token_j" in targets:
        if ww is None or base is None:
            raise UserError("--target energy_per_token_j: the energy target needs the workload and the base spec")
        from .space import Designs
        limits.append(energy.time_limit(ww, Designs.of(base), targets["energy_per_token_j"]))
    if "tokens_per_s" in targets:
        limits.append(tokens / targets["tokens_per_s"])
    if "time_per_token_s" in targets:
        limits.append(targets["time_per_token_s"] * tokens)
    return min(limits)


class Problem:
    """A workload on a base spec with some values fixed (the design so far): step times as one value varies."""

    def __init__(self, ww: WorkloadWork, base, fixed: dict[str, float] | None = None):
        self.ww, self.base, self.fixed = ww, base, dict(fixed or {})
        start = Designs.of(base)
        self.params = start.params
        self.base_values = {k: float(np.asarray(v).reshape(-1)[0]) for k, v in start.values.items()}

    def value(self, key: str) -> float:
        return self.fixed.get(key, self.base_values[key])

    def designs(self, key: str | None = None, values=None) -> Designs:
        values = np.atleast_1d(np.asarray(values, dtype=float)) if key is not None else np.zeros(1)
        points = {k: np.full(values.size, v) for k, v in self.fixed.items() if k != key}
        if key is not None:
            points[key] = values
        return Designs.of(self.base, points)

    def times(self, key: str | None = None, values=None) -> np.ndarray:
        return evaluate(self.ww, self.designs(key, values)).time_s

    def time(self, key: str | None = None, value: float | None = None) -> float:
        return float(self.times(key, value)[0])

    def step(self):
        return evaluate(self.ww, self.designs())


@dataclass
class Requirement:
    param: Param
    base: float
    status: str  # solved | met at any value | cannot meet alone | unknown in the base | no work
    required: float | None = None
    bound: str = ""  # at least | at most
    growth: float | None = None
    binds: bool = False
    method: str = ""
    formula: str = ""
    reason: str = ""

    def to_dict(self, unit: str) -> dict:
        out = {"key": self.param.key, "direction": self.param.direction, "serves": self.param.serves,
               "unit": unit, "base": None if np.isnan(self.base) else self.base, "status": self.status}
        if self.required is not None:
            out.update(required=self.required, bound=self.bound, growth=self.growth)
        out["binds"] = self.binds
        for k in ("method", "formula", "reason"):
            if getattr(self, k):
                out[k] = getattr(self, k)
        return out


def _crossing(f, lo: float, hi: float) -> float:
    """The root of a continuous monotone f with f(lo), f(hi) of opposite signs."""
    return brentq(f, lo, hi, xtol=1e-300, rtol=RTOL, maxiter=500)


def solve_rate(pb: Problem, key: str, t_star: float) -> Requirement:
    p = pb.params[key]
    x0 = pb.value(key)
    if np.isnan(x0):
        return Requirement(p, x0, "unknown in the base", reason="the base spec gives no value: the estimate has no "
                           "term for it; give the base a value to solve for it")
    floor = pb.time(key, np.inf)
    t0 = pb.time(key, x0)
    if pb.time(key, x0 * 2.0 ** -MAX_STEPS) <= t_star:
        return Requirement(p, x0, "met at any value", reason="the target is met however slow it is: the work it "
                           "serves never sets the step time")
    if floor > t_star:
        return Requirement(p, x0, "cannot meet alone", reason=f"even infinitely fast, the step takes {floor:.6g} s "
                           f"> {t_star:.6g} s: other resources floor it")
    u_hi = 1.0 / x0  # find u_lo <= u* < u_hi: T(u_lo) <= T*, T(u_hi) > T*
    if t0 <= t_star:
        u_lo = u_hi
        for _ in range(MAX_STEPS):
            u_hi *= 2.0
            if pb.time(key, 1.0 / u_hi) > t_star:
                break
    u_lo = u_hi
    for _ in range(MAX_STEPS):
        u_lo /= 2.0
        if pb.time(key, 1.0 / u_lo) <= t_star:
            break
    u_star = _crossing(lambda u: pb.time(key, 1.0 / u) - t_star, u_lo, u_hi)
    x = (1.0 / u_star) * (1.0 + SAFETY)
    a, b = _piece(lambda u: pb.time(key, 1.0 / u), u_star)
    formula = f"T = {a:.6g} s + {b:.6g} / x on this piece, so x >= {b:.6g} / (T* - {a:.6g} s)"
    return Requirement(p, x0, "solved", x, "at least", x / x0, t0 > t_star,
                       "root finder (Brent) on the step time, piecewise linear in 1/x", formula)


def solve_overhead(pb: Problem, key: str, t_star: float) -> Requirement:
    p = pb.params[key]
    x0 = pb.value(key)
    zero = pb.time(key, 0.0)
    if zero > t_star:
        return Requirement(p, x0, "cannot meet alone", reason=f"even at zero the step takes {zero:.6g} s > "
                           f"{t_star:.6g} s: other resources floor it")
    hi = x0 if not np.isnan(x0) and x0 > 0 else 1e-9
    for _ in range(MAX_STEPS):
        if pb.time(key, hi) > t_star:
            break
        hi *= 2.0
    else:
        return Requirement(p, x0, "met at any value", reason="the step meets the target however large it is")
    x_star = _crossing(lambda x: pb.time(key, x) - t_star, 0.0, hi)
    x = x_star * (1.0 - SAFETY)
    a, b = _piece(lambda v: pb.time(key, v), x_star)
    formula = f"T = {a:.6g} s + {b:.6g} x on this piece, so x <= (T* - {a:.6g} s) / {b:.6g}"
    t0 = pb.time(key, x0) if not np.isnan(x0) else zero
    return Requirement(p, x0, "solved", x, "at most", (x / x0) if not np.isnan(x0) else None, t0 > t_star,
                       "root finder (Brent) on the step time, piecewise linear in x", formula)


def _piece(t, v: float, rel: float = 1e-7) -> tuple[float, float]:
    """(a, b) of T = a + b v on the linear piece just below ``v`` (two evaluations)."""
    v1 = v * (1.0 - rel)
    t_v, t_1 = t(v), t(v1)
    b = (t_v - t_1) / (v - v1)
    return t_v - b * v, b


def solve_threshold(pb: Problem, key: str, t_star: float, thresholds: np.ndarray) -> Requirement:
    """The least of ``thresholds`` (and 0) whose step time meets T*."""
    p = pb.params[key]
    x0 = pb.value(key)
    cand = np.unique(np.concatenate([[0.0], thresholds[thresholds > 0]]))
    t = pb.times(key, cand)
    ok = np.nonzero(t <= t_star)[0]
    method = "closed form: the least threshold at which the step time meets the target"
    if ok.size == 0:
        return Requirement(p, x0, "cannot meet alone", reason="no capacity meets the target with the other "
                           "resources at the base", method=method)
    x = float(cand[ok[0]])
    if x == 0.0:
        return Requirement(p, x0, "met at any value", reason="the target does not need it", method=method)
    t0 = pb.time(key, x0) if not np.isnan(x0) else float(t[0])
    return Requirement(p, x0, "solved", x, "at least", (x / x0) if not np.isnan(x0) else None, t0 > t_star, method)


def capacity_thresholds(ww: WorkloadWork, pb: Problem, key: str) -> np.ndarray | None:
    """Where the step time can change with a capacity: the cache's and the state level's thresholds."""
    cache, state = cache_level(pb.base), state_level(pb.base)
    if cache is not None and key == f"memory.{cache}.capacity":
        w = ww.work
        extra = w[COL["dram.executed"]] - w[COL["dram.compulsory"]]
        per_kernel = w[COL["dram.executed"]] / np.maximum(w[COL["launches"]], 1.0)
        return 2.0 * per_kernel[extra > 0]
    if state is not None and key == f"memory.{state}.capacity" and ww.state_bytes > 0:
        return np.array([ww.state_bytes])
    return None


def class_keys(cls: str, ww: WorkloadWork, pb: Problem) -> list[str]:
    """The spec values a binding class names, most likely first."""
    w = ww.work
    if cls == "tensor":  # FLOPs by the rate that serves them: mma.sync calls at their own rate where known
        flops: dict[str, float] = {}
        for d in TENSOR_DTYPES:
            mma_key = f"compute.tensor_mma_sync.{d}"
            own = mma_key if not np.isnan(pb.base_values.get(mma_key, np.nan)) else f"compute.tensor.{d}"
            flops[f"compute.tensor.{d}"] = flops.get(f"compute.tensor.{d}", 0.0) + w[COL[f"tensor.{d}"]][~ww.mma_sync].sum()
            flops[own] = flops.get(own, 0.0) + w[COL[f"tensor.{d}"]][ww.mma_sync].sum()
        if ww.tf32.any():
            flops["compute.tensor.tf32"] += w[COL["tensor.fp32"]][ww.tf32].sum()
        return [k for k, f in sorted(flops.items(), key=lambda kv: -kv[1]) if f > 0]
    cache = cache_level(pb.base)
    one = {"vector": ["compute.vector.fp32"], "special_function": ["compute.special_function"],
           "dram": ["memory.dram.bandwidth"], "l2": [f"memory.{cache}.bandwidth"] if cache else [],
           "latency": ["memory.dram.latency", "launch.graph_node"]}
    if cls in one:
        return one[cls]
    used = list(ww.step_host_classes)
    if ww.launch == "eager":
        used += [k.split(".", 1)[1] for k in COL if k.startswith("host.") and w[COL[k]].sum() > 0]
    return [f"launch.host.{c}" for c in used]


def solve(pb: Problem, key: str, t_star: float) -> Requirement:
    p = pb.params[key]
    if p.direction == "rate":
        return solve_rate(pb, key, t_star)
    if p.direction == "overhead":
        return solve_overhead(pb, key, t_star)
    th = capacity_thresholds(pb.ww, pb, key)
    if th is None:
        return Requirement(p, pb.value(key), "no work", reason="a capacity that does not change the step time "
                           "(see needs)")
    return solve_threshold(pb, key, t_star, th)


def relevant_keys(ww: WorkloadWork, pb: Problem) -> list[str]:
    """Spec values that can change this workload's step time."""
    keys = []
    for cls in ("tensor", "vector", "special_function", "dram", "l2", "latency", "host/launch"):
        keys += [k for k in class_keys(cls, ww, pb) if k not in keys]
    for key in pb.params:
        if pb.params[key].direction == "capacity" and capacity_thresholds(ww, pb, key) is not None:
            keys.append(key)
    w = ww.work
    work_of = {"compute.vector.fp32": w[COL["vector"]].sum(), "compute.special_function": w[COL["special_function"]].sum()}
    return [k for k in keys if work_of.get(k, 1.0) > 0]


def scaled(pb: Problem, keys: list[str], factor: float) -> dict[str, float]:
    """The base values of ``keys`` made ``factor`` times better: rates x factor, overheads / factor."""
    return {k: pb.base_values[k] * factor if pb.params[k].direction == "rate" else pb.base_values[k] / factor
            for k in keys}


def design(pb0: Problem, t_star: float, max_rounds: int = 12) -> tuple[dict[str, float], str | None, list[str]]:
    """(values to set, the key that binds, the steps taken): one design that meets T*.

    The resources of the step's binding class are grown together by one factor s (rates x s, times / s),
    the least s that meets T* (Brent); where no s does (other resources floor the step), the class that
    binds with them grown without limit joins them, and so on. With one resource this is its own least
    value. The key reported as binding is the one whose 5% reduction slows the design most."""
    base = Problem(pb0.ww, pb0.base)
    if base.time() <= t_star:
        return {}, None, ["the base spec meets the targets"]
    grown: list[str] = []
    log: list[str] = []
    far = 2.0 ** 60
    for _ in range(max_rounds):
        st = Problem(pb0.ww, pb0.base, scaled(base, grown, far)).step()
        cls = str(st.binding_names()[0])
        new = [k for k in class_keys(cls, pb0.ww, base)
               if k in base.params and not np.isnan(base.base_values[k]) and k not in grown]
        if not new:
            log.append(f"binding class {cls}: no spec value left to grow; the targets cannot be met")
            return {}, None, log
        grown.append(new[0])

        def t_of(f: float) -> float:
            return Problem(pb0.ww, pb0.base, scaled(base, grown, f)).time() - t_star

        if t_of(far) > 0:
            log.append(f"{new[0]} (binding class {cls}) joins; not enough with {', '.join(grown)} grown without limit")
            continue
        f_star = brentq(t_of, 1.0, far, xtol=1e-300, rtol=RTOL, maxiter=500) * (1 + SAFETY)
        values = scaled(base, grown, f_star)
        log.append(f"{', '.join(grown)} grown {f_star:.6g}x together (binding class {cls} last) meets the target")
        t = Problem(pb0.ww, pb0.base, values).time()
        slow = {k: Problem(pb0.ww, pb0.base, {**values, **scaled(base, [k], f_star * 0.95)}).time() - t
                for k in grown}
        return values, max(slow, key=slow.get), log
    log.append(f"no design after {max_rounds} rounds")
    return {}, None, log


def needs(ww: WorkloadWork, base) -> dict:
    """Capacities the workload needs whatever its speed: tiles on chip, device memory, state on chip."""
    from .space import tile_level
    out = {}
    tiles = tile_level(base)
    if tiles is not None:
        out[f"memory.{tiles}.capacity"] = {"at_least": ww.working_set, "unit": "B",
                                           "why": "the largest on-chip working set (tiles) of one op call"}
    out["memory.dram.capacity"] = {"at_least": ww.memory_total, "unit": "B",
                                   "why": "weights, KV cache, state and activations in device memory"}
    level = state_level(base)
    if level is not None and ww.state_bytes > 0:
        out[f"memory.{level}.capacity"] = {"at_least": ww.state_bytes, "unit": "B",
                                           "why": "to keep the whole recurrent state of the batch on chip"}
    return out

