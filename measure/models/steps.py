"""The measured call of each phase of a built model (GPU): a callable that runs one step.

- ``prefill``: one forward of ``batch`` prompts of ``seqlen`` tokens under ``torch.inference_mode``,
  logits of the last token only (what generation needs; the analytic plan's ``logits='last'``).
- ``decode``: one decode step of ``batch`` sequences at a fixed context ``seqlen``: the cache holds
  ``seqlen`` tokens and every call writes the new token at the same position, so each timed call is
  the same step (the cache content is zeros: the time does not depend on it).
  mamba-ssm: ``InferenceParams`` with ``seqlen_offset = seqlen`` (the mixers' ``step`` path); its MHA
  attends the one query to every cached key (``causal`` is off for the step, as a query at the end
  of the sequence sees all keys: mamba-ssm's SDPA fallback would otherwise apply a top-left causal
  mask). Hugging Face: a ``StaticCache`` of ``seqlen + 1`` tokens and ``cache_position = [seqlen]``.
  Runtime ``cuda-graph``: the same step captured once and replayed (``timing.make_timed_callable``),
  as mamba-ssm's ``generate(cg=True)`` does.
- ``train``: forward over ``batch`` x ``seqlen`` tokens, cross-entropy against the next token (or
  the class), backward; with ``optimizer`` an AdamW step (foreach) and ``zero_grad``.

A phase that a runner cannot run raises ``Unsupported(reason)``; the record says so.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable


class Unsupported(RuntimeError):
    """This runner cannot run this phase or runtime; the message says why."""


def prefill_call(built, batch: int, seqlen: int) -> Callable[[], Any]:
    import torch

    x = built.make_inputs(batch, seqlen)

    def call():
        with torch.inference_mode():
            return built.forward(x, None, last_only=True)
    return call


@contextlib.contextmanager
def _decode_attention(module):
    """mamba-ssm MHA modules with ``causal`` off while a decode step runs (see the module docstring)."""
    mha = [m for m in module.modules() if type(m).__name__ == "MHA"]
    saved = [m.causal for m in mha]
    for m in mha:
        m.causal = False
    try:
        yield
    finally:
        for m, c in zip(mha, saved):
            m.causal = c


def _static_cache(lm, batch: int, length: int, device, dtype):
    """A transformers StaticCache; its constructor's keywords changed across versions."""
    from transformers import StaticCache

    tries = ({"config": lm.config, "max_batch_size": batch, "max_cache_len": length, "device": device, "dtype": dtype},
             {"config": lm.config, "batch_size": batch, "max_cache_len": length, "device": device, "dtype": dtype},
             {"config": lm.config, "max_cache_len": length})
    errors = []
    for kw in tries:
        try:
            return StaticCache(**kw)
        except TypeError as exc:
            errors.append(str(exc))
    raise Unsupported("transformers StaticCache could not be built: " + " | ".join(errors))


def decode_call(built, entry: dict, batch: int, context: int) -> tuple[Callable[[], Any], Any]:
    """(call, context manager to hold while timing) of one decode step at ``context`` cached tokens."""
    import torch

    tok = built.make_inputs(batch, 1)
    runner = entry["runner"]
    lm = built.module
    if runner == "mamba_ssm":
        if any(type(m).__name__ == "Mamba3" for m in lm.modules()):
            raise Unsupported("Mamba-3's decode step needs the CuTe DSL packages, which the device does not have "
                              "(shared/GPU.md)")
        from mamba_ssm.utils.generation import InferenceParams

        dtype = next(lm.parameters()).dtype
        params = InferenceParams(max_seqlen=context + 1, max_batch_size=batch)
        params.key_value_memory_dict = lm.allocate_inference_cache(batch, context + 1, dtype=dtype)
        params.seqlen_offset = context
        params.lengths_per_sample = torch.full((batch,), context, dtype=torch.int32, device=tok.device)

        def call():
            with torch.inference_mode():
                return built.forward(tok, params, last_only=True)
        return call, _decode_attention(lm)
    if runner == "hf" and entry.get("arch") in ("llama", "qwen2"):
        dtype = next(lm.parameters()).dtype
        cache = _static_cache(lm, batch, context + 1, tok.device, dtype)
        pos = torch.tensor([context], device=tok.device)

        def call():
            with torch.inference_mode():
                return built.forward(tok, (cache, pos), last_only=True)
        return call, contextlib.nullcontext()
    raise Unsupported(f"no decode step is wired for runner {runner!r} ({entry.get('arch') or entry['model']})")


def train_call(built, batch: int, seqlen: int, optimizer: bool) -> Callable[[], Any]:
    import torch
    import torch.nn.functional as F

    lm = built.module
    lm.train()
    x = built.make_inputs(batch, seqlen)
    opt = torch.optim.AdamW(lm.parameters(), lr=1e-4, foreach=True) if optimizer else None

    def call():
        logits = built.forward(x, None)
        target = built.targets(x, logits)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
        loss.backward()
        if opt is not None:
            opt.step()
            opt.zero_grad(set_to_none=True)
        else:
            lm.zero_grad(set_to_none=True)
        return loss
    return call


def count_module_calls(call: Callable[[], Any]) -> int:
    """nn.Module forward calls in one run of ``call`` (a global forward pre-hook, removed after)."""
    from torch.nn.modules.module import register_module_forward_pre_hook

    n = 0

    def hook(module, args):
        nonlocal n
        n += 1
    handle = register_module_forward_pre_hook(hook)
    try:
        call()
    finally:
        handle.remove()
    return n
