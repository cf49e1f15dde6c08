"""The report's whole-model level (figures/report/wholemodel.py): which models pair, and why none do."""

from pathlib import Path

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


def test_no_model_runs(tmp_path):
    assert "no model-run files" in whole_models([tmp_path]).why_none
