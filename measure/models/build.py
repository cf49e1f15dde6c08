"""Random-initialised torch models from workload files (GPU; heavy imports inside the functions).

``build(entry, device, dtype)`` returns a ``Built``: the module and the one forward the phases call,
``forward(inputs, cache) -> logits``, so that prefill, decode and training run the same code for every
runner:

- ``mamba_ssm``: ``MambaLMHeadModel(MambaConfig(**configs.mamba_ssm_config(model)))``; Mamba-3 mixers
  are swapped into the blocks (mamba-ssm 2.3.2.post1's ``create_block`` knows Mamba1 and Mamba2 only).
  Prefill computes the last token's logits (``num_last_tokens=1``), as generation does.
- ``hf``: ``AutoModelForCausalLM.from_config(<Llama|Qwen2|Mamba2>Config(**configs.hf_config(...)),
  attn_implementation=...)``: "sdpa" for the attention models, "eager" for Mamba2 (it has no attention,
  and transformers refuses SDPA for Mamba2ForCausalLM; the record's runtime_note says so); prefill asks
  for the last token's logits (``logits_to_keep=1``).
- ``vision`` / ``graph`` (``domains.py``): the mamba-ssm backbone of the workload with the domain's
  input and a pooled classifier head.

No weights are downloaded: every model is built from its config with the library's own initialisation.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from ...analytic.workloads.models import get_model
from . import configs

RUNNERS = ("mamba_ssm", "hf", "vision", "graph")
# transformers' attention implementation per architecture: SDPA where there is attention; Mamba2 has none,
# and transformers (4.5x) refuses "sdpa" for Mamba2ForCausalLM (device run 2026-12-03), so "eager".
HF_ATTENTION = {"mamba2": "eager"}
HF_RUNTIME_NOTES = {"mamba2": 'attn_implementation="eager": Mamba2 has no attention layer, and transformers '
                              'refuses "sdpa" for Mamba2ForCausalLM; the mixers take mamba-ssm\'s kernels '
                              '(its fast path) when they import'}


@dataclass
class Built:
    module: Any
    forward: Callable[..., Any]  # (inputs, cache) -> logits tensor
    make_inputs: Callable[[int, int], Any]  # (batch, tokens) -> inputs on the device
    targets: Callable[[Any, Any], Any]  # (inputs, logits) -> integer targets for the loss
    library: str
    notes: list[str]
    runtime_note: str | None = None  # how the runtime differs from the suite's name for it


def _dtype(torch, name: str):
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]


def _swap_mamba3(lm, ssm_cfg: dict, device, dtype) -> None:
    from mamba_ssm.modules.mamba3 import Mamba3

    kw = {k: v for k, v in ssm_cfg.items() if k != "layer"}
    for i, block in enumerate(lm.backbone.layers):
        if type(block.mixer).__name__ in ("Mamba", "Mamba2"):
            block.mixer = Mamba3(lm.config.d_model, layer_idx=i, device=device, dtype=dtype, **kw)


def mamba_ssm_ready() -> None:
    """Wait for the CUDA extensions mamba-ssm imports (built in the background by the device script),
    then bind causal-conv1d into mamba-ssm's modules (``measure/extensions.py``)."""
    from ..extensions import bind_causal_conv1d, ensure_extension

    ensure_extension("selective_scan_cuda")
    bind_causal_conv1d()


MAMBA_SSM_EXTENSIONS = ("selective_scan_cuda", "causal_conv1d_cuda")


def needed_extensions(entry: dict) -> tuple[str, ...]:
    """The compiled extensions a suite entry imports (the runner waits for their builds before building
    the model): mamba-ssm's for its own runners and for HF Mamba2 (whose fast path takes them)."""
    if entry["runner"] in ("mamba_ssm", "vision", "graph") or entry.get("arch") == "mamba2":
        return MAMBA_SSM_EXTENSIONS
    return ()


def wait_for_extensions(entry: dict) -> float:
    """Wait for (and import) the extensions of ``needed_extensions``; seconds waited."""
    import time

    from ..extensions import ensure_extension

    t0 = time.monotonic()
    for module in needed_extensions(entry):
        ensure_extension(module)
    return time.monotonic() - t0


def build_mamba_ssm(model, device, dtype):
    mamba_ssm_ready()
    from mamba_ssm.models.config_mamba import MambaConfig
    from mamba_ssm.models.mixer_seq_simple import MambaLMHeadModel

    cfg = configs.mamba_ssm_config(model)
    ssm_cfg = dict(cfg["ssm_cfg"])
    mamba3 = ssm_cfg.get("layer") == "Mamba3"
    if mamba3:  # built with Mamba2 placeholders, then swapped (see the module docstring)
        cfg = {**cfg, "ssm_cfg": {"layer": "Mamba2", "d_state": 16, "expand": 1, "headdim": 8}}
    lm = MambaLMHeadModel(MambaConfig(**cfg), device=device, dtype=dtype)
    if mamba3:
        _swap_mamba3(lm, ssm_cfg, device, dtype)
    lm.eval()
    return lm


def _lm_inputs(vocab: int, device):
    import torch

    def make(batch: int, tokens: int):
        return torch.randint(0, vocab, (batch, tokens), device=device)
    return make


def _next_token_targets(inputs, logits):
    """Language modelling: each position predicts the next token (the last predicts token 0)."""
    import torch

    return torch.roll(inputs, -1, dims=1)


def build(entry: dict, device, dtype_name: str) -> Built:
    """Build the model of a suite entry (``runner``, ``model``, ``arch``) on ``device``."""
    import torch

    torch.manual_seed(int(entry.get("seed", 0)))
    dtype = _dtype(torch, dtype_name)
    model = get_model(entry["model"])
    runner = entry["runner"]
    if runner == "mamba_ssm":
        lm = build_mamba_ssm(model, device, dtype)

        def forward(inputs, cache=None, last_only=False):
            return lm(inputs, inference_params=cache, num_last_tokens=1 if last_only else 0).logits
        return Built(lm, forward, _lm_inputs(model.spec.vocab, device), _next_token_targets, "mamba_ssm", [])
    if runner == "hf":
        import transformers

        arch = entry["arch"]
        if arch == "mamba2":  # HF Mamba2 takes mamba-ssm's kernels when they import (its fast path)
            mamba_ssm_ready()
        cls = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config,
               "mamba2": transformers.Mamba2Config}[arch]
        keys = {k: v for k, v in configs.hf_config(model, arch).items() if k != "model_type"}
        cfg = cls(**keys)
        attn = HF_ATTENTION.get(arch, "sdpa")
        # built on the GPU at the model dtype (a CPU fp32 build and init of a 1B model takes many seconds)
        saved = torch.get_default_dtype()
        try:
            torch.set_default_dtype(dtype)
            with torch.device(device):
                lm = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=attn)
        finally:
            torch.set_default_dtype(saved)
        lm = lm.to(device=device, dtype=dtype).eval()
        params = inspect.signature(lm.forward).parameters
        keep = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None)

        def forward(inputs, cache=None, last_only=False):
            kw = {keep: 1} if last_only and keep else {}
            if cache is not None:  # (StaticCache, cache_position): steps.hf_decode_cache
                kw.update(past_key_values=cache[0], cache_position=cache[1], use_cache=True)
            else:
                kw["use_cache"] = False
            logits = lm(inputs, **kw).logits
            return logits[:, -1:] if last_only and not keep else logits
        notes = [f"attention implementation: {getattr(lm.config, '_attn_implementation', None)}"]
        if not keep:
            notes.append("this transformers version has no logits_to_keep: prefill computes every token's logits")
        note = HF_RUNTIME_NOTES.get(arch)
        return Built(lm, forward, _lm_inputs(model.spec.vocab, device), _next_token_targets,
                     f"transformers {transformers.__version__}", notes, note)
    if runner in ("vision", "graph"):
        from .domains import build_domain
        return build_domain(runner, model, entry, device, dtype)
    raise ValueError(f"unknown runner {runner!r}; expected one of {RUNNERS}")


def count_params(module) -> int:
    """Parameters of the built module, tied weights once (``parameters()`` yields a shared one once)."""
    return sum(p.numel() for p in module.parameters())
