"""``ssmbench predict --tp/--pp/--dp/--cp/--ep`` (options and output; ``commands/predict.py`` registers them): the multi-GPU prediction
(``analytic/workloads/parallel.py``), one point at a time. ``predict`` hands over here when any
parallel option is given (``requested``); its other options mean what they mean for one GPU."""

from __future__ import annotations

import argparse

from .errors import UserError
from .output import print_json, print_table, si

DEGREES = ("tp", "pp", "dp", "cp", "ep")


def add_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("multi-GPU (any of these makes a multi-GPU prediction; docs/multi_gpu.md)")
    g.add_argument("--tp", type=int, default=1, help="tensor-parallel GPUs (Megatron; Mamba-2: heads and groups split)")
    g.add_argument("--pp", type=int, default=1, help="pipeline stages")
    g.add_argument("--dp", type=int, default=1, help="data-parallel replicas (the batch splits over them)")
    g.add_argument("--cp", type=int, default=1, help="context-parallel GPUs (prefill, train: the sequence splits)")
    g.add_argument("--ep", type=int, default=1, help="expert-parallel GPUs (MoE; within the dp replicas)")
    g.add_argument("--microbatches", type=int, default=None,
                   help="pipeline microbatches (default: 1 without a pipeline, else one sequence each)")
    g.add_argument("--cp-attention", default="ring", choices=("ring", "allgather"),
                   help="how context parallelism exchanges K and V")
    g.add_argument("--pp-schedule", default="1f1b", choices=("1f1b", "gpipe"),
                   help="pipeline schedule (same bubble; activations in flight differ)")
    g.add_argument("--comm-overlap", default="none", choices=("none", "full"),
                   help="none: communication after the computation; full: overlappable communication hidden behind "
                        "the computation (the most overlap can give)")
    g.add_argument("--link", default=None, help="the spec's interconnect to use, by name (default: its first "
                                               "scale_up link, e.g. NVLink)")


def requested(args) -> bool:
    return (any(getattr(args, k) != 1 for k in DEGREES) or args.microbatches is not None
            or args.cp_attention != "ring" or args.pp_schedule != "1f1b" or args.comm_overlap != "none"
            or args.link is not None)


def _one(text: str, option: str) -> str:
    if "," in text or ":" in text or text == "all":
        raise UserError(f"{option} {text!r}: a multi-GPU prediction takes one value of {option}")
    return text.strip()


def cmd(args) -> int:
    from .analytic.workloads.parallel import predict_parallel
    from .analytic.workloads.shard import Parallel
    from .commands.predict import _impls, parse_models, parse_specs, precision_from_args

    for opt, bad in (("--calibration", args.calibration), ("--plot", args.plot), ("--csv", args.csv)):
        if bad:
            raise UserError(f"{opt} is not available with multi-GPU options (--tp/--pp/--dp/--cp/--ep)")
    if len(args.phase) != 1:
        raise UserError("a multi-GPU prediction takes one --phase")
    model = parse_models(_one(args.model, "--model"))[0]
    spec = parse_specs(_one(args.hw, "--hw"))[0]
    batch, seqlen = (_int(_one(v, o), o) for v, o in ((args.batch, "--batch"), (args.seqlen, "--seqlen")))
    par = Parallel(args.tp, args.pp, args.dp, args.cp, args.ep, args.microbatches, args.cp_attention,
                   args.pp_schedule, args.comm_overlap)
    r = predict_parallel(model, spec, args.phase[0], batch, seqlen, args.context, par=par,
                         dtype=precision_from_args(args), prefer=args.prefer, launch=args.launch,
                         bytes_basis=args.bytes_basis, impls=_impls(args.impl), recompute=args.recompute,
                         logits=args.logits, link=args.link)
    if args.json:
        print_json(r)
    else:
        _print(r)
    return 0


def _int(text: str, option: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UserError(f"{option} {text!r}: expected a whole number") from None


def _s(v) -> str:
    return "-" if v is None else si(v, "s")


def _print(r: dict) -> None:
    p, t, m = r["parallel"], r["time"], r["memory"]
    title = (f"{r['model']} {r['phase']} B={r['batch']} L={r['seqlen']} on {p['gpus']} x {r['spec']} "
             f"(tp {p['tp']}, pp {p['pp']}, dp {p['dp']}, cp {p['cp']}, ep {p['ep']}; {p['microbatches']} microbatch(es))")
    rows = [["compute per microbatch (heaviest stage)", _s(t["compute_microbatch_s"]), "analytic bound"],
            ["communication waited for, per microbatch", _s(t["dependent_comm_microbatch_s"]), "interconnect model"],
            ["communication that can overlap, per microbatch", _s(t["overlappable_comm_microbatch_s"]),
             "interconnect model"],
            ["microbatch time", _s(t["microbatch_s"]), f"overlap {r['parallel']['overlap']}"],
            ["pipeline bubble fraction", f"{t['bubble_fraction']:.3g}", "(pp - 1) / (m + pp - 1)"],
            ["gradient all-reduce (exposed / total)", f"{_s(t['dp_comm_exposed_s'])} / {_s(t['dp_comm_s'])}",
             "interconnect model"],
            ["step time", _s(t["step_s"]), "analytic bound + interconnect model"],
            ["throughput", "-" if t["tokens_per_s"] is None else f"{t['tokens_per_s']:,.0f} tokens/s", "from the step time"]]
    if "single_gpu" in r:
        g = r["single_gpu"]
        rows += [["one GPU, same point", _s(g["step_s"]), "analytic bound"],
                 ["speedup / scaling efficiency", f"{g['speedup']:.3g}x / {g['scaling_efficiency']:.3g}",
                  "one GPU / this step"]]
    rows += [["memory per GPU", f"{si(m['total_bytes'], 'B')} ({m['status']})", "analytic estimate"]]
    print_table(title, ["quantity", "value", "label"], rows,
                caption=f"{r['validation']}. {t['overlap']}."
                        + (f" Latency unknown for {', '.join(t['latency_unknown'])}: bandwidth terms only (lower bound)."
                           if t["latency_unknown"] else ""), key_column=True, fold=True)
    if r["communication"]:
        link = r["link"]
        print_table(f"communication over {link['name']} ({si(link['bandwidth_per_direction'], 'B/s')} per direction, "
                    f"{link['origin']})", ["what", "group", "collective", "ranks", "bytes each", "count", "time", "overlaps"],
                    [[c["what"], c["group"], c["collective"], c["ranks"], si(c["bytes"], "B"), f"{c['count']:g}",
                      _s(c["time_s"]), "yes" if c["overlappable"] else "no"] for c in r["communication"]],
                    caption="time = count x (latency + bytes x nccl-tests bus factor / bus bandwidth); counts per "
                            "microbatch, the gradient all-reduce per step. " + link["provenance"],
                    key_column=True, fold=True)
    print_table("memory per GPU (analytic estimate)", ["class", "bytes"],
                [[k, si(v, "B")] for k, v in m["per_gpu_bytes"].items()], caption="; ".join(m["notes"]) or None,
                key_column=True)
