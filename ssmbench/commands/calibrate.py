"""CLI: ``ssmbench calibrate`` (fit a calibrated profile) and ``ssmbench gap`` (the gap report)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import UserError
from ..files import check_output_file
from ..calibrate.defaults import DEFAULT_LEVEL, DEFAULT_MIN_SHAPES

# The commands import the fitting stack (scipy, matplotlib) when they run, not when the CLI builds
# its parser: every other ssmbench command would otherwise pay for it.


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", nargs="+", required=True, metavar="DIR",
                   help="measure result files, or directories searched for them")
    p.add_argument("--hw", required=True, metavar="SPEC", help="spec id (see `ssmbench specs list`) or spec YAML file")
    p.add_argument("--prefer", choices=("measured", "datasheet"), default=None,
                   help="ceilings: attained (measured) values where the spec has them, else datasheet "
                        "(default: measured, or the profile's choice for gap --calibration)")
    p.add_argument("--allow-device-mismatch", action="store_true",
                   help="join results measured on a device other than --hw (every number is then labelled)")
    p.add_argument("--skip-unpredicted", action="store_true",
                   help="leave out measured cases the analytic model cannot cost (they are listed as excluded)")
    p.add_argument("--level", type=float, default=DEFAULT_LEVEL, help="prediction interval level (default 0.8)")
    p.add_argument("--min-shapes", type=int, default=DEFAULT_MIN_SHAPES,
                   help="fewest distinct shapes a group needs to be calibrated (default 4)")
    p.add_argument("--group-by", choices=("op", "family"), default="op",
                   help="fit each op apart (default) or pool the ops of a family")


def _find_results(paths: list[str]):
    """The result files of ``--results``; the other files of its folders are listed on stderr."""
    from ..calibrate.sources import find_all

    found = find_all(paths)
    for s in found.skipped:
        print(f"ssmbench: note: skipped {s['path']}: {s['reason']}", file=sys.stderr)
    return found


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "calibrate", help="fit achieved vs predicted time per kernel group; write a calibrated profile",
        description="Join measured results with analytic bounds on a spec, fit model forms per "
                    "(device, op, implementation, backend, dtype, mode) by leave-shape-out cross-validation, "
                    "and write a versioned calibrated profile (never edits the spec).")
    _common(p)
    p.add_argument("--out", required=True, metavar="FILE", help="calibrated profile to write (JSON)")
    p.add_argument("--force", action="store_true", help="replace an existing profile file")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_calibrate)

    g = subparsers.add_parser(
        "gap", help="report predicted bound vs measured time, %% of roofline, calibrated residuals and errors",
        description="Per case and per family: analytic bound, measured time, % of roofline, the calibrated "
                    "model's residual, cross-validated error and the resource the gap is attributed to.")
    _common(g)
    g.add_argument("--calibration", metavar="FILE",
                   help="use this calibrated profile (default: fit one on the given results for this report)")
    g.add_argument("--format", choices=("md", "json"), default="md", help="report format (default md)")
    g.add_argument("--json", action="store_true", help="same as --format json")
    g.add_argument("--out", metavar="FILE", help="write the report here instead of standard output")
    g.add_argument("--plot", metavar="FILE", help="write the figure (measured vs predicted; %% of roofline per family)")
    g.add_argument("--energy-plot", metavar="FILE",
                   help="write the energy figure (measured vs held-out predicted energy per call, per family)")
    g.set_defaults(func=cmd_gap)


def cmd_calibrate(args) -> int:
    from ..calibrate.fit import fit_all
    from ..calibrate.progress import group_progress
    from ..calibrate.join import join
    from ..calibrate.profile import build_profile, write_profile
    from ..calibrate.report import model_text, pct, status_text
    from ..hwspecs import get_spec
    from ..output import print_json, print_table

    check_output_file(args.out, "--out", replace=args.force,  # before the fit, not after it
                      refuse="calibrated profiles are not overwritten (choose a new file name, or --force)")
    spec = get_spec(args.hw)
    found = _find_results(args.results)
    joined = join(found.files, spec, prefer=args.prefer or "measured", allow_device_mismatch=args.allow_device_mismatch,
                  skip_unpredicted=args.skip_unpredicted)
    groups = fit_all(joined, level=args.level, min_shapes=args.min_shapes, group_by=args.group_by,
                     progress=group_progress())
    settings = {"level": args.level, "min_shapes": args.min_shapes, "group_by": args.group_by}
    profile = build_profile(joined, groups, settings, command=["ssmbench"] + sys.argv[1:], skipped=found.skipped)
    from ..calibrate.energy_profile import section_for
    energy = section_for(joined, spec)
    if energy is not None:  # the energy windows of the same results: predict --calibration applies them
        profile["energy"] = energy
    path = write_profile(profile, args.out, force=args.force)
    summary = {
        "profile": str(path), "spec": spec.id, "results": [f["path"] for f in joined.files],
        "device_mismatch": joined.device_mismatch,
        "groups": [{"label": g["label"], "status": g["status"], "reason": g["reason"], "n_shapes": g["n_shapes"],
                    "pooled_from": g.get("pooled_from"),
                    "model": (g["model"] or {}).get("name"), "cv": g["cv"], "interval": g["interval"]}
                   for g in groups],
        "excluded": len(joined.excluded),
    }
    if args.json:
        print_json(summary)
        return 0
    level = int(round(100 * args.level))
    rows = []
    for g in groups:
        cv = g["cv"] or {}
        iv = g["interval"]
        rows.append([g["label"], status_text(g), g["n_shapes"], model_text(g), pct(cv.get("median_ape_pct")),
                     pct(cv.get("p90_ape_pct")),
                     pct(None if cv.get("coverage") is None else 100 * cv["coverage"], 0),
                     "-" if not iv else f"x{iv['factor_lo']:.3f} .. x{iv['factor_hi']:.3f}"])
    print_table(f"Calibration on {spec.id} ({spec.name})",
                ["group", "status", "shapes", "model (calibrated parameters)", "CV |err| median",
                 "CV |err| p90", "coverage", f"{level}% interval"], rows,
                caption=("CV |err| = |calibrated / measured - 1| on held-out shapes (leave-shape-out; for a pooled "
                         "group, within the level it borrowed from); coverage = "
                         f"share of held-out measured times inside their {level}% interval; interval = factors "
                         "on the calibrated estimate."))
    for g in groups:
        if g["status"] == "pooled":
            print(f"pooled: {g['reason']}", file=sys.stderr)
        elif g["status"] != "calibrated":
            print(f"not calibrated: {g['reason']}", file=sys.stderr)
    if joined.excluded:
        counts: dict[str, int] = {}
        for e in joined.excluded:
            counts[e["status"]] = counts.get(e["status"], 0) + 1
        print("excluded cases (listed in the profile): " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())),
              file=sys.stderr)
    if joined.device_mismatch:
        print(f"device mismatch allowed: results from {', '.join(joined.devices)} fitted on spec {spec.id}; "
              "the profile records it", file=sys.stderr)
    print(f"wrote calibrated profile {path}")
    return 0


def cmd_gap(args) -> int:
    from ..calibrate.energy import energy_section
    from ..calibrate.gap import fit_profile_for_gap, gap_report
    from ..figures.energy import energy_figure
    from ..calibrate.progress import group_progress
    from ..calibrate.join import join
    from ..calibrate.profile import json_text, read_profile
    from ..calibrate.report import gap_markdown
    from ..figures._common import check_path
    from ..figures.gap import gap_figure
    from ..hwspecs import get_spec
    from ..output import print_json

    if args.out:  # before the fit and the report
        check_output_file(args.out, "--out")
    if args.plot:
        check_path(args.plot, "--plot")
    if args.energy_plot:
        check_path(args.energy_plot, "--energy-plot")
    spec = get_spec(args.hw)
    profile = read_profile(args.calibration) if args.calibration else None
    prefer = args.prefer or (profile.data["spec"].get("prefer", "measured") if profile else "measured")
    joined = join(_find_results(args.results).files, spec, prefer=prefer, allow_device_mismatch=args.allow_device_mismatch,
                  skip_unpredicted=args.skip_unpredicted)
    fitted_here = profile is None
    if profile is None:
        profile = fit_profile_for_gap(joined, level=args.level, min_shapes=args.min_shapes, group_by=args.group_by,
                                      progress=group_progress())
    rep = gap_report(joined, profile, spec.id, fitted_here)
    rep["energy"] = energy_section(joined, spec)
    fmt = "json" if args.json else args.format
    text = json_text(rep) if fmt == "json" else gap_markdown(rep)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote gap report {args.out}", file=sys.stderr)
    elif fmt == "json":
        print_json(rep)
    else:
        sys.stdout.write(text)
    if args.plot:
        gap_figure(rep, args.plot)
        print(f"wrote gap figure {args.plot}", file=sys.stderr)
    if args.energy_plot:
        if "fit" not in rep["energy"]:
            raise UserError(f"--energy-plot: {rep['energy']['note']}")
        energy_figure(rep["energy"], spec.id, args.energy_plot)
        print(f"wrote energy figure {args.energy_plot}", file=sys.stderr)
    return 0
