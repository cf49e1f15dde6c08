"""Audit the analytic byte counts against device-memory bytes measured by Nsight Compute.

For a few cases of each GPU kernel backend of a suite, one call of the backend's ``run()`` is
profiled with ``ncu --clock-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum``
(ncu flushes the caches before each profiled kernel by default, so the counts are cold-cache DRAM
traffic, the same basis as the analytic compulsory and as-executed bytes). The measured bytes of
all kernels of that call are summed and stored beside ``analytic.registry.cost``'s compulsory bytes
(``bytes``) and as-executed bytes (``executed_bytes``), with the ratios measured / analytic.

How the kernels are attributed: one ncu process runs every selected case in turn (``_child``);
for each case the child prepares it, calls ``run()`` twice unprofiled (compilation, autotuning),
then opens a profiling window (``cudaProfilerStart``; ncu runs with ``--profile-from-start off``),
calls ``run()`` once, launches a marker kernel (``torch.cuda._sleep``: ncu names it
``spin_kernel``) and closes the window. In ncu's CSV the kernels between two markers are one case.

``--sections`` adds ncu sections (``SECTIONS``: SpeedOfLight, Occupancy, LaunchStats, WarpStateStats, ...) to the
same profiled calls: each kernel's throughput of each unit as a share of its peak, its achieved occupancy and
what limits it, its grid and block, registers and shared memory, and where its warps stall. That is the
evidence for a kernel the achievable model misses without a resource that explains it (the SSD's
``_chunk_scan_fwd_kernel`` at ~4x its stage estimate, FlashAttention-2's backward at ~2x: scripts/ssd_stage_gap.py,
scripts/model_tail.py): which unit is busy, or that none is and the warps wait. Stored per kernel under
``measured.per_kernel`` as "Section: Metric" values.

Only fwd and decode cases are audited by default (one call = one forward or one decode step);
block cases have no analytic cost and are skipped. Measured bytes are labelled "measurement
(ncu)"; analytic ones "analytic count". Usage (GPU machine, ncu on PATH):
  python -m ssmbench.measure.byte_audit --suite measure/suites/default_h200_a.yaml --out audit.json
  (``--suite`` again for more suites; ``--backends 'torch*,fla.*'`` / ``--exclude-backends 'mamba_ssm.*'``
  choose backends by shell-style patterns, e.g. those that need no compiled extension while it builds)
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..errors import UserError

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
MARKER = "spin_kernel"  # the kernel torch.cuda._sleep launches
# ncu's section identifiers (``ncu --list-sections``) that ``--sections`` may add: what a kernel's time goes to
# beside its bytes (throughput as % of peak per unit, achieved occupancy and its limiters, launch shape,
# registers and shared memory per block, warp stall reasons, pipe utilisation)
SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats", "ComputeWorkloadAnalysis",
            "MemoryWorkloadAnalysis", "SchedulerStats", "InstructionStats")
COMMAND_LINE_SECTION = "Command line profiler metrics"  # ncu's section name of the --metrics values
# named sets of raw ncu metrics that ``--metrics`` may add, for the questions the sections' summaries leave open:
# which pipe a kernel keeps busy (the mma.sync tensor pipe, shared-memory wavefronts and their bank conflicts,
# L2 atomics and reductions such as a lock or an accumulation in global memory) and what its warps wait on (the
# average warps stalled per issued instruction, by reason: a barrier, a global load, shared memory or another
# MIO unit, a busy math pipe, a fixed latency)
METRIC_SETS = {
    "pipes_stalls": (
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
        "lts__t_sectors_op_atom.sum",
        "lts__t_sectors_op_red.sum",
        *(f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio"
          for r in ("barrier", "long_scoreboard", "short_scoreboard", "mio_throttle", "math_pipe_throttle",
                    "wait", "lg_throttle", "not_selected", "selected", "membar", "branch_resolving")),
    ),
}


def backend_selected(backend: str, patterns: tuple[str, ...] | None, exclude: tuple[str, ...] = ()) -> bool:
    """Whether a backend name passes ``--backends`` (shell-style patterns; None: every backend) and
    ``--exclude-backends``."""
    if any(fnmatch.fnmatchcase(backend, x) for x in exclude):
        return False
    return patterns is None or any(fnmatch.fnmatchcase(backend, x) for x in patterns)


def select_cases(suite_paths: str | list[str], per_backend: int, modes: tuple[str, ...],
                 backends: tuple[str, ...] | None = None, exclude: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The first ``per_backend`` cases of each (kernel backend, op) in the suites, in modes ``modes``,
    of the backends that ``backends`` / ``exclude`` select (see ``backend_selected``)."""
    from ..analytic.cases import is_composite
    from .suite import load_suite

    paths = [suite_paths] if isinstance(suite_paths, str) else suite_paths
    picked: dict[str, list] = {}
    for sc in (sc for path in paths for sc in load_suite(path).cases):
        c = sc.case
        if is_composite(c.op) or c.mode not in modes or not backend_selected(c.backend, backends, exclude):
            continue
        lst = picked.setdefault(f"{c.backend}/{c.op}", [])
        if len(lst) < per_backend:
            lst.append(c.to_dict())
    return [c for lst in picked.values() for c in lst]


def sections_of(text: str | None) -> tuple[str, ...]:
    """The ``--sections`` value as ncu section identifiers (comma-separated; every one in ``SECTIONS``)."""
    names = tuple(x.strip() for x in (text or "").split(",") if x.strip())
    bad = [x for x in names if x not in SECTIONS]
    if bad:
        raise UserError(f"--sections: {', '.join(bad)} not an ncu section this audit reads; expected a comma-separated "
                        f"list of {', '.join(SECTIONS)}")
    return names


def metrics_of(text: str | None) -> tuple[str, ...]:
    """The ``--metrics`` value as raw ncu metric names: comma-separated names of ``METRIC_SETS`` or metric names
    (lower-case letters, digits, '_' and '.'), in order, without repeats."""
    out: list[str] = []
    for x in (x.strip() for x in (text or "").split(",") if x.strip()):
        if x in METRIC_SETS:
            out += METRIC_SETS[x]
        elif re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)+", x):
            out.append(x)
        else:
            raise UserError(f"--metrics: {x!r} is neither a metric set ({', '.join(METRIC_SETS)}) nor an ncu metric "
                            "name (lower-case letters, digits, '_' and '.', e.g. dram__bytes_read.sum)")
    return tuple(dict.fromkeys(m for m in out if m not in METRICS))


def parse_ncu_csv(text: str) -> list[dict[str, Any]]:
    """Kernel rows of ``ncu --csv --print-units base`` output: [{id, name, block, grid, metrics: {name: value}}]
    in launch order. Lines before the CSV header (ncu's ==PROF== lines, the program's output) are
    skipped; values may carry thousands separators. A section's value is keyed "Section: Metric" (the same
    metric name appears in several sections); the ``--metrics`` values keep their own names."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    kernels: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if not row.get("ID") or row.get("Metric Name") is None:
            continue
        k = row["ID"]
        if k not in kernels:
            kernels[k] = {"id": int(k), "name": row.get("Kernel Name", ""), "block": row.get("Block Size"),
                          "grid": row.get("Grid Size"), "metrics": {}}
            order.append(k)
        section = row.get("Section Name") or COMMAND_LINE_SECTION
        name = row["Metric Name"] if section == COMMAND_LINE_SECTION else f"{section}: {row['Metric Name']}"
        raw = (row.get("Metric Value") or "").replace(",", "")
        try:
            kernels[k]["metrics"][name] = float(raw)
        except ValueError:
            kernels[k]["metrics"][name] = None
    return [kernels[k] for k in order]


def split_by_marker(kernels: list[dict[str, Any]], n_cases: int) -> list[list[dict[str, Any]]]:
    """Kernels of each case: the segments before each marker kernel (markers dropped)."""
    segments: list[list[dict[str, Any]]] = [[]]
    for k in kernels:
        if MARKER in k["name"]:
            segments.append([])
        else:
            segments[-1].append(k)
    segments = segments[:-1]  # what follows the last marker belongs to no case
    if len(segments) != n_cases:
        raise UserError(f"ncu output has {len(segments)} marker-delimited segments for {n_cases} cases")
    return segments


def _child(cases_file: str, sidecar: str) -> int:
    """Run under ncu: each case's one profiled call, delimited by a marker kernel."""
    import torch

    from ..analytic.cases import Case
    from .backends.base import Unavailable, get_backend
    from .sweep import case_seed

    dev = torch.device("cuda")
    cases = json.loads(Path(cases_file).read_text())
    notes = []
    for d in cases:
        case = Case.from_dict(d)
        status, reason = "ok", None
        try:
            prepared = get_backend(case.backend, case.op).prepare(case, dev, case_seed(0, case.key()))
            for _ in range(2):
                prepared.run()
            torch.cuda.synchronize()
        except Unavailable as exc:
            prepared, status, reason = None, "unavailable", str(exc)
        except Exception as exc:  # recorded, the audit goes on
            prepared, status, reason = None, "error", f"{type(exc).__name__}: {exc}"
        torch.cuda.profiler.start()
        if prepared is not None:
            prepared.run()
            torch.cuda.synchronize()
        torch.cuda._sleep(1000)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        notes.append({"key": case.key(), "status": status, "reason": reason})
        del prepared
        torch.cuda.empty_cache()
    Path(sidecar).write_text(json.dumps(notes))
    return 0


def _analytic(case: dict[str, Any]) -> dict[str, Any] | None:
    from ..analytic import registry

    c = registry.cost(case["op"], case["dims"], impl=case["impl"], mode=case["mode"], dtype=case["dtype"])
    return {"label": "analytic count", "bytes": float(c.bytes), "executed_bytes": float(c.executed_bytes),
            "bytes_read": float(c.bytes_read), "bytes_written": float(c.bytes_written), "launches": float(c.launches)}


def ncu_command(ncu: str, log: Path, cases_file: Path, sidecar: Path, sections: tuple[str, ...] = (),
                metrics: tuple[str, ...] = ()) -> list[str]:
    """The ncu command line: the DRAM byte metrics and ``metrics``, and each of ``sections`` (``SECTIONS``)."""
    return [ncu, "--clock-control", "none", "--profile-from-start", "off", "--metrics", ",".join((*METRICS, *metrics)),
            *[a for s in sections for a in ("--section", s)],
            "--csv", "--print-units", "base", "--log-file", str(log),
            sys.executable, "-m", "ssmbench.measure.byte_audit", "_child", str(cases_file), str(sidecar)]


def audit(cases: list[dict[str, Any]], ncu: str, timeout_s: float, workdir: Path,
          sections: tuple[str, ...] = (), metrics: tuple[str, ...] = ()) -> dict[str, Any]:
    cases_file, sidecar, log = workdir / "audit_cases.json", workdir / "audit_status.json", workdir / "ncu.csv"
    cases_file.write_text(json.dumps(cases))
    cmd = ncu_command(ncu, log, cases_file, sidecar, sections, metrics)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    secs = time.perf_counter() - t0
    if proc.returncode != 0 or not sidecar.exists():
        raise UserError(f"ncu run failed (exit {proc.returncode}): {(proc.stderr or proc.stdout)[-1500:]}")
    status = json.loads(sidecar.read_text())
    segments = split_by_marker(parse_ncu_csv(log.read_text(errors="replace")), len(cases))
    out = []
    for case, st, kernels in zip(cases, status, segments):
        rec: dict[str, Any] = {**case, "key": st["key"], "status": st["status"], "reason": st["reason"]}
        if st["status"] == "ok":
            rd = sum((k["metrics"].get(METRICS[0]) or 0.0) for k in kernels)
            wr = sum((k["metrics"].get(METRICS[1]) or 0.0) for k in kernels)
            a = _analytic(case)
            rec["measured"] = {"label": "measurement (ncu, cold caches)", "dram_read_bytes": rd,
                               "dram_write_bytes": wr, "dram_bytes": rd + wr, "kernels": len(kernels),
                               "per_kernel": [{"name": k["name"][:120], "block": k["block"], "grid": k["grid"],
                                               **k["metrics"]} for k in kernels]}
            rec["analytic"] = a
            rec["ratio_measured_to_compulsory"] = (rd + wr) / a["bytes"] if a["bytes"] else None
            rec["ratio_measured_to_executed"] = (rd + wr) / a["executed_bytes"] if a["executed_bytes"] else None
        out.append(rec)
    return {"schema_version": 1, "tool": "ncu", "metrics": [*METRICS, *metrics], "sections": list(sections),
            "ncu_seconds": secs, "command": " ".join(cmd[:cmd.index("--csv")]) + " ...", "cases": out}


def print_summary(result: dict[str, Any]) -> None:
    print(f"{'case':<88} {'measured GB':>11} {'compulsory GB':>13} {'executed GB':>11} {'meas/exec':>9}")
    for c in result["cases"]:
        if c["status"] != "ok":
            print(f"{c['key'][:88]:<88} {c['status']}: {str(c['reason'])[:60]}")
            continue
        m, a = c["measured"]["dram_bytes"], c["analytic"]
        r = c["ratio_measured_to_executed"]
        print(f"{c['key'][:88]:<88} {m / 1e9:>11.4f} {a['bytes'] / 1e9:>13.4f} {a['executed_bytes'] / 1e9:>11.4f} "
              f"{(f'{r:.3f}' if r else '-'):>9}")
    print("(measured: ncu DRAM bytes of one call, cold caches; compulsory / executed: analytic counts)")


def _meta(argv: list[str]) -> dict[str, Any]:
    """The environment block of result files (device, driver, library versions, commit), read in this
    process before ncu starts the child that runs the kernels."""
    import torch

    from .environment import collect

    if not torch.cuda.is_available():
        raise UserError(f"the byte audit profiles CUDA kernels, but CUDA is not available here (torch {torch.__version__})")
    return collect(torch.device("cuda"), 0, [sys.argv[0], *argv])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_child"]:
        return _child(argv[1], argv[2])
    p = argparse.ArgumentParser(prog="python -m ssmbench.measure.byte_audit", description=__doc__.split("\n")[0])
    p.add_argument("--suite", required=True, action="append",
                   help="suite YAML whose kernel cases to audit (repeatable: one case per backend and op over all)")
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument("--per-backend", type=int, default=2, help="cases per backend (default 2)")
    p.add_argument("--modes", nargs="+", default=["fwd", "decode"], help="modes to audit (default fwd decode)")
    p.add_argument("--ncu", default=os.environ.get("NCU", "ncu"), help="the ncu executable")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds for the whole ncu run")
    p.add_argument("--backends", help="comma-separated shell-style patterns of backend names to audit, "
                                      "e.g. 'torch*,fla.*' (default: every backend)")
    p.add_argument("--exclude-backends", default="", help="comma-separated patterns of backend names to leave out")
    p.add_argument("--sections", default="",
                   help=f"comma-separated ncu sections to collect too, per kernel ({', '.join(SECTIONS)}); "
                        "each adds replays of every profiled kernel")
    p.add_argument("--metrics", default="",
                   help="comma-separated raw ncu metrics to collect too, per kernel, or names of metric sets "
                        f"({', '.join(METRIC_SETS)}: the tensor and shared-memory pipes, L2 atomics, warp stall "
                        "reasons)")
    args = p.parse_args(argv)
    patterns = tuple(x for x in args.backends.split(",") if x) if args.backends else None
    exclude = tuple(x for x in args.exclude_backends.split(",") if x)
    try:
        if Path(args.out).exists():
            raise UserError(f"--out {args.out}: file exists; the audit never overwrites a file (choose a new name)")
        if not Path(args.out).resolve().parent.is_dir():
            raise UserError(f"--out {args.out}: no such folder {Path(args.out).parent}")
        sections = sections_of(args.sections)
        metrics = metrics_of(args.metrics)
        cases = select_cases(args.suite, args.per_backend, tuple(args.modes), patterns, exclude)
        if not cases:
            raise UserError(f"{', '.join(args.suite)}: no kernel case in modes {args.modes} of the selected backends "
                            f"(--backends {args.backends or '*'}, --exclude-backends {args.exclude_backends or '-'})")
        meta = _meta(argv)
        with tempfile.TemporaryDirectory() as tmp:
            result = audit(cases, args.ncu, args.timeout, Path(tmp), sections, metrics)
        result["suite"] = args.suite
        result["meta"] = {**meta, "selection": {"per_backend": args.per_backend, "modes": args.modes,
                                                "backends": args.backends, "exclude_backends": args.exclude_backends}}
        Path(args.out).write_text(json.dumps(result, indent=1))
        print_summary(result)
        return 0
    except (UserError, subprocess.TimeoutExpired) as exc:
        print(f"byte audit: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
