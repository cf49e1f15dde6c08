"""Energy window arithmetic against a simulated NVML (a counter that refreshes every 20 ms), the
throttle flag, and the null-with-reason path on the CPU. The real NVML path is checked by the GPU
test at the end."""

import math
from types import SimpleNamespace

import pytest
from ssmbench.measure import energy


class Clock:
    """A virtual clock standing in for energy.py's ``time`` module: runs deterministically however
    loaded the machine is."""

    def __init__(self):
        self.ns = 0

    def perf_counter_ns(self):
        return self.ns

    def sleep(self, s):
        self.ns += int(s * 1e9)


class FakeNvml:
    """Just the pynvml calls energy.py makes. The energy counter (mJ) advances in steps every
    ``tick_s`` of the clock at ``power_w``, like the real counter's 20-100 ms refresh."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, clock, power_w=300.0, tick_s=0.02, reasons=(0x1, 0x4)):
        self.clock, self.power_w, self.tick_s = clock, power_w, tick_s
        self.reasons = list(reasons)  # returned in turn (before, after, ...)

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        ticks = math.floor(self.clock.ns * 1e-9 / self.tick_s)
        return int(round(ticks * self.tick_s * self.power_w * 1000))

    def nvmlDeviceGetFieldValues(self, h, ids):
        assert ids == [energy.FIELD_POWER_INSTANT]
        return [SimpleNamespace(nvmlReturn=0, valueType=1, value=SimpleNamespace(uiVal=int(self.power_w * 1000)))]

    def nvmlDeviceGetClockInfo(self, h, kind):
        return {1: 1980, 2: 3201}[kind]

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 41

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self.reasons.pop(0) if len(self.reasons) > 1 else self.reasons[0]


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(energy, "time", c)
    return c


def test_energy_window_matches_simulated_power(clock):
    nv = energy.NvmlDevice(FakeNvml(clock, power_w=300.0), handle=None)
    calls = []

    def call():  # each call takes 0.7 ms of (virtual) GPU time
        calls.append(1)
        clock.sleep(0.0007)

    e, before, after = energy.energy_window(call, lambda: None, nv, per_call_s=0.0007, tokens=64,
                                            min_window_s=1.0, idle_w=100.0)
    assert e["window_s"] >= 1.0 and e["aligned_to_counter"]
    # both ends aligned to counter steps: the average power is exact up to one batch of calls (~5 ms)
    assert e["avg_power_w"] == pytest.approx(300.0, rel=0.01)
    assert e["joules_per_call"] == pytest.approx(e["avg_power_w"] * e["window_s"] / e["calls"])
    assert e["joules_per_call"] == pytest.approx(300.0 * 0.0007, rel=0.01)
    assert e["joules_per_token"] == pytest.approx(e["joules_per_call"] / 64)
    assert e["joules_per_call_above_idle"] == pytest.approx((300.0 - 100.0) * 0.0007, rel=0.02)
    assert e["instant_power_w"]["mean"] == pytest.approx(300.0) and e["instant_power_w"]["n"] >= 1
    assert e["calls"] < len(calls) and e["l2_flushed"] is False  # warm-up and alignment calls not counted
    assert e["wall_s_per_call"] == pytest.approx(0.0007, rel=0.01)
    assert before["sm_clock_mhz"] == 1980 and before["reasons"] == ["gpu_idle"]
    assert after["reasons"] == ["sw_power_cap"]
    clocks = energy.clocks_block(before, after)
    assert clocks["throttled"] and clocks["throttle_reasons"] == ["gpu_idle", "sw_power_cap"]


def test_unaligned_counter_is_said(clock):
    """A counter that never moves (broken driver): the window still ends, flagged as not aligned."""
    fake = FakeNvml(clock, power_w=0.0)
    nv = energy.NvmlDevice(fake, handle=None)
    e, _, _ = energy.energy_window(lambda: clock.sleep(0.001), lambda: None, nv, 0.001, 1, min_window_s=1.0)
    assert not e["aligned_to_counter"] and e["joules_per_call"] == 0.0


def test_idle_power_from_counter(clock):
    nv = energy.NvmlDevice(FakeNvml(clock, power_w=90.0), handle=None)
    r = energy.idle_power(nv, lambda: None, window_s=1.0)
    assert r["idle_power_w"] == pytest.approx(90.0, rel=0.01) and r["aligned_to_counter"]
    assert r["window_s"] >= 1.0


def test_instant_power_missing_is_said(clock):
    fake = FakeNvml(clock)
    fake.nvmlDeviceGetFieldValues = lambda h, ids: [SimpleNamespace(nvmlReturn=2, valueType=1, value=None)]
    nv = energy.NvmlDevice(fake, handle=None)
    e, _, _ = energy.energy_window(lambda: clock.sleep(0.001), lambda: None, nv, 0.001, 1, min_window_s=1.0)
    assert e["instant_power_w"] is None and "not available" in e["instant_power_note"]


def test_reasons_and_throttle_flag():
    assert energy.decode_reasons(0) == []
    assert energy.decode_reasons(0x1 | 0x40) == ["gpu_idle", "hw_thermal_slowdown"]
    assert energy.decode_reasons(0x1000) == ["other_0x1000"]
    assert not energy.clocks_block({"reasons": ["gpu_idle"]}, {"reasons": []})["throttled"]
    assert energy.clocks_block(None, {"reasons": ["hw_slowdown"]})["throttled"]


def test_cpu_energy_is_null_with_reason():
    torch = pytest.importorskip("torch")
    nv, reason = energy.open_device(torch.device("cpu"))
    assert nv is None and "CPU" in reason
    rec = energy.null_energy(reason)
    assert rec["joules_per_call"] is None and rec["reason"] == reason


@pytest.mark.gpu
def test_real_nvml_energy_window():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    dev = torch.device("cuda")
    nv, reason = energy.open_device(dev)
    if nv is None:
        pytest.skip(reason)
    a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)

    def call():
        return a @ a

    e, before, after = energy.energy_window(call, torch.cuda.synchronize, nv, 1e-3, tokens=4096)
    idle = energy.idle_power(nv, torch.cuda.synchronize, 1.0)["idle_power_w"]
    assert e["window_s"] >= 1.0 and e["calls"] > 0
    assert idle < e["avg_power_w"] < 2000  # a busy H200 draws more than at idle, well under 2 kW
    assert before["sm_clock_mhz"] is not None
