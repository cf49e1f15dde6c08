"""Whole-model steps against their measured parts: the host's own issue time and the device's busy time (issue #15).

Usage: python scripts/host_issue_check.py DIR [DIR ...]

For every ok eager record under the folders that carries ``host_issue`` (measure/models/host_issue.py: the host's
seconds to issue one step, no synchronize) and a profile, prints the step (measurement), the issue time
(measurement), the kernels' busy time and GPU activities per step (measurement, torch.profiler), the achievable
estimate's host time on the h200-sxm spec (the spec's runtime terms) and two ratios: issue / predicted host (the
host model's own error, at the host state the record ran in) and step / max(issue, busy) (whether the step is the
larger of its two parts, as the model composes it, or the parts fail to overlap). Then the median and p90 of
|ratio - 1| of each. Records written before 2026-12-05 carry no ``host_issue``: with none found it says so and exits 2.
Never fails on the figures.

Then, per run file and model, the issue / host estimate of its forward steps (prefill, decode) beside that of its
training steps, each the median over the records where the host paces the step (issue >= busy: where the kernels
outlast the issue the launch queue may have filled and made the host wait, so the issue is an upper bound). A
training step's host estimate is the forward's module terms plus ``launch.host.backward_launch`` per backward
kernel (analytic/workloads/train_host.py); where the two factors agree, the backward is charged in proportion to
the forward and what is left is one host speed for the whole run (the host's state), not a wrong backward term.
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
    return [{"key": r["key"], "file": str(path), "model": r["model"], "phase": r["phase"],
             "step_s": float(r["time_s"]["median"]), "issue_s": float(r["host_issue"]["issue_s"]),
             "busy_s": float(measured_profile(r)["busy_s"]), "launches": (r.get("profile") or {}).get("launches"),
             "host_s": predict_record(r, spec)["total"]["achievable"]["host_s"]}
            for path, r in ok_records(paths, "host_issue", "busy_s")]


def by_run_and_model(found: list[dict]) -> list[dict]:
    """Per (run file, model): n and median of issue / host estimate over its host-paced forward steps and over
    its host-paced training steps (the rule of the module docstring), and train / forward; None where a side has
    no host-paced record."""
    groups: dict[tuple[str, str], dict[str, list[float]]] = {}
    for r in found:
        if r["issue_s"] < r["busy_s"]:
            continue
        side = "train" if r["phase"] == "train" else "forward"
        group = groups.setdefault((r["file"], r["model"]), {"forward": [], "train": []})
        group[side].append(r["issue_s"] / r["host_s"])
    out = []
    for (file, model), g in groups.items():
        fwd = float(np.median(g["forward"])) if g["forward"] else None
        train = float(np.median(g["train"])) if g["train"] else None
        out.append({"file": file, "model": model, "n_forward": len(g["forward"]), "forward": fwd,
                    "n_train": len(g["train"]), "train": train,
                    "train_over_forward": train / fwd if fwd and train else None})
    return out


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
    print("| record | step | host issue | kernels busy | GPU activities | host (achievable estimate) | "
          "issue / host estimate | step / max(issue, busy) |\n|---|---|---|---|---|---|---|---|")
    for r in found:
        acts = "-" if r["launches"] is None else f"{r['launches']:g}"
        print(f"| {r['key']} | {r['step_s'] * 1e3:.2f} ms | {r['issue_s'] * 1e3:.2f} ms | {r['busy_s'] * 1e3:.2f} ms | "
              f"{acts} | {r['host_s'] * 1e3:.2f} ms | {r['issue_s'] / r['host_s']:.2f} | "
              f"{r['step_s'] / max(r['issue_s'], r['busy_s']):.2f} |")
    issue = np.array([r["issue_s"] / r["host_s"] for r in found])
    step = np.array([r["step_s"] / max(r["issue_s"], r["busy_s"]) for r in found])
    print(f"\n{len(found)} records (measurement, achievable estimate); |issue / host estimate - 1|: {errors(issue)}; "
          f"|step / max(issue, busy) - 1|: {errors(step)}")
    groups = by_run_and_model(found)
    print("\nissue / host estimate per run and model, host-paced records only (issue >= kernels busy), median:\n\n"
          "| run | model | forward steps n | forward | training steps n | training | training / forward |\n"
          "|---|---|---|---|---|---|---|")
    for g in groups:
        cell = {k: "-" if g[k] is None else f"{g[k]:.2f}" for k in ("forward", "train", "train_over_forward")}
        print(f"| {Path(g['file']).parent.name}/{Path(g['file']).name} | {g['model']} | {g['n_forward']} | "
              f"{cell['forward']} | {g['n_train']} | {cell['train']} | {cell['train_over_forward']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
