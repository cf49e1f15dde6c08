"""The energy terms that charge operand delivery the FLOP and DRAM counts miss (issue #14): tensor FLOPs
issued as mma.sync on their own coefficient (falling back to the full-rate one where a spec does not know
it), bytes re-read from the device-wide cache at that cache's energy, the SSD kernels' re-reads, and
their recovery by the fit from synthetic windows."""

from __future__ import annotations

import numpy as np
import pytest
from ssmbench.analytic import energy as em
from ssmbench.analytic import execution
from ssmbench.analytic.cost import Cost
from ssmbench.analytic.roofline import COL, WORK_COLUMNS
from ssmbench.hwspecs import SpecError
from test_energy import _synthetic_cases, toy


def _work(**cols) -> np.ndarray:
    w = np.zeros(len(WORK_COLUMNS))
    for k, v in cols.items():
        w[COL[k.replace("__", ".")]] = v
    return w


def test_mma_sync_moves_tensor_flops_to_their_own_term_and_rereads_are_cache_bytes():
    w = _work(tensor__bf16=1e9, vector=5.0)
    c = em.counts(w, 0.0, 100.0, mma_sync=True, l2_reread=7.0)
    assert c["tensor.bf16"] == 0.0 and c["tensor_mma_sync.bf16"] == 1e9
    assert c["cache_reread"] == 7.0 and c["cache"] == 100.0 and c["dram"] == 100.0
    plain = em.counts(w, 0.0, 100.0)
    assert plain["tensor.bf16"] == 1e9 and plain["tensor_mma_sync.bf16"] == 0.0 and plain["cache_reread"] == 0.0


def test_warm_window_serves_a_call_from_l2_within_half_of_it():
    # a warm energy window: the next call of the op finds its compulsory bytes in L2 when they fit in half
    # of it (100 MB cache: 40 MB fit, 60 MB do not), a wider share than one kernel's within a call gets
    fits, spills = _work(dram__compulsory=40e6), _work(dram__compulsory=60e6)
    assert em.counts(fits, 0.0, 40e6, warm_l2=True, l2_capacity=100e6)["dram"] == 0.0
    assert em.counts(spills, 0.0, 60e6, warm_l2=True, l2_capacity=100e6)["dram"] == 60e6
    assert em.counts(fits, 0.0, 40e6, l2_capacity=100e6)["dram"] == 40e6  # cold: every byte crosses DRAM


def test_mma_sync_flops_fall_back_to_the_full_rate_energy_and_the_note_says_so():
    s = toy()  # bf16 0.5 pJ/FLOP, no tensor_mma_sync entry
    c = Cost(tensor={"bf16": 1e9})
    plain, mma = em.estimate(c, s), em.estimate(c, s, mma_sync=True)
    assert mma["dynamic_j"]["tensor_mma_sync.bf16"] == pytest.approx(1e9 * 0.5e-12)
    assert "charged at energy.per_flop.tensor.bf16" in mma["note"] and "charged at" not in plain["note"]
    assert mma["not_modelled"] == {}
    s2 = toy(per_flop__tensor_mma_sync={"bf16": {"value": "1.5 pJ/FLOP", "source": "a"}})
    e2 = em.estimate(c, s2, mma_sync=True)
    assert e2["dynamic_j"]["tensor_mma_sync.bf16"] == pytest.approx(1e9 * 1.5e-12)
    assert "energy.per_flop.tensor_mma_sync.bf16" in e2["parameters"] and "charged at" not in e2["note"]


def test_rereads_are_charged_at_the_cache_energy():
    s = toy()  # l2 2 pJ/B
    c = Cost(vector=1e6)
    e0, e1 = em.estimate(c, s), em.estimate(c, s, l2_reread=1e9)
    assert e1["dynamic_j"]["cache_reread"] == pytest.approx(1e9 * 2e-12)
    assert e1["energy_j"] - e0["energy_j"] == pytest.approx(1e9 * 2e-12 + 20.0 * (e1["time_s"] - e0["time_s"]))


def test_a_power_where_an_mma_sync_energy_is_expected_is_an_error():
    with pytest.raises(SpecError, match="tensor_mma_sync"):
        toy(per_flop__tensor_mma_sync={"bf16": {"value": "3 W", "source": "a"}})
    with pytest.raises(SpecError, match="tensor_mma_sync"):
        toy(per_flop__tensor_mma_sync={"value": "1 pJ/FLOP", "source": "a"})


def _ssd(**kw):
    dims = {"B": 2, "L": 1024, "H": 8, "P": 64, "N": 128, "C": 256, "G": 1}
    dims.update(kw)
    return dims


def test_ssd_rereads_follow_the_kernels_tiles():
    f = execution.ssd_chunked_l2_rereads
    d = _ssd()
    b, l_, h, p, n, c, g = (d[k] for k in "BLHPNCG")
    nc, nm, e, t = l_ // c, c // execution.SSD_TILE, 2, execution.SSD_TILE
    expected = (b * l_ * n * e * (h - g)                      # chunk_state: B per head
                + b * l_ * n * e * (h - g)                    # chunk_scan: C per program (one column block)
                + b * nc * (h - g) * c * (c + t) / 2 * 4      # CB up to the diagonal, per head
                + b * nc * h * n * p * e * (nm - 1)           # entering state per row block
                + b * l_ * h * p * e * ((nm + 1) / 2 - 1))    # x rows up to the diagonal
    assert f(d, "bf16", "fwd") == pytest.approx(expected)
    # one head per group and one tile per chunk: every operand is read once, nothing re-read
    assert f(_ssd(H=4, G=4, C=execution.SSD_TILE), "bf16", "fwd") == 0.0
    assert f(d, "bf16", "decode") == 0.0
    assert f(d, "bf16", "fwdbwd") == pytest.approx(f(d, "bf16", "fwd") + f(d, "bf16", "bwd"))
    assert f(_ssd(H=16), "bf16", "fwd") > f(d, "bf16", "fwd") and f(d, "fp32", "fwd") > f(d, "bf16", "fwd")
    assert execution.l2_reread_bytes("ssd", "chunked", d, "bf16", "fwd") == f(d, "bf16", "fwd")


def test_fit_recovers_the_mma_sync_and_reread_energies_from_synthetic_windows():
    from ssmbench.calibrate import energy as ce

    params = {"tensor.bf16": 1.0e-12, "tensor_mma_sync.bf16": 1.8e-12, "vector.fp32": 19e-12,
              "special_function": 120e-12, "dram": 33e-12, "cache": 84e-12, "cache_reread": 40e-12}
    cases = _synthetic_cases(params, 130.0, 700.0, n=80)
    f = ce.fit(cases, 700.0)
    assert f.static_w == pytest.approx(130.0, rel=1e-6)
    for t, v in params.items():
        assert f.per_term[t] == pytest.approx(v, rel=1e-6), t
    # fp16 mma.sync FLOPs share the bf16 coefficient; a term the cases leave out falls back
    assert f.value("tensor_mma_sync.fp16") == f.per_term["tensor_mma_sync.bf16"]
    without = ce.fit(_synthetic_cases({k: v for k, v in params.items() if k != "tensor_mma_sync.bf16"}, 130.0,
                                      700.0, n=80, mma=False), 700.0)
    assert "tensor_mma_sync.bf16" not in without.per_term
    assert without.value("tensor_mma_sync.bf16") == without.per_term["tensor.bf16"]


def test_probe_solves_the_mma_sync_energy_after_the_static_power():
    from ssmbench.measure._probe_energy import Window, solve

    static, mma = 125.0, 1.4e-12

    def w(name, counts, t):
        e = static * t + counts.get("tensor_mma_sync.bf16", 0.0) * mma
        return Window(name, e, t, e / t, counts, name)

    got = {k: v for k, v, _ in solve({"empty": w("empty", {}, 8e-6),
                                      "mma.bf16": w("mma.bf16", {"tensor_mma_sync.bf16": 4.5e12}, 8e-3)}, 700.0)}
    assert got["energy.per_flop.tensor_mma_sync.bf16"] == pytest.approx(mma, rel=1e-9)
    assert "energy.per_flop.tensor_mma_sync.fp16" not in got  # a window not measured gives no entry


def test_bounded_nnls_counts_a_bound_row_only_while_it_is_violated():
    from ssmbench.calibrate.energy import _bounded_nnls

    A = np.array([[1.0], [1.0]])
    # the bound (row 2: A x >= 3) is violated by the fit of row 1 alone (x = 1): both rows, x = (1 + 3) / 2
    assert _bounded_nnls(A, np.array([1.0, 3.0]), np.array([False, True]))[0] == pytest.approx(2.0)
    # a bound that holds (A x >= 0.5 at x = 1) leaves the fit of the other rows alone
    assert _bounded_nnls(A, np.array([1.0, 0.5]), np.array([False, True]))[0] == pytest.approx(1.0)


def test_power_limited_windows_bound_the_fit_from_below():
    """Windows at the limit whose work the windows below it do not show (here their vector FLOPs) are
    predicted at the limit, not under it: the fit raises that term until they reach it."""
    from ssmbench.calibrate import energy as ce

    static, limit = 130.0, 700.0
    cases = [c for c in _synthetic_cases({"dram": 100e-12, "cache": 50e-12}, static, limit, n=40)
             if c.avg_power_w < 0.95 * limit and c.counts["vector.fp32"] == 0.0]
    hot = []
    for i in range(6):  # 20 pJ vector FLOPs at 2 x the power limit's worth of work: measured at the limit
        t = 1e-3 * (i + 1)
        n = {term: 0.0 for term in em.TERMS}
        n["vector.fp32"] = 2 * (limit - static) * t / 20e-12
        hot.append(ce.EnergyCase(f"h{i}", "hot", f"h{i}", "f", None, limit * t, t, limit, t, n))
    f = ce.fit(cases + hot, limit)
    assert f.n_bound == 6 and f.static_w == pytest.approx(static, rel=1e-6)
    assert f.per_term["dram"] == pytest.approx(100e-12, rel=1e-6) and f.per_term["cache"] == pytest.approx(50e-12, rel=1e-6)
    X = np.array([c.row() for c in hot])
    assert f.predict(X, X[:, 0]) == pytest.approx([limit * c.time_s for c in hot], rel=1e-6)
    assert f.per_term["vector.fp32"] > 0.0
