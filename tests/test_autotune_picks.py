"""measure/autotune_picks.py: the autotuners of loaded packages and the configurations they kept, found
without Triton (stand-ins with the attributes Triton 3.x's Autotuner has)."""

import sys
import types

from ssmbench.measure.autotune_picks import autotune_picks


class Config:
    def __init__(self, **kw):
        self.kw = kw

    def __str__(self):
        return ", ".join(f"{k}: {v}" for k, v in self.kw.items())


class Autotuner:  # the class name and attributes autotune_picks reads (triton.runtime.autotuner)
    def __init__(self, name, cache, timings=None):
        self.base_fn = types.SimpleNamespace(__name__=name)
        self.cache = cache
        if timings is not None:
            self.configs_timings = timings


class Heuristics:  # a wrapper around an autotuner (triton.heuristics)
    def __init__(self, fn):
        self.fn = fn


def _install(monkeypatch, name, **attrs):
    mod = types.ModuleType(name)
    for k, v in attrs.items():
        setattr(mod, k, v)
    monkeypatch.setitem(sys.modules, name, mod)


def test_picks_of_tuned_autotuners_are_listed_with_their_keys_and_timings(monkeypatch):
    fast, slow = Config(BLOCK_SIZE_M=64, num_warps=4), Config(BLOCK_SIZE_M=128, num_warps=8)
    tuned = Autotuner("_chunk_scan_fwd_kernel", {(256, 64, 128, "torch.bfloat16"): fast},
                      timings={fast: [0.30, 0.29, 0.31], slow: 0.62})
    untuned = Autotuner("_chunk_state_fwd_kernel", {})
    _install(monkeypatch, "fakepkg.ops.ssd", scan=Heuristics(tuned), state=untuned, alias=tuned, other=3)
    _install(monkeypatch, "elsewhere.mod", scan=Autotuner("not_listed", {(1,): fast}))
    picks = autotune_picks(("fakepkg",))
    assert list(picks) == ["fakepkg.ops.ssd._chunk_scan_fwd_kernel"]  # once, though reachable twice
    entry = picks["fakepkg.ops.ssd._chunk_scan_fwd_kernel"]
    assert entry["picks"] == [{"key": ["256", "64", "128", "torch.bfloat16"],
                               "config": "BLOCK_SIZE_M: 64, num_warps: 4"}]
    assert entry["last_timings_ms"] == {"BLOCK_SIZE_M: 64, num_warps: 4": [0.30, 0.29, 0.31],
                                        "BLOCK_SIZE_M: 128, num_warps: 8": [0.62]}


def test_no_loaded_package_gives_no_picks(monkeypatch):
    _install(monkeypatch, "fakepkg2", tuner=Autotuner("k", {(1,): Config(a=1)}))
    assert autotune_picks(("absent_package",)) == {}
    assert autotune_picks(("fakepkg2",))["fakepkg2.k"]["last_timings_ms"] is None


def test_a_case_records_only_the_keys_tuned_while_it_ran(monkeypatch):
    from ssmbench.measure.autotune_picks import picks_since

    a, b = Config(BLOCK_SIZE_N=32, num_warps=2), Config(BLOCK_SIZE_N=64, num_warps=4)
    tuner = Autotuner("_chunk_scan_fwd_kernel", {(2048, "bf16"): a}, timings={a: 0.3, b: 0.4})
    _install(monkeypatch, "fakepkg3", scan=tuner, state=Autotuner("_chunk_state_fwd_kernel", {(2048, "bf16"): b}))
    before = autotune_picks(("fakepkg3",))
    tuner.cache[(8192, "bf16")] = b  # the case tunes one new key of one kernel
    new = picks_since(before, autotune_picks(("fakepkg3",)))
    assert new == {"fakepkg3._chunk_scan_fwd_kernel": {
        "picks": [{"key": ["8192", "bf16"], "config": "BLOCK_SIZE_N: 64, num_warps: 4"}],
        "last_timings_ms": {"BLOCK_SIZE_N: 32, num_warps: 2": [0.3], "BLOCK_SIZE_N: 64, num_warps: 4": [0.4]}}}
    assert picks_since(before, before) == {}
