"""Issue 12 (what a new user hits), workload model: sliding-window attention from HF configs, the
precision knobs (--dtype fp8, --kv-dtype, --state-dtype) and the prefill activation peak."""

from __future__ import annotations

import json

import pytest

import ssmbench.cli as cli
from ssmbench.analytic.workloads.hf_config import load_hf_config
from ssmbench.analytic.workloads.models import get_model
from ssmbench.analytic.workloads.precision import Precision
from ssmbench.analytic.workloads.report import predict
from ssmbench.hwspecs import get_spec

H200 = get_spec("h200-sxm")
# Mistral-like, small: 4 layers, 8 query heads, 2 KV heads of 64, window 256
D, LAYERS, HEADS, KV_HEADS, HEAD_DIM, WINDOW = 512, 4, 8, 2, 64, 256
MISTRAL = {"model_type": "mistral", "hidden_size": D, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
           "num_key_value_heads": KV_HEADS, "intermediate_size": 1024, "vocab_size": 1000, "sliding_window": WINDOW}


def _config(tmp_path, data, name="toy"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(data))
    return load_hf_config(folder)


def _op(r, label):
    return next(o for o in r["ops"] if o["label"] == label)


def test_mistral_sliding_window_caps_kv_cache_and_keys(tmp_path):
    m = _config(tmp_path, MISTRAL)
    assert m.windowed_attention() == {"attn_swa": (WINDOW, (0, 1, 2, 3))}
    kv_token = LAYERS * 2 * KV_HEADS * HEAD_DIM * 2  # bf16
    B, L = 2, 1024
    r = predict(m, H200, "prefill", B, L, with_searches=False)
    assert r["total"]["memory_bytes"]["kv_cache"] == B * WINDOW * kv_token
    # prefill entries per (batch, head): W^2 / 2 causal + (L - W) queries x W keys
    tensor = sum(sum(_op(r, f"attn_swa.{part}")["flops_tensor"].values())
                 for part in ("attention", "attention_beyond_window"))
    per_layer = 4 * B * HEADS * HEAD_DIM * (WINDOW**2 / 2 + (L - WINDOW) * WINDOW)
    assert tensor == pytest.approx(LAYERS * per_layer)
    assert any(f"last {WINDOW} tokens on layers 0-3" in n for n in r["notes"])
    d = predict(m, H200, "decode", B, 4096, with_searches=False)
    assert _op(d, "attn_swa.attention")["shape"]["S"] == WINDOW
    assert d["total"]["memory_bytes"]["kv_cache"] == B * WINDOW * kv_token


def test_window_within_prompt_is_plain_causal(tmp_path):
    m = _config(tmp_path, MISTRAL)
    full = _config(tmp_path, {**MISTRAL, "sliding_window": None}, "full")
    assert full.windowed_attention() == {}
    r = predict(m, H200, "prefill", 1, WINDOW, with_searches=False)
    f = predict(full, H200, "prefill", 1, WINDOW, with_searches=False)
    beyond = _op(r, "attn_swa.attention_beyond_window")
    assert beyond["launches"] == 0 and beyond["bytes_executed"] == 0  # zero queries beyond the window
    assert r["total"]["time_s"] == pytest.approx(f["total"]["time_s"])


def test_qwen2_max_window_layers_and_layer_types(tmp_path):
    q = {**MISTRAL, "model_type": "qwen2", "use_sliding_window": True, "max_window_layers": 2}
    assert _config(tmp_path, q, "q").windowed_attention() == {"attn_swa": (WINDOW, (2, 3))}
    assert _config(tmp_path, {**q, "use_sliding_window": False}, "q2").windowed_attention() == {}
    types = ["sliding_attention", "full_attention"] * 2  # Gemma-style alternation
    g = _config(tmp_path, {**MISTRAL, "layer_types": types}, "g")
    assert g.windowed_attention() == {"attn_swa": (WINDOW, (0, 2))}
    assert [layer[0] for layer in g.layer_sequence] == ["attn_swa", "attn", "attn_swa", "attn"]


def test_kv_dtype_fp8_halves_kv_cache():
    m = get_model("llama-3.2-1b")
    bf = predict(m, H200, "decode", 4, 8192, with_searches=False)
    f8 = predict(m, H200, "decode", 4, 8192, dtype=Precision("bf16", kv_dtype="fp8"), with_searches=False)
    assert f8["total"]["memory_bytes"]["kv_cache"] == bf["total"]["memory_bytes"]["kv_cache"] / 2
    a, b = (sum(o["bytes_compulsory"] for o in r["ops"] if o["op"] == "attention_causal") for r in (bf, f8))
    kv = m.kv_bytes_per_token("bf16") * 4 * 8192
    assert a - b == pytest.approx(kv / 2)  # the decode attention reads the cache at 1 byte
    assert f8["precision"]["kv_dtype"] == "fp8"


def test_state_dtype_fp32_doubles_mamba2_state():
    m = get_model("mamba2-130m")
    bf = predict(m, H200, "decode", 8, 1024, with_searches=False)
    f32 = predict(m, H200, "decode", 8, 1024, dtype=Precision("bf16", state_dtype="fp32"), with_searches=False)
    assert f32["total"]["memory_bytes"]["state"] == 2 * bf["total"]["memory_bytes"]["state"]
    # default = the model dtype (mamba-ssm allocate_inference_cache)
    assert bf["total"]["memory_bytes"]["state"] == 8 * m.state_bytes_per_sequence("bf16")
    ssd_bf, ssd_32 = (_op(r, "mamba.ssd")["bytes_compulsory"] for r in (bf, f32))
    state = 8 * 24 * 64 * 128  # B x H x P x N elements, read and written, 2 more bytes each, 24 layers
    assert ssd_32 - ssd_bf == pytest.approx(24 * 2 * state * 2)
    assert any("state at bf16" in n for n in bf["notes"])


def test_fp8_runs_gemms_at_fp8_and_says_which():
    m = get_model("llama-3.2-1b")
    bf = predict(m, H200, "prefill", 1, 2048, with_searches=False)
    r = predict(m, H200, "prefill", 1, 2048, dtype="fp8", with_searches=False)
    assert _op(r, "attn.qkv_proj")["dtype"] == "fp8" and set(_op(r, "attn.qkv_proj")["flops_tensor"]) == {"fp8"}
    assert _op(r, "attn.norm")["dtype"] == "bf16"
    assert _op(r, "attn.attention")["dtype"] == "bf16"  # fa2 has no fp8 rule
    assert any(n.startswith("--dtype fp8 applies where an op has an fp8 rule") for n in r["notes"])
    assert r["total"]["memory_bytes"]["weights"] < bf["total"]["memory_bytes"]["weights"]
    fa3 = predict(m, H200, "prefill", 1, 2048, dtype="fp8", impls={"attention_causal": "fa3"}, with_searches=False)
    assert _op(fa3, "attn.attention")["dtype"] == "fp8"


LLAMA2_7B = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 32, "intermediate_size": 11008, "vocab_size": 32000}


def test_prefill_activations_hold_the_mlp_intermediates(tmp_path):
    m = _config(tmp_path, LLAMA2_7B, "llama-2-7b")
    B, L, F = 16, 8192, 11008
    r = predict(m, H200, "prefill", B, L, with_searches=False)
    gate_up = 2 * B * L * F * 2  # the gate and up projections, bf16
    assert r["total"]["memory_bytes"]["activations"] >= gate_up


def test_cli_precision_flags(monkeypatch, capsys):
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("ssmbench.commands.predict",))
    code = cli.main(["predict", "--model", "mamba2-130m", "--phase", "decode", "--state-dtype", "fp32", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["precision"]["state_dtype"] == "fp32"
    with pytest.raises(SystemExit) as exc:
        cli.main(["predict", "--kv-dtype", "fp7"])
    assert exc.value.code == 2 and "--kv-dtype" in capsys.readouterr().err
