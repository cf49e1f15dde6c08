"""CLI: ``ssmbench measure`` (run a suite into a new result file) and ``ssmbench probe`` (attained
ceilings of the local device)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..files import check_output_file, check_output_folder
from ..output import print_json, print_table

STATUS_EXIT = "exit code 1 when any case failed its correctness check or raised an error, else 0"


def register(subparsers) -> None:
    m = subparsers.add_parser(
        "measure",
        help="time real kernels over a suite (correctness gate first); writes a new result file",
        description=(
            "Run every case of a suite: correctness gate against the plain-PyTorch reference, then timing "
            "(CUDA events, L2 flushed, or perf_counter_ns on the CPU), energy (NVML), peak memory, analytic "
            "counts and roofline fraction. Each run writes a new versioned JSON file under --out; finished "
            f"cases are on disk as soon as they finish. {STATUS_EXIT}."),
    )
    m.add_argument("--suite", required=True, help="suite YAML file, or the name of a built-in suite (cpu_smoke)")
    m.add_argument("--device", default="cuda", help="cpu, cuda or cuda:N (default cuda)")
    m.add_argument("--out", required=True, metavar="DIR",
                   help="folder for result files (created if missing; the folder it goes in must exist)")
    m.add_argument("--resume", action="store_true",
                   help="skip cases already finished in --out on a device of this name (status ok, "
                        "failed_check or oom; cases that ended 'unavailable' or 'error' run again)")
    m.add_argument("--resume-from", action="append", default=[], metavar="DIR",
                   help="also skip cases finished in the result files of DIR (repeatable; same rules as "
                        "--resume), e.g. an earlier run's folder, so that --out holds only this run's file")
    m.add_argument("--hw", help="hardware spec (built-in id or YAML file) for roofline fractions "
                   "(default on a GPU: the built-in spec whose device_names list it; on the CPU: none)")
    m.add_argument("--case-timeout", type=float, metavar="S",
                   help="record a case that gives no result within S seconds as 'timeout' and end the run "
                        "(exit code 124); --resume continues after it")
    m.add_argument("--filter", help="run only cases whose key contains this text")
    m.add_argument("--limit", type=int, help="run at most N cases (after --filter and --resume)")
    m.add_argument("--seed", type=int, default=0, help="run seed; each case derives its own from it (default 0)")
    m.add_argument("--target-time", type=float, help="seconds of timed samples per case "
                                                       "(default 0.5 on CUDA, 0.05 on the CPU)")
    m.add_argument("--no-flush", action="store_true", help="do not flush L2 before each timed call (CUDA)")
    m.add_argument("--no-energy", action="store_true", help="skip the NVML energy window")
    m.add_argument("--energy-window", type=float, default=1.0, help="seconds per energy window (>= 1, default 1)")
    m.add_argument("--threads", type=int, help="CPU threads for PyTorch (torch.set_num_threads; default: PyTorch's)")
    m.add_argument("--distributed", action="store_true",
                   help="shard the cases over the ranks of a torchrun job (torchrun --nproc-per-node N -m ssmbench "
                        "measure ... --distributed): case i on rank i mod N, one result file per rank, merged by "
                        "rank 0 at the end (NCCL group on cuda, each rank on cuda:LOCAL_RANK; gloo on cpu); "
                        "--limit applies to each rank's share")
    m.add_argument("--dry-run", action="store_true", help="list the cases and exit")
    m.add_argument("--json", action="store_true", help="print the summary as JSON (progress goes to stderr)")
    m.set_defaults(func=cmd_measure)

    g = subparsers.add_parser(
        "merge-results",
        help="merge the per-rank result files of a measure --distributed run into one result file",
        description="Merge every rank<r>-*.json / .jsonl file of FOLDER (finished, or cut off when a rank died) into "
                    "one new result file in FOLDER whose meta.distributed names every rank's host and GPU; records "
                    "carry 'rank'. The rank files are removed afterwards (the merged file holds all their cases) "
                    "unless --keep-parts. Rank 0 does this at the end of a run that finishes; this command is for "
                    "a run that did not.")
    g.add_argument("folder", metavar="FOLDER", help="the --out folder of the distributed run")
    g.add_argument("--keep-parts", action="store_true", help="keep the rank files after merging")
    g.add_argument("--json", action="store_true", help="print the result as JSON")
    g.set_defaults(func=cmd_merge)

    p = subparsers.add_parser(
        "probe",
        help="measure the local device's attained ceilings (copy, matmul, vector, exp, launch latency)",
        description="Measure attained ceilings and write them as a spec 'measured:' list (the spec schema's "
                    "format, with units, date and method) to a new file (.yaml or .json); an existing file is never "
                    "overwritten. 'ssmbench specs new --from SPEC --probe FILE' merges it into a spec. Each "
                    "measurement records the spread of its repeats (p90/p10) and warns when it is wide.",
    )
    p.add_argument("--device", default="cuda", help="cpu, cuda or cuda:N (default cuda)")
    p.add_argument("--out", required=True, help="new file to write (.yaml, .yml or .json)")
    p.add_argument("--copy-mib", type=int, help="copy buffer size in MiB (default 1024 on CUDA, 64 on the CPU)")
    p.add_argument("--matmul-n", type=int, help="matmul size n (n x n x n; default 8192 on CUDA, 512 on the CPU)")
    p.add_argument("--vector-numel", type=int,
                   help="elements in the vector / exp measurements (default 4194304 on CUDA, 65536 on the CPU)")
    p.add_argument("--iters", type=int,
                   help="dependent operations per element in the CUDA vector / exp kernels (default 4096)")
    p.add_argument("--target-time", type=float,
                   help="seconds of timed samples per measurement (default 0.5 on CUDA, 0.1 on the CPU)")
    p.add_argument("--threads", type=int, help="CPU threads for PyTorch (torch.set_num_threads; default: PyTorch's)")
    p.add_argument("--energy", action="store_true",
                   help="measure the energy parameters only (NVML windows of >= 1 s: empty launches, FMA and exp "
                        "loops, L2-resident reads, DRAM copy, GEMM per dtype; CUDA with NVML)")
    p.add_argument("--collectives", action="store_true",
                   help="instead: latency and bus bandwidth of all_reduce, all_gather, reduce_scatter, all_to_all and "
                        "send/recv over message sizes, on every rank of a torchrun job (torchrun --nproc-per-node N "
                        "-m ssmbench probe --collectives --out FILE); rank 0 writes FILE; NCCL on cuda, gloo on cpu")
    p.add_argument("--link-index", type=int, default=0,
                   help="--collectives: the spec's interconnect link the measured entries are keyed on (default 0)")
    p.add_argument("--min-bytes", type=int, help="--collectives: smallest message (default 1024)")
    p.add_argument("--max-bytes", type=int,
                   help="--collectives: largest message (default 1 GiB on cuda, 1 MiB on the cpu)")
    p.add_argument("--json", action="store_true", help="print the probe result as JSON")
    p.set_defaults(func=cmd_probe)


def _threads(n: int | None) -> None:
    if n is None:
        return
    if n < 1:
        raise UserError(f"--threads must be at least 1, got {n}")
    import torch

    torch.set_num_threads(n)  # recorded in the metadata (torch_settings.num_threads)


def _fmt(v: float | None, kind: str) -> str:
    from ..hwspecs.units import format_quantity

    return "" if v is None else format_quantity(v, kind, digits=4)


def _progress_line(i: int, n: int, rec: dict[str, Any]) -> str:
    t = (rec.get("time_s") or {}).get("median")
    tail = f"median {_fmt(t, 'time')} (measurement)" if t is not None else (rec.get("reason") or "")
    return f"[{i + 1}/{n}] {rec['status']:<12} {rec['key']}  {tail[:160]}"


def _result_dir(d: str) -> Path:
    p = Path(d)
    if not p.is_dir():
        raise UserError(f"--resume-from {d}: not a folder (expected a folder of result files)")
    return p


def _spec_for(device, spec):
    """The spec for roofline fractions on ``device``, by the one device rule (``device_names``): on a
    GPU, ``--hw`` omitted means the built-in spec that lists the GPU (none: no fractions, said so);
    ``--hw`` naming another real GPU's spec is an error (its peaks are not this device's). A
    hypothetical spec, or any spec on the CPU, is taken as given."""
    from ..hwspecs import SpecError, device_matches, spec_for_device
    from ..measure.environment import device_name

    if device.type != "cuda":
        return spec
    name = device_name(device)
    if spec is None:
        try:
            return spec_for_device(name)
        except SpecError as exc:
            print(f"ssmbench: note: no roofline fractions: {exc}", file=sys.stderr)
            return None
    if not spec.hypothetical and not device_matches(spec, name):
        listed = ", ".join(repr(n) for n in spec.device_names) or "none"
        raise UserError(f"--hw {spec.id}: this run measures on {name!r}, which is not that spec's device "
                        f"(its device_names: {listed}); leave --hw out to use the spec that lists {name!r}, "
                        "or give a hypothetical spec")
    return spec


def cmd_measure(args) -> int:
    from ..hwspecs import get_spec
    from ..measure.suite import load_suite
    from ..measure.sweep import SweepConfig, run_sweep, select, torch_device
    from ..measure.timing import TimingSettings

    check_output_folder(args.out, "--out")
    if args.limit is not None and args.limit < 1:
        raise UserError(f"--limit must be at least 1, got {args.limit}")
    if args.energy_window < 1.0:
        raise UserError(f"--energy-window must be at least 1 s (the NVML counter refreshes every 20-100 ms), "
                        f"got {args.energy_window}")
    if args.case_timeout is not None and not args.case_timeout > 0:
        raise UserError(f"--case-timeout must be > 0 seconds, got {args.case_timeout}")
    if args.target_time is not None and not args.target_time > 0:
        raise UserError(f"--target-time must be > 0 seconds, got {args.target_time}")
    suite = load_suite(args.suite)
    spec = get_spec(args.hw) if args.hw else None
    if args.dry_run:
        todo, _, filtered = select(suite.cases, args.filter, args.limit)
        rows = [(sc.case.key(), sc.entry) for sc in todo]
        if args.json:
            print_json({"suite": suite.name, "cases": [r[0] for r in rows], "filtered_out": filtered})
        else:
            print_table(f"suite {suite.name}: {len(rows)} cases", ["case key", "entry"], rows)
        return 0
    rank = None
    if args.distributed:
        from ..measure.distributed import init, rank_meta

        rank = init(args.device)
    device = torch_device(rank.device if rank else args.device)
    spec = _spec_for(device, spec)
    _threads(args.threads)
    target = args.target_time if args.target_time is not None else (0.5 if device.type == "cuda" else 0.05)
    settings = TimingSettings(target_s=target, flush_l2=not args.no_flush,
                              warmup_s=0.1 if device.type == "cuda" else 0.01)
    cfg = SweepConfig(device=str(device), out_dir=Path(args.out), timing=settings, seed=args.seed,
                      resume=args.resume, resume_from=[_result_dir(d) for d in args.resume_from], spec=spec, energy=not args.no_energy,
                      energy_window_s=args.energy_window, argv=list(sys.argv),
                      arguments={k: v for k, v in vars(args).items() if k != "func"},
                      suite_name=suite.name, suite_path=suite.path, case_timeout_s=args.case_timeout,
                      shard=(rank.rank, rank.world_size) if rank else None,
                      distributed=rank_meta(rank) if rank else None)
    # Progress: one plain line per case (stderr under --json so stdout stays JSON).
    stream = sys.stderr if args.json else sys.stdout
    tag = f"[rank {rank.rank}/{rank.world_size}] " if rank else ""

    def say(text: str) -> None:
        print(tag + text, file=stream, flush=True)

    def on_start(n: int, finished: int, filtered: int) -> None:
        extra = []
        if finished:
            extra.append(f"{finished} already finished in {args.out}")
        if filtered:
            extra.append(f"{filtered} filtered out")
        say(f"{n} cases to run on {device} (suite {suite.name}"
            + (f"; {', '.join(extra)}" if extra else "") + ")")

    def on_case(i: int, n: int, rec: dict[str, Any]) -> None:
        say(_progress_line(i, n, rec))

    def on_resume(resumed) -> None:
        say(f"resuming from {len(resumed.files)} result file(s) of this device")
        for path, name in resumed.other_device.items():
            say(f"set aside {path}: measured on {name or 'an unnamed device'}, not this device; its cases run again")

    summary = run_sweep(suite.cases, cfg, args.filter, args.limit, on_start, on_case, on_resume)
    if rank is not None:
        return _finish_distributed(rank, summary, args, say)
    if summary.path is None:
        if args.json:
            print_json({"path": None, "counts": {}, "skipped_finished": summary.skipped_finished, "cases": []})
        else:
            say("nothing to run; no result file written")
        return 0
    if summary.interrupted:
        last = summary.records[-1]
        say(f"run ended early after {last['key']}: {last.get('ends_run')}")
    bad = summary.counts.get("error", 0) + summary.counts.get("failed_check", 0) + summary.counts.get("timeout", 0)
    if args.json:
        print_json({"path": str(summary.path), "counts": summary.counts,
                    "skipped_finished": summary.skipped_finished,
                    "cases": [{k: r.get(k) for k in ("key", "status", "reason", "time_s", "achieved",
                                                      "roofline_fraction")} for r in summary.records]})
        return 1 if bad else 0
    rows = []
    for r in summary.records:
        t = (r.get("time_s") or {}).get("median")
        a = r.get("achieved") or {}
        frac = r.get("roofline_fraction")
        rows.append((r["key"], r["status"], _fmt(t, "time"), _fmt(a.get("flop_per_s"), "flop_rate"),
                     _fmt(a.get("bytes_per_s"), "bandwidth"), "" if frac is None else f"{frac:.3g}"))
    caption = ("median: measurement; FLOP/s, B/s: analytic count (compulsory bytes) / measured median; "
               + (f"roofline: analytic bound on {spec.id} / measured median" if spec is not None
                  else "roofline: give --hw SPEC")
               + f". Reasons of non-ok cases are in {summary.path}")
    # case keys are long: they fold, never cut; the short columns stay on one line
    print_table(f"{len(summary.records)} cases: " + ", ".join(f"{v} {k}" for k, v in sorted(summary.counts.items())),
                ["case", "status", "median", "FLOP/s", "B/s", "roofline"], rows, caption,
                fold=("case",), no_wrap=("status", "median", "FLOP/s", "B/s", "roofline"))
    return 1 if bad else 0


def _finish_distributed(rank, summary, args, say) -> int:
    """The end of a sharded sweep: rank 0 merges every rank's records (``measure/distributed.py``); each
    rank's exit code is its own cases' (torchrun reports the job failed when any rank's is non-zero)."""
    from ..measure.distributed import finish_run, shutdown

    try:
        merged = finish_run(rank, summary, args.out)
    finally:
        shutdown()
    bad = sum(summary.counts.get(k, 0) for k in ("error", "failed_check", "timeout"))
    if rank.rank == 0:
        if merged["path"]:
            counts = "; ".join(f"rank {r['rank']}: {r['counts']}" for r in merged["ranks"] if r)
            say(f"merged {sum(1 for r in merged['ranks'] if r)} rank file(s) into {merged['path']} ({counts})")
        elif merged.get("error"):
            say(f"merge failed ({merged['error']}); the rank files stay in {args.out}: "
                f"ssmbench merge-results {args.out}")
        else:
            say("nothing was run on any rank; no result file written")
        if args.json:
            print_json({"path": merged["path"], "ranks": merged.get("ranks"), "merge_error": merged.get("error")})
    return 1 if bad else 0


def cmd_merge(args) -> int:
    from ..measure.distributed import merge_folder

    folder = Path(args.folder)
    if not folder.is_dir():
        raise UserError(f"{args.folder}: not a folder (expected the --out folder of a measure --distributed run)")
    path, parts = merge_folder(folder, keep_parts=args.keep_parts)
    if args.json:
        print_json({"path": str(path), "merged": [str(p) for p in parts], "kept_parts": args.keep_parts})
    else:
        print(f"merged {len(parts)} rank file(s) into {path}"
              + ("" if args.keep_parts else " (the rank files were removed: the merged file holds all their cases)"))
    return 0


def cmd_probe(args) -> int:
    from ..measure.probe import ProbeSizes, run_probe, write_probe
    from ..measure.sweep import torch_device

    out = check_output_file(args.out, "--out", replace=False,  # before spending time measuring
                            refuse="probe never overwrites a file (choose a new name)")
    if out.suffix not in (".yaml", ".yml", ".json"):
        raise UserError(f"--out {out}: expected a .yaml, .yml or .json file name")
    if args.collectives:
        return _probe_collectives(args, out)
    device = torch_device(args.device)
    _threads(args.threads)
    d = ProbeSizes.default(device.type)
    given = {"copy_mib": args.copy_mib, "matmul_n": args.matmul_n, "vector_numel": args.vector_numel,
             "iters": args.iters, "target_s": args.target_time}
    for k, v in given.items():
        if v is not None and not v > 0:
            raise UserError(f"--{k.replace('_', '-')} must be > 0, got {v}")
    sizes = ProbeSizes(**{k: (v if v is not None else getattr(d, k)) for k, v in given.items()})
    doc = run_probe(device, sizes, argv=list(sys.argv), log=lambda s: print(s, file=sys.stderr, flush=True),
                    energy=args.energy)
    doc["meta"]["arguments"] = {k: v for k, v in vars(args).items() if k != "func"}
    path = write_probe(doc, out)
    for warning in doc["warnings"]:  # stderr, so that --json output stays JSON
        print(f"ssmbench: warning: {warning}", file=sys.stderr)
    if args.json:
        print_json(doc)
        return 0
    rows = [(m["key"], m["value"], m["method"]) for m in doc["measured"]]
    rows += [(o["name"] + " (observation)", o["value"], o["method"]) for o in doc["observations"]]
    rows += [(f["name"] + " (failed)", "", f["reason"]) for f in doc["failed"]]
    print_table(f"attained ceilings of {device} (measurement)", ["spec key", "value", "method"], rows,
                caption=f"written to {path}; p90/p10: spread of the timed repeats (1 = all equal). Merge into a "
                        f"spec: ssmbench specs new --from SPEC --probe {path} --out NEW.yaml")
    return 0


def _probe_collectives(args, out: Path) -> int:
    """``probe --collectives`` on one rank of a torchrun job (measure/collectives.py)."""
    from ..measure.collectives import CollectiveSizes, run_collectives
    from ..measure.distributed import init, shutdown
    from ..measure.probe import write_probe

    if args.link_index < 0:
        raise UserError(f"--link-index must be >= 0, got {args.link_index}")
    rank = init(args.device)
    _threads(args.threads)
    d = CollectiveSizes.default("cuda" if rank.device.startswith("cuda") else "cpu")
    sizes = CollectiveSizes(args.min_bytes or d.min_bytes, args.max_bytes or d.max_bytes, d.factor,
                            args.target_time or d.target_s)
    if not 0 < sizes.min_bytes <= sizes.max_bytes:
        raise UserError(f"--min-bytes {sizes.min_bytes} / --max-bytes {sizes.max_bytes}: expected 0 < min <= max")
    try:
        doc = run_collectives(rank, sizes, args.link_index, argv=list(sys.argv),
                              log=lambda s: print(s, file=sys.stderr, flush=True))
    finally:
        shutdown()
    if doc is None:  # not rank 0
        return 0
    doc["meta"]["arguments"] = {k: v for k, v in vars(args).items() if k != "func"}
    path = write_probe(doc, out)
    if args.json:
        print_json(doc)
        return 0
    fits = doc["collectives"]["fits"]
    rows = [(c, _fmt(f["latency_s"], "time"), _fmt(f["bus_bandwidth_bytes_per_s"], "bandwidth"),
             f"{f['max_relative_error']:.2g}") for c, f in fits.items()]
    print_table(f"collectives over {doc['collectives']['ranks']} ranks (measurement; fit t = latency + S x factor / "
                "busbw)", ["collective", "latency", "bus bandwidth", "max rel. error of fit"], rows,
                caption=f"{doc['collectives']['transport']}. Written to {path}"
                        + (f"; merge: ssmbench specs new --from SPEC --probe {path} --out NEW.yaml"
                           if doc["measured"] else "; no measured: entries (not an NCCL run)"))
    return 0
