"""Host speed per measurement session (models.AchievableEff, sessions.py) and the physical guard on a
fit's predictions (Model.guarded): synthetic data with known per-session factors are recovered, held
out honestly, and a wildly extrapolating fit is held to the achievable estimate's range."""

import math
from pathlib import Path

import numpy as np
import pytest
from ssmbench.calibrate.achievable_forms import (
    SESSION_PREFIX,
    SESSION_SPREAD_LOG,
    AchievableEff,
)
from ssmbench.calibrate.crossval import Interval, leave_shape_out
from ssmbench.calibrate.join import RESOURCES, Bounds, JoinedCase, session_of
from ssmbench.calibrate.models import (
    ACH_RESOURCES,
    GUARD_FACTOR,
    Features,
    RooflineConst,
)
from ssmbench.calibrate.sessions import repeatability, session_spread, widen_for_host
from ssmbench.measure.results import ResultFile


def _host_bound_features(sessions, seed=0):
    """Per case: a host time 20..80 us over a GPU time of a tenth of it (every case host-bound), plus
    a few GPU-bound cases per session (DRAM time ten times the host time)."""
    rng = np.random.default_rng(seed)
    n = len(sessions)
    A = np.zeros((n, len(ACH_RESOURCES)))
    host = rng.uniform(20e-6, 80e-6, n)
    gpu_bound = np.arange(n) % 5 == 0
    A[:, ACH_RESOURCES.index("dram")] = np.where(gpu_bound, 10 * host, 0.1 * host)
    return Features(np.zeros((n, len(RESOURCES))), np.ones(n), A, host, np.full(n, 1e-7),
                    np.array(sessions, dtype=object))


TRUTH = {"host_scale": 1.3, "fixed_scale": 1.0, "eff.dram": 0.8}
FACTORS = {"a": 1.0, "b": 1.9, "c": 0.8}    # the hosts of three machines, relative to one another


def _truth_times(X, rng, noise=0.02):
    truth = AchievableEff({**TRUTH, **{SESSION_PREFIX + k: v for k, v in FACTORS.items()}}, ("dram",))
    return truth.predict(X) * np.exp(rng.normal(0.0, noise, len(X)))


def test_per_session_host_factors_are_recovered():
    sessions = [s for s in FACTORS for _ in range(15)]
    X = _host_bound_features(sessions)
    y = _truth_times(X, np.random.default_rng(1))
    fit = AchievableEff().fit(X, y)
    f = {s: fit.params[SESSION_PREFIX + s] for s in FACTORS}
    # the factors are known up to a common scale (host_scale carries it): their ratios are recovered
    assert f["b"] / f["a"] == pytest.approx(1.9, rel=0.05)
    assert f["c"] / f["a"] == pytest.approx(0.8, rel=0.05)
    # the absolute host time of each session is recovered
    for s, v in FACTORS.items():
        assert fit.params["host_scale"] * f[s] == pytest.approx(TRUTH["host_scale"] * v, rel=0.05)
    assert fit.params["eff.dram"] == pytest.approx(0.8, rel=0.05)    # GPU-bound cases: no session effect
    # a new machine (no session) takes factor 1: the fitted sessions' middle, not one of them
    new = Features(X.T, X.launches, X.A, X.host, X.fixed, None)
    host_bound = X.A[:, ACH_RESOURCES.index("dram")] < X.host
    ratio = fit.predict(new)[host_bound] / (TRUTH["host_scale"] * X.host[host_bound])
    assert 0.8 < np.median(ratio) < 1.9


def test_held_out_cases_use_their_session_from_other_shapes_only():
    sessions = [s for s in FACTORS for _ in range(12)]
    X = _host_bound_features(sessions, seed=2)
    y = _truth_times(X, np.random.default_rng(3))
    shapes = np.arange(len(y))
    with_sessions = leave_shape_out(AchievableEff(), X, y, shapes)
    err = np.abs(with_sessions / y - 1)
    assert np.median(err) < 0.05 and np.percentile(err, 90) < 0.08
    # without session labels the same data miss by the spread between machines
    blind = Features(X.T, X.launches, X.A, X.host, X.fixed, None)
    err_blind = np.abs(leave_shape_out(AchievableEff(), blind, y, shapes) / y - 1)
    assert np.median(err_blind) > 3 * np.median(err)
    # a session seen in no other case is a new machine: factor 1, never a factor fitted on the case itself
    lone = X.subset(np.arange(len(y)))
    lone_sessions = lone.session.copy()
    lone_sessions[1] = "only-here"
    Xl = Features(lone.T, lone.launches, lone.A, lone.host, lone.fixed, lone_sessions)
    y_l = y.copy()
    y_l[1] *= 3.0                     # a session whose host is three times slower, seen once
    pred = leave_shape_out(AchievableEff(), Xl, y_l, shapes)
    assert pred[1] < 0.6 * y_l[1]     # not learnt from the held-out case itself


def test_one_session_gets_no_session_factor():
    X = _host_bound_features(["a"] * 20)
    y = _truth_times(X, np.random.default_rng(4))
    fit = AchievableEff().fit(X, y)
    assert not fit.sessions()
    assert fit.params["host_scale"] == pytest.approx(TRUTH["host_scale"], rel=0.05)


def test_guard_keeps_a_wild_fit_within_the_fitted_ratio_range():
    # the fitted shapes run at 1.5x-3x their achievable estimate; a form whose curve explodes outside
    # them (t0 = 1 s per launch) must not predict orders of magnitude off the achievable estimate
    X = _host_bound_features(["a"] * 10)
    ach = X.achievable_time()
    y = ach * np.linspace(1.5, 3.0, len(ach))
    wild = RooflineConst({"t0_s_per_launch": 1.0, "eff": 1.0}, ())
    guarded = wild.guarded(X, y)
    assert guarded.params["guard.ratio_hi"] == pytest.approx(3.0 * GUARD_FACTOR)
    assert guarded.params["guard.ratio_lo"] == pytest.approx(1.5 / GUARD_FACTOR)
    pred = guarded.predict(X)
    assert np.all(pred <= ach * 3.0 * GUARD_FACTOR * (1 + 1e-9))
    assert wild.predict(X).min() > 100 * pred.max()           # unguarded: the blow-up
    np.testing.assert_allclose(sum(guarded.terms(X).values()), pred)   # terms still add up
    # within the range the guard changes nothing
    sane = RooflineConst({"t0_s_per_launch": 1e-9, "eff": 1.0}, ()).guarded(X, y)
    np.testing.assert_allclose(sane.predict(X), RooflineConst(sane.params, ()).predict(X))
    # the guard round-trips through the profile's JSON
    again = RooflineConst.from_dict(guarded.to_dict())
    np.testing.assert_allclose(again.predict(X), pred)


def _case(key, session, t, bottleneck="host/launch"):
    b = Bounds({"dram": 1e-6}, (), 1.0, {}, {}, (), {"bottleneck": bottleneck, "time_s": 1e-5}, 1e-6)
    return JoinedCase(key, "op", "impl", "be", "fam", {"B": 1}, "bf16", "fwd", "dev", t, None, None, b,
                      "f.json", "sha-" + session, False, False, session)


def test_session_spread_is_measured_from_cases_in_two_sessions():
    cases = [_case("k1", "s1", 1e-5), _case("k1", "s2", 2e-5), _case("k2", "s1", 3e-5), _case("k2", "s2", 6e-5),
             _case("k3", "s1", 1e-3, bottleneck="dram"), _case("k3", "s2", 4e-3, bottleneck="dram")]
    s = session_spread(cases)
    # each host-bound case: two sessions a factor 2 apart, variance of (0, log 2) = log(2)^2 / 2
    assert s["sigma_log"] == pytest.approx(math.log(2) / math.sqrt(2))
    assert s["n_cases"] == 2 and s["n_sessions"] == 2 and s["source"].startswith("measured")
    prior = session_spread([_case("k1", "s1", 1e-5)])
    assert prior["sigma_log"] == SESSION_SPREAD_LOG and prior["source"].startswith("prior")


def test_repeatability_compares_each_session_with_the_median_of_the_others():
    # k1 host-bound in three sessions (1, 1, 2 x 10 us; two records in s1 whose geometric mean is 10 us),
    # k2 GPU-bound in two (1 and 1.1 ms), k3 in one session only (not compared)
    cases = [_case("k1", "s1", 0.5e-5), _case("k1", "s1", 2e-5), _case("k1", "s2", 1e-5), _case("k1", "s3", 2e-5),
             _case("k2", "s1", 1e-3, bottleneck="dram"), _case("k2", "s2", 1.1e-3, bottleneck="dram"),
             _case("k3", "s1", 5e-5)]
    r = repeatability(cases)
    # k1 (medians taken on log times: the geometric middle of two): s1 against sqrt(1 x 2) -> 1 / sqrt(2) - 1;
    # s2 likewise; s3: 2 against 1 -> +100 %
    low = 100 * (1 - 1 / math.sqrt(2))
    assert r["host_bound"]["n"] == 3 and r["host_bound"]["n_cases"] == 1
    assert r["host_bound"]["median_pct"] == pytest.approx(low)
    assert r["host_bound"]["p90_pct"] == pytest.approx(low + 0.8 * (100 - low))
    # k2: s1 against 1.1 ms (9.09 %), s2 against 1 ms (10 %)
    assert r["gpu_bound"]["n"] == 2 and r["gpu_bound"]["median_pct"] == pytest.approx((100 * (1 - 1 / 1.1) + 10) / 2)
    assert repeatability([_case("k3", "s1", 5e-5)]) == {"host_bound": None, "gpu_bound": None,
                                                         "method": r["method"]}


def test_new_machine_interval_adds_the_spread_in_quadrature():
    iv = Interval(0.8, -0.1, 0.2, 30, True)
    w = widen_for_host(iv, 0.3)
    z = 1.2815515655446004
    assert w.log_hi == pytest.approx(math.hypot(0.2, z * 0.3))
    assert w.log_lo == pytest.approx(-math.hypot(0.1, z * 0.3))
    assert "between-session spread" in w.method


def test_session_of_names_the_machine_or_the_file():
    rf = ResultFile(Path("r.json"), 1, {"device": {"name": "NVIDIA H200", "uuid": "abc-1"}}, {}, [], True,
                    sha256="f" * 64)
    assert session_of(rf) == "gpu:abc-1"
    rf.meta["device"].pop("uuid")
    assert session_of(rf) == "file:" + "f" * 16
