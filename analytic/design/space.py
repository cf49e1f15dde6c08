"""The spec values a design may vary, read off a base spec, and the design points as arrays.

A design point is the base spec with some values replaced (``--vary KEY=LO..HI UNIT``). Only values
that enter the achievable estimate (``achievable.py``, composed over a plan by ``step.py``) or a
capacity verdict may vary; each has a *direction*:

- ``rate`` (engine rates, bandwidths): the time of the work it serves is work / rate, so the step time
  is piecewise linear and non-increasing in 1 / rate;
- ``overhead`` (DRAM latency, per-kernel device time, host time per call): the step time is piecewise
  linear and non-decreasing in the value;
- ``capacity``: a threshold. The device-wide cache serves a kernel's extra traffic when that kernel's
  traffic fits in ``achievable.L2_RESIDENT_FRACTION`` of it; the persistent on-chip level
  (``placement.py``) keeps the recurrent state when it holds the whole state of the batch; the on-chip level of the roofline's tile check holds an
  op's working set; device memory holds weights, KV cache, state and activations.

Values are taken from the base spec as the achievable estimate takes them: the attained (``measured:``)
value where the spec has one, else the datasheet value (design assumptions on a hypothetical spec).
A value the base does not know is NaN: the estimate then has no term for it, as for the base itself.

``launch.kernel`` is the roofline bound's eager launch floor; the achievable estimate replaces it by
the per-kernel device time (``launch.graph_node``) and the host time per call of each backend class
(``launch.host.<class>``), which is what a design varies instead.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ...errors import UserError
from ...hwspecs import Spec, units
from ...hwspecs.schema import (
    CHAIN_CLASSES,
    COMPUTE_PATHS,
    DRAM_PATHS,
    HOST_CLASSES,
    value_kind,
)
from ..achievable import AchievableTable, host_fallback
from ..chain import SMEM_BANDWIDTH_KEY
from ..roofline import ON_CHIP_LEVELS, TENSOR_DTYPES, spec_ceiling
from ..workloads.placement import PERSISTENT_LEVEL
from . import energy

# The most design points one grid or sample set may hold (each point costs ~1 us per workload).
MAX_POINTS = 50_000_000
VARY_FORMAT = "KEY=LO..HI UNIT or KEY=VALUE UNIT (e.g. memory.dram.bandwidth=2..16TB/s)"
NOT_IN_MODEL = {
    "launch.kernel": ("launch.kernel is the roofline bound's eager launch floor; the achievable estimate that "
                      "explore and require evaluate uses launch.graph_node (device time per kernel) and "
                      "launch.host.<class> (host time per call): vary those"),
}


@dataclass(frozen=True)
class Param:
    """One spec value a design may vary: its dotted key, quantity kind, direction and what it serves."""

    key: str
    kind: str
    direction: str  # rate | overhead | capacity
    serves: str


def cache_level(spec: Spec) -> str | None:
    """The device-wide level between the SMs and DRAM that the achievable estimate serves extra traffic
    from (``AchievableTable.of``'s choice)."""
    return next((n for n, lvl in spec.memory.items() if lvl.scope == "device" and n != "dram"), None)


def tile_level(spec: Spec) -> str | None:
    """The on-chip level the roofline checks an op's working set against (``roofline.ON_CHIP_LEVELS``)."""
    return next((n for n in ON_CHIP_LEVELS if n in spec.memory), None)


def state_level(spec: Spec) -> str | None:
    """The persistent on-chip level that can keep the recurrent state (``placement.py``), if any."""
    level = spec.memory.get(PERSISTENT_LEVEL)
    return PERSISTENT_LEVEL if level is not None and level.scope == "device" else None


def model_params(base: Spec) -> dict[str, Param]:
    """Every value of a design on ``base`` that enters the achievable estimate or a capacity verdict."""
    out: dict[str, Param] = {}

    def add(key: str, direction: str, serves: str) -> None:
        if key in out:
            out[key] = Param(key, out[key].kind, direction, f"{out[key].serves}; {serves}")
        else:
            out[key] = Param(key, value_kind(key), direction, serves)

    for d in TENSOR_DTYPES:
        add(f"compute.tensor.{d}", "rate", f"tensor-core FLOPs at {d}")
    for d in TENSOR_DTYPES:
        add(f"compute.tensor_mma_sync.{d}", "rate", f"tensor-core FLOPs at {d} issued as mma.sync")
    add("compute.vector.fp32", "rate", "vector FLOPs (and fp32 matmuls off TF32)")
    add("compute.special_function", "rate", "transcendentals")
    add("memory.dram.bandwidth", "rate", "DRAM bytes")
    add("memory.dram.latency", "overhead", "one DRAM load-to-use latency per kernel")
    if "shared" in base.memory:
        add(SMEM_BANDWIDTH_KEY, "rate", "a tile loop's operands through shared memory (FlashAttention-2's step)")
    cache = cache_level(base)
    if cache is not None:
        add(f"memory.{cache}.bandwidth", "rate", "extra traffic served by the device-wide cache")
        add(f"memory.{cache}.latency", "overhead", "dependent round trips to the device-wide cache (cuDNN's "
                                                   "backward step, FlashAttention-2's split-KV combine)")
        add(f"memory.{cache}.capacity", "capacity", "a kernel's extra traffic is served by the cache when it "
                                                    f"fits in {0.5:g} of it")
    state = state_level(base)
    if state is not None:
        add(f"memory.{state}.capacity", "capacity", "decode keeps the recurrent state on chip when it fits")
        add(f"memory.{state}.bandwidth", "rate", "recurrent-state traffic kept on chip")
    tiles = tile_level(base)
    if tiles is not None:
        add(f"memory.{tiles}.capacity", "capacity", "every op's on-chip working set (tiles) must fit")
    add("memory.dram.capacity", "capacity", "weights, KV cache, state and activations must fit")
    add("launch.graph_node", "overhead", "device time per kernel")
    for c in HOST_CLASSES:
        add(f"launch.host.{c}", "overhead", f"host time per {c} call")
    for key, (direction, serves) in energy.params(base).items():
        add(key, direction, serves)
    return out


def base_values(base: Spec, params: Mapping[str, Param]) -> dict[str, float]:
    """Each parameter's value on the base spec (measured where present), NaN where unknown."""
    out = {}
    for key in params:
        c = spec_ceiling(base, key, "measured")
        out[key] = np.nan if c.value is None else float(c.value)
    return out


def check_key(key: str, base: Spec, params: Mapping[str, Param], option: str = "--vary") -> Param:
    """The parameter at ``key``; an unknown or unused key is a UserError naming close matches."""
    if key in params:
        return params[key]
    if key in NOT_IN_MODEL:
        raise UserError(f"{option} {key}: {NOT_IN_MODEL[key]}")
    known = sorted(params)
    try:
        value_kind(key)
    except ValueError:
        close = difflib.get_close_matches(key, known + [k for k, _ in base.data()], n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise UserError(f"{option} {key}: not a spec value path; {hint}keys a design on {base.id} may vary: "
                        f"{', '.join(known)}") from None
    parts = key.split(".")
    if parts[0] == "memory" and parts[1] not in base.memory:
        raise UserError(f"{option} {key}: {base.id} has no memory.{parts[1]} level (its levels: "
                        f"{', '.join(base.memory)}); a design varies the values of the base's levels: "
                        f"{', '.join(k for k in known if k.startswith('memory.'))}")
    if key.startswith(("energy.", "power.")):
        raise UserError(f"{option} {key}: not an energy value the step's energy charges on {base.id} (the energy "
                        f"model charges {', '.join(sorted(energy.params(base)))}; power.tdp is read from the base)")
    raise UserError(f"{option} {key}: does not enter the achievable estimate or a capacity verdict on {base.id}; "
                    f"keys that do: {', '.join(known)}")


_QUANTITY = re.compile(r"^\s*(?P<num>[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?)\s*(?P<unit>\S.*?)?\s*$")


def parse_quantity(text: str, param: Param, option: str) -> tuple[float, str | None]:
    """(value in SI units, unit text) of '16TB/s', '16 TB/s' or a bare number (unit None, not parsed)."""
    m = _QUANTITY.match(text)
    if not m:
        raise UserError(f"{option} {param.key}: cannot read {text!r} as a number with a unit; expected "
                        f"{VARY_FORMAT}")
    unit = m.group("unit")
    if unit is None:
        return float(m.group("num")), None
    try:
        return units.parse(f"{m.group('num')} {unit}", param.kind), unit
    except units.UnitError as exc:
        raise UserError(f"{option} {param.key} takes a {param.kind.replace('_', ' ')}: {exc}") from None


@dataclass(frozen=True)
class Axis:
    """One varied value: a range [lo, hi] (log-spaced or log-uniform) or one fixed value (lo == hi)."""

    param: Param
    lo: float
    hi: float
    text: str


def split_items(texts: Sequence[str]) -> list[str]:
    """'a=1..2TB/s,b=3 us' -> ['a=1..2TB/s', 'b=3 us']: a comma starts a new item before 'key='."""
    out = []
    for t in texts:
        out += [p.strip() for p in re.split(r",(?=\s*[A-Za-z_][\w.]*\s*=)", t) if p.strip()]
    return out


def parse_vary(texts: Sequence[str], base: Spec) -> list[Axis]:
    params = model_params(base)
    axes: list[Axis] = []
    for item in split_items(texts):
        if "=" not in item:
            raise UserError(f"--vary {item!r}: expected {VARY_FORMAT}")
        key, value = (s.strip() for s in item.split("=", 1))
        p = check_key(key, base, params)
        if any(a.param.key == key for a in axes):
            raise UserError(f"--vary {key}: given twice")
        parts = [s.strip() for s in value.split("..")]
        if len(parts) > 2 or not all(parts):
            raise UserError(f"--vary {key}={value}: expected LO..HI UNIT or one VALUE UNIT ({VARY_FORMAT})")
        hi, unit = parse_quantity(parts[-1], p, "--vary")
        if unit is None:
            raise UserError(f"--vary {key}={value}: no unit; {key} takes a {p.kind.replace('_', ' ')} "
                            f"({VARY_FORMAT})")
        lo = hi
        if len(parts) == 2:
            lo, lo_unit = parse_quantity(parts[0], p, "--vary")
            if lo_unit is None:  # '2..16TB/s': the unit written once, after the upper end
                lo = units.parse(f"{parts[0]} {unit}", p.kind)
        if not (lo > 0 and hi > 0 and math.isfinite(lo) and math.isfinite(hi)):
            raise UserError(f"--vary {key}={value}: values must be greater than zero")
        if lo > hi:
            raise UserError(f"--vary {key}={value}: the lower end exceeds the upper end")
        axes.append(Axis(p, lo, hi, value))
    if not axes:
        raise UserError(f"--vary: give at least one value to vary ({VARY_FORMAT})")
    return axes


def grid(axes: Sequence[Axis], n: int) -> dict[str, np.ndarray]:
    """Every combination of ``n`` log-spaced values per range (a fixed value counts once)."""
    if n < 1:
        raise UserError(f"--grid must be at least 1, got {n}")
    levels = [np.geomspace(a.lo, a.hi, n) if a.hi > a.lo else np.array([a.lo]) for a in axes]
    total = math.prod(len(v) for v in levels)
    _check_size(total, f"--grid {n} over {len(axes)} values")
    mesh = np.meshgrid(*levels, indexing="ij")
    return {a.param.key: m.reshape(-1) for a, m in zip(axes, mesh)}


def samples(axes: Sequence[Axis], n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` points, each range sampled log-uniformly (seeded: the same seed gives the same points)."""
    if n < 1:
        raise UserError(f"--samples must be at least 1, got {n}")
    _check_size(n, f"--samples {n}")
    rng = np.random.default_rng(seed)
    out = {}
    for a in axes:
        if a.hi > a.lo:
            out[a.param.key] = np.exp(rng.uniform(math.log(a.lo), math.log(a.hi), n))
        else:
            out[a.param.key] = np.full(n, a.lo)
    return out


def _check_size(total: int, what: str) -> None:
    if total > MAX_POINTS:
        raise UserError(f"{what} makes {total:,} design points; at most {MAX_POINTS:,} (use --samples N)")


@dataclass(frozen=True)
class Designs:
    """Design points on a base spec: every parameter's value, an array [n] where varied, else a float."""

    base: Spec
    params: dict[str, Param]
    values: dict[str, np.ndarray | float]
    varied: tuple[str, ...]
    n: int

    @classmethod
    def of(cls, base: Spec, points: Mapping[str, np.ndarray] | None = None) -> Designs:
        params = model_params(base)
        values: dict[str, np.ndarray | float] = dict(base_values(base, params))
        points = dict(points or {})
        sizes = {len(np.atleast_1d(v)) for v in points.values()}
        if len(sizes) > 1:
            raise UserError(f"design points: every varied value needs the same number of points, got {sorted(sizes)}")
        for key, v in points.items():
            check_key(key, base, params)
            values[key] = np.asarray(v, dtype=float).reshape(-1)
        return cls(base, params, values, tuple(points), sizes.pop() if sizes else 1)

    def slice(self, start: int, stop: int) -> Designs:
        vals = {k: v[start:stop] if isinstance(v, np.ndarray) else v for k, v in self.values.items()}
        return Designs(self.base, self.params, vals, self.varied, stop - start)

    def take(self, mask: np.ndarray) -> Designs:
        vals = {k: v[mask] if isinstance(v, np.ndarray) else v for k, v in self.values.items()}
        return Designs(self.base, self.params, vals, self.varied, int(np.count_nonzero(mask)))

    def array(self, key: str) -> np.ndarray:
        return np.broadcast_to(np.asarray(self.values[key], dtype=float), (self.n,))

    def get(self, key: str | None) -> np.ndarray:
        """The values at ``key`` [n]; NaN for no key (a level the base does not have)."""
        return np.full(self.n, np.nan) if key is None else self.array(key)

    def table(self) -> AchievableTable:
        """The achievable estimate's parameters of every design point (``AchievableTable``)."""
        cache = cache_level(self.base)
        col = self.array
        return AchievableTable(
            spec_ids=("",) * self.n,
            rate_tensor=np.stack([col(f"compute.tensor.{d}") for d in TENSOR_DTYPES], axis=1),
            rate_mma_sync=np.stack([col(f"compute.tensor_mma_sync.{d}") for d in TENSOR_DTYPES], axis=1),
            rate_vector=col("compute.vector.fp32"), rate_sfu=col("compute.special_function"),
            dram_bw=col("memory.dram.bandwidth"), dram_latency=col("memory.dram.latency"),
            l2_bw=self.get(cache and f"memory.{cache}.bandwidth"),
            l2_capacity=self.get(cache and f"memory.{cache}.capacity"),
            smem_bw=self.get(SMEM_BANDWIDTH_KEY if SMEM_BANDWIDTH_KEY in self.values else None),
            l2_latency=self.get(cache and f"memory.{cache}.latency"),
            node_s=col("launch.graph_node"),
            # a GEMM kernel's fixed time is a property of the GEMM library on its base, as chain steps are
            gemm_s=np.full(self.n, _base_value(self.base, "launch.gemm_fixed")),
            lib_s=np.full(self.n, _base_value(self.base, "launch.library_fixed")),
            host_s=host_fallback(np.stack([col(f"launch.host.{c}") for c in HOST_CLASSES], axis=1)),
            sm_count=(col("compute.sm_count") if "compute.sm_count" in self.values
                      else np.full(self.n, _base_value(self.base, "compute.sm_count"))),
            # sequential-chain steps are attained latencies of kernel classes, not design parameters: a
            # design point takes its base spec's (NaN where the base knows none)
            chain_step=np.stack([np.full(self.n, _base_value(self.base, f"compute.chain_step.{c}"))
                                 for c in CHAIN_CLASSES], axis=1),
            missing=({},) * self.n,
            # software kernel paths (ATen's kernels, PyTorch's depthwise convolution) are software on the
            # base's memory and engines: the base's attained fraction of its copy bandwidth (vector rate),
            # applied to the design point's
            path_bw=np.stack([_base_value(self.base, f"memory.dram.path.{p}") / _base_value(self.base, "memory.dram.bandwidth")
                              * col("memory.dram.bandwidth") for p in DRAM_PATHS], axis=1).reshape(self.n, -1),
            path_rate=np.stack([_base_value(self.base, f"compute.path.{p}") / _base_value(self.base, "compute.vector.fp32")
                                * col("compute.vector.fp32") for p in COMPUTE_PATHS], axis=1).reshape(self.n, -1))


def _base_value(spec: Spec, key: str) -> float:
    """``key``'s value on ``spec`` (measured where known), NaN where unknown or not listed."""
    from ..roofline import spec_ceiling

    v = spec_ceiling(spec, key, "measured").value
    return np.nan if v is None else float(v)


def parse_cost(texts: Sequence[str], base: Spec) -> dict[str, float]:
    """``--cost KEY=WEIGHT/UNIT`` items -> {key: weight per SI unit}: the cost proxy of a design is
    sum over keys of weight x value (e.g. memory.dram.bandwidth=1/TB/s: one unit of cost per TB/s)."""
    params = model_params(base)
    out: dict[str, float] = {}
    for item in split_items(texts):
        key, _, value = (s.strip() for s in item.partition("="))
        if not value or "/" not in value:
            raise UserError(f"--cost {item!r}: expected KEY=WEIGHT/UNIT (e.g. memory.dram.bandwidth=1/TB/s: "
                            "cost units per TB/s)")
        p = check_key(key, base, params, "--cost")
        weight, unit = (s.strip() for s in value.split("/", 1))
        try:
            w = float(weight)
        except ValueError:
            raise UserError(f"--cost {key}: the weight {weight!r} is not a number (KEY=WEIGHT/UNIT)") from None
        per = parse_quantity(f"1 {unit}", p, "--cost")[0]
        if not (math.isfinite(w) and w >= 0):
            raise UserError(f"--cost {key}: the weight must be a non-negative number, got {weight!r}")
        out[key] = w / per
    return out
