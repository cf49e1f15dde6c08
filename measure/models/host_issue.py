"""The host's own time to issue one whole-model step, measured beside the step (issue #15).

Why: a step's time is max(host, device) where the host runs ahead of the device (the launch queue holds
its kernels), and the model predicts both. The step alone does not say which of the two the model got
wrong where they are close (the training steps of 2026-12-03: Transformer++ at 48.8 ms per step against a
predicted host of 35.0 and device of 35.8 ms, its kernels busy 40.8 ms). This module times the host part
directly: after a device synchronize (the queue empty, the device idle), the wall time until the step's
Python call returns, without synchronizing: every kernel of the step is then enqueued, none need have run.
A train step's ``loss.backward()`` returns once autograd's engine has enqueued every backward kernel, so
the host time includes the backward's issue.

Where it is not the host's time alone: a step that synchronizes inside (a ``.item()``, a host copy;
``profile.syncs`` counts them) or enqueues more kernels than the launch queue holds (the host then waits for
room: a step whose kernels run long and number above ~1,000) measures up to the device's time instead;
the record keeps both, and ``issue_s`` close to the step's time says so. Not taken for CUDA-graph replays
(one launch). A measurement, labelled so; nothing here is a model.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

REPEATS = 5
METHOD = (f"host wall time (time.perf_counter) from after a device synchronize to the return of one step's call, "
          f"without synchronizing (every kernel enqueued, not necessarily run); median of {REPEATS} steps, each "
          "after its own synchronize (measure/models/host_issue.py)")


def host_issue(call: Callable[[], Any], sync: Callable[[], None], repeats: int = REPEATS) -> dict[str, Any]:
    """``{"label", "method", "issue_s", "samples_s"}``: the host's seconds to issue one step of ``call``."""
    samples = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
    sync()
    return {"label": "measurement", "method": METHOD, "issue_s": statistics.median(samples), "samples_s": samples}
