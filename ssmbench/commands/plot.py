"""Command ``plot`` (``register(subparsers)``, see ssmbench/cli.py): a roofline, scaling or crossover
figure of analytic bounds, written as .png or .svg by ``ssmbench.figures``. Every curve is an analytic
bound; the spec's ceilings are labelled with their origin (measured / datasheet).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from ..analytic.roofline import SpecCeilings, SpecTable
from ..errors import UserError
from .predict import (DEFAULT_MODEL, DEFAULT_SPEC, common_options, parse_models, parse_specs, point_options,
                      predict_from_args)

DEFAULT_LENGTHS = "256:1048576:x2"


def _origins(sc: SpecCeilings) -> set[str]:
    return {c.origin for c in (*sc.tensor.values(), sc.vector, sc.special_function, sc.dram)}


def _one(values: list, flag: str, kind: str):
    if len(values) != 1:
        raise UserError(f"{flag}: plot {kind} draws one value, got {len(values)} ({', '.join(map(str, values))})")
    return values[0]


def _check_pair(model, base) -> None:
    if base.id == model.id:
        raise UserError(f"crossover: the model and the baseline are both {model.id}; a model compared with itself "
                        "has no crossover (give --baseline another model, e.g. a transformer)")


def _within(result: dict, lengths: np.ndarray) -> dict:
    """The crossover result for the figure: a crossover outside the plotted lengths is said so, not drawn."""
    x = result.get("length")
    lo, hi = int(lengths.min()), int(lengths.max())
    if x is None or lo <= x <= hi:
        return result
    return {**result, "length": None, "plotted_range": [lo, hi],
            "result": f"{result['result']}: outside the plotted range {lo}..{hi} (not drawn)"}


def cmd_plot(args) -> int:
    from ..figures._common import check_path, save
    from ..analytic.workloads.evaluate import analyze
    from ..analytic import sweep
    check_path(args.out, "--out")
    spec = _one(parse_specs(args.hw), "--hw", args.kind)
    phase = _one(args.phase, "--phase", args.kind)
    sc = SpecCeilings.of(spec, args.prefer)
    if args.kind == "roofline":
        from ..figures.roofline import roofline_figure
        ops = None
        if args.model != "none":
            model = args.model.split(",")[0]
            ns = argparse.Namespace(**{**vars(args), "model": model, "hw": spec.id, "phase": [phase],
                                       "seqlen": args.seqlen or "4096", "context": None, "impl": None,
                                       "recompute": False, "logits": "last", "launch": None, "calibration": None,
                                       "calibration_backend": None})
            r = predict_from_args(ns)
            ops = r["ops"]
            title = (f"Roofline, analytic bound: {r['model']['id']} {r['phase']} B={r['batch']} L={r['seqlen']} "
                     f"on {spec.id} ({args.prefer} ceilings where present)")
        save(roofline_figure(sc, ops, title if ops else None), args.out)
    else:
        lengths = np.array(sweep.parse_int_list(args.seqlen or DEFAULT_LENGTHS, "--seqlen"), dtype=float)
        batch = _one(sweep.parse_int_list(args.batch, "--batch"), "--batch", args.kind)
        table = SpecTable.of([spec], args.prefer)
        models = parse_models(args.model)
        if args.kind == "scaling":
            from ..figures.scaling import scaling_figure
            series = []
            for m in models:
                res = analyze(m, phase, table, [batch], lengths, dtype=args.dtype, bytes_basis=args.bytes_basis)
                t = np.where(res.fits[0, 0], res.time_s[0, 0], np.nan) / res.tokens[0]
                series.append({"model": m.id, "family": m.spec.family, "lengths": lengths, "time_per_token_s": t})
            save(scaling_figure(series, spec.id, phase, batch, _origins(sc)), args.out)
        else:
            from ..figures.crossover import crossover_figure
            from ..analytic.workloads.models import get_model
            model = _one(models, "--model", args.kind)
            base = get_model(args.baseline) if args.baseline else sweep.default_baseline(model)
            _check_pair(model, base)
            result = _within(sweep.crossover(model, base, spec, phase, batch, dtype=args.dtype, prefer=args.prefer,
                                             bytes_basis=args.bytes_basis), lengths)
            ra = analyze(model, phase, table, [batch], lengths, dtype=args.dtype, bytes_basis=args.bytes_basis)
            rb = analyze(base, phase, table, [batch], lengths, dtype=args.dtype, bytes_basis=args.bytes_basis)
            save(crossover_figure(lengths, ra.time_s[0, 0], rb.time_s[0, 0], result, spec.id, _origins(sc),
                                  ra.fits[0, 0], rb.fits[0, 0]), args.out)
            print(result["result"], file=sys.stderr)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("plot", help="write a roofline, scaling or crossover figure (.png / .svg)")
    p.add_argument("kind", choices=("roofline", "scaling", "crossover"), help="which figure to write")
    p.add_argument("--out", required=True, help="output file, .png or .svg")
    point_options(p, model=DEFAULT_MODEL, hw=DEFAULT_SPEC, phase="prefill", batch="1", seqlen=None,
                  seqlen_help=("roofline: the prediction's length (default 4096); scaling / crossover: the lengths "
                               f"on the x axis (default {DEFAULT_LENGTHS}); positive integers"),
                  seqlen_names=("--lengths",))
    p.add_argument("--baseline", help="crossover: the attention baseline (default: nearest-size transformer)")
    common_options(p)
    p.set_defaults(func=cmd_plot)
