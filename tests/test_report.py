"""ssmbench report: the matching rule, the intervals, the verdict rule, the crossover, and the command
on the stored H200 data (HTML and Markdown, bad input). The browser checks are in
test_report_browser.py."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from ssmbench.cli import main
from ssmbench.figures.report import stats
from ssmbench.figures.report.build import answer, build
from ssmbench.figures.report.pairs import _WIDTH, graph_timed
from ssmbench.figures.report.regimes import (GO, INCONCLUSIVE, NO_GO, Rule, crossing, point_verdict,
                                             regime_verdict)
from ssmbench.hwspecs import get_spec

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "results" / "h200"
PROFILE = RESULTS / "2026-12-02" / "calibration" / "profile.json"


@pytest.fixture(scope="module")
def rep():
    from ssmbench.calibrate.profile import read_profile
    return build([RESULTS], get_spec("h200-sxm"), read_profile(PROFILE))


def test_within_run_standard_error_of_the_median():
    t = {"median": 2.0, "p20": 1.0, "p80": 3.0, "n": 100}
    sigma = 2.0 / (2 * stats.Z_P80)
    assert stats.within_se_log(t) == pytest.approx(math.sqrt(math.pi / 2) * sigma / 10 / 2.0)
    assert stats.within_se_log({"median": 1.0}) == 0.0


def test_ratio_interval_is_symmetric_on_the_log_scale():
    r = stats.ratio(4.0, 2.0, 0.01, 1.96)
    assert r.value == 2.0
    assert r.lo * r.hi == pytest.approx(4.0)
    assert r.hi / r.value == pytest.approx(math.exp(1.96 * 0.1))
    assert stats.ratio(4.0, 2.0, None, 1.96).lo is None
    assert stats.z_of(0.95) == pytest.approx(1.95996, rel=1e-4)


def test_time_ratio_adds_run_to_run_variance():
    a = {"median": 2.0, "p20": 2.0, "p80": 2.0, "n": 10}
    none = stats.RunSpread(None, 0, None, 0, "")
    some = stats.RunSpread(0.05, 4, None, 0, "")
    assert stats.time_ratio(a, a, none, 1.96).lo == pytest.approx(1.0)
    r = stats.time_ratio(a, a, some, 1.96)
    assert r.hi == pytest.approx(math.exp(1.96 * math.sqrt(2) * 0.05))


@pytest.mark.parametrize("time, energy, want", [
    ((1.5, 1.3, 1.7), (2.0, 1.8, 2.2), GO),
    ((1.5, 1.3, 1.7), (1.1, 1.0, 1.15), NO_GO),      # energy's upper end below 1.2
    ((0.8, 0.7, 0.9), None, NO_GO),                  # time fails: no energy needed to say no
    ((1.5, 1.3, 1.7), None, INCONCLUSIVE),           # energy not measured
    ((1.25, 1.1, 1.4), (2.0, 1.8, 2.2), INCONCLUSIVE),  # the time interval straddles 1.2
])
def test_point_verdict(time, energy, want):
    t = stats.Ratio(*time)
    e = stats.Ratio(*energy) if energy else None
    assert point_verdict(t, e, Rule(1.2, 1.2, 0.95))[0] == want


def test_crossing_interpolates_log_log():
    # ratio 0.5 at 1000, 2 at 4000: log r linear in log L crosses 1 at the geometric mean, 2000
    assert crossing([1000, 4000], [0.5, 2.0])["length"] == pytest.approx(2000)
    assert crossing([1000, 4000], [2.0, 3.0])["length"] is None
    assert "every length" in crossing([1000, 4000], [2.0, 3.0])["result"]
    assert "not faster" in crossing([1000, 4000], [0.5, 0.9])["result"]
    # the last crossing counts: faster, slower, faster
    assert crossing([1, 2, 4, 8], [2, 0.5, 0.5, 2])["length"] == pytest.approx(math.sqrt(32))


def test_regime_verdict_go_from():
    class P:
        def __init__(self, n, v):
            self.verdict = v
            self.point = type("pt", (), {"length": n})()

    class S:
        def __init__(self, pts):
            self.points = pts
    v, _, _ = regime_verdict([S([P(1024, NO_GO), P(8192, GO)]), S([P(2048, NO_GO), P(4096, GO)])])
    assert v == "GO FROM 8,192"
    assert regime_verdict([S([P(1024, GO), P(8192, NO_GO)])])[0] == "MIXED"
    assert regime_verdict([S([P(1024, GO)])])[0] == GO
    # below L a point may be inconclusive (an interval straddling the threshold); from L on all are GO
    assert regime_verdict([S([P(1024, INCONCLUSIVE), P(4096, GO)]), S([P(1024, NO_GO), P(8192, GO)])])[0] == \
        "GO FROM 8,192"
    assert regime_verdict([S([P(1024, GO), P(4096, INCONCLUSIVE)])])[0] == "MIXED"
    # a series with no GO point at a length >= L breaks the rule; one whose points all lie below L does not
    assert regime_verdict([S([P(2048, NO_GO), P(32768, GO)]), S([P(2048, NO_GO), P(32768, NO_GO)])])[0] == "MIXED"
    assert regime_verdict([S([P(2048, NO_GO), P(32768, GO)]), S([P(2048, NO_GO), P(8192, NO_GO)])])[0] == \
        "GO FROM 32,768"


def test_pairs_follow_the_rule(rep):
    assert rep.points, "the stored H200 data hold matched pairs"
    for p in rep.points:
        s, b = p.point.ssm, p.point.baseline
        assert s["dtype"] == b["dtype"] and s["dims"]["B"] == b["dims"]["B"] == p.point.batch
        assert _WIDTH[s["op"]](s["dims"]) == _WIDTH[b["op"]](b["dims"]) == p.point.width
        assert graph_timed(s) == graph_timed(b)
        assert b["dims"]["G"] == rep.kv_heads
        # decode: the KV-cache length S; otherwise the sequence length L (op-level attention with S = L;
        # the attention block has no S)
        length = b["dims"]["S"] if b["mode"] == "decode" else b["dims"]["L"]
        assert b["mode"] == "decode" or b["dims"].get("S", length) == length
        assert length == p.point.length and (s["mode"] == "decode" or s["dims"]["L"] == length)
        # the strongest baseline: no alternative at the point is faster
        assert all(a.time_s["median"] >= b.time_s["median"] for a in p.point.alternatives)
        assert p.realised.value == pytest.approx(p.time.value / p.flop_ratio)
        assert p.time.lo < p.time.value < p.time.hi


def test_answer_states_the_numbers(rep):
    text = answer(rep)
    assert rep.matched.device in text and "realised fraction" in text
    assert str(len(rep.points)) in text


def _report(tmp_path, *extra) -> tuple[int, Path]:
    out = tmp_path / "report.md"
    code = main(["report", "--results", str(RESULTS), "--out", str(out), *extra])
    return code, out


def test_markdown_report_writes_its_figures(tmp_path, capsys):
    code, out = _report(tmp_path)
    assert code == 0
    text = out.read_text()
    assert "## Verdict per regime" in text and "## Caveats" in text
    figs = sorted((tmp_path / "report_figures").glob("*.png"))
    assert any(f.name == "headline.png" for f in figs)
    for f in figs:
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"report_figures/{f.name}" in text
    assert "matched points" in capsys.readouterr().err


def test_predicted_energy_columns_appear_with_a_predictor(tmp_path):
    from ssmbench.figures.report.render import to_html

    def predictor(case, spec, graph):
        return {"energy_j": 1.0, "label": "energy estimate", "source": "test"}
    r = build([RESULTS], get_spec("h200-sxm"), energy=predictor)
    assert r.predicts_energy
    assert "Predicted energy per call" in to_html(r)


@pytest.mark.parametrize("argv, says", [
    (["--results", "no/such/folder"], "no such folder"),
    (["--results", str(RESULTS), "--min-speedup", "0"], "--min-speedup"),
    (["--results", str(RESULTS), "--confidence", "1.5"], "--confidence"),
    (["--results", str(RESULTS), "--hw", "no-such-spec"], "no-such-spec"),
])
def test_bad_input_exits_2(tmp_path, capsys, argv, says):
    out = tmp_path / "r.html"
    out.write_text("keep me")
    assert main(["report", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert out.read_text() == "keep me"


def test_unwritable_out_and_unknown_suffix_exit_2(tmp_path, capsys):
    assert main(["report", "--results", str(RESULTS), "--out", str(tmp_path / "missing" / "r.html")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["report", "--results", str(RESULTS), "--out", str(tmp_path / "r.txt")]) == 2
    assert "--format" in capsys.readouterr().err


def test_no_matching_pairs_exit_2(tmp_path, capsys):
    folder = tmp_path / "res"
    folder.mkdir()
    for f in (RESULTS / "2026-12-02" / "calibration-torchref").glob("run-*.json"):
        shutil.copy(f, folder)
    assert main(["report", "--results", str(folder), "--out", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert "no matched SSM / attention pairs" in err
    assert not (tmp_path / "r.html").exists()


def test_cli_report_carries_the_energy_models_predictions(tmp_path):
    """``ssmbench report`` passes the energy model's predictor: predicted energy columns appear, with the
    label of the spec's parameters (the H200's are probe-measured: analytic estimate)."""
    from ssmbench.analytic.energy import LABEL
    from ssmbench.calibrate.energy_predict import predict_case_energy
    code, out = _report(tmp_path)
    assert code == 0
    assert "Predicted energy per call" in out.read_text()
    case = build([RESULTS], get_spec("h200-sxm")).points[0].ssm.record.case
    e = predict_case_energy(case, get_spec("h200-sxm"), False)
    assert e["energy_j"] > 0 and e["label"] == LABEL and "h200-sxm" in e["source"]
    assert predict_case_energy(case, get_spec("t4"), False) is None  # no energy section: no prediction
