"""Join measured cases with their analytic predictions on the shared op identity and one spec.

A measured case (op, impl, backend, dims, dtype, mode) is costed again with the analytic registry
(``ssmbench.analytic.registry.cost``) and projected on the spec by the roofline module
(``ssmbench.analytic.roofline.project``, as-executed bytes, launches as the case was timed: eager
launches x launch.kernel, or CUDA-graph replays x launch.graph_node where the timer or the backend
replayed a graph, ``measure.results.launch_regime``) into one bound time per resource: tensor cores (sum over dtypes of FLOPs / compute.tensor.<dtype>), vector (vector FLOPs and
fp32 matmul FLOPs / compute.vector.fp32), special-function units (transcendentals /
compute.special_function), DRAM (as-executed device bytes / memory.dram.bandwidth), device-wide
caches and launch overhead where the spec knows them. The analytic bound is the max over resources
and its resource is the bottleneck. A resource with work but no known ceiling gives no bound and is
listed as unknown (never a silent zero or infinity). Ceilings prefer the attained (measured) value,
else the datasheet value; each records which (``origin``). ``resource_bounds`` is the only function
here that calls the roofline module.

Device match: the device name in a result file's metadata (``meta.device.name``, as measure's
environment records it: the CUDA device name, e.g. "NVIDIA H200", or the CPU model) must be one of
the spec's ``device_names``, exactly (``ssmbench.hwspecs.device_matches``, the one device rule; no
substring or word matching). No device matches a hypothetical spec.
A mismatch is an error unless allowed, and then every case is labelled ``device_mismatch``.

A record without a time that a later record of the same case on the same device replaces (a resumed
sweep retries cases that were unavailable, failed or timed out; "later" is measure's one rule,
``ssmbench.measure.results.latest_by_key``: by ``started_utc``, then file and record order) is kept
as an exclusion with status ``superseded``, not counted as a failure. Every
``ok`` record counts: a repeated measurement (another lease, another seed) is another sample.
Cases with a failed status are kept as exclusions (status, reason). A case the analytic model cannot
cost (block/model cases, an op without a rule) is an error naming it, unless the caller allows
skipping them; skipped ones are kept as exclusions too. Nothing is dropped silently.

Session: every case carries the measurement session it was timed in (``session_of``): the GPU's UUID
as the result metadata records it (``meta.device.uuid``: one lease of one machine, whose host CPU
issues the calls), else the file's sha256. The host issue speed differs between sessions on machines
of one kind (the same eager call measured 48 us on one machine and 80 us on another), so the fits
scale the host terms per session (achievable_forms.py ``AchievableEff``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..analytic import achievable, execution, roofline, sequential, timed
from ..analytic.cases import BLOCK_PREFIX, case_family
from ..analytic.cases import case_cost as analytic_cost
from ..errors import UserError
from ..hwspecs import Spec, device_matches
from ..measure.results import ResultFile, latest_by_key

# Resources whose bound times the calibrated models use (roofline names). Device-wide caches carry
# the same bytes as DRAM (collinear) and launch overhead is fitted as a time per launch instead
# (the H200 spec does not know launch.kernel); both still enter the reported analytic bound.
RESOURCES = ("tensor", "vector", "special_function", "dram")
# "chain": the achievable model's sequential chain (analytic/chain.py), a floor set by dependent steps
# rather than by an engine's or the memory's throughput: counted with the fixed overhead
RESOURCE_CLASS = {"tensor": "compute", "vector": "compute", "special_function": "compute", "dram": "memory",
                  "cache": "memory", "l2": "memory", "launch": "fixed overhead", "chain": "fixed overhead"}
_MAX_LISTED = 12


@dataclass(frozen=True)
class Bounds:
    """Analytic bound times (seconds) of one case on one spec."""

    times: dict[str, float]          # resource -> bound time in s (resources with work and a ceiling)
    unknown: tuple[str, ...]         # resources with work but no known ceiling on this spec
    launches: float                  # kernel launches per call (analytic)
    ceilings: dict[str, dict]        # spec key -> {value, origin, provenance}
    work: dict[str, float]           # analytic totals: flops, transcendentals, executed_bytes, bytes
    notes: tuple[str, ...] = ()
    achievable: dict | None = None   # the plain achievable estimate, steady state (Estimate.to_dict())
    datasheet_bound_s: float | None = None  # the bound at datasheet peaks only (a true lower bound)
    # the achievable estimate as measured (analytic/timed.py: in the timing loop, after the L2 flush);
    # None where the case was not costed for a measured record
    as_measured: dict | None = None

    @property
    def achievable_s(self) -> float:
        """The achievable estimate to compare with a measurement: as measured where known, else plain."""
        a = self.as_measured or self.achievable
        return float(a["time_s"]) if a else float("nan")

    @property
    def bound_s(self) -> float:
        return max(self.times.values()) if self.times else float("nan")

    @property
    def bottleneck(self) -> str:
        return max(self.times, key=self.times.get) if self.times else "unknown"


def _ceiling_record(c) -> dict:
    return {"value": c.value, "origin": c.origin, "provenance": c.provenance}


def _ceilings_used(sc: "roofline.SpecCeilings", times: Mapping[str, float], tensor_dtypes: list[str],
                   launch: str = "eager") -> dict[str, dict]:
    used = {}
    for d in tensor_dtypes:
        used[sc.tensor[d].key] = _ceiling_record(sc.tensor[d])
    for r, c in (("vector", sc.vector), ("special_function", sc.special_function), ("dram", sc.dram),
                 ("launch", sc.launch[launch])):
        if r in times:
            used[c.key] = _ceiling_record(c)
    if "cache" in times and sc.slowest_cache() is not None:
        c = sc.slowest_cache()
        used[c.key] = _ceiling_record(c)
    return used


def resource_bounds(spec: Spec, op: str, impl: str, dims: Mapping[str, int], dtype: str, mode: str,
                    prefer: str = "measured", backend: str | None = None, launch: str = "eager",
                    timing: Mapping[str, Any] | None = None) -> Bounds:
    """The one place calibration turns an op identity into per-resource bound times on a spec, with
    the achievable estimate of the same call (``backend``: the measured backend, whose host call
    path may differ from the one the implementation implies, see ``analytic/execution.py``;
    ``launch``: "graph" for a case timed as CUDA-graph replays, whose host issue time is gone;
    ``timing``: the record's timing settings, for the estimate as measured, ``analytic/timed.py``)."""
    c = analytic_cost(op, dict(dims), impl=impl, mode=mode, dtype=dtype)
    # the launch term as the call was timed: eager launches x launch.kernel, or graph replays x
    # launch.graph_node (a replayed graph pays no per-kernel eager dispatch)
    proj = roofline.project(c, spec, prefer=prefer, launch=launch, bytes_basis="executed")
    sheet = roofline.project(c, spec, prefer="datasheet", launch=launch, bytes_basis="executed")
    # a forward-backward call timed eagerly records and frees its graph as a train step does (as_measured)
    measured_cost = execution.measured_call(c, backend, op, impl, dims, dtype, mode, launch)
    ach = execution.estimate_call(measured_cost, spec, op, impl, dims, dtype, mode, backend, launch=launch)
    times = {b.resource: float(b.time_s) for b in proj.bounds if b.time_s is not None and b.time_s > 0}
    unknown = tuple(b.resource for b in proj.bounds if b.time_s is None)
    tensor_dtypes = [d for d, v in c.tensor.items() if d in roofline.TENSOR_DTYPES and float(v) > 0]
    used = _ceilings_used(roofline.SpecCeilings.of(spec, prefer), times, tensor_dtypes, launch)
    work = {"flops": float(c.flops), "transcendentals": float(c.transcendental),
            "executed_bytes": float(c.executed_bytes), "bytes": float(c.bytes)}
    timed_est = None if timing is None else _as_measured(ach, measured_cost, spec, (op, impl, backend, mode),
                                                         launch, timing, prefer)
    ach_d = ach.to_dict()
    if op.startswith(BLOCK_PREFIX):
        # a block runs its op calls one after another, each with its own host path and kernels: its
        # achievable estimate is the composition of those calls (analytic/workloads/blocks.py), not one call
        # of the summed cost
        from ..analytic.workloads.blocks import composed_estimate

        ach_d, composed_timed = composed_estimate(op, dims, spec, impl=impl, mode=mode, dtype=dtype, launch=launch)
        timed_est = None if timing is None else composed_timed
    elif sequential.parts_of(op, impl, dims) is not None:
        # kernels of different kinds one after another: the sum of the parts' estimates (analytic/sequential.py);
        # compared with the measurement as it is, in the steady state (no timed-call term of its own)
        ach_d, timed_est = sequential.composed(spec, op, impl, dims, dtype, mode, launch=launch, prefer=prefer), None
    return Bounds(times, unknown, float(c.launches), used, work, tuple(proj.not_bounded), ach_d,
                  sheet.time_s, timed_est)


def _as_measured(ach: "achievable.Estimate", cost, spec: Spec, ident: tuple, launch: str, timing: Mapping[str, Any],
                 prefer: str) -> dict:
    """The estimate as the timing loop measures it: the call's kernels issued one by one after the L2
    flush, a CUDA-graph replay or the autograd engine's call first (it issues no kernel).
    ``ident``: (op, impl, backend, mode) of the measured call."""
    op, impl, backend, mode = ident
    table = achievable.AchievableTable.of([spec], prefer)
    if launch == "graph":
        head = ach.host_s
    elif mode in execution.AUTOGRAD_MODES:
        head = achievable.host_cost(table, "autograd")
    else:
        head = 0.0
    engine = ("autograd", "autograd_node", execution.BACKWARD_LAUNCH)  # host terms that issue no kernel
    calls = max(float(cost.launches), float(sum((float(v) for k, v in cost.host.items() if k not in engine), 0.0)))
    notes = {}
    if mode in execution.AUTOGRAD_MODES and execution.autograd_nodes(op, impl, backend) is None:
        notes["autograd_nodes"] = (f"the backward graph of {op}/{impl} on {backend} is not counted "
                                   "(analytic/execution.py AUTOGRAD_NODES): its nodes beyond the first cost no host time here")
    return timed.as_timed(ach, spec, calls=calls, head_host_s=head, timing=timing, prefer=prefer, notes=notes)


# The joined table ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class JoinedCase:
    key: str
    op: str
    impl: str
    backend: str
    family: str
    dims: dict[str, int]
    dtype: str
    mode: str
    device: str
    measured_s: float            # median measured time per call
    measured_p20_s: float | None
    measured_p80_s: float | None
    bounds: Bounds
    source: str                  # result file path
    source_sha256: str
    device_mismatch: bool
    analytic_changed: bool       # the registry's counts differ from those recorded at measurement
    session: str = ""            # the measurement session (session_of): machine whose host issued the calls
    energy: dict | None = None   # the record's NVML energy window (measure/energy.py), where it has one
    idle_power_w: float | None = None  # the run's idle power (meta.energy.idle), for the energy fit

    @property
    def shape(self) -> tuple[tuple[str, int], ...]:
        return tuple(sorted(self.dims.items()))


@dataclass
class Joined:
    spec_id: str
    spec_name: str
    prefer: str
    cases: list[JoinedCase]
    excluded: list[dict[str, Any]]
    files: list[dict[str, Any]]
    devices: list[str]
    device_mismatch: bool
    ceilings: dict[str, dict] = field(default_factory=dict)


def _recorded_differs(record: Mapping[str, Any], b: Bounds) -> bool:
    rec = record.get("analytic") or {}
    for rec_key, work_key in (("flops", "flops"), ("executed_bytes", "executed_bytes")):
        v = rec.get(rec_key)
        if isinstance(v, (int, float)) and abs(float(v) - b.work[work_key]) > 1e-6 * max(abs(float(v)), 1.0):
            return True
    return False


def _listing(items: list[str]) -> str:
    head = items[:_MAX_LISTED]
    more = f"\n  ... and {len(items) - len(head)} more" if len(items) > len(head) else ""
    return "\n  " + "\n  ".join(head) + more


def session_of(rf: ResultFile) -> str:
    """The measurement session of a result file: ``gpu:<uuid>`` (meta.device.uuid, the machine it ran on;
    files of one lease share it), else ``file:<sha256 prefix>`` (a file without a UUID is its own session)."""
    dev = rf.meta.get("device")
    uuid = dev.get("uuid") if isinstance(dev, dict) else None
    if isinstance(uuid, str) and uuid.strip():
        return f"gpu:{uuid.strip()}"
    return f"file:{rf.sha256[:16]}"


def join(results: list[ResultFile], spec: Spec, prefer: str = "measured", allow_device_mismatch: bool = False,
         skip_unpredicted: bool = False) -> Joined:
    if not results:
        raise UserError("no result files given; expected at least one measure result file")
    mismatched = []
    devices = []
    for rf in results:
        dev = rf.device
        devices.append(dev)
        if not device_matches(spec, dev):
            mismatched.append(f"{rf.path}: device {dev!r}")
    if mismatched and not allow_device_mismatch:
        raise UserError(
            f"the results were not measured on spec {spec.id!r} ({spec.name}):{_listing(mismatched)}\n"
            "pass --hw with the spec of that device, or --allow-device-mismatch to fit anyway "
            "(every number is then labelled as measured on another device)"
        )
    cases: list[JoinedCase] = []
    excluded: list[dict[str, Any]] = []
    unpredicted: list[str] = []
    used_ceilings: dict[str, dict] = {}
    latest = {dev: latest_by_key(results, device=dev) for dev in set(devices)}
    for rf in results:
        dev, path = rf.device, str(rf.path)
        mismatch = not device_matches(spec, dev)
        for rec in rf.records:
            key = rec.key
            later = latest[dev][key]
            if rec.status != "ok" and (later.path, later.index) != (rec.path, rec.index):
                excluded.append({"key": key, "file": path, "status": "superseded",
                                 "reason": f"a later record of this case on {dev} replaces it "
                                           f"({later.path}: cases[{later.index}])"})
                continue
            if rec.status != "ok":
                excluded.append({"key": key, "file": path, "status": rec.status,
                                 "reason": rec.reason or "no reason recorded"})
                continue
            t = (rec.time_s or {}).get("median")
            if not isinstance(t, (int, float)) or not t > 0:
                raise UserError(f"{path}: cases[{rec.index}] ({key}): status 'ok' but no positive time_s.median; "
                                "the result file is damaged")
            try:
                case = rec.case
                family = case_family(case.op)
                # a case timed as CUDA-graph replays (the timer's or the backend's own graph) pays no host
                # issue time and graph-node launches
                regime = rec.launch
                b = resource_bounds(spec, case.op, case.impl, case.dims, case.dtype, case.mode, prefer, case.backend,
                                    regime, rec.raw.get("timing"))
            except UserError as exc:  # unknown op, implementation, mode, dtype or dims: the analytic model says which
                reason = str(exc)
                unpredicted.append(f"{key}: {reason}")
                excluded.append({"key": key, "file": path, "status": "unpredicted", "reason": reason})
                continue
            if not b.times:
                reason = f"no resource has a known ceiling on spec {spec.id} (unknown: {', '.join(b.unknown)})"
                unpredicted.append(f"{key}: {reason}")
                excluded.append({"key": key, "file": path, "status": "unpredicted", "reason": reason})
                continue
            used_ceilings.update(b.ceilings)
            ts = rec.time_s or {}
            cases.append(JoinedCase(
                key=key, op=case.op, impl=case.impl, backend=case.backend, family=family, dims=dict(case.dims),
                dtype=case.dtype, mode=case.mode, device=dev, measured_s=float(t),
                measured_p20_s=ts.get("p20"), measured_p80_s=ts.get("p80"), bounds=b,
                source=path, source_sha256=rf.sha256, device_mismatch=mismatch,
                analytic_changed=_recorded_differs(rec, b), session=session_of(rf),
                energy=dict(rec.energy) if rec.energy and rec.energy.get("joules_per_call") else None,
                idle_power_w=((rf.meta.get("energy") or {}).get("idle") or {}).get("idle_power_w"),
            ))
    if unpredicted and not skip_unpredicted:
        raise UserError(
            f"{len(unpredicted)} measured case(s) have no analytic prediction on spec {spec.id}:"
            f"{_listing(unpredicted)}\npass --skip-unpredicted to calibrate without them "
            "(they are then listed as excluded in the profile and the report)"
        )
    if not cases:
        by_status: dict[str, int] = {}
        for e in excluded:
            by_status[e["status"]] = by_status.get(e["status"], 0) + 1
        summary = ", ".join(f"{n} {s}" for s, n in sorted(by_status.items())) or "none"
        raise UserError(f"no measured case with status 'ok' and an analytic prediction to calibrate on (excluded: {summary})")
    files = [{"path": str(rf.path), "sha256": rf.sha256, "device": rf.device, "n_cases": len(rf.cases),
              "complete": rf.complete, "session": session_of(rf)} for rf in results]
    return Joined(spec.id, spec.name, prefer, cases, excluded, files, sorted(set(devices)),
                  bool(mismatched), used_ceilings)
