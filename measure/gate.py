"""The correctness gate: a backend's output is checked before any of its timings is recorded.

For each output tensor, err(x) = ||x - ref_hi||_F / ||ref_hi||_F, computed in fp64 (complex128 for
complex outputs), where ref_hi is
the same computation in high precision on the same inputs. The backend passes if, for every output,

    err(run) <= 2 * err(reference_lo) + floor(dtype)

where reference_lo is the plain-PyTorch computation at the case dtype (what "the same computation at
the same precision" gets), and the floor is a small absolute term so that a reference that happens to
be exact (err = 0, e.g. a copy) does not demand bit-exactness from a fused kernel that rounds
differently. If ||ref_hi|| = 0 the absolute norm ||x - ref_hi|| is used instead (and said so).
NaN or infinity in the backend output never passes; in a reference it fails the case too (the
check would mean nothing).
"""

from __future__ import annotations

import math
from typing import Any

# Absolute floor per dtype on the relative error; recorded in every gate result.
FLOORS = {"fp32": 1e-6, "bf16": 1e-3, "fp16": 1e-3}
FACTOR = 2.0


class GateMismatch(Exception):
    """Outputs that cannot be compared (count or shape differ); message = reason."""


def _tensors(prepared, out: Any, what: str) -> list:
    import torch

    ts = prepared.output_of(out)
    if not isinstance(ts, (list, tuple)) or not all(isinstance(t, torch.Tensor) for t in ts):
        raise GateMismatch(f"output_of({what}) must return a list of tensors")
    return list(ts)


def rel_err(x, ref) -> tuple[float, bool]:
    """(relative Frobenius error in fp64, whether it is relative (False: absolute, ref is zero))."""
    import torch

    wide = torch.complex128 if (x.is_complex() or ref.is_complex()) else torch.float64  # complex states (S4)
    xd = x.detach().to(wide)
    rd = ref.detach().to(device=xd.device, dtype=wide)
    diff = torch.linalg.vector_norm(xd - rd).item()
    norm = torch.linalg.vector_norm(rd).item()
    if norm == 0.0:
        return diff, False
    return diff / norm, True


def check(prepared, dtype: str) -> dict[str, Any]:
    """Run the backend and both references once and compare. Returns the gate record
    (``passed``, per-output errors and bounds, ``floor``, ``factor``, ``reason``)."""
    import torch

    floor = FLOORS[dtype]
    rec: dict[str, Any] = {"passed": False, "floor": floor, "factor": FACTOR, "outputs": [], "reason": None,
                           "rule": "err(run) <= factor * err(reference_lo) + floor; err = ||x - ref_hi|| / ||ref_hi||"}
    # Gradients stay enabled: bwd and fwdbwd backends call autograd inside run().
    run = _tensors(prepared, prepared.run(), "run()")
    hi = _tensors(prepared, prepared.reference_hi(), "reference_hi()")
    lo = _tensors(prepared, prepared.reference_lo(), "reference_lo()")
    if not (len(run) == len(hi) == len(lo)):
        rec["reason"] = f"output counts differ: run {len(run)}, reference_hi {len(hi)}, reference_lo {len(lo)}"
        return rec
    problems = []
    for i, (r, h, lo_t) in enumerate(zip(run, hi, lo)):
        o: dict[str, Any] = {"index": i, "shape": list(r.shape)}
        rec["outputs"].append(o)
        if r.shape != h.shape or lo_t.shape != h.shape:
            o["passed"] = False
            problems.append(f"output {i}: shapes differ: run {list(r.shape)}, reference_hi {list(h.shape)}, "
                            f"reference_lo {list(lo_t.shape)}")
            continue
        if not bool(torch.isfinite(h).all()):
            o["passed"] = False
            problems.append(f"output {i}: the high-precision reference has NaN or infinity")
            continue
        if not bool(torch.isfinite(r).all()):
            o["passed"] = False
            problems.append(f"output {i}: backend output has NaN or infinity")
            continue
        e_run, relative = rel_err(r, h)
        e_lo, _ = rel_err(lo_t, h)
        bound = FACTOR * e_lo + floor if math.isfinite(e_lo) else floor
        o.update(err_run=e_run, err_reference_lo=e_lo, bound=bound, relative=relative, passed=e_run <= bound)
        if not o["passed"]:
            problems.append(f"output {i}: error {e_run:.3g} exceeds {FACTOR:g} x {e_lo:.3g} (plain PyTorch at "
                            f"{dtype}) + {floor:g}")
    rec["passed"] = not problems
    rec["reason"] = "; ".join(problems) or None
    return rec

