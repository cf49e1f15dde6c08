"""Roofline projection: an op's Cost on a Spec gives one time bound per resource, their max and sum.

Every number here is an **analytic bound**: the least time the work could take if the resource ran at
its ceiling. A ceiling is either the datasheet value or the attained (``measured:``) value of the spec,
chosen by ``prefer`` (default: measured where the spec has one) and labelled with its origin.

Resources and the work each one serves (``Cost`` fields, conventions.py):

- ``tensor``: tensor-core FLOPs. The tensor cores of one device serve every dtype, so the bound is
  sum over dtypes of FLOPs[dtype] / compute.tensor.<dtype>. fp32 matmul FLOPs have no tensor-core
  path (PyTorch's default keeps TF32 off): they are charged to the vector engine below.
- ``vector``: vector FLOPs plus fp32 matmul FLOPs, at compute.vector.fp32.
- ``special_function``: transcendentals at compute.special_function.
- ``dram``: device-memory bytes at memory.dram.bandwidth. Two byte counts exist: compulsory (each
  tensor once) and as-executed by the named implementation (compulsory + extra). Both bounds are
  reported; ``bytes_basis`` (default ``executed``) picks the one that enters max and sum.
- each device-wide level between the SMs and DRAM (``l2``, ``llc``, a device-scope ``sram``): every
  device-memory byte crosses it, so the executed DRAM bytes are a lower bound on its traffic, and
  bytes / its bandwidth a bound. Per-SM levels (registers, shared, l1, per-SM sram) carry traffic
  the Cost does not count; they appear as "not bounded" with that reason.
- ``launch``: kernel launches x launch.kernel (``eager``) or x launch.graph_node (``graph``: CUDA
  graph replay). Launch latency overlaps with the work of earlier kernels, so it is a floor that
  enters the max like any other resource.

A resource whose ceiling the spec gives as ``unknown`` (or does not list) yields no bound: it is
listed as ``not bounded: <reason>``, never taken as infinitely fast or as zero time. The max over the
known bounds is still a valid lower bound on time. If work exists but no resource it uses has a known
ceiling, the bound is ``None`` (NaN in arrays), never 0.

Capacity: the op's on-chip working set (bytes one SM holds at once) against memory.shared (per SM),
else memory.sram, else memory.l1. Device-memory capacity is checked at model level
(``workloads/evaluate.py``) against memory.dram.capacity.

The vectorized form (``SpecTable``, ``project_work``) does the same over numpy arrays of work and over
many specs at once; ``project`` is the one-op, one-spec form with labels, built on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Literal

import numpy as np

from ..errors import UserError
from ..hwspecs import Spec, ceiling
from ..hwspecs.ceilings import Ceiling
from ..hwspecs.schema import HOST_CLASSES
from .cost import PATH_KEYS, Cost

LABEL = "analytic bound"
Prefer = Literal["measured", "datasheet"]
LaunchRegime = Literal["eager", "graph"]
BytesBasis = Literal["executed", "compulsory"]

# Tensor-core dtypes with their own ceiling; fp32 matmul goes to the vector engine.
TENSOR_DTYPES = ("fp64", "tf32", "bf16", "fp16", "fp8", "int8")
# Work columns of the vectorized form, in order. 'launches' and 'working_set' are not divided by a rate;
# 'tensor.fp32' repeats the fp32 matmul FLOPs already in 'vector' (the bound charges them to the CUDA
# cores) so that the achievable model can move them to TF32 where the implementation does; 'host.<class>'
# counts host-issued calls per backend class (achievable model only).
WORK_COLUMNS = tuple(f"tensor.{d}" for d in TENSOR_DTYPES) + (
    "vector", "special_function", "dram.compulsory", "dram.executed", "launches", "working_set",
    "tensor.fp32") + tuple(f"host.{c}" for c in HOST_CLASSES) + tuple(f"path.{k}" for k in PATH_KEYS)
COL = {name: i for i, name in enumerate(WORK_COLUMNS)}
# Time resources, in the order ties are broken for the bottleneck label.
RESOURCES = ("tensor", "vector", "special_function", "dram", "cache", "launch")
RESOURCE_UNITS = {"tensor": "FLOP", "vector": "FLOP", "special_function": "evaluations", "dram": "B",
                  "cache": "B", "launch": "launches"}
ON_CHIP_LEVELS = ("shared", "sram", "l1")

PREFER_CHOICES = ("measured", "datasheet")
LAUNCH_CHOICES = ("eager", "graph")
BYTES_CHOICES = ("executed", "compulsory")


def check_choice(name: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise UserError(f"unknown {name} {value!r}; valid: {', '.join(choices)}")


def spec_ceiling(spec: Spec, key: str, prefer: Prefer) -> Ceiling:
    """A ceiling, or an 'unknown' one naming why, also for keys the spec does not list at all."""
    try:
        return ceiling(spec, key, prefer)
    except KeyError:
        return Ceiling(key, None, "unknown", f"the spec lists no {key}")


def describe(c: Ceiling) -> str:
    return f"{c.origin}: {c.provenance}" if c.origin != "unknown" else f"unknown: {c.provenance}"


@dataclass(frozen=True)
class SpecCeilings:
    """The ceilings one spec offers the projection, each with origin and provenance."""

    spec: Spec
    prefer: str
    tensor: dict[str, Ceiling]
    vector: Ceiling
    special_function: Ceiling
    dram: Ceiling
    caches: tuple[Ceiling, ...]  # device-wide levels every DRAM byte crosses
    per_sm_levels: tuple[str, ...]  # levels whose traffic the Cost does not count
    launch: dict[str, Ceiling]
    on_chip: Ceiling | None  # capacity the working set must fit in
    dram_capacity: Ceiling

    @classmethod
    def of(cls, spec: Spec, prefer: Prefer = "measured") -> SpecCeilings:
        check_choice("ceiling preference", prefer, PREFER_CHOICES)
        caches, per_sm = [], []
        for name, level in spec.memory.items():
            if name == "dram":
                continue
            if level.scope == "device":
                caches.append(spec_ceiling(spec, f"memory.{name}.bandwidth", prefer))
            else:
                per_sm.append(name)
        on_chip = None
        for name in ON_CHIP_LEVELS:
            if name in spec.memory:
                on_chip = spec_ceiling(spec, f"memory.{name}.capacity", prefer)
                break
        return cls(
            spec=spec, prefer=prefer,
            tensor={d: spec_ceiling(spec, f"compute.tensor.{d}", prefer) for d in TENSOR_DTYPES},
            vector=spec_ceiling(spec, "compute.vector.fp32", prefer),
            special_function=spec_ceiling(spec, "compute.special_function", prefer),
            dram=spec_ceiling(spec, "memory.dram.bandwidth", prefer),
            caches=tuple(caches), per_sm_levels=tuple(per_sm),
            launch={"eager": spec_ceiling(spec, "launch.kernel", prefer),
                    "graph": spec_ceiling(spec, "launch.graph_node", prefer)},
            on_chip=on_chip,
            dram_capacity=spec_ceiling(spec, "memory.dram.capacity", prefer),
        )

    def on_chip_capacity(self) -> float | None:
        """Bytes one SM can hold (a device-scope SRAM counts whole)."""
        if self.on_chip is None:
            return None
        return self.on_chip.value

    def slowest_cache(self) -> Ceiling | None:
        known = [c for c in self.caches if c.value is not None]
        return min(known, key=lambda c: c.value) if known else None


def _frozen_array(a) -> np.ndarray:
    out = np.array(a, copy=True)
    out.setflags(write=False)
    return out


def _inv(c: Ceiling | None) -> float:
    return 0.0 if c is None or c.value is None else 1.0 / c.value


@dataclass(frozen=True)
class SpecTable:
    """Ceilings of several specs as arrays, for projecting work arrays on all of them at once.

    ``inv_*`` hold 1/ceiling (s per unit of work), 0 where unknown; ``known_*`` say which are known.
    Arrays have shape [n_specs].

    A table is an immutable snapshot: its arrays are private read-only copies and its mappings
    read-only, so caches may key on the table itself (``workloads/point.py``) without risk of stale
    constants; a changed spec needs a new table (``SpecTable.of``, or ``dataclasses.replace``).
    """

    specs: tuple[SpecCeilings, ...]
    inv_tensor: np.ndarray  # [n_specs, len(TENSOR_DTYPES)]
    known_tensor: np.ndarray
    inv_vector: np.ndarray
    inv_sfu: np.ndarray
    inv_dram: np.ndarray
    inv_cache: np.ndarray  # slowest known device-wide cache level
    launch_s: dict[str, np.ndarray]
    known: dict[str, np.ndarray]  # per resource name (and 'tensor.<dtype>')
    on_chip_bytes: np.ndarray  # NaN where unknown
    dram_bytes: np.ndarray  # NaN where unknown

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                object.__setattr__(self, f.name, _frozen_array(v))
            elif isinstance(v, Mapping):
                object.__setattr__(self, f.name, MappingProxyType({k: _frozen_array(a) for k, a in v.items()}))

    def take(self, idx: Sequence[int]) -> SpecTable:
        """The table of the specs at ``idx``: this table's rows (``SpecTable.of`` of those specs with the
        same preference gives the same values, each computed per spec), without looking the ceilings up
        again."""
        idx = list(idx)
        parts: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                parts[f.name] = v[idx]
            elif isinstance(v, Mapping):
                parts[f.name] = {k: a[idx] for k, a in v.items()}
            else:
                parts[f.name] = tuple(v[i] for i in idx)
        return SpecTable(**parts)

    @classmethod
    def of(cls, specs: Sequence[Spec], prefer: Prefer = "measured") -> SpecTable:
        sc = tuple(SpecCeilings.of(s, prefer) for s in specs)
        inv_tensor = np.array([[_inv(s.tensor[d]) for d in TENSOR_DTYPES] for s in sc]).reshape(len(sc), -1)
        known = {f"tensor.{d}": np.array([s.tensor[d].value is not None for s in sc]) for d in TENSOR_DTYPES}
        known.update(
            vector=np.array([s.vector.value is not None for s in sc]),
            special_function=np.array([s.special_function.value is not None for s in sc]),
            dram=np.array([s.dram.value is not None for s in sc]),
            cache=np.array([s.slowest_cache() is not None for s in sc]),
        )
        launch = {}
        for regime in LAUNCH_CHOICES:
            launch[regime] = np.array([s.launch[regime].value or 0.0 for s in sc])
            known[f"launch.{regime}"] = np.array([s.launch[regime].value is not None for s in sc])

        def val(c):
            return np.nan if c is None or c.value is None else c.value

        return cls(
            specs=sc, inv_tensor=inv_tensor, known_tensor=inv_tensor > 0,
            inv_vector=np.array([_inv(s.vector) for s in sc]),
            inv_sfu=np.array([_inv(s.special_function) for s in sc]),
            inv_dram=np.array([_inv(s.dram) for s in sc]),
            inv_cache=np.array([_inv(s.slowest_cache()) for s in sc]),
            launch_s=launch, known=known,
            on_chip_bytes=np.array([val(s.on_chip) for s in sc]),
            dram_bytes=np.array([val(s.dram_capacity) for s in sc]),
        )


def work_array(cost: Cost, dtype_of_fp32: str = "vector") -> np.ndarray:
    """A Cost as a [len(WORK_COLUMNS), ...] array of work (numbers or broadcast numpy arrays)."""
    cols: list[Any] = [0.0] * len(WORK_COLUMNS)
    for dt, v in cost.tensor.items():
        if dt == "fp32":
            cols[COL["vector"]] = cols[COL["vector"]] + v
            cols[COL["tensor.fp32"]] = cols[COL["tensor.fp32"]] + v
        elif dt in TENSOR_DTYPES:
            cols[COL[f"tensor.{dt}"]] = cols[COL[f"tensor.{dt}"]] + v
        else:
            raise UserError(f"tensor FLOPs of dtype {dt!r} have no ceiling key; known: fp32, {', '.join(TENSOR_DTYPES)}")
    cols[COL["vector"]] = cols[COL["vector"]] + cost.vector
    cols[COL["special_function"]] = cost.transcendental
    cols[COL["dram.compulsory"]] = cost.bytes
    cols[COL["dram.executed"]] = cost.executed_bytes
    cols[COL["launches"]] = cost.launches
    cols[COL["working_set"]] = cost.working_set
    for c, v in cost.host.items():
        cols[COL[f"host.{c}"]] = v
    for k, v in cost.path.items():
        cols[COL[f"path.{k}"]] = v
    arrays = [np.asarray(c, dtype=float) for c in cols]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    return np.stack([np.broadcast_to(a, shape) for a in arrays])


@dataclass(frozen=True)
class Projected:
    """Per-resource times of work on specs. Arrays have shape [n_specs, *work_shape]."""

    times: dict[str, np.ndarray]  # resource -> seconds (0 where unknown ceiling)
    dram_compulsory: np.ndarray
    dram_executed: np.ndarray
    bound: np.ndarray  # max over resources; NaN where work has no known ceiling
    sum: np.ndarray
    bottleneck: np.ndarray  # index into RESOURCES, -1 where no bound
    unbounded: dict[str, np.ndarray]  # resource -> bool: work present, ceiling unknown


def project_work(work: np.ndarray, table: SpecTable, launch: LaunchRegime = "eager",
                 bytes_basis: BytesBasis = "executed") -> Projected:
    """Project ``work`` [len(WORK_COLUMNS), *shape] on every spec of ``table``."""
    check_choice("launch regime", launch, LAUNCH_CHOICES)
    check_choice("bytes basis", bytes_basis, BYTES_CHOICES)
    extra = (1,) * (work.ndim - 1)

    def per_spec(a: np.ndarray) -> np.ndarray:
        return a.reshape((-1,) + extra)

    nt = len(TENSOR_DTYPES)
    tensor_work = work[:nt]  # [nt, *shape]
    tensor = np.tensordot(table.inv_tensor, tensor_work, axes=([1], [0]))  # [S, *shape]
    dram_c = work[COL["dram.compulsory"]] * per_spec(table.inv_dram)
    dram_e = work[COL["dram.executed"]] * per_spec(table.inv_dram)
    times = {
        "tensor": tensor,
        "vector": work[COL["vector"]] * per_spec(table.inv_vector),
        "special_function": work[COL["special_function"]] * per_spec(table.inv_sfu),
        "dram": dram_e if bytes_basis == "executed" else dram_c,
        "cache": work[COL["dram.executed"]] * per_spec(table.inv_cache),
        "launch": work[COL["launches"]] * per_spec(table.launch_s[launch]),
    }
    stacked = np.stack([np.broadcast_to(times[r], tensor.shape) for r in RESOURCES])  # [R, S, *shape]
    bound = stacked.max(axis=0)
    total = stacked.sum(axis=0)
    bottleneck = stacked.argmax(axis=0)

    has_work = {
        "tensor": tensor_work.sum(axis=0) > 0,
        "vector": work[COL["vector"]] > 0,
        "special_function": work[COL["special_function"]] > 0,
        "dram": work[COL["dram.executed"]] > 0,
        "cache": work[COL["dram.executed"]] > 0,
        "launch": work[COL["launches"]] > 0,
    }
    unbounded = {}
    for r in RESOURCES:
        if r == "tensor":
            # unbounded where some dtype with FLOPs has no known rate
            miss = np.zeros(tensor.shape, dtype=bool)
            for i in range(nt):
                miss |= (tensor_work[i] > 0) & per_spec(~table.known_tensor[:, i])
            unbounded[r] = miss
        else:
            key = f"launch.{launch}" if r == "launch" else r
            unbounded[r] = has_work[r] & per_spec(~table.known[key])
    some_work = np.zeros(tensor.shape, dtype=bool)
    for r in RESOURCES:
        some_work |= has_work[r]
    any_bound = (stacked > 0).any(axis=0)
    bound = np.where(some_work & ~any_bound, np.nan, bound)
    bottleneck = np.where(any_bound, bottleneck, -1)
    return Projected(times, dram_c, dram_e, bound, total, bottleneck, unbounded)


# One op on one spec, with labels ---------------------------------------------------------------

@dataclass(frozen=True)
class Bound:
    resource: str
    work: float
    unit: str
    time_s: float | None  # None: not bounded
    ceiling: str  # "<key> = value (origin: provenance)" or "not bounded: <reason>"


@dataclass(frozen=True)
class Projection:
    spec_id: str
    bounds: tuple[Bound, ...]
    not_bounded: tuple[str, ...]
    time_s: float | None  # max bound; None when no resource with work has a known ceiling
    sum_s: float | None
    bottleneck: str | None
    bytes_basis: str
    dram_compulsory_s: float | None
    dram_executed_s: float | None
    launch_regime: str
    working_set_bytes: float
    on_chip_capacity_bytes: float | None
    fits_on_chip: bool | None  # None: capacity unknown
    on_chip_note: str
    label: str = LABEL
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "label": self.label, "spec": self.spec_id, "time_s": self.time_s, "sum_s": self.sum_s,
            "bottleneck": self.bottleneck, "bytes_basis": self.bytes_basis,
            "dram_compulsory_s": self.dram_compulsory_s, "dram_executed_s": self.dram_executed_s,
            "launch_regime": self.launch_regime,
            "bounds": [b.__dict__ for b in self.bounds], "not_bounded": list(self.not_bounded),
            "working_set_bytes": self.working_set_bytes, "on_chip_capacity_bytes": self.on_chip_capacity_bytes,
            "fits_on_chip": self.fits_on_chip, "on_chip_note": self.on_chip_note,
        }


def _fmt_ceiling(c: Ceiling, unit: str) -> str:
    return f"{c.key} = {c.value:.4g} {unit} ({describe(c)})"


def resource_ceilings(sc: SpecCeilings, resource: str, launch: str) -> list[Ceiling]:
    if resource == "tensor":
        return list(sc.tensor.values())
    if resource == "vector":
        return [sc.vector]
    if resource == "special_function":
        return [sc.special_function]
    if resource == "dram":
        return [sc.dram]
    if resource == "cache":
        return list(sc.caches)
    return [sc.launch[launch]]


def not_bounded_reasons(sc: SpecCeilings, resource: str, launch: str, work_by_dtype: dict | None = None) -> str:
    """Why a resource with work gives no bound on this spec."""
    if resource == "tensor":
        miss = [sc.tensor[d] for d, w in (work_by_dtype or {}).items() if w > 0 and sc.tensor[d].value is None]
        return "; ".join(f"tensor ({c.key}: {c.provenance})" for c in miss)
    if resource == "cache":
        if not sc.caches:
            return "cache (the spec lists no device-wide level between the SMs and DRAM)"
        return "cache (" + "; ".join(f"{c.key}: {c.provenance}" for c in sc.caches) + ")"
    c = resource_ceilings(sc, resource, launch)[0]
    return f"{resource} ({c.key}: {c.provenance})"


def project(cost: Cost, spec: Spec, prefer: Prefer = "measured", launch: LaunchRegime = "eager",
            bytes_basis: BytesBasis = "executed") -> Projection:
    """Project one numeric Cost on one spec, with every bound labelled and every gap named."""
    table = SpecTable.of([spec], prefer)
    sc = table.specs[0]
    work = work_array(cost)
    if work.ndim != 1:
        raise UserError("project() takes a Cost of plain numbers; use project_work for arrays")
    p = project_work(work, table, launch, bytes_basis)
    by_dtype = {d: float(work[COL[f"tensor.{d}"]]) for d in TENSOR_DTYPES}
    works = {"tensor": sum(by_dtype.values()), "vector": float(work[COL["vector"]]),
             "special_function": float(work[COL["special_function"]]),
             "dram": float(work[COL[f"dram.{bytes_basis}"]]), "cache": float(work[COL["dram.executed"]]),
             "launch": float(work[COL["launches"]])}
    bounds, missing = [], []
    for r in RESOURCES:
        t = float(p.times[r][0])
        if works[r] <= 0:
            continue
        if bool(p.unbounded[r][0]) and t == 0:
            reason = not_bounded_reasons(sc, r, launch, by_dtype)
            missing.append(reason)
            bounds.append(Bound(r, works[r], RESOURCE_UNITS[r], None, f"not bounded: {reason}"))
            continue
        if r == "tensor":
            used = [sc.tensor[d] for d, w in by_dtype.items() if w > 0 and sc.tensor[d].value is not None]
            text = "; ".join(_fmt_ceiling(c, "FLOP/s") for c in used)
            if bool(p.unbounded[r][0]):
                reason = not_bounded_reasons(sc, r, launch, by_dtype)
                missing.append(reason)
                text += f"; partly not bounded: {reason}"
        elif r == "cache":
            c = sc.slowest_cache()
            text = _fmt_ceiling(c, "B/s") + " (slowest known device-wide level; traffic >= DRAM bytes)"
        elif r == "launch":
            text = f"{_fmt_ceiling(sc.launch[launch], 's')} per {'graph node' if launch == 'graph' else 'kernel'}"
        elif r == "vector":
            text = _fmt_ceiling(sc.vector, "FLOP/s") + (
                " (includes fp32 matmul FLOPs: no tensor-core path)" if cost.tensor.get("fp32") else "")
        else:
            c = resource_ceilings(sc, r, launch)[0]
            text = _fmt_ceiling(c, "FLOP/s" if r == "special_function" else "B/s")
        bounds.append(Bound(r, works[r], RESOURCE_UNITS[r], t, text))
    if works["dram"] > 0 and sc.per_sm_levels:
        missing.append(f"per-SM levels {', '.join(sc.per_sm_levels)} (traffic at these levels is not counted by the cost model)")
    bound = float(p.bound[0])
    known_times = [b.time_s for b in bounds if b.time_s is not None]
    bottleneck = None
    if known_times and not np.isnan(bound):
        bottleneck = max((b for b in bounds if b.time_s is not None), key=lambda b: b.time_s).resource
    ws = float(work[COL["working_set"]])
    cap = sc.on_chip_capacity()
    if sc.on_chip is None:
        fits, note = None, "not checked: the spec lists no shared memory, SRAM or L1 level"
    elif cap is None:
        fits, note = None, f"not checked: {sc.on_chip.key} unknown ({sc.on_chip.provenance})"
    else:
        fits = ws <= cap
        note = f"working set {ws:.4g} B vs {sc.on_chip.key} = {cap:.4g} B ({describe(sc.on_chip)})"
        if not fits:
            note = "does not fit on chip: " + note
    dc = float(p.dram_compulsory[0]) if sc.dram.value is not None else None
    de = float(p.dram_executed[0]) if sc.dram.value is not None else None
    return Projection(
        spec_id=spec.id, bounds=tuple(bounds), not_bounded=tuple(missing),
        time_s=None if np.isnan(bound) else bound, sum_s=None if np.isnan(bound) else float(p.sum[0]),
        bottleneck=bottleneck, bytes_basis=bytes_basis, dram_compulsory_s=dc, dram_executed_s=de,
        launch_regime=launch, working_set_bytes=ws, on_chip_capacity_bytes=cap, fits_on_chip=fits,
        on_chip_note=note,
    )
