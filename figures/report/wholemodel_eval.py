"""The whole-model level evaluated as the op and block levels are (``regimes.py``): per matched model
pair (``wholemodel.py``) the FLOP ratio, time ratio, energy ratio, realised fraction and the verdict of
the same go/no-go rule; per series (phase, runtime, batch, the two models; points differ in length)
the crossover; per regime (phase, runtime) the verdict over its series.

- FLOP ratio (*analytic count*): the attention model's FLOPs per step over the SSM model's, from the
  analytic plan of each model at the pair's phase, batch and length (``analytic.workloads.evaluate.
  analyze``: tensor-core FLOPs of every dtype plus vector FLOPs, every call of the step).
- Time and energy ratios (*measurements*): attention model / SSM model, median time per step and NVML
  joules per step, with the intervals of ``stats.py``: the within-run spread of each median and the
  run-to-run spread of repeated model cases (a model-run key measured ok more than once), or, with
  fewer than ``stats.MIN_REPEAT_PAIRS`` such repeats, the report's op-level run-to-run spread (the same
  device and timing loop), which the section names.
- Crossover: *measured* where the series has two or more lengths (log-log interpolation, as for ops),
  and the *analytic bound* of both models at 512..1M tokens (eager launches, CUDA-graph replays for the
  cuda-graph runtime).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ...hwspecs import Spec
from .regimes import PREDICTED_LENGTHS, Rule, crossing, point_verdict, regime_verdict
from .stats import MIN_REPEAT_PAIRS, Ratio, RunSpread, energy_ratio, time_ratio, z_of
from .wholemodel import ModelPair, WholeModels

GRAPH_RUNTIMES = ("cuda-graph",)  # model-run runtimes that replay CUDA graphs (measure/models/runner.py)


@dataclass
class ModelPointResult:
    pair: ModelPair
    flop_ratio: float
    ssm_flops: float
    attention_flops: float
    time: Ratio
    energy: Ratio | None
    realised: Ratio
    verdict: str
    why: str

    @property
    def point(self) -> ModelPair:  # regime_verdict reads point.length
        return self.pair


@dataclass
class ModelSeries:
    phase: str
    runtime: str
    batch: int
    ssm_model: str
    attention_model: str
    points: list[ModelPointResult]
    crossover: dict[str, dict]

    @property
    def title(self) -> str:
        return f"{self.ssm_model} vs {self.attention_model}, B={self.batch}"


@dataclass
class ModelRegime:
    phase: str
    runtime: str
    series: list[ModelSeries]
    verdict: str
    verdict_text: str
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"whole-{self.phase}-{self.runtime}"

    @property
    def title(self) -> str:
        return f"Whole model, {self.phase} ({self.runtime} runtime)"

    @property
    def points(self) -> list[ModelPointResult]:
        return [p for s in self.series for p in s.points]


@dataclass
class WholeModelResults:
    regimes: list[ModelRegime]
    spread: RunSpread
    spread_source: str  # "model" (repeated model cases) or "op" (the report's op-level spread)


def model_spread(paths: list[str | Path]) -> RunSpread:
    """Run-to-run spread of repeated model cases (``stats.py``'s rule on model-run records: successive
    ok records of one key, files in name (time) order)."""
    from ...measure.models.records import read_model_run

    seen: dict[tuple[str, str], float] = {}
    d: dict[str, list[float]] = {"time": [], "energy": []}
    for p in sorted(paths, key=lambda x: Path(x).name):
        for r in read_model_run(p)["records"]:
            if r["status"] != "ok":
                continue
            vals = {"time": (r.get("time_s") or {}).get("median"),
                    "energy": (r.get("energy") or {}).get("joules_per_call")}
            for what, v in vals.items():
                if not isinstance(v, (int, float)) or v <= 0:
                    continue
                if (r["key"], what) in seen:
                    d[what].append(math.log(v / seen[(r["key"], what)]))
                seen[(r["key"], what)] = v

    def rms(x):
        return math.sqrt(sum(v * v for v in x) / (2 * len(x))) if x else None
    return RunSpread(rms(d["time"]), len(d["time"]), rms(d["energy"]), len(d["energy"]), "repeated model cases")


def _analyze(model: str, phase: str, batch: int, lengths: list[float], spec: Spec, runtime: str):
    from ...analytic.roofline import COL, TENSOR_DTYPES, SpecTable
    from ...analytic.workloads.evaluate import analyze
    from ...analytic.workloads.models import get_model

    launch = "graph" if runtime in GRAPH_RUNTIMES else "eager"
    r = analyze(get_model(model), phase, SpecTable.of([spec]), [batch], lengths, launch=launch, keep_calls=True)
    w = r.call_work  # [n_calls, n_cols, nb, nl], multiplicities applied
    flops = sum(w[:, COL[f"tensor.{d}"]] for d in TENSOR_DTYPES) + w[:, COL["vector"]]
    return flops.sum(axis=0)[0], r.time_s[0, 0]  # [nl] FLOPs per step, [nl] analytic bound in s


def _point(pair: ModelPair, flops: tuple[float, float], spread: RunSpread, rule: Rule) -> ModelPointResult:
    z = z_of(rule.confidence)
    t = time_ratio(pair.attention["time_s"], pair.ssm["time_s"], spread, z)
    e_a, e_s = ((r.get("energy") or {}).get("joules_per_call") for r in (pair.attention, pair.ssm))
    e = energy_ratio(e_a, e_s, spread, z) if e_a and e_s else None
    f_ssm, f_att = flops
    flop = f_att / f_ssm
    verdict, why = point_verdict(t, e, rule)
    return ModelPointResult(pair, flop, f_ssm, f_att, t, e, t.scaled(1 / flop), verdict, why)


def evaluate_models(whole: WholeModels, spec: Spec, rule: Rule, op_spread: RunSpread) -> WholeModelResults | None:
    """The whole-model regimes of the matched model pairs (None where there are none)."""
    if not whole.pairs:
        return None
    spread, source = model_spread(whole.files), "model"
    if spread.time_pairs < MIN_REPEAT_PAIRS:
        spread, source = op_spread, "op"
    groups: dict[tuple, list[ModelPair]] = {}
    for p in whole.pairs:
        groups.setdefault((p.phase, p.runtime, p.batch, p.ssm["model"], p.attention["model"]), []).append(p)
    by_regime: dict[tuple[str, str], list[ModelSeries]] = {}
    for (phase, runtime, batch, sm, am), pairs in sorted(groups.items()):
        pairs.sort(key=lambda p: p.seqlen)
        lengths = [float(p.seqlen) for p in pairs]
        fs, bs = _analyze(sm, phase, batch, lengths + PREDICTED_LENGTHS, spec, runtime)
        fa, ba = _analyze(am, phase, batch, lengths + PREDICTED_LENGTHS, spec, runtime)
        n = len(pairs)
        pts = [_point(p, (float(fs[i]), float(fa[i])), spread, rule) for i, p in enumerate(pairs)]
        if n > 1:
            measured = crossing(lengths, [p.time.value for p in pts])
        else:
            measured = {"length": None, "result": f"one length measured ({pairs[0].seqlen:,} tokens): no crossover"}
        measured["label"] = "measurement (interpolated between measured lengths)"
        bound = crossing([float(x) for x in PREDICTED_LENGTHS], list(ba[n:] / bs[n:]))
        bound.update(label="analytic bound", range=[PREDICTED_LENGTHS[0], PREDICTED_LENGTHS[-1]])
        by_regime.setdefault((phase, runtime), []).append(
            ModelSeries(phase, runtime, batch, sm, am, pts, {"measured": measured, "bound": bound}))
    regimes = []
    for (phase, runtime), series in sorted(by_regime.items(), key=lambda kv: (_PHASE_ORDER.index(kv[0][0]), kv[0][1])):
        verdict, text, counts = regime_verdict(series)
        regimes.append(ModelRegime(phase, runtime, series, verdict, text, counts))
    return WholeModelResults(regimes, spread, source)


_PHASE_ORDER = ("prefill", "decode", "train")
