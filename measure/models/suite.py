"""Model suites: which models, phases, runtimes and shapes one device run measures (YAML, checked on
the CPU before any GPU time is spent).

    name: models_h200
    dtype: bf16
    timing: {target_s: 0.3, warmup_s: 0.2}   # measure.timing.TimingSettings keys
    energy_window_s: 1.0                     # NVML window per case, seconds
    profile_steps: 3                         # steps under torch.profiler per case
    profile_top: 40                          # kernels kept per record (all go into the parts)
    entries:
      - model: mamba2-130m                   # a workload id or model file (ssmbench models list)
        runner: mamba_ssm                    # mamba_ssm | hf | vision | graph
        arch: llama                          # hf only: llama | qwen2 | mamba2
        prefill: [[1, 2048], [16, 2048]]     # [batch, prompt tokens]
        decode: [[1, 2048]]                  # [batch, cached context]
        decode_runtimes: [mamba-ssm, cuda-graph]
        train: [[8, 2048]]                   # [batch, sequence]
        optimizer: false                     # train: AdamW step too

The eager runtime of a runner is ``mamba-ssm`` (mamba_ssm, vision, graph) or ``hf-eager`` (hf); prefill
and train run eagerly; decode runs each of ``decode_runtimes`` (default: the eager one).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ...analytic.workloads.models import get_model
from ...errors import UserError
from ...files import UniqueKeyLoader, read_user_text
from . import configs
from .records import RUNTIMES

RUNNERS = ("mamba_ssm", "hf", "vision", "graph")
EAGER_RUNTIME = {"mamba_ssm": "mamba-ssm", "vision": "mamba-ssm", "graph": "mamba-ssm", "hf": "hf-eager"}
SUITE_KEYS = {"name", "dtype", "timing", "energy_window_s", "profile_steps", "profile_top", "entries"}
ENTRY_KEYS = {"model", "runner", "arch", "prefill", "decode", "decode_runtimes", "train", "optimizer", "seed"}
TIMING_KEYS = {"target_s", "warmup_calls", "warmup_s", "min_repeats", "max_repeats", "flush_l2"}


class SuiteError(UserError):
    pass


@dataclass(frozen=True)
class Case:
    entry: dict
    phase: str
    runtime: str
    batch: int
    seqlen: int

    def describe(self) -> dict[str, Any]:
        return {"model": self.entry["model"], "runner": self.entry["runner"], "phase": self.phase,
                "runtime": self.runtime, "batch": self.batch, "seqlen": self.seqlen}


@dataclass(frozen=True)
class ModelSuite:
    name: str
    dtype: str
    timing: dict
    energy_window_s: float
    profile_steps: int
    profile_top: int
    entries: tuple[dict, ...]

    def by_entry(self):
        for e in self.entries:
            yield e, cases_of(e)


def _shapes(where: str, v) -> list[tuple[int, int]]:
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, int) and x > 0
                                                                                    for x in p) for p in v):
        raise SuiteError(f"{where}: expected a list of [batch, tokens] pairs of positive integers, got {v!r}")
    return [tuple(p) for p in v]


def cases_of(e: dict) -> list[Case]:
    eager = EAGER_RUNTIME[e["runner"]]
    out = [Case(e, "prefill", eager, b, s) for b, s in _shapes("prefill", e.get("prefill"))]
    for rt in e.get("decode_runtimes") or [eager]:
        out += [Case(e, "decode", rt, b, s) for b, s in _shapes("decode", e.get("decode"))]
    out += [Case(e, "train", eager, b, s) for b, s in _shapes("train", e.get("train"))]
    return out


def _check_entry(where: str, e: Any) -> dict:
    if not isinstance(e, dict):
        raise SuiteError(f"{where}: expected a mapping, got {type(e).__name__}")
    unknown = sorted(set(e) - ENTRY_KEYS)
    if unknown:
        raise SuiteError(f"{where}: unknown key(s) {unknown}; expected any of {sorted(ENTRY_KEYS)}")
    for k in ("model", "runner"):
        if k not in e:
            raise SuiteError(f"{where}: '{k}' is required")
    if e["runner"] not in RUNNERS:
        raise SuiteError(f"{where}: runner {e['runner']!r} not one of {', '.join(RUNNERS)}")
    try:
        model = get_model(str(e["model"]))
        if e["runner"] == "hf":
            configs.hf_config(model, str(e.get("arch")))
        else:
            configs.mamba_ssm_config(model)
    except UserError as exc:
        raise SuiteError(f"{where}: {exc}") from None
    eager = EAGER_RUNTIME[e["runner"]]
    for rt in e.get("decode_runtimes") or []:
        if rt not in RUNTIMES or rt not in (eager, "cuda-graph"):
            raise SuiteError(f"{where}: decode runtime {rt!r}: this runner measures {eager} or cuda-graph")
    for k in ("prefill", "decode", "train"):
        _shapes(f"{where}.{k}", e.get(k))
    return e


def load_suite(path: str | Path) -> ModelSuite:
    path = Path(path)
    try:
        doc = yaml.load(read_user_text(path, SuiteError), Loader=UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise SuiteError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(doc, dict):
        raise SuiteError(f"{path}: expected a mapping at the top level")
    unknown = sorted(set(doc) - SUITE_KEYS)
    if unknown:
        raise SuiteError(f"{path}: unknown key(s) {unknown}; expected any of {sorted(SUITE_KEYS)}")
    timing = doc.get("timing") or {}
    bad = sorted(set(timing) - TIMING_KEYS)
    if bad:
        raise SuiteError(f"{path}: timing: unknown key(s) {bad}; expected any of {sorted(TIMING_KEYS)}")
    entries = doc.get("entries")
    if not isinstance(entries, list) or not entries:
        raise SuiteError(f"{path}: 'entries' must be a non-empty list")
    checked = tuple(_check_entry(f"{path}: entries[{i}]", e) for i, e in enumerate(entries))
    return ModelSuite(str(doc.get("name") or path.stem), str(doc.get("dtype", "bf16")), dict(timing),
                      float(doc.get("energy_window_s", 1.0)), int(doc.get("profile_steps", 3)),
                      int(doc.get("profile_top", 40)), checked)
