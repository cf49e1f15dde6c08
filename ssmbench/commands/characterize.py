"""Command ``characterize``: whole-model records (``measure/models``, model-run files under a folder)
against their predictions, per part of the step: time shares, bottleneck class predicted and as
measured, the hardware change that would move each class, and model-level errors of the achievable
and calibrated estimates (``calibrate/characterize.py``). Markdown (default), JSON, and a plot."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import UserError
from ..files import check_output_file
from ..output import si


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def _share(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _loo(st: dict | None) -> str:
    if not st or not st["n"]:
        return ""
    return (f", each of the {st['n']} records of keys measured three times or more against the median of its key's "
            f"other records: median {_share(st['median_abs'])}, p90 {_share(st['p90_abs'])}")


def _repeats_md(rep: dict | None) -> list[str]:
    if not rep or not rep["rows"]:
        return []
    bp = rep["by_pace"]
    text = "; ".join(f"{pace}-bound: {v['n_keys']} keys, spread median {_share(v['median_spread'])}, max "
                     f"{_share(v['max_spread'])}" + _loo(v.get("leave_one_out"))
                     for pace, v in (("GPU", bp["gpu"]), ("host", bp["host"])) if v["n_keys"])
    out = ["## Repeat measurements (measurement)", "",
           f"Keys measured in more than one record (every record of the folders, not only the latest): {text}. "
           f"Host-bound: the GPU idle for at least {rep['host_bound_share']:.0%} of the step. The spread "
           "(max - min) / median of one key's records is a floor under the error of any prediction judged on "
           "single records. Host Python step: the host's speed beside the records that carry a host reference "
           "(measure/models/host_reference.py: seconds per step of a plain Python loop, min / max over those "
           "records; the same host runs at ~30 and ~50 ns on one machine and ~63 ns on another, results/h200/2026-12-04).",
           "", "| key | records | min / median / max | spread | GPU idle | host Python step |", "|---|---|---|---|---|---|"]
    for r in rep["rows"]:
        py = r.get("host_python_s")
        host = f"{py[0] * 1e9:.1f} / {py[1] * 1e9:.1f} ns" if py else "-"
        out.append(f"| {r['key']} | {r['n']} | {si(r['min_s'], 's')} / {si(r['median_s'], 's')} / {si(r['max_s'], 's')} | "
                   f"{_share(r['spread'])} | {_share(r['idle_share'])} | {host} |")
    return out + [""]


def markdown(doc: dict) -> str:
    from ..calibrate.characterize import ENERGY_KINDS

    out = [f"# {doc['label']}", "",
           f"Class rule: a part is bound by the resource whose attained roofline it reaches to at least "
           f"{doc['rule']['roofline_fraction_bound']:.0%}, else by the largest compute engine where the engines "
           f"({', '.join(doc['rule']['engines'])}) together reach it; below that it is latency-bound "
           f"({doc['rule']['doc']}); the predicted class is judged at the {doc['rule']['predicted_time']}. "
           "Errors: prediction / measurement - 1.", ""]
    s = doc["summary"]
    out += ["## Summary", "", "| phase | estimate | n | median abs error | p90 abs error |", "|---|---|---|---|---|"]
    for phase, v in s["by_phase"].items():
        for kind in ("achievable", "calibrated"):
            st = v[kind]
            out.append(f"| {phase} | {kind} estimate | {st['n']} | {_share(st['median_abs'])} | {_share(st['p90_abs'])} |")
    if s.get("by_pace"):
        intro = ("Calibrated estimate by what set the measured step's pace (host-bound: the GPU idle for at least "
                 f"{s['host_bound_share']:.0%} of the step in its profile; the repeat measurements below show how far "
                 "single records of one key lie apart at each pace):")
        header = ("| phase | GPU-bound n | median abs error | p90 abs error | host-bound n | median abs error | "
                  "p90 abs error |")
        out += ["", intro, "", header, "|---|---|---|---|---|---|---|"]
        for phase, v in s["by_pace"].items():
            g, h = v["gpu"], v["host"]
            out.append(f"| {phase} | {g['n']} | {_share(g['median_abs'])} | {_share(g['p90_abs'])} | {h['n']} | "
                       f"{_share(h['median_abs'])} | {_share(h['p90_abs'])} |")
    out += ["", "| energy per step | n | median abs error | p90 abs error |", "|---|---|---|---|"]
    for kind, text in ENERGY_KINDS.items():
        st = s["energy"][kind]
        out.append(f"| {text} | {st['n']} | {_share(st['median_abs'])} | {_share(st['p90_abs'])} |")
    out += ["", f"Energy target: median abs error <= {s['targets']['energy_median_abs']:.0%}.", ""]
    out += ["", f"Bottleneck-class agreement, weighted by measured time share: "
            f"{_share(s['class_agreement_time_weighted'])} (target {s['targets']['class_agreement']:.0%}).", ""]
    ho = doc.get("held_out")
    if ho:
        keys = sorted({k for v in ho["terms_by_model"].values() for k in v})
        out += ["## Held out", "", f"Rule: {ho['rule']}.", "", "| model predicted | " + " | ".join(keys) + " |",
                "|---" * (len(keys) + 1) + "|"]
        out += [f"| {m} | " + " | ".join(v.get(k, "-") for k in keys) + " |" for m, v in sorted(ho["terms_by_model"].items())]
        out.append("")
    else:
        out += [("Runtime terms: the spec's values (derived from whole-model records, these included: in sample; "
                 "--held-out predicts each model with the other models' values)."), ""]
    out += ["## Model level", "",
            "| record | measurement | achievable estimate (host / device) | error | calibrated estimate | error | "
            "energy (measurement) | energy at the measured time (analytic / calibrated estimate) | "
            "energy, calibrated estimate at the calibrated time | class agreement |", "|---" * 10 + "|"]
    for r in doc["records"]:
        e = si(r["energy_measured_j"], "J") if r["energy_measured_j"] is not None else "-"
        pe = "-" if r["energy_at_measured_time_j"] is None else (
            f"{si(r['energy_at_measured_time_j'], 'J')} ({_pct(r['energy_at_measured_time_error'])})"
            + ("" if r["energy_calibrated_at_measured_time_j"] is None else
               f" / {si(r['energy_calibrated_at_measured_time_j'], 'J')} "
               f"({_pct(r['energy_calibrated_at_measured_time_error'])})"))
        cal = si(r["calibrated_s"], "s") if r["calibrated_s"] else f"- ({r['calibrated_note']})"
        ce = "-" if r.get("energy_calibrated_j") is None else (
            f"{si(r['energy_calibrated_j'], 'J')} ({_pct(r['energy_calibrated_error'])})")
        out.append(f"| {r['key']} | {si(r['measured_s'], 's')} | {si(r['achievable_s'], 's')} "
                   f"({si(r['achievable_host_s'], 's')} / {si(r['achievable_gpu_s'], 's')}) | "
                   f"{_pct(r['achievable_error'])} | {cal} | {_pct(r['calibrated_error'])} | {e} | {pe} | {ce} | "
                   f"{_share(r['class_agreement_share'])} |")
    out += ["", f"Energy prediction: {doc['records'][0]['energy_note'] if doc['records'] else '-'}.", ""]
    for r in doc["records"]:
        out += [f"## {r['key']}", "",
                "| part | ops | share measured | share predicted | class measured | class predicted | "
                "what would move it |", "|---|---|---|---|---|---|---|"]
        for p in sorted(r["parts"], key=lambda p: -(p["measured_share"] or 0)):
            out.append(f"| {p['part']} | {', '.join(p['ops']) or '-'} | {_share(p['measured_share'])} | "
                       f"{_share(p['predicted_share'])} | {p['measured_class'] or '-'} | {p['predicted_class'] or '-'} | "
                       f"{p['requirement'] or '-'} |")
        if r["not_modelled"]:
            out.append(f"\nNot modelled in the achievable estimate: {', '.join(r['not_modelled'])}.")
        out.append("")
    out += _repeats_md(doc.get("repeats"))
    if doc["skipped"]:
        out += ["## Not characterized", ""] + [f"- {s['key']}: {s['status']} ({s['reason']})" for s in doc["skipped"]]
    return "\n".join(out) + "\n"


def cmd_characterize(args) -> int:
    from ..calibrate.characterize import characterize, repeats
    from ..hwspecs import get_spec, spec_for_device
    from ..measure.models.records import (
        find_model_runs,
        repeat_spread,
        standing_records,
    )

    if args.out:  # output paths first: a bad one costs no reading
        check_output_file(args.out, "--out")
    if args.plot:
        from ..figures._common import check_path
        check_path(args.plot, "--plot")
    paths = [p for folder in args.results for p in find_model_runs(folder)]
    if not paths:
        raise UserError(f"{', '.join(args.results)}: no model-run files (model-run-*.json, written by "
                        "python -m ssmbench.measure.models.runner) in these folders or below")
    records = standing_records(paths)
    fixed = get_spec(args.hw) if args.hw else None

    def spec_for(rec):
        if fixed is not None:
            return fixed
        if not rec.get("_device"):
            raise UserError(f"{rec['_file']}: the run names no device; give --hw SPEC")
        return spec_for_device(rec["_device"])
    profile = None
    if args.calibration:
        from ..calibrate.profile import read_profile
        profile = read_profile(args.calibration)
    doc = characterize(records, spec_for, profile, held_out=args.held_out)
    doc["repeats"] = repeats(repeat_spread(paths))
    from ..provenance import analysis_meta
    doc = {"meta": analysis_meta(inputs=paths + ([Path(args.calibration)] if args.calibration else [])), **doc}
    from ..measure.results import jsonable
    text = json.dumps(jsonable(doc), indent=1) + "\n" if args.format == "json" else markdown(doc)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        print(text, end="")
    if args.plot:
        from ..figures.characterize import share_figure
        print(f"wrote {share_figure(doc, args.plot)}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("characterize", help="whole models: time share and bottleneck class per part, "
                              "measured vs predicted, and model-level errors",
                              description=__doc__)
    p.add_argument("--results", required=True, nargs="+", metavar="DIR",
                   help="folder(s) with model-run files (searched recursively; the latest record of a key wins)")
    p.add_argument("--held-out", action="store_true",
                   help="leave one model out: predict each model with the runtime terms measured from the other "
                        "models' records (calibrate/runtime_host.py)")
    p.add_argument("--hw", help="spec to predict on (default: the one whose device_names hold the run's GPU)")
    p.add_argument("--calibration", metavar="FILE", help="calibrated profile: adds the calibrated estimate")
    p.add_argument("--format", choices=("md", "json"), default="md", help="output format")
    p.add_argument("--out", help="write the report to this file (default: stdout)")
    p.add_argument("--plot", metavar="FILE", help="also write a plot of measured and predicted shares (.png/.svg)")
    p.set_defaults(func=cmd_characterize)
