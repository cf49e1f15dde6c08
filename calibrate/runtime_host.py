"""The runtime terms of the achievable estimate measured from whole-model records (issue #15), and
the same terms held out per model (leave-one-model-out) for an honest model-level evaluation.

Three spec values are read off the stored model records rather than a probe, each the one physical
quantity its record class isolates:

- ``launch.host.hf_module`` (``hf-eager``) and ``launch.host.ssm_module`` (``mamba-ssm``): the host
  time per op call of the runtime's module code beyond its kernels' own issue cost. In a host-bound
  record (the GPU idle for at least ``HOST_BOUND_SHARE`` of the step: ``profile.host_idle_s`` / median)
  the step time is the host's issue time, so per record

      module = (step time - the plan's host time without the module term) / the plan's op calls,

  and the value is the median over the runtime's host-bound prefill and decode records (a train step's
  host time also holds its backward's Python, which this forward term does not describe).
- ``launch.gemm_fixed``: the device time a cuBLAS GEMM kernel pays beyond a trivial graph node. In a
  CUDA-graph record no host cost hides any kernel, so per record

      gemm_fixed = (measured GEMM kernel time - the plan's GEMM device time without it) / GEMM kernels,

  (the profile's ``gemm`` part against the plan's ``gemm``-part ops), median over the graph records.

``derive`` returns the three values (those with records) as ``measured:`` entries with their method;
``held_out_spec`` is a spec whose three values come from the records of the other models only
(``Spec.model_validate(hwspecs.fragment.with_measured(...))``: the spec mechanism, no hand edit).
Predictions made to derive are on the spec with these three keys removed (``base_spec``), so that a
value in the spec never feeds its own derivation.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Callable

from ..hwspecs.schema import Spec
from ..hwspecs.units import format_quantity, parse

HOST_BOUND_SHARE = 0.5  # GPU idle for at least half the step: the host sets the pace
MODULE_KEY = {"hf-eager": "launch.host.hf_module", "mamba-ssm": "launch.host.ssm_module"}
GEMM_KEY = "launch.gemm_fixed"
KEYS = (*MODULE_KEY.values(), GEMM_KEY)


def base_spec(spec: Spec) -> Spec:
    """``spec`` without measured values at the keys derived here."""
    data = spec.model_dump(mode="python", exclude_none=True)
    data["measured"] = [m for m in data.get("measured", []) if m["key"] not in KEYS]
    return Spec.model_validate(data)


def _predict(rec: dict, spec: Spec) -> dict:
    from ..analytic.workloads.models import get_model
    from ..analytic.workloads.report import predict

    return predict(get_model(rec["model"]), spec, rec["phase"], int(rec["batch"]), int(rec["seqlen"]),
                   with_searches=False, runtime=rec["runtime"], dtype=rec.get("dtype") or "bf16")


def rows_of(records: list[dict], spec_for: Callable[[dict], Spec]) -> list[dict[str, Any]]:
    """One row per ok record of a runtime with a derived term: the record's value of that term."""
    from ..measure.models.kernel_map import part_of_op

    rows = []
    for r in sorted(records, key=lambda r: r["key"]):
        if r["status"] != "ok" or not (r.get("profile") or {}).get("launches"):
            continue
        if r["runtime"] not in MODULE_KEY and r["runtime"] != "cuda-graph":
            continue
        spec = base_spec(spec_for(r))
        p = _predict(r, spec)
        a, prof, t = p["total"]["achievable"], r["profile"], float(r["time_s"]["median"])
        row = {"key": r["key"], "model": r["model"], "runtime": r["runtime"], "phase": r["phase"], "file": r["_file"],
               "date": str(r.get("started_utc") or "")[:10], "spec": spec.id, "measured_s": t,
               "busy_s": prof["busy_s"], "host_idle_share": prof["host_idle_s"] / t,
               "launches_measured": prof["launches"], "launches_plan": sum(o["launches"] for o in p["ops"]),
               "module_calls": r.get("module_calls"), "op_calls_plan": sum(o["count"] for o in p["ops"]),
               "plan_host_s": a["host_s"], "plan_gpu_s": a["gpu_s"]}
        if r["runtime"] in MODULE_KEY:
            # forward-only steps: a train step's host time also holds its backward's Python (custom autograd
            # functions' backward, the engine's node walk), which this per-call forward term does not describe
            row.update(term=MODULE_KEY[r["runtime"]],
                       usable=row["host_idle_share"] >= HOST_BOUND_SHARE and r["phase"] != "train",
                       value_s=(t - a["host_s"]) / row["op_calls_plan"])
        else:
            gemm = (prof.get("parts") or {}).get("gemm")
            planned = sum(o["achievable"]["gpu_s"] for o in p["ops"] if part_of_op(o["op"]) == "gemm")
            if not gemm or not gemm.get("launches"):
                continue
            row.update(term=GEMM_KEY, usable=True, gemm_measured_s=gemm["time_s"], gemm_plan_s=planned,
                       gemm_kernels=gemm["launches"], value_s=(gemm["time_s"] - planned) / gemm["launches"])
        rows.append(row)
    return rows


def derive(rows: list[dict], exclude_model: str | None = None) -> list[dict[str, Any]]:
    """``measured:`` entries of the three terms from ``rows`` (those of ``exclude_model`` left out);
    a term without usable rows is left out (a positive median only: a spec value must be > 0)."""
    out = []
    for key in KEYS:
        use = [r for r in rows if r["term"] == key and r["usable"] and r["model"] != exclude_model]
        if not use:
            continue
        v = statistics.median(r["value_s"] for r in use)
        if not v > 0:
            continue
        text = format_quantity(v, "time", digits=4)
        if abs(parse(text, "time") - v) > 1e-3 * v:
            raise RuntimeError(f"{key}: formatted {v} as {text!r}, which does not read back")
        what = ("host-bound whole-model records (GPU idle >= "
                f"{HOST_BOUND_SHARE:.0%} of the step), (step median - the plan's host time without the module term) / "
                "the plan's op calls" if key != GEMM_KEY else
                "CUDA-graph decode records, (profiled GEMM kernel time - the plan's GEMM device time without it) / "
                "GEMM kernels")
        files = sorted({Path(r["file"]).as_posix() for r in use})
        each = "; ".join(f"{r['key']} {r['value_s'] * 1e6:.4g} us" for r in use)
        out.append({"key": key, "value": text, "date": max(r["date"] for r in use),
                     "method": f"calibrate/runtime_host.py: {what}, median of {len(use)}: {each}; files {', '.join(files)}"})
    return out


def held_out_spec(spec: Spec, rows: list[dict], model: str) -> tuple[Spec, list[dict]]:
    """``spec`` with the three terms derived from the other models' records (the entries used)."""
    from ..hwspecs.fragment import with_measured

    entries = derive(rows, exclude_model=model)
    base = base_spec(spec)
    return (Spec.model_validate(with_measured(base, tuple(entries))) if entries else base), entries
