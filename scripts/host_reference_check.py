"""Does the host reference timed beside a whole-model record explain how far its host-bound step lies from the
achievable estimate? (issue #15: host-bound records spread by more than the model-level target.)

Usage: python scripts/host_reference_check.py DIR [DIR ...]

For every ok record under the folders that carries a host reference (``measure/models/host_reference.py``:
the eager launch loop and the Python loop, timed before and after the record's calls) and whose GPU idled
for at least HOST_BOUND_SHARE of its step (calibrate/runtime_host.py, half; host-bound: the step is the host's
issue time), prints the measured step, the achievable estimate's host time on the h200-sxm spec (the spec's runtime terms), their ratio and the
two references (each the mean of before and after). Then the ratio's |ratio - 1| as it is, and after
conditioning on each reference in turn as if host time were proportional to it (ratio / (c x reference),
c the median of ratio / reference over the records): median and p90. A reference that explained the host
state would shrink the conditioned errors. Labels: measurement (step, references), achievable estimate
(host time); the conditioned errors are an analysis of those. Never fails on the figures.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def ok_records(paths: list[Path], field: str, profile_key: str):
    """(path, record) of every ok record of the model-run files that carries ``field`` and a profile with
    ``profile_key``, its run's versions attached (``_versions``, which calibrate/runtime_host.predict_record reads)."""
    for path in paths:
        doc = json.loads(path.read_text(encoding="utf-8"))
        for r in doc["records"]:
            if r.get("status") == "ok" and r.get(field) and (r.get("profile") or {}).get(profile_key) is not None:
                r["_versions"] = (doc.get("meta") or {}).get("versions")
                yield path, r


def rows(paths: list[Path]) -> list[dict]:
    from ssmbench.calibrate.runtime_host import HOST_BOUND_SHARE, predict_record
    from ssmbench.hwspecs import get_spec
    from ssmbench.measure.models.host_reference import reference_s
    from ssmbench.measure.models.kernel_map import measured_profile

    spec = get_spec("h200-sxm")
    out = []
    for path, r in ok_records(paths, "host_reference", "host_idle_s"):
        ref, step = r["host_reference"], float(r["time_s"]["median"])
        if measured_profile(r)["host_idle_s"] / step < HOST_BOUND_SHARE:
            continue
        host = predict_record(r, spec)["total"]["achievable"]["host_s"]
        out.append({"key": r["key"], "file": str(path), "step_s": step, "host_s": host,
                    "launch_s": reference_s(ref, "launch_s"), "python_s": reference_s(ref, "python_s")})
    return out


def errors(ratio: np.ndarray) -> str:
    e = np.abs(ratio - 1)
    return f"median {100 * np.median(e):.1f} %, p90 {100 * np.percentile(e, 90):.1f} %"


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    paths = [p for d in argv for p in sorted(Path(d).rglob("model-run-*.json"))]
    found = rows(paths)
    if len(found) < 2:
        print(f"fewer than two host-bound records with a host reference under {', '.join(argv)}", file=sys.stderr)
        return 2
    print("| record | step (measurement) | host (achievable estimate) | step / host | launch reference | "
          "Python reference |\n|---|---|---|---|---|---|")
    for r in found:
        print(f"| {r['key']} | {r['step_s'] * 1e3:.2f} ms | {r['host_s'] * 1e3:.2f} ms | {r['step_s'] / r['host_s']:.2f} | "
              f"{r['launch_s'] * 1e6:.2f} us | {r['python_s'] * 1e9:.1f} ns |")
    ratio = np.array([r["step_s"] / r["host_s"] for r in found])
    print(f"\n{len(found)} host-bound records with a host reference; |step / host - 1|: {errors(ratio)}")
    for name in ("launch_s", "python_s"):
        ref = np.array([r[name] for r in found])
        c = float(np.median(ratio / ref))
        print(f"conditioned on the {name[:-2]} reference (host time taken proportional to it): {errors(ratio / (c * ref))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
