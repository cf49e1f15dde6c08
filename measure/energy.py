"""Energy per call from the NVML total-energy counter, idle power, clocks, temperature, throttling.

Method (REFERENCES.md section 5.2): the counter ``nvmlDeviceGetTotalEnergyConsumption`` (mJ since
driver load) refreshes every 20-100 ms, so one call's energy is the counter difference over a window
of at least ``min_window_s`` (default 1 s) of back-to-back calls (or graph replays), divided by the
number of calls. Both ends of the window are aligned to a counter update (the host polls the counter
between short batches of calls and starts / stops the window when it changes), so the refresh period
does not add an error of up to one period at each end. The window runs without an L2 flush between
calls (a flush kernel would add its own energy), so it measures warm-L2 calls; the record says so and
gives the window's wall time per call next to the timed median.

Idle power is measured the same way: the counter difference over an idle window (host asleep, GPU
synchronised). ``joules_per_call_above_idle`` subtracts idle power times the window.

Cross-check: ``nvmlDeviceGetFieldValues(NVML_FI_DEV_POWER_INSTANT)`` sampled by a background thread
during the window (``nvmlDeviceGetPowerUsage`` averages over 1 s on Ampere and newer, so it is not
used). Clocks (SM, memory), temperature and clock-event (throttle) reasons are read before and after
the window; a power, thermal or hardware slowdown in either reading sets ``throttled``.

Without NVML (CPU runs, pynvml missing, no permission) every energy field is null and ``reason``
says why: never a made-up number.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Callable

# Clock-event reason bits (nvml.h, nvmlClocksEventReason*). Idle, application-clock setting, sync
# boost and display setting are not slowdowns of a running kernel; the rest are.
REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
SLOWDOWNS = {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}

FIELD_POWER_INSTANT = 186  # NVML_FI_DEV_POWER_INSTANT (mW)


def decode_reasons(mask: int) -> list[str]:
    names = [name for bit, name in REASONS.items() if mask & bit]
    unknown = mask & ~sum(REASONS)
    if unknown:
        names.append(f"other_0x{unknown:x}")
    return names


class NvmlDevice:
    """One GPU seen through NVML (``nvml`` is the pynvml module, or a stand-in with the same calls)."""

    def __init__(self, nvml, handle):
        self.nvml = nvml
        self.handle = handle

    def energy_mj(self) -> int:
        return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))

    def power_instant_w(self) -> float | None:
        try:
            (fv,) = self.nvml.nvmlDeviceGetFieldValues(self.handle, [FIELD_POWER_INSTANT])
        except Exception:
            return None
        if getattr(fv, "nvmlReturn", 0) != 0:
            return None
        vt = getattr(fv, "valueType", 1)
        v = fv.value
        raw = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(vt, "uiVal")
        return float(getattr(v, raw)) / 1000.0

    def state(self) -> dict[str, Any]:
        n = self.nvml
        out: dict[str, Any] = {}
        for key, fn in (
            ("sm_clock_mhz", lambda: n.nvmlDeviceGetClockInfo(self.handle, n.NVML_CLOCK_SM)),
            ("mem_clock_mhz", lambda: n.nvmlDeviceGetClockInfo(self.handle, n.NVML_CLOCK_MEM)),
            ("temperature_c", lambda: n.nvmlDeviceGetTemperature(self.handle, n.NVML_TEMPERATURE_GPU)),
        ):
            try:
                out[key] = int(fn())
            except Exception:
                out[key] = None
        getter = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            n, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        try:
            mask = int(getter(self.handle))
            out["reasons"] = decode_reasons(mask)
        except Exception:
            out["reasons"] = None
        return out


def open_device(device) -> tuple[NvmlDevice | None, str]:
    """The NVML view of a torch CUDA device, matched by UUID (NVML and CUDA may number GPUs
    differently under CUDA_VISIBLE_DEVICES). Returns (device, "") or (None, reason)."""
    if device.type != "cuda":
        return None, "energy is measured only on CUDA devices (NVML); this run is on the CPU"
    try:
        import pynvml
    except ImportError:
        return None, "pynvml (package nvidia-ml-py) is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return None, f"nvmlInit failed: {exc}"
    import torch

    idx = device.index if device.index is not None else torch.cuda.current_device()
    uuid = str(getattr(torch.cuda.get_device_properties(idx), "uuid", ""))
    try:
        if uuid:
            handle = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}")
        else:
            handle = pynvml.nvmlDeviceGetHandleByIndex(idx)
        nv = NvmlDevice(pynvml, handle)
        nv.energy_mj()
    except Exception as exc:
        return None, f"NVML cannot read the energy counter of cuda:{idx} ({type(exc).__name__}: {exc})"
    return nv, ""


class _PowerSampler(threading.Thread):
    def __init__(self, nv: NvmlDevice, period_s: float = 0.02):
        super().__init__(daemon=True)
        self.nv, self.period_s = nv, period_s
        self.values: list[float] = []
        self.stop = threading.Event()

    def run(self):
        while True:  # at least one sample, however short the window
            v = self.nv.power_instant_w()
            if v is not None:
                self.values.append(v)
            if self.stop.wait(self.period_s):
                break


def _wait_tick(nv: NvmlDevice, step: Callable[[], None], max_wait_s: float) -> tuple[int, int, bool]:
    """Run ``step`` until the energy counter changes; return (counter mJ, host ns, aligned)."""
    e0 = nv.energy_mj()
    t_start = time.perf_counter_ns()
    while True:
        step()
        e, t = nv.energy_mj(), time.perf_counter_ns()
        if e != e0:
            return e, t, True
        if (t - t_start) * 1e-9 > max_wait_s:
            return e, t, False


def idle_power(nv: NvmlDevice, sync: Callable[[], None], window_s: float = 1.0) -> dict[str, Any]:
    """Average power over an idle window, from the energy counter (W)."""
    sync()

    def nap():
        time.sleep(0.002)

    e0, t0, a0 = _wait_tick(nv, nap, 0.5)
    time.sleep(window_s)
    e1, t1, a1 = _wait_tick(nv, nap, 0.5)
    dt = (t1 - t0) * 1e-9
    return {"idle_power_w": (e1 - e0) * 1e-3 / dt, "window_s": dt, "aligned_to_counter": a0 and a1,
            "method": "NVML total-energy counter difference over an idle window"}


def energy_window(call: Callable[[], Any], sync: Callable[[], None], nv: NvmlDevice, per_call_s: float,
                  tokens: int, min_window_s: float = 1.0, idle_w: float | None = None
                  ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Energy of ``call`` over >= ``min_window_s`` of back-to-back calls; returns (energy record,
    device state before, after). ``per_call_s`` (the timed median) sizes the batches so the host
    polls the counter about every 5 ms."""
    batch = max(1, int(math.ceil(0.005 / max(per_call_s, 1e-9))))
    calls = 0

    def step():
        nonlocal calls
        for _ in range(batch):
            call()
        sync()
        calls += batch

    before = nv.state()
    sampler = _PowerSampler(nv)
    step()  # the GPU reaches its steady working power before the window opens
    e0, t0, a0 = _wait_tick(nv, step, 0.5)
    calls = 0
    sampler.start()
    while (time.perf_counter_ns() - t0) * 1e-9 < min_window_s:
        step()
    e1, t1, a1 = _wait_tick(nv, step, 0.5)
    sampler.stop.set()
    sampler.join()
    after = nv.state()
    window = (t1 - t0) * 1e-9
    joules = (e1 - e0) * 1e-3
    per_call = joules / calls
    inst = sampler.values
    out: dict[str, Any] = {
        "joules_per_call": per_call,
        "joules_per_token": per_call / tokens if tokens > 0 else None,
        "window_s": window,
        "calls": calls,
        "wall_s_per_call": window / calls,
        "avg_power_w": joules / window,
        "idle_power_w": idle_w,
        "joules_per_call_above_idle": (joules - idle_w * window) / calls if idle_w is not None else None,
        "instant_power_w": ({"mean": sum(inst) / len(inst), "min": min(inst), "max": max(inst), "n": len(inst)}
                            if inst else None),
        "aligned_to_counter": a0 and a1,
        "l2_flushed": False,
        "method": "NVML total-energy counter difference over back-to-back calls; instant power from "
                  "NVML_FI_DEV_POWER_INSTANT as a cross-check",
        "reason": None,
    }
    if not inst:
        out["instant_power_note"] = "NVML_FI_DEV_POWER_INSTANT not available on this device or driver"
    return out, before, after


def null_energy(reason: str) -> dict[str, Any]:
    return {"joules_per_call": None, "joules_per_token": None, "window_s": None, "calls": None,
            "avg_power_w": None, "idle_power_w": None, "reason": reason}


def clocks_block(before: dict[str, Any] | None, after: dict[str, Any] | None,
                 between: dict[str, Any] | None = None) -> dict[str, Any]:
    """The result's ``clocks`` field: states before and after (and one in between, if read), every
    reason seen in any of them, and the throttle flag."""
    seen: list[str] = []
    for s in (before, between, after):
        for r in (s or {}).get("reasons") or []:
            if r not in seen:
                seen.append(r)
    return {"before": before, "between": between, "after": after, "throttle_reasons": seen,
            "throttled": any(r in SLOWDOWNS for r in seen)}
