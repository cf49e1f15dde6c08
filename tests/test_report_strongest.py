"""The report compares the strongest of both sides (figures/report/pairs.py): at each point the fastest
SSM backend of the problem (any implementation, any chunk length) against the fastest attention
backend, with the slower ones listed and the winners named. Synthetic records, built here."""

from __future__ import annotations

from ssmbench.analytic.cases import Case
from ssmbench.figures.report.build import build
from ssmbench.figures.report.pairs import match
from ssmbench.figures.report.render import to_html, to_markdown
from ssmbench.hwspecs import get_spec
from ssmbench.measure.results import ResultWriter

H, P, B = 32, 128, 1
SSM_DIMS = {"B": B, "H": H, "P": P, "Pv": P}


def _rec(op, impl, backend, dims, mode, median_s, graph=False):
    c = Case(op, impl, backend, dims, "bf16", mode)
    return {**c.to_dict(), "key": c.key(), "status": "ok", "reason": None,
            "time_s": {"median": median_s, "p20": median_s * 0.99, "p80": median_s * 1.01, "n": 200},
            "timing": {"target_s": 0.3, "warmup_calls": 3, "warmup_s": 0.1, "min_repeats": 5, "max_repeats": 2000,
                       "flush_l2": True, "cuda_graph": graph},
            "energy": {"joules_per_call": median_s * 500.0}}


def _att(backend, length, median_s, mode="fwd", graph=False):
    dims = {"B": B, "H": H, "G": 8, "P": P, "S": length} | ({"L": 1} if mode == "decode" else {"L": length})
    return _rec("attention_causal", "fa2", backend, dims, mode, median_s, graph)


def _folder(tmp_path, records):
    w = ResultWriter(tmp_path, {"device": {"type": "cuda", "name": "NVIDIA H200"}}, {})
    for r in records:
        w.add(r)
    w.finish()
    return tmp_path


def _records():
    # prefill: the chunked kernel wins at 16K, the recurrent one at 4K; cuDNN wins at 4K, flash at 16K
    chunked = {**SSM_DIMS, "C": 64}
    recs = [_rec("gated_delta_rule", "chunked", "fla.chunk_gated_delta_rule", {**chunked, "L": 4096}, "fwd", 9e-4),
            _rec("gated_delta_rule", "recurrent", "fla.fused_recurrent_gated_delta_rule", {**SSM_DIMS, "L": 4096},
                 "fwd", 5e-4),
            _rec("gated_delta_rule", "chunked", "fla.chunk_gated_delta_rule", {**chunked, "L": 16384}, "fwd", 1e-3),
            _rec("gated_delta_rule", "recurrent", "fla.fused_recurrent_gated_delta_rule", {**SSM_DIMS, "L": 16384},
                 "fwd", 2e-3),
            _att("torch.sdpa.cudnn", 4096, 2.6e-4), _att("torch.sdpa.flash", 4096, 3.0e-4),
            _att("torch.sdpa.cudnn", 16384, 4.0e-3), _att("torch.sdpa.flash", 16384, 3.7e-3)]
    # decode (graph replays): one context-free SSM step against two contexts; the slower SSM record is eager
    recs += [_rec("gated_delta_rule", "recurrent", "fla.fused_recurrent_gated_delta_rule", {**SSM_DIMS, "L": 1},
                  "decode", 7e-6, graph=True),
             _att("torch.sdpa.cudnn", 1024, 1.2e-5, "decode", True),
             _att("torch.sdpa.cudnn", 8192, 2.2e-5, "decode", True)]
    return recs


def test_each_point_pairs_the_fastest_of_both_sides(tmp_path):
    m = match([_folder(tmp_path, _records())])
    prefill = {p.length: p for p in m.points if p.regime.phase == "prefill"}
    assert sorted(prefill) == [4096, 16384]
    assert {p.regime for p in prefill.values()} == {prefill[4096].regime}  # one regime, one series
    assert prefill[4096].series == prefill[16384].series == "B=1, H=32, P=128, Pv=128"
    p4, p16 = prefill[4096], prefill[16384]
    assert (p4.ssm["backend"], p4.baseline["backend"]) == ("fla.fused_recurrent_gated_delta_rule", "torch.sdpa.cudnn")
    assert (p16.ssm["backend"], p16.baseline["backend"]) == ("fla.chunk_gated_delta_rule", "torch.sdpa.flash")
    assert [r["backend"] for r in p4.ssm_alternatives] == ["fla.chunk_gated_delta_rule"]
    assert [r["backend"] for r in p16.alternatives] == ["torch.sdpa.cudnn"]
    for p in m.points:  # neither side has a faster alternative
        assert all(a.time_s["median"] >= p.ssm.time_s["median"] for a in p.ssm_alternatives)
        assert all(a.time_s["median"] >= p.baseline.time_s["median"] for a in p.alternatives)
    decode = [p for p in m.points if p.regime.phase == "decode"]
    assert sorted(p.length for p in decode) == [1024, 8192]
    assert not m.unmatched


def test_the_report_names_the_winners(tmp_path):
    rep = build([_folder(tmp_path, _records())], get_spec("h200-sxm"))
    pre = next(r for r in rep.regimes if r.regime.phase == "prefill")
    assert pre.winners() == {"SSM": {"fla.fused_recurrent_gated_delta_rule": 1, "fla.chunk_gated_delta_rule": 1},
                             "attention": {"torch.sdpa.cudnn": 1, "torch.sdpa.flash": 1}}
    assert len(pre.series) == 1 and len(pre.points) == 2
    # the time ratio is the winners': 4K, cuDNN 260 us over the recurrent kernel's 500 us
    p4 = next(p for p in pre.points if p.point.length == 4096)
    assert p4.time.value == 2.6e-4 / 5e-4
    html = to_html(rep)
    assert "Fastest backend of each side (points won)" in html
    assert "fla.fused_recurrent_gated_delta_rule (1 of 2)" in html
    md, _ = to_markdown(rep, tmp_path / "figs", "figs/")
    assert "fla.chunk_gated_delta_rule 900 us" in md  # the slower SSM backend at 4K, listed
