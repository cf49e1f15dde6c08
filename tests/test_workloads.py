"""Workload suite: model files, parameter counts, hybrid accounting (KV cache only on attention layers,
state only on SSM layers, MoE active parameters), plans, the vectorized analysis and the searches."""

from __future__ import annotations

import numpy as np
import pytest
from ssmbench.analytic import sweep
from ssmbench.analytic.registry import AnalyticError, cost
from ssmbench.analytic.roofline import RESOURCES, SpecTable, project
from ssmbench.analytic.workloads.evaluate import analyze
from ssmbench.analytic.workloads.models import (
    ModelError,
    builtin_models,
    get_model,
    parse_model,
)
from ssmbench.analytic.workloads.phases import plan
from ssmbench.analytic.workloads.report import predict
from ssmbench.hwspecs import get_spec
from toy_spec import TOY_SPEC

H200 = "h200-sxm"


SUITE = {
    "mamba1": ["mamba-130m", "mamba-370m", "mamba-790m", "mamba-1.4b", "mamba-2.8b", "falcon-mamba-7b"],
    "mamba2": ["mamba2-130m", "mamba2-370m", "mamba2-780m", "mamba2-1.3b", "mamba2-2.7b", "codestral-mamba-7b"],
    "mamba3": ["mamba3-siso-1.5b", "mamba3-mimo-1.5b"],
    "hybrid": ["jamba-v0.1", "zamba2-2.7b", "nemotron-h-8b", "mamba2attn-2.7b"],
    "transformer": ["llama-3.2-1b", "llama-3-8b", "qwen2.5-0.5b", "gpt3-1.3b", "gpt3-2.7b"],
}


def test_the_suite_is_complete_and_families_match():
    models = builtin_models()
    for family, ids in SUITE.items():
        for i in ids:
            assert models[i].spec.family == family, i
    assert len(models) >= 20


# Published totals (model cards / papers); analytic counts within 1.5 %.
PUBLISHED = {
    "mamba-130m": 129.1e6, "mamba-2.8b": 2.768e9, "falcon-mamba-7b": 7.27e9, "codestral-mamba-7b": 7.29e9,
    "llama-3.2-1b": 1.236e9, "llama-3-8b": 8.03e9, "qwen2.5-0.5b": 0.494e9, "jamba-v0.1": 51.6e9,
    "mamba2-130m": 129e6,
}


@pytest.mark.parametrize("model_id", sorted(PUBLISHED))
def test_parameter_counts_match_published_totals(model_id):
    assert get_model(model_id).params == pytest.approx(PUBLISHED[model_id], rel=0.015)


def test_moe_active_parameters_count_router_and_top_k_experts():
    m = get_model("jamba-v0.1")
    assert m.active_params == pytest.approx(12e9, rel=0.02)  # "52B total / 12B active"
    moe = m.block("moe")
    D = m.d_model
    expert = 3 * D * moe.d_ff
    assert moe.params(D) - moe.active_params(D) == (moe.experts - moe.top_k) * expert
    assert m.params - m.active_params == 16 * (moe.experts - moe.top_k) * expert


def test_kv_cache_only_on_attention_layers():
    e = 2  # bf16
    jamba = get_model("jamba-v0.1")
    assert jamba.count_kind("attention") == 4
    assert jamba.kv_bytes_per_token("bf16") == 4 * 2 * 8 * 128 * e
    for mid in SUITE["mamba1"] + SUITE["mamba2"] + SUITE["mamba3"]:
        assert get_model(mid).kv_bytes_per_token("bf16") == 0
    assert get_model("llama-3-8b").kv_bytes_per_token("bf16") == 32 * 2 * 8 * 128 * e
    zamba = get_model("zamba2-2.7b")  # 9 applications of the shared block: 9 caches
    assert zamba.kv_bytes_per_token("bf16") == 9 * 2 * 32 * 160 * e


def test_state_only_on_ssm_layers():
    # E = 1536, N = 16, K = 4; conv and SSM state at the state dtype (mamba-ssm: the model dtype)
    m = get_model("mamba-130m")
    assert m.state_bytes_per_sequence("bf16") == 24 * (1536 * 4 * 2 + 1536 * 16 * 2)
    assert m.state_bytes_per_sequence("fp32") == 24 * (1536 * 4 * 4 + 1536 * 16 * 4)
    m2 = get_model("mamba2-130m")  # conv channels E + 2GN = 1536 + 256; state H P N = 24 x 64 x 128
    assert m2.state_bytes_per_sequence("bf16") == 24 * ((1536 + 256) * 4 * 2 + 24 * 64 * 128 * 2)
    for mid in SUITE["transformer"]:
        assert get_model(mid).state_bytes_per_sequence("bf16") == 0
    nem = get_model("nemotron-h-8b")
    assert nem.count_kind("mamba2") == 24 and nem.count_kind("attention") == 4 and nem.count_kind("mlp") == 24
    assert nem.state_bytes_per_sequence("bf16") == 24 * nem.block("mamba").state_bytes(4096, "bf16")


def test_shared_blocks_count_weights_once():
    z = get_model("zamba2-2.7b")
    assert z.block_counts["attn_a"] + z.block_counts["attn_b"] == 9
    D = z.d_model
    shared = sum(z.block(b).params(D) for b in ("attn_a", "attn_b", "mlp_a", "mlp_b"))
    unshared = sum(z.block_counts[b] * z.block(b).params(D) for b in ("attn_a", "attn_b", "mlp_a", "mlp_b"))
    data = z.spec.model_dump()
    for b in ("attn_a", "attn_b", "mlp_a", "mlp_b"):
        data["blocks"][b]["shared"] = False
    assert parse_model(data).params - z.params == unshared - shared


@pytest.mark.parametrize("change, message", [
    (lambda d: d["blocks"]["mamba"].update(kind="mamba9"), "unknown block kind"),
    (lambda d: d["layers"][0].update(blocks=["nope"]), "unknown block"),
    (lambda d: d["blocks"]["mamba"].update(nheads=7), "nheads x headdim"),
    (lambda d: d.update(colour="red"), "unknown key"),
    (lambda d: d.pop("vocab"), "required key is missing"),
])
def test_bad_model_files_name_the_problem(change, message):
    data = get_model("mamba2-130m").spec.model_dump(exclude_none=True)
    change(data)
    with pytest.raises(ModelError, match=message):
        parse_model(data, "bad.yaml")


def test_unknown_model_names_the_known_ones():
    with pytest.raises(ModelError, match="unknown model 'mamba-9b'.*known: .*mamba-130m"):
        get_model("mamba-9b")


# Analysis -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def h200():
    return get_spec(H200)


def test_model_time_is_the_sum_of_per_op_bounds_of_the_registered_costs(h200):
    m = get_model("llama-3.2-1b")
    calls = plan(m, "prefill")
    total = 0.0
    for c in calls:
        dims = {k: {"batch": 2, "tokens": 512, "keys": 512}.get(v, v) for k, v in c.dims}
        p = project(cost(c.op, dims, impl=c.impl, mode=c.mode) * c.count, h200)
        total += p.time_s
    r = analyze(m, "prefill", SpecTable.of([h200]), [2], [512])
    assert r.time_s[0, 0, 0] == pytest.approx(total)


def test_grid_analysis_equals_pointwise_analysis(h200):
    m = get_model("mamba-370m")
    table = SpecTable.of([h200, h200])
    for phase in ("prefill", "decode", "train"):
        grid = analyze(m, phase, table, [1, 4, 32], [128, 2048])
        for i, b in enumerate((1, 4, 32)):
            for j, ln in enumerate((128, 2048)):
                one = analyze(m, phase, table, [b], [ln])
                assert grid.time_s[1, i, j] == pytest.approx(one.time_s[0, 0, 0])
                assert grid.memory_total[i, j] == pytest.approx(one.memory_total[0, 0])


def test_decode_kv_cache_grows_with_context_only_for_attention(h200):
    table = SpecTable.of([h200])
    tf = analyze(get_model("llama-3.2-1b"), "decode", table, [4], [1024, 8192])
    ssm = analyze(get_model("mamba-1.4b"), "decode", table, [4], [1024, 8192])
    assert tf.memory["kv_cache"][0, 1] == pytest.approx(4 * 8193 * 32768)
    assert tf.memory["state"][0, 0] == 0
    assert ssm.memory["kv_cache"][0, 1] == 0
    assert ssm.memory["state"][0, 0] == ssm.memory["state"][0, 1] > 0
    # attention decode time grows with context; the SSM's per-token time does not
    assert tf.time_s[0, 0, 1] > tf.time_s[0, 0, 0]
    assert ssm.time_s[0, 0, 1] == pytest.approx(ssm.time_s[0, 0, 0])


def test_hybrid_kv_cache_is_from_attention_layers_only(h200):
    m = get_model("jamba-v0.1")
    r = analyze(m, "decode", SpecTable.of([h200]), [2], [4096])
    assert r.memory["kv_cache"][0, 0] == pytest.approx(2 * 4097 * m.kv_bytes_per_token("bf16"))
    assert r.memory["state"][0, 0] == pytest.approx(2 * m.state_bytes_per_sequence("bf16"))
    assert r.memory["weights"][0, 0] == m.params * 2


def test_moe_decode_reads_fewer_weights_than_it_stores(h200):
    m = get_model("jamba-v0.1")
    r = predict(m, h200, "decode", 1, 1024, with_searches=False)
    weights_read = sum(o["bytes_compulsory"] for o in r["ops"])
    assert weights_read < 0.4 * r["total"]["memory_bytes"]["weights"]


def test_does_not_fit_is_a_clear_result(h200):
    m = get_model("jamba-v0.1")
    r = predict(m, h200, "prefill", 64, 262144, with_searches=False)
    t = r["total"]
    assert t["fits"] is False and t["time_s"] is None
    assert t["status"].startswith("does not fit: needs") and "h200-sxm has 141 GB" in t["status"]
    assert t["time_s_ignoring_capacity"] > 0


def test_training_memory_and_recomputation(h200):
    m = get_model("mamba-790m")
    plain = predict(m, h200, "train", 8, 2048, with_searches=False)
    rec = predict(m, h200, "train", 8, 2048, recompute=True, with_searches=False)
    assert rec["total"]["memory_bytes"]["activations"] < plain["total"]["memory_bytes"]["activations"]
    assert rec["total"]["time_s"] > plain["total"]["time_s"]
    assert plain["total"]["memory_bytes"]["optimizer"] == m.params * 12
    assert any("recompute" in o["label"] for o in rec["ops"])


def test_decode_regimes_are_both_reported(h200):
    r = predict(get_model("mamba-130m"), h200, "decode", 1, 2048, with_searches=False)
    assert set(r["total"]["regimes"]) == {"eager", "graph"}
    assert r["total"]["launch_regime"] == "graph"


@pytest.mark.parametrize("ssm_id", ["mamba-2.8b", "mamba2-2.7b"])
def test_ssm_overtakes_its_transformer_baseline_for_long_prompts_on_h200(h200, ssm_id):
    ssm, base = get_model(ssm_id), get_model("gpt3-2.7b")
    res = sweep.crossover(ssm, base, h200, "prefill", batch=1)
    assert res["length"] is not None, res
    L = res["length"]
    table = SpecTable.of([h200])
    t_ssm = analyze(ssm, "prefill", table, [1], [L - 1, L, 4 * L]).time_s[0, 0]
    t_tf = analyze(base, "prefill", table, [1], [L - 1, L, 4 * L]).time_s[0, 0]
    assert t_ssm[1] < t_tf[1] and t_ssm[2] < t_tf[2]
    if L > 16:
        assert t_ssm[0] >= t_tf[0]


def test_decode_turns_compute_bound_at_a_finite_batch(h200):
    m = get_model("llama-3.2-1b")
    res = sweep.compute_bound_batch(m, h200, 128)  # at 512 keys its KV reads keep it memory-bound
    b = res["batch"]
    assert b is not None and b > 1
    r = analyze(m, "decode", SpecTable.of([h200]), [b - 1, b], [128], launch="graph")
    names = [RESOURCES[i] for i in r.bottleneck[0, :, 0]]
    assert names[1] in ("tensor", "vector", "special_function")
    assert names[0] not in ("tensor", "vector", "special_function")


def test_sweep_columns_cover_the_grid(h200):
    models = [get_model("mamba-130m"), get_model("qwen2.5-0.5b")]
    cols = sweep.sweep(models, [h200], ["prefill", "decode"], [1, 8], [256, 1024, 4096])
    assert len(cols["model"]) == 2 * 1 * 2 * 2 * 3
    assert set(cols["bottleneck"]) <= set(RESOURCES) | {"none"}
    assert np.all(cols["time_s_ignoring_capacity"] > 0)


def test_sweep_rejects_bad_grids(h200):
    from ssmbench.errors import UserError
    with pytest.raises(UserError, match="positive integer"):
        sweep.sweep([get_model("mamba-130m")], [h200], ["prefill"], [0], [128])
    with pytest.raises(UserError, match="unknown phase"):
        sweep.sweep([get_model("mamba-130m")], [h200], ["serve"], [1], [128])
    assert sweep.parse_int_list("1:16:x2,24", "--batch") == [1, 2, 4, 8, 16, 24]
    with pytest.raises(UserError):
        sweep.parse_int_list("1:x", "--batch")





def test_energy_estimate_where_the_spec_has_energy_data():
    import yaml
    from ssmbench.analytic.roofline import COL
    from ssmbench.hwspecs import parse_spec

    data = yaml.safe_load(TOY_SPEC)
    plain = parse_spec(dict(data, id="toy-plain"))
    data["energy"] = {"static_power": {"value": "10 W", "source": "a"},
                      "per_flop": {"tensor": {"bf16": {"value": "0.5 pJ/FLOP", "source": "a"}},
                                   "vector": {"fp32": {"value": "1 pJ/FLOP", "source": "a"}}},
                      "per_byte": {"dram": {"value": "20 pJ/B", "source": "a"}, "l2": {"value": "2 pJ/B", "source": "a"}}}
    toy = parse_spec(data)
    m = get_model("mamba-130m")
    r = analyze(m, "prefill", SpecTable.of([toy, plain]), [2], [256], keep_calls=True, energy=True)
    W = r.call_work[:, :, 0, 0].sum(axis=0)
    expected = (0.5e-12 * W[COL["tensor.bf16"]] + 1e-12 * W[COL["vector"]] + 22e-12 * W[COL["dram.executed"]]
                + 10.0 * r.time_s[0, 0, 0])  # static 10 W x time bound
    assert r.energy_j[0, 0, 0] == pytest.approx(expected)
    assert "excludes energy.per_flop.special_function" in r.energy_note[0]
    assert np.isnan(r.energy_j[1, 0, 0]) and "no energy estimate" in r.energy_note[1]


def test_chunked_kernels_see_whole_chunks(h200):
    m = get_model("mamba2-130m")
    table = SpecTable.of([h200])
    r = analyze(m, "prefill", table, [1], [1000, 1024], keep_calls=True)
    i = next(k for k, c in enumerate(r.calls.calls) if c.call.op == "ssd")
    j = next(k for k, c in enumerate(r.calls.calls) if c.call.op == "linear")
    assert np.allclose(r.call_work[i, :, 0, 0], r.call_work[i, :, 0, 1])  # ssd: 1000 -> 4 chunks of 256
    assert r.call_work[j, 0:8, 0, 0].sum() < r.call_work[j, 0:8, 0, 1].sum()  # linear: real tokens only


@pytest.fixture
def mamba3_without_backward(monkeypatch):
    """The registry's mamba3 with its backward rules removed: a phase that cannot be costed."""
    from dataclasses import replace

    from ssmbench.analytic import registry
    from ssmbench.analytic.workloads import evaluate, phases

    def clear():
        for f in (registry.symbolic_cost, registry.compiled_cost, phases._plan, evaluate.compile_plan):
            f.cache_clear()

    op = registry.get_op("mamba3")
    impls = tuple(replace(i, modes=tuple(m for m in i.modes if m not in ("bwd", "fwdbwd"))) for i in op.impls)
    monkeypatch.setitem(registry._REGISTRY, "mamba3", replace(op, impls=impls))
    clear()
    yield
    monkeypatch.undo()
    clear()


def test_phase_without_a_cost_rule_is_a_clear_error_and_a_sweep_gap(h200, mamba3_without_backward):
    m = get_model("mamba3-siso-1.5b")
    with pytest.raises(AnalyticError, match="no rule for mode 'fwdbwd'"):
        plan(m, "train")
    gaps: list[str] = []
    cols = sweep.sweep([m], [h200], ["decode", "train"], [1], [512], unsupported=gaps)
    assert len(gaps) == 1 and gaps[0].startswith("mamba3-siso-1.5b train")
    assert list(cols["bottleneck"]) != ["unsupported", "unsupported"] and "unsupported" in list(cols["bottleneck"])
    with pytest.raises(AnalyticError):
        sweep.sweep([m], [h200], ["train"], [1], [512])


def test_mamba3_uses_the_mimo_kernel_when_rank_exceeds_one():
    siso, mimo = get_model("mamba3-siso-1.5b"), get_model("mamba3-mimo-1.5b")
    assert {c.impl for c in plan(siso, "prefill") if c.op == "mamba3"} == {"siso"}
    assert {c.impl for c in plan(mimo, "prefill") if c.op == "mamba3"} == {"mimo"}


def test_block_cost_of_a_measured_block_case_is_the_sum_of_its_ops():
    from ssmbench.analytic.workloads.blocks import block_cost
    get_model("llama-3.2-1b")
    d = dict(B=2, L=256, D=1024, H=16, G=4, P=64)
    got = block_cost("block:attention", d, mode="fwd")
    want = (cost("linear", dict(B=2, L=256, I=1024, O=(16 + 8) * 64))
            + cost("attention_causal", dict(B=2, L=256, S=256, H=16, G=4, P=64), impl="fa2")
            + cost("linear", dict(B=2, L=256, I=1024, O=1024)))
    assert got.flops == pytest.approx(want.flops)
    assert got.executed_bytes == pytest.approx(want.executed_bytes)
    dec = block_cost("block:attention", dict(d, S=4096), mode="decode")
    assert dec.read["kv_cache"] == pytest.approx(2 * 2 * 4096 * 4 * 64 * 2)
    with pytest.raises(AnalyticError, match="no analytic block"):
        block_cost("block:rwkv", d)
    with pytest.raises(AnalyticError, match="needs dimension"):
        block_cost("block:mamba2", dict(B=1, L=64, D=256))


@pytest.mark.parametrize("model_id, op", [("nemotron-h-8b", "mlp_relu2"), ("zamba2-2.7b", "gated_mlp_geglu"),
                                          ("gpt3-1.3b", "mlp"), ("llama-3-8b", "gated_mlp")])
@pytest.mark.parametrize("phase", ["prefill", "decode", "train"])
def test_mlp_blocks_are_costed_with_their_activation(model_id, op, phase):
    """Nemotron-H's ReLU^2 MLP and Zamba2's GeGLU run their own ops, not GELU / SwiGLU."""
    ops = {c.op for c in plan(get_model(model_id), phase) if c.label.split(".")[-1] == "mlp"}
    assert ops == {op}


def test_an_mlp_activation_without_a_cost_rule_is_a_clear_error():
    data = get_model("nemotron-h-8b").spec.model_dump(exclude_none=True)
    data["blocks"]["mlp"]["activation"] = "silu"  # a known name, but no plain (non-gated) SiLU MLP op
    with pytest.raises(AnalyticError) as err:
        plan(parse_model(data, "silu.yaml"), "prefill")
    msg = str(err.value)
    assert "MLP activation 'silu' (not gated) has no cost rule" in msg
    for op in ("mlp", "mlp_relu2", "gated_mlp", "gated_mlp_geglu"):
        assert f"-> {op}" in msg
    data["blocks"]["mlp"]["activation"] = "tanh"  # an unknown name is rejected when the file is read
    with pytest.raises(ModelError, match="activation.*'gelu', 'silu' or 'relu2'"):
        parse_model(data, "tanh.yaml")
