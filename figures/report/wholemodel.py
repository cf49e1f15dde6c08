"""Whole-model level of the report: matched SSM / attention *models* among the model-run records
(``measure/models``, files ``model-run-*.json``) under the report's result folders.

A whole-model pair is an SSM model (no attention layer) and an attention model (every mixer attention)
measured in the same phase, runtime, batch, sequence length and dtype, at the same model width
``d_model`` and with parameter counts within ``MAX_PARAM_RATIO`` of each other: only then does the time
ratio compare mixers rather than model sizes. Hybrids (SSM and attention layers) are neither side. The
mixers of a model come from its description in the model catalogue (``analytic.workloads.models``).
Where no pair exists, ``WholeModels.why_none`` says which models were measured and why none pairs: the
report states that whole-model matched pairs were not measured rather than comparing unmatched sizes.
The pairs' ratios, verdicts and crossovers are ``wholemodel_eval.py``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ...errors import UserError

MAX_PARAM_RATIO = 1.25  # larger / smaller parameter count of a pair: beyond it size, not mixer, sets the ratio
SSM, ATTENTION, HYBRID = "SSM", "attention", "hybrid"


@dataclass
class ModelInfo:
    model: str
    kind: str            # SSM, attention or hybrid
    d_model: int
    params: int | None   # as measured (the record's parameter count)


@dataclass
class ModelPair:
    phase: str
    runtime: str
    batch: int
    seqlen: int
    ssm: dict
    attention: dict

    @property
    def length(self) -> int:  # tokens: the prompt (prefill), the sequence (train) or the cached context (decode)
        return self.seqlen

    @property
    def time_ratio(self) -> float:
        return self.attention["time_s"]["median"] / self.ssm["time_s"]["median"]

    @property
    def energy_ratio(self) -> float | None:
        e = [(r.get("energy") or {}).get("joules_per_call") for r in (self.attention, self.ssm)]
        return e[0] / e[1] if all(isinstance(x, (int, float)) and x > 0 for x in e) else None


@dataclass
class WholeModels:
    models: list[ModelInfo] = field(default_factory=list)
    pairs: list[ModelPair] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    @property
    def why_none(self) -> str:
        if not self.files:
            return "no model-run files (model-run-*.json) lie under the result folders"
        listed = "; ".join(f"{m.model} ({m.kind}, d_model {m.d_model}, "
                           f"{m.params / 1e6:.0f}M parameters)" if m.params else f"{m.model} ({m.kind}, d_model "
                           f"{m.d_model})" for m in self.models)
        return (f"the models measured ok are {listed or 'none'}; a pair needs an SSM model and an attention model "
                f"at the same d_model, parameter counts within {MAX_PARAM_RATIO:g}x, and the same phase, runtime, "
                "batch and length, and no two records meet that")


def _info(rec: dict) -> ModelInfo | None:
    from ...analytic.workloads.models import Attention, get_model

    try:
        m = get_model(rec["model"])
    except UserError:
        return None  # not in the catalogue: its mixers are unknown, it pairs with nothing
    attn = [isinstance(m.block(n), Attention) for layer in m.layer_sequence for n in layer[:1]]
    kind = ATTENTION if all(attn) else SSM if not any(attn) else HYBRID
    return ModelInfo(rec["model"], kind, m.d_model, rec.get("params"))


def _matched(a: ModelInfo, b: ModelInfo) -> bool:
    if a.d_model != b.d_model or not a.params or not b.params:
        return False
    return max(a.params, b.params) / min(a.params, b.params) <= MAX_PARAM_RATIO


def _where(rec: dict) -> tuple:
    return rec["phase"], rec["runtime"], rec["batch"], rec["seqlen"], rec["dtype"]


def whole_models(folders: list[str | Path]) -> WholeModels:
    """Read every model-run file under the folders and pair their ok records by the module's rule."""
    from ...measure.models.records import find_model_runs, standing_records

    paths = sorted({p for f in folders for p in find_model_runs(f)})
    out = WholeModels(files=[str(p) for p in paths])
    ok = [r for r in standing_records(paths) if r["status"] == "ok" and (r.get("time_s") or {}).get("median")]
    info: dict[str, ModelInfo] = {}
    for r in ok:
        if r["model"] not in info and (i := _info(r)) is not None:
            info[r["model"]] = i
    out.models = sorted(info.values(), key=lambda m: (m.kind, m.params or 0, m.model))
    for s in (r for r in ok if getattr(info.get(r["model"]), "kind", None) == SSM):
        for a in (r for r in ok if getattr(info.get(r["model"]), "kind", None) == ATTENTION):
            if _where(s) == _where(a) and _matched(info[s["model"]], info[a["model"]]):
                out.pairs.append(ModelPair(s["phase"], s["runtime"], s["batch"], s["seqlen"], s, a))
    out.pairs.sort(key=lambda p: (p.phase, p.runtime, p.batch, p.seqlen, p.ssm["model"], p.attention["model"]))
    return out
