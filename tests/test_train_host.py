"""The backward's per-launch host cost of an eager train step (analytic/workloads/train_host.py) and its
derivation from host-bound whole-model train records (calibrate/runtime_host.py)."""

from pathlib import Path

import pytest

from ssmbench.analytic.registry import symbolic_cost
from ssmbench.analytic.runtime import RUNTIMES
from ssmbench.analytic.symbols import SYMBOLS
from ssmbench.analytic.workloads.evaluate import call_shape
from ssmbench.analytic.workloads.models import get_model
from ssmbench.analytic.workloads.phases import plan
from ssmbench.analytic.workloads.point import analyze_point
from ssmbench.analytic.workloads.report import predict
from ssmbench.analytic.workloads.train_host import backward_launches, pays_backward
from ssmbench.calibrate.runtime_host import (
    BACKWARD_KEY,
    base_spec,
    derive,
    held_out_spec,
    rows_of,
    with_backward_values,
)
from ssmbench.hwspecs import get_spec
from ssmbench.hwspecs.units import parse
from ssmbench.measure.models.records import find_model_runs, latest_records

ROOT = Path(__file__).resolve().parents[1]
RUNS = (ROOT / "results" / "h200" / "2026-12-03" / "models", ROOT / "results" / "h200" / "2026-12-03" / "models-b")


def _launches(c, mode, batch, length):
    """Launches of plan call ``c`` costed in ``mode`` at (batch, length), from its symbolic rule."""
    n = symbolic_cost(c.op, c.impl, mode, "bf16").launches
    dims = call_shape(c, "train", batch, length)
    return float(n.subs({SYMBOLS[k]: v for k, v in dims.items()}) if hasattr(n, "subs") else n)


def test_backward_launches_are_fwdbwd_minus_fwd():
    """N_bwd of a train plan = sum over its fwdbwd calls of (fwdbwd - fwd launches) x count; 0 in
    prefill; the transformer's count by hand from its op rules."""
    m = get_model("transformerpp-125m")
    calls = tuple(plan(m, "train"))
    expect = sum((_launches(c, "fwdbwd", 8, 2048) - _launches(c, "fwd", 8, 2048)) * c.count
                 for c in calls if c.mode == "fwdbwd")
    assert expect > 0
    assert backward_launches(calls, "bf16", "train", 8, 2048) == pytest.approx(expect)
    assert backward_launches(tuple(plan(m, "prefill")), "bf16", "prefill", 8, 2048) == 0.0


def test_pays_backward_only_in_eager_training():
    assert pays_backward("train", "eager") and pays_backward("train", "eager", RUNTIMES["mamba-ssm"])
    assert not pays_backward("prefill", "eager")
    assert not pays_backward("train", "graph", RUNTIMES["cuda-graph"])
    assert not pays_backward("train", "eager", RUNTIMES["torch-compile"])  # compiled backward: its launches only


def test_step_host_adds_backward_launches_times_the_term():
    """The train step's host time grows by N_bwd x launch.host.backward_launch over the spec without it;
    the op rows do not change, nor a prefill step; the plain-Python point path agrees."""
    spec = get_spec("h200-sxm")
    per = parse(next(m.value for m in spec.measured if m.key == BACKWARD_KEY), "time")
    m = get_model("mamba2-130m")
    with_term = predict(m, spec, "train", 8, 2048, with_searches=False, runtime="mamba-ssm")["total"]["achievable"]
    without = predict(m, base_spec(spec), "train", 8, 2048, with_searches=False,
                      runtime="mamba-ssm")["total"]["achievable"]
    n = backward_launches(tuple(plan(m, "train")), "bf16", "train", 8, 2048)
    assert with_term["backward_launches"] == pytest.approx(n)
    assert with_term["backward_host_s"] == pytest.approx(n * per)
    module = with_term["host_s"] - without["host_s"] - n * per  # the module terms base_spec also removes
    assert module > 0 and "launch.host.backward_launch" in without["not_modelled"]
    assert "launch.host.backward_launch" not in with_term["not_modelled"]
    pf = predict(m, spec, "prefill", 8, 2048, with_searches=False, runtime="mamba-ssm")["total"]["achievable"]
    assert pf["backward_host_s"] == 0.0
    from ssmbench.analytic.roofline import SpecTable
    table = SpecTable.of([spec])
    fast = analyze_point(m, "train", table, 8, 2048, achievable=True)[0].achievable
    general = analyze_point(m, "train", table, 8, 2048, achievable=True, force_general=True)[0].achievable
    assert fast["host_s"] == pytest.approx(general["host_s"], rel=1e-9)
    plain = predict(m, spec, "train", 8, 2048, with_searches=False)["total"]["achievable"]
    assert plain["host_s"] == pytest.approx(general["host_s"], rel=1e-9)
    assert plain["backward_host_s"] == pytest.approx(n * per)


@pytest.fixture(scope="module")
def rows():
    return rows_of(latest_records([p for run in RUNS for p in find_model_runs(run)]), lambda r: get_spec("h200-sxm"))


def test_backward_term_is_the_median_of_host_bound_train_records(rows):
    """Each host-bound train record's value closes its step: plan host (no runtime terms) + op calls x the
    module terms + N_bwd x value = the measured step; the term is their median, held out per model."""
    entries = derive(rows)
    values = {e["key"]: parse(e["value"], "time") for e in entries if "host" in e["key"]}
    filled = [r for r in with_backward_values(rows, entries) if r["term"] == BACKWARD_KEY and r["usable"]]
    assert len(filled) >= 3
    for r in filled:
        module = sum(n * values.get(k, values.get("launch.host.hf_module")) for k, n in r["calls_by_key"].items())
        assert r["plan_host_s"] + module + r["backward_launches"] * r["value_s"] == pytest.approx(r["measured_s"])
    import statistics
    assert values[BACKWARD_KEY] == pytest.approx(statistics.median(r["value_s"] for r in filled), rel=1e-3)
    _, used = held_out_spec(get_spec("h200-sxm"), rows, "mamba2-130m")
    e = next(e for e in used if e["key"] == BACKWARD_KEY)
    assert "mamba2-130m/" not in e["method"] and "graph-mamba-style" in e["method"]
