"""The Python API: the numbers of ``ssmbench predict``, ``sweep`` and ``cost`` without the CLI.

    >>> from ssmbench import predict
    >>> r = predict("mamba2-2.7b", hw="h200-sxm", phase="prefill", batch=1, seqlen=4096)
    >>> r.time_s, r.bottleneck          # analytic bound in s, the resource that sets it

Each function computes through the same code as its command (``analytic/workloads/report.predict``,
``analytic/sweep.sweep``, ``ssmbench.commands.ops.evaluate_case``): nothing here computes a number
of its own. ``Prediction.to_dict()`` is the JSON that ``ssmbench predict --json`` prints for the same
arguments. Bad input raises ``ssmbench.errors.UserError`` (a ``ValueError``) whose message names what
is wrong and what was expected.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from .errors import UserError

# The keyword options of report.predict a caller may pass through (their defaults are report.predict's,
# the CLI's too): the one list, so that a misspelt option is named rather than swallowed.
PREDICT_OPTIONS = ("dtype", "kv_dtype", "state_dtype", "prefer", "launch", "bytes_basis", "impls", "recompute",
                   "logits", "runtime")
SWEEP_OPTIONS = ("dtype", "prefer", "launch", "bytes_basis", "achievable")


def get_spec(spec):
    """A hardware spec: a built-in id (``ssmbench specs list``), a spec YAML path, or a ``Spec`` as is."""
    from .hwspecs import Spec, get_spec as load
    return spec if isinstance(spec, Spec) else load(str(spec))


def get_model(model):
    """A workload model: a built-in id (``ssmbench models list``), a model YAML file, a Hugging Face
    config.json (or its folder), or a ``Model`` as is."""
    from .analytic.workloads.models import Model, get_model as load
    return model if isinstance(model, Model) else load(str(model))


def _readonly(d: Mapping) -> Mapping:
    return MappingProxyType(copy.deepcopy(dict(d)))


@dataclass(frozen=True)
class Prediction:
    """One prediction (a model phase on a spec), as ``ssmbench predict`` prints it.

    Labels: ``time_s``, ``time_s_ignoring_capacity``, ``sum_s``, ``tokens_per_s`` and
    ``time_per_token_s`` are *analytic bounds* (``label``); ``memory_bytes`` is an *analytic
    estimate*; ``energy_j``, ``energy_per_token_j`` and ``avg_power_w`` carry the label of
    ``energy["label"]`` (analytic or calibrated estimate, at the achievable time); ``calibrated`` holds a *calibrated* (or *transferred*) estimate, with its
    own label, when ``predict(..., calibration=FILE)`` was given. Units: seconds, bytes, joules,
    tokens per second. Mappings are read-only; ``to_dict()`` returns a mutable copy of everything.

    Fields:
        model, spec: the model id and the spec id.
        phase, batch, seqlen, context, dtype: the point predicted (context: decode only, else None).
        label: the label of the time bounds ("analytic bound").
        time_s: time bound of one step in s; None when the workload does not fit in device memory
            (then see ``time_s_ignoring_capacity`` and ``status``).
        time_s_ignoring_capacity: the same bound, whether or not it fits, in s.
        sum_s: sum of every resource's time (no overlap), in s.
        bottleneck: the resource that sets the bound ("dram", "tensor", "launch", ...), or None.
        tokens_per_s: tokens per second at the bound (None when it does not fit).
        time_per_token_s: time bound per token, in s.
        memory_bytes: device memory by class (weights, kv_cache, state, activations, ...), in B.
        memory_total_bytes, memory_capacity_bytes: the sum, and the spec's device memory (None: unknown).
        fits: whether memory_total_bytes fits in memory_capacity_bytes; status: the verdict in words.
        energy_j: energy estimate of one step in J, or None (the spec has no energy data, or no fit).
        energy_per_token_j: energy_j over the step's tokens, in J; avg_power_w: energy_j over the step's
            time (after any power-limit stretch), in W.
        energy: the whole energy estimate (label, static and dynamic terms, power limit, parameters
            with their origins, what is not modelled; ``analytic/energy.py``).
        ops: one row per op call of the plan (op, impl, mode, count, shape, FLOPs by engine, bytes,
            bound per resource ``bound_s``, ``time_s``, ``bottleneck``, ...), as in the JSON.
        layers: one row per layer block (time, share of the total, bottleneck).
        calibrated: the calibrated total (estimate_s, lo_s, hi_s, level, label, ...), or None.
        notes: what the numbers assume, in words.
    """

    model: str
    spec: str
    phase: str
    batch: int
    seqlen: int
    context: int | None
    dtype: str
    label: str
    time_s: float | None
    time_s_ignoring_capacity: float | None
    sum_s: float | None
    bottleneck: str | None
    tokens_per_s: float | None
    time_per_token_s: float | None
    memory_bytes: Mapping[str, float]
    memory_total_bytes: float
    memory_capacity_bytes: float | None
    fits: bool
    status: str
    energy_j: float | None
    energy_per_token_j: float | None
    avg_power_w: float | None
    energy: Mapping[str, Any]
    ops: tuple[Mapping[str, Any], ...]
    layers: tuple[Mapping[str, Any], ...]
    calibrated: Mapping[str, Any] | None
    notes: tuple[str, ...]
    _data: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Prediction:
        """From the JSON form (``ssmbench predict --json``, or ``to_dict()``)."""
        t = data["total"]
        return cls(
            model=data["model"]["id"], spec=data["spec"]["id"], phase=data["phase"], batch=data["batch"],
            seqlen=data["seqlen"], context=data["context"], dtype=data["dtype"], label=t["label"],
            time_s=t["time_s"], time_s_ignoring_capacity=t["time_s_ignoring_capacity"], sum_s=t["sum_s"],
            bottleneck=t["bottleneck"], tokens_per_s=t["tokens_per_s"], time_per_token_s=t["time_per_token_s"],
            memory_bytes=_readonly(t["memory_bytes"]), memory_total_bytes=t["memory_total_bytes"],
            memory_capacity_bytes=t["memory_capacity_bytes"], fits=t["fits"], status=t["status"],
            energy_j=t["energy_j"], energy_per_token_j=t["energy_per_token_j"], avg_power_w=t["avg_power_w"],
            energy=_readonly(t["energy"]), ops=tuple(_readonly(o) for o in data["ops"]),
            layers=tuple(_readonly(layer) for layer in data["layers"]),
            calibrated=_readonly(t["calibrated"]) if t.get("calibrated") else None,
            notes=tuple(data["notes"]), _data=_readonly(data))

    def to_dict(self) -> dict[str, Any]:
        """Everything, as the JSON ``ssmbench predict --json`` prints (a fresh, mutable copy)."""
        return copy.deepcopy(dict(self._data))


def _options(given: Mapping[str, Any], known: Sequence[str], what: str) -> dict[str, Any]:
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise UserError(f"{what}: unknown option(s) {', '.join(unknown)}; expected any of {', '.join(known)}")
    return dict(given)


def predict(model, *, hw, phase: str, batch: int, seqlen: int, context: int | None = None,
            calibration: str | None = None, calibration_backends: Mapping[str, str] | None = None,
            **options) -> Prediction:
    """The prediction of ``ssmbench predict`` for one point.

    model: a model id, file or ``Model`` (see ``get_model``); hw: a spec id, file or ``Spec``.
    phase: "prefill", "decode" or "train"; batch: sequences; seqlen: prompt length (prefill),
    sequence length (train) or context (decode; with ``context``: tokens generated after it).
    calibration: a profile written by ``ssmbench calibrate``, to add calibrated estimates;
    calibration_backends: {op: backend} where the profile calibrates an op with several.
    options: ``PREDICT_OPTIONS`` (dtype, prefer, launch, bytes_basis, impls as {op: impl}, recompute,
    logits, runtime: one of ``analytic.runtime.RUNTIMES``), with the defaults of ``ssmbench predict``.
    """
    from .analytic import sweep as analytic_sweep
    from .analytic.workloads.precision import Precision
    from .analytic.workloads.report import check_impls
    from .output import json_data
    from .prediction import predict_point

    opts = {"dtype": "bf16", "prefer": "measured", "launch": None, "bytes_basis": "executed", "impls": {},
            "recompute": False, "logits": "last", "runtime": None, **_options(options, PREDICT_OPTIONS, "predict")}
    opts["dtype"] = Precision(opts["dtype"], opts.pop("kv_dtype", None), opts.pop("state_dtype", None))
    spec, m = get_spec(hw), get_model(model)
    opts["prefer"], ceilings = analytic_sweep.common_prefer([spec], opts["prefer"])
    opts["impls"] = dict(opts["impls"] or {})
    check_impls([m], phase, opts["impls"], opts["recompute"], opts["logits"])
    data = predict_point(m, spec, phase, batch, seqlen, context, opts, ceilings, calibration, calibration_backends)
    return Prediction.from_dict(json_data(data))


POINT_OPTIONS = ("dtype", "kv_dtype", "state_dtype", "prefer", "launch", "bytes_basis", "impls", "recompute", "logits")
_TABLES: dict = {}


def spec_table(hw, prefer: str = "measured"):
    """The ceilings of one spec (id, file or ``Spec``) as a ``SpecTable``, cached on the spec's content
    (its JSON) and ``prefer``: an edited spec gets its own table. Building it once and passing it to
    ``point`` saves the content hash (~0.1 ms) per call."""
    from .analytic.roofline import SpecTable
    spec = get_spec(hw)
    key = (spec.model_dump_json(), prefer)
    if key not in _TABLES:
        if len(_TABLES) >= 64:
            _TABLES.clear()
        _TABLES[key] = SpecTable.of([spec], prefer)
    return _TABLES[key]


def point(model, *, hw, phase: str, batch: int, seqlen: int, achievable: bool = False, **options):
    """The analytic bound of one (model, phase, batch, seqlen) point, fast: ``analytic/workloads/point.py``
    (a plain-Python function generated per plan and spec), equal to ``analyze`` and
    ``report.achievable_rows`` to 1e-12 (tests/test_point_fast.py). Returns a ``PointResult``: time_s
    and sum_s (analytic bound, s; NaN where no bound), bottleneck, shares_s, not_bounded, tokens, and with
    ``achievable=True`` the step's achievable estimate (time_s, host_s, gpu_s, bottleneck). No memory,
    capacity or energy (``predict`` has them). seqlen: prompt (prefill), sequence (train) or context
    (decode) length. hw: a spec id, file or ``Spec``, or a ``SpecTable`` of one spec (``spec_table``).
    options: ``POINT_OPTIONS`` with ``predict``'s defaults. Where the plain-Python path does not apply
    (decode on a spec with a persistent on-chip level) the general path computes it (``path`` says)."""
    from .analytic.roofline import SpecTable
    from .analytic.workloads.point import analyze_point
    from .analytic.workloads.precision import Precision

    opts = {"dtype": "bf16", "prefer": "measured", **_options(options, POINT_OPTIONS, "point")}
    prec = Precision(opts.pop("dtype"), opts.pop("kv_dtype", None), opts.pop("state_dtype", None))
    prefer = opts.pop("prefer")
    table = hw if isinstance(hw, SpecTable) else spec_table(hw, prefer)
    if len(table.specs) != 1:
        raise UserError(f"point: hw must be one spec, got a table of {len(table.specs)}")
    return analyze_point(get_model(model), phase, table, batch, seqlen, dtype=prec, achievable=achievable, **opts)[0]


def sweep(models, *, hw, phases: Sequence[str], batches: Sequence[int], lengths: Sequence[int],
          **options) -> list[dict[str, Any]]:
    """The ``rows`` of ``ssmbench sweep --format json``: one per (model, spec, phase,
    batch, length) with the columns of ``ssmbench.analytic.sweep.COLUMNS`` (analytic bounds in s,
    tokens/s, bottleneck, memory by class in B; ``time_s`` None where it does not fit).

    models, hw: lists of ids / files / objects (one item alone is taken as a list of one).
    options: ``SWEEP_OPTIONS`` (dtype, prefer, launch, bytes_basis, achievable), with the CLI's defaults.
    A (model, phase) the analytic model cannot cost raises ``UserError`` (``AnalyticError``) naming it."""
    from .analytic import sweep as analytic_sweep
    from .output import json_data

    def items(x) -> list:
        return [x] if isinstance(x, str) or not isinstance(x, Sequence) else list(x)

    opts = _options(options, SWEEP_OPTIONS, "sweep")
    cols = analytic_sweep.sweep([get_model(m) for m in items(models)], [get_spec(s) for s in items(hw)],
                                items(phases), items(batches), items(lengths), **opts)
    return json_data(analytic_sweep.to_records(cols))


def cost(op: str, dims: Mapping[str, int], *, dtype: str, mode: str, impl: str | None = None) -> dict[str, Any]:
    """The analytic count of one op case, as ``ssmbench cost OP --dims ... --json`` prints it:
    FLOPs by engine, bytes read and written by tensor class (compulsory and as executed), launches,
    working set and arithmetic intensity. ``dims``: {letter: size} (``ssmbench ops list``); impl:
    None for the op's default implementation."""
    from .commands.ops import evaluate_case
    from .output import json_data
    return json_data(evaluate_case(op, impl, dict(dims), dtype, mode))


def energy(model, *, hw, phase: str, batch: int, seqlen: int, context: int | None = None,
           **options) -> dict[str, Any]:
    """Energy, time and work of one step, for comparisons of matched models (the crossover report's
    energy ratio beside the FLOP and time ratios): a plain dict with

    ``energy_j``, ``energy_per_token_j``, ``avg_power_w`` and ``energy_label`` (``analytic/energy.py``,
    at the achievable time; None where the spec has no energy data), ``power_limited``,
    ``achievable_time_s`` (achievable estimate), ``bound_time_s`` (analytic bound), ``flops`` (tensor +
    vector FLOPs of the step, analytic count), ``tokens``, and ``energy`` (the full estimate).
    Arguments as ``predict``."""
    r = predict(model, hw=hw, phase=phase, batch=batch, seqlen=seqlen, context=context, **options)
    t = r.to_dict()["total"]
    flops = sum(sum(o["flops_tensor"].values()) + o["flops_vector"] for o in r.ops)
    return {"model": r.model, "spec": r.spec, "phase": phase, "batch": batch, "seqlen": seqlen,
            "energy_j": r.energy_j, "energy_per_token_j": r.energy_per_token_j, "avg_power_w": r.avg_power_w,
            "energy_label": r.energy.get("label"), "power_limited": r.energy.get("power_limited"),
            "achievable_time_s": t["achievable"]["time_s"], "bound_time_s": r.time_s_ignoring_capacity,
            "flops": flops, "tokens": t["tokens"], "energy": r.to_dict()["total"]["energy"]}
