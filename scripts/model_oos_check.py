"""Whole-model estimates written before a run, held against the run (#15: models and shapes outside the
calibration set).

Usage:
  python scripts/model_oos_check.py --predict-suite SUITE --hw SPEC [--calibration PROFILE] --json OUT
  python scripts/model_oos_check.py --check CHARACTERIZE_JSON --predicted FILE [--json OUT]

``--predict-suite``: before the run, every case of a model suite (measure/models/suite.py) predicted on SPEC the
way ``ssmbench characterize`` predicts a record of it (calibrate/runtime_host.predict_record: the case's runtime,
the AdamW step where the entry runs one; then the calibrated profile, calibrate/apply.add_calibration): the
achievable estimate (host and device time) and, with a profile, the calibrated estimate. The spec's runtime
terms are its own (read off earlier records, none of them at these shapes where the suite says so).

``--check``: after the run, ``ssmbench characterize --results DIR --hw SPEC --calibration PROFILE --format json``
of the run's folder (one standing record per key: the median of three where a key was measured three times,
measure/models/records.standing_records) against the estimates written before it: per key, measured step and
pace (host-bound: the GPU idle for at least half the step in its profile), the estimate before the run and its
error (estimate / measured - 1); per phase and pace the median and p90 |error|; and whether the current code
still gives the estimates written before the run (characterize's values beside them).
Labels: measurement (CUDA events, median per step), achievable estimate, calibrated estimate.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def predict_suite(suite_path: str, hw: str, calibration: str | None) -> dict:
    from ssmbench.calibrate.runtime_host import predict_record
    from ssmbench.hwspecs.loader import get_spec
    from ssmbench.measure.models.records import record_key
    from ssmbench.measure.models.suite import cases_of, load_suite

    suite = load_suite(suite_path)
    spec = get_spec(hw)
    profile = None
    if calibration:
        from ssmbench.calibrate.apply import add_calibration
        from ssmbench.calibrate.profile import read_profile
        profile = read_profile(calibration)
    rows: dict[str, dict] = {}
    for entry in suite.entries:
        for c in cases_of(entry):
            key = record_key(entry["model"], entry["runner"], c.phase, c.runtime, c.batch, c.seqlen)
            if key in rows:
                continue
            rec = {"key": key, "model": entry["model"], "runner": entry["runner"], "phase": c.phase,
                   "runtime": c.runtime, "batch": c.batch, "seqlen": c.seqlen, "dtype": suite.dtype,
                   "optimizer": bool(entry.get("optimizer")) if c.phase == "train" else None}
            p = predict_record(rec, spec)
            if profile is not None:
                add_calibration(p, profile, spec)
            ach = p["total"]["achievable"]
            cal = p["total"].get("calibrated") or {}
            rows[key] = {"phase": c.phase, "achievable_s": ach["time_s"], "achievable_host_s": ach["host_s"],
                         "achievable_gpu_s": ach["gpu_s"], "calibrated_s": cal.get("estimate_s")}
    from ssmbench.provenance import analysis_meta
    inputs = [Path(suite_path)] + ([Path(calibration)] if calibration else [])
    return {"meta": analysis_meta(inputs=inputs),
            "label": "achievable and calibrated estimates written before the run", "suite": suite_path,
            "spec": spec.id, "calibration": calibration, "cases": rows}


def _stats(errors: list[float]) -> dict:
    a = np.abs(np.asarray(errors, dtype=float))
    if not len(a):
        return {"n": 0, "median_abs": None, "p90_abs": None}
    return {"n": len(a), "median_abs": float(np.median(a)), "p90_abs": float(np.percentile(a, 90))}


def check(char_path: str, predicted_path: str) -> dict:
    char = json.loads(Path(char_path).read_text())
    pred = json.loads(Path(predicted_path).read_text())
    rows = []
    for r in char["records"]:
        before = pred["cases"].get(r["key"])
        if before is None:
            continue
        est = before["calibrated_s"] or before["achievable_s"]
        rows.append({"key": r["key"], "phase": r["phase"], "measured_s": r["measured_s"], "pace": r["measured_pace"],
                     "estimate_before_s": est, "error": est / r["measured_s"] - 1,
                     "achievable_before_s": before["achievable_s"],
                     "estimate_now_s": r["calibrated_s"] or r["achievable_s"]})
    summary = {}
    for phase in sorted({r["phase"] for r in rows}):
        sel = [r for r in rows if r["phase"] == phase]
        summary[phase] = {"all": _stats([r["error"] for r in sel]),
                          **{pace: _stats([r["error"] for r in sel if r["pace"] == pace]) for pace in ("gpu", "host")}}
    missing = sorted(set(pred["cases"]) - {r["key"] for r in rows})
    from ssmbench.provenance import analysis_meta
    return {"meta": analysis_meta(inputs=[Path(char_path), Path(predicted_path)]),
            "label": "estimates written before the run (calibrated estimate) against the run (measurement)",
            "spec": pred["spec"], "rows": rows, "summary": summary, "not_measured": missing,
            "unchanged": all(abs(r["estimate_now_s"] / r["estimate_before_s"] - 1) < 1e-6 for r in rows)}


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def markdown(doc: dict) -> str:
    out = ["| record | pace | measured | estimate before the run | error |", "|---|---|---|---|---|"]
    for r in sorted(doc["rows"], key=lambda r: r["key"]):
        out.append(f"| {r['key']} | {r['pace']} | {r['measured_s'] * 1e3:.2f} ms | "
                   f"{r['estimate_before_s'] * 1e3:.2f} ms | {100 * r['error']:+.1f} % |")
    out += ["", "| phase | n | median / p90 abs error | GPU-bound n, median / p90 | host-bound n, median / p90 |",
            "|---|---|---|---|---|"]
    for phase, s in doc["summary"].items():
        cells = [f"{s[k]['n']}, {_pct(s[k]['median_abs'])} / {_pct(s[k]['p90_abs'])}" for k in ("gpu", "host")]
        out.append(f"| {phase} | {s['all']['n']} | {_pct(s['all']['median_abs'])} / {_pct(s['all']['p90_abs'])} | "
                   f"{cells[0]} | {cells[1]} |")
    same = "yes" if doc["unchanged"] else "no (see estimate_now_s in the JSON)"
    labels = (f"Spec {doc['spec']}. Labels: measurement (CUDA events, median per step; pace from its profile), "
              "calibrated estimate written before the run (the achievable estimate where no profile covered the "
              "model); error = estimate / measured - 1.")
    out += ["", labels, f"The current code gives the estimates written before the run: {same}."]
    if doc["not_measured"]:
        out.append(f"Not measured (no ok record): {', '.join(doc['not_measured'])}.")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--predict-suite", metavar="SUITE", help="estimate a model suite's cases before the run")
    mode.add_argument("--check", metavar="CHARACTERIZE_JSON", help="`ssmbench characterize --format json` of the run")
    ap.add_argument("--hw", default="h200-sxm", help="spec to predict on (with --predict-suite; default h200-sxm)")
    ap.add_argument("--calibration", metavar="PROFILE", help="calibrated profile (with --predict-suite)")
    ap.add_argument("--predicted", metavar="FILE",
                    help="the --predict-suite JSON written before the run (with --check)")
    ap.add_argument("--json", metavar="OUT", help="write the result as JSON")
    args = ap.parse_args(argv)
    from ssmbench.errors import UserError
    try:
        if args.json:  # a bad output path fails before any work
            from ssmbench.files import check_output_file
            check_output_file(args.json, "--json")
        if args.predict_suite:
            doc = predict_suite(args.predict_suite, args.hw, args.calibration)
            print(f"{len(doc['cases'])} cases estimated on {doc['spec']}")
        else:
            if not args.predicted:
                ap.error("--check needs --predicted FILE")
            doc = check(args.check, args.predicted)
            print(markdown(doc), end="")
        if args.json:
            Path(args.json).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
            print(f"wrote {args.json}")
    except KeyError as exc:
        print(f"model_oos_check: the input lacks the field {exc}; expected --check to be `ssmbench characterize "
              "--format json` output and --predicted a --predict-suite JSON", file=sys.stderr)
        return 2
    except (UserError, OSError, json.JSONDecodeError) as exc:
        print(f"model_oos_check: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
