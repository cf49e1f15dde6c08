"""The timing primitive: statistics, adaptive repeat count, settings recorded; CUDA events, L2 flush and
graph replay on a GPU."""

import time

import pytest

torch = pytest.importorskip("torch")

from ssmbench.measure.timing import (
    TimingResult,
    TimingSettings,
    make_timed_callable,
    time_call,
)

CPU = torch.device("cpu")


def test_cpu_samples_are_seconds_and_statistics_are_ordered():
    s = TimingSettings(target_s=0.03, warmup_calls=2, warmup_s=0.0, min_repeats=3, max_repeats=50)
    r = time_call(lambda: time.sleep(0.002), CPU, s)
    st = r.stats()
    assert st["min"] >= 0.002  # a 2 ms sleep takes at least 2 ms: the unit is seconds
    assert st["min"] <= st["p20"] <= st["median"] <= st["p80"] <= st["p95"] <= st["max"]
    assert 3 <= st["n"] <= 15  # about target_s / 2 ms, never below min_repeats
    assert r.settings["method"] == "perf_counter_ns" and r.settings["repeats"] == st["n"]
    assert r.settings["flush_l2"] is False and r.settings["cuda_graph"] is False
    assert r.settings["warmup_done"] >= 2


def test_repeat_count_is_clamped():
    s = TimingSettings(target_s=10.0, warmup_calls=1, warmup_s=0.0, min_repeats=2, max_repeats=7)
    assert time_call(lambda: None, CPU, s).stats()["n"] == 7
    s = TimingSettings(target_s=1e-6, warmup_calls=1, warmup_s=0.0, min_repeats=4, max_repeats=7)
    assert time_call(lambda: time.sleep(0.001), CPU, s).stats()["n"] == 4


def test_percentiles_follow_numpy():
    r = TimingResult(tuple(float(x) for x in range(1, 101)), {})
    st = r.stats()
    assert st["median"] == 50.5 and st["p20"] == pytest.approx(20.8) and st["p95"] == pytest.approx(95.05)


def test_settings_validation_and_replace():
    with pytest.raises(ValueError):
        TimingSettings(target_s=0)
    with pytest.raises(ValueError):
        TimingSettings(min_repeats=5, max_repeats=2)
    s = TimingSettings().replace(cuda_graph=True)
    assert s.cuda_graph and s.to_dict()["cuda_graph"]


def test_graph_mode_is_cuda_only():
    fn = lambda: 1  # noqa: E731
    call, keep = make_timed_callable(fn, CPU, TimingSettings(cuda_graph=True))
    assert call is fn and keep is None


def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return torch.device("cuda")


@pytest.mark.gpu
def test_cuda_events_with_l2_flush():
    dev = _cuda()
    a = torch.randn(2048, 2048, device=dev)
    s = TimingSettings(target_s=0.05, min_repeats=5)
    r = time_call(lambda: a @ a, dev, s)
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    assert r.settings["method"] == "cuda_events" and r.settings["flush_bytes"] == 2 * l2
    assert r.stats()["median"] > 0


@pytest.mark.gpu
def test_cuda_graph_replay():
    dev = _cuda()
    x = torch.randn(1024, device=dev)
    call, keep = make_timed_callable(lambda: x * 2 + 1, dev, TimingSettings(cuda_graph=True))
    r = time_call(call, dev, TimingSettings(cuda_graph=True, target_s=0.02, flush_l2=False))
    assert r.settings["cuda_graph"] and r.stats()["median"] > 0


FAILED_CAPTURE = """
import torch
from ssmbench.measure.timing import CaptureFailed, TimingSettings, make_timed_callable
x = torch.randn(1024, device="cuda")
try:
    make_timed_callable(lambda: x.sum().item(), torch.device("cuda"), TimingSettings(cuda_graph=True))
except CaptureFailed as exc:
    print("CaptureFailed:", exc)
"""


@pytest.mark.gpu
def test_a_call_that_syncs_fails_capture_with_capture_failed():
    """In a child process: a failed capture can leave the CUDA RNG of the process in capture state
    (later torch.randn calls on the device raise), which must not reach the other gpu tests."""
    import subprocess
    import sys

    _cuda()
    proc = subprocess.run([sys.executable, "-c", FAILED_CAPTURE], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "CaptureFailed: CUDA graph capture failed" in proc.stdout
