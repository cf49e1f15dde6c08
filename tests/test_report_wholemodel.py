"""The report's whole-model level (figures/report/wholemodel.py): which models pair, and why none do."""

from pathlib import Path

import pytest
from ssmbench.figures.report.wholemodel import (
    ATTENTION,
    HYBRID,
    SSM,
    ModelInfo,
    _info,
    _matched,
    whole_models,
)

MODELS = Path(__file__).resolve().parent.parent / "results" / "h200" / "2026-12-03" / "models"


def test_kinds_from_the_catalogue():
    assert _info({"model": "mamba2-130m", "params": 1}).kind == SSM
    assert _info({"model": "qwen2.5-0.5b", "params": 1}).kind == ATTENTION
    assert _info({"model": "mamba2-attn-k4-130m", "params": 1}).kind == HYBRID
    assert _info({"model": "no-such-model", "params": 1}) is None


def test_match_needs_width_and_size():
    a = ModelInfo("a", SSM, 768, 129_000_000)
    assert _matched(a, ModelInfo("b", ATTENTION, 768, 150_000_000))
    assert not _matched(a, ModelInfo("b", ATTENTION, 896, 129_000_000))   # another width
    assert not _matched(a, ModelInfo("b", ATTENTION, 768, 494_000_000))   # 3.8x the parameters
    assert not _matched(a, ModelInfo("b", ATTENTION, 768, None))


def test_stored_h200_models_have_no_matched_pair():
    w = whole_models([MODELS])
    assert w.files and not w.pairs
    kinds = {m.model: m.kind for m in w.models}
    assert kinds["mamba2-130m"] == SSM and kinds["qwen2.5-0.5b"] == ATTENTION
    assert "qwen2.5-0.5b (attention, d_model 896, 494M parameters)" in w.why_none


def test_the_stored_whole_model_pair_run_pairs_at_every_point():
    """models-b measured Transformer++ 125M and Mamba-2 130M at the same 13 (phase, runtime, batch, length)
    points (measure/suites/models/models_h200_b.yaml), and Mamba-1 130M (same width, 129M parameters) at
    three of them: 16 pairs, all against Transformer++."""
    w = whole_models([MODELS.with_name("models-b")])
    pairs = {(p.ssm["model"], p.attention["model"]) for p in w.pairs}
    assert len(w.pairs) == 16 and sum(p.ssm["model"] == "mamba2-130m" for p in w.pairs) == 13
    assert pairs == {("mamba2-130m", "transformerpp-125m"), ("mamba-130m", "transformerpp-125m")}
    assert {p.phase for p in w.pairs} == {"prefill", "decode", "train"}
    assert {p.runtime for p in w.pairs} == {"mamba-ssm", "cuda-graph"}


def test_no_model_runs(tmp_path):
    assert "no model-run files" in whole_models([tmp_path]).why_none


# ---- a matched whole-model pair, rendered in full (synthetic model-run records, built here) -------------

def _model_runs(folder, times: dict, repeat: float | None = None):
    """One model-run file: {(model, phase, runtime, batch, seqlen): median s}; energy = 400 W x time.
    ``repeat``: a second file of the same cases, every time scaled by it (a run-to-run repeat)."""
    from ssmbench.measure.models.records import ModelRunWriter, new_record

    params = {"mamba2-130m": 128_800_000, "transformerpp-125m": 123_600_000}
    for scale in (1.0,) + ((repeat,) if repeat else ()):
        w = ModelRunWriter(folder / f"run{scale}", {"device": {"name": "NVIDIA H200"}})
        for (model, phase, runtime, b, n), t in times.items():
            r = new_record({"model": model, "runner": "mamba_ssm"}, phase, runtime, b, n, "bf16")
            t = t * scale
            r.update(status="ok", params=params[model],
                     time_s={"median": t, "p20": t * 0.99, "p80": t * 1.01, "n": 50},
                     energy={"joules_per_call": 400.0 * t})
            w.add(r)
        w.finish()


PAIR_TIMES = {  # prefill: the SSM 2x slower at 2K, 2x faster at 8K; decode (graph): 4x faster at 32K
    ("mamba2-130m", "prefill", "mamba-ssm", 1, 2048): 2e-3, ("transformerpp-125m", "prefill", "mamba-ssm", 1, 2048): 1e-3,
    ("mamba2-130m", "prefill", "mamba-ssm", 1, 8192): 2e-3, ("transformerpp-125m", "prefill", "mamba-ssm", 1, 8192): 4e-3,
    ("mamba2-130m", "decode", "cuda-graph", 1, 32768): 1e-4,
    ("transformerpp-125m", "decode", "cuda-graph", 1, 32768): 4e-4,
}


def _pair_report(tmp_path):
    from ssmbench.figures.report.build import build
    from ssmbench.hwspecs import get_spec
    from test_report_strongest import _folder, _records

    ops = _folder(tmp_path / "ops", _records())
    _model_runs(tmp_path / "models", PAIR_TIMES, repeat=1.02)
    return build([ops, tmp_path / "models"], get_spec("h200-sxm"))


def test_a_model_pair_has_every_number_and_a_verdict(tmp_path):
    from ssmbench.figures.report.regimes import GO, NO_GO, crossing

    from ssmbench import api

    rep = _pair_report(tmp_path / "a")
    res = rep.whole_results
    assert res is not None and res.spread_source == "model" and res.spread.energy is not None
    assert [(r.phase, r.runtime) for r in res.regimes] == [("prefill", "mamba-ssm"), ("decode", "cuda-graph")]
    pre, dec = res.regimes
    pts = {p.pair.seqlen: p for p in pre.points}
    for n, p in pts.items():  # the FLOP ratio of the two models' analytic plans (predict's count, independently)
        f = {m: api.energy(m, hw="h200-sxm", phase="prefill", batch=1, seqlen=n)["flops"]
             for m in ("mamba2-130m", "transformerpp-125m")}
        assert p.flop_ratio == pytest.approx(f["transformerpp-125m"] / f["mamba2-130m"], rel=1e-6)
        assert p.realised.value == pytest.approx(p.time.value / p.flop_ratio)
        assert p.time.lo < p.time.value < p.time.hi and p.energy.lo < p.energy.value < p.energy.hi
    assert pts[2048].time.value == pytest.approx(0.5) and pts[2048].verdict == NO_GO
    assert pts[8192].time.value == pytest.approx(2.0) and pts[8192].verdict == GO
    assert pre.verdict == "GO FROM 8,192"
    cross = pre.series[0].crossover
    assert cross["measured"]["length"] == pytest.approx(crossing([2048, 8192], [0.5, 2.0])["length"])
    assert cross["measured"]["length"] == pytest.approx(4096)
    assert cross["bound"]["label"] == "analytic bound"
    # decode: one length, no measured crossover; the bound's crossover is still there
    assert dec.verdict == GO and "one length measured" in dec.series[0].crossover["measured"]["result"]
    assert dec.points[0].flop_ratio > 1


def test_a_model_pair_renders_in_full(tmp_path):
    from ssmbench.figures.report.build import answer
    from ssmbench.figures.report.render import to_html, to_markdown

    rep = _pair_report(tmp_path / "b")
    html = to_html(rep)
    for text in ('id="whole-model-verdicts"', 'id="whole-model-points"', "transformerpp-125m (123.6M parameters)",
                 "FLOP ratio (analytic count, x)", "GO FROM 8,192", "repeated model cases"):
        assert text in html, text
    assert "Whole-model matched pairs were not measured" not in html
    md, _ = to_markdown(rep, tmp_path / "figs", "figs/")
    assert "| prefill | mamba-ssm | 1 | 8,192 |" in md
    assert "Whole models (mamba2-130m vs transformerpp-125m" in answer(rep)


def test_without_repeats_the_op_spread_gives_the_intervals(tmp_path):
    from ssmbench.figures.report.build import build
    from ssmbench.hwspecs import get_spec
    from test_report_strongest import _folder, _records

    _model_runs(tmp_path / "models", PAIR_TIMES)
    rep = build([_folder(tmp_path / "ops", _records()), tmp_path / "models"], get_spec("h200-sxm"))
    assert rep.whole_results.spread_source == "op" and rep.whole_results.spread is rep.spread
