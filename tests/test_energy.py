"""The energy model (issue #14): the spec's energy section, the model with its power-limit stretch, the fit
on measured windows (synthetic data from known parameters is recovered), the probe's term-by-term solve,
and the energy figures of predict, sweep and the API."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from ssmbench.analytic import energy as em
from ssmbench.analytic.cost import Cost
from ssmbench.hwspecs import SpecError, load_all, parse_spec
from toy_spec import TOY_SPEC

from ssmbench.errors import UserError

TOY = TOY_SPEC + """energy:
  static_power: {value: 20 W, source: a}
  per_flop:
    tensor: {bf16: {value: 0.5 pJ/FLOP, source: a}}
    vector: {fp32: {value: 4 pJ/FLOP, source: a}}
    special_function: {value: 10 pJ/FLOP, source: a}
  per_byte:
    l2: {value: 2 pJ/B, source: a}
    dram: {value: 16 pJ/bit, source: a}
"""


def toy(**energy_changes):
    data = yaml.safe_load(TOY)
    for path, v in energy_changes.items():
        d = data["energy"]
        *head, last = path.split("__")
        for k in head:
            d = d.setdefault(k, {})
        if v is None:
            d.pop(last)
        else:
            d[last] = v
    return parse_spec(data)


def test_energy_section_parses_with_units_converted():
    s = toy()
    d = dict(s.data())
    assert d["energy.static_power"].si == 20.0
    assert d["energy.per_flop.tensor.bf16"].si == pytest.approx(0.5e-12)
    assert d["energy.per_byte.dram"].si == pytest.approx(16e-12 * 8)  # pJ/bit converted to J/B


@pytest.mark.parametrize("path, value, expected", [
    ("per_flop__vector__fp32", {"value": "4 W", "source": "a"}, "expected an energy per operation"),
    ("per_flop__vector__fp32", {"value": "4 pJ", "source": "a"}, "expected an energy per operation"),
    ("per_byte__dram", {"value": "20 pJ/FLOP", "source": "a"}, "expected an energy per byte"),
    ("per_flop__vector", {"value": "4 pJ/FLOP", "source": "a"}, "expected energies per dtype"),
    ("per_flop__tensor__bf17", {"value": "1 pJ/FLOP", "source": "a"}, "unknown dtype"),
    ("per_flop__matrix", {"bf16": {"value": "1 pJ/FLOP", "source": "a"}}, "unknown engine"),
    ("per_byte__hbm", {"value": "20 pJ/B", "source": "a"}, "unknown memory level"),
    ("per_byte__registers", {"value": "1 pJ/B", "source": "a"}, "no memory level 'registers'"),
    ("static_power", {"value": "150 W", "source": "a"}, "not below the power limit"),
    ("static_power", {"value": "0.1 J", "source": "a"}, "expected a power"),
])
def test_bad_energy_sections_name_the_key_and_the_expectation(path, value, expected):
    with pytest.raises(SpecError) as err:
        toy(**{path: value})
    msg = str(err.value)
    assert "energy" in msg and expected in msg, msg


def test_every_builtin_spec_has_an_energy_section_and_h200_is_measured_by_the_probe():
    specs = load_all()
    assert all(s.energy is not None for s in specs.values())
    h200 = specs["h200-sxm"]
    keys = {m.key for m in h200.measured if m.key.startswith("energy.")}
    assert {"energy.static_power", "energy.per_flop.tensor.bf16", "energy.per_byte.dram"} <= keys
    energy_entries = [m for m in h200.measured if m.key.startswith("energy.")]
    # the spec holds the probe's measured values; a fit on workload cases lives in profiles, never in specs
    assert all(m.method.startswith("ssmbench probe") and "energy-probe" in m.method for m in energy_entries)
    assert not any(m.method.startswith(em.CALIBRATED_METHOD) for m in energy_entries)
    for s in specs.values():  # hypothetical specs declare design assumptions, never measurements
        if s.hypothetical:
            assert s.sources["design-energy"].tag == "A"


def test_energy_of_one_op_is_static_power_times_time_plus_dynamic_terms():
    s = toy()
    c = Cost(tensor={"bf16": 1e9}, vector=1e7, transcendental=1e6, read={"activations": 1e6})
    e = em.estimate(c, s)
    t = e["time_s"]
    dyn = 1e9 * 0.5e-12 + 1e7 * 4e-12 + 1e6 * 10e-12 + 1e6 * (128e-12 + 2e-12)  # DRAM byte crosses L2 too
    assert e["energy_j"] == pytest.approx(20.0 * t + dyn)
    assert e["avg_power_w"] == pytest.approx(e["energy_j"] / t)
    assert not e["power_limited"] and e["label"] == em.LABEL and e["not_modelled"] == {}


def test_power_limit_stretches_time_where_dynamic_power_exceeds_it():
    s = toy(per_flop__tensor__bf16={"value": "5 pJ/FLOP", "source": "a"})  # 100 TFLOP/s x 5 pJ = 500 W
    c = Cost(tensor={"bf16": 1e12})
    e = em.estimate(c, s)
    dyn = 1e12 * 5e-12
    assert e["power_limited"]
    assert e["time_s_after_power_limit"] == pytest.approx(dyn / (100.0 - 20.0))  # E_dyn / (limit - static)
    assert e["time_s_after_power_limit"] > e["time_s"]
    assert e["avg_power_w"] == pytest.approx(100.0)
    assert e["energy_j"] == pytest.approx(100.0 * dyn / 80.0)
    assert "power-limited" in e["note"]


def test_unknown_parameters_are_named_never_zero():
    s = toy(per_flop__special_function={"unknown": "not decided"})
    e = em.estimate(Cost(transcendental=1e9, vector=1e6), s)
    assert "energy.per_flop.special_function" in e["not_modelled"] and "partial" in e["note"]
    plain = parse_spec({k: v for k, v in yaml.safe_load(TOY).items() if k != "energy"})
    assert em.estimate(Cost(vector=1e6), plain)["energy_j"] is None


def _synthetic_cases(params: dict[str, float], static: float, limit: float, n: int = 60, seed: int = 1,
                     mma: bool = True):
    """Windows whose energy the model gives exactly from ``params`` (those at the limit are capped there);
    every eighth one's tensor FLOPs are issued as mma.sync (``mma``), every fifth re-reads the cache."""
    from ssmbench.calibrate.energy import EnergyCase

    rng = np.random.default_rng(seed)
    cases = []
    for i in range(n):
        counts = {t: 0.0 for t in em.TERMS}
        tensor = "tensor_mma_sync.bf16" if mma and "tensor_mma_sync.bf16" in params and i % 8 == 0 else "tensor.bf16"
        counts[tensor] = rng.uniform(0, 1e12) * (i % 3 == 0 or i % 8 == 0)
        counts["vector.fp32"] = rng.uniform(0, 1e10) * (i % 3 == 1)
        counts["special_function"] = rng.uniform(0, 1e9) * (i % 2 == 0)
        counts["dram"] = rng.uniform(1e6, 1e9)
        counts["cache"] = counts["dram"] + rng.uniform(0, 1e9) * (i % 4 == 0)
        counts["cache_reread"] = rng.uniform(0, 1e10) * (i % 5 == 0) * ("cache_reread" in params)
        time_s = rng.uniform(1e-5, 1e-2)
        e = static * time_s + sum(params[t] * counts[t] for t in params)
        e = min(e, limit * time_s)  # a window at the limit measures limit x (stretched) time
        cases.append(EnergyCase(f"k{i}", "fam" + str(i % 2), f"s{i}", "f", None, e, time_s, e / time_s, time_s, counts))
    return cases


def test_fit_recovers_known_parameters_from_synthetic_windows():
    from ssmbench.calibrate import energy as ce

    params = {"tensor.bf16": 1.1e-12, "vector.fp32": 19e-12, "special_function": 120e-12, "dram": 33e-12,
              "cache": 84e-12}
    cases = _synthetic_cases(params, 130.0, 700.0)
    f = ce.fit(cases, 700.0)
    assert f.static_w == pytest.approx(130.0, rel=1e-6)
    for t, v in params.items():
        assert f.per_term[t] == pytest.approx(v, rel=1e-6), t
    ev = ce.evaluate(cases, 700.0)
    assert ev["bases"]["measured_time"]["all"]["median_ape_pct"] < 1e-6  # noiseless: held out exactly
    assert ev["n_power_limited"] > 0  # the synthetic set has windows at the limit, predicted by the cap


def test_fit_needs_cases_below_the_power_limit():
    from ssmbench.calibrate import energy as ce

    cases = _synthetic_cases({"dram": 1e-6}, 130.0, 140.0, n=10)  # every window wants > 230 W
    with pytest.raises(UserError, match="power limit"):
        ce.fit(cases, 140.0)


def test_probe_solve_recovers_each_term_in_order():
    from ssmbench.measure._probe_energy import Window, solve

    static, vec, sfu, l2, dram, bf16 = 130.0, 19e-12, 120e-12, 84e-12, 33e-12, 1.1e-12

    def w(name, counts, t):
        e = static * t + counts.get("vector", 0) * vec + counts.get("sfu", 0) * sfu + counts.get("l2", 0) * l2 \
            + counts.get("dram", 0) * (dram + l2) + counts.get("tensor.bf16", 0) * bf16
        return Window(name, e, t, e / t, counts, name)

    windows = {"empty": w("empty", {}, 7e-6), "fma": w("fma", {"vector": 3e10}, 1e-3),
               "exp": w("exp", {"sfu": 1e10, "vector": 1e10}, 3e-3), "l2": w("l2", {"l2": 2e9, "vector": 5e8}, 3e-4),
               "dram": w("dram", {"dram": 2e9}, 5e-4), "gemm.bf16": w("gemm.bf16", {"tensor.bf16": 1e12, "dram": 4e8}, 1.5e-3)}
    got = {k: v for k, v, _ in solve(windows, 700.0)}
    assert got["energy.static_power"] == pytest.approx(static)
    for key, v in (("energy.per_flop.vector.fp32", vec), ("energy.per_flop.special_function", sfu),
                   ("energy.per_byte.l2", l2), ("energy.per_byte.dram", dram), ("energy.per_flop.tensor.bf16", bf16)):
        assert got[key] == pytest.approx(v, rel=1e-9), key


def test_predict_default_prints_a_labelled_energy_figure():
    from ssmbench import energy, predict

    r = predict("mamba2-2.7b", hw="h200-sxm", phase="prefill", batch=1, seqlen=4096)
    assert r.energy["label"] == em.LABEL
    assert r.energy_j > 0 and r.energy_per_token_j == pytest.approx(r.energy_j / 4096)
    assert 0 < r.avg_power_w <= 700.0 + 1e-6
    e = energy("mamba2-2.7b", hw="h200-sxm", phase="prefill", batch=1, seqlen=4096)
    assert e["energy_j"] == r.energy_j and e["flops"] > 0 and e["energy_label"] == em.LABEL


def test_cli_predict_and_sweep_print_energy(capsys):
    import json

    from ssmbench.cli import main

    assert main(["predict", "--model", "mamba2-130m", "--hw", "h200-sxm", "--seqlen", "512"]) == 0
    out = capsys.readouterr().out
    assert "energy per step (analytic estimate" in out and "average power" in out
    assert main(["sweep", "--models", "mamba2-130m", "--hw", "h200-sxm,t4", "--phases", "decode", "--batch", "1",
                 "--seqlen", "512", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    rows = rows["rows"] if isinstance(rows, dict) else rows
    h200 = next(r for r in rows if r["spec"] == "h200-sxm")
    t4 = next(r for r in rows if r["spec"] == "t4")
    assert h200["energy_j"] > 0 and "analytic estimate at the time bound" in h200["energy_label"]
    assert "energy at the achievable time" in h200["energy_label"]  # the sweep says what its energy is not
    assert t4["energy_j"] is None and "no energy estimate" in t4["energy_label"] and h200["achievable_s"] is None
    # with --achievable the sweep's energy is predict's: the same point at the same achievable time
    assert main(["sweep", "--models", "mamba2-130m", "--hw", "h200-sxm,t4", "--phases", "decode", "--batch", "1",
                 "--seqlen", "512", "--json", "--achievable"]) == 0
    rows = json.loads(capsys.readouterr().out)
    rows = rows["rows"] if isinstance(rows, dict) else rows
    h200 = next(r for r in rows if r["spec"] == "h200-sxm")
    assert "analytic estimate at the achievable time" in h200["energy_label"]
    assert next(r for r in rows if r["spec"] == "t4")["energy_j"] is None
    assert main(["predict", "--model", "mamba2-130m", "--hw", "h200-sxm", "--phase", "decode", "--batch", "1",
                 "--seqlen", "512", "--json"]) == 0
    t = json.loads(capsys.readouterr().out)["total"]
    assert h200["achievable_s"] == pytest.approx(t["achievable"]["time_s"], rel=1e-12)
    assert h200["energy_j"] == pytest.approx(t["energy_j"], rel=1e-12)
    assert h200["avg_power_w"] == pytest.approx(t["avg_power_w"], rel=1e-12)


def test_spec_check_predicts_cases_with_the_specs_own_parameters_without_a_fit():
    from ssmbench.calibrate import energy as ce

    s = toy()  # static 20 W, bf16 0.5 pJ, fp32 4 pJ, exp 10 pJ, DRAM 128 pJ/B, L2 2 pJ/B, limit 100 W
    params = {"tensor.bf16": 0.5e-12, "vector.fp32": 4e-12, "special_function": 10e-12, "dram": 128e-12,
              "cache": 2e-12}
    sc = ce.spec_check(_synthetic_cases(params, 20.0, 100.0), s)
    assert not sc["in_sample"] and sc["label"] == em.LABEL
    assert sc["all"]["median_ape_pct"] < 1e-6 and sc["all"]["p90_ape_pct"] < 1e-6
