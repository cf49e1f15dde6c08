"""The batched sweep (analytic/sweep_columns.py, sweep_fast.py, workloads/batch.py, workloads/grid_bound.py)
against the per-(model, phase) path (``sweep(..., force_general=True)``: ``evaluate.analyze`` per pair):
every column, every built-in model x phase x spec, to 1e-12 relative (labels and flags exactly), under
each launch regime, bytes basis and dtype; and a mutation of the batched path that the comparison
catches. Each test runs on both ways of taking the per-call max (``path``): the numpy one and, where
numba is installed, the compiled loop (workloads/grid_kernel.py)."""

import numpy as np
import pytest
from ssmbench.analytic import sweep
from ssmbench.analytic.workloads import grid_bound, grid_kernel
from ssmbench.analytic.workloads.batch import evaluate_plans
from ssmbench.analytic.workloads.evaluate import compile_plan, evaluate_plan, phase_grid
from ssmbench.analytic.workloads.models import builtin_models, get_model
from ssmbench.analytic.workloads.phases import PHASES, plan
from ssmbench.hwspecs import get_spec, load_all

BATCHES = [1, 3, 64]
LENGTHS = [128, 1000, 32768, 262144]


def differences(fast: dict, general: dict) -> list[str]:
    """Columns where the two sweeps differ: floats beyond 1e-12 relative or NaN in one only; anything
    else not equal."""
    bad = []
    for c in sweep.COLUMNS:
        a, b = general[c], fast[c]
        if a.shape != b.shape:
            bad.append(f"{c}: shape {a.shape} vs {b.shape}")
        elif a.dtype.kind == "f":
            nan = np.isnan(a)
            if (nan != np.isnan(b)).any() or (np.abs(a - b)[~nan] > 1e-12 * np.abs(a)[~nan]).any():
                bad.append(c)
        elif not (a == b).all():
            bad.append(c)
    return bad


def _models():
    return list(builtin_models().values())


@pytest.fixture(params=["numpy", "numba"])
def path(request, monkeypatch):
    """The per-call max taken by numpy or by the compiled loop (skipped where numba is not installed)."""
    if request.param == "numba" and not grid_kernel.AVAILABLE:
        pytest.skip("numba is not installed (the optional 'fast' extra)")
    monkeypatch.setenv(grid_kernel.ENV, "1" if request.param == "numba" else "0")
    assert grid_kernel.enabled() == (request.param == "numba")
    return request.param


@pytest.fixture(scope="module")
def specs():
    return list(load_all().values())


def test_every_model_phase_and_spec(specs, path):
    found_f, found_g = [], []
    fast = sweep.sweep(_models(), specs, PHASES, BATCHES, LENGTHS, unsupported=found_f)
    general = sweep.sweep(_models(), specs, PHASES, BATCHES, LENGTHS, unsupported=found_g, force_general=True)
    assert not differences(fast, general), differences(fast, general)
    assert found_f == found_g
    # the comparison covered the variants: state on chip, PIM, a bound of every kind
    assert "on chip (sram)" in set(fast["state_residency"]) and np.isfinite(fast["time_s_host_gemms"]).any()
    assert {"tensor", "dram", "launch"} <= set(fast["bottleneck"])


@pytest.mark.parametrize("kw", [{"launch": "eager"}, {"launch": "graph"}, {"bytes_basis": "compulsory"},
                                {"dtype": "fp8"}, {"dtype": "fp32", "prefer": "datasheet"}])
def test_options(kw, specs, path):
    models = [get_model(m) for m in ("mamba2-2.7b", "jamba-v0.1", "llama-3-8b", "mamba-1.4b")]
    fast = sweep.sweep(models, specs, PHASES, BATCHES, LENGTHS, unsupported=[], **kw)
    general = sweep.sweep(models, specs, PHASES, BATCHES, LENGTHS, unsupported=[], force_general=True, **kw)
    assert not differences(fast, general), (kw, differences(fast, general))


def test_batched_work_equals_evaluate_plan():
    b, ln = np.array([[1.0], [8.0]]), np.array([[100.0, 4096.0]])
    grids = [phase_grid(p, b, ln) for p in PHASES]
    plans, grid_of = [], []
    for m in _models()[:8]:
        for i, p in enumerate(PHASES):
            plans.append(compile_plan(plan(m, p), "bf16"))
            grid_of.append(i)
    batch = evaluate_plans(plans, grids, grid_of, (2, 2))
    for k, cp in enumerate(plans):
        W, cb = evaluate_plan(cp, grids[grid_of[k]], (2, 2))
        assert np.array_equal(batch.plan_work(k), W)
        assert all(np.array_equal(getattr(batch.call_bytes(k), f), getattr(cb, f)) for f in ("live", "saved"))


def test_a_constraint_failure_is_the_general_paths_error(path):
    """A plan whose shapes break a kernel's constraint (here SSD's ``L % C == 0``, made stricter for the
    test: L below 1000): the same reason in ``unsupported`` on both paths, and the same error without it."""
    from ssmbench.analytic.ops.ssd.cost import SSD
    from ssmbench.analytic.registry import AnalyticError

    con = SSD.constraints[0]
    original = con.check
    object.__setattr__(con, "check", lambda x, y: np.asarray(x) < 1000)
    try:
        specs = [get_spec("h200-sxm")]
        models = [get_model("mamba2-2.7b"), get_model("llama-3-8b")]
        f, g = [], []
        fast = sweep.sweep(models, specs, PHASES, [1, 2], [128, 4096], unsupported=f)
        general = sweep.sweep(models, specs, PHASES, [1, 2], [128, 4096], unsupported=g, force_general=True)
        assert f and f == g and not differences(fast, general)
        assert set(fast["bottleneck"][fast["model"] == "mamba2-2.7b"]) >= {"unsupported"}
        with pytest.raises(AnalyticError) as e_fast:
            sweep.sweep(models, specs, PHASES, [1], [4096])
        with pytest.raises(AnalyticError) as e_general:
            sweep.sweep(models, specs, PHASES, [1], [4096], force_general=True)
        assert str(e_fast.value) == str(e_general.value)
    finally:
        object.__setattr__(con, "check", original)


def test_mutation_is_caught(monkeypatch, specs, path):
    """The comparison is not blind: the batched path with DRAM and cache labels swapped (a wrong tie
    rule) differs from the general path."""
    models = [get_model("llama-3-8b")]
    general = sweep.sweep(models, specs, PHASES, BATCHES, LENGTHS, force_general=True)
    original = grid_bound.standard_kinds

    def swapped(*a, **kw):
        kinds = original(*a, **kw)
        r = grid_bound.R
        return [grid_bound.RowKind(k.col, k.coef, np.where(k.resource == r["dram"], r["cache"], k.resource), k.tensor)
                for k in kinds]

    monkeypatch.setattr(grid_bound, "standard_kinds", swapped)
    fast = sweep.sweep(models, specs, PHASES, BATCHES, LENGTHS)
    assert "bottleneck" in differences(fast, general)
