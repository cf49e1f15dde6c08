"""The compiled per-call max (workloads/grid_kernel.py) against the numpy one (``grid_bound.project`` with
``SSMBENCH_NUMBA=0``) on made-up rows: several tensor rows per call (added into the first), a signed
correction row added into another (the state-on-chip variant's), ceilings of unknown value (coefficient
0: NaN where the call has work and no bound), exact ties between resources, and per-call values; plus
``SpecTable.take`` against ``SpecTable.of``."""

import numpy as np
import pytest
from ssmbench.analytic.roofline import SpecTable
from ssmbench.analytic.workloads import grid_bound as gb
from ssmbench.analytic.workloads import grid_kernel
from ssmbench.hwspecs import load_all


def _case(seed: int):
    rng = np.random.default_rng(seed)
    V, P, n_calls = 5, 7, 40
    n_cols = 8
    work = rng.uniform(0, 1e12, size=(n_cols, n_calls, P)) * (rng.random((n_cols, n_calls, P)) < 0.8)
    work[:, :5] = 0.0  # calls without work
    work[3, 5:10] = work[4, 5:10]  # equal work in two columns ...
    coef = [rng.uniform(1e-15, 1e-12, V) for _ in range(n_cols)]
    coef[3] = coef[4].copy()  # ... at equal coefficients: exact ties
    coef[5][1] = 0.0  # an unknown ceiling on spec 1
    res = [np.full(V, r) for r in (0, 0, 1, 2, 3, 4, 3, 5)]
    kinds = [gb.RowKind(0, coef[0], res[0], tensor=True), gb.RowKind(1, coef[1], res[1], tensor=True),
             gb.RowKind(2, coef[2], res[2]), gb.RowKind(3, coef[3], res[3]), gb.RowKind(4, coef[4], res[4]),
             gb.RowKind(5, coef[5], res[5]),
             gb.RowKind(6, -coef[6], res[6], add_to=3),  # a signed correction into the kind-3 row
             gb.RowKind(7, coef[7], res[7])]
    work[6] = np.minimum(work[6], work[3])  # the correction never exceeds what it corrects
    work[:, 10:14] = 0.0
    work[5, 10:14] = 1e9  # work at the unknown ceiling alone: no bound on spec 1 (NaN)
    nonzero = work.any(axis=2)
    order = rng.permutation(n_calls)
    rows = gb.make_rows(kinds, nonzero, order)
    plan_of = np.sort(rng.integers(0, 6, n_calls))
    some = work[:, order].any(axis=0)
    return work, rows, plan_of, some


@pytest.mark.skipif(not grid_kernel.AVAILABLE, reason="numba is not installed (the optional 'fast' extra)")
@pytest.mark.parametrize("seed", range(6))
def test_compiled_loop_equals_numpy(seed, monkeypatch):
    work, rows, plan_of, some = _case(seed)
    assert len(rows.extra) and (rows.coef == 0).any()
    got = {}
    for flag in ("0", "1"):
        monkeypatch.setenv(grid_kernel.ENV, flag)
        got[flag] = gb.project(work, rows, plan_of, 6, values=(0, 1, 4), some=some)
    a, b = got["0"], got["1"]
    assert b.first is not None and a.first is None  # each path was taken
    nan = np.isnan(a.time)
    assert nan.any() and (nan == np.isnan(b.time)).all()
    np.testing.assert_allclose(b.time[~nan], a.time[~nan], rtol=1e-12, atol=0)
    np.testing.assert_allclose(b.shares, a.shares, rtol=1e-12, atol=0)
    assert (a.bottleneck() == b.bottleneck()).all()
    for v in (0, 1, 4):  # the same floats, or less the three low bits that carry the label (grid_bound)
        np.testing.assert_allclose(b.values[v], a.values[v], rtol=2e-15, atol=0)  # NaN where NaN
    assert any(np.isnan(a.values[v]).any() for v in (0, 1, 4))


def test_spec_table_take_equals_of():
    specs = list(load_all().values())
    table = SpecTable.of(specs)
    idx = [len(specs) - 1, 0, 2]
    sub, ref = table.take(idx), SpecTable.of([specs[i] for i in idx])
    assert [s.spec.id for s in sub.specs] == [s.spec.id for s in ref.specs]
    for name in ("inv_tensor", "known_tensor", "inv_vector", "inv_sfu", "inv_dram", "inv_cache", "on_chip_bytes",
                 "dram_bytes"):
        np.testing.assert_array_equal(getattr(sub, name), getattr(ref, name))
    for name in ("launch_s", "known"):
        assert getattr(sub, name).keys() == getattr(ref, name).keys()
        for k in getattr(ref, name):
            np.testing.assert_array_equal(getattr(sub, name)[k], getattr(ref, name)[k])
