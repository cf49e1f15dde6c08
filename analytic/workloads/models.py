"""Model definitions: plain YAML files (``models/*.yaml``), parsed strictly, one schema for SSMs,
hybrids and transformers.

A model is a width ``d_model``, a vocabulary, named **blocks** (a mixer or an FFN with its own
dimensions) and a **layer sequence**: each layer is a list of block names run in order (a Jamba layer
is ``[mamba, moe]``, a Llama layer ``[attn, mlp]``, a Zamba2 hybrid layer
``[shared_attn, shared_mlp, proj, mamba]``). The sequence is written either as ``layers`` (runs of
``{repeat, blocks}``) or as ``pattern`` (one character per layer, Nemotron-H style, with a ``map``).

What this module counts (the op-level costs live in ``phases.py`` and ``ops/``):

- **parameters**: every weight matrix, bias and per-channel vector of a block, by the formulas in each
  block's ``params``; embeddings (``vocab x d_model``), the LM head unless tied, the final norm and a
  learned position table if any. A block marked ``shared`` (Zamba2's shared transformer blocks) counts
  its weights once however often it runs. MoE **active** parameters count the router and top_k of
  the experts.
- **KV cache**: only attention blocks, one cache per occurrence in the layer sequence:
  2 (K and V) x kv_heads x head_dim elements per token at the KV-cache dtype. A block with a sliding
  ``window`` W (Mistral, Qwen2, Gemma-style local attention) keeps only the last W tokens: per
  sequence min(tokens, W) tokens (``kv_cache_bytes``).
- **recurrent state per sequence**: only SSM blocks, at the state dtype, which defaults to the model
  dtype as mamba-ssm allocates it (``allocate_inference_cache`` of ``mamba_ssm/modules/mamba_simple.py``
  and ``mamba2.py``: conv state at ``conv1d.weight.dtype``, SSM state at ``dt_proj`` / ``in_proj``
  weight dtype, "ssm_dtype = torch.float32" left commented out); fp32 is an explicit choice. The
  conv state (channels x d_conv) and the SSM state: Mamba-1 E x N; Mamba-2 H x P x N; Mamba-3 its k
  (rank x H x N) and v (H x P) states at the state dtype, plus H x P x N SSM and rotary-angle
  (H x angles) states that ``mamba_ssm/modules/mamba3.py`` always allocates in fp32.

Not counted: RoPE tables (computed, not stored), LoRA adapters of Zamba2's shared blocks (rank 128,
under 2% of a shared block's weights), dropout.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal, Union

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError, model_validator

from ...errors import UserError
from ...files import UniqueKeyLoader, read_user_text
from ..conventions import nbytes

# Mamba-3's SSM and rotary-angle states: torch.float32 whatever the model dtype
# (mamba_ssm/modules/mamba3.py, allocate_inference_cache).
MAMBA3_FIXED_STATE_DTYPE = "fp32"

SCHEMA_VERSION = 1
FAMILIES = ("mamba1", "mamba2", "mamba3", "hybrid", "transformer")
SSM_KINDS = ("mamba1", "mamba2", "mamba3")


class ModelError(UserError):
    """A model that cannot be used; ``str()`` names the file or id, the key and what was expected."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(_Strict):
    title: str
    url: str | None = None
    tag: Literal["P", "S", "R", "D", "A"]
    note: str | None = None


class _Block(_Strict):
    shared: bool = False  # weights counted once, however often the block runs

    def params(self, d_model: int) -> int:
        raise NotImplementedError

    def active_params(self, d_model: int) -> int:
        return self.params(d_model)

    def kv_elements_per_token(self) -> int:
        return 0

    def state_bytes(self, d_model: int, state_dtype: str) -> int:
        return 0


class Mamba1(_Block):
    kind: Literal["mamba1"]
    d_state: PositiveInt
    d_conv: PositiveInt
    expand: PositiveInt
    dt_rank: PositiveInt
    bcdt_norm: bool = False  # RMSNorm on B, C and Delta (Falcon-Mamba, Jamba)
    bcdt_norm_weights: bool = False  # Jamba's have weights, Falcon-Mamba's do not

    def d_inner(self, d_model: int) -> int:
        return self.expand * d_model

    def params(self, d_model: int) -> int:
        D, E, N, K, R = d_model, self.d_inner(d_model), self.d_state, self.d_conv, self.dt_rank
        p = D  # pre-norm
        p += D * 2 * E  # in_proj -> x, z
        p += E * K + E  # depthwise conv weight + bias
        p += E * (R + 2 * N)  # x_proj -> dt, B, C
        p += R * E + E  # dt_proj + bias
        p += E * N + E  # A_log, D
        p += E * D  # out_proj
        if self.bcdt_norm_weights:
            p += 2 * N + R
        return p

    def state_bytes(self, d_model: int, state_dtype: str) -> int:
        E = self.d_inner(d_model)
        return (E * self.d_conv + E * self.d_state) * nbytes(state_dtype)


class Mamba2(_Block):
    kind: Literal["mamba2"]
    d_state: PositiveInt
    d_conv: PositiveInt
    expand: PositiveInt
    headdim: PositiveInt
    ngroups: PositiveInt
    chunk_size: PositiveInt
    nheads: PositiveInt | None = None  # derived as expand * d_model / headdim when absent

    def d_inner(self, d_model: int) -> int:
        return self.expand * d_model

    def heads(self, d_model: int) -> int:
        return self.nheads or self.d_inner(d_model) // self.headdim

    def conv_channels(self, d_model: int) -> int:
        return self.d_inner(d_model) + 2 * self.ngroups * self.d_state

    def in_proj_out(self, d_model: int) -> int:
        return 2 * self.d_inner(d_model) + 2 * self.ngroups * self.d_state + self.heads(d_model)

    def params(self, d_model: int) -> int:
        D, E, H = d_model, self.d_inner(d_model), self.heads(d_model)
        Cc = self.conv_channels(d_model)
        return D + D * self.in_proj_out(d_model) + Cc * self.d_conv + Cc + 3 * H + E + E * D

    def state_bytes(self, d_model: int, state_dtype: str) -> int:
        H, P, N = self.heads(d_model), self.headdim, self.d_state
        return (self.conv_channels(d_model) * self.d_conv + H * P * N) * nbytes(state_dtype)


class Mamba3(_Block):
    """Mamba-3 (mamba_ssm/modules/mamba3.py): no conv; in_proj -> z, x, B, C (rank M), dt, A, trap,
    rotary angles; RMSNorm on B and C; MIMO adds per-head rank-M projections of x, z and y."""

    kind: Literal["mamba3"]
    d_state: PositiveInt
    expand: PositiveInt
    headdim: PositiveInt
    ngroups: PositiveInt = 1
    mimo_rank: PositiveInt = 1  # 1 = SISO
    chunk_size: PositiveInt
    rope_fraction: Literal[0.5, 1.0] = 0.5

    def d_inner(self, d_model: int) -> int:
        return self.expand * d_model

    def heads(self, d_model: int) -> int:
        return self.d_inner(d_model) // self.headdim

    def rope_angles(self) -> int:
        split = int(self.d_state * self.rope_fraction)
        return (split - split % 2) // 2

    def in_proj_out(self, d_model: int) -> int:
        E, H = self.d_inner(d_model), self.heads(d_model)
        return 2 * E + 2 * self.d_state * self.ngroups * self.mimo_rank + 3 * H + self.rope_angles()

    def params(self, d_model: int) -> int:
        D, E, H, N, M, P = d_model, self.d_inner(d_model), self.heads(d_model), self.d_state, self.mimo_rank, self.headdim
        p = D + D * self.in_proj_out(d_model)
        p += H + 2 * H * M * N + 2 * N + H  # dt_bias, B/C biases, B/C norm weights, D
        if M > 1:
            p += 3 * H * M * P  # mimo_x, mimo_z, mimo_o
        return p + E * D

    def state_bytes(self, d_model: int, state_dtype: str) -> int:
        H, P, N, M = self.heads(d_model), self.headdim, self.d_state, self.mimo_rank
        fixed = (H * P * N + H * self.rope_angles()) * nbytes(MAMBA3_FIXED_STATE_DTYPE)
        return fixed + (M * H * N + H * P) * nbytes(state_dtype)


class Attention(_Block):
    kind: Literal["attention"]
    heads: PositiveInt
    kv_heads: PositiveInt
    head_dim: PositiveInt
    d_in: PositiveInt | None = None  # input width when it differs from d_model (Zamba2: 2 x d_model)
    qkv_bias: bool = False
    out_bias: bool = False
    window: PositiveInt | None = None  # sliding window: each query attends its last `window` keys
    rope_dim: PositiveInt | None = None  # dims of each q / k head that RoPE rotates; None: no RoPE

    @model_validator(mode="after")
    def _gqa(self):
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be divisible by kv_heads ({self.kv_heads})")
        if self.rope_dim is not None and (self.rope_dim > self.head_dim or self.rope_dim % 2):
            raise ValueError(f"rope_dim ({self.rope_dim}) must be even and at most head_dim ({self.head_dim})")
        return self

    def width_in(self, d_model: int) -> int:
        return self.d_in or d_model

    def params(self, d_model: int) -> int:
        Din, H, G, P = self.width_in(d_model), self.heads, self.kv_heads, self.head_dim
        p = Din + Din * (H + 2 * G) * P + H * P * d_model
        if self.qkv_bias:
            p += (H + 2 * G) * P
        if self.out_bias:
            p += d_model
        return p

    def kv_elements_per_token(self) -> int:
        return 2 * self.kv_heads * self.head_dim

    def cached_tokens(self, tokens):
        """Tokens of a sequence of ``tokens`` this block's cache keeps (ints or arrays)."""
        return tokens if self.window is None else np.minimum(tokens, self.window)


class MLP(_Block):
    kind: Literal["mlp"]
    d_ff: PositiveInt
    activation: Literal["gelu", "silu", "relu2"]
    gated: bool
    bias: bool = False

    def params(self, d_model: int) -> int:
        D, F = d_model, self.d_ff
        p = D + (3 if self.gated else 2) * D * F
        if self.bias:
            p += (2 if self.gated else 1) * F + D
        return p


class MoE(_Block):
    kind: Literal["moe"]
    d_ff: PositiveInt
    experts: PositiveInt
    top_k: PositiveInt
    activation: Literal["gelu", "silu", "relu2"] = "silu"
    gated: bool = True

    @model_validator(mode="after")
    def _topk(self):
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) must be at most experts ({self.experts})")
        return self

    def _expert(self, d_model: int) -> int:
        return (3 if self.gated else 2) * d_model * self.d_ff

    def params(self, d_model: int) -> int:
        return d_model + d_model * self.experts + self.experts * self._expert(d_model)

    def active_params(self, d_model: int) -> int:
        return d_model + d_model * self.experts + self.top_k * self._expert(d_model)


class Linear(_Block):
    kind: Literal["linear"]
    d_in: PositiveInt | None = None
    d_out: PositiveInt | None = None

    def params(self, d_model: int) -> int:
        return (self.d_in or d_model) * (self.d_out or d_model)


BlockDef = Annotated[Union[Mamba1, Mamba2, Mamba3, Attention, MLP, MoE, Linear], Field(discriminator="kind")]


class LayerRun(_Strict):
    """``repeat`` copies of one layer (``blocks``) or of a unit of several layers (``unit``)."""

    repeat: PositiveInt = 1
    blocks: list[str] | None = Field(default=None, min_length=1)
    unit: list[list[str]] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one(self):
        if (self.blocks is None) == (self.unit is None):
            raise ValueError("a layer run gives exactly one of 'blocks' (one layer) or 'unit' (a list of layers)")
        if self.unit is not None and any(not layer for layer in self.unit):
            raise ValueError("every layer of a unit names at least one block")
        return self

    def layer_list(self) -> list[list[str]]:
        return [self.blocks] if self.blocks is not None else self.unit


class Pattern(_Strict):
    string: str = Field(min_length=1)
    map: dict[str, list[str]]


class ModelSpec(_Strict):
    schema_version: Literal[1]
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    name: str
    family: Literal["mamba1", "mamba2", "mamba3", "hybrid", "transformer"]
    sources: dict[str, Source] = Field(min_length=1)
    notes: str | None = None
    d_model: PositiveInt
    vocab: PositiveInt
    tie_embeddings: bool
    norm: Literal["rmsnorm", "layernorm"]
    position_embeddings: int = Field(default=0, ge=0)  # rows of a learned position table
    # bidirectional by alternation (a Vision-Mamba layout): the sequence and its fp32 residual are
    # flipped along the tokens between consecutive layers (phases.plan costs the flips as copies)
    flip_between_layers: bool = False
    blocks: dict[str, BlockDef] = Field(min_length=1)
    layers: list[LayerRun] | None = None
    pattern: Pattern | None = None

    @model_validator(mode="after")
    def _layout(self):
        if (self.layers is None) == (self.pattern is None):
            raise ValueError("give exactly one of 'layers' (runs of blocks) or 'pattern' (one character per layer)")
        names = set(self.blocks)
        used = [b for run in (self.layers or []) for layer in run.layer_list() for b in layer]
        if self.pattern is not None:
            bad = sorted(set(self.pattern.string) - set(self.pattern.map))
            if bad:
                raise ValueError(f"pattern.string has character(s) {bad} missing from pattern.map")
            used += [b for seq in self.pattern.map.values() for b in seq]
        unknown = sorted(set(used) - names)
        if unknown:
            raise ValueError(f"layers name unknown block(s) {unknown}; defined blocks: {sorted(names)}")
        for name, blk in self.blocks.items():
            if isinstance(blk, (Mamba2, Mamba3)) and blk.d_inner(self.d_model) % blk.headdim:
                raise ValueError(f"blocks.{name}: expand x d_model = {blk.d_inner(self.d_model)} "
                                 f"must be divisible by headdim {blk.headdim}")
            if isinstance(blk, Mamba2) and blk.nheads is not None and blk.nheads * blk.headdim != blk.d_inner(self.d_model):
                raise ValueError(f"blocks.{name}: nheads x headdim = {blk.nheads * blk.headdim} must equal "
                                 f"expand x d_model = {blk.d_inner(self.d_model)}")
            if isinstance(blk, (Mamba2, Mamba3)) and blk.heads(self.d_model) % blk.ngroups:
                raise ValueError(f"blocks.{name}: heads ({blk.heads(self.d_model)}) must be divisible by ngroups ({blk.ngroups})")
        return self


@dataclass(frozen=True, eq=False)
class Model:
    """A parsed model: the spec plus the layer sequence expanded and the derived counts.
    Compared and hashed by identity (plans are cached per model object)."""

    spec: ModelSpec
    origin: str  # file path or "config.json: <path>"

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def d_model(self) -> int:
        return self.spec.d_model

    @cached_property
    def layer_sequence(self) -> tuple[tuple[str, ...], ...]:
        s = self.spec
        if s.layers is not None:
            return tuple(tuple(layer) for run in s.layers for _ in range(run.repeat) for layer in run.layer_list())
        return tuple(tuple(s.pattern.map[ch]) for ch in s.pattern.string)

    @cached_property
    def block_counts(self) -> dict[str, int]:
        """Occurrences of each block in the layer sequence (how often it runs per token)."""
        counts: dict[str, int] = {}
        for layer in self.layer_sequence:
            for b in layer:
                counts[b] = counts.get(b, 0) + 1
        return counts

    def block(self, name: str):
        return self.spec.blocks[name]

    def count_kind(self, *kinds: str) -> int:
        return sum(n for b, n in self.block_counts.items() if self.block(b).kind in kinds)

    def _weight_instances(self, name: str) -> int:
        return 1 if self.block(name).shared else self.block_counts[name]

    def _outer_params(self) -> int:
        s = self.spec
        emb = s.vocab * s.d_model
        return emb + (0 if s.tie_embeddings else emb) + s.d_model + s.position_embeddings * s.d_model

    @cached_property
    def params(self) -> int:
        D = self.d_model
        return self._outer_params() + sum(self._weight_instances(b) * self.block(b).params(D) for b in self.block_counts)

    @cached_property
    def active_params(self) -> int:
        """Parameters one token touches (MoE: router + top_k experts)."""
        D = self.d_model
        return self._outer_params() + sum(
            self._weight_instances(b) * self.block(b).active_params(D) for b in self.block_counts)

    def weight_bytes(self, dtype: str) -> int:
        return self.params * nbytes(dtype)

    def kv_bytes_per_token(self, dtype: str) -> int:
        """KV-cache bytes one sequence adds per token: attention blocks only (windowed blocks add
        these only up to their window; ``kv_cache_bytes`` applies it)."""
        return sum(n * self.block(b).kv_elements_per_token() for b, n in self.block_counts.items()) * nbytes(dtype)

    def kv_cache_bytes(self, dtype: str, tokens):
        """KV-cache bytes of one sequence of ``tokens`` tokens: per attention block min(tokens, window)
        tokens (all of them without a window). Ints or numpy arrays."""
        return sum(n * self.block(b).kv_elements_per_token() * self.block(b).cached_tokens(tokens)
                   for b, n in self.block_counts.items() if self.block(b).kind == "attention") * nbytes(dtype)

    def windowed_attention(self) -> dict[str, tuple[int, tuple[int, ...]]]:
        """{block: (window, layer indices)} of the attention blocks with a sliding window."""
        out = {}
        for b in self.block_counts:
            blk = self.block(b)
            if blk.kind == "attention" and blk.window is not None:
                out[b] = (blk.window, tuple(i for i, layer in enumerate(self.layer_sequence) if b in layer))
        return out

    def state_bytes_per_sequence(self, state_dtype: str) -> int:
        """Conv + SSM state bytes one sequence holds at ``state_dtype``: SSM blocks only (independent of
        length; Mamba-3's SSM and angle states stay fp32, see the module docstring)."""
        return sum(n * self.block(b).state_bytes(self.d_model, state_dtype) for b, n in self.block_counts.items())

    def summary(self) -> dict:
        s = self.spec
        return {
            "id": s.id, "name": s.name, "family": s.family, "layers": len(self.layer_sequence),
            "d_model": s.d_model, "vocab": s.vocab,
            "ssm_blocks": self.count_kind(*SSM_KINDS), "attention_blocks": self.count_kind("attention"),
            "moe_blocks": self.count_kind("moe"),
            "params": self.params, "active_params": self.active_params,
            "kv_cache_bytes_per_token_bf16": self.kv_bytes_per_token("bf16"),
            "state_bytes_per_sequence_bf16": self.state_bytes_per_sequence("bf16"),
            "origin": self.origin,
        }


def _describe(err: dict) -> str:
    loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key (not part of model schema v1; check its spelling and place)"
    elif err["type"] == "missing":
        msg = "required key is missing"
    elif err["type"] == "union_tag_invalid":
        msg = "unknown block kind; expected one of mamba1, mamba2, mamba3, attention, mlp, moe, linear"
    return f"{loc}: {msg}" if loc else msg


def parse_model(data: object, origin: str = "<data>") -> Model:
    if not isinstance(data, dict):
        raise ModelError(f"{origin}: expected a mapping of model keys at the top level, got {type(data).__name__}")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise ModelError(f"{origin}: schema_version: expected {SCHEMA_VERSION}, got {data.get('schema_version')!r}")
    try:
        spec = ModelSpec.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            line = _describe(err)
            if line not in lines:
                lines.append(line)
        raise ModelError("\n".join(f"{origin}: {line}" for line in lines)) from None
    return Model(spec, origin)


def load_model_file(path: str | Path) -> Model:
    path = Path(path)
    text = read_user_text(path, ModelError)
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise ModelError(f"{path}: not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    return parse_model(data, str(path))


def builtin_dir() -> Path:
    return Path(str(resources.files("ssmbench.analytic.workloads") / "models"))


_CACHE: dict[str, Model] = {}


def builtin_models() -> dict[str, Model]:
    """Every built-in model by id (parsed once per process)."""
    if not _CACHE:
        found: dict[str, Model] = {}
        for f in sorted(builtin_dir().glob("*.yaml")):
            m = load_model_file(f)
            if m.id in found:
                raise ModelError(f"{f}: id {m.id!r} is already used by {found[m.id].origin}")
            found[m.id] = m
        _CACHE.update(found)
    return dict(_CACHE)


def get_model(id_or_path: str) -> Model:
    """A built-in model by id, a model YAML file, or a Hugging Face config.json (or its folder)."""
    p = Path(id_or_path)
    if p.suffix in (".yaml", ".yml"):
        return load_model_file(p)
    if p.name == "config.json" or p.suffix == ".json" or p.is_dir():
        from .hf_config import load_hf_config
        return load_hf_config(p)
    models = builtin_models()
    if id_or_path not in models:
        close = [m for m in models if id_or_path.lower() in m]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ModelError(f"unknown model {id_or_path!r}{hint}; known: {', '.join(sorted(models))}; "
                         "or give a model .yaml file or a Hugging Face config.json")
    return models[id_or_path]

