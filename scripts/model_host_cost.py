"""The runtime terms measured from the host-bound and CUDA-graph whole-model records (issue #15):
``launch.host.hf_module``, ``launch.host.ssm_module``, ``launch.gemm_fixed``, ``launch.library_fixed``, the copy paths
``memory.dram.path.strided_copy`` / ``expand_copy`` and the train step's ``launch.host.backward_launch`` (their physics and
formulas: calibrate/runtime_host.py). No GPU: stored records only.

    python scripts/model_host_cost.py --results results/h200/2026-12-03/models [more folders] --out DIR

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
from ssmbench.calibrate.runtime_host import HOST_BOUND_SHARE, PATH_KEY, derive, rows_of, with_backward_values
from ssmbench.hwspecs import spec_for_device
from ssmbench.measure.models.records import find_model_runs, latest_records
from ssmbench.measure.results import jsonable
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
    lines += ["", (f"Module terms use host-bound records (GPU idle >= {HOST_BOUND_SHARE:.0%} of the step) of prefill and "
                   "decode, the backward term host-bound train records (value per backward launch, plan launches "
                   "in the launches column); the GEMM and library-kernel terms use CUDA-graph records whose plan is mostly fixed costs, each "
                   "profiled kernel charged the record's gap between graph nodes; the DRAM paths use the profiled copy kernels of decode "
                   "records. Plan values are on the spec without these terms."), "",
              ("| record | term | used | step (measurement) | kernel time | GPU idle | launches measured / plan | "
               "module calls / plan op calls | plan host | value |"), "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['key']} | {r['term']} | {'yes' if r['usable'] else 'no'} | {_ms(r['measured_s'])} | "
                     f"{_ms(r['busy_s'])} | {r['host_idle_share']:.0%} | {r['launches_measured']:.0f} / "
                     f"{r['launches_plan']:.0f} | {r['module_calls']} / {r['op_calls_plan']} | {_ms(r['plan_host_s'])} | "
                     f"{_value(r)} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", required=True, nargs="+")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    paths = [p for folder in a.results for p in find_model_runs(folder)]
    if not paths:
        print(f"{', '.join(a.results)}: no model-run files", file=sys.stderr)
        return 2
    rows = rows_of(latest_records(paths), lambda r: spec_for_device(r["_device"]))
    entries = derive(rows)
    rows = with_backward_values(rows, entries)
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
