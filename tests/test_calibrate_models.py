"""Model forms recover the parameters that generated synthetic times; cross-validation and the
conformal intervals behave as documented."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ssmbench.calibrate.achievable_forms import MODELS, AchievableEff, model_from_dict
from ssmbench.calibrate.crossval import (
    choose,
    conformal,
    evaluate,
    leave_shape_out,
    loso_coverage,
    shape_weights,
)
from ssmbench.calibrate.join import RESOURCES, Bounds
from ssmbench.calibrate.models import (
    ACH_RESOURCES,
    Features,
    MaxEff,
    Overlap,
    RooflineConst,
    SizeEff,
    SumNNLS,
    active_resources,
)


def _features(n=40, seed=0, resources=("tensor", "dram"), launches=1.0):
    """Bound times spread over four decades, each case binding on a random resource."""
    rng = np.random.default_rng(seed)
    T = np.zeros((n, len(RESOURCES)))
    for r in resources:
        T[:, RESOURCES.index(r)] = 10 ** rng.uniform(-6, -2.5, n)
    return Features(T, np.full(n, launches))


def _noisy(y, sigma, seed=1):
    return y * np.exp(np.random.default_rng(seed).normal(0, sigma, len(y)))


def test_max_eff_recovers_per_resource_efficiencies():
    X = _features()
    truth = MaxEff({"t0_s_per_launch": 5e-6, "eff.tensor": 0.7, "eff.dram": 0.85}, ("tensor", "dram"))
    y = _noisy(truth.predict(X), 0.02)
    fit = MaxEff().fit(X, y)
    assert fit.active == ("tensor", "dram")
    assert fit.params["eff.tensor"] == pytest.approx(0.7, rel=0.05)
    assert fit.params["eff.dram"] == pytest.approx(0.85, rel=0.05)
    assert fit.params["t0_s_per_launch"] == pytest.approx(5e-6, rel=0.15)


def test_sum_nnls_recovers_coefficients():
    X = _features(resources=("vector", "dram"))
    truth = SumNNLS({"t0_s_per_launch": 3e-6, "c.vector": 2.0, "c.dram": 1.25}, ("vector", "dram"))
    y = _noisy(truth.predict(X), 0.01)
    fit = SumNNLS().fit(X, y)
    assert fit.params["c.vector"] == pytest.approx(2.0, rel=0.05)
    assert fit.params["c.dram"] == pytest.approx(1.25, rel=0.05)
    assert fit.params["t0_s_per_launch"] == pytest.approx(3e-6, rel=0.2)


def test_size_eff_recovers_saturation_curve():
    # a = 1 would make W_half / e_max a constant, indistinguishable from t0: take a = 2
    X = _features(n=60, resources=("dram",))
    truth = SizeEff({"t0_s_per_launch": 2e-6, "eff_max": 0.9, "W_half_s": 3e-5, "a": 2.0}, ("dram",))
    y = _noisy(truth.predict(X), 0.01)
    fit = SizeEff().fit(X, y)
    assert fit.params["eff_max"] == pytest.approx(0.9, rel=0.1)
    assert fit.params["W_half_s"] == pytest.approx(3e-5, rel=0.3)
    assert fit.params["a"] == pytest.approx(2.0, rel=0.3)
    assert np.median(np.abs(fit.predict(X) / truth.predict(X) - 1)) < 0.02


def test_overlap_recovers_floor_and_efficiency():
    X = _features(n=50, resources=("dram",), launches=10.0)
    truth = Overlap({"t0_s_per_launch": 1.5e-5, "eff": 0.8, "p": 6.0}, ("dram",))
    y = _noisy(truth.predict(X), 0.01)
    fit = Overlap().fit(X, y)
    assert fit.params["eff"] == pytest.approx(0.8, rel=0.05)
    assert fit.params["t0_s_per_launch"] == pytest.approx(1.5e-5, rel=0.1)
    assert np.max(np.abs(fit.predict(X) / truth.predict(X) - 1)) < 0.05


@pytest.mark.parametrize("name", sorted(MODELS))
def test_terms_add_up_to_prediction_and_round_trip(name):
    X = _features(n=20)
    y = _noisy(RooflineConst({"t0_s_per_launch": 4e-6, "eff": 0.6}).predict(X), 0.05)
    fit = MODELS[name]().fit(X, y)
    terms = fit.terms(X)
    # achievable_eff adds the l2 term of the achievable model
    assert set(RESOURCES) | {"fixed"} <= set(terms) <= set(RESOURCES) | {"fixed", "l2", "chain"}
    np.testing.assert_allclose(sum(terms.values()), fit.predict(X), rtol=1e-9)
    assert all(np.all(v >= 0) for v in terms.values())
    again = model_from_dict(fit.to_dict())
    np.testing.assert_allclose(again.predict(X), fit.predict(X), rtol=1e-12)


def test_active_resources_ignore_negligible_work():
    X = _features(resources=("dram",))
    T = X.T.copy()
    T[:, RESOURCES.index("vector")] = T[:, RESOURCES.index("dram")] * 1e-3  # 0.1% of the bound
    assert active_resources(Features(T, X.launches)) == ("dram",)


def test_unknown_model_name_is_an_error():
    with pytest.raises(ValueError, match="unknown model form"):
        model_from_dict({"name": "magic", "params": {}})


def test_cv_prefers_the_generating_form_over_a_too_simple_one():
    # two resources with very different efficiencies: one shared efficiency cannot fit both regimes
    X = _features(n=30, seed=3)
    truth = MaxEff({"t0_s_per_launch": 1e-6, "eff.tensor": 0.3, "eff.dram": 0.9}, ("tensor", "dram"))
    y = _noisy(truth.predict(X), 0.02)
    shapes = np.arange(len(y))
    cands = evaluate([RooflineConst(), MaxEff()], X, y, shapes, active_resources(X))
    best = choose(cands, y)
    assert best.name == "max_eff"
    assert best.score(y)[0] < 0.03  # mean held-out |log error|, noise is 2%
    assert np.median(best.errors(y)) < 3.0  # median held-out error in %


def test_leave_shape_out_holds_out_every_repeat_of_a_shape():
    X = _features(n=10)
    # each shape measured twice, the second time 20% slower: a fold that kept one copy of its own
    # shape would predict it better than the held-out error shows
    X2 = Features(np.vstack([X.T, X.T]), np.concatenate([X.launches, X.launches]))
    truth = RooflineConst({"t0_s_per_launch": 1e-6, "eff": 0.5})
    y = truth.predict(X2) * np.r_[np.ones(10), np.full(10, 1.2)]
    shapes = np.r_[np.arange(10), np.arange(10)]
    pred = leave_shape_out(RooflineConst(), X2, y, shapes)
    np.testing.assert_allclose(pred[:10], pred[10:], rtol=1e-12)  # both copies from the same fold


def test_conformal_interval_levels_and_flags():
    r = np.random.default_rng(0).normal(0, 0.1, 200)
    iv = conformal(r, 0.8)
    assert iv.exact_level
    assert iv.log_lo == pytest.approx(np.quantile(r, 0.1), abs=0.02)
    assert iv.log_hi == pytest.approx(np.quantile(r, 0.9), abs=0.02)
    small = conformal(r[:5], 0.8)  # (n + 1) * 0.1 < 1: ranks run out
    assert not small.exact_level
    assert small.log_lo == pytest.approx(min(r[:5].min(), 0.0))


def test_loso_coverage_is_near_the_level_for_exchangeable_residuals():
    rng = np.random.default_rng(1)
    r = rng.normal(0, 0.1, 400)
    covered = loso_coverage(r, np.arange(400), 0.8)
    assert 0.74 <= covered.mean() <= 0.86


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-2, 2), min_size=1, max_size=60), st.floats(0.5, 0.95))
def test_interval_contains_the_estimate_and_grows_with_level(res, level):
    r = np.array(res)
    lo = conformal(r, level)
    hi = conformal(r, min(level + 0.04, 0.99))
    assert lo.log_lo <= 0.0 <= lo.log_hi
    assert hi.log_lo <= lo.log_lo and hi.log_hi >= lo.log_hi


def _achievable_features(n=60, seed=0):
    rng = np.random.default_rng(seed)
    A = np.zeros((n, len(ACH_RESOURCES)))
    for r in ("tensor", "dram", "l2"):
        A[:, ACH_RESOURCES.index(r)] = 10 ** rng.uniform(-6, -2.5, n)
    launches = rng.integers(1, 6, n).astype(float)
    return Features(np.zeros((n, len(RESOURCES))), launches, A, 5e-6 * launches, 1.1e-6 * launches)


def test_achievable_eff_recovers_physical_parameters():
    X = _achievable_features()
    truth = AchievableEff({"host_scale": 1.6, "fixed_scale": 2.5, "eff.tensor": 0.7, "eff.dram": 0.85,
                           "eff.l2": 0.5}, ("tensor", "dram", "l2"))
    y = _noisy(truth.predict(X), 0.02)
    fit = AchievableEff().fit(X, y)
    assert fit.active == ("tensor", "dram", "l2")
    for k, v in truth.params.items():
        assert fit.params[k] == pytest.approx(v, rel=0.1), k


def test_achievable_eff_at_unit_parameters_is_the_achievable_estimate():
    ach = {"time_s": 9e-6, "host_s": 9e-6, "gpu_s": 7e-6, "fixed_s": 3e-6,
           "times_s": {"tensor": 1e-6, "vector": 0.0, "special_function": 0.0, "dram": 5e-6, "l2": 2e-6}}
    b = Bounds({"tensor": 1e-6, "dram": 4e-6}, (), 2.0, {}, {}, (), ach, 4e-6)
    X = Features.from_bounds([b, Bounds({"dram": 4e-6}, (), 2.0, {}, {}, (), {**ach, "host_s": 0.0}, 4e-6)])
    unit = AchievableEff({"host_scale": 1.0, "fixed_scale": 1.0}, ())
    assert X.fixed[0] == pytest.approx(2e-6)               # gpu_s - max times_s: the per-kernel fixed time
    assert unit.predict(X)[0] == pytest.approx(9e-6)       # host-bound: the host time
    assert unit.predict(X)[1] == pytest.approx(1e-5)       # host not modelled: nominal 5 us x 2 launches
    assert X.host[1] == pytest.approx(1e-5)
    np.testing.assert_allclose(sum(unit.terms(X).values()), unit.predict(X))


def test_achievable_eff_device_side_shows_under_a_host_bound_call():
    """A host-bound isolated call's terms are its host time; the form's device side still holds the
    fitted device work (resource times over their efficiencies) and the achievable per-kernel fixed time."""
    ach = {"time_s": 9e-6, "host_s": 9e-6, "gpu_s": 7e-6, "fixed_s": 3e-6,
           "times_s": {"tensor": 1e-6, "vector": 0.0, "special_function": 0.0, "dram": 5e-6, "l2": 2e-6}}
    X = Features.from_bounds([Bounds({"tensor": 1e-6, "dram": 4e-6}, (), 2.0, {}, {}, (), ach, 4e-6)])
    fit = AchievableEff({"host_scale": 2.0, "fixed_scale": 3.0, "eff.dram": 0.5, "eff.l2": 0.25}, ("dram", "l2"))
    assert fit.terms(X)["fixed"][0] == pytest.approx(18e-6) and fit.terms(X)["dram"][0] == 0.0  # host-bound
    # T_fixed 2 us (not x f: eager gaps) + max(5 us / 0.5, 2 us / 0.25, 1 us) = 12 us
    assert fit.device(X)[0] == pytest.approx(12e-6)
    assert RooflineConst({"t0_s_per_launch": 1e-6, "eff": 0.5}, ()).device(X) is None  # no host side of its own


def test_intervals_cover_at_the_nominal_rate_with_repeated_shapes():
    # 50 shapes timed 3 times each: the shape's error is shared by its repeats, so ranks must count shapes
    rng = np.random.default_rng(3)
    n_shapes, reps = 50, 3
    shape_ids = np.repeat(np.arange(n_shapes), reps)
    resid = np.repeat(rng.normal(0, 0.2, n_shapes), reps) + rng.normal(0, 0.005, n_shapes * reps)
    covered = loso_coverage(resid, shape_ids, 0.8)
    assert 0.7 <= covered.mean() <= 0.9
    # and end to end: leave-shape-out residuals of a fitted form on noisy synthetic data
    X = _achievable_features(n=n_shapes, seed=4)
    truth = AchievableEff({"host_scale": 1.0, "fixed_scale": 1.5, "eff.tensor": 0.8, "eff.dram": 0.9,
                           "eff.l2": 0.7}, ("tensor", "dram", "l2"))
    Xr = X.subset(shape_ids)
    y = truth.predict(Xr) * np.exp(np.repeat(rng.normal(0, 0.1, n_shapes), reps))
    pred = leave_shape_out(AchievableEff(), Xr, y, shape_ids)
    cov = loso_coverage(np.log(y / pred), shape_ids, 0.8)
    assert 0.7 <= cov.mean() <= 0.92
    iv = conformal(np.log(y / pred), 0.8, shape_weights(shape_ids))
    assert iv.n == n_shapes and iv.exact_level
    # the interval is as wide as the errors: ~ +-1.28 sigma of a 10% log-normal error
    assert 0.08 < iv.log_hi < 0.2 and -0.2 < iv.log_lo < -0.08


def test_achievable_scale_is_the_achievable_estimate_times_one_factor():
    from ssmbench.calibrate.achievable_forms import AchievableScale
    X = _achievable_features(n=20, seed=5)
    y = _noisy(1.7 * X.achievable_time(), 0.02)
    fit = AchievableScale().fit(X, y)
    assert fit.n_params_of(X) == 1
    np.testing.assert_allclose(fit.predict(X) / X.achievable_time(), fit.params["host_scale"])
    assert fit.params["host_scale"] == pytest.approx(1.7, rel=0.03)
    again = model_from_dict(fit.to_dict())
    assert isinstance(again, AchievableScale)
    np.testing.assert_allclose(again.predict(X), fit.predict(X))


def test_achievable_host_scales_the_host_side_only():
    """A kernel whose device side the achievable model gets right, measured on a host 1.6x slower than the
    spec's: the host factor is recovered, the device-bound cases stay at the achievable device time (one
    factor on every term, achievable_scale, would move them too)."""
    from ssmbench.calibrate.achievable_forms import AchievableHost
    X = _achievable_features(n=30, seed=6)
    A, H, F = X.achievable()
    device = F + A.max(axis=1)
    y = _noisy(np.maximum(1.6 * H, device), 0.01)
    fit = AchievableHost().fit(X, y)
    assert fit.n_params_of(X) == 1 and fit.params["host_scale"] == pytest.approx(1.6, rel=0.03)
    gpu_bound = device > 1.7 * H
    assert gpu_bound.any() and (~gpu_bound).any()
    np.testing.assert_allclose(fit.predict(X)[gpu_bound], device[gpu_bound], rtol=1e-9)
    assert isinstance(model_from_dict(fit.to_dict()), AchievableHost)


def test_choice_counts_the_tail_of_held_out_errors():
    # a form right on 70% of the shapes and 3x off on the rest loses to one 10% off everywhere,
    # though its median error is lower
    y = np.ones(10)
    from ssmbench.calibrate.crossval import Candidate
    spiky = Candidate("spiky", 2, np.where(np.arange(10) < 7, 1.0, 3.0), fitted=None)
    even = Candidate("even", 2, np.full(10, 1.1), fitted=None)
    assert np.median(spiky.errors(y)) < np.median(even.errors(y))
    assert choose([spiky, even], y).name == "even"
