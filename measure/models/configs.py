"""A workload model (``analytic/workloads/models/*.yaml``) as the config of a library that builds it.

One definition serves both sides: the runner builds its random-initialised torch model from the same
file the analytic model costs, so a measured record and its prediction are of the same model. These
functions return plain dicts (no torch, no library import): ``mamba_ssm_config`` the keyword
arguments of mamba-ssm's ``MambaConfig``, ``hf_config`` the keys of a Hugging Face config (the
``model_type`` among them). ``analytic/workloads/hf_config.model_from_hf`` reads both forms back, so
a test checks that the round trip gives the same parameter count and layer sequence.

What each library can express, and the error for anything else (``ConfigError``, naming the block):

- mamba-ssm ``MambaLMHeadModel`` (``create_block``): every layer is one mixer (all SSM mixers of one
  kind and shape; attention layers through ``attn_layer_idx``) optionally followed by the same gated
  SiLU MLP (``d_intermediate``); RMSNorm; no RoPE (mamba-ssm's MHA needs flash-attn's rotary kernel,
  which the device does not have). Mamba-3 layers are not in ``create_block`` of mamba-ssm
  2.3.2.post1: the builder swaps ``Mamba3`` mixers in (``ssm_cfg.layer = "Mamba3"``).
- Hugging Face ``llama`` / ``qwen2``: every layer [attention, gated SiLU MLP], one attention shape.
  ``mamba2``: every layer one Mamba-2 mixer.
"""

from __future__ import annotations

from ...analytic.workloads.models import MLP, Attention, Mamba1, Mamba2, Mamba3, Model
from ...errors import UserError

HF_ARCHS = ("llama", "qwen2", "mamba2")
# mamba-ssm's GatedMLP rounds hidden_features up to a multiple of this (modules/mlp.py, multiple_of=128)
GATED_MLP_MULTIPLE = 128
RMS_EPS = 1e-5


class ConfigError(UserError):
    """A workload model that the named library cannot build as written."""


def _layers(model: Model) -> list[list]:
    return [[(name, model.block(name)) for name in layer] for layer in model.layer_sequence]


def _one(model: Model, kinds: tuple[type, ...], what: str):
    """The one block definition of these kinds the model uses (several different ones: an error)."""
    found = {name: model.block(name) for name in model.block_counts if isinstance(model.block(name), kinds)}
    shapes = {b.model_dump_json() for b in found.values()}
    if len(shapes) > 1:
        raise ConfigError(f"{model.id}: {what} blocks {sorted(found)} differ in shape; the library builds one shape")
    return next(iter(found.values()), None)


def _mlp_width(model: Model, lib: str) -> int:
    mlp = _one(model, (MLP,), "MLP")
    if mlp is None:
        return 0
    if not (mlp.gated and mlp.activation == "silu") or mlp.bias:
        raise ConfigError(f"{model.id}: {lib} builds gated SiLU MLPs without bias; got activation "
                          f"{mlp.activation}, gated {mlp.gated}, bias {mlp.bias}")
    return mlp.d_ff


def mamba_ssm_config(model: Model) -> dict:
    """``MambaConfig`` keyword arguments for ``model`` (see the module docstring for what fits)."""
    if model.spec.norm != "rmsnorm" or model.spec.position_embeddings:
        raise ConfigError(f"{model.id}: mamba-ssm's MixerModel uses RMSNorm and no position table")
    ssm = _one(model, (Mamba1, Mamba2, Mamba3), "SSM")
    attn = _one(model, (Attention,), "attention")
    d_ff = _mlp_width(model, "mamba-ssm")
    if d_ff % GATED_MLP_MULTIPLE:
        raise ConfigError(f"{model.id}: d_ff {d_ff} is not a multiple of {GATED_MLP_MULTIPLE} (GatedMLP rounds it up)")
    attn_idx = []
    for i, layer in enumerate(_layers(model)):
        kinds = [type(b) for _, b in layer]
        mixer = kinds[0]
        if kinds[1:] not in ([], [MLP]) or (d_ff and kinds[1:] != [MLP]) or mixer not in (Mamba1, Mamba2, Mamba3,
                                                                                          Attention):
            raise ConfigError(f"{model.id}: layer {i} is {[n for n, _ in layer]}; mamba-ssm builds [mixer] or "
                              "[mixer, mlp] with the same MLP in every layer")
        if mixer is Attention:
            attn_idx.append(i)
    cfg: dict = {"d_model": model.d_model, "d_intermediate": d_ff, "n_layer": len(model.layer_sequence),
                 "vocab_size": model.spec.vocab, "rms_norm": True, "residual_in_fp32": True, "fused_add_norm": True,
                 "pad_vocab_size_multiple": 1, "tie_embeddings": model.spec.tie_embeddings,
                 "attn_layer_idx": attn_idx, "attn_cfg": {}, "ssm_cfg": {}}
    if isinstance(ssm, Mamba1):
        if ssm.bcdt_norm:
            raise ConfigError(f"{model.id}: mamba-ssm's Mamba module has no B/C/Delta norm (Falcon-Mamba, Jamba)")
        cfg["ssm_cfg"] = {"layer": "Mamba1", "d_state": ssm.d_state, "d_conv": ssm.d_conv, "expand": ssm.expand,
                          "dt_rank": ssm.dt_rank}
    elif isinstance(ssm, Mamba2):
        cfg["ssm_cfg"] = {"layer": "Mamba2", "d_state": ssm.d_state, "d_conv": ssm.d_conv, "expand": ssm.expand,
                          "headdim": ssm.headdim, "ngroups": ssm.ngroups, "chunk_size": ssm.chunk_size}
    elif isinstance(ssm, Mamba3):
        cfg["ssm_cfg"] = {"layer": "Mamba3", "d_state": ssm.d_state, "expand": ssm.expand, "headdim": ssm.headdim,
                          "ngroups": ssm.ngroups, "chunk_size": ssm.chunk_size, "rope_fraction": ssm.rope_fraction,
                          "is_mimo": ssm.mimo_rank > 1, "mimo_rank": ssm.mimo_rank}
    if attn is not None:
        if attn.rope_dim is not None or attn.window is not None or attn.d_in is not None:
            raise ConfigError(f"{model.id}: mamba-ssm's MHA is built here without RoPE (needs flash-attn), window "
                              "or a wider input; give the attention block none of rope_dim, window, d_in")
        cfg["attn_cfg"] = {"num_heads": attn.heads, "num_heads_kv": attn.kv_heads, "head_dim": attn.head_dim,
                           "qkv_proj_bias": attn.qkv_bias, "out_proj_bias": attn.out_bias, "causal": True}
    return cfg


def hf_config(model: Model, arch: str) -> dict:
    """The keys of a Hugging Face config of ``arch`` (``HF_ARCHS``) for ``model``."""
    if arch not in HF_ARCHS:
        raise ConfigError(f"Hugging Face architecture {arch!r} is not built here; expected one of {', '.join(HF_ARCHS)}")
    n = len(model.layer_sequence)
    base = {"model_type": arch, "hidden_size": model.d_model, "num_hidden_layers": n, "vocab_size": model.spec.vocab,
            "tie_word_embeddings": model.spec.tie_embeddings, "rms_norm_eps": RMS_EPS}
    if arch == "mamba2":
        ssm = _one(model, (Mamba2,), "Mamba-2")
        if ssm is None or any(len(layer) != 1 or not isinstance(b, Mamba2) for layer in _layers(model) for _, b in layer):
            raise ConfigError(f"{model.id}: HF Mamba2 builds layers of one Mamba-2 mixer each")
        return {**base, "state_size": ssm.d_state, "expand": ssm.expand, "head_dim": ssm.headdim,
                "num_heads": ssm.heads(model.d_model), "n_groups": ssm.ngroups, "conv_kernel": ssm.d_conv,
                "chunk_size": ssm.chunk_size, "use_bias": False, "use_conv_bias": True, "residual_in_fp32": True}
    attn = _one(model, (Attention,), "attention")
    d_ff = _mlp_width(model, "Hugging Face")
    if attn is None or any([type(b) for _, b in layer] != [Attention, MLP] for layer in _layers(model)):
        raise ConfigError(f"{model.id}: HF {arch} builds layers of [attention, gated MLP]")
    if attn.window is not None or attn.d_in is not None or attn.out_bias:
        raise ConfigError(f"{model.id}: HF {arch} is built here with full attention of width d_model and no "
                          "output bias")
    if arch == "qwen2" and not attn.qkv_bias:
        raise ConfigError(f"{model.id}: Qwen2's q/k/v projections have biases (qkv_bias: true)")
    cfg = {**base, "intermediate_size": d_ff, "num_attention_heads": attn.heads, "num_key_value_heads": attn.kv_heads,
           "head_dim": attn.head_dim, "max_position_embeddings": 32768, "hidden_act": "silu"}
    if attn.rope_dim is not None and attn.rope_dim != attn.head_dim:
        cfg["partial_rotary_factor"] = attn.rope_dim / attn.head_dim
    if arch == "llama":
        cfg["attention_bias"] = attn.qkv_bias
    else:
        cfg["use_sliding_window"] = False
    return cfg
