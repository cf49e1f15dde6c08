"""Workloads of an exploration: a YAML file, or the product of model, phase, batch and length lists.

File format (``--workloads FILE``)::

    dtype: bf16                 # optional, default bf16: storage dtype of weights and activations
    workloads:
      - {model: mamba2-2.7b, phase: decode, batch: 64, length: 32768}
      - {model: llama-3-8b, phase: prefill, batch: 1, length: [1024, 8192]}   # a list: one workload each

``model`` is a built-in id or a model file; ``length`` is the prompt (prefill), the sequence (train) or
the context (decode). Unknown keys, missing keys and bad values are errors naming the entry.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import yaml

from ...errors import UserError
from ...files import UniqueKeyLoader, read_user_text
from ..workloads.models import get_model
from .step import Workload

KEYS = ("model", "phase", "batch", "length")


def product(models: Sequence[str], phases: Sequence[str], batches: Sequence[int], lengths: Sequence[int],
            dtype: str = "bf16") -> list[Workload]:
    loaded = {m: get_model(m) for m in models}
    return [Workload(loaded[m], p, int(b), int(n), dtype)
            for m, p, b, n in itertools.product(models, phases, batches, lengths)]


def read(path: str) -> list[Workload]:
    text = read_user_text(path, what="workloads file")
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML ({exc})") from None
    expected = "a mapping with 'workloads:', a list of {model, phase, batch, length}"
    if not isinstance(data, dict) or not isinstance(data.get("workloads"), list) or not data["workloads"]:
        raise UserError(f"{path}: expected {expected}")
    stray = sorted(set(data) - {"workloads", "dtype"})
    if stray:
        raise UserError(f"{path}: unknown key(s) {stray}; expected 'workloads' and optionally 'dtype'")
    dtype = data.get("dtype", "bf16")
    out = []
    for i, entry in enumerate(data["workloads"]):
        where = f"{path}: workloads[{i}]"
        if not isinstance(entry, dict):
            raise UserError(f"{where}: expected a mapping with keys {', '.join(KEYS)}, got {entry!r}")
        missing = [k for k in KEYS if k not in entry]
        stray = sorted(set(entry) - set(KEYS))
        if missing or stray:
            raise UserError(f"{where}: " + "; ".join(
                ([f"missing {', '.join(missing)}"] if missing else []) + ([f"unknown key(s) {stray}"] if stray else []))
                + f" (expected {', '.join(KEYS)})")
        lists = {k: entry[k] if isinstance(entry[k], list) else [entry[k]] for k in KEYS}
        for k in ("batch", "length"):
            bad = [v for v in lists[k] if isinstance(v, bool) or not isinstance(v, int) or v < 1]
            if bad or not lists[k]:
                raise UserError(f"{where}.{k}: expected a positive integer or a list of them, got {entry[k]!r}")
        try:
            out += product([str(m) for m in lists["model"]], [str(p) for p in lists["phase"]], lists["batch"],
                           lists["length"], dtype)
        except UserError as exc:
            raise UserError(f"{where}: {exc}") from None
    return out
