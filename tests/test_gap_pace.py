"""The gap report's split of held-out errors by what sets a case's pace (calibrate/gap._by_pace): every
cross-validated case lands in exactly one of GPU-bound and host-bound, by its achievable bottleneck, and the
target is judged on the GPU-bound part only."""

from __future__ import annotations

import pytest
from ssmbench.calibrate.gap import _by_pace
from ssmbench.calibrate.report import _by_pace_md


class _Profile:
    data = {"host_sessions": {"sigma_log": 0.37, "n_cases": 100, "n_sessions": 12, "source": "measured: test"}}


def _row(family: str, bottleneck: str, err: float, covered: bool = True, kind: str = "cross-validated (leave-shape-out)"):
    return {"family": family, "achievable_bottleneck": bottleneck, "heldout_ape_pct": err, "covered": covered,
            "error_kind": kind}


def test_cases_split_by_their_achievable_bottleneck_and_the_target_judges_the_gpu_part():
    rows = ([_row("ssd", "dram", e, covered=i < 8) for i, e in enumerate([1, 2, 2, 3, 3, 4, 4, 5, 5, 6])]
            + [_row("ssd", "host/launch", e) for e in (10, 40, 80)]
            + [_row("gemm", "tensor", e) for e in (1, 30, 30, 30)]
            + [_row("gemm", "host/launch", 5, kind="validation (results not used in the fit)")])
    bp = _by_pace(rows, _Profile())
    fams = {f["family"]: f for f in bp["families"]}
    assert (fams["ssd"]["gpu"]["n"], fams["ssd"]["host"]["n"]) == (10, 3)
    assert fams["ssd"]["gpu"]["median_ape_pct"] == pytest.approx(3.5)
    assert fams["ssd"]["host"]["median_ape_pct"] == pytest.approx(40)
    assert fams["ssd"]["gpu_meets_target"]                # 3.5% / 5.1% / 80% coverage: the host tail does not count
    assert not fams["gemm"]["gpu_meets_target"]           # median 30% > 5%
    assert fams["gemm"]["host"]["n"] == 0                 # a validation error is not a held-out one
    assert bp["all"]["gpu"]["n"] + bp["all"]["host"]["n"] == 17
    md = "\n".join(_by_pace_md(bp, 80))
    assert "by what sets the pace" in md and "log sd of 0.37" in md and "| ssd | 10 |" in md


def test_coverage_outside_the_band_fails_the_target():
    rows = [_row("norm", "dram", 1.0, covered=True) for _ in range(10)]   # 100% coverage: intervals too wide
    assert not _by_pace(rows, _Profile())["families"][0]["gpu_meets_target"]


def _group(rng, n_gpu: int, n_host: int, sd_gpu: float, sd_host: float, start: int = 0) -> dict:
    import math

    held = []
    for i, (pace, sd) in enumerate([("gpu", sd_gpu)] * n_gpu + [("host", sd_host)] * n_host):
        pred = 1e-4
        held.append({"dims": {"B": start + i}, "measured_s": pred * math.exp(rng.normal(0, sd)), "heldout_pred_s": pred,
                     "pace": pace, "covered": None})
    return {"status": "calibrated", "heldout": held, "cv": {"coverage": None, "n_covered": 0}}


def test_intervals_follow_the_pace_of_the_case_and_keep_their_level():
    import numpy as np
    from ssmbench.calibrate.crossval import conformal
    from ssmbench.calibrate.pace import normalise_by_pace

    rng = np.random.default_rng(0)
    groups = [_group(rng, 12, 12, 0.02, 0.35, start=100 * k) for k in range(8)] + [{"status": "pooled"}]
    r_mixed = np.array([np.log(h["measured_s"] / h["heldout_pred_s"]) for h in groups[0]["heldout"]])
    plain = conformal(r_mixed, 0.8)
    gpu_r = r_mixed[:12]
    assert np.mean((gpu_r >= plain.log_lo) & (gpu_r <= plain.log_hi)) == 1.0   # one interval over-covers the GPU part
    scales = normalise_by_pace(groups, 0.8)
    assert scales["host"]["scale"] > 8 * scales["gpu"]["scale"]
    for g in groups[:8]:  # 12 residuals of each pace: each group's own spreads set its intervals' widths
        ib, own = g["interval_by_pace"], g["pace_spreads"]
        r = np.array([np.log(h["measured_s"] / h["heldout_pred_s"]) for h in g["heldout"]])
        assert own == {"gpu": pytest.approx(np.median(np.abs(r[:12]))), "host": pytest.approx(np.median(np.abs(r[12:])))}
        z = r / np.array([own["gpu"]] * 12 + [own["host"]] * 12)
        for pace, part in (("gpu", slice(0, 12)), ("host", slice(12, 24))):  # each pace ranks its own (12 shapes)
            iv = conformal(z[part], 0.8)
            want = (iv.log_lo * own[pace], iv.log_hi * own[pace])
            assert (ib[pace]["log_lo"], ib[pace]["log_hi"]) == pytest.approx(want)
    held = [h for g in groups[:8] for h in g["heldout"]]
    for pace in ("gpu", "host"):
        cov = np.mean([h["covered"] for h in held if h["pace"] == pace])
        assert 0.68 <= cov <= 0.92, (pace, cov)                       # each pace near the 80% level
    assert "interval_by_pace" not in groups[-1]                        # a pooled group is left as it is


def test_too_few_residuals_of_a_pace_leave_the_groups_alone():
    import numpy as np
    from ssmbench.calibrate.pace import MIN_PACE_RESIDUALS, normalise_by_pace

    rng = np.random.default_rng(1)
    g = _group(rng, 30, MIN_PACE_RESIDUALS - 1, 0.02, 0.3)
    assert normalise_by_pace([g], 0.8) is None and "interval_by_pace" not in g


def test_a_group_with_few_residuals_of_a_pace_takes_the_pooled_spread_for_it():
    import numpy as np
    from ssmbench.calibrate.pace import MIN_GROUP_PACE_RESIDUALS, normalise_by_pace

    rng = np.random.default_rng(2)
    groups = [_group(rng, 12, 12, 0.02, 0.35, start=100 * k) for k in range(4)]
    few = _group(rng, 12, MIN_GROUP_PACE_RESIDUALS - 1, 0.02, 0.35, start=1000)
    scales = normalise_by_pace(groups + [few], 0.8)
    r = np.array([np.log(h["measured_s"] / h["heldout_pred_s"]) for h in few["heldout"]])
    assert few["pace_spreads"] == {"gpu": pytest.approx(np.median(np.abs(r[:12]))), "host": scales["host"]["scale"]}


def test_a_group_of_few_shapes_ranks_with_its_family():
    """A group with fewer than MIN_OWN_RANK_SHAPES shapes of a pace takes that pace's interval from its own and its
    family's other groups' normalised residuals of the pace (each shape weighing 1), and where those are still
    fewer, from every other group's; a group with enough ranks its own."""
    import numpy as np
    from ssmbench.calibrate.pace import MIN_OWN_RANK_SHAPES, normalise_by_pace

    rng = np.random.default_rng(3)
    small = [_group(rng, 3, 3, 0.02, 0.3, start=100 * k) for k in range(3)]   # 6 shapes each
    large = _group(rng, 12, 12, 0.02, 0.3, start=1000)                        # 24 shapes
    lone = _group(rng, 3, 3, 0.02, 0.3, start=2000)
    for g in small + [large]:
        g["key"] = {"family": "f"}
    lone["key"] = {"family": "g"}
    assert 6 < MIN_OWN_RANK_SHAPES <= 24
    normalise_by_pace(small + [large, lone], 0.8)
    assert [g["interval_by_pace"]["gpu"]["n_residuals"] for g in small] == [3 + 3 + 3 + 12] * 3
    assert large["interval_by_pace"]["gpu"]["n_residuals"] == 12
    assert lone["interval_by_pace"]["gpu"]["n_residuals"] == 3 + 3 * 3 + 12   # no family: every other group's


def test_each_pace_keeps_the_level_where_their_tails_differ():
    """Host-bound residuals with a heavy tail (a slow host session now and then) and GPU-bound ones with a light
    one: ranked together, the GPU-bound shapes would fall inside their intervals far more often than the level
    says and the host-bound ones less often; ranked per pace, each keeps about the level."""
    import math

    import numpy as np
    from ssmbench.calibrate.pace import normalise_by_pace

    rng = np.random.default_rng(4)
    groups = []
    for k in range(10):
        held = []
        for i in range(80):  # 40 shapes of each pace: ranks fine enough to tell 80 % from 88 %
            pace = "gpu" if i < 40 else "host"
            sd = 0.02 if pace == "gpu" else (1.0 if rng.random() < 0.3 else 0.04)
            held.append({"dims": {"B": 100 * k + i}, "measured_s": 1e-4 * math.exp(rng.normal(0, sd)),
                         "heldout_pred_s": 1e-4, "pace": pace, "covered": None})
        groups.append({"status": "calibrated", "heldout": held, "cv": {"coverage": None, "n_covered": 0},
                       "key": {"family": "f"}})
    normalise_by_pace(groups, 0.8)
    held = [h for g in groups for h in g["heldout"]]
    for pace in ("gpu", "host"):
        cov = np.mean([h["covered"] for h in held if h["pace"] == pace])
        assert 0.75 <= cov <= 0.85, (pace, cov)   # one set of ranks over both: 88 % and 72 %


def test_a_shortfall_names_the_achievable_bottleneck_beside_the_bounds():
    """The worst held-out cases of a family are labelled by what the achievable estimate says sets their time
    (the Mamba-1 scan: the L2 intake of its chain), with the datasheet bound's label beside it where it differs."""
    from ssmbench.calibrate.gap import _shortfall

    row = {"op": "mamba1_scan", "impl": "fused", "mode": "fwd", "dims": {"B": 1, "L": 8192}, "heldout_ape_pct": 23.0,
           "roofline_pct": 22.0, "bottleneck": "special_function", "achievable_bottleneck": "l2"}
    stats = {"median_ape_pct": 9.0, "p90_ape_pct": 23.0, "coverage": 0.8, "n_covered": 4, "n": 5}
    text = " ".join(_shortfall(stats, [], [row]))
    assert "bottleneck l2 (achievable estimate; the bound's: special_function)" in text
    same = dict(row, achievable_bottleneck="special_function")
    assert "bottleneck special_function)" in " ".join(_shortfall(stats, [], [same]))
