"""Command ``energy-fit`` (``register(subparsers)``, see ssmbench/cli.py): fit a device's energy
parameters on measured cases with energy windows (``calibrate/energy.py``), print the leave-shape-out
check per family, and write them as a calibration profile (``calibrate/energy_profile.py``: the
calibrated layer, which ``predict --calibration`` applies; never a spec's ``measured:`` entries, which
come from the isolating probe kernels of ``ssmbench probe --energy``)."""

from __future__ import annotations

import sys

from ..files import check_output_file


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "energy-fit", help="fit energy parameters (static power, J/FLOP, J/B) on measured energy windows",
        description="Non-negative least squares of measured energy per call on static power x time and the "
                    "counted FLOPs and bytes of each term, over the cases below the power limit (those at it as lower "
                    "bounds); leave-shape-out "
                    "errors per family at the measured time and at the achievable time. Every number is a "
                    "calibrated estimate.")
    p.add_argument("--results", nargs="+", required=True, metavar="DIR", help="result files or directories")
    p.add_argument("--hw", required=True, metavar="SPEC", help="spec id or spec YAML file of the measuring device")
    p.add_argument("--allow-device-mismatch", action="store_true",
                   help="fit results measured on a device other than --hw")
    p.add_argument("--out", metavar="FILE", help="write the fitted parameters as a calibration profile (JSON) "
                                                 "with an energy section, for predict --calibration")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--plot", metavar="FILE", help="write the figure (measured vs held-out predicted energy)")
    p.add_argument("--json", action="store_true", help="print the fit and the check as JSON")
    p.set_defaults(func=cmd_energy_fit)


def cmd_energy_fit(args) -> int:
    from ..calibrate import energy as ce
    from ..calibrate.join import join
    from ..calibrate.sources import find_all
    from ..figures._common import check_path
    from ..figures.energy import energy_figure
    from ..hwspecs import get_spec
    from ..hwspecs.units import format_si
    from ..output import print_json, print_table

    if args.out:
        check_output_file(args.out, "--out", replace=args.force,
                          refuse="calibrated profiles are not overwritten (choose a new file name, or --force)")
    if args.plot:
        check_path(args.plot, "--plot")
    spec = get_spec(args.hw)
    joined = join(find_all(args.results).files, spec, allow_device_mismatch=args.allow_device_mismatch,
                  skip_unpredicted=True)
    cases = ce.energy_cases(joined, spec)
    ev = ce.evaluate(cases, ce.power_limit(spec))
    if args.out:
        from ..calibrate.energy_profile import profile_section
        from ..calibrate.profile import build_profile, write_profile
        profile = build_profile(joined, [], {"level": ce.LEVEL, "min_shapes": None, "group_by": "energy"},
                                command=["ssmbench"] + sys.argv[1:])
        profile["energy"] = profile_section(ev)
        path = write_profile(profile, args.out, force=args.force)
        print(f"wrote calibration profile {path} (energy section: {len(ev['fit']['per_term'])} fitted terms and "
              "static power; no time groups)", file=sys.stderr)
    if args.plot:
        energy_figure(ev, spec.id, args.plot)
        print(f"wrote energy figure {args.plot}", file=sys.stderr)
    if args.json:
        print_json(ev)
        return 0
    f = ev["fit"]
    rows = [["static power", format_si(f["static_power_w"], "W")]]
    rows += [[t, format_si(v["value"], v["unit"])] for t, v in f["per_term"].items()]
    rows += [[t, f"not determined: {why}"] for t, why in f["undetermined"].items()]
    print_table(f"Energy parameters of {spec.id} (calibrated estimate, {f['n_fit_cases']} cases below the power limit, "
                f"{f.get('n_bound_cases', 0)} at it as lower bounds)",
                ["parameter", "value"], rows)
    for b in ce.BASES:
        fams = ev["bases"][b]["families"]
        print_table(f"Energy per call, leave-shape-out, {b.replace('_', ' ')}",
                    ["family", "cases", "|err| median", "|err| p90", "80% interval (factor)", "meets target"],
                    [[k, s["n"], f"{s['median_ape_pct']:.1f}%", f"{s['p90_ape_pct']:.1f}%",
                      f"x{s['interval']['factor_lo']:.3f} .. x{s['interval']['factor_hi']:.3f}",
                      "yes" if s["meets_target"] else "no"] for k, s in fams.items()],
                    caption=f"target per family: median <= {ev['target']['median_ape_pct']:g}%, p90 <= "
                            f"{ev['target']['p90_ape_pct']:g}%; {ev['n_power_limited']} windows ran at the power limit")
    return 0
