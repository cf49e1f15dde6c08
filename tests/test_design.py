"""Design-space exploration and requirements inversion (issue #17): the vectorised step equals predict's
achievable estimate, exploration columns and fronts, --vary errors, and the require round trip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from ssmbench.analytic.achievable import CLASSES
from ssmbench.analytic.design import energy, pareto, space
from ssmbench.analytic.design.step import Workload, WorkloadWork, evaluate
from ssmbench.analytic.workloads.models import get_model
from ssmbench.analytic.workloads.report import predict
from ssmbench.hwspecs import get_spec, load_spec

from ssmbench.cli import main


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("spec, model, phase, batch, length", [
    ("h200-sxm", "mamba2-2.7b", "decode", 64, 32768),
    ("h200-sxm", "llama-3-8b", "prefill", 1, 4096),
    ("h200-sxm", "mamba2-2.7b", "train", 1, 2048),
    ("ssm-sram-asic", "mamba2-2.7b", "decode", 1, 4096),   # the state kept on chip
    ("ssm-sram-asic", "mamba2-2.7b", "decode", 8, 4096),   # the state does not fit
])
def test_the_base_design_gives_predicts_achievable_estimate(spec, model, phase, batch, length):
    s, m = get_spec(spec), get_model(model)
    st = evaluate(WorkloadWork.of(Workload(m, phase, batch, length), s), space.Designs.of(s))
    ach = predict(m, s, phase, batch, length, with_searches=False)["total"]["achievable"]
    assert st.time_s[0] == pytest.approx(ach["time_s"], rel=1e-12)
    assert st.binding_names()[0] == ach["bottleneck"]
    assert bool(st.state_on_chip[0]) == (spec == "ssm-sram-asic" and batch == 1)


def test_design_points_evaluate_as_specs_with_those_values(h200_dict, write_spec):
    """A design point (the base with a value replaced) gives what predict gives on a spec file with that value.
    The design point keeps the base's software kernel paths at their share of its copy bandwidth
    (space.Designs: software on the design's memory), so the spec file scales its measured path bandwidths
    by the same factor (the decode's Mamba-2 A_log upcast runs on memory.dram.path.cast_copy)."""
    from ssmbench.hwspecs.units import parse

    s, m = get_spec("h200-sxm"), get_model("mamba2-2.7b")
    ww = WorkloadWork.of(Workload(m, "decode", 16, 8192), s)
    bw = np.array([2e12, 9e12])
    st = evaluate(ww, space.Designs.of(s, {"memory.dram.bandwidth": bw}), chunk=1)
    base_bw = parse(next(e["value"] for e in h200_dict["measured"] if e["key"] == "memory.dram.bandwidth"), "bandwidth")
    for i, b in enumerate(bw):
        measured = [e if not e["key"].startswith("memory.dram.path.") else
                    dict(e, value=f"{parse(e['value'], 'bandwidth') * float(b) / base_bw!r} B/s")
                    for e in h200_dict["measured"] if e["key"] != "memory.dram.bandwidth"]
        d = dict(h200_dict, measured=measured)
        d["memory"]["dram"]["bandwidth"] = {"value": f"{float(b)!r} B/s", "source": "nvidia-h200"}
        ach = predict(m, load_spec(write_spec(d)), "decode", 16, 8192, with_searches=False)["total"]["achievable"]
        assert st.time_s[i] == pytest.approx(ach["time_s"], rel=1e-12)


def test_pareto_front_points_are_not_dominated_and_dominate_the_rest():
    rng = np.random.default_rng(3)
    for _ in range(20):
        x, y = rng.integers(0, 30, 200).astype(float), rng.integers(0, 30, 200).astype(float)
        x[rng.integers(0, 200, 5)] = np.nan
        f = pareto.front(x, y)
        assert all(not pareto.dominated(x, y, i) for i in f)
        ok = ~(np.isnan(x) | np.isnan(y))
        rest = [i for i in np.nonzero(ok)[0] if i not in set(f)]
        # every other point is dominated, or repeats a front point exactly
        assert all(pareto.dominated(x, y, i) or any(x[j] == x[i] and y[j] == y[i] for j in f) for i in rest)


@pytest.mark.parametrize("ext", ["parquet", "csv"])
def test_explore_writes_every_column_and_a_front(capsys, tmp_path, ext):
    pytest.importorskip("pyarrow")
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq
    wl = tmp_path / "w.yaml"
    wl.write_text(yaml.safe_dump({"workloads": [
        {"model": "mamba2-2.7b", "phase": "decode", "batch": 64, "length": 32768},
        {"model": "llama-3-8b", "phase": "prefill", "batch": 1, "length": [2048]}]}))
    out, front = tmp_path / f"r.{ext}", tmp_path / "front.json"
    code, text, err = run(capsys, "explore", "--base", "h200-sxm", "--vary",
                          "memory.dram.bandwidth=2..16TB/s,compute.tensor.bf16=0.5..4PFLOP/s", "--grid", "4",
                          "--workloads", str(wl), "--cost", "memory.dram.bandwidth=1/TB/s",
                          "--cost", "compute.tensor.bf16=2/PFLOP/s", "--out", str(out), "--front-out", str(front))
    assert code == 0, err
    t = (pq.read_table(out) if ext == "parquet" else pcsv.read_csv(out)).to_pydict()
    assert len(t["design"]) == 2 * 16
    for c in ("memory.dram.bandwidth_B_per_s", "compute.tensor.bf16_flop_per_s", "model", "phase", "batch",
              "length", "step_time_s", "time_per_token_s", "tokens_per_s", "energy_per_token_j", "avg_power_w",
              "energy_note", "binding", "state_on_chip", "tiles_fit_on_chip", "fits_in_memory", "cost"):
        assert c in t, c
    assert set(t["binding"]) <= set(CLASSES)
    assert all(e is not None and e > 0 for e in t["energy_per_token_j"])  # the energy model of analytic/energy.py
    assert all(n.startswith("analytic estimate") for n in t["energy_note"])
    assert np.all(np.array(t["avg_power_w"]) <= 700.0 + 1e-6)  # the H200's power limit
    tpt, tps = np.array(t["time_per_token_s"]), np.array(t["tokens_per_s"])
    assert np.allclose(tpt * tps, 1.0)
    fronts = yaml.safe_load(front.read_text())["fronts"]
    cost_fronts = [f for f in fronts if f["y"] == "cost"]
    assert len(cost_fronts) == 2 and all(f["available"] for f in cost_fronts)
    assert [f["available"] for f in fronts if f["y"] == "energy_per_token_j"] == [True, True]
    for f in cost_fronts:
        rows = [r for r in zip(t["model"], t["time_per_token_s"], t["cost"]) if f["workload"].startswith(r[0])]
        x, y = np.array([r[1] for r in rows]), np.array([r[2] for r in rows])
        for d in f["designs"]:
            i = int(np.nonzero((x == d["time_per_token_s"]) & (y == d["cost"]))[0][0])
            assert not pareto.dominated(x, y, i)
    assert "Pareto front" in text and "analytic estimate" in text


@pytest.mark.parametrize("vary, message", [
    ("memory.dram.bandwith=2..16TB/s", "did you mean memory.dram.bandwidth"),
    ("memory.dram.bandwidth=2..16PFLOP/s", "takes a bandwidth"),
    ("compute.tensor.bf16=1..2TB/s", "expected an operation rate"),
    ("memory.dram.bandwidth=2..16", "no unit"),
    ("memory.dram.bandwidth=16..2TB/s", "lower end exceeds the upper end"),
    ("launch.kernel=1..2us", "launch.graph_node"),
    ("compute.clock_boost=1..2GHz", "does not enter the achievable estimate"),
    ("memory.sram.capacity=1..2GB", "has no memory.sram level"),
    ("memory.dram.bandwidth", "expected KEY=LO..HI UNIT"),
    ("power.idle=10..50W", "not an energy value the step's energy charges"),
])
def test_vary_errors_name_the_problem(capsys, tmp_path, vary, message):
    code, _, err = run(capsys, "explore", "--base", "h200-sxm", "--vary", vary, "--grid", "2", "--model",
                       "mamba2-2.7b", "--out", str(tmp_path / "x.csv"))
    assert code == 2
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("model, phase, batch, length", [("mamba2-130m", "prefill", 1, 2048),
                                                          ("mamba2-130m", "decode", 8, 2048),
                                                          ("mamba2-2.7b", "train", 1, 2048)])
def test_explore_base_spec_energy_equals_predicts(model, phase, batch, length):
    from ssmbench import predict as api_predict
    base = get_spec("h200-sxm")
    ww = WorkloadWork.of(Workload(get_model(model), phase, batch, length), base)
    d = space.Designs.of(base)
    e = energy.step_energy(ww, d, evaluate(ww, d).time_s)
    r = api_predict(model, hw="h200-sxm", phase=phase, batch=batch, seqlen=length)
    assert float(e.energy_j[0]) == pytest.approx(r.energy_j, rel=1e-9)
    assert e.note.startswith(r.energy["label"])


def test_explore_varies_an_energy_value_linearly():
    base = get_spec("h200-sxm")
    ww = WorkloadWork.of(Workload(get_model("mamba2-130m"), "prefill", 1, 2048), base)
    d = space.Designs.of(base, {"energy.per_byte.dram": np.array([0.0, 75e-12, 150e-12])})
    e = energy.step_energy(ww, d, evaluate(ww, d).time_s).energy_j
    assert e[0] < e[1] < e[2] and e[2] - e[1] == pytest.approx(e[1] - e[0])


def test_require_energy_target_round_trip(capsys, tmp_path):
    base = get_spec("h200-sxm")
    ww = WorkloadWork.of(Workload(get_model("mamba2-130m"), "decode", 8, 2048), base)  # ~235 W: below the limit
    d0 = space.Designs.of(base)
    e0 = float(energy.step_energy(ww, d0, evaluate(ww, d0).time_s).energy_j[0]) / ww.tokens
    target = 0.9 * e0  # 10% less energy per token than the base: a shorter step (less static energy)
    out = tmp_path / "req.yaml"
    code, _, err = run(capsys, "require", "--model", "mamba2-130m", "--phase", "decode", "--batch", "8", "--context",
                       "2048", "--target", f"energy_per_token_j={target!r}", "--out", str(out))
    assert code == 0, err
    sheet = yaml.safe_load(out.read_text())
    assert not sheet["at_base"]["meets_targets"] and sheet["design"]["meets_targets"]
    values = {k: [float(v["value"].split()[0])] for k, v in sheet["design"]["values"].items()}
    d1 = space.Designs.of(base, {k: np.array(v) for k, v in values.items()})
    e1 = float(energy.step_energy(ww, d1, evaluate(ww, d1).time_s).energy_j[0]) / ww.tokens
    assert e1 <= target * (1 + 1e-6) < e0


def test_energy_target_below_the_dynamic_energy_is_refused(capsys, tmp_path):
    code, _, err = run(capsys, "require", "--model", "mamba2-2.7b", "--context", "4096", "--target",
                       "energy_per_token_j=1e-9", "--out", str(tmp_path / "n.yaml"))
    assert code == 2 and "no step time meets the target" in err and "Traceback" not in err


def _tokens_per_s(spec_path, w) -> float:
    r = predict(get_model(w["model"]), load_spec(spec_path), w["phase"], w["batch"], w["length"],
                with_searches=False)
    return r["total"]["achievable"]["tokens_per_s"]


def _scaled(spec_file, key: str, factor: float, tmp_path) -> str:
    data = yaml.safe_load(Path(spec_file).read_text())
    node = data
    *parents, leaf = key.split(".")
    for p in parents:
        node = node[p]
    value, unit = node[leaf]["value"].split(" ", 1)
    node[leaf]["value"] = f"{float(value) * factor!r} {unit}"
    out = tmp_path / f"scaled-{factor}.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(out)


@pytest.mark.parametrize("argv, binding", [
    # batch 4: at batch 64 the state update's programs (chain.py state_tile_cta, 6 ms a step) make the step
    # latency-bound whatever the bandwidth
    (["--model", "mamba2-2.7b", "--phase", "decode", "--batch", "4", "--context", "32768",
      "--target", "tokens_per_s=1600"], "memory.dram.bandwidth"),
    (["--model", "llama-3-8b", "--phase", "prefill", "--batch", "1", "--seqlen", "4096",
      "--target", "tokens_per_s=80000"], "compute.tensor.bf16"),
    (["--model", "mamba2-2.7b", "--phase", "decode", "--batch", "1", "--context", "4096",
      "--target", "time_per_token_s=1e-3", "--base", "ssm-sram-asic"], "memory.dram.bandwidth"),
    (["--model", "mamba2-2.7b", "--phase", "decode", "--batch", "4", "--context", "32768",
      # closer levels raised to keep the hierarchy (2 k: at 2.4 k the fixed times and the state update's programs
      # floor the step at ~1.3 ms whatever the bandwidth)
      "--target", "tokens_per_s=2000"], "memory.dram.bandwidth"),
    (["--model", "mamba2-2.7b", "--phase", "decode", "--batch", "1", "--context", "4096",
      "--target", "time_per_token_s=1e-4", "--base", "ssm-sram-asic"], None),  # DRAM alone cannot: latency joins
])
def test_require_round_trip(capsys, tmp_path, argv, binding):
    sheet, spec = tmp_path / "needs.yaml", tmp_path / "grown.yaml"
    code, _, err = run(capsys, "require", *argv, "--out", str(sheet))
    assert code == 0, err
    data = yaml.safe_load(sheet.read_text())
    assert data["schema"] == "ssmbench-requirements/1" and "spec_problem" not in data["design"]
    key = data["design"]["binding"]
    if binding is not None:
        assert key == binding
        solved = {r["key"]: r for r in data["resources"]}[key]
        assert solved["binds"] and solved["status"] == "solved" and solved["growth"] > 1
    code, _, err = run(capsys, "specs", "new", "--from-requirements", str(sheet), "--out", str(spec))
    assert code == 0, err
    assert run(capsys, "specs", "validate", str(spec))[0] == 0
    grown = load_spec(spec)
    assert grown.hypothetical and not grown.measured
    assert grown.sources["requirements"].tag == "A"
    w = data["workload"]
    target = data["targets"].get("tokens_per_s") or 1.0 / data["targets"]["time_per_token_s"]
    got = _tokens_per_s(str(spec), w)
    assert target <= got <= 1.01 * target  # meets every target, within 1%
    assert _tokens_per_s(_scaled(spec, key, 0.95, tmp_path), w) < target  # the binding resource 5% smaller misses


def test_specs_new_refuses_a_sheet_with_from(capsys, tmp_path):
    sheet = tmp_path / "bad.yaml"
    sheet.write_text("schema: something-else\n")
    code, _, err = run(capsys, "specs", "new", "--from-requirements", str(sheet), "--out", str(tmp_path / "s.yaml"))
    assert code == 2 and "not a requirements sheet" in err
    code, _, err = run(capsys, "specs", "new", "--from-requirements", str(sheet), "--from", "h200-sxm",
                       "--out", str(tmp_path / "s.yaml"))
    assert code == 2 and "leave out --from" in err
