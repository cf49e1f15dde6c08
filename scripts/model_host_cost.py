"""The runtime terms measured from the host-bound and CUDA-graph whole-model records (issue #15):
``launch.host.hf_module``, ``launch.host.ssm_module``, ``launch.gemm_fixed``, ``launch.library_fixed``, the copy paths
``memory.dram.path.strided_copy`` / ``expand_copy`` and the train step's ``launch.host.backward_launch``; and, first, from
the mamba-ssm modules measured alone (``--block-results``: op-level result folders with ``block:mamba1/2/3`` forward
cases), their forward's host time per op call ``launch.host.ssm_forward``, ``ssm_forward_mamba2`` and
``ssm_forward_mamba3`` (their physics and formulas: calibrate/runtime_host.py). No GPU: stored records only.

    python scripts/model_host_cost.py --results results/h200/2026-12-03/models [more folders] \
        --block-results results/h200/2026-12-02/default [more folders] --out DIR

Writes DIR/runtime_terms.md (every record's value of its term, and the median), DIR/runtime_terms.json
and DIR/measured-runtime-<spec>.yaml: a ``measured:`` fragment (not a probe file) that ``ssmbench specs
new --probe`` merges and that the built-in spec's entries are copied from (tests/test_runtime_host.py
checks the copy). Their held-out use (each model predicted with the other models' values) is
``ssmbench characterize --held-out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml
from ssmbench.calibrate.runtime_host import (
    FORWARD_KEYS,
    HOST_BOUND_SHARE,
    PATH_KEY,
    block_rows,
    derive,
    rows_of,
    with_backward_values,
)
from ssmbench.hwspecs import spec_for_device
from ssmbench.hwspecs.fragment import with_measured
from ssmbench.hwspecs.schema import Spec
from ssmbench.hwspecs.units import parse
from ssmbench.measure.models.records import find_model_runs, standing_records
from ssmbench.measure.results import jsonable, read_dir

from ssmbench.provenance import analysis_meta


def _ms(x):
    return f"{x * 1e3:.2f} ms"


def _value(r) -> str:
    if r["term"] in PATH_KEY.values():
        return f"{r['value_s'] / 1e12:.4g} TB/s ({r['copy_bytes'] / 1e9:.4g} GB in {_ms(r['copy_measured_s'])})"
    return f"{r['value_s'] * 1e6:.2f} us"


def markdown(rows, entries) -> str:
    lines = ["# Runtime terms measured from whole-model records (measurement)", ""]
    lines += [f"- {e['key']} = {e['value']} ({e['method']})" for e in entries]
    lines += ["", (f"The forward terms use the mamba-ssm modules' forward cases measured alone (used where the plan's device "
                   f"time is at most {1 - HOST_BOUND_SHARE:.0%} of the measured time; no profile: the kernel time column is the "
                   "plan's); the other module terms host-bound records (GPU idle >= "
                   f"{HOST_BOUND_SHARE:.0%} of the step) of prefill and "
                   "decode (a mamba-ssm prefill record is a check of the forward terms, not used), the backward term host-bound train records (value per backward launch, plan launches "
                   "in the launches column); the GEMM and library-kernel terms use CUDA-graph records whose plan is mostly fixed costs, each "
                   "profiled kernel charged the record's gap between graph nodes; the DRAM paths use the profiled copy kernels of decode "
                   "records. Plan values are on the spec without these terms."), "",
              ("| record | term | used | step (measurement) | kernel time | GPU idle | launches measured / plan | "
               "module calls / plan op calls | plan host | value |"), "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        measured = "-" if r["launches_measured"] is None else f"{r['launches_measured']:.0f}"
        lines.append(f"| {r['key']} | {r['term']} | {'yes' if r['usable'] else 'no'} | {_ms(r['measured_s'])} | "
                     f"{_ms(r['busy_s'])} | {r['host_idle_share']:.0%} | {measured} / "
                     f"{r['launches_plan']:.0f} | {r['module_calls']} / {r['op_calls_plan']} | {_ms(r['plan_host_s'])} | "
                     f"{_value(r)} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", required=True, nargs="+", help="folders of model-run files")
    ap.add_argument("--block-results", nargs="+", default=[],
                    help="op-level result folders holding block:mamba1/2/3 forward cases (the forward terms)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    paths = [p for folder in a.results for p in find_model_runs(folder)]
    if not paths:
        print(f"{', '.join(a.results)}: no model-run files", file=sys.stderr)
        return 2
    missing = [d for d in a.block_results if not Path(d).is_dir()]
    if missing:
        print(f"--block-results: no such folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    blocks = block_rows([f for d in a.block_results for f in read_dir(d)], spec_for_device)
    forward = derive(blocks, keys=FORWARD_KEYS)
    known = {e["key"]: parse(e["value"], "time") for e in forward}

    def spec_for(r) -> Spec:  # the device's spec with the forward terms just derived (none: the spec's own)
        spec = spec_for_device(r["_device"])
        return Spec.model_validate(with_measured(spec, tuple(forward))) if forward else spec

    rows = rows_of(standing_records(paths), spec_for)
    entries = forward + derive(rows, known=known or None)
    rows = with_backward_values(blocks + rows, entries)
    specs = sorted({r["spec"] for r in rows})
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "runtime_terms.md").write_text(markdown(rows, entries), encoding="utf-8")
    (out / "runtime_terms.json").write_text(json.dumps(jsonable({"meta": analysis_meta(inputs=paths), "rows": rows,
                                                                 "measured": entries}), indent=1) + "\n",
                                            encoding="utf-8")
    frag = {"schema_version": 1, "kind": "ssmbench-runtime-terms",
            "label": "measurement (runtime terms of the achievable estimate, from whole-model records)",
            "measured": entries}
    for spec in specs:
        (out / f"measured-runtime-{spec}.yaml").write_text(yaml.safe_dump(frag, sort_keys=False, width=100000),
                                                           encoding="utf-8")
    print(f"wrote {out}/runtime_terms.md, runtime_terms.json, " + ", ".join(f"measured-runtime-{s}.yaml" for s in specs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
