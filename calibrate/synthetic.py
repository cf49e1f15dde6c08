"""Synthetic result files from known model parameters plus noise: for tests of the fit (does it
recover the parameters it was given?) and for checking that a set of shapes can identify a model
form before spending GPU time. They are written with measure's own ResultWriter and marked
``meta.synthetic = true``; they are never measurements and must not be committed as results.

Noise is multiplicative and log-normal (``noise`` = the standard deviation of log time), as timing
noise is; p20 / p80 are drawn around the median with the same spread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..analytic.cases import Case
from ..hwspecs import Spec
from ..measure.results import ResultWriter
from .join import resource_bounds
from .models import Features, Model


@dataclass
class SyntheticGroup:
    op: str
    impl: str
    backend: str
    dtype: str
    mode: str
    shapes: list[dict[str, int]]
    truth: Model                       # a model instance with its parameters set
    failures: list[tuple[dict[str, int], str, str]] = field(default_factory=list)  # (dims, status, reason)


def _key(g: SyntheticGroup, dims: dict[str, int]) -> str:
    return Case(g.op, g.impl, g.backend, dims, g.dtype, g.mode).key()


def true_time(g: SyntheticGroup, spec: Spec, dims: dict[str, int], prefer: str = "measured") -> float:
    b = resource_bounds(spec, g.op, g.impl, dims, g.dtype, g.mode, prefer, g.backend)
    X = Features.from_bounds([b])
    return float(g.truth.predict(X)[0])


def write_synthetic(out_dir: str | Path, spec: Spec, groups: list[SyntheticGroup], device_name: str,
                    noise: float = 0.03, seed: int = 0, prefer: str = "measured") -> Path:
    rng = np.random.default_rng(seed)
    meta: dict[str, Any] = {"synthetic": True, "device": {"type": "synthetic", "name": device_name},
                            "note": "synthetic measurements from known parameters (calibrate/synthetic.py)"}
    w = ResultWriter(out_dir, meta, {"synthetic": True}, prefix="synthetic")
    for g in groups:
        for dims in g.shapes:
            t = true_time(g, spec, dims, prefer) * float(np.exp(rng.normal(0.0, noise)))
            spread = abs(float(rng.normal(0.0, noise))) + 1e-3
            w.add({"key": _key(g, dims), "op": g.op, "impl": g.impl, "backend": g.backend, "dims": dims,
                   "dtype": g.dtype, "mode": g.mode, "status": "ok", "reason": None,
                   "time_s": {"median": t, "p20": t * np.exp(-spread), "p80": t * np.exp(spread), "n": 20}})
        for dims, status, reason in g.failures:
            w.add({"key": _key(g, dims), "op": g.op, "impl": g.impl, "backend": g.backend, "dims": dims,
                   "dtype": g.dtype, "mode": g.mode, "status": status, "reason": reason, "time_s": None})
    return w.finish()
