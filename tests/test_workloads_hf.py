"""Models from local Hugging Face config.json files (no network): each supported family gives the
same model as the built-in YAML file; unsupported architectures and missing keys are clear errors."""

from __future__ import annotations

import json

import pytest
from ssmbench.analytic.workloads.hf_config import SUPPORTED, load_hf_config
from ssmbench.analytic.workloads.models import ModelError, get_model

# Values from ../shared/REFERENCES.md (model configuration tables) and transformers' config classes.
CONFIGS = {
    "mamba-130m": {"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24, "state_size": 16,
                   "conv_kernel": 4, "expand": 2, "time_step_rank": 48, "vocab_size": 50280,
                   "intermediate_size": 1536, "tie_word_embeddings": True},
    "falcon-mamba-7b": {"model_type": "falcon_mamba", "hidden_size": 4096, "num_hidden_layers": 64,
                        "state_size": 16, "conv_kernel": 4, "expand": 2, "time_step_rank": 256,
                        "vocab_size": 65024, "intermediate_size": 8192, "tie_word_embeddings": False,
                        "mixer_rms_eps": 1e-6},
    "mamba2-130m": {"model_type": "mamba2", "hidden_size": 768, "num_hidden_layers": 24, "state_size": 128,
                    "head_dim": 64, "num_heads": 24, "n_groups": 1, "expand": 2, "conv_kernel": 4,
                    "chunk_size": 256, "vocab_size": 50288, "tie_word_embeddings": True},
    "codestral-mamba-7b": {"model_type": "mamba2", "hidden_size": 4096, "num_hidden_layers": 64,
                           "state_size": 128, "head_dim": 64, "num_heads": 128, "n_groups": 8, "expand": 2,
                           "conv_kernel": 4, "chunk_size": 256, "vocab_size": 32768,
                           "tie_word_embeddings": False},
    "jamba-v0.1": {"model_type": "jamba", "hidden_size": 4096, "num_hidden_layers": 32, "attn_layer_period": 8,
                   "attn_layer_offset": 4, "expert_layer_period": 2, "expert_layer_offset": 1,
                   "num_experts": 16, "num_experts_per_tok": 2, "intermediate_size": 14336,
                   "num_attention_heads": 32, "num_key_value_heads": 8, "mamba_d_state": 16, "mamba_d_conv": 4,
                   "mamba_expand": 2, "mamba_dt_rank": 256, "vocab_size": 65536, "tie_word_embeddings": False},
    "nemotron-h-8b": {"model_type": "nemotron_h", "hidden_size": 4096, "num_hidden_layers": 52,
                      "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
                      "mamba_num_heads": 128, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8,
                      "conv_kernel": 4, "expand": 2, "chunk_size": 128, "num_attention_heads": 32,
                      "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 21504,
                      "mlp_hidden_act": "relu2", "vocab_size": 131072, "tie_word_embeddings": False},
    "zamba2-2.7b": {"model_type": "zamba2", "hidden_size": 2560, "num_hidden_layers": 54, "mamba_d_state": 64,
                    "mamba_d_conv": 4, "mamba_expand": 2, "mamba_ngroups": 1, "n_mamba_heads": 80,
                    "mamba_headdim": 64, "chunk_size": 256, "num_attention_heads": 32, "num_key_value_heads": 32,
                    "intermediate_size": 10240, "hidden_act": "gelu", "num_mem_blocks": 2, "vocab_size": 32000,
                    "tie_word_embeddings": True},
    "llama-3-8b": {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                   "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
                   "tie_word_embeddings": False},
    "qwen2.5-0.5b": {"model_type": "qwen2", "hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14,
                     "num_key_value_heads": 2, "intermediate_size": 4864, "vocab_size": 151936,
                     "tie_word_embeddings": True},
    "mamba2attn-2.7b": {"d_model": 2560, "n_layer": 64, "vocab_size": 50277, "pad_vocab_size_multiple": 16,
                        "ssm_cfg": {"layer": "Mamba2"}, "attn_layer_idx": [9, 18, 27, 36, 45, 56],
                        "attn_cfg": {"causal": True, "head_dim": 128, "num_heads": 30, "out_proj_bias": False,
                                     "qkv_proj_bias": False, "rotary_emb_dim": 64},
                        "tie_embeddings": True},
}


def write(tmp_path, name, data):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(data))
    return folder


@pytest.mark.parametrize("model_id", sorted(CONFIGS))
def test_config_json_gives_the_builtin_model(tmp_path, model_id):
    folder = write(tmp_path, model_id, CONFIGS[model_id])
    hf, ref = load_hf_config(folder), get_model(model_id)
    assert hf.params == ref.params
    assert hf.active_params == ref.active_params
    assert hf.kv_bytes_per_token("bf16") == ref.kv_bytes_per_token("bf16")
    assert hf.state_bytes_per_sequence("bf16") == ref.state_bytes_per_sequence("bf16")
    assert len(hf.layer_sequence) == len(ref.layer_sequence)
    assert hf.origin.startswith("config.json:")
    assert get_model(str(folder / "config.json")).params == ref.params  # also by file path


def test_layer_order_of_hybrids_is_kept(tmp_path):
    hf = load_hf_config(write(tmp_path, "jamba", CONFIGS["jamba-v0.1"]))
    kinds = [[hf.block(b).kind for b in layer] for layer in hf.layer_sequence]
    assert kinds[4] == ["attention", "mlp"] and kinds[1] == ["mamba1", "moe"] and kinds[0] == ["mamba1", "mlp"]


def test_unsupported_architecture_names_the_type_and_the_supported_ones(tmp_path):
    folder = write(tmp_path, "rwkv", {"model_type": "rwkv", "hidden_size": 2048})
    with pytest.raises(ModelError) as err:
        load_hf_config(folder)
    msg = str(err.value)
    assert "model_type 'rwkv' is not supported" in msg
    for t in SUPPORTED:
        assert t in msg


def test_missing_size_key_is_named(tmp_path):
    data = dict(CONFIGS["llama-3-8b"])
    del data["num_attention_heads"]
    with pytest.raises(ModelError, match="required key 'num_attention_heads' is missing"):
        load_hf_config(write(tmp_path, "broken", data))


def test_bad_json_and_missing_file(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelError, match="not valid JSON"):
        load_hf_config(tmp_path)
    with pytest.raises(ModelError, match="file not found"):
        load_hf_config(tmp_path / "nowhere" / "config.json")


def test_activation_keys_choose_the_mlp_op(tmp_path):
    """nemotron_h's mlp_hidden_act relu2 -> mlp_relu2; zamba2's hidden_act gelu -> gated_mlp_geglu."""
    from ssmbench.analytic.workloads.phases import plan
    nem = load_hf_config(write(tmp_path, "nem", CONFIGS["nemotron-h-8b"]))
    zam = load_hf_config(write(tmp_path, "zam", CONFIGS["zamba2-2.7b"]))
    assert {c.op for c in plan(nem, "prefill") if "mlp" in c.op} == {"mlp_relu2"}
    assert {c.op for c in plan(zam, "prefill") if "mlp" in c.op} == {"gated_mlp_geglu"}
    tanh = load_hf_config(write(tmp_path, "zam_tanh", {**CONFIGS["zamba2-2.7b"], "hidden_act": "gelu_pytorch_tanh"}))
    assert {c.op for c in plan(tanh, "prefill") if "mlp" in c.op} == {"gated_mlp_geglu"}


@pytest.mark.parametrize("model_id, key, value, supported", [
    ("nemotron-h-8b", "mlp_hidden_act", "tanh", "gelu, gelu_new, gelu_pytorch_tanh, relu2"),
    ("nemotron-h-8b", "mlp_hidden_act", "silu", "gelu, gelu_new, gelu_pytorch_tanh, relu2"),
    ("zamba2-2.7b", "hidden_act", "relu2", "gelu, gelu_new, gelu_pytorch_tanh, silu, swish"),
])
def test_unsupported_activation_names_the_supported_ones(tmp_path, model_id, key, value, supported):
    folder = write(tmp_path, "bad_act", {**CONFIGS[model_id], key: value})
    with pytest.raises(ModelError, match=f"{key} '{value}' is not supported for a .* MLP; supported: {supported}$"):
        load_hf_config(folder)
