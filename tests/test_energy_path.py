"""Power drawn while a kernel runs on a software path (``energy.path_power``, analytic/energy.py
``path_issue_seconds``): the seconds its path work takes beyond the DRAM bandwidth or vector rate."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from ssmbench.analytic import energy as em
from ssmbench.analytic.cost import Cost
from ssmbench.analytic.roofline import work_array
from ssmbench.hwspecs import SpecError, parse_spec
from test_energy import TOY


def spec(path_power=None, **rates):
    """The toy spec (vector 10 TFLOP/s, DRAM 1 TB/s) with software-path rates and an energy.path_power."""
    data = yaml.safe_load(TOY)
    for key, value in rates.items():
        engine, name = key.split("__")
        where = data["memory"]["dram"] if engine == "dram" else data["compute"]
        where.setdefault("path", {})[name] = {"value": value, "source": "a"}
    if path_power is not None:
        data["energy"]["path_power"] = path_power
    return parse_spec(data)


PATHS = {"dram__cast_copy": "0.5 TB/s", "compute__conv_depthwise": "1 TFLOP/s"}


def test_path_seconds_are_the_time_beyond_the_base_rate():
    s = spec(**PATHS)
    w = work_array(Cost(path={"dram.cast_copy": 1e9, "compute.conv_depthwise": 1e9}))
    # 1e9 B x (1 / 0.5 TB/s - 1 / 1 TB/s) + 1e9 FLOP x (1 / 1 TFLOP/s - 1 / 10 TFLOP/s)
    assert float(em.path_issue_seconds(w, s)) == pytest.approx(1e-3 + 0.9e-3)


def test_no_path_seconds_where_the_rate_is_unknown_or_not_slower():
    w = work_array(Cost(path={"dram.cast_copy": 1e9}))
    assert float(em.path_issue_seconds(w, spec())) == 0.0
    assert float(em.path_issue_seconds(w, spec(dram__cast_copy="2 TB/s"))) == 0.0


def test_path_power_is_charged_over_the_path_seconds():
    c = Cost(vector=1e6, path={"compute.conv_depthwise": 1e9})
    with_power = em.estimate(c, spec(path_power={"value": "100 W", "source": "a"}, **PATHS))
    assert with_power["counts"]["path_issue"] == pytest.approx(0.9e-3)
    assert with_power["dynamic_j"]["path_issue"] == pytest.approx(100.0 * 0.9e-3)
    assert with_power["units"]["path_issue"] == "s" and "energy.path_power" in with_power["parameters"]
    unknown = em.estimate(c, spec(**PATHS))
    assert "energy.path_power" in unknown["not_modelled"] and unknown["dynamic_j"]["path_issue"] == 0.0
    plain = em.estimate(Cost(vector=1e6), spec(**PATHS))
    assert "energy.path_power" not in plain["not_modelled"]  # no path work: nothing to name


def test_a_path_power_that_is_not_a_power_is_an_error():
    with pytest.raises(SpecError, match="path_power"):
        spec(path_power={"value": "4 pJ", "source": "a"})


def test_fit_recovers_the_path_power_from_synthetic_windows():
    from ssmbench.calibrate import energy as ce
    from test_energy import _synthetic_cases

    cases = _synthetic_cases({"dram": 33e-12, "cache": 84e-12}, 130.0, 700.0, n=40)
    out = []
    for i, c in enumerate(cases):
        n = dict(c.counts)
        n["path_issue"] = 0.5 * c.time_s if i % 3 == 0 else 0.0
        e = c.measured_j + 250.0 * n["path_issue"]
        out.append(ce.EnergyCase(c.key, c.family, c.shape, c.source, None, e, c.time_s, e / c.time_s, c.time_s, n))
    f = ce.fit([c for c in out if c.avg_power_w < 0.95 * 700.0], 700.0)
    assert f.per_term["path_issue"] == pytest.approx(250.0, rel=1e-6)
    assert ce.fit_dict(f)["per_term"]["path_issue"]["unit"] == "W"
    assert np.isfinite(f.static_w)


def test_probe_solves_the_path_power_over_the_time_beyond_the_vector_rate():
    from ssmbench.measure._probe_energy import Window, solve

    static, vec, l2, dram, power = 125.0, 2e-12, 40e-12, 75e-12, 300.0

    def w(name, counts, t, issue=0.0):
        e = (static * t + counts.get("vector", 0) * vec + counts.get("l2", 0) * l2
             + counts.get("dram", 0) * (dram + l2) + power * issue)
        return Window(name, e, t, e / t, counts, name)

    # fma: 6.4e10 FLOPs in 1 ms (64 TFLOP/s attained); path: 1.5e9 FLOPs take 1.5e9 / 64e12 s at that rate
    # and 2.2 ms in all, so 2.2 ms - 23.4 us of issue-bound time
    issue = 2.2e-3 - 1.5e9 / 64e12
    windows = {"empty": w("empty", {}, 8e-6), "fma": w("fma", {"vector": 6.4e10}, 1e-3),
               "l2": w("l2", {"l2": 2e9}, 3e-4), "dram": w("dram", {"dram": 2e9}, 5e-4),
               "path.conv_depthwise": w("path.conv_depthwise", {"vector": 1.5e9, "dram": 7e8, "path_flops": 1.5e9},
                                        2.2e-3, issue)}
    got = {k: v for k, v, _ in solve(windows, 700.0)}
    assert got["energy.path_power"] == pytest.approx(power, rel=1e-9)
    del windows["fma"]  # without the attained vector rate there is no path time to divide by
    assert "energy.path_power" not in {k for k, _, _ in solve(windows, 700.0)}
