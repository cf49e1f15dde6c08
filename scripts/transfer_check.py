"""Does the achievable model carry to another GPU? Cases measured on a base device (the H200) and on a
target device (the H100), each against the achievable estimate on its own spec.

Usage:
  python scripts/transfer_check.py --predict-suite SUITE --base DIR [DIR ...] [--json OUT]
  python scripts/transfer_check.py --target DIR [DIR ...] --base DIR [DIR ...] [--without-probe] [--json OUT]
Options: --target-hw SPEC (default h100-sxm), --base-hw SPEC (default h200-sxm).

``--predict-suite``: before a run, the target spec's achievable estimate of every case of the suite (the
timing of the suite: an L2 flush of twice the target spec's L2 capacity, CUDA-graph replays where the entry
asks), beside the base device's measurement of the same case (its latest record in the ``--base`` folders,
where one exists) and the base spec's estimate: what the model says the target will measure, written before
it does.

``--target``: after the run, every target case with status ok: its measured time (median per call; CUDA
events), the achievable estimate on the target spec (``calibrate.join``, as the call was timed) and its pace
(host-bound where that estimate's bottleneck is host/launch: those judge the host, the others the device), and
the same case on the base device (measured, and estimated on the base spec with that record's timing). Per
family and over all cases: the median |estimate / measured - 1| on the target, the same on the base for the
same cases, and the error of the predicted speed ratio, (estimate_t / estimate_b) / (measured_t / measured_b)
- 1, which leaves out what both devices share (a wrong rule of a kernel errs alike on both).
``--without-probe`` takes the target spec without its ``measured:`` entries (its probe's ceilings): its
datasheet and the values it derives from the base device, the estimate an architect makes before owning the
device. Every number is an analytic estimate or a measurement, labelled so; nothing is fitted.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def _ape(est: float, meas: float) -> float:
    return abs(est / meas - 1.0) * 100.0


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _base_records(dirs: list[str], base_spec):
    """The latest ok record of each case key measured on the base spec's device(s)."""
    from ssmbench.hwspecs.loader import device_matches
    from ssmbench.measure.results import latest_by_key, read_dir

    files = [f for d in dirs for f in read_dir(d)]
    files = [f for f in files if device_matches(base_spec, f.device)]
    out = {}
    for dev in sorted({f.device for f in files}):
        out.update(latest_by_key([f for f in files if f.device == dev], device=dev, statuses=("ok",)))
    return out


def _estimate(spec, case, timing: dict, launch: str) -> float:
    from ssmbench.calibrate.join import resource_bounds

    b = resource_bounds(spec, case.op, case.impl, case.dims, case.dtype, case.mode, "measured", case.backend,
                        launch, timing)
    return b.achievable_s


def _label(case) -> str:
    """A case (or joined case) in one line: op, backend, dtype, mode and its dims."""
    from ssmbench.calibrate.report import dims_text

    return f"{case.op} {case.backend} {case.dtype} {case.mode} {dims_text(case.dims)}"


def predict_suite(suite_name: str, base_dirs: list[str], target_spec, base_spec) -> list[dict]:
    from ssmbench.hwspecs.ceilings import ceiling
    from ssmbench.measure.results import launch_regime
    from ssmbench.measure.suite import load_suite

    suite = load_suite(suite_name)
    base = _base_records(base_dirs, base_spec) if base_dirs else {}
    l2 = ceiling(target_spec, "memory.l2.capacity").value
    rows = []
    for sc in suite.cases:
        c = sc.case
        timing = {"flush_l2": True, "flush_bytes": 2 * float(l2), "cuda_graph": bool(sc.timing.get("cuda_graph"))}
        launch = launch_regime({"op": c.op, "backend": c.backend, "mode": c.mode, "timing": timing})
        row = {"key": c.key(), "case": _label(c), "family": _family(c.op), "target_estimate_s": _estimate(
            target_spec, c, timing, launch)}
        rec = base.get(c.key())
        if rec is not None:
            row["base_measured_s"] = float(rec.time_s["median"])
            row["base_estimate_s"] = _estimate(base_spec, c, rec.raw.get("timing") or {}, rec.launch)
        rows.append(row)
    return rows


def _family(op: str) -> str:
    from ssmbench.analytic.cases import case_family

    return case_family(op)


def without_probe(spec):
    """``spec`` without its measured entries: its datasheet values and those it derives from another device."""
    from ssmbench.hwspecs.schema import Spec

    data = spec.model_dump(mode="python", exclude_none=True)
    data["measured"] = []
    return Spec.model_validate(data)


def check(target_dirs: list[str], base_dirs: list[str], target_spec, base_spec) -> list[dict]:
    from ssmbench.calibrate.join import join
    from ssmbench.calibrate.pace import pace_of
    from ssmbench.measure.results import read_dir

    joined = join([f for d in target_dirs for f in read_dir(d)], target_spec)
    base = _base_records(base_dirs, base_spec)
    rows = []
    for jc in joined.cases:
        row = {"key": jc.key, "case": _label(jc), "family": jc.family, "pace": pace_of(jc),
               "target_measured_s": jc.measured_s, "target_estimate_s": jc.bounds.achievable_s,
               "target_bound_s": jc.bounds.bound_s}
        rec = base.get(jc.key)
        if rec is not None:
            row["base_measured_s"] = float(rec.time_s["median"])
            row["base_estimate_s"] = _estimate(base_spec, rec.case, rec.raw.get("timing") or {}, rec.launch)
        rows.append(row)
    return rows


def summary(rows: list[dict]) -> dict:
    """Per family, over the GPU- and the host-bound cases, and over all: n, the target's median |error| of the
    estimate, the base's on the cases both measured, and the median |error| of the predicted speed ratio."""
    groups = defaultdict(list)
    for r in rows:
        groups[r["family"]].append(r)
    for pace in ("gpu", "host"):
        groups[f"all, {pace}-bound"] = [r for r in rows if r.get("pace") == pace]
    groups["all"] = rows
    out = {}
    for fam, rs in groups.items():
        t = [_ape(r["target_estimate_s"], r["target_measured_s"]) for r in rs]
        both = [r for r in rs if "base_measured_s" in r]
        b = [_ape(r["base_estimate_s"], r["base_measured_s"]) for r in both]
        ratio = [_ape(r["target_estimate_s"] / r["base_estimate_s"], r["target_measured_s"] / r["base_measured_s"])
                 for r in both]
        measured_ratio = [r["target_measured_s"] / r["base_measured_s"] for r in both]
        out[fam] = {"n": len(rs), "n_both": len(both), "target_median_ape_pct": _median(t),
                    "target_p90_ape_pct": _p90(t), "base_median_ape_pct": _median(b),
                    "ratio_median_ape_pct": _median(ratio), "measured_ratio_median": _median(measured_ratio)}
    return out


def _p90(xs: list[float]) -> float:
    import numpy as np

    return float(np.percentile(xs, 90)) if xs else float("nan")  # as the gap report computes it


def _print_predictions(rows: list[dict], target: str, base: str) -> None:
    print(f"{'case':<78} {'est ' + target + ' us':>16} {'meas ' + base + ' us':>16} {'est ' + base + ' us':>15}")
    for r in rows:
        bm = f"{r['base_measured_s'] * 1e6:16.1f}" if "base_measured_s" in r else f"{'-':>16}"
        be = f"{r['base_estimate_s'] * 1e6:15.1f}" if "base_estimate_s" in r else f"{'-':>15}"
        print(f"{r['case'][:78]:<78} {r['target_estimate_s'] * 1e6:16.1f} {bm} {be}")
    print(f"{len(rows)} cases; estimates: achievable estimate (analytic), measurements: {base} medians per call")


def _cell(value: float, width: int, fmt: str, unit: str = "") -> str:
    """``value`` right-aligned in ``width`` characters with its unit; "-" where there is none (NaN: no case was
    measured on the base device)."""
    text = "-" if math.isnan(value) else f"{value:{fmt}}{unit}"
    return f"{text:>{width}}"


def _print_check(rows: list[dict], summ: dict, target: str, base: str) -> None:
    print(f"{'case':<70} {'meas us':>10} {'est us':>10} {'est/meas':>8} {base + ' meas/est':>17} {'ratio t/b':>9}")
    for r in sorted(rows, key=lambda r: (r["family"], r["case"])):
        extra = ""
        if "base_measured_s" in r:
            extra = (f" {r['base_measured_s'] / r['base_estimate_s']:17.2f}"
                     f" {r['target_measured_s'] / r['base_measured_s']:9.2f}")
        print(f"{r['case'][:70]:<70} {r['target_measured_s'] * 1e6:10.1f} {r['target_estimate_s'] * 1e6:10.1f}"
              f" {r['target_estimate_s'] / r['target_measured_s']:8.2f}{extra}")
    print()
    print(f"{'family':<18} {'n':>4} {'both':>5} {target + ' |err| med':>20} {'p90':>6} {base + ' |err| med':>20}"
          f" {'ratio |err| med':>16} {'meas t/b':>9}")
    for fam in sorted(summ, key=lambda f: (f.startswith("all"), f)):
        if not summ[fam]["n"]:
            continue
        s = summ[fam]
        print(f"{fam:<18} {s['n']:4d} {s['n_both']:5d} {_cell(s['target_median_ape_pct'], 20, '.1f', '%')}"
              f" {_cell(s['target_p90_ape_pct'], 6, '.1f', '%')} {_cell(s['base_median_ape_pct'], 20, '.1f', '%')}"
              f" {_cell(s['ratio_median_ape_pct'], 16, '.1f', '%')} {_cell(s['measured_ratio_median'], 9, '.2f')}")
    print("|err|: |achievable estimate / measurement - 1| (analytic estimate vs CUDA-event medians); ratio: the "
          f"predicted {target}/{base} time ratio against the measured one; host-bound: the target's achievable "
          "estimate is host/launch-bound (calibrate/pace.py), GPU-bound: any other")


def _meta(argv: list[str] | None) -> dict:
    """What made the file: the command, the time, and the commit of the tree (the model and specs it used)."""
    import datetime
    import subprocess

    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                                cwd=Path(__file__).parent).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                                    text=True, check=True, cwd=Path(__file__).parent).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = None, None
    return {"tool": "scripts/transfer_check.py", "command": ["python", "scripts/transfer_check.py",
                                                              *(sys.argv[1:] if argv is None else argv)],
            "generated_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "source_commit": commit, "source_dirty": dirty}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--predict-suite", metavar="SUITE", help="estimate a suite's cases on the target spec")
    mode.add_argument("--target", nargs="+", metavar="DIR", help="result folders measured on the target device")
    ap.add_argument("--base", nargs="+", metavar="DIR", default=[], help="result folders measured on the base device")
    ap.add_argument("--target-hw", default="h100-sxm", help="the target device's spec (default h100-sxm)")
    ap.add_argument("--base-hw", default="h200-sxm", help="the base device's spec (default h200-sxm)")
    ap.add_argument("--without-probe", action="store_true",
                    help="the target spec without its measured entries (datasheet and derived values only)")
    ap.add_argument("--json", metavar="OUT", help="also write the rows and the summary as JSON here")
    args = ap.parse_args(argv)

    from ssmbench.hwspecs import get_spec

    from ssmbench.errors import UserError
    from ssmbench.files import check_output_file

    try:
        if args.json:
            check_output_file(args.json, "--json")
        for d in [*(args.target or []), *args.base]:
            if not Path(d).is_dir():
                raise UserError(f"{d}: no such result folder; expected a folder of measure result files")
        target, base = get_spec(args.target_hw), get_spec(args.base_hw)
        if args.without_probe:
            target = without_probe(target)
        if args.predict_suite:
            rows = predict_suite(args.predict_suite, args.base, target, base)
            _print_predictions(rows, target.id, base.id)
            doc = {"kind": "transfer_prediction", "suite": args.predict_suite, "target_hw": target.id,
                   "base_hw": base.id, "without_probe": args.without_probe, "rows": rows}
        else:
            rows = check(args.target, args.base, target, base)
            summ = summary(rows)
            _print_check(rows, summ, target.id, base.id)
            doc = {"kind": "transfer_check", "target_hw": target.id, "base_hw": base.id,
                   "without_probe": args.without_probe, "rows": rows, "summary": summ}
    except UserError as exc:
        print(f"transfer_check: {exc}", file=sys.stderr)
        return 2
    if args.json:
        doc = {"meta": _meta(argv), **doc}
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
