"""What the host does with the CUDA runtime during a whole-model step (issue #15), beside the kernels.

A host-bound eager step's time is the issuing CPU's; where it also grows with the device's work (Mamba-2
prefill at batch 16 took 51-61 ms where its host alone took ~36 ms at batch 1 and its kernels 27-34 ms,
results/h200/2026-12-03/models*), something on the host waits for the device: a synchronizing call
(``.item()``, a device-to-host copy, ``torch.cuda.synchronize``), an allocation the caching allocator
cannot serve (``cudaMalloc``; ``cudaFree`` synchronizes the device). Two measurements tell which:

- ``runtime_api``: the CUDA runtime and driver API calls the profiler saw on the host (torch.profiler CPU
  activities whose names start with ``cuda`` / ``cu``), calls and host seconds per step: a call that
  waits on the device shows its wait as host time;
- ``syncs``: the synchronizing calls PyTorch itself reports over one step
  (``torch.cuda.set_sync_debug_mode("warn")``), counted, with the first distinct messages.

Both are measurements, labelled so; nothing here is a model.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Iterable, Sequence

API_PREFIXES = ("cuda", "cu")
MESSAGES_KEPT = 3
METHOD = ("torch.profiler CPU activities named cuda*/cu* over the profiled steps (calls and host seconds per "
          "step); syncs: the warnings of torch.cuda.set_sync_debug_mode('warn') over one step")


def runtime_api(host_events: Iterable[Sequence], steps: int) -> dict[str, dict[str, float]]:
    """Per API name: ``calls`` and ``time_s`` per step, from (name, seconds) host events over ``steps``."""
    if steps < 1:
        raise ValueError("steps must be >= 1")
    out: dict[str, dict[str, float]] = {}
    for name, seconds in host_events:
        if name.startswith(API_PREFIXES):
            row = out.setdefault(name, {"calls": 0.0, "time_s": 0.0})
            row["calls"] += 1.0 / steps
            row["time_s"] += float(seconds) / steps
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["time_s"]))


def sync_messages(call: Callable[[], Any], sync: Callable[[], Any]) -> list[str]:
    """The synchronizing calls PyTorch reports during one ``call()``, one message each (200 characters)."""
    import torch

    sync()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            call()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    sync()
    # the mode's own notice ("a prototype feature ...") is no synchronisation
    return [str(w.message)[:200] for w in caught
            if "synchroniz" in str(w.message).lower() and "prototype" not in str(w.message)]


def sync_warnings(call: Callable[[], Any], sync: Callable[[], Any]) -> dict[str, Any]:
    """``sync_messages`` of one ``call()`` as ``{"count", "messages"}``, the first distinct messages kept."""
    found = sync_messages(call, sync)
    return {"count": len(found), "messages": list(dict.fromkeys(found))[:MESSAGES_KEPT]}
