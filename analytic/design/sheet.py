"""The requirements sheet: what ``ssmbench require`` writes and ``ssmbench specs new --from-requirements``
reads (YAML; ``docs/design.md`` documents every field).

``make_sheet`` solves one workload's requirements on a base spec (``require.py``) and returns the sheet
as plain data; ``read_sheet`` checks a sheet file; ``spec_data`` turns a sheet into the data of a
hypothetical spec: the base spec's values, each attained (``measured:``) value of the base folded in as
the design's value (a hypothetical spec has no measurements), and the sheet's design values set, each
labelled a design assumption whose source is the sheet; where the sheet grows the copy bandwidth or the
vector rate, the base's software kernel paths follow it at their share (as ``require`` solved them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from ...errors import UserError
from ...files import UniqueKeyLoader, read_user_text
from ...hwspecs import Spec, get_spec, units
from ...hwspecs.schema import value_kind
from ..roofline import spec_ceiling
from .require import (
    Problem,
    class_keys,
    design,
    needs,
    relevant_keys,
    solve,
    target_time,
)
from .step import LABEL, Workload, WorkloadWork

SCHEMA = "ssmbench-requirements/1"
UNIT = {"bandwidth": "B/s", "flop_rate": "FLOP/s", "capacity": "B", "time": "s", "power": "W",
        "energy_per_flop": "J/FLOP", "energy_per_byte": "J/B", "frequency": "Hz"}
NOT_SOLVED = {"energy.per_flop.<engine>, energy.per_byte.<level>": (
    "held at the base spec: an energy target is met through the step time (energy.time_limit); vary them "
    "with explore")}


def quantity(value: float, kind: str) -> str:
    """A value as text that reads back to the same float (``repr``) in the kind's SI unit."""
    return f"{float(value)!r} {UNIT[kind]}"


def make_sheet(workload: Workload, model_ref: str, base: Spec, base_ref: str, targets: dict[str, float],
               command: str = "") -> dict:
    ww = WorkloadWork.of(workload, base)
    pb = Problem(ww, base)
    t_star = target_time(targets, ww.tokens, ww, base)
    st = pb.step()
    t0 = float(st.time_s[0])
    cls = str(st.binding_names()[0])
    at_binding = set(class_keys(cls, ww, pb))
    reqs = [solve(pb, k, t_star) for k in relevant_keys(ww, pb)]
    for r in reqs:
        r.binds = r.binds or (r.param.key in at_binding and r.status == "solved")
    fixed, last, log = design(pb, t_star)
    raised = keep_hierarchy(base, pb, fixed, log)
    fixed.update({k: v for k, v in raised.items() if k in pb.params})
    final = Problem(ww, base, fixed).step()
    t1 = float(final.time_s[0])
    values = {k: {"value": quantity(v, value_kind(k)), "base": _num(_known(base, k)),
                  "growth": _num(v / _known(base, k))} for k, v in {**fixed, **raised}.items()}
    return {
        "schema": SCHEMA, "label": LABEL, "made_by": command or "ssmbench require",
        "base": base_ref, "base_id": base.id,
        "workload": {"model": model_ref, "phase": workload.phase, "batch": workload.batch,
                     "length": workload.length, "dtype": workload.dtype, "launch": ww.launch},
        "targets": dict(targets), "tokens_per_step": ww.tokens, "target_step_time_s": t_star,
        "at_base": {"step_time_s": t0, "tokens_per_s": ww.tokens / t0, "binding": cls,
                    "meets_targets": bool(t0 <= t_star)},
        "resources": [r.to_dict(UNIT[r.param.kind]) for r in reqs],
        "needs": needs(ww, base),
        "design": {"values": values, "binding": last, "steps": log, "step_time_s": t1,
                   "tokens_per_s": ww.tokens / t1, "meets_targets": bool(t1 <= t_star * (1 + 1e-9))},
        "not_solved": dict(NOT_SOLVED),
    }


def keep_hierarchy(base: Spec, pb: Problem, fixed: dict[str, float], log: list[str]) -> dict[str, float]:
    """Raise the bandwidth of every level closer to the cores than a grown level to at least the grown
    value (the schema's rule: bandwidth does not grow outward). Faster closer levels never slow a step,
    so the design still meets its targets and its binding resource still binds."""
    raised: dict[str, float] = {}
    levels = list(base.memory)
    for i, name in enumerate(levels):
        key = f"memory.{name}.bandwidth"
        if key not in fixed:
            continue
        for closer in levels[:i]:
            ck = f"memory.{closer}.bandwidth"
            cur = fixed.get(ck, _known(base, ck))
            if not np.isnan(cur) and cur < fixed[key]:
                raised[ck] = fixed[key]
                log.append(f"{ck}: raised to {fixed[key]:.6g} B/s, as {key} grew (bandwidth does not grow outward)")
    for key in list(fixed):  # an instruction class's rate is at most the engine's rate (a schema rule)
        if key.startswith("compute.tensor_mma_sync."):
            full = "compute.tensor." + key.rsplit(".", 1)[1]
            cur = fixed.get(full, _known(base, full))
            if not np.isnan(cur) and cur < fixed[key]:
                raised[full] = fixed[key]
                log.append(f"{full}: raised to {fixed[key]:.6g} FLOP/s, as {key} grew (it cannot exceed it)")
    return raised


def _known(base: Spec, key: str) -> float:
    c = spec_ceiling(base, key, "measured")
    return np.nan if c.value is None else float(c.value)


def _num(x: float) -> float | None:
    return None if x is None or np.isnan(x) else float(x)


def read_sheet(path: str | Path) -> dict:
    text = read_user_text(path, what="requirements sheet")
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise UserError(f"{path}: not a requirements sheet (expected 'schema: {SCHEMA}', written by ssmbench require)")
    for key in ("base", "base_id", "workload", "targets", "design"):
        if key not in data:
            raise UserError(f"{path}: missing '{key}' (a requirements sheet written by ssmbench require has it)")
    values = data["design"].get("values") if isinstance(data["design"], dict) else None
    if not isinstance(values, dict):
        raise UserError(f"{path}: design.values: expected a mapping of spec keys to {{value: quantity with unit}}")
    for key, v in values.items():
        try:
            kind = value_kind(key)
        except ValueError as exc:
            raise UserError(f"{path}: design.values.{key}: {exc}") from None
        if not isinstance(v, dict) or "value" not in v:
            raise UserError(f"{path}: design.values.{key}: expected {{value: quantity with unit}}, got {v!r}")
        try:
            units.parse(v["value"], kind)
        except units.UnitError as exc:
            raise UserError(f"{path}: design.values.{key}.value: {exc}") from None
    return data


def _set(data: dict, key: str, datum: dict) -> None:
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = datum


def _software_paths(base: Spec, values: dict) -> dict[str, dict]:
    """The base's software kernel paths (``memory.dram.path.<p>``, ``compute.path.<p>``) on a grown design: at the
    base's share of its copy bandwidth (vector rate) times the design's, as ``require`` solved it
    (``space.Designs``: software on the design's memory and engines). Only for a base rate the sheet changes."""
    from ...hwspecs.schema import COMPUTE_PATHS, DRAM_PATHS

    out = {}
    for rate_key, prefix, names, kind in (("memory.dram.bandwidth", "memory.dram.path", DRAM_PATHS, "bandwidth"),
                                          ("compute.vector.fp32", "compute.path", COMPUTE_PATHS, "flop_rate")):
        if rate_key not in values:
            continue
        factor = units.parse(values[rate_key]["value"], kind) / _known(base, rate_key)
        for p in names:
            v = _known(base, f"{prefix}.{p}")
            if not np.isnan(v) and not np.isnan(factor):
                out[f"{prefix}.{p}"] = {"value": quantity(v * factor, kind), "source": "requirements",
                                        "note": f"software path: {base.id}'s share of its {rate_key} at this design's"}
    return out


def spec_data(sheet: dict, sheet_path: str, spec_id: str, name: str | None = None) -> dict:
    """The data of the hypothetical spec a sheet describes (checked by the caller with ``parse_spec``)."""
    base = get_spec(str(sheet["base"]))
    if base.id != sheet["base_id"]:
        raise UserError(f"{sheet_path}: base {sheet['base']!r} is now spec {base.id!r}, but the sheet was solved on "
                        f"{sheet['base_id']!r}")
    data = base.model_dump(mode="python", exclude_none=True)
    w = sheet["workload"]
    targets = ", ".join(f"{k} = {v:g}" for k, v in sheet["targets"].items())
    what = f"{w['model']} {w['phase']} batch {w['batch']} length {w['length']}"
    data["sources"]["requirements"] = {
        "title": f"Design assumption: the least value that meets {targets} for {what} on {base.id} "
                 f"(ssmbench require, {sheet_path})", "tag": "A"}
    if base.measured:
        data["sources"]["base-measured"] = {
            "title": f"Attained on {base.name} (spec {base.id}, its measured: section), kept as this design's value",
            "tag": "D"}
    for m in base.measured:
        _set(data, m.key, {"value": m.value, "source": "base-measured", "note": f"{m.date}: {m.method}"})
    for key, v in sheet["design"]["values"].items():
        _set(data, key, {"value": v["value"], "source": "requirements",
                         "note": f"required for {targets}; base {base.id}: {v.get('base')}"})
    for key, datum in _software_paths(base, sheet["design"]["values"]).items():
        _set(data, key, datum)
    data.pop("measured", None)
    data.update(id=spec_id, name=name or f"{base.name}, grown to meet {targets} ({what})", hypothetical=True,
                device_names=[], vendor="design study",
                notes=f"Made by 'ssmbench specs new --from-requirements {sheet_path}': spec {base.id} with the "
                      f"values of the requirements sheet. {LABEL}: the design meets {targets} for {what}.")
    return data
