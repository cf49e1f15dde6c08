"""One prediction point as ``ssmbench predict`` makes it, shared by the CLI (``commands/predict.py``)
and the Python API (``api.predict``) so that the two can never differ: the analytic prediction
(``analytic.workloads.report.predict``) with the ceiling rule of the specs compared, and, given a
profile, the calibrated estimates and the calibrated verdict (``verdict``)."""

from __future__ import annotations

from typing import Any, Mapping

from .errors import UserError


def predict_point(model, spec, phase: str, batch: int, seqlen: int, context: int | None, kw: Mapping[str, Any],
                  ceilings_rule: str, calibration: str | None = None,
                  calibration_backends: Mapping[str, str] | None = None) -> dict:
    """``kw``: the options of ``report.predict`` (dtype or Precision, prefer, launch, bytes_basis, impls,
    recompute, logits); ``impls`` may name ops only another model of the same command runs: those are
    dropped here. ``ceilings_rule``: which ceilings the compared specs share (``sweep.common_prefer``)."""
    from .analytic.workloads.report import ops_run, predict

    ops = ops_run(model, phase, kw["impls"], kw["recompute"], kw["logits"])
    kw = {**kw, "impls": {k: v for k, v in (kw["impls"] or {}).items() if k in ops}}
    r = predict(model, spec, phase, batch, seqlen, context, **kw)
    r["spec"]["ceilings_rule"] = ceilings_rule
    backends = dict(calibration_backends or {})
    if calibration is None:
        if backends:
            raise UserError("calibration backends (--calibration-backend / calibration_backends) need a calibration "
                            "profile (--calibration FILE / calibration=FILE, written by `ssmbench calibrate`)")
        return r
    from .calibrate.apply import add_calibration
    from .calibrate.profile import read_profile
    from .verdict import add_calibrated_verdict, baseline_ops
    profile = read_profile(calibration)
    # a backend for an op only the baseline runs serves the verdict; one for an op neither runs stays an error
    theirs = baseline_ops(r, kw) - {o["op"] for o in r["ops"]}
    add_calibration(r, profile, spec, {k: v for k, v in backends.items() if k not in theirs})
    add_calibrated_verdict(r, model, profile, spec, backends, kw)
    return r
