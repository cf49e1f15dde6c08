"""Whole-model steps against their measured parts: the host's own issue time and the device's busy time (issue #15).

Usage: python scripts/host_issue_check.py DIR [DIR ...]

For every ok eager record under the folders that carries ``host_issue`` (measure/models/host_issue.py: the host's
seconds to issue one step, no synchronize) and a profile, prints the step (measurement), the issue time
(measurement), the kernels' busy time per step (measurement, torch.profiler), the achievable estimate's host
time on the h200-sxm spec (the spec's runtime terms) and two ratios: issue / predicted host (the host model's own
error, at the host state the record ran in) and step / max(issue, busy) (whether the step is the larger of its
two parts, as the model composes it, or the parts fail to overlap). Then the median and p90 of |ratio - 1| of
each. Records written before 2026-12-05 carry no ``host_issue``: with none found it says so and exits 2.
Never fails on the figures.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from host_reference_check import errors, ok_records  # a sibling script, not a package


def rows(paths: list[Path]) -> list[dict]:
    from ssmbench.calibrate.runtime_host import predict_record
    from ssmbench.hwspecs import get_spec
    from ssmbench.measure.models.kernel_map import measured_profile

    spec = get_spec("h200-sxm")
    return [{"key": r["key"], "step_s": float(r["time_s"]["median"]), "issue_s": float(r["host_issue"]["issue_s"]),
             "busy_s": float(measured_profile(r)["busy_s"]),
             "host_s": predict_record(r, spec)["total"]["achievable"]["host_s"]}
            for _, r in ok_records(paths, "host_issue", "busy_s")]


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    missing = [d for d in argv if not Path(d).is_dir()]
    if missing:
        print(f"host_issue_check: not a folder: {', '.join(missing)} (expected result folders holding model-run "
              "files)", file=sys.stderr)
        return 2
    found = rows([p for d in argv for p in sorted(Path(d).rglob("model-run-*.json"))])
    if not found:
        print(f"no ok record with host_issue under {', '.join(argv)} (model runs record it from 2026-12-05 on)",
              file=sys.stderr)
        return 2
    print("| record | step | host issue | kernels busy | host (achievable estimate) | issue / host estimate | "
          "step / max(issue, busy) |\n|---|---|---|---|---|---|---|")
    for r in found:
        print(f"| {r['key']} | {r['step_s'] * 1e3:.2f} ms | {r['issue_s'] * 1e3:.2f} ms | {r['busy_s'] * 1e3:.2f} ms | "
              f"{r['host_s'] * 1e3:.2f} ms | {r['issue_s'] / r['host_s']:.2f} | "
              f"{r['step_s'] / max(r['issue_s'], r['busy_s']):.2f} |")
    issue = np.array([r["issue_s"] / r["host_s"] for r in found])
    step = np.array([r["step_s"] / max(r["issue_s"], r["busy_s"]) for r in found])
    print(f"\n{len(found)} records (measurement, achievable estimate); |issue / host estimate - 1|: {errors(issue)}; "
          f"|step / max(issue, busy) - 1|: {errors(step)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
