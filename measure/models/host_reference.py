"""A fixed host-speed reference timed beside each whole-model record (issue #15).

A host-bound eager step's time is the issuing CPU's, and one key's records move by up to ~75 % within one
call on the same pinned cores (results/h200/2026-12-04/host-noise) and further between sessions. Whether
that is the host's speed changing (clock, contention from other tenants of the machine, caches) or the
step's own variation cannot be told from the step alone. This module times two fixed pieces of host work
right before and right after a record's timed calls, so that a record's step time can be set against its
host's speed at that moment:

- ``launch_s``: host wall time per ``x.add_(1.0)`` on a one-element CUDA tensor, ``LAUNCHES`` in a row
  (an eager op's dispatch and kernel launch; the kernel, ~2 us on the device, keeps up, so the loop is
  the host's), median of ``BATCHES`` batches;
- ``python_s``: wall time per iteration of a plain Python integer loop (the interpreter alone), median
  of ``BATCHES`` batches.

Both are measurements of this host, labelled so; nothing here is a model.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

LAUNCHES = 2000
PY_ITERS = 100_000
BATCHES = 5
METHOD = (f"host wall time (time.perf_counter) per x.add_(1.0) on a one-element CUDA tensor, {LAUNCHES} launches "
          f"back to back, and per iteration of a {PY_ITERS}-step Python integer loop; median of {BATCHES} batches each")


def _python_loop() -> float:
    t0 = time.perf_counter()
    s = 0
    for i in range(PY_ITERS):
        s += i
    return (time.perf_counter() - t0) / PY_ITERS


def host_reference(device) -> dict[str, Any]:
    """The two reference times (seconds) of this host now; see the module docstring."""
    import torch

    x = torch.zeros(1, device=device)
    torch.cuda.synchronize(device)
    launch = []
    for _ in range(BATCHES):
        t0 = time.perf_counter()
        for _ in range(LAUNCHES):
            x.add_(1.0)
        launch.append((time.perf_counter() - t0) / LAUNCHES)
        torch.cuda.synchronize(device)
    python = [_python_loop() for _ in range(BATCHES)]
    return {"launch_s": statistics.median(launch), "python_s": statistics.median(python)}


def reference_s(ref: dict[str, Any], name: str) -> float:
    """A record's ``host_reference`` value ``name`` (``launch_s`` or ``python_s``): the mean of before and after its
    timed calls."""
    return (ref["before"][name] + ref["after"][name]) / 2


def python_step_s(ref: dict[str, Any]) -> float:
    """A record's ``host_reference``'s Python loop step: the mean of before and after its timed calls."""
    return reference_s(ref, "python_s")
