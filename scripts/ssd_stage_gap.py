"""The five kernels of Mamba-2's chunked SSD inside whole-model steps, each against its stage's achievable
estimate: which kernel the model misses, and by how much, at the models' shapes.

Usage: python scripts/ssd_stage_gap.py DIR [DIR ...] [--hw h200-sxm] [--json OUT]

For every ok record of the model-run files under the folders whose model has Mamba-2 blocks and whose profile
lists mamba-ssm's SSD forward kernels (prefill and training steps; ``measure/models/records.py``), each
kernel's device time per call (measurement: torch.profiler, per step) in each file (one session, one process)
beside the achievable estimate's device time of the stage op it runs (``analytic/ops/ssd/stages.py``:
``_chunk_cumsum_fwd_kernel`` -> ``ssd_chunk_cumsum``, ... ``_chunk_scan_fwd_kernel`` -> ``ssd_chunk_scan``) at
the block's dims (B, L rounded up to whole chunks, H, P, N, G, C from the workload file), as
``calibrate/join.resource_bounds`` gives it on ``--hw`` (device time, ``gpu_s``, with the resource that binds).
Prints one row per (record, kernel): the measured times over the files, measured (fastest file) / estimate,
and per kernel the median of that ratio. The fastest file is the fairest to the model: a slower one kept
another autotuned configuration (``scripts/kernel_repeat.py``, ``measure/autotune_picks.py``). Nothing is
fitted; a benchmark table that never fails on the figures.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from ssmbench.analytic.registry import get_op
from ssmbench.analytic.workloads.models import get_model
from ssmbench.calibrate.join import resource_bounds
from ssmbench.hwspecs.loader import get_spec
from ssmbench.measure.models.records import (
    ModelRecordError,
    find_model_runs,
    read_model_run,
)

from ssmbench.errors import UserError
from ssmbench.provenance import analysis_meta

STAGE_OF_KERNEL = {
    "_chunk_cumsum_fwd_kernel": "ssd_chunk_cumsum",
    "_bmm_chunk_fwd_kernel": "ssd_bmm",
    "_chunk_state_fwd_kernel": "ssd_chunk_state",
    "_state_passing_fwd_kernel": "ssd_state_passing",
    "_chunk_scan_fwd_kernel": "ssd_chunk_scan",
}
LABELS = ("measurement", "achievable estimate")


def _ssd_dims(model_id: str, batch: int, seqlen: int) -> dict[str, int] | None:
    """The SSD op's dims for the model's Mamba-2 block (None: the model has none)."""
    blocks = [b for b in get_model(model_id).spec.blocks.values() if getattr(b, "kind", None) == "mamba2"]
    if not blocks:
        return None
    b = blocks[0]
    chunks = math.ceil(seqlen / b.chunk_size)
    return {"B": batch, "L": chunks * b.chunk_size, "H": b.nheads, "P": b.headdim, "N": b.d_state,
            "G": b.ngroups, "C": b.chunk_size}


def rows_of(paths: list[Path], spec_id: str) -> list[dict]:
    """One row per (record key, SSD kernel) of the model-run files ``paths`` (module docstring)."""
    spec = get_spec(spec_id)
    per: dict[tuple[str, str], dict] = {}
    for path in paths:
        for r in read_model_run(path)["records"]:
            if r.get("status") != "ok" or r.get("phase") == "decode":
                continue
            kernels = {k["name"]: k for k in (r.get("profile") or {}).get("kernels") or []
                       if k["name"] in STAGE_OF_KERNEL and k.get("count")}
            dims = _ssd_dims(r["model"], int(r["batch"]), int(r["seqlen"])) if kernels else None
            if dims is None:
                continue
            for name, k in kernels.items():
                row = per.setdefault((r["key"], name), {"key": r["key"], "kernel": name, "stage": STAGE_OF_KERNEL[name],
                                                        "dtype": r.get("dtype") or "bf16", "dims": dims, "files": {}})
                row["files"].setdefault(str(path), []).append(float(k["time_s"]) / float(k["count"]))
    rows = []
    for row in per.values():
        op = row["stage"]
        od = {d: row["dims"][d] for d in get_op(op).dims}
        a = resource_bounds(spec, op, "triton", od, row["dtype"], "fwd", launch="graph").achievable
        measured = [statistics.median(v) for v in row["files"].values()]
        rows.append({**{k: v for k, v in row.items() if k != "files"}, "stage_dims": od,
                     "measured_s": measured, "achievable_gpu_s": float(a["gpu_s"]),
                     "achievable_bottleneck": a["bottleneck"], "ratio_fastest": min(measured) / float(a["gpu_s"])})
    return sorted(rows, key=lambda r: (r["key"], list(STAGE_OF_KERNEL).index(r["kernel"])))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="+", help="folders holding model-run files (searched recursively)")
    ap.add_argument("--hw", default="h200-sxm", help="spec of the device the runs were measured on")
    ap.add_argument("--json", metavar="OUT", help="also write the rows as JSON to OUT")
    a = ap.parse_args(argv)
    if a.json and not Path(a.json).parent.is_dir():
        print(f"ssd_stage_gap: {Path(a.json).parent}: no such folder for --json", file=sys.stderr)
        return 2
    try:
        paths = [p for folder in a.folders for p in find_model_runs(folder)]
        rows = rows_of(paths, a.hw)
    except (ModelRecordError, UserError) as exc:
        print(f"ssd_stage_gap: {exc}", file=sys.stderr)
        return 2
    print(f"mamba-ssm's SSD forward kernels in whole-model steps on {a.hw}: [{LABELS[0]}] us per call in each "
          f"model-run file against the stage's [{LABELS[1]}] (device time, CUDA-graph regime)")
    print("| record | kernel | measured (us per call, each file) | achievable estimate | binds | fastest / estimate |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        times = ", ".join(f"{t * 1e6:.1f}" for t in r["measured_s"])
        print(f"| {r['key']} | {r['kernel']} | {times} | {r['achievable_gpu_s'] * 1e6:.1f} us | "
              f"{r['achievable_bottleneck']} | {r['ratio_fastest']:.2f} |")
    print("\n| kernel | rows | median fastest / estimate | range |")
    print("|---|---|---|---|")
    for name in STAGE_OF_KERNEL:
        ratios = [r["ratio_fastest"] for r in rows if r["kernel"] == name]
        if ratios:
            print(f"| {name} | {len(ratios)} | {statistics.median(ratios):.2f} | "
                  f"{min(ratios):.2f}-{max(ratios):.2f} |")
    if a.json:
        Path(a.json).write_text(json.dumps({"meta": analysis_meta(inputs=paths), "labels": LABELS, "spec": a.hw,
                                            "rows": rows}, indent=1) + "\n")
        print(f"wrote {a.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
