"""One report, as data: the matched pairs of the result folders evaluated on a spec (``build``), and
the one-paragraph answer to the project's question written from those numbers (``answer``).

The answer's numbers are medians over the matched points (a point counts once whatever its regime):
the FLOP ratio (*analytic count*), the time ratio and the energy ratio (*measurements*), and the
realised fraction (time ratio / FLOP ratio) over points where the SSM does less arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...calibrate.profile import Profile
from ...hwspecs import Spec
from .caveats import REPORT_OPS, caveats
from .models import EnergyPredictor, Models
from .pairs import DEFAULT_KV_HEADS, MATCHING_RULE, Matched, match
from .regimes import GO, NO_GO, RegimeResult, Rule, evaluate, median_of
from .stats import RunSpread, run_spread
from .wholemodel import WholeModels, whole_models
from .wholemodel_eval import WholeModelResults, evaluate_models

# Words of the answer's first sentence, by the median realised fraction
PROPORTIONAL = 0.8   # at least this: "nearly proportionally"
FAR_BELOW = 0.5      # below this: "far from proportionally"


@dataclass
class Report:
    matched: Matched
    spec: Spec
    profile: Profile | None
    rule: Rule
    kv_heads: int
    spread: RunSpread
    regimes: list[RegimeResult]
    caveats: list[dict]
    matching_rule: str = MATCHING_RULE
    whole: WholeModels | None = None  # the whole-model level: matched models, or why none
    whole_results: WholeModelResults | None = None  # their ratios, verdicts and crossovers (None: no pair)

    @property
    def points(self):
        return [p for r in self.regimes for p in r.points]

    @property
    def predicts_energy(self) -> bool:
        return any(p.ssm.predicted_energy or p.base.predicted_energy for p in self.points)


def build(folders: list[str | Path], spec: Spec, profile: Profile | None = None, rule: Rule | None = None,
          kv_heads: int = DEFAULT_KV_HEADS, energy: EnergyPredictor | None = None,
          prefer: str = "measured") -> Report:
    from ...errors import UserError

    rule = rule or Rule()
    matched = match(folders, kv_heads)
    if not matched.points:
        ssm = sorted({r["op"] for r in matched.records.values() if r["op"] in REPORT_OPS and r.status == "ok"})
        raise UserError(
            f"--results {', '.join(map(str, folders))}: no matched SSM / attention pairs (ops measured ok there: "
            f"{', '.join(ssm) or 'none of the compared ops'}). A pair needs an SSM op or block and causal attention "
            f"(or the attention block) at the same dtype, batch, width, length and timing method, attention with "
            f"{kv_heads} KV heads (--kv-heads); measure/suites/matched_pairs_h200_*.yaml measure such pairs")
    spread = run_spread(matched.files, REPORT_OPS)
    results = evaluate(matched, Models(spec, profile, prefer, energy), spread, rule)
    whole = whole_models(folders)
    return Report(matched, spec, profile, rule, kv_heads, spread, results, caveats(matched, results, spread),
                  whole=whole, whole_results=evaluate_models(whole, spec, rule, spread))


def _x(v: float) -> str:
    return f"{v:.3g}x"


def answer(rep: Report) -> str:
    pts = rep.points
    saving = [p for p in pts if p.flop_ratio > 1]
    flop = median_of(p.flop_ratio for p in saving)
    speed = median_of(p.time.value for p in saving)
    real = [p.realised.value for p in saving]
    energy = [p.energy.value for p in saving if p.energy]
    verdicts: dict[str, list[str]] = {}
    for r in rep.regimes:
        verdicts.setdefault(r.verdict, []).append(r.regime.short)
    said = "; ".join(f"{v} for {', '.join(rs)}" for v, rs in sorted(
        verdicts.items(), key=lambda kv: (kv[0] != GO, not kv[0].startswith("GO"), kv[0] != NO_GO, kv[0])))
    med = median_of(real)
    how = ("nearly proportionally" if med >= PROPORTIONAL else "far from proportionally" if med < FAR_BELOW
           else "less than proportionally")
    lead = "Yes" if med >= PROPORTIONAL else "Partly" if any(r.verdict.startswith(GO) for r in rep.regimes) else "No"
    text = (f"**{lead}, {how}.** On the {rep.matched.device} ({rep.spec.id}), over "
            f"{len(pts)} matched SSM / attention points in {len(rep.regimes)} regimes, at the points where the SSM "
            f"does less arithmetic ({len(saving)}) attention does a median {_x(flop)} the SSM's FLOPs (analytic "
            f"count), yet the SSM runs a median {_x(speed)} faster (measurement): the realised fraction (time ratio / "
            f"FLOP ratio) has a median of {med:.2g} (range {min(real):.2g} to {max(real):.2g}), so the "
            f"GPU turns a small part of the arithmetic savings into speed.")
    if energy:
        text += (f" Energy per call falls by a median {_x(median_of(energy))} (measurement, NVML; {len(energy)} of "
                 f"those points have energy on both sides).")
    text += (f" Verdicts under the rule (at least {rep.rule.min_speedup:g}x faster and {rep.rule.min_energy:g}x less "
             f"energy, {rep.rule.confidence:.0%} confidence): {said}.")
    if rep.whole_results:
        w = rep.whole_results.regimes
        pairs = sorted({f"{s.ssm_model} vs {s.attention_model}" for r in w for s in r.series})
        text += (f" Whole models ({'; '.join(pairs)}, same width; measurement): "
                 + "; ".join(f"{r.verdict} for {r.phase} ({r.runtime})" for r in w) + ".")
    return text
