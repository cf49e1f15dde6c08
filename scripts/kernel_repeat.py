"""How far one kernel's device time moves between measurement sessions, by kernel library, from the
whole-model profiles: a model-free floor under the error of any device-time prediction judged on one session.

Usage: python scripts/kernel_repeat.py DIR [DIR ...] [--min-us 5] [--top 12] [--json OUT]

For every model-run file under the folders (``measure/models/records.py``; one file = one session: one
process on one machine), every ok record's profiled kernels (``profile.kernels``: per step, the longest
kernels with their time and count). A (record key, kernel name) pair measured in two or more files gives
one row: the kernel's time per call in each file (the median over that file's records of the key), and its
spread = (max - min) / median over the files. Kernels under ``--min-us`` per call are left out (their
times are a few graph-node latencies, within the profiler's resolution). Rows are grouped by the library
whose kernel it is, read off its name (``LIBRARIES``: the first pattern that matches): cuBLAS, cuDNN,
the CUDA extensions (causal-conv1d, selective scan), the Triton kernels of mamba-ssm and fla (autotuned
or not, ``AUTOTUNED``), ATen's. Prints per library the rows, median and max spread, then the ``--top``
rows with the largest spread. Measurements only, labelled as such; nothing is fitted.

ATen's kernels are grouped by their full template name, which several ops of a step share (one
``elementwise_kernel<128, 4>`` name serves a multiply and an add of different sizes): their per-call time is
an average over a step's mix and is compared only as such.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

from ssmbench.measure.models.records import (
    ModelRecordError,
    find_model_runs,
    read_model_run,
)

from ssmbench.provenance import analysis_meta

# mamba-ssm's Triton kernels wrapped in triton.autotune (mamba_ssm/ops/triton/ssd_*.py, layer_norm.py,
# layernorm_gated.py has none) and fla's chunked kernels; the other underscore-named Triton kernels are plain
AUTOTUNED = re.compile(r"^_(chunk_scan|chunk_state|bmm_chunk|chunk_cumsum|state_passing|layer_norm_(fwd|bwd))"
                       r"|^chunk_(gated_delta|fwd|bwd)")
LIBRARIES = (
    ("cuBLAS", re.compile(r"nvjet|cublas|gemm|gemv|xmma|cutlass", re.IGNORECASE)),
    ("cuDNN", re.compile(r"cudnn", re.IGNORECASE)),
    ("CUDA extension", re.compile(r"causal_conv1d|selective_scan_(fwd|bwd)_kernel|flash_fwd|flash_bwd", re.IGNORECASE)),
    ("Triton, autotuned", AUTOTUNED),
    ("Triton", re.compile(r"^_|^triton_|_kernel$")),
    ("ATen", re.compile(r"at::native|at::cuda|^void at::")),
)
OTHER = "other"
LABEL = "measurement"


def library_of(name: str) -> str:
    for lib, rx in LIBRARIES:
        if rx.search(name):
            return lib
    return OTHER


def rows_of(paths: list[Path], min_us: float) -> list[dict]:
    """One row per (record key, kernel) measured in two or more of the model-run files ``paths`` (module
    docstring)."""
    per: dict[tuple[str, str], dict[str, list[float]]] = {}
    for path in paths:
        for r in read_model_run(path)["records"]:
            if r.get("status") != "ok":
                continue
            for k in (r.get("profile") or {}).get("kernels") or []:
                if k.get("count"):
                    per.setdefault((r["key"], k["name"]), {}).setdefault(str(path), []).append(
                        float(k["time_s"]) / float(k["count"]))
    rows = []
    for (key, name), files in sorted(per.items()):
        if len(files) < 2:
            continue
        per_file = [statistics.median(v) for v in files.values()]
        med = statistics.median(per_file)
        if med * 1e6 < min_us:
            continue
        rows.append({"key": key, "kernel": name, "library": library_of(name), "files": len(per_file),
                     "per_call_s": per_file, "spread": (max(per_file) - min(per_file)) / med})
    return rows


def summary(rows: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for lib in [lib for lib, _ in LIBRARIES] + [OTHER]:
        s = [r["spread"] for r in rows if r["library"] == lib]
        if s:
            out[lib] = {"rows": len(s), "median_spread_pct": 100 * statistics.median(s),
                        "max_spread_pct": 100 * max(s)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="+", help="folders holding model-run files (searched recursively)")
    ap.add_argument("--min-us", type=float, default=5.0, help="leave out kernels under this many us per call")
    ap.add_argument("--top", type=int, default=12, help="rows with the largest spread to list")
    ap.add_argument("--json", metavar="OUT", help="also write the rows and the summary as JSON to OUT")
    a = ap.parse_args(argv)
    if a.min_us < 0 or a.top < 0:
        print("kernel_repeat: --min-us and --top must be >= 0", file=sys.stderr)
        return 2
    try:
        paths = [p for folder in a.folders for p in find_model_runs(folder)]
        rows = rows_of(paths, a.min_us)
    except ModelRecordError as exc:
        print(f"kernel_repeat: {exc}", file=sys.stderr)
        return 2
    if a.json:
        out = Path(a.json)
        if not out.parent.is_dir():
            print(f"kernel_repeat: {out.parent}: no such folder for --json", file=sys.stderr)
            return 2
    summ = summary(rows)
    print(f"[{LABEL}] kernel time per call between sessions (model-run files), kernels >= {a.min_us:g} us per call")
    print("| library | (record, kernel) rows | median spread | max spread |")
    print("|---|---|---|---|")
    for lib, s in summ.items():
        print(f"| {lib} | {s['rows']} | {s['median_spread_pct']:.1f} % | {s['max_spread_pct']:.1f} % |")
    print(f"\nLargest spreads ({LABEL}; us per call in each file):")
    print("| record | kernel | library | us per call | spread |")
    print("|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: -r["spread"])[:a.top]:
        times = ", ".join(f"{t * 1e6:.1f}" for t in r["per_call_s"])
        print(f"| {r['key']} | {r['kernel'][:60]} | {r['library']} | {times} | {100 * r['spread']:.0f} % |")
    if a.json:
        Path(a.json).write_text(json.dumps({"meta": analysis_meta(inputs=paths), "label": LABEL,
                                            "method": __doc__.split("\n\n")[1].strip(),
                                            "min_us": a.min_us, "summary": summ, "rows": rows}, indent=1) + "\n")
        print(f"wrote {a.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
