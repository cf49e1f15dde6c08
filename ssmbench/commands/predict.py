"""Commands ``models``, ``predict`` and ``sweep`` (``register(subparsers)``, see ssmbench/cli.py;
``plot`` is in plot.py).

Every number printed is an analytic bound or an analytic estimate (memory, energy), with its unit; the
spec's ceilings are printed with their origin (measured / datasheet) and provenance. ``predict
--calibration FILE`` adds, per op and in total, the calibrated estimate of a profile written by
``ssmbench calibrate`` with its interval, labelled "calibrated" (or "transferred" on a spec other than
the profile's); ops the profile does not cover keep their analytic bound, labelled so, with the reason.
The calibration package is imported only on that path. For an SSM or hybrid model the prediction also
gives the verdict against its attention baseline at the requested point (``total.verdict``; with a
profile, the calibrated one: see ``PREDICT_DESCRIPTION`` for the JSON keys). ``predict``, ``sweep`` and
``plot`` share one flag vocabulary (``point_options``). Bad input raises ``UserError`` (exit code 2 in
the CLI).
"""

from __future__ import annotations

import argparse
import difflib
import csv
import sys
from pathlib import Path

from ..analytic.roofline import BYTES_CHOICES, LAUNCH_CHOICES, PREFER_CHOICES, RESOURCES, SpecCeilings
from ..analytic.runtime import RUNTIMES
from ..analytic.workloads.phases import OPTIMIZERS, PHASES
from ..cli import RawDescriptionDefaultsFormatter
from ..errors import UserError
from ..files import check_output_file
from ..output import print_json, print_table, si
from ..predict_calibrated import CALIBRATED_CSV, calibrated_op_table, calibrated_total_rows, csv_calibrated
from ..predict_calibrated import rate as _rate

PREDICT_DESCRIPTION = """\
Roofline prediction (analytic bound) of a model phase on a spec. --model, --hw, --phase, --batch and
--seqlen each take one value or a comma list; several print side by side (one column per prediction;
with --json a list of predictions). Several specs share one kind of ceiling: the datasheet's unless
every spec has measured values.

JSON keys (one prediction): total (time_s, sum_s, bottleneck, tokens_per_s, memory_bytes, status, ...),
ops, layers, spec (ceilings with origin), notes. For an SSM or hybrid model, against its attention
baseline (the built-in transformer with the nearest parameter count):
  total.verdict: baseline, phase, batch, length, model_time_s, baseline_time_s (analytic bounds at the
    requested point, same spec), speedup (baseline_time_s / model_time_s), fits, result;
  total.verdict.calibrated (with --calibration): label, model_estimate_s, baseline_estimate_s, speedup,
    crossover {length, result}, not_covered (ops per model the profile does not cover; speedup and
    crossover are null unless both models are covered), result;
  total.crossover: length (smallest length from which the model's bound stays below the baseline's),
    result, impls (the --impl choices, applied to both models).
Decode adds total.compute_bound_batch (analytic bound) and total.max_batch_in_memory (analytic
estimate: the largest batch whose weights + KV cache + state + activations fit at that context).
"""

DEFAULT_MODEL = "mamba2-2.7b"
RUNTIME_CHOICES = tuple(RUNTIMES)
DEFAULT_SPEC = "h200-sxm"
# fp8 runs the ops with an fp8 rule at fp8 and the others at bf16 (analytic/workloads/precision.py)
DTYPE_CHOICES = ("bf16", "fp16", "fp32", "fp8")
TABLE_WIDTH = 150  # the per-op table has ten columns of numbers with units


def _table(title, columns, rows, caption=None) -> None:
    """A table whose first column (names, ids) never wraps; other cells fold rather than truncate."""
    print_table(title, columns, rows, caption, key_column=True, fold=True, width=TABLE_WIDTH)


def _unit(key: str) -> str:
    if key.startswith("compute."):
        return "FLOP/s"
    if key.endswith(".bandwidth"):
        return "B/s"
    if key.endswith(".capacity"):
        return "B"
    return "s" if key.startswith("launch.") else ""


def parse_models(text: str):
    from ..analytic.workloads.models import builtin_models, get_model
    if text == "all":
        return list(builtin_models().values())
    return [get_model(t.strip()) for t in text.split(",") if t.strip()]


def parse_specs(text: str):
    from ..hwspecs import get_spec, load_all
    if text == "all":
        return list(load_all().values())
    return [get_spec(t.strip()) for t in text.split(",") if t.strip()]


def _pairs(pairs: list[str] | None, option: str, what: str, example: str) -> dict[str, str]:
    out = {}
    for p in pairs or []:
        op, sep, value = p.partition("=")
        if not sep or not op.strip() or not value.strip():
            raise UserError(f"{option} {p!r}: write op={what}, e.g. {option} {example}")
        out[op.strip()] = value.strip()
    return out


def _impls(pairs: list[str] | None) -> dict[str, str]:
    return _pairs(pairs, "--impl", "implementation", "attention_causal=fa3")


def phase_list(text: str) -> list[str]:
    """argparse type of ``--phase``: one phase or a comma list."""
    out = [t.strip() for t in text.split(",") if t.strip()]
    for t in out:
        if t not in PHASES:
            near = difflib.get_close_matches(t, PHASES, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise argparse.ArgumentTypeError(f"invalid choice: {t!r}{hint} (choose from {', '.join(PHASES)})")
    if not out:
        raise argparse.ArgumentTypeError(f"give a phase ({', '.join(PHASES)}) or a comma list of them")
    return out


LIST_HELP = "one value, a comma list (1,2,4) or a range (1:128:x2 geometric, 8:64:+8 arithmetic)"


def point_options(p: argparse.ArgumentParser, *, model: str, hw: str, phase: str, batch: str, seqlen: str | None,
                  seqlen_help: str = "lengths (prompt / sequence / decode context)", seqlen_names=()) -> None:
    """The flags ``predict``, ``sweep`` and ``plot`` share, each one value or a comma list: --model/--models,
    --hw, --phase/--phases, --batch, --seqlen."""
    p.add_argument("--model", "--models", dest="model", default=model,
                   help=f"model id(s), .yaml or config.json, comma list or 'all' (default {model})")
    p.add_argument("--hw", default=hw, help=f"spec id(s) or spec file(s), comma list or 'all' (default {hw})")
    p.add_argument("--phase", "--phases", dest="phase", default=phase, type=phase_list,
                   help=f"{', '.join(PHASES)}, or a comma list (default {phase})")
    p.add_argument("--batch", default=batch, help=f"sequences per batch: {LIST_HELP} (default {batch})")
    p.add_argument("--seqlen", *seqlen_names, dest="seqlen", default=seqlen, help=f"{seqlen_help}: {LIST_HELP}")


def common_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", default="bf16", choices=DTYPE_CHOICES, help="storage dtype of weights and activations")
    p.add_argument("--prefer", default="measured", choices=PREFER_CHOICES,
                   help="ceilings: the spec's measured (attained) values where present, or the datasheet's")
    p.add_argument("--bytes", dest="bytes_basis", default="executed", choices=BYTES_CHOICES,
                   help="device-memory bytes that bound time: as executed by the implementation, or compulsory")


# storage precision (KV cache, recurrent state) ------------------------------------------------------

STORAGE_DTYPE_CHOICES = ("fp32", "bf16", "fp16", "fp8")


def precision_options(p: argparse.ArgumentParser) -> None:
    """--kv-dtype and --state-dtype (predict, sweep): the dtypes of the KV cache and the SSM state."""
    p.add_argument("--kv-dtype", default=None, choices=STORAGE_DTYPE_CHOICES,
                   help="KV-cache dtype (memory and the bytes decode attention reads); default: the ops' dtype "
                        "(bf16 under --dtype fp8)")
    p.add_argument("--state-dtype", default=None, choices=STORAGE_DTYPE_CHOICES,
                   help="conv + SSM state dtype (memory and the decode state read/write); default: the model "
                        "dtype, as mamba-ssm's allocate_inference_cache keeps it (bf16 under --dtype fp8)")


def precision_from_args(args):
    from ..analytic.workloads.precision import Precision
    # plot shares predict_from_args without these options: its predictions use the defaults
    return Precision(args.dtype, getattr(args, "kv_dtype", None), getattr(args, "state_dtype", None))


# models -------------------------------------------------------------------------------------------

def cmd_models_list(args) -> int:
    from ..analytic.workloads.models import builtin_models
    rows = [m.summary() for m in builtin_models().values()]
    if args.json:
        print_json({"models": rows})
        return 0
    _table("Built-in models (parameters: analytic count)",
                ["id", "family", "layers", "SSM", "attn", "MoE", "params", "active", "KV/token", "state/seq"],
                [[r["id"], r["family"], r["layers"], r["ssm_blocks"], r["attention_blocks"], r["moe_blocks"],
                  si(r["params"], ""), si(r["active_params"], ""), si(r["kv_cache_bytes_per_token_bf16"], "B"),
                  si(r["state_bytes_per_sequence_bf16"], "B")] for r in rows],
                caption="KV/token: KV-cache bytes per token; state/seq: conv + SSM state bytes per sequence; "
                        "at bf16 (Mamba-3's SSM and angle states fp32). Parameters: analytic count.")
    return 0


def cmd_models_show(args) -> int:
    from ..analytic.workloads.models import get_model
    m = get_model(args.model)
    data = {**m.summary(), "blocks": {k: v.model_dump() for k, v in m.spec.blocks.items()},
            "layer_sequence": [list(layer) for layer in m.layer_sequence],
            "sources": {k: v.model_dump() for k, v in m.spec.sources.items()}, "notes": m.spec.notes}
    print_json(data)
    return 0


# predict ------------------------------------------------------------------------------------------

def predict_kw(args, prefer: str) -> dict:
    """The options of ``report.predict`` but the point, from ``predict``'s arguments."""
    return dict(dtype=precision_from_args(args), prefer=prefer, launch=args.launch, bytes_basis=args.bytes_basis,
                impls=_impls(args.impl), recompute=args.recompute, logits=args.logits,
                runtime=getattr(args, "runtime", None),  # `plot` shares this without --runtime
                optimizer=getattr(args, "optimizer", None))


def predict_points(args) -> list[dict]:
    """One prediction per (model, spec, phase, batch, seqlen) of the arguments' lists. Several specs
    share one kind of ceiling (``sweep.common_prefer``); an ``--impl`` op must be run by one of the
    models and applies to those that run it."""
    from ..analytic import sweep
    from ..analytic.workloads.report import check_impls
    from ..prediction import predict_point
    models, specs = parse_models(args.model), parse_specs(args.hw)
    batches = sweep.parse_int_list(args.batch, "--batch")
    seqlens = sweep.parse_int_list(args.seqlen, "--seqlen")
    prefer, ceilings = sweep.common_prefer(specs, args.prefer)
    kw = predict_kw(args, prefer)
    if kw["optimizer"] and "train" not in args.phase:
        raise UserError(f"--optimizer {kw['optimizer']}: an optimizer step ends a train step; the phases asked are "
                        f"{', '.join(args.phase)} (add --phase train)")
    backends = _pairs(args.calibration_backend, "--calibration-backend", "backend", "attention_causal=torch.sdpa.flash")
    out = []
    for phase in args.phase:
        check_impls(models, phase, kw["impls"], kw["recompute"], kw["logits"])
        for m in models:
            for spec in specs:
                for b in batches:
                    for n in seqlens:
                        out.append(predict_point(m, spec, phase, b, n, args.context,
                                                 {**kw, "optimizer": kw["optimizer"] if phase == "train" else None},
                                                 ceilings, args.calibration, backends))
    return out


def predict_from_args(args) -> dict:
    """The one prediction of arguments that name one point (``plot roofline``)."""
    rs = predict_points(args)
    if len(rs) > 1:
        raise UserError(_ONE_POINT.format(what="this draws one prediction"))
    return rs[0]


_ONE_POINT = ("{what}: give one value each of --model, --hw, --phase, --batch and --seqlen "
              "(several print side by side in the table or as a JSON list)")


OP_CSV = ("label", "block", "op", "impl", "mode", "count", "flops_tensor", "flops_vector", "transcendentals",
          "bytes_compulsory", "bytes_executed", "intensity_flop_per_byte", "launches", "time_s", "bottleneck",
          "working_set_bytes", "fits_on_chip") + tuple(f"bound_{r}_s" for r in RESOURCES)


def _verdict_rows(v: dict) -> list[list[str]]:
    """The model against its baseline at the requested point: both bounds and the speedup (and the
    calibrated ones where ``--calibration`` covers both models)."""
    rows = [[f"baseline {v['baseline']}: time (analytic bound)", si(v["baseline_time_s"], "s")
             + ("" if v["fits"]["baseline"] else " (ignoring capacity: it does not fit)")],
            [f"speedup over {v['baseline']} (analytic bounds, baseline / model)", v["result"]]]
    c = v.get("calibrated")
    if c is not None:
        rows.append([f"speedup over {v['baseline']} ({c['label']} estimates)", c["result"]])
    return rows


def _print_predict(r: dict) -> None:
    t = r["total"]
    _table(
        f"Per op: {r['model']['id']} {r['phase']} on {r['spec']['id']} (analytic bound)",
        ["op call", "impl/mode", "x", "tensor FLOP", "vector FLOP", "transc.", "bytes (exec)", "FLOP/B",
         "bound", "bottleneck"],
        [[o["label"], f"{o['impl']}/{o['mode']}", o["count"], si(sum(o["flops_tensor"].values()), ""),
          si(o["flops_vector"], ""), si(o["transcendentals"], ""), si(o["bytes_executed"], "B"),
          "-" if o["intensity_flop_per_byte"] is None else f"{o['intensity_flop_per_byte']:.3g}",
          si(o["time_s"], "s"), o["bottleneck"] or "-"] for o in r["ops"]])
    _table("Per layer block (analytic bound)", ["block", "kind", "count", "time", "per instance", "share", "bottleneck"],
                [[b["block"], b["kind"], b["count"], si(b["time_s"], "s"), si(b["time_per_instance_s"], "s"),
                  "-" if b["share_of_total"] is None else f"{100 * b['share_of_total']:.1f} %", b["bottleneck"] or "-"]
                 for b in r["layers"]])
    if "calibrated" in t:
        title, columns, rows, caption = calibrated_op_table(r)
        _table(title, columns, rows, caption=caption)
    _table(f"Total: {r['model']['id']}, {r['phase']}, batch {r['batch']}, length {r['seqlen']}"
                + (f", context {r['context']}" if r["context"] else "") + f" on {r['spec']['id']}",
                ["quantity", "value (analytic bound / analytic estimate / calibrated estimate)"], _total_rows(r),
                caption="Ceilings: " + "; ".join(
                    f"{c['key']} = {si(c['value'], _unit(c['key']))} ({c['origin']})"
                    for c in r["spec"]["ceilings"] if c["value"])
                + ". " + " ".join(r["notes"]))


def _energy_rows(t: dict) -> list[list[str]]:
    """Energy of the step (``analytic/energy.py``): per step, per token, average power, with its label."""
    e = t.get("energy") or {}
    if not e.get("label"):
        return [["energy", e.get("note") or "no energy estimate"]]
    lab = e["label"]
    rows = [[f"energy per step ({lab}, at the achievable time)", si(t["energy_j"], "J")],
            [f"energy per token ({lab})", si(t["energy_per_token_j"], "J")],
            [f"average power ({lab})", si(t["avg_power_w"], "W")
             + (f" (power-limited: time stretched to {si(e['time_s_after_power_limit'], 's')})" if e["power_limited"] else "")],
            ["energy: how", e["note"]]]
    c = (t.get("calibrated") or {}).get("energy")
    if c and c.get("label"):
        rows.append([f"energy per step ({c['label']}, at the {c['time_basis']})", si(c["energy_j"], "J")
                     + (f" ({si(c['avg_power_w'], 'W')} average; power-limited)" if c["power_limited"]
                        else f" ({si(c['avg_power_w'], 'W')} average)")])
    elif c:
        rows.append(["energy (calibrated estimate)", c["note"]])
    return rows


def _total_rows(r: dict) -> list[list[str]]:
    """The total's rows (quantity, value) of one prediction."""
    t = r["total"]
    rows = [["analytic bound: time (max per op, summed)", si(t["time_s_ignoring_capacity"], "s")
             + ("" if t["fits"] else " (ignoring capacity: it does not fit, see below)")],
            ["analytic bound: sum (no overlap)", si(t["sum_s"], "s")],
            ["bottleneck", t["bottleneck"] or "none (no known ceiling)"],
            ["tokens / s (from the analytic bound)", _rate(t["tokens_per_s"])],
            ["time per token (analytic bound)", si(t["time_per_token_s"], "s")]]
    a = t.get("achievable")
    if a:
        rows += [[f"{a['label']}: time ({a['launch_regime']} launches)",
                  f"{si(a['time_s'], 's')} (host {si(a['host_s'], 's')}, device {si(a['gpu_s'], 's')}), "
                  f"bottleneck {a['bottleneck']}"],
                 [f"tokens / s ({a['label']})", _rate(a["tokens_per_s"])]]
        if a["not_modelled"]:
            rows.append([f"{a['label']}: not modelled", "; ".join(a["not_modelled"].values())])
        for name, v in (a.get("runtimes") or {}).items():
            unknown = f"; unknown (counted 0): {', '.join(v['host_unknown'])}" if v["host_unknown"] else ""
            rows.append([f"{a['label']}: runtime {name}", f"{si(v['time_s'], 's')} (host {si(v['host_s'], 's')}), "
                         f"saves {si(v['saving_s'], 's')} against the slowest runtime{unknown}"])
    rows += [[f"memory: {k}", si(v, "B")] for k, v in t["memory_bytes"].items()]
    rows += [["memory: total / capacity", f"{si(t['memory_total_bytes'], 'B')} / {si(t['memory_capacity_bytes'], 'B')}"],
             ["capacity", t["status"]]]
    rows += _energy_rows(t)
    for regime, v in t.get("regimes", {}).items():
        rows.append([f"decode, {regime} launches", f"{si(v['time_s'], 's')}, bottleneck {v['bottleneck']}"
                     + (" (launch not bounded: overhead unknown)" if v["launch_not_bounded"] else "")])
    if "compute_bound_batch" in t:
        rows.append(["decode turns compute-bound (analytic bound)", t["compute_bound_batch"]["result"]])
        mb = t["max_batch_in_memory"]
        rows.append([f"largest batch in device memory at context {mb['length']:g} (analytic estimate)", mb["result"]])
    if "verdict" in t:
        rows += _verdict_rows(t["verdict"])
    if "crossover" in t:
        c = t["crossover"]
        rows.append([f"crossover vs {c['baseline']} ({c['phase']})", c["result"]])
    if "calibrated" in t:
        rows += calibrated_total_rows(t)
    if "state_residency" in t:
        rows.append(["recurrent state (decode)", t["state_residency"]["result"]])
    if "pim_caveat" in t:
        p = t["pim_caveat"]
        rows.append(["caveat: PIM bandwidth applied to host GEMMs", p["result"]])
        rows.append(["time with host GEMMs at the host bandwidth (analytic bound, alternative)",
                     si(p["time_s_host_gemms"], "s")])
    if t["ops_not_fitting_on_chip"]:
        rows.append(["does not fit on chip (working set)", ", ".join(t["ops_not_fitting_on_chip"])])
    for nb in t["not_bounded"]:
        rows.append(["not bounded", nb])
    return rows


def _point_name(r: dict, varying: set[str]) -> str:
    parts = {"model": r["model"]["id"], "spec": r["spec"]["id"], "phase": r["phase"],
             "batch": f"B={r['batch']}", "seqlen": f"L={r['seqlen']}"}
    return " ".join(v for k, v in parts.items() if k in varying) or r["spec"]["id"]


def _print_side_by_side(rs: list[dict]) -> None:
    """One table: a row per total quantity, a column per prediction (rows a prediction lacks print '-')."""
    keys = {"model": lambda r: r["model"]["id"], "spec": lambda r: r["spec"]["id"], "phase": lambda r: r["phase"],
            "batch": lambda r: r["batch"], "seqlen": lambda r: r["seqlen"]}
    varying = {k for k, f in keys.items() if len({f(r) for r in rs}) > 1}
    per = []
    for r in rs:
        d: dict[str, str] = {}
        for k, v in _total_rows(r):  # a label may repeat ("not bounded"): one cell per label
            d[k] = f"{d[k]}; {v}" if k in d else v
        per.append(d)
    labels = list(dict.fromkeys(k for p in per for k in p))
    notes = list(dict.fromkeys(n for r in rs for n in r["notes"]))
    same = {k: keys[k](rs[0]) for k in keys if k not in varying}
    _table("Totals side by side" + (": " + ", ".join(f"{k} {v}" for k, v in same.items()) if same else ""),
           ["quantity"] + [_point_name(r, varying) for r in rs], [[k] + [p.get(k, "-") for p in per] for k in labels],
           caption=f"Ceilings: {rs[0]['spec']['ceilings_rule']}. Values: analytic bound / analytic estimate / "
                   "calibrated estimate, as each row says. " + " ".join(notes))


def cmd_predict(args) -> int:
    from .. import parallel_predict
    if parallel_predict.requested(args):
        return parallel_predict.cmd(args)
    if args.plot:  # before the prediction
        from ..figures._common import check_path
        check_path(args.plot, "--plot")
    rs = predict_points(args)
    if len(rs) > 1:
        if args.csv or args.plot:
            raise UserError(_ONE_POINT.format(what="--csv" if args.csv else "--plot"))
        if args.json:
            print_json(rs)
        else:
            _print_side_by_side(rs)
        return 0
    r = rs[0]
    if args.plot:
        from ..figures._common import save
        from ..figures.roofline import roofline_figure
        sc = SpecCeilings.of(parse_specs(args.hw)[0], args.prefer)
        title = (f"Roofline, analytic bound: {r['model']['id']} {r['phase']} B={r['batch']} L={r['seqlen']} "
                 f"on {sc.spec.id} ({args.prefer} ceilings where present)")
        save(roofline_figure(sc, r["ops"], title), args.plot)
    if args.json:
        print_json(r)
    elif args.csv:
        w = csv.writer(sys.stdout, lineterminator="\n")
        calibrated = "calibration" in r
        w.writerow(OP_CSV + (CALIBRATED_CSV if calibrated else ()))
        for o in r["ops"]:
            w.writerow([";".join(f"{k}={v:g}" for k, v in o["flops_tensor"].items()) if c == "flops_tensor"
                        else (o["bound_s"][c[6:-2]] if c.startswith("bound_") else o[c]) for c in OP_CSV]
                       + (csv_calibrated(o) if calibrated else []))
    else:
        _print_predict(r)
        if args.plot:
            print(f"wrote {args.plot}")
    return 0


# sweep --------------------------------------------------------------------------------------------

def cmd_sweep(args) -> int:
    import time
    from ..analytic import sweep
    if args.json and (args.out or args.format):
        raise UserError("--json prints JSON to stdout; for a file give --out FILE (format from --format or the "
                        "extension) instead")
    fmt = "json" if args.json else sweep.output_format(args.format, args.out)
    if args.out:  # before the analysis
        check_output_file(args.out, "--out")
    models, specs = parse_models(args.model), parse_specs(args.hw)
    phases = args.phase
    batches = sweep.parse_int_list(args.batch, "--batch")
    lengths = sweep.parse_int_list(args.seqlen, "--seqlen")
    prefer, ceilings = sweep.common_prefer(specs, args.prefer)
    t0 = time.perf_counter()
    unsupported: list[str] = []
    precision = precision_from_args(args)
    cols = sweep.sweep(models, specs, phases, batches, lengths, dtype=precision, prefer=prefer,
                       launch=args.launch, bytes_basis=args.bytes_basis, unsupported=unsupported,
                       achievable=args.achievable)
    elapsed = time.perf_counter() - t0
    for line in unsupported:
        print(f"ssmbench: warning: not costed (rows left empty): {line}", file=sys.stderr)
    meta = {"models": [m.id for m in models], "specs": [s.id for s in specs], "phases": phases,
            "batches": batches, "lengths": lengths, "dtype": args.dtype, "kv_dtype": precision.kv,
            "state_dtype": precision.state, "prefer": prefer, "ceilings": ceilings,
            "launch": args.launch or "graph for decode, eager otherwise", "bytes_basis": args.bytes_basis,
            "energy_time": "achievable step time (as predict)" if args.achievable else "time bound",
            "length_meaning": "prompt length (prefill), sequence length (train), context length (decode)",
            "unsupported": unsupported}
    if fmt != "json":
        print(f"ssmbench: ceilings: {ceilings}", file=sys.stderr)
    if not args.out:
        sys.stdout.write(sweep.records_text(cols, fmt, meta))
        return 0
    try:
        if fmt == "parquet":
            sweep.write_parquet(cols, args.out, meta)
        else:
            Path(args.out).write_text(sweep.records_text(cols, fmt, meta))
    except OSError as exc:
        raise UserError(f"cannot write {args.out}: {exc}") from None
    n = len(cols["model"])
    print(f"wrote {n} rows ({len(models)} models x {len(specs)} specs x {len(phases)} phases x "
          f"{len(batches)} batches x {len(lengths)} lengths) as {fmt} to {args.out} in {elapsed:.3g} s of analysis",
          file=sys.stderr)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("models", help="list the built-in workload models")
    sub = p.add_subparsers(dest="models_command", metavar="ACTION")
    sub.required = True
    pl = sub.add_parser("list", help="list built-in models with parameter, KV-cache and state counts")
    pl.add_argument("--json", action="store_true", help="print JSON")
    pl.set_defaults(func=cmd_models_list)
    ps = sub.add_parser("show", help="print one model's definition as JSON")
    ps.add_argument("model", help="model id, model .yaml file or Hugging Face config.json")
    ps.set_defaults(func=cmd_models_show)

    p = subparsers.add_parser("predict", help="roofline prediction (analytic bound) of a model phase on a spec",
                              description=PREDICT_DESCRIPTION, formatter_class=RawDescriptionDefaultsFormatter)
    point_options(p, model=DEFAULT_MODEL, hw=DEFAULT_SPEC, phase="prefill", batch="1", seqlen="4096",
                  seqlen_help="prompt length (prefill), sequence length (train), context (decode) or, with "
                              "--context, tokens generated (default 4096)")
    p.add_argument("--context", type=int, default=None, help="decode only: tokens already in the cache (default: none, then --seqlen is the context)")
    p.add_argument("--launch", default=None, choices=LAUNCH_CHOICES,
                   help="launch regime (default: graph for decode, eager otherwise)")
    p.add_argument("--runtime", default=None, choices=RUNTIME_CHOICES,
                   help="the software runtime of the achievable estimate's host terms (analytic/runtime.py): "
                        "sets the launch regime and adds a comparison of every runtime (default: none)")
    p.add_argument("--impl", action="append", metavar="OP=IMPL",
                   help="implementation of an op the model runs, with a rule for the phase; repeatable "
                        "(also used for the baseline of the verdict and crossover; default: the model's)")
    p.add_argument("--recompute", action="store_true", help="train: activation recomputation")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=None,
                   help="train: end the step with this optimizer's parameter update (adamw: torch.optim.AdamW, foreach)")
    p.add_argument("--logits", default="last", choices=("last", "all"),
                   help="prefill: LM head on last or all tokens (decode computes one token's logits: last only)")
    p.add_argument("--plot", metavar="FILE", help="also write a roofline plot of the ops (.png or .svg)")
    p.add_argument("--calibration", metavar="FILE",
                   help="calibrated profile (from `ssmbench calibrate`): add calibrated estimates with intervals "
                        "per op and in total, beside the analytic bounds")
    p.add_argument("--calibration-backend", action="append", metavar="OP=BACKEND",
                   help="with --calibration: the backend whose calibration to use for an op the profile "
                        "calibrates with several (e.g. attention_causal=torch.sdpa.flash), repeatable")
    common_options(p)
    precision_options(p)
    from ..parallel_predict import add_options as parallel_options
    parallel_options(p)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON")
    fmt.add_argument("--csv", action="store_true", help="print the per-op rows as CSV")
    p.set_defaults(func=cmd_predict)

    p = subparsers.add_parser("sweep", help="predictions over grids of models, specs, phases, batches, lengths")
    point_options(p, model="all", hw="all", phase="prefill,decode,train", batch="1:128:x2", seqlen="128:262144:x2")
    p.add_argument("--launch", default=None, choices=LAUNCH_CHOICES,
                   help="launch regime (default: graph for decode, eager otherwise)")
    p.add_argument("--format", choices=("csv", "json", "parquet"),
                   help="default: from --out's extension (.csv, .json, .parquet: needs pyarrow), else csv")
    p.add_argument("--out", help="output file (default: stdout)")
    p.add_argument("--json", action="store_true", help="print JSON to stdout")
    p.add_argument("--achievable", action="store_true",
                   help="add each row's achievable step time (achievable_s) and give its energy at that time, as "
                        "predict does (about 10 ms per row; default: energy at the time bound)")
    common_options(p)
    precision_options(p)
    p.set_defaults(func=cmd_sweep)
