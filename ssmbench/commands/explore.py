"""Commands ``explore`` and ``require`` (``register(subparsers)``, see ssmbench/cli.py): hypothetical
hardware around a base spec, evaluated with the achievable estimate (``analytic/design``)."""

from __future__ import annotations

import time

from ..errors import UserError
from ..files import check_output_file
from ..hwspecs.units import format_quantity
from ..output import print_json, print_table, si

EXAMPLE_VARY = "memory.dram.bandwidth=2..16TB/s,compute.tensor.bf16=0.5..4PFLOP/s"


def _workloads(args):
    from ..analytic.design import workloads
    from ..analytic.sweep import parse_int_list
    flags = [f for f in ("model", "phase", "batch", "length") if getattr(args, f) is not None]
    if args.workloads and flags:
        raise UserError(f"give either --workloads FILE or --model/--phase/--batch/--length, not both "
                        f"(got --workloads and --{', --'.join(flags)})")
    if args.workloads:
        return workloads.read(args.workloads)
    if not args.model:
        raise UserError("no workload: give --workloads FILE or --model M (with --phase, --batch, --length)")
    return workloads.product([m.strip() for m in args.model.split(",") if m.strip()],
                             [p.strip() for p in (args.phase or "decode").split(",") if p.strip()],
                             parse_int_list(args.batch or "1", "--batch"),
                             parse_int_list(args.length or "4096", "--length"), args.dtype)


def _front_rows(exp, front, limit: int):
    from ..analytic.design.table import records
    rows = front.rows if limit <= 0 else front.rows[:: max(1, -(-front.rows.size // limit))]
    return records(exp, rows)


def cmd_explore(args) -> int:
    from ..analytic.design import space, table
    from ..analytic.design.explore import column_name, explore
    from ..analytic.design.step import WorkloadWork
    from ..hwspecs import get_spec

    if args.plot:
        from ..figures._common import check_path
        check_path(args.plot, "--plot")
    if args.front_out:
        check_output_file(args.front_out, "--front-out")
    fmt = table.output_format(args.out)
    check_output_file(args.out, "--out")
    if (args.grid is None) == (args.samples is None):
        raise UserError("give one of --grid N (N values per varied range) or --samples N (random points)")
    base = get_spec(args.base)
    axes = space.parse_vary(args.vary, base)
    cost = space.parse_cost(args.cost, base) if args.cost else None
    works = [WorkloadWork.of(w, base) for w in _workloads(args)]
    points = space.grid(axes, args.grid) if args.grid is not None else space.samples(axes, args.samples, args.seed)
    designs = space.Designs.of(base, points)
    t0 = time.perf_counter()
    exp = explore(designs, works, axes, cost)
    elapsed = time.perf_counter() - t0
    (table.write_parquet if fmt == "parquet" else table.write_csv)(exp, args.out)
    fronts = [{"workload": f.workload, "x": f.x, "y": f.y, "available": f.rows is not None, "reason": f.reason,
               "designs": [] if f.rows is None else _front_rows(exp, f, 0)} for f in exp.fronts]
    if args.front_out:
        import json
        with open(args.front_out, "w", encoding="utf-8") as fh:
            json.dump({"label": exp.meta["label"], "meta": exp.meta, "fronts": fronts}, fh, indent=1)
            fh.write("\n")
    if args.plot:
        _plot(args.plot, exp)
    if args.json:
        print_json({"label": exp.meta["label"], "meta": exp.meta, "out": args.out, "seconds": elapsed,
                    "fronts": fronts})
        return 0
    print(f"{designs.n:,} design points on {base.id} x {len(works)} workload(s) = {exp.n_rows:,} rows "
          f"({exp.meta['label']}) in {elapsed:.2f} s; wrote {args.out}")
    print(f"energy: {exp.meta['energy_note']}")
    varied = [(a.param.key, column_name(a.param), a.param.kind) for a in axes]
    for f in exp.fronts:
        if f.rows is None or not f.rows.size:
            print(f"front {f.x} vs {f.y} ({f.workload}): none: {f.reason}")
            continue
        rows = _front_rows(exp, f, args.front_limit)
        shown = f" ({len(rows)} of them shown, evenly spaced)" if len(rows) < f.rows.size else ""
        print_table(f"Pareto front, {f.x} vs {f.y}: {f.workload}: {f.rows.size} designs{shown} ({exp.meta['label']})",
                    [k for k, _, _ in varied] + ["time/token", Y_HEADERS.get(f.y, f.y), "tokens/s", "binding"],
                    [[format_quantity(r[c], kind) for _, c, kind in varied] + [si(r["time_per_token_s"], "s"),
                      si(r[f.y], Y_UNITS.get(f.y, "")),
                      si(r["tokens_per_s"]), r["binding"]] for r in rows])
    return 0


# The fronts' second axis as printed: energy per token in joules; the cost proxy in the units the user
# declared with --cost (a weighted sum: no unit of its own).
Y_HEADERS = {"energy_per_token_j": "energy/token", "cost": "cost (--cost units)"}
Y_UNITS = {"energy_per_token_j": "J"}


def _plot(path: str, exp) -> None:
    from ..figures._common import save
    from ..figures.pareto import pareto_figure
    f = next((f for f in exp.fronts if f.rows is not None and f.rows.size), None)
    if f is None:
        raise UserError("--plot: no front to draw: " + "; ".join(sorted({g.reason for g in exp.fronts})))
    n = exp.meta["design_points"]
    block = slice((f.rows[0] // n) * n, (f.rows[0] // n + 1) * n)
    fig = pareto_figure(exp.columns["time_per_token_s"][block], exp.columns[f.y][block], f.rows - block.start,
                        "time per token (s), achievable estimate", f.y,
                        f"{f.workload} on designs around {exp.meta['base']}: Pareto front")
    save(fig, path)


def cmd_require(args) -> int:
    import shlex
    import sys

    from ..analytic.design import require, sheet
    from ..analytic.design.step import Workload
    from ..analytic.workloads.models import get_model
    from ..files import dump_yaml
    from ..hwspecs import get_spec

    if not args.out.endswith((".yaml", ".yml")):
        raise UserError(f"--out {args.out}: expected a .yaml file name for the requirements sheet")
    check_output_file(args.out, "--out")
    targets = require.parse_targets(args.target)
    if args.phase == "decode":
        if args.seqlen is not None:
            raise UserError("decode: give the context length with --context (--seqlen is for prefill and train)")
        length = args.context
    else:
        if args.context is not None:
            raise UserError(f"--context applies to decode; for {args.phase} give --seqlen (prompt / sequence length)")
        length = args.seqlen
    if length is None:
        raise UserError(f"{args.phase}: give {'--context' if args.phase == 'decode' else '--seqlen'}")
    base = get_spec(args.base)
    w = Workload(get_model(args.model), args.phase, args.batch, length, args.dtype)
    command = "ssmbench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    data = sheet.make_sheet(w, args.model, base, args.base, targets, command)
    from ..hwspecs.loader import SpecError, parse_spec
    try:
        parse_spec(sheet.spec_data(data, args.out, "requirements-check"), args.out)
    except SpecError as exc:
        data["design"]["spec_problem"] = (f"the design breaks a spec rule, so specs new --from-requirements will "
                                          f"refuse it: {exc}")
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write(f"# requirements sheet ({data['label']}); docs/design.md describes every field\n")
        fh.write(dump_yaml(data))
    if args.json:
        print_json(data)
        return 0
    ab, d = data["at_base"], data["design"]
    print(f"{w.label} on {base.id}: {si(ab['tokens_per_s'])} tokens/s at the base ({data['label']}; binding: "
          f"{ab['binding']}); targets {', '.join(f'{k} = {v:g}' for k, v in targets.items())}: step time at most "
          f"{si(data['target_step_time_s'], 's')}")
    rows = []
    for r in data["resources"]:
        unit = r["unit"]
        rows.append([r["key"], si(r["base"], unit), r.get("bound", ""), si(r.get("required"), unit),
                     "" if r.get("growth") is None else f"{r['growth']:.4g}x", "yes" if r["binds"] else "",
                     r["status"] + (f": {r['reason']}" if r.get("reason") else "")])
    print_table(f"Least of each resource that meets the targets, the others at {base.id} ({data['label']})",
                ["key", "base", "", "required", "growth", "binds", "status"], rows, key_column=True, fold=["status"])
    for key, n in data["needs"].items():
        print(f"needs {key} >= {si(n['at_least'], n['unit'])}: {n['why']}")
    print("design that meets the targets: " + (", ".join(f"{k} = {v['value']}" for k, v in d["values"].items())
                                               or f"{base.id} as it is")
          + f" -> {si(d['tokens_per_s'])} tokens/s; binding: {d['binding'] or 'none'}")
    if d.get("spec_problem"):
        print(f"warning: {d['spec_problem']}")
    print(f"not solved: {'; '.join(f'{k}: {v}' for k, v in data['not_solved'].items())}")
    print(f"wrote {args.out}; make the spec with: ssmbench specs new --from-requirements {args.out} --out NEW.yaml")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "explore", help="evaluate design points around a base spec on workloads; Pareto fronts",
        description="Hypothetical hardware: the base spec with some values varied (--vary), every design point "
                    "evaluated on every workload with the achievable estimate (time per token, tokens/s, the "
                    "binding resource, whether the state and the tiles fit on chip, energy where the build has an "
                    "energy estimate), written as Parquet or CSV; Pareto fronts of time per token against energy "
                    "per token and against a cost proxy (--cost) printed, with their designs.")
    p.add_argument("--base", required=True, help="base spec: a built-in id or a spec file")
    p.add_argument("--vary", action="append", required=True, metavar="KEY=LO..HI UNIT",
                   help=f"spec values to vary, comma-separated or repeated, e.g. {EXAMPLE_VARY}; a single value "
                        "fixes the key")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--grid", type=int, help="N log-spaced values per varied range (N^k design points)")
    g.add_argument("--samples", type=int, help="N design points sampled log-uniformly in every range")
    p.add_argument("--seed", type=int, default=0, help="seed of --samples")
    p.add_argument("--workloads", metavar="FILE", help="workloads YAML (see docs/design.md)")
    p.add_argument("--model", help="model id(s), comma list (instead of --workloads)")
    p.add_argument("--phase", help="prefill, decode or train, comma list (default decode)")
    p.add_argument("--batch", help="sequences per step, a list like 1,8,64 (default 1)")
    p.add_argument("--length", help="prompt / sequence length or decode context, a list (default 4096)")
    p.add_argument("--dtype", default="bf16", help="storage dtype of weights and activations")
    p.add_argument("--cost", action="append", metavar="KEY=WEIGHT/UNIT",
                   help="cost proxy: weight per unit of a spec value, e.g. memory.dram.bandwidth=1/TB/s "
                        "(comma-separated or repeated); the cost of a design is the sum")
    p.add_argument("--out", required=True, help="rows per (workload, design): .parquet or .csv")
    p.add_argument("--front-out", metavar="FILE", help="the fronts with every design on them, as JSON")
    p.add_argument("--front-limit", type=int, default=12, help="front designs printed per front (0: all)")
    p.add_argument("--plot", metavar="FILE", help="the first available front as a figure (.png or .svg)")
    p.add_argument("--json", action="store_true", help="print the fronts and meta as JSON")
    p.set_defaults(func=cmd_explore)

    p = subparsers.add_parser(
        "require", help="the least of each resource at which a workload meets its targets; a requirements sheet",
        description="Turns a workload and targets into hardware requirements: for each spec value that sets the "
                    "step time (engine rates, bandwidths, latency, per-kernel and per-call times, cache and "
                    "on-chip capacities), the least value (most, for times) at which the targets are met with the "
                    "others at the base spec, which bind and by how much each must grow, and one design that meets "
                    "them. Writes a requirements sheet (YAML) that 'ssmbench specs new --from-requirements' turns "
                    "into a hypothetical spec. Achievable estimate.")
    p.add_argument("--model", required=True, help="model id or model file")
    p.add_argument("--phase", default="decode", choices=("prefill", "decode", "train"), help="the phase of the step")
    p.add_argument("--batch", type=int, default=1, help="sequences per step")
    p.add_argument("--context", type=int, help="decode: context length (tokens)")
    p.add_argument("--seqlen", type=int, help="prefill / train: prompt / sequence length (tokens)")
    p.add_argument("--target", action="append", metavar="NAME=VALUE",
                   help="tokens_per_s=20000, time_per_token_s=5e-5, energy_per_token_j=0.01 (J; repeatable): an energy "
                        "target is met through the step time at the base's energy parameters")
    p.add_argument("--base", default="h200-sxm", help="base spec: a built-in id or a spec file")
    p.add_argument("--dtype", default="bf16", help="storage dtype of weights and activations")
    p.add_argument("--out", required=True, help="the requirements sheet (.yaml)")
    p.add_argument("--json", action="store_true", help="print the sheet as JSON")
    p.set_defaults(func=cmd_require)

