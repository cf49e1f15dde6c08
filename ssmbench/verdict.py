"""The calibrated verdict of ``ssmbench predict --calibration``: the model against its attention baseline
with both predictions calibrated by one profile.

The analytic verdict (``analytic.workloads.report.verdict``: both time bounds and the speedup at the
requested point) and the analytic crossover come with every prediction of an SSM or hybrid model. With a
profile, ``add_calibrated_verdict`` adds ``total.verdict.calibrated``: both calibrated estimates at the
point, their ratio, and the calibrated crossover (the smallest length from which the model's calibrated
estimate stays below the baseline's, searched as the analytic one is, with fewer grid points: every
point is a calibrated prediction of each model). Only where the profile covers every op call of both
models: a sum of calibrated and analytic parts would compare an estimate with a bound, so otherwise the
verdict names the ops not covered.
"""

from __future__ import annotations

import numpy as np

from .analytic.sweep import search_crossover
from .analytic.workloads.models import get_model
from .analytic.workloads.report import ops_run, predict
from .calibrate.apply import add_calibration

CROSSOVER_RANGE = (16, 1 << 20)  # the analytic crossover's range (sweep.crossover's defaults)
PER_OCTAVE = 4  # grid points per octave of the calibrated search (a calibrated point costs ~5 ms per model)


def _calibrated(model, spec, phase: str, batch: int, seqlen: int, context, profile, backends: dict, kw: dict):
    """A calibrated prediction (``total.calibrated``) of ``model``; impls and backends limited to its ops."""
    ops = ops_run(model, phase, kw["impls"], kw["recompute"], kw["logits"])
    kw = {**kw, "impls": {k: v for k, v in (kw["impls"] or {}).items() if k in ops}}
    r = predict(model, spec, phase, batch, seqlen, context, with_searches=False, **kw)
    add_calibration(r, profile, spec, {k: v for k, v in backends.items() if k in ops})
    return r["total"]["calibrated"]


def baseline_ops(r: dict, kw: dict) -> set[str]:
    """The ops the verdict's baseline runs (none without a verdict): ``--calibration-backend`` may name them."""
    v = r["total"].get("verdict")
    if v is None:
        return set()
    return ops_run(get_model(v["baseline"]), r["phase"], kw["impls"], kw["recompute"], kw["logits"])


def add_calibrated_verdict(r: dict, model, profile, spec, backends: dict, kw: dict) -> None:
    """Add ``total.verdict.calibrated`` to ``r``, a calibrated prediction of ``model`` (``kw``: its
    predict options but the point)."""
    v = r["total"].get("verdict")
    if v is None:
        return
    baseline = get_model(v["baseline"])
    mine = r["total"]["calibrated"]
    theirs = _calibrated(baseline, spec, r["phase"], r["batch"], r["seqlen"], r["context"], profile, backends, kw)
    missing = {who: c["not_covered"] + c["not_bounded"] for who, c in (("model", mine), ("baseline", theirs))}
    label = mine["label"]
    out = {"label": label, "level": mine["level"], "model_estimate_s": mine["estimate_s"],
           "baseline_estimate_s": theirs["estimate_s"], "not_covered": missing}
    if any(missing.values()):
        which = "; ".join(f"{who} ({r['model']['id'] if who == 'model' else baseline.id}): {', '.join(ops)}"
                          for who, ops in missing.items() if ops)
        v["calibrated"] = {**out, "speedup": None, "crossover": None,
                           "result": f"none: the profile does not cover every op call of both models, not covered: {which}"}
        return

    def times(m):
        def f(lengths: np.ndarray) -> np.ndarray:
            est = [_calibrated(m, spec, r["phase"], r["batch"], int(n), None, profile, backends, kw)["estimate_s"]
                   for n in lengths]
            return np.array([np.nan if e is None else e for e in est])
        return f

    speedup = theirs["estimate_s"] / mine["estimate_s"]
    cross = search_crossover(times(model), times(baseline), *CROSSOVER_RANGE, per_octave=PER_OCTAVE)
    v["calibrated"] = {**out, "speedup": speedup, "crossover": {**cross, "range": list(CROSSOVER_RANGE)},
                       "result": f"speedup {speedup:.3g}x over {baseline.id}; crossover: {cross['result']}"}
