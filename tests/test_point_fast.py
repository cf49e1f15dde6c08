"""The plain-Python one-point path (analytic/workloads/point.py) against the general path (analyze +
report.achievable_rows): every built-in model x phase x a few points x several specs, bound, sum,
bottleneck, shares, unbounded resources and the step's achievable estimate, to 1e-12 relative."""

import math

import pytest
from ssmbench.analytic.registry import AnalyticError
from ssmbench.analytic.roofline import SpecTable
from ssmbench.analytic.workloads.models import builtin_models, get_model
from ssmbench.analytic.workloads.point import FAST, GENERAL, analyze_point
from ssmbench.hwspecs import get_spec
from ssmbench.hwspecs.schema import Spec

SPECS = ("h200-sxm", "a100-80gb-sxm", "mi300x", "t4", "pim-hbm", "l4")
POINTS = ((1, 128), (8, 4096), (64, 32768))


def _close(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b))
    return a == b


def _same(f, g) -> list[str]:
    bad = [k for k in ("time_s", "sum_s", "bottleneck", "not_bounded", "tokens") if not _close(getattr(f, k), getattr(g, k))]
    bad += [f"share {r}" for r in g.shares_s if not _close(f.shares_s[r], g.shares_s[r])]
    bad += [f"achievable {k}" for k in g.achievable if not _close(f.achievable[k], g.achievable[k])]
    return bad


@pytest.fixture(scope="module")
def tables():
    return {s: SpecTable.of([get_spec(s)]) for s in SPECS}


@pytest.mark.parametrize("model_id", sorted(builtin_models()))
def test_fast_point_equals_general_path(model_id, tables):
    model = get_model(model_id)
    compared = 0
    for phase in ("prefill", "decode", "train"):
        for b, n in POINTS:
            for s in SPECS:
                try:
                    (g,) = analyze_point(model, phase, tables[s], b, n, achievable=True, force_general=True)
                except AnalyticError:
                    continue
                (f,) = analyze_point(model, phase, tables[s], b, n, achievable=True)
                assert f.path == FAST and g.path == GENERAL
                assert not _same(f, g), (phase, b, n, s, _same(f, g), f, g)
                compared += 1
    assert compared > 0


def test_fast_point_several_specs_and_options(tables):
    model = get_model("jamba-v0.1")
    table = SpecTable.of([get_spec(s) for s in SPECS])
    for kw in ({}, {"launch": "eager"}, {"bytes_basis": "compulsory"}, {"dtype": "fp8"}):
        fast = analyze_point(model, "decode", table, 4, 2048, achievable=True, **kw)
        general = analyze_point(model, "decode", table, 4, 2048, achievable=True, force_general=True, **kw)
        assert [f.spec_id for f in fast] == list(SPECS)
        for f, g in zip(fast, general):
            assert not _same(f, g), (kw, f.spec_id, _same(f, g))


def test_resident_state_takes_the_general_path():
    table = SpecTable.of([get_spec("ssm-sram-asic")])
    (r,) = analyze_point(get_model("mamba2-2.7b"), "decode", table, 1, 4096)
    assert r.path == GENERAL
    (p,) = analyze_point(get_model("mamba2-2.7b"), "prefill", table, 1, 4096, achievable=True)
    (g,) = analyze_point(get_model("mamba2-2.7b"), "prefill", table, 1, 4096, achievable=True, force_general=True)
    assert p.path == FAST and not _same(p, g)


def test_edited_spec_does_not_reuse_stale_constants():
    """A spec with a doubled DRAM bandwidth (same id, built after the original was analysed) gets its own
    constants: the bound and the achievable estimate move, and still equal the general path."""
    spec = get_spec("h200-sxm")
    model = get_model("llama-3-8b")
    (before,) = analyze_point(model, "decode", SpecTable.of([spec]), 1, 4096, achievable=True)
    data = spec.model_dump(exclude_none=True)
    for m in data["measured"]:
        if m["key"] == "memory.dram.bandwidth":
            m["value"] = "8372 GB/s"
    faster = Spec.model_validate(data)
    (after,) = analyze_point(model, "decode", SpecTable.of([faster]), 1, 4096, achievable=True)
    (general,) = analyze_point(model, "decode", SpecTable.of([faster]), 1, 4096, achievable=True, force_general=True)
    assert after.time_s < before.time_s and after.achievable["time_s"] < before.achievable["time_s"]
    assert not _same(after, general)


def test_spec_table_is_an_immutable_snapshot():
    """The caches key on the table itself: its arrays and mappings cannot be changed in place."""
    import numpy as np

    table = SpecTable.of([get_spec("h200-sxm")])
    with pytest.raises(ValueError):
        table.inv_dram[0] = 1.0
    with pytest.raises(TypeError):
        table.known["dram"] = np.array([False])
    with pytest.raises(ValueError):
        table.launch_s["eager"][0] = 0.0


def test_api_point_matches_the_general_path():
    from ssmbench.api import point, spec_table

    table = spec_table("h200-sxm")
    assert spec_table("h200-sxm") is table  # cached on the spec's content
    fast = point("mamba2-2.7b", hw=table, phase="prefill", batch=2, seqlen=2048, achievable=True)
    (general,) = analyze_point(get_model("mamba2-2.7b"), "prefill", table, 2, 2048, achievable=True,
                               force_general=True)
    assert fast.path == FAST and not _same(fast, general)
    with pytest.raises(ValueError, match="unknown option"):
        point("mamba2-2.7b", hw=table, phase="prefill", batch=2, seqlen=2048, dtyp="bf16")


def test_generated_achievable_equals_step_achievable(tables):
    """The generated estimate (point_achievable.py) against ``step_achievable`` (the numpy path it
    replaces, kept where a constant is not finite) at every model x phase x point x spec: the same
    numbers to 1e-12 and the same label; both also equal the general path (above)."""
    from ssmbench.analytic.workloads import point as pt
    from ssmbench.analytic.workloads import point_achievable
    from ssmbench.analytic.workloads.phases import plan
    from ssmbench.analytic.workloads.precision import as_precision

    compared = 0
    for model_id in sorted(builtin_models()):
        model = get_model(model_id)
        for phase in ("prefill", "decode", "train"):
            try:
                _, pp, _ = pt.point_plan(plan(model, phase), as_precision("bf16"))
            except AnalyticError:
                continue
            for s in SPECS:
                for launch in ("eager", "graph"):
                    f = point_achievable.generate(pp, pt._achievable_table(tables[s], 0), launch, phase)
                    assert f is not None
                    for b, n in POINTS:
                        try:
                            work = pt.plan_work(pp, phase, b, n)
                        except AnalyticError:
                            continue
                        ref = pt.step_achievable(pp, work, tables[s], 0, launch, phase, b, n)
                        got = f(float(b), float(n))
                        assert all(_close(got[k], ref[k]) for k in ref), (model_id, phase, s, launch, b, n, got, ref)
                        compared += 1
    assert compared > 500


def test_a_call_on_a_dram_kernel_path_is_left_to_step_achievable(tables):
    """A plan with a call whose bytes move on a DRAM kernel path (the runtimes' KV-cache copies) gets no
    generated function: ``step_achievable`` (which honours ``dram_path``) estimates it."""
    import dataclasses

    import numpy as np
    from ssmbench.analytic.workloads import point as pt
    from ssmbench.analytic.workloads import point_achievable
    from ssmbench.analytic.workloads.phases import plan
    from ssmbench.analytic.workloads.precision import as_precision

    _, pp, _ = pt.point_plan(plan(get_model("llama-3-8b"), "decode"), as_precision("bf16"))
    table = pt._achievable_table(tables[SPECS[0]], 0)
    assert point_achievable.generate(pp, table, "eager", "decode") is not None
    on_path = dataclasses.replace(pp, dram_path=np.where(np.arange(len(pp.dram_path)) == 0, 0, -1))
    assert point_achievable.generate(on_path, table, "eager", "decode") is None


def test_without_a_generated_estimate_the_numpy_path_runs(monkeypatch, tables):
    """Where ``generate`` writes no function (a constant not finite), ``step_achievable`` gives the
    estimate: still the general path's."""
    from ssmbench.analytic.workloads import point_achievable

    monkeypatch.setattr(point_achievable, "generate", lambda *a: None)
    table = SpecTable.of([get_spec("a100-80gb-sxm")])  # a table of its own: no function cached for it
    (f,) = analyze_point(get_model("jamba-v0.1"), "prefill", table, 2, 4096, achievable=True)
    (g,) = analyze_point(get_model("jamba-v0.1"), "prefill", table, 2, 4096, achievable=True, force_general=True)
    assert not _same(f, g)


def test_a_changed_rule_in_the_generated_estimate_is_caught(monkeypatch, tables):
    """The comparison is not blind: the generated estimate with the DRAM latency left out differs."""
    from ssmbench.analytic.workloads import point_achievable

    original = point_achievable._constants

    def no_latency(t):
        k = original(t)
        return {**k, "zlat": 0.0}

    monkeypatch.setattr(point_achievable, "_constants", no_latency)
    table = SpecTable.of([get_spec("h200-sxm")])
    (f,) = analyze_point(get_model("llama-3-8b"), "decode", table, 1, 4096, achievable=True)
    (g,) = analyze_point(get_model("llama-3-8b"), "decode", table, 1, 4096, achievable=True, force_general=True)
    assert any(k.startswith("achievable") for k in _same(f, g))


@pytest.mark.parametrize("phase", ["prefill", "train"])
def test_generated_achievable_of_a_cudnn_attention_plan_equals_step_achievable(phase):
    """Hugging Face modules run their attention on SDPA's cuDNN backend (engines "phased": the tensor phase, then
    the softmax's exponentials and FMAs side by side): the generated per-point function and ``step_achievable``
    give the same step."""
    from ssmbench.analytic.workloads import point as pt
    from ssmbench.analytic.workloads import point_achievable
    from ssmbench.analytic.workloads.phases import plan
    from ssmbench.analytic.workloads.precision import as_precision

    calls = plan(get_model("llama-3.2-1b"), phase, modules="hf")
    assert any(c.backend == "torch.sdpa.cudnn" for c in calls)
    _, pp, _ = pt.point_plan(calls, as_precision("bf16"))
    assert 2 in {int(x) for x in pp.serial}  # execution.ENGINE_CODES["phased"]
    table = SpecTable.of([get_spec("h200-sxm")])
    f = point_achievable.generate(pp, pt._achievable_table(table, 0), "eager", phase)
    assert f is not None
    for b, n in ((1, 2048), (8, 8192)):
        got = f(b, n)
        want = pt.step_achievable(pp, pt.plan_work(pp, phase, b, n), table, 0, "eager", phase, b, n)
        for k in ("time_s", "host_s", "gpu_s", "bottleneck"):
            assert _close(got[k], want[k]), (k, got[k], want[k])
