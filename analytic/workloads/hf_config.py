"""Build a model from a local Hugging Face ``config.json`` (no network).

Supported ``model_type`` values and the transformers config class whose keys are read:
``mamba`` and ``falcon_mamba`` (MambaConfig / FalconMambaConfig), ``mamba2`` (Mamba2Config), ``jamba``
(JambaConfig), ``nemotron_h`` (NemotronHConfig), ``zamba2`` (Zamba2Config), ``llama`` and the Llama-like
``qwen2`` and ``mistral`` (LlamaConfig / Qwen2Config / MistralConfig). A ``config.json`` of the
original mamba_ssm checkpoints (``d_model``, ``n_layer``, ``ssm_cfg``, no ``model_type``) is read too.

Sliding-window attention (Mistral's ``sliding_window``; Qwen2's ``use_sliding_window``,
``sliding_window`` and ``max_window_layers``; per-layer ``layer_types`` of 'sliding_attention' /
'full_attention', as Gemma-3 and recent configs write them) becomes an attention block with a
``window`` on the layers it applies to (``_layer_windows``).

Size keys (width, layers, heads, vocabulary, state size) are required: a missing one is an error naming
the key. Keys that transformers fills from its class defaults when a config.json omits them are taken
from the same defaults, listed in ``_DEFAULTS`` per model type (values as in transformers' config
classes), so a config.json means here what it means to transformers.

The result is a model of the same schema as the built-in YAML files (``models.py``); its origin says
which file it came from.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from ...files import read_user_text
from .models import Model, ModelError, parse_model
from .phases import MLP_OPS

SUPPORTED = ("mamba", "falcon_mamba", "mamba2", "jamba", "nemotron_h", "zamba2", "llama", "qwen2", "mistral")

# transformers class defaults for keys a config.json may omit (never sizes).
_DEFAULTS = {
    "mamba": {"state_size": 16, "conv_kernel": 4, "expand": 2, "time_step_rank": "auto", "tie_word_embeddings": True},
    "falcon_mamba": {"state_size": 16, "conv_kernel": 4, "expand": 2, "time_step_rank": "auto",
                     "tie_word_embeddings": True},
    "mamba2": {"state_size": 128, "conv_kernel": 4, "expand": 2, "n_groups": 1, "head_dim": 64, "chunk_size": 256,
               "tie_word_embeddings": True},
    "jamba": {"attn_layer_period": 8, "attn_layer_offset": 4, "expert_layer_period": 2, "expert_layer_offset": 1,
              "num_experts": 16, "num_experts_per_tok": 2, "mamba_d_state": 16, "mamba_d_conv": 4,
              "mamba_expand": 2, "mamba_dt_rank": "auto", "tie_word_embeddings": False},
    "nemotron_h": {"ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4, "expand": 2, "chunk_size": 128,
                   "mlp_hidden_act": "relu2", "tie_word_embeddings": False},
    "zamba2": {"mamba_d_state": 64, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_ngroups": 1, "chunk_size": 256,
               "hidden_act": "gelu", "num_mem_blocks": 1, "tie_word_embeddings": True},
    "llama": {"tie_word_embeddings": False, "attention_bias": False},
    "qwen2": {"tie_word_embeddings": False, "attention_bias": True, "use_sliding_window": False,
              "sliding_window": 4096, "max_window_layers": 28},
    "mistral": {"tie_word_embeddings": False, "attention_bias": False, "sliding_window": 4096},
}
LAYER_TYPES = {"full_attention": None, "sliding_attention": "window"}

_ACT = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_pytorch_tanh": "gelu", "gelu_new": "gelu",
        "relu2": "relu2"}


class _Config:
    def __init__(self, data: dict, where: str, model_type: str):
        self.data, self.where, self.defaults = data, where, _DEFAULTS.get(model_type, {})

    def get(self, key: str, *alts: str):
        for k in (key, *alts):
            if k in self.data and self.data[k] is not None:
                return self.data[k]
        if key in self.defaults:
            return self.defaults[key]
        raise ModelError(f"{self.where}: required key {key!r} is missing" + (f" (or {', '.join(alts)})" if alts else ""))

    def int(self, key: str, *alts: str) -> int:
        v = self.get(key, *alts)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ModelError(f"{self.where}: {key!r} must be a positive integer, got {v!r}")
        return v

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None


def _act(cfg: _Config, key: str, gated: bool) -> str:
    """The MLP activation of ``key``, one that phases.MLP_OPS has an op for with this gating."""
    name = cfg.get(key)
    ok = sorted(k for k, v in _ACT.items() if (v, gated) in MLP_OPS)
    if name not in ok:
        raise ModelError(f"{cfg.where}: {key} {name!r} is not supported for a {'gated' if gated else 'plain'} MLP; "
                         f"supported: {', '.join(ok)}")
    return _ACT[name]


def _dt_rank(value, d_model: int) -> int:
    return math.ceil(d_model / 16) if value == "auto" else int(value)


def _runs(seq: list[list[str]]) -> list[dict]:
    """Compress a layer list into runs of identical consecutive layers."""
    runs: list[dict] = []
    for layer in seq:
        if runs and runs[-1]["blocks"] == layer:
            runs[-1]["repeat"] += 1
        else:
            runs.append({"repeat": 1, "blocks": layer})
    return runs


def _mamba(c: _Config, falcon: bool) -> dict:
    D = c.int("hidden_size", "d_model")
    blk = {"kind": "mamba1", "d_state": c.int("state_size"), "d_conv": c.int("conv_kernel"),
           "expand": c.int("expand"), "dt_rank": _dt_rank(c.get("time_step_rank"), D)}
    if c.has("intermediate_size") and c.int("intermediate_size") != blk["expand"] * D:
        raise ModelError(f"{c.where}: intermediate_size {c.int('intermediate_size')} != expand x hidden_size; "
                         "only integer expand factors are modelled")
    if falcon or c.has("mixer_rms_eps"):
        blk["bcdt_norm"] = True
    return {"family": "mamba1", "d_model": D, "blocks": {"mamba": blk},
            "layers": [{"repeat": c.int("num_hidden_layers", "n_layer"), "blocks": ["mamba"]}]}


def _mamba2_block(c: _Config, D: int, state: str, heads: str, headdim: str, groups: str, expand: str, conv: str) -> dict:
    return {"kind": "mamba2", "d_state": c.int(state), "d_conv": c.int(conv), "expand": c.int(expand),
            "headdim": c.int(headdim), "ngroups": c.int(groups), "chunk_size": c.int("chunk_size"),
            "nheads": c.int(heads)}


def _mamba2(c: _Config) -> dict:
    D = c.int("hidden_size")
    blk = _mamba2_block(c, D, "state_size", "num_heads", "head_dim", "n_groups", "expand", "conv_kernel")
    return {"family": "mamba2", "d_model": D, "blocks": {"mamba": blk},
            "layers": [{"repeat": c.int("num_hidden_layers"), "blocks": ["mamba"]}]}


def _attn(c: _Config, heads="num_attention_heads", kv="num_key_value_heads", head_dim: int | None = None, **kw) -> dict:
    H = c.int(heads)
    G = c.int(kv) if c.has(kv) else H
    D = c.int("hidden_size")
    P = head_dim or (c.int("head_dim") if c.has("head_dim") else D // H)
    return {"kind": "attention", "heads": H, "kv_heads": G, "head_dim": P, **kw}


def _jamba(c: _Config) -> dict:
    D, n = c.int("hidden_size"), c.int("num_hidden_layers")
    ap, ao = c.int("attn_layer_period"), c.get("attn_layer_offset")
    ep, eo = c.int("expert_layer_period"), c.get("expert_layer_offset")
    experts = c.int("num_experts")
    blocks = {
        "mamba": {"kind": "mamba1", "d_state": c.int("mamba_d_state"), "d_conv": c.int("mamba_d_conv"),
                  "expand": c.int("mamba_expand"), "dt_rank": _dt_rank(c.get("mamba_dt_rank"), D),
                  "bcdt_norm": True, "bcdt_norm_weights": True},
        "attn": _attn(c),
        "mlp": {"kind": "mlp", "d_ff": c.int("intermediate_size"), "activation": "silu", "gated": True},
    }
    if experts > 1:
        blocks["moe"] = {"kind": "moe", "d_ff": c.int("intermediate_size"), "experts": experts,
                         "top_k": c.int("num_experts_per_tok"), "activation": "silu", "gated": True}
    seq = [["attn" if i % ap == ao else "mamba", "moe" if experts > 1 and i % ep == eo else "mlp"] for i in range(n)]
    return {"family": "hybrid", "d_model": D, "blocks": blocks, "layers": _runs(seq)}


def _nemotron_h(c: _Config) -> dict:
    D = c.int("hidden_size")
    if c.has("hybrid_override_pattern"):
        pattern = c.get("hybrid_override_pattern")
    elif c.has("layers_block_type"):
        rev = {"mamba": "M", "linear_attention": "M", "attention": "*", "full_attention": "*", "mlp": "-", "moe": "E"}
        try:
            pattern = "".join(rev[t] for t in c.get("layers_block_type"))
        except (KeyError, TypeError):
            raise ModelError(f"{c.where}: layers_block_type must list mamba / attention / mlp / moe layers") from None
    else:
        raise ModelError(f"{c.where}: required key 'hybrid_override_pattern' (or 'layers_block_type') is missing")
    if not isinstance(pattern, str) or not pattern or set(pattern) - set("M*-E"):
        raise ModelError(f"{c.where}: hybrid_override_pattern must use M, *, - and E, got {pattern!r}")
    act = _act(c, "mlp_hidden_act", gated=False)
    blocks = {"mamba": _mamba2_block(c, D, "ssm_state_size", "mamba_num_heads", "mamba_head_dim", "n_groups",
                                     "expand", "conv_kernel"),
              "attn": _attn(c, head_dim=c.int("head_dim") if c.has("head_dim") else None),
              "mlp": {"kind": "mlp", "d_ff": c.int("intermediate_size"), "activation": act, "gated": False}}
    mapping = {"M": ["mamba"], "*": ["attn"], "-": ["mlp"]}
    if "E" in pattern:
        blocks["moe"] = {"kind": "moe", "d_ff": c.int("moe_intermediate_size"), "experts": c.int("n_routed_experts"),
                         "top_k": c.int("num_experts_per_tok"), "activation": act, "gated": False}
        mapping["E"] = ["moe"]
        if c.has("n_shared_experts") and c.get("n_shared_experts"):
            blocks["shared_expert"] = {"kind": "mlp", "d_ff": c.int("moe_shared_expert_intermediate_size"),
                                       "activation": act, "gated": False}
            mapping["E"] = ["moe", "shared_expert"]
    used = {k: v for k, v in mapping.items() if k in pattern}
    blocks = {k: v for k, v in blocks.items() if any(k in seq for seq in used.values())}
    return {"family": "hybrid", "d_model": D, "blocks": blocks, "pattern": {"string": pattern, "map": used}}


def _zamba2(c: _Config) -> dict:
    D, n = c.int("hidden_size"), c.int("num_hidden_layers")
    if c.has("layers_block_type"):
        types = c.get("layers_block_type")
    else:  # Zamba2Config's default layout
        types = ["mamba"] + (["mamba"] * 5 + ["hybrid"]) * 7 + ["mamba"] * 4 + ["hybrid"] + ["mamba"] * 3 + ["hybrid"] + ["mamba"] * 2
    if len(types) != n or set(types) - {"mamba", "hybrid"}:
        raise ModelError(f"{c.where}: layers_block_type must list {n} entries of 'mamba' or 'hybrid'")
    H = c.int("num_attention_heads")
    mamba = _mamba2_block(c, D, "mamba_d_state", "n_mamba_heads", "mamba_headdim", "mamba_ngroups", "mamba_expand",
                          "mamba_d_conv") if c.has("mamba_headdim") else None
    if mamba is None:
        heads = c.int("n_mamba_heads")
        mamba = {"kind": "mamba2", "d_state": c.int("mamba_d_state"), "d_conv": c.int("mamba_d_conv"),
                 "expand": c.int("mamba_expand"), "headdim": c.int("mamba_expand") * D // heads,
                 "ngroups": c.int("mamba_ngroups"), "chunk_size": c.int("chunk_size"), "nheads": heads}
    blocks = {"mamba": mamba, "proj": {"kind": "linear"}}
    mem = c.int("num_mem_blocks")
    F = c.int("intermediate_size") if c.has("intermediate_size") else 4 * D
    act = _act(c, "hidden_act", gated=True)
    for i in range(mem):
        blocks[f"attn_{i}"] = {"kind": "attention", "heads": H, "kv_heads": c.int("num_key_value_heads") if c.has("num_key_value_heads") else H,
                               "head_dim": 2 * D // H, "d_in": 2 * D, "shared": True}
        blocks[f"mlp_{i}"] = {"kind": "mlp", "d_ff": F, "activation": act, "gated": True, "shared": True}
    seq, k = [], 0
    for t in types:
        if t == "hybrid":
            seq.append([f"attn_{k % mem}", f"mlp_{k % mem}", "proj", "mamba"])
            k += 1
        else:
            seq.append(["mamba"])
    return {"family": "hybrid", "d_model": D, "blocks": blocks, "layers": _runs(seq)}


def _window_size(c: _Config) -> int | None:
    """``sliding_window``: an explicit null means none; absent, the class default (Mistral, Qwen2: 4096)."""
    w = c.data["sliding_window"] if "sliding_window" in c.data else c.defaults.get("sliding_window")
    if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w <= 0):
        raise ModelError(f"{c.where}: 'sliding_window' must be a positive integer or null, got {w!r}")
    return w


def _layer_windows(c: _Config, model_type: str, n: int) -> list[int | None]:
    """The sliding window of each layer (None: full attention), as transformers reads the config:
    ``layer_types`` when given (Gemma-3, recent Qwen2 / Mistral configs: 'sliding_attention' or
    'full_attention' per layer); else Qwen2's ``use_sliding_window`` with the window on layers
    >= ``max_window_layers`` (Qwen2Config); else Mistral's ``sliding_window`` on every layer."""
    types = c.data.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != n or any(t not in LAYER_TYPES for t in types):
            raise ModelError(f"{c.where}: layer_types must list {n} entries of {' or '.join(map(repr, LAYER_TYPES))}")
        w = _window_size(c) if "sliding_attention" in types else None
        if "sliding_attention" in types and w is None:
            raise ModelError(f"{c.where}: layer_types has 'sliding_attention' layers but 'sliding_window' is null")
        return [w if LAYER_TYPES[t] else None for t in types]
    if model_type == "qwen2":
        if not c.get("use_sliding_window"):
            return [None] * n
        w, first = _window_size(c), c.get("max_window_layers")
        return [w if i >= first else None for i in range(n)]
    if model_type == "mistral":
        return [_window_size(c)] * n
    return [None] * n


def _llama(c: _Config, model_type: str) -> dict:
    D, n = c.int("hidden_size"), c.int("num_hidden_layers")
    attn = _attn(c, qkv_bias=bool(c.get("attention_bias")))
    # RoPE over partial_rotary_factor of each head's dims (1 unless the config says otherwise)
    attn["rope_dim"] = int(attn["head_dim"] * float(c.data.get("partial_rotary_factor") or 1.0)) // 2 * 2
    blocks = {"mlp": {"kind": "mlp", "d_ff": c.int("intermediate_size"), "activation": "silu", "gated": True}}
    windows = _layer_windows(c, model_type, n)
    seq = []
    for w in windows:
        name = "attn" if w is None else "attn_swa"  # one block per window: occurrences share its shape
        blocks[name] = attn if w is None else {**attn, "window": w}
        seq.append([name, "mlp"])
    return {"family": "transformer", "d_model": D, "blocks": blocks, "layers": _runs(seq)}


def _mamba_ssm(c: _Config) -> dict:
    """The original mamba_ssm config.json: d_model, n_layer, ssm_cfg, attn_layer_idx, attn_cfg."""
    D, n = c.int("d_model"), c.int("n_layer")
    ssm = c.data.get("ssm_cfg") or {}
    if ssm.get("layer", "Mamba1") == "Mamba2":
        E = ssm.get("expand", 2) * D
        hd = ssm.get("headdim", 64)
        mixer = {"kind": "mamba2", "d_state": ssm.get("d_state", 128), "d_conv": ssm.get("d_conv", 4),
                 "expand": ssm.get("expand", 2), "headdim": hd, "ngroups": ssm.get("ngroups", 1),
                 "chunk_size": ssm.get("chunk_size", 256), "nheads": E // hd}
    else:
        mixer = {"kind": "mamba1", "d_state": ssm.get("d_state", 16), "d_conv": ssm.get("d_conv", 4),
                 "expand": ssm.get("expand", 2), "dt_rank": _dt_rank(ssm.get("dt_rank", "auto"), D)}
    blocks = {"mamba": mixer}
    attn_idx = set(c.data.get("attn_layer_idx") or [])
    if attn_idx:
        a = c.data.get("attn_cfg") or {}
        H = a.get("num_heads")
        if not H:
            raise ModelError(f"{c.where}: attn_cfg.num_heads is required when attn_layer_idx is set")
        blocks["attn"] = {"kind": "attention", "heads": H, "kv_heads": a.get("num_heads_kv") or H,
                          "head_dim": a.get("head_dim") or D // H, "qkv_bias": bool(a.get("qkv_proj_bias", True)),
                          "out_bias": bool(a.get("out_proj_bias", True))}
        if a.get("rotary_emb_dim"):
            blocks["attn"]["rope_dim"] = int(a["rotary_emb_dim"])
    seq = [["attn" if i in attn_idx else "mamba"] for i in range(n)]
    d_int = c.data.get("d_intermediate") or 0
    if d_int:
        blocks["mlp"] = {"kind": "mlp", "d_ff": d_int, "activation": "silu", "gated": True}
        seq = [layer + ["mlp"] for layer in seq]
    family = "hybrid" if attn_idx else mixer["kind"]
    pad = c.data.get("pad_vocab_size_multiple", 8)
    vocab = math.ceil(c.int("vocab_size") / pad) * pad
    return {"family": family, "d_model": D, "blocks": blocks, "layers": _runs(seq), "vocab": vocab,
            "tie_embeddings": bool(c.data.get("tie_embeddings", True))}


_BUILDERS = {"mamba": lambda c: _mamba(c, False), "falcon_mamba": lambda c: _mamba(c, True), "mamba2": _mamba2,
             "jamba": _jamba, "nemotron_h": _nemotron_h, "zamba2": _zamba2, "llama": lambda c: _llama(c, "llama"),
             "qwen2": lambda c: _llama(c, "qwen2"), "mistral": lambda c: _llama(c, "mistral")}


def _slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-._")
    return s or "model"


def model_from_hf(data: object, where: str, name: str | None = None) -> Model:
    """A Model from the parsed contents of a config.json."""
    if not isinstance(data, dict):
        raise ModelError(f"{where}: expected a JSON object, got {type(data).__name__}")
    model_type = data.get("model_type")
    if model_type is None and "d_model" in data and "n_layer" in data:
        model_type = "mamba_ssm"
    elif model_type not in SUPPORTED:
        raise ModelError(f"{where}: model_type {model_type!r} is not supported; supported: {', '.join(SUPPORTED)} "
                         "(and mamba_ssm checkpoints' config.json)")
    c = _Config(data, where, model_type)
    body = _mamba_ssm(c) if model_type == "mamba_ssm" else _BUILDERS[model_type](c)
    ident = _slug(name or data.get("_name_or_path") or model_type)
    spec = {
        "schema_version": 1, "id": ident, "name": f"{ident} (from {Path(where).name})",
        "sources": {"config": {"title": f"Hugging Face config.json read from {where}", "tag": "P"}},
        "vocab": body.pop("vocab", None) or c.int("vocab_size"),
        "tie_embeddings": body.pop("tie_embeddings", None) if "tie_embeddings" in body else bool(c.get("tie_word_embeddings")),
        "norm": "rmsnorm", **body,
    }
    return parse_model(spec, f"config.json: {where}")


def load_hf_config(path: str | Path) -> Model:
    """A Model from a config.json file, or from a folder holding one."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    text = read_user_text(p, ModelError)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelError(f"{p}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return model_from_hf(data, str(p), name=p.parent.name if p.parent.name else None)
