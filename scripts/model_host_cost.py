"""Host cost per Hugging Face module call (``launch.host.hf_module``) measured from the host-bound
records of a whole-model run, and its held-out errors (issue #15). No GPU: stored records only.

    python scripts/model_host_cost.py --results results/h200/2026-12-03/models --out DIR

The ``hf-eager`` runtime (analytic/runtime.py) predicts a step's host time as the plan's eager host
time (its launches at the spec's launch.host.<class>) plus op calls x launch.host.hf_module. Where a
record is host-bound (the GPU waits for the host for at least HOST_BOUND_SHARE of the step:
profile.host_idle_s / median), the step time is the host's issue time, so

    hf_module = (step time - plan eager host time) / plan op calls        (one value per record)

is a measurement of the same quantity the runtime probe measures on a toy model (it also absorbs the
kernels HF issues beyond the plan's fused ops: the table shows measured launches per step against the
plan's). The value written (DIR/measured-hf_module-<spec>.yaml: not a probe file, a fragment with one measured:
entry that ``ssmbench specs new --probe`` can merge) is the median over all host-bound records; the
errors reported for it are held out: each model is predicted with the median of the OTHER models'
host-bound records only. Writes DIR/hf_module.md and DIR/hf_module.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import yaml
from ssmbench.analytic.workloads.models import get_model
from ssmbench.analytic.workloads.report import predict
from ssmbench.hwspecs import spec_for_device
from ssmbench.hwspecs.units import format_quantity, parse
from ssmbench.measure.models.records import find_model_runs, latest_records
from ssmbench.measure.results import jsonable

from ssmbench.provenance import analysis_meta

HOST_BOUND_SHARE = 0.5  # GPU idle for at least half the step: the host sets the pace
KEY = "launch.host.hf_module"


def rows_of(records: list[dict]) -> list[dict]:
    rows = []
    for r in sorted(records, key=lambda r: r["key"]):
        if r["status"] != "ok" or r["runtime"] not in ("hf-eager", "mamba-ssm"):
            continue
        spec = spec_for_device(r["_device"])
        p = predict(get_model(r["model"]), spec, r["phase"], int(r["batch"]), int(r["seqlen"]),
                    with_searches=False, runtime=r["runtime"], dtype=r.get("dtype") or "bf16")
        a, prof, t = p["total"]["achievable"], r["profile"], float(r["time_s"]["median"])
        calls = sum(o["count"] for o in p["ops"])
        rows.append({"key": r["key"], "model": r["model"], "runtime": r["runtime"], "phase": r["phase"],
                     "file": r["_file"], "spec": spec.id, "measured_s": t, "busy_s": prof["busy_s"],
                     "host_idle_share": prof["host_idle_s"] / t, "host_bound": prof["host_idle_s"] / t >= HOST_BOUND_SHARE,
                     "launches_measured": prof["launches"], "launches_plan": sum(o["launches"] for o in p["ops"]),
                     "module_calls": r.get("module_calls"), "op_calls_plan": calls,
                     "host_per_launch_s": t / prof["launches"], "plan_host_s": a["host_s"], "plan_gpu_s": a["gpu_s"],
                     "hf_module_s": (t - a["host_s"]) / calls})
    return rows


def held_out(rows: list[dict]) -> list[dict]:
    """Each hf-eager record predicted with hf_module from the other models' host-bound records."""
    out = []
    hf = [r for r in rows if r["runtime"] == "hf-eager"]
    for r in hf:
        train = [x["hf_module_s"] for x in hf if x["host_bound"] and x["model"] != r["model"]]
        if not train:
            continue
        v = statistics.median(train)
        pred = max(r["plan_host_s"] + r["op_calls_plan"] * v, r["plan_gpu_s"])
        before = max(r["plan_host_s"], r["plan_gpu_s"])
        out.append({"key": r["key"], "hf_module_s": v, "from": len(train), "measured_s": r["measured_s"],
                    "predicted_s": pred, "error": pred / r["measured_s"] - 1,
                    "error_without": before / r["measured_s"] - 1, "host_bound": r["host_bound"]})
    return out


def fragment(rows: list[dict]) -> dict:
    hb = [r for r in rows if r["runtime"] == "hf-eager" and r["host_bound"]]
    v = statistics.median(r["hf_module_s"] for r in hb)
    text = format_quantity(v, "time", digits=4)
    if abs(parse(text, "time") - v) > 1e-3 * v:
        raise RuntimeError(f"{KEY}: formatted {v} as {text!r}, which does not read back")
    each = "; ".join(f"{r['key']} {r['hf_module_s'] * 1e6:.4g} us" for r in hb)
    files = sorted({Path(r["file"]).as_posix() for r in hb})
    return {"schema_version": 1, "kind": "ssmbench-runtime-probe",
            "label": "measurement (host cost per op call of Hugging Face eager, from whole-model records)",
            "measured": [{"key": KEY, "value": text, "date": "2026-12-03",
                          "method": ("scripts/model_host_cost.py: host-bound whole-model records (GPU idle >= "
                                     f"{HOST_BOUND_SHARE:.0%} of the step), (step median - the plan's eager host time) / "
                                     f"the plan's op calls, median of {len(hb)}: {each}; files {', '.join(files)}")}],
            "spec": hb[0]["spec"]}


def _ms(x):
    return f"{x * 1e3:.2f} ms"


def markdown(rows, ho, frag) -> str:
    m = frag["measured"][0]
    lines = ["# Host time of whole-model eager steps (measurement) and launch.host.hf_module", "",
             f"Measured {KEY} = {m['value']} (measurement; {m['method']}).", "",
             ("| record | step (measurement) | kernel time | GPU idle | launches measured / plan | module calls / plan op calls "
              "| step / launch | plan host (achievable) | (step - plan host) / op call |"), "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['key']} | {_ms(r['measured_s'])} | {_ms(r['busy_s'])} | {r['host_idle_share']:.0%} | "
                     f"{r['launches_measured']:.0f} / {r['launches_plan']:.0f} | {r['module_calls']} / {r['op_calls_plan']} | "
                     f"{r['host_per_launch_s'] * 1e6:.1f} us | {_ms(r['plan_host_s'])} | {r['hf_module_s'] * 1e6:.1f} us |")
    lines += ["", "Held out (hf-eager; each model predicted with the median of the other models' host-bound records):", "",
              "| record | hf_module used | measurement | achievable estimate with it | error | error without it |",
              "|---|---|---|---|---|---|"]
    for h in ho:
        lines.append(f"| {h['key']} | {h['hf_module_s'] * 1e6:.1f} us (from {h['from']}) | {_ms(h['measured_s'])} | "
                     f"{_ms(h['predicted_s'])} | {h['error']:+.1%} | {h['error_without']:+.1%} |")
    e = sorted(abs(h["error"]) for h in ho)
    if e:
        lines += ["", (f"Held-out |error|: median {statistics.median(e):.1%}, max {e[-1]:.1%} over {len(e)} records "
                       f"(without hf_module: median {statistics.median(abs(h['error_without']) for h in ho):.1%}).")]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    paths = find_model_runs(a.results)
    if not paths:
        print(f"{a.results}: no model-run files", file=sys.stderr)
        return 2
    rows = rows_of(latest_records(paths))
    ho = held_out(rows)
    frag = fragment(rows)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "hf_module.md").write_text(markdown(rows, ho, frag), encoding="utf-8")
    (out / "hf_module.json").write_text(json.dumps(jsonable({"meta": analysis_meta(inputs=paths), "rows": rows, "held_out": ho,
                                                                   "fragment": frag}), indent=1) + "\n",
                                        encoding="utf-8")
    spec = frag.pop("spec")
    (out / f"measured-hf_module-{spec}.yaml").write_text(yaml.safe_dump(frag, sort_keys=False), encoding="utf-8")
    print(f"wrote {out}/hf_module.md, hf_module.json, measured-hf_module-{spec}.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
