"""Where a whole-model step's host time goes, by operator (issue #15): a measurement, no model.

    python -m ssmbench.measure.models.host_profile --suite FILE --out FILE.json [--steps N]
    python -m ssmbench.measure.models.host_profile --show FILE.json [--top K] [--hw SPEC]   (no GPU: as Markdown)

For every eager case of a model suite (CUDA-graph replays are one launch and have no host path to split),
the step is built and run as the runner runs it (``runner.build``, ``steps.*_call``), warmed up, and then
``N`` steps run under torch.profiler with CPU activity: each operator's *self* host time (its time less
that of the operators it calls), summed per operator name and divided by ``N``, the largest first, beside
the host's issue time of a step measured without the profiler (``host_issue.host_issue``). The profiler
adds its own cost per event, so the per-operator times are for comparing operators and models with each
other, not for adding up to the issue time; the share each takes of the profiled total says where the
host time goes.

Why: a model record carries only the runtime API's share of its host time (the graph model's prefill: about
1.4 of 8.6 ms, results/h100/2026-12-06/graph-recheck); the rest is Python and the dispatcher, which this splits
by operator, for one model against another on one host.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ...errors import UserError

STEPS = 5  # profiled steps per case
TOP = 30  # operators kept per case, by self host time


def top_self_host(events: Iterable[tuple[str, float]], steps: int, top: int = TOP) -> dict[str, Any]:
    """(name, self host seconds) events of ``steps`` profiled steps -> ``total_s`` (the profiled self time
    per step) and ``ops``: the ``top`` names by self time per step, each {name, self_s, share, calls}, the
    largest first."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    by: dict[str, list[float]] = {}
    for name, s in events:
        v = by.setdefault(name, [0.0, 0.0])
        v[0] += float(s)
        v[1] += 1.0
    total = sum(v[0] for v in by.values()) / steps
    ops = sorted(by.items(), key=lambda kv: -kv[1][0])[:top]
    return {"total_s": total,
            "ops": [{"name": n, "self_s": v[0] / steps, "share": (v[0] / steps) / total if total else None,
                     "calls": v[1] / steps} for n, v in ops]}


def _cpu_events(call: Callable[[], Any], steps: int, sync: Callable[[], Any]) -> list[tuple[str, float]]:
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    sync()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            call()
        sync()
    return [(e.name, e.self_cpu_time_total * 1e-6) for e in prof.events() if e.device_type == DeviceType.CPU]


def profile_case(case, built, device, steps: int = STEPS) -> dict[str, Any]:
    import torch

    from . import steps as step_calls
    from .host_issue import host_issue

    if case.phase == "prefill":
        call, hold = step_calls.prefill_call(built, case.batch, case.seqlen), None
    elif case.phase == "decode":
        call, hold = step_calls.decode_call(built, case.entry, case.batch, case.seqlen)
    else:
        call, hold = step_calls.train_call(built, case.batch, case.seqlen, bool(case.entry.get("optimizer"))), None

    def sync():
        torch.cuda.synchronize(device)
    with (hold or contextlib.nullcontext()):
        for _ in range(3):  # lazy initialisation, Triton compiles and autotuning outside the profile
            call()
        sync()
        issue = host_issue(call, sync)
        prof = top_self_host(_cpu_events(call, steps, sync), steps)
    return {**case.describe(), "status": "ok", "host_issue": issue, "profiled_steps": steps, "self_host": prof}


def run(suite_path: str, out: Path, steps: int) -> int:
    import torch

    from ..environment import collect
    from ..results import jsonable
    from .build import build, wait_for_extensions
    from .suite import load_suite

    suite = load_suite(suite_path)
    device = torch.device("cuda")
    doc = {"schema_version": 1, "kind": "ssmbench-host-profile",
           "label": "measurement (self host time per operator, torch.profiler CPU activity; host issue time)",
           "method": __doc__.split("\n\n")[2].replace("\n", " "), "meta": collect(device, 0, sys.argv),
           "suite": suite.name, "cases": []}
    for entry, cases in suite.by_entry():
        eager = [c for c in cases if c.runtime != "cuda-graph"]
        if not eager:
            continue
        try:
            wait_for_extensions(entry)
            built = build(entry, device, suite.dtype)
        except Exception as exc:  # noqa: BLE001 - one model that cannot build does not end the others
            reason = f"building the model failed: {type(exc).__name__}: {exc}"
            doc["cases"] += [{**c.describe(), "status": "error", "reason": reason} for c in eager]
            continue
        for c in eager:
            try:
                doc["cases"].append(profile_case(c, built, device, steps))
            except Exception as exc:  # noqa: BLE001 - one failed case is recorded, the next runs
                doc["cases"].append({**c.describe(), "status": "error", "reason": f"{type(exc).__name__}: {exc}"})
            r = doc["cases"][-1]
            if r["status"] == "ok":
                print(f"{r['model']} {r['phase']} b{r['batch']}_l{r['seqlen']}: issue "
                      f"{r['host_issue']['issue_s'] * 1e3:.2f} ms; top self host: " + ", ".join(
                          f"{o['name']} {o['self_s'] * 1e6:.0f} us" for o in r["self_host"]["ops"][:5]), flush=True)
            else:
                print(f"{r['model']} {r['phase']}: {r['status']} {r['reason'][:200]}", flush=True)
            out.write_text(json.dumps(jsonable(doc), indent=1), encoding="utf-8")
        del built
        torch.cuda.empty_cache()
    return 0


def show(doc: dict[str, Any], top: int, spec=None) -> str:
    """A stored host profile as Markdown: per ok case its issue time and its ``top`` operators by self host time
    (per step and per call, and the share of the profiled self time); with a ``spec``, the achievable estimate's
    host time of the case on it (``calibrate.runtime_host.predict_record``) and issue / that estimate."""
    out = [f"# Host time by operator ({doc['label']})", "", doc["method"], ""]
    for c in doc["cases"]:
        head = f"## {c['model']} {c['phase']} b{c['batch']}_l{c['seqlen']} ({c['runtime']})"
        if c["status"] != "ok":
            out += [head, "", f"{c['status']}: {c['reason']}", ""]
            continue
        prof = c["self_host"]
        issue = (f"host issue {c['host_issue']['issue_s'] * 1e3:.2f} ms per step (measurement, without the profiler); "
                 f"profiled self host time {prof['total_s'] * 1e3:.2f} ms per step over {c['profiled_steps']} steps")
        if spec is not None:
            from ...calibrate.runtime_host import predict_record
            host = predict_record(c, spec)["total"]["achievable"]["host_s"]
            issue += (f"; host {host * 1e3:.2f} ms (achievable estimate, {spec.id}'s runtime terms): issue / "
                      f"estimate {c['host_issue']['issue_s'] / host:.2f}")
        out += [head, "", issue, "", "| operator | self host per step | calls per step | per call | share |",
                "|---|---|---|---|---|"]
        out += [f"| {o['name']} | {o['self_s'] * 1e6:.0f} us | {o['calls']:g} | "
                f"{o['self_s'] / o['calls'] * 1e6:.1f} us | {o['share']:.1%} |" for o in prof["ops"][:top]]
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--show", metavar="FILE", help="print a stored host profile as Markdown (no GPU) and exit")
    ap.add_argument("--top", type=int, default=10, help="operators per case with --show (default 10)")
    ap.add_argument("--hw", help="with --show: also the host time each case is estimated at on this spec")
    ap.add_argument("--suite", help="model suite (.yaml)")
    ap.add_argument("--out", help="JSON file to write (must not exist)")
    ap.add_argument("--steps", type=int, default=STEPS, help=f"profiled steps per case (default {STEPS})")
    a = ap.parse_args(argv)
    if a.show:
        spec = None
        if a.hw:
            from ...hwspecs import get_spec
            try:
                spec = get_spec(a.hw)
            except UserError as exc:
                print(f"--hw: {exc}", file=sys.stderr)
                return 2
        try:
            doc = json.loads(Path(a.show).read_text(encoding="utf-8"))
            if doc.get("kind") != "ssmbench-host-profile":
                raise ValueError(f"kind {doc.get('kind')!r}")
            print(show(doc, max(1, a.top), spec))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"--show {a.show}: not a readable host profile ({type(exc).__name__}: {exc}); expected the JSON "
                  "that --out writes (kind ssmbench-host-profile)", file=sys.stderr)
            return 2
        return 0
    if not a.suite or not a.out:
        print("--suite and --out are both needed to profile (or --show FILE to print a stored profile)",
              file=sys.stderr)
        return 2
    out = Path(a.out)
    if out.exists():
        print(f"{out}: exists; not overwritten", file=sys.stderr)
        return 2
    if a.steps < 1:
        print(f"--steps must be a whole number >= 1, got {a.steps}", file=sys.stderr)
        return 2
    if not Path(a.suite).is_file():
        print(f"--suite {a.suite}: no such file (expected a model suite .yaml)", file=sys.stderr)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    return run(a.suite, out, a.steps)


if __name__ == "__main__":
    sys.exit(main())
