"""Multi-GPU predictions (analytic/workloads/shard.py, parallel.py): formulas over the plan, limiting cases
and properties. Not validated against measurement (no multi-GPU machine yet): these test the model's
arithmetic, not its accuracy."""

import itertools
import json

import numpy as np
import pytest
from ssmbench.analytic.conventions import nbytes
from ssmbench.analytic.roofline import COL, TENSOR_DTYPES
from ssmbench.analytic.workloads.evaluate import compile_plan, evaluate_plan, phase_grid
from ssmbench.analytic.workloads.models import get_model
from ssmbench.analytic.workloads.parallel import predict_parallel
from ssmbench.analytic.workloads.phases import plan
from ssmbench.analytic.workloads.precision import as_precision
from ssmbench.analytic.workloads.report import predict
from ssmbench.analytic.workloads.shard import (
    Parallel,
    comm_events,
    rank_calls,
    rank_params,
)
from ssmbench.hwspecs import get_spec

from ssmbench.errors import UserError

H200 = get_spec("h200-sxm")
BF16 = as_precision("bf16")


@pytest.mark.parametrize("model,phase,B,L", [("codestral-mamba-7b", "prefill", 2, 2048), ("llama-3-8b", "train", 2, 1024),
                                             ("llama-3-8b", "decode", 8, 2048), ("jamba-v0.1", "prefill", 2, 1024),
                                             ("mamba2-2.7b", "decode", 4, 1024)])
def test_one_gpu_equals_the_single_gpu_prediction(model, phase, B, L):
    m = get_model(model)
    r = predict_parallel(m, H200, phase, B, L, par=Parallel())
    ref = predict(m, H200, phase, B, L)["total"]
    assert r["time"]["step_s"] == pytest.approx(ref["time_s_ignoring_capacity"], rel=1e-12)
    assert r["memory"]["total_bytes"] == pytest.approx(ref["memory_total_bytes"], rel=1e-12)
    assert r["communication"] == [] and "single_gpu" not in r


def _flops(model, phase, par, b, length):
    calls = rank_calls(model, plan(model, phase), par)
    cp = compile_plan(calls, BF16)
    W, _ = evaluate_plan(cp, phase_grid(phase, np.array([[b]]), np.array([[length]])), (1, 1))
    tensor = W[:, [COL[f"tensor.{d}"] for d in TENSOR_DTYPES], 0, 0].sum(axis=1)
    return {c.label: float(tensor[i]) for i, c in enumerate(calls)}


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_tp_divides_every_sharded_matmul(tp):
    m = get_model("llama-3-8b")
    one, split = _flops(m, "prefill", Parallel(), 2, 512), _flops(m, "prefill", Parallel(tp=tp), 2, 512)
    for label in ("attn.qkv_proj", "attn.o_proj", "attn.attention", "mlp.mlp"):
        assert split[label] == pytest.approx(one[label] / tp)
    assert split["lm_head"] == pytest.approx(one["lm_head"] * (-(-m.spec.vocab // tp)) / m.spec.vocab)


def test_mamba2_tp_splits_heads_and_groups():
    m = get_model("codestral-mamba-7b")  # ngroups 8
    one, split = _flops(m, "prefill", Parallel(), 1, 1024), _flops(m, "prefill", Parallel(tp=8), 1, 1024)
    for label in ("mamba.in_proj", "mamba.ssd", "mamba.out_proj"):
        assert split[label] == pytest.approx(one[label] / 8)


def _events(model, phase, par, b=2, tokens=1024):
    return comm_events(get_model(model), phase, par, b, tokens, BF16)


def test_tp_all_reduces_two_per_transformer_layer_one_per_mamba2_block():
    D = get_model("llama-3-8b").d_model
    ev = [e for e in _events("llama-3-8b", "prefill", Parallel(tp=4)) if "row-parallel" in e.what]
    layers = len(get_model("llama-3-8b").layer_sequence)
    assert sum(e.count for e in ev) == 2 * layers  # attention + MLP per layer, forward
    assert all(e.bytes == 2 * 1024 * D * nbytes("bf16") and e.collective == "all_reduce" and e.dependent for e in ev)
    train = [e for e in _events("llama-3-8b", "train", Parallel(tp=4)) if "row-parallel" in e.what]
    assert sum(e.count for e in train) == 4 * layers  # and the backward's input-gradient all-reduces
    ssm = [e for e in _events("codestral-mamba-7b", "prefill", Parallel(tp=2)) if "row-parallel" in e.what]
    assert sum(e.count for e in ssm) == len(get_model("codestral-mamba-7b").layer_sequence)


def test_cp_attention_work_is_balanced_and_kv_passes_around_the_ring():
    m = get_model("llama-3-8b")
    L, cp = 4096, 4
    one = _flops(m, "prefill", Parallel(), 1, L)
    split = _flops(m, "prefill", Parallel(cp=cp), 1, L // cp)
    per_rank = split["attn.attention"] + split["attn.attention_cp_offdiag"]
    assert per_rank * cp == pytest.approx(one["attn.attention"], rel=2e-3)  # L^2 / (2 cp) score entries each
    blk = m.block("attn")
    ring = [e for e in comm_events(m, "prefill", Parallel(cp=cp), 1, L // cp, BF16) if e.group == "cp"]
    assert all(e.collective == "send_recv" and not e.dependent for e in ring)
    assert ring[0].bytes == 2 * (L // cp) * blk.kv_heads * blk.head_dim * 2
    assert ring[0].count == m.block_counts["attn"] * (cp - 1)


def test_ssd_state_passing_is_a_dependent_chain_of_one_state_per_rank_boundary():
    m = get_model("codestral-mamba-7b")
    blk = m.block("mamba")
    ev = [e for e in comm_events(m, "prefill", Parallel(cp=4), 2, 512, BF16) if e.group == "cp"]
    assert len(ev) == 1 and ev[0].dependent and ev[0].collective == "send_recv"
    assert ev[0].bytes == 2 * blk.state_bytes(m.d_model, "bf16")
    assert ev[0].count == m.block_counts["mamba"] * 3


def test_ep_all_to_all_and_dp_gradients():
    m = get_model("jamba-v0.1")
    moe = m.block("moe")
    ev = comm_events(m, "train", Parallel(dp=4, ep=2), 1, 1024, BF16)
    a2a = [e for e in ev if e.group == "ep"]
    assert a2a[0].bytes == 1024 * moe.top_k * m.d_model * 2 and a2a[0].count == m.block_counts["moe"] * 4
    dense, expert = rank_params(m, Parallel(dp=4, ep=2), split_experts=True)
    grads = {e.what: e for e in ev if e.group == "dp"}
    assert grads["gradient all-reduce (non-expert parameters)"].bytes == dense * 2
    assert grads["gradient all-reduce (expert parameters)"].ranks == 2
    assert dense + 2 * expert == pytest.approx(m.params)  # each rank holds half the experts


def test_pipeline_bubble_and_step():
    m = get_model("llama-3-8b")
    r = predict_parallel(m, H200, "train", 8, 1024, par=Parallel(pp=4, microbatches=8))
    t = r["time"]
    assert t["bubble_fraction"] == pytest.approx(3 / 11)
    assert t["step_s"] == pytest.approx(11 * t["microbatch_s"])


def test_weights_per_gpu_shrink_with_tp_and_pp():
    m = get_model("llama-3-8b")
    total = m.params
    for tp in (2, 4, 8):
        w = rank_params(m, Parallel(tp=tp))
        assert total / tp <= w <= total / tp * 1.01  # only norms are replicated
    assert rank_params(m, Parallel(pp=4)) < total / 3


def test_compute_never_grows_with_tp_and_free_communication_would_not_slow_it():
    m = get_model("llama-3-8b")
    times = [predict_parallel(m, H200, "prefill", 8, 4096, par=Parallel(tp=tp))["time"] for tp in (1, 2, 4, 8)]
    compute = [t["compute_microbatch_s"] for t in times]
    assert all(a >= b for a, b in itertools.pairwise(compute))
    overlapped = predict_parallel(m, H200, "prefill", 8, 4096, par=Parallel(cp=2, overlap="full"))["time"]
    serial = predict_parallel(m, H200, "prefill", 8, 4096, par=Parallel(cp=2))["time"]
    assert overlapped["step_s"] <= serial["step_s"]


@pytest.mark.parametrize("model,phase,par,match", [
    ("jamba-v0.1", "prefill", Parallel(tp=2), "mamba1"),
    ("mamba2-2.7b", "prefill", Parallel(tp=2), "ngroups 1 is not divisible"),
    ("llama-3-8b", "decode", Parallel(cp=2), "prefill and train only"),
    ("llama-3-8b", "prefill", Parallel(dp=3), "--batch 16 is not divisible"),
    ("llama-3-8b", "prefill", Parallel(dp=2, ep=2), "no MoE blocks"),
    ("llama-3-8b", "prefill", Parallel(tp=16), "kv_heads 8 is not divisible"),
    ("jamba-v0.1", "prefill", Parallel(dp=16, ep=16), "fewer than its top_k"),
])
def test_unsupported_splits_say_why(model, phase, par, match):
    with pytest.raises(UserError, match=match):
        predict_parallel(get_model(model), H200, phase, 16, 1024, par=par)


def test_no_interconnect_is_an_error():
    with pytest.raises(UserError, match="lists no interconnect"):
        predict_parallel(get_model("llama-3-8b"), get_spec("t4"), "prefill", 2, 512, par=Parallel(tp=2))


def test_cli(capsys):
    from ssmbench.cli import main

    assert main(["predict", "--model", "codestral-mamba-7b", "--batch", "2", "--seqlen", "1024", "--tp", "2",
                 "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["validation"].startswith("not validated") and r["parallel"]["tp"] == 2
    assert r["single_gpu"]["speedup"] > 1
    assert main(["predict", "--model", "codestral-mamba-7b", "--tp", "2"]) == 0
    out = capsys.readouterr().out
    assert "not validated" in out and "row-parallel output all-reduce" in out
    assert main(["predict", "--model", "mamba2-2.7b", "--tp", "2"]) == 2
    assert "ngroups" in capsys.readouterr().err
    assert main(["predict", "--batch", "1,2", "--tp", "2"]) == 2
