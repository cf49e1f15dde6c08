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

      gemm_fixed = (measured GEMM kernel time + GEMM kernels x gap - the plan's GEMM device time without it)
                   / GEMM kernels,

  (the profile's ``gemm`` part against the plan's ``gemm``-part ops), median over the graph records.
  ``gap`` is the record's idle time between graph nodes per kernel (``profile.host_idle_s`` / the
  profile's launches: under graph replay the host issues one graph per step, so the GPU's idle time in
  the step is the gaps between its nodes): ``launch.graph_node`` is a replay time per node (the probe's
  graph of trivial kernels / its nodes), a node's kernel plus the gap to the next, while the profiler's
  kernel times hold the kernels alone; each measured kernel is charged the mean gap to compare like
  with like. Only records whose plan is mostly fixed costs are used (the achievable step's ``latency``
  class holds at least ``FIXED_BOUND_SHARE`` of its device time): in a step of long DRAM-bound kernels
  the profiled kernels run slower than the timed step (transformerpp-125m b32: profiled kernel time
  above the timed median), which leaves no measurable gap, and the fixed cost is a small difference
  of large numbers.
- ``launch.library_fixed``: the same for the library kernels (Triton, CUDA extension:
  ``hwspecs.schema.LIBRARY_KERNEL_CLASSES``): per record, over the parts whose plan ops are all library
  kernels, all latency-bound in the plan, and launched as often as the profile counts the part's
  kernels (one profiled kernel per planned launch: a decode step's fused norms, conv updates and state
  updates; not an attention whose profiled SDPA backend runs other kernels than the plan's),

      library_fixed = (their measured time + their kernels x gap - the plan's device time of those ops
                       without it) / their kernels,

  median over the same graph records.
- ``memory.dram.path.strided_copy`` and ``memory.dram.path.expand_copy``: the attained bandwidth of
  ATen's non-vectorized copy kernel (``elementwise_kernel<128, 4, ... direct_copy_kernel_cuda>``) copying
  a non-contiguous view: mamba-ssm MHA's repeat_interleave of the interleaved cache's k and v (strided)
  and Hugging Face's repeat_kv of an expanded view (each row written to H / G heads). A decode step's
  only such copies are these (the profiles: as many kernels as the plan's repeat_kv launches, plus
  at B > 1 mamba-ssm's one-token cache write into a batch-strided slice), so per decode record

      path = the plan's repeat_kv bytes / (profiled non-vectorized copy time - the plan's fixed time of
             those launches)

  (bytes read + written, as the cost rule counts them), median over the decode records of that path.

- ``launch.host.backward_launch``: the host time per backward kernel launch of an eager train step
  (``analytic/workloads/train_host.py``). In a host-bound train record the step time is the host's
  issue time, forward and backward, so per record

      backward_launch = (step time - the plan's host time without the runtime terms - its op calls x
                         their module terms, at the values derived above) / the plan's backward launches,

  median over the host-bound train records of the module runtimes. It is derived after the module
  terms (a train record's forward pays them as a prefill step does) and held out with them.

``derive`` returns the values (those with records) as ``measured:`` entries with their method;
``held_out_spec`` is a spec whose values come from the records of the other models only
(``Spec.model_validate(hwspecs.fragment.with_measured(...))``: the spec mechanism, no hand edit).
Predictions made to derive are on the spec with these three keys removed (``base_spec``), so that a
value in the spec never feeds its own derivation.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..analytic.runtime import FORWARD_PHASES, RUNTIMES
from ..hwspecs.schema import Spec
from ..hwspecs.units import format_quantity, parse
from ..measure.models.kernel_map import measured_profile

HOST_BOUND_SHARE = 0.5  # GPU idle for at least half the step: the host sets the pace
FIXED_BOUND_SHARE = 0.5  # the plan's latency class at least half the step's device time: fixed costs set it
MODULE_KEY = {"hf-eager": "launch.host.hf_module", "mamba-ssm": "launch.host.ssm_module"}
# mamba-ssm's modules' forward per op call, from the standalone block cases (block_rows): block op -> key
FORWARD_KEY = {"block:mamba1": "launch.host.ssm_forward", "block:mamba2": "launch.host.ssm_forward_mamba2",
               "block:mamba3": "launch.host.ssm_forward_mamba3"}
# module classes a runtime charges the op calls of some block kinds instead (analytic/runtime.py)
KIND_KEY = {"launch.host.hf_ssm_module": "launch.host.hf_module"}  # kind key -> the runtime's general key
GEMM_KEY = "launch.gemm_fixed"
BACKWARD_KEY = "launch.host.backward_launch"
OPTIMIZER = "adamw"  # the op of a train record run with ``optimizer`` (measure/models/steps.py: AdamW, foreach)
LIB_KEY = "launch.library_fixed"
PATH_KEY = {"repeat_interleave": "memory.dram.path.strided_copy", "torch_eager": "memory.dram.path.expand_copy"}
KEYS = (*MODULE_KEY.values(), *KIND_KEY, GEMM_KEY, LIB_KEY, *PATH_KEY.values(), BACKWARD_KEY)  # BACKWARD_KEY after the module keys
FORWARD_KEYS = tuple(FORWARD_KEY.values())  # from block cases, not model records: a spec value to the model terms
# ATen's non-vectorized copy kernel (a copy out of a non-contiguous view), as the profiler names it
STRIDED_COPY_KERNEL = re.compile(r"elementwise_kernel<128, 4,.*direct_copy_kernel_cuda")


def base_spec(spec: Spec, keys: tuple[str, ...] = KEYS) -> Spec:
    """``spec`` without measured values at ``keys`` (default: those derived here from model records)."""
    data = spec.model_dump(mode="python", exclude_none=True)
    data["measured"] = [m for m in data.get("measured", []) if m["key"] not in keys]
    return Spec.model_validate(data)


def known_values(spec: Spec, keys: tuple[str, ...] = FORWARD_KEYS) -> dict[str, float]:
    """The spec's measured values (seconds) at ``keys``: the forward terms the model terms are derived beside."""
    return {m.key: parse(m.value, "time") for m in spec.measured if m.key in keys}


def flash_attn_of(rec: dict) -> bool:
    """Whether the record's mamba-ssm modules ran with flash-attn: False where the run's metadata lists
    flash_attn without a version (not installed: mamba-ssm's MHA takes its SDPA fallback); True for other
    runners and where the metadata does not say."""
    versions = rec.get("_versions") or {}
    return not (rec.get("runner") == "mamba_ssm" and "flash_attn" in versions and not versions["flash_attn"])


def predict_record(rec: dict, spec: Spec) -> dict:
    """The prediction of a whole-model record's point on ``spec`` with the record's runtime and software (and
    the AdamW step where the record ran one)."""
    from ..analytic.workloads.models import get_model
    from ..analytic.workloads.report import predict

    return predict(get_model(rec["model"]), spec, rec["phase"], int(rec["batch"]), int(rec["seqlen"]),
                   with_searches=False, runtime=rec["runtime"], dtype=rec.get("dtype") or "bf16",
                   flash_attn=flash_attn_of(rec), optimizer=OPTIMIZER if rec.get("optimizer") else None)


def rows_of(records: list[dict], spec_for: Callable[[dict], Spec]) -> list[dict[str, Any]]:
    """One row per ok record of a runtime with a derived term: the record's value of that term."""
    rows = []
    for r in sorted(records, key=lambda r: r["key"]):
        if r["status"] != "ok" or not (r.get("profile") or {}).get("launches"):
            continue
        spec = base_spec(spec_for(r))
        if r["phase"] == "decode":
            rows += _path_rows(r, spec)
        if r["runtime"] not in MODULE_KEY and r["runtime"] != "cuda-graph":
            continue
        p = predict_record(r, spec)
        # parts under the current kernel table (kernel_map.measured_profile: a rule added since the run applies)
        a, prof, t = p["total"]["achievable"], measured_profile(r), float(r["time_s"]["median"])
        row = {"key": r["key"], "model": r["model"], "runtime": r["runtime"], "phase": r["phase"], "file": r["_file"],
               "date": str(r.get("started_utc") or "")[:10], "spec": spec.id, "measured_s": t,
               "busy_s": prof["busy_s"], "host_idle_share": prof["host_idle_s"] / t,
               "launches_measured": prof["launches"], "launches_plan": sum(o["launches"] for o in p["ops"]),
               "module_calls": r.get("module_calls"), "op_calls_plan": sum(o["module_calls"] for o in p["ops"]),
               "plan_host_s": a["host_s"], "plan_gpu_s": a["gpu_s"]}
        if r["runtime"] in MODULE_KEY:
            # the module terms from forward-only steps; a train step's host time also holds its backward's
            # (custom autograd functions' backward, the engine's node walk): its own term, per backward launch
            calls = _calls_by_key(r, p)
            kind = [k for k in calls if k in KIND_KEY]
            host_bound = row["host_idle_share"] >= HOST_BOUND_SHARE
            if r["phase"] == "train":
                n_bwd = float(a.get("backward_launches") or 0.0)
                row.update(term=BACKWARD_KEY, usable=host_bound and n_bwd > 0, residual_s=t - a["host_s"],
                           calls_by_key=calls, backward_launches=n_bwd, value_s=float("nan"))
            else:
                # a forward step of a runtime whose forward classes come from the standalone blocks
                # (block_rows) is a check of them, not a source
                forward = r["phase"] in FORWARD_PHASES and bool(RUNTIMES[r["runtime"]].forward_module_class)
                row.update(term=kind[0] if kind else MODULE_KEY[r["runtime"]], usable=host_bound and not forward,
                           residual_s=t - a["host_s"], calls_by_key=calls,
                           value_s=(t - a["host_s"]) / row["op_calls_plan"])
        else:
            rows += _graph_rows(row, p, prof)
            continue
        rows.append(row)
    return rows


def block_rows(files: list, spec_for: Callable[[str | None], Spec]) -> list[dict[str, Any]]:
    """One row per ok forward case of a mamba-ssm module measured alone (``block:mamba1/2/3`` fwd, eager;
    ``files``: ``measure.results.ResultFile``s, the latest record of each key counted; ``spec_for``: the spec
    of a device name): its host time per op call beyond the ops' own host classes,

        value = (measured time - the plan's host time of its op calls) / the plan's op calls,

    usable where the plan's own device time is at most ``1 - HOST_BOUND_SHARE`` of the measured time (the
    GPU idles at least that share of the call, so the call's time is the host's issue time). The plan is
    ``blocks.composed_bound`` without the module term, on the spec without the forward keys."""
    from ..analytic.workloads.blocks import composed_bound
    from ..measure.results import latest_by_key, measured_on

    latest = [(dev, key, c) for dev in sorted({measured_on(rf) for rf in files} - {None})
              for key, c in sorted(latest_by_key(files, device=dev).items())]
    out = []
    for dev, key, c in latest:
        if c.get("op") not in FORWARD_KEY or c.get("mode") != "fwd" or c.get("status") != "ok":
            continue
        spec = base_spec(spec_for(dev), FORWARD_KEYS)
        b = composed_bound(c["op"], c["dims"], spec, impl=c.get("impl"), mode="fwd", dtype=c["dtype"],
                           module_runtime=False)
        if b["launch"] != "eager":
            continue
        t = float(c["time_s"]["median"])
        host = sum(x["host_ops_s"] for x in b["calls"])
        gpu = sum(x["gpu_s"] for x in b["calls"])
        calls = sum(float(x["module_calls"]) for x in b["calls"])
        out.append({"key": key, "model": None, "runtime": "mamba-ssm", "phase": "prefill", "file": str(c.path),
                    "date": str(c.get("started_utc") or "")[:10], "spec": spec.id, "measured_s": t, "busy_s": gpu,
                    "host_idle_share": max(0.0, 1.0 - gpu / t), "launches_measured": None,
                    "launches_plan": sum(float(x["count"]) for x in b["calls"]), "module_calls": None,
                    "op_calls_plan": calls, "plan_host_s": host, "plan_gpu_s": gpu, "term": FORWARD_KEY[c["op"]],
                    "usable": gpu <= (1.0 - HOST_BOUND_SHARE) * t, "residual_s": t - host,
                    "value_s": (t - host) / calls})
    return out


def _graph_rows(row: dict, p: dict, prof: dict) -> list[dict[str, Any]]:
    """The GEMM and library-kernel rows of a CUDA-graph record (``row``: its common fields; ``p`` its
    prediction on the base spec; ``prof`` its profile)."""
    from ..analytic.execution import host_class
    from ..hwspecs.schema import LIBRARY_KERNEL_CLASSES
    from ..measure.models.kernel_map import part_of_op

    a = p["total"]["achievable"]
    gap = max(0.0, float(prof["host_idle_s"])) / float(prof["launches"])
    fixed_share = float((a.get("time_by_class_s") or {}).get("latency", 0.0)) / a["gpu_s"] if a["gpu_s"] else 0.0
    common = {**row, "gap_s": gap, "fixed_share": fixed_share, "usable": fixed_share >= FIXED_BOUND_SHARE}
    parts = prof.get("parts") or {}
    by_part: dict[str, list[dict]] = {}
    for o in p["ops"]:
        by_part.setdefault(part_of_op(o["op"], o.get("impl")), []).append(o)
    out = []
    gemm = parts.get("gemm")
    if gemm and gemm.get("launches"):
        planned = sum(o["achievable"]["gpu_s"] for o in by_part.get("gemm", []))
        out.append({**common, "term": GEMM_KEY, "gemm_measured_s": gemm["time_s"], "gemm_plan_s": planned,
                    "gemm_kernels": gemm["launches"],
                    "value_s": (gemm["time_s"] + gap * gemm["launches"] - planned) / gemm["launches"]})
    used, measured, planned, kernels = [], 0.0, 0.0, 0.0
    for part, ops in sorted(by_part.items()):
        m = parts.get(part)
        ops = [o for o in ops if o["launches"] > 0]
        if (not m or not ops or m.get("launches") != sum(o["launches"] for o in ops)
                or any(host_class(o["op"], o["impl"], mode=o["mode"]) not in LIBRARY_KERNEL_CLASSES
                       or o["achievable"]["bottleneck"] != "latency" for o in ops)):
            continue
        used.append(part)
        measured += m["time_s"]
        planned += sum(o["achievable"]["gpu_s"] for o in ops)
        kernels += m["launches"]
    if kernels:
        out.append({**common, "term": LIB_KEY, "lib_parts": used, "lib_measured_s": measured, "lib_plan_s": planned,
                    "lib_kernels": kernels, "value_s": (measured + gap * kernels - planned) / kernels})
    return out


def _calls_by_key(r: dict, p: dict) -> dict[str, float]:
    """The prediction ``p``'s op calls per module host key of the record's runtime."""
    from ..analytic.runtime import RUNTIMES
    from ..analytic.workloads.models import get_model

    rt, model = RUNTIMES[r["runtime"]], get_model(r["model"])
    out: dict[str, float] = {}
    for o in p["ops"]:
        key = f"launch.host.{rt.module_class_of(model.block(o['block']).kind if o['block'] else None, r['phase'])}"
        out[key] = out.get(key, 0.0) + float(o["module_calls"])
    return out


def _path_rows(r: dict, spec: Spec) -> list[dict[str, Any]]:
    """The DRAM-path rows of a decode record: one per repeat_kv implementation in its plan."""
    from ..analytic.achievable import AchievableTable

    p = predict_record(r, spec)
    bw = float(AchievableTable.of([spec]).dram_bw[0])
    prof = measured_profile(r)
    kernels = [k for k in prof["kernels"] if STRIDED_COPY_KERNEL.search(k["name"])]
    measured = sum(float(k["time_s"]) for k in kernels)
    out = []
    for impl, key in PATH_KEY.items():
        ops = [o for o in p["ops"] if o["op"] == "repeat_kv" and o["impl"] == impl]
        if not ops or not kernels:
            continue
        nbytes = sum(float(o["bytes_executed"]) for o in ops)
        fixed = sum(float(o["achievable"]["gpu_s"]) - float(o["achievable"]["dram_bytes"]) / bw for o in ops)
        out.append({"key": r["key"], "model": r["model"], "runtime": r["runtime"], "phase": r["phase"],
                    "file": r["_file"], "date": str(r.get("started_utc") or "")[:10], "spec": spec.id,
                    "measured_s": float(r["time_s"]["median"]), "busy_s": prof["busy_s"],
                    "host_idle_share": prof["host_idle_s"] / float(r["time_s"]["median"]),
                    "launches_measured": sum(float(k["count"]) for k in kernels),
                    "launches_plan": sum(o["launches"] for o in ops), "module_calls": r.get("module_calls"),
                    "op_calls_plan": sum(o["module_calls"] for o in ops), "plan_host_s": 0.0, "plan_gpu_s": fixed,
                    "term": key, "usable": measured > fixed, "copy_measured_s": measured, "copy_bytes": nbytes,
                    "value_s": nbytes / (measured - fixed) if measured > fixed else float("nan")})
    return out


def derive(rows: list[dict], exclude_model: str | None = None, keys: tuple[str, ...] = KEYS,
           known: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """``measured:`` entries of the terms ``keys`` from ``rows`` (those of ``exclude_model`` left out), beside
    the values ``known`` (seconds: the forward terms of the spec, ``known_values``); a term without usable
    rows is left out (a positive median only: a spec value must be > 0)."""
    out, found = [], dict(known or {})
    for key in keys:
        use = [r for r in rows if r["term"] == key and r["usable"]
               and (exclude_model is None or r["model"] != exclude_model)]
        if key in KIND_KEY:  # the kind's calls carry the residual beyond the other calls at the general value
            general = found.get(KIND_KEY[key])
            if general is None:
                continue
            use = [{**r, "value_s": (r["residual_s"] - general * (sum(r["calls_by_key"].values()) - r["calls_by_key"][key]))
                    / r["calls_by_key"][key]} for r in use]
        if key == BACKWARD_KEY:  # the backward's launches carry the residual beyond the forward's module terms
            use = [{**r, "value_s": v} for r in use if (v := _backward_value(r, found)) is not None]
        if not use:
            continue
        v = statistics.median(r["value_s"] for r in use)
        if not v > 0:
            continue
        kind = "bandwidth" if key in PATH_KEY.values() else "time"
        text = format_quantity(v, kind, digits=4)
        if abs(parse(text, kind) - v) > 1e-3 * v:
            raise RuntimeError(f"{key}: formatted {v} as {text!r}, which does not read back")
        if key in (GEMM_KEY, LIB_KEY):
            what = ("CUDA-graph decode records whose plan is mostly fixed costs (latency class >= "
                    f"{FIXED_BOUND_SHARE:.0%} of its device time), "
                    + ("(profiled GEMM kernel time + GEMM kernels x the record's gap between graph nodes - the plan's "
                       "GEMM device time without it) / GEMM kernels" if key == GEMM_KEY else
                       "over the parts whose plan ops are all latency-bound library kernels (Triton, CUDA extension) "
                       "launched once per profiled kernel, (their profiled kernel time + their kernels x the record's "
                       "gap between graph nodes - the plan's device time of those ops without it) / their kernels"))
        elif kind == "bandwidth":
            what = ("decode records, the plan's repeat_kv bytes (read + written) / (profiled non-vectorized copy "
                    "kernel time, elementwise_kernel<128, 4> direct_copy, - the plan's fixed time of those launches)")
        elif key == BACKWARD_KEY:
            what = ("host-bound whole-model train records (GPU idle >= "
                    f"{HOST_BOUND_SHARE:.0%} of the step), (step median - the plan's host time without the runtime terms - "
                    "its op calls x their module terms derived here) / the plan's backward kernel launches")
        elif key in FORWARD_KEY.values():
            op = next(o for o, k in FORWARD_KEY.items() if k == key)
            what = (f"forward cases of the mamba-ssm module measured alone ({op} fwd, eager) whose plan's device time "
                    f"is at most {1 - HOST_BOUND_SHARE:.0%} of the measured time, (measured time - the plan's host time "
                    "of its op calls) / the plan's op calls")
        elif key in KIND_KEY:
            what = ("host-bound whole-model records with op calls of the kind (GPU idle >= "
                    f"{HOST_BOUND_SHARE:.0%} of the step), (step median - the plan's host time without the module "
                    f"terms - its other op calls x {KIND_KEY[key]} {found[KIND_KEY[key]] * 1e6:.4g} us) / the kind's op calls")
        else:
            what = ("host-bound whole-model records (GPU idle >= "
                    f"{HOST_BOUND_SHARE:.0%} of the step), (step median - the plan's host time without the module "
                    "term) / the plan's op calls"
                    + (" (decode steps only: the forward's per op call is the ssm_forward terms')"
                       if key == MODULE_KEY["mamba-ssm"] else ""))
        files = sorted({Path(r["file"]).as_posix() for r in use})
        each = "; ".join(f"{r['key']} " + (f"{r['value_s'] / 1e12:.4g} TB/s" if kind == "bandwidth" else
                                           f"{r['value_s'] * 1e6:.4g} us") for r in use)
        found[key] = parse(text, kind)
        out.append({"key": key, "value": text, "date": max(r["date"] for r in use),
                     "method": f"calibrate/runtime_host.py: {what}, median of {len(use)}: {each}; files {', '.join(files)}"})
    return out


def _module_host(calls_by_key: dict[str, float], found: dict[str, float]) -> float | None:
    """Host seconds of a record's op calls at the module terms ``found`` (a key without a value pays its first
    stand-in with one, as ``runtime.call_host_s`` does: ``Runtime.module_stand_ins``); None where a term is
    missing."""
    total = 0.0
    for k, n in calls_by_key.items():
        v = next((found[s] for s in _stand_ins(k) if s in found), None)
        if v is None:
            return None
        total += n * v
    return total


def _stand_ins(key: str) -> list[str]:
    """``key`` (``launch.host.<module class>``) and the keys that stand in for it, in order."""
    cls = key.removeprefix("launch.host.")
    rt = next((rt for rt in RUNTIMES.values() if cls in rt.classes()), None)
    return [f"launch.host.{c}" for c in rt.module_stand_ins(cls)] if rt else [key]


def _backward_value(row: dict, found: dict[str, float]) -> float | None:
    """A train row's host time per backward launch at the module terms ``found``: its residual beyond the
    forward's op calls at those terms, over its backward launches; None where a term is missing."""
    m = _module_host(row["calls_by_key"], found)
    return None if m is None else (row["residual_s"] - m) / row["backward_launches"]


def with_backward_values(rows: list[dict], entries: list[dict]) -> list[dict]:
    """``rows`` with each train row's own value of ``launch.host.backward_launch`` at the module terms of
    ``entries`` (``derive``'s; NaN where a term is missing): what the median of ``derive`` is taken over."""
    found = {e["key"]: parse(e["value"], "time") for e in entries
             if e["key"] in (*FORWARD_KEY.values(), *MODULE_KEY.values(), *KIND_KEY)}
    out = []
    for r in rows:
        if r["term"] == BACKWARD_KEY:
            v = _backward_value(r, found)
            r = {**r, "value_s": float("nan") if v is None else v}
        out.append(r)
    return out


def held_out_spec(spec: Spec, rows: list[dict], model: str) -> tuple[Spec, list[dict]]:
    """``spec`` with the terms derived from the other models' records (the entries used)."""
    from ..hwspecs.fragment import with_measured

    entries = derive(rows, exclude_model=model, known=known_values(spec))
    base = base_spec(spec)
    return (Spec.model_validate(with_measured(base, tuple(entries))) if entries else base), entries
