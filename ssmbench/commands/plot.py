"""Command ``plot`` (``register(subparsers)``, see ssmbench/cli.py): a roofline, scaling or crossover
figure of analytic bounds, written as .png or .svg by ``ssmbench.figures``. Every curve is an analytic
bound; the spec's ceilings are labelled with their origin (measured / datasheet).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from ..analytic.roofline import SpecCeilings, SpecTable
from ..analytic.workloads.phases import PHASES
from .predict import DEFAULT_MODEL, DEFAULT_SPEC, common_options, parse_models, predict_from_args


def _origins(sc: SpecCeilings) -> set[str]:
    return {c.origin for c in (*sc.tensor.values(), sc.vector, sc.special_function, sc.dram)}


def cmd_plot(args) -> int:
    from ..figures._common import check_path, save
    from ..hwspecs import get_spec
    from ..analytic.workloads.evaluate import analyze
    check_path(args.out, "--out")
    spec = get_spec(args.hw)
    sc = SpecCeilings.of(spec, args.prefer)
    if args.kind == "roofline":
        from ..figures.roofline import roofline_figure
        ops = None
        if args.model != "none":
            args.model = args.model.split(",")[0]
            args.seqlen = args.seqlen or 4096
            ns = argparse.Namespace(**{**vars(args), "context": None, "impl": None, "recompute": False,
                                       "logits": "last", "launch": None})
            r = predict_from_args(ns)
            ops = r["ops"]
            title = (f"Roofline, analytic bound: {r['model']['id']} {r['phase']} B={r['batch']} L={r['seqlen']} "
                     f"on {spec.id} ({args.prefer} ceilings where present)")
        save(roofline_figure(sc, ops, title if ops else None), args.out)
    else:
        from ..analytic import sweep
        lengths = np.array(sweep.parse_int_list(args.lengths, "--lengths"), dtype=float)
        table = SpecTable.of([spec], args.prefer)
        models = parse_models(args.model)
        if args.kind == "scaling":
            from ..figures.scaling import scaling_figure
            series = []
            for m in models:
                res = analyze(m, args.phase, table, [args.batch], lengths, dtype=args.dtype,
                              bytes_basis=args.bytes_basis)
                t = np.where(res.fits[0, 0], res.time_s[0, 0], np.nan) / res.tokens[0]
                series.append({"model": m.id, "family": m.spec.family, "lengths": lengths, "time_per_token_s": t})
            save(scaling_figure(series, spec.id, args.phase, args.batch, _origins(sc)), args.out)
        else:
            from ..figures.crossover import crossover_figure
            from ..analytic.workloads.models import get_model
            model = models[0]
            base = get_model(args.baseline) if args.baseline else sweep.default_baseline(model)
            result = sweep.crossover(model, base, spec, args.phase, args.batch, dtype=args.dtype,
                                     prefer=args.prefer, bytes_basis=args.bytes_basis)
            ra = analyze(model, args.phase, table, [args.batch], lengths, dtype=args.dtype, bytes_basis=args.bytes_basis)
            rb = analyze(base, args.phase, table, [args.batch], lengths, dtype=args.dtype, bytes_basis=args.bytes_basis)
            save(crossover_figure(lengths, ra.time_s[0, 0], rb.time_s[0, 0], result, spec.id, _origins(sc),
                                  ra.fits[0, 0], rb.fits[0, 0]), args.out)
            print(result["result"], file=sys.stderr)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("plot", help="write a roofline, scaling or crossover figure (.png / .svg)")
    p.add_argument("kind", choices=("roofline", "scaling", "crossover"))
    p.add_argument("--out", required=True, help="output file, .png or .svg")
    p.add_argument("--hw", default=DEFAULT_SPEC, help="spec id or spec file")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help="roofline: model whose ops to plot ('none': ceilings only); scaling: comma list; "
                        "crossover: the SSM / hybrid model")
    p.add_argument("--baseline", help="crossover: the attention baseline (default: nearest-size transformer)")
    p.add_argument("--phase", default="prefill", choices=PHASES)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seqlen", type=int, default=None, help="roofline: length of the prediction (default 4096)")
    p.add_argument("--lengths", default="256:1048576:x2", help="scaling / crossover: lengths on the x axis")
    common_options(p)
    p.set_defaults(func=cmd_plot)
