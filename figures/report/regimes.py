"""Per point, series and regime: the numbers of the report and the verdicts.

Per matched point (both sides measured at one length):
- FLOP ratio: attention's analytic FLOPs / the SSM's (*analytic count*: the arithmetic savings);
- time ratio: attention's median time / the SSM's (*measurement*; > 1: the SSM is faster), with the
  interval of ``stats.py``;
- energy ratio: attention's joules per call / the SSM's (*measurement*, NVML), where both were measured;
- realised fraction: time ratio / FLOP ratio (1: the savings turn into speed in full);
- per side: the binding resource of the analytic bound and the measured time's percentage of that
  roofline (bound / measured), and the achievable estimate's binding class.

Per series (one SSM variant and batch, over lengths), the crossover: the length from which the SSM
is faster up to the end of the range, *measured* (log-log interpolation between the measured lengths
where the time ratio crosses 1) and predicted by the *calibrated estimate*, the *achievable estimate*
and the *analytic bound* (both sides predicted at lengths 2^9..2^20, interpolated the same way, for
the backends that won the series' longest measured point).

The go/no-go rule: a point is GO when the lower end of the time ratio's interval is at least
``min_speedup`` and the lower end of the energy ratio's interval is at least ``min_energy``; NO-GO when
the upper end of either is below its threshold; otherwise INCONCLUSIVE (an interval straddles a
threshold, or energy was not measured on both sides, or has no interval). A regime is GO or NO-GO when
all its points are (INCONCLUSIVE likewise); GO FROM L when, in every series, exactly the points at lengths >= L are GO (those below L NO-GO or
INCONCLUSIVE); otherwise MIXED, with the counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...measure.results import Record
from .models import Models, at_length
from .pairs import Matched, Point, Regime, graph_timed
from .stats import Ratio, RunSpread, energy_ratio, time_ratio, z_of

# Defaults of the go/no-go rule (the CLI's --min-speedup, --min-energy-saving, --confidence)
MIN_SPEEDUP = 1.2       # 20% faster: above the run-to-run spread of tuned kernels and worth a model change
MIN_ENERGY_SAVING = 1.2  # 20% less energy per call, likewise
CONFIDENCE = 0.95
PREDICTED_LENGTHS = [1 << k for k in range(9, 21)]  # 512 .. 1M tokens: the predicted range of crossovers
NOISY_SPREAD = 1.5       # p80 / p20 of one record above this: flagged as noisy in the caveats

GO, NO_GO, INCONCLUSIVE = "GO", "NO-GO", "INCONCLUSIVE"


@dataclass(frozen=True)
class Rule:
    min_speedup: float = MIN_SPEEDUP
    min_energy: float = MIN_ENERGY_SAVING
    confidence: float = CONFIDENCE

    def text(self) -> str:
        return (f"An SSM is a GO for a regime when, at every measured point of it, it is at least "
                f"{self.min_speedup:g}x faster and uses at least {self.min_energy:g}x less energy per call than "
                f"the strongest attention baseline measured there, both with {self.confidence:.0%} confidence "
                f"(the lower end of each ratio's {self.confidence:.0%} interval clears the threshold). It is a "
                f"NO-GO where the upper end of either interval falls below its threshold; a point in between, "
                f"or without energy measured on both sides, is INCONCLUSIVE. A regime whose points turn GO "
                f"from some length on, in every series, is GO FROM that length.")


@dataclass
class Side:
    record: Record
    time_s: float
    energy_j: float | None
    energy_per_token_j: float | None
    flops: float
    bytes: float
    bound_s: float
    bottleneck: str
    achievable_s: float
    achievable_bottleneck: str
    predicted_energy: dict | None
    datasheet_bound_s: float | None = None  # the bound at datasheet peaks (a true lower bound)

    @property
    def roofline_pct(self) -> float:
        return 100 * self.bound_s / self.time_s


@dataclass
class PointResult:
    point: Point
    ssm: Side
    base: Side
    flop_ratio: float
    time: Ratio
    energy: Ratio | None
    realised: Ratio
    verdict: str
    why: str


@dataclass
class SeriesResult:
    regime: Regime
    series: str
    points: list[PointResult]
    crossover: dict[str, dict]
    curves: dict[str, list[float]]


@dataclass
class RegimeResult:
    regime: Regime
    series: list[SeriesResult]
    verdict: str
    verdict_text: str
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def points(self) -> list[PointResult]:
        return [p for s in self.series for p in s.points]

    def winners(self) -> dict[str, dict[str, int]]:
        """Per side ("SSM", "attention"): how many of the regime's points each backend won (the fastest)."""
        out: dict[str, dict[str, int]] = {"SSM": {}, "attention": {}}
        for p in self.points:
            for side, rec in (("SSM", p.point.ssm), ("attention", p.point.baseline)):
                out[side][rec["backend"]] = out[side].get(rec["backend"], 0) + 1
        return out

    @property
    def headline(self) -> PointResult:
        """The longest measured point (then the largest batch): where the SSM's savings are largest."""
        return max(self.points, key=lambda p: (p.point.length, p.point.batch))


def _side(rec: Record, models: Models) -> Side:
    case, graph = rec.case, graph_timed(rec)
    b = models.bounds(case, graph)
    e = rec.energy or {}
    return Side(rec, rec.time_s["median"], e.get("joules_per_call"), e.get("joules_per_token"),
                b.work["flops"] if b else float("nan"), b.work["executed_bytes"] if b else float("nan"),
                b.bound_s if b and b.times else float("nan"), b.bottleneck if b else "unknown",
                b.achievable_s if b else float("nan"), (b.achievable or {}).get("bottleneck", "unknown") if b else "unknown",
                models.predicted_energy(rec), b.datasheet_bound_s if b else None)


def _condition(r: Ratio | None, threshold: float) -> str:
    if r is None or r.lo is None:
        return "untested"
    if r.lo >= threshold:
        return "pass"
    return "fail" if r.hi < threshold else "unresolved"


def point_verdict(time: Ratio, energy: Ratio | None, rule: Rule) -> tuple[str, str]:
    t, e = _condition(time, rule.min_speedup), _condition(energy, rule.min_energy)
    if t == "fail" or e == "fail":
        which = [n for n, c in (("time", t), ("energy", e)) if c == "fail"]
        return NO_GO, f"{' and '.join(which)} below threshold with {rule.confidence:.0%} confidence"
    if t == "pass" and e == "pass":
        return GO, "both thresholds cleared"
    if e == "untested":
        why = "energy not measured on both sides" if energy is None else "no interval for the energy ratio"
        return INCONCLUSIVE, f"{why}; time {t}"
    return INCONCLUSIVE, f"interval straddles a threshold (time {t}, energy {e})"


def point_result(p: Point, models: Models, spread: RunSpread, rule: Rule) -> PointResult:
    ssm, base = _side(p.ssm, models), _side(p.baseline, models)
    z = z_of(rule.confidence)
    t = time_ratio(p.baseline.time_s, p.ssm.time_s, spread, z)
    e = energy_ratio(base.energy_j, ssm.energy_j, spread, z) if base.energy_j and ssm.energy_j else None
    flop = base.flops / ssm.flops
    verdict, why = point_verdict(t, e, rule)
    return PointResult(p, ssm, base, flop, t, e, t.scaled(1 / flop), verdict, why)


def crossing(lengths: list[float], ratios: list[float]) -> dict:
    """The length from which ratio >= 1 up to the last length, log-log interpolated where it crosses."""
    pts = [(x, r) for x, r in zip(lengths, ratios) if not math.isnan(r) and r > 0]
    if not pts:
        return {"length": None, "result": "no value"}
    if pts[-1][1] < 1:
        return {"length": None, "result": f"SSM not faster up to {pts[-1][0]:.0f} tokens"}
    slower = [i for i, (_, r) in enumerate(pts) if r < 1]
    if not slower:
        return {"length": None, "result": f"SSM faster at every length from {pts[0][0]:.0f} tokens", "from": pts[0][0]}
    (x0, r0), (x1, r1) = pts[slower[-1]], pts[slower[-1] + 1]
    lx = math.log(x0) + (0 - math.log(r0)) * (math.log(x1) - math.log(x0)) / (math.log(r1) - math.log(r0))
    n = math.exp(lx)
    return {"length": n, "result": f"SSM faster from {n:,.0f} tokens"}


def _series_result(regime: Regime, series: str, prs: list[PointResult], models: Models) -> SeriesResult:
    prs.sort(key=lambda p: p.point.length)
    cross = {"measured": crossing([p.point.length for p in prs], [p.time.value for p in prs])}
    cross["measured"]["label"] = "measurement (interpolated between measured lengths)"
    ssm_rec, base_rec = prs[-1].point.ssm, prs[-1].point.baseline
    g_s, g_b = graph_timed(ssm_rec), graph_timed(base_rec)
    curves: dict[str, list[float]] = {"lengths": [float(n) for n in PREDICTED_LENGTHS]}
    cases = [(at_length(ssm_rec, n), at_length(base_rec, n)) for n in PREDICTED_LENGTHS]
    curves["bound"] = [models.bound_s(b, g_b) / models.bound_s(s, g_s) for s, b in cases]
    curves["achievable"] = [models.achievable_s(b, g_b) / models.achievable_s(s, g_s) for s, b in cases]
    cal = [(models.calibrated(s), models.calibrated(b)) for s, b in cases]
    curves["calibrated"] = [cb[0] / cs[0] for cs, cb in cal]
    flops = [(models.bounds(s, g_s), models.bounds(b, g_b)) for s, b in cases]
    curves["flops"] = [fb.work["flops"] / fs.work["flops"] if fs and fb else float("nan") for fs, fb in flops]
    for name, label in (("calibrated", "calibrated estimate"), ("achievable", "achievable estimate"),
                        ("bound", "analytic bound")):
        c = crossing(curves["lengths"], curves[name])
        if name == "calibrated":
            reasons = {r for cs, cb in cal for r in (cs[2], cb[2]) if r}
            if reasons:
                c = {"length": None, "result": f"not available: {min(reasons)}"}
            elif any(cs[1] or cb[1] for cs, cb in cal):
                c["note"] = "extrapolated beyond the lengths or sizes the profile was fitted on"
        c["label"] = label
        c["range"] = [PREDICTED_LENGTHS[0], PREDICTED_LENGTHS[-1]]
        cross[name] = c
    return SeriesResult(regime, series, prs, cross, curves)


def _all(n: int) -> str:
    return f"all {n} measured points" if n > 1 else "its one measured point"


def regime_verdict(series: list[SeriesResult]) -> tuple[str, str, dict[str, int]]:
    pts = [p for s in series for p in s.points]
    counts = {v: sum(p.verdict == v for p in pts) for v in (GO, NO_GO, INCONCLUSIVE)}
    n = len(pts)
    if counts[GO] == n:
        return GO, "GO at " + _all(n), counts
    if counts[NO_GO] == n:
        return NO_GO, "NO-GO at " + _all(n), counts
    if counts[INCONCLUSIVE] == n:
        return INCONCLUSIVE, "INCONCLUSIVE at " + _all(n), counts
    starts = []
    for s in series:
        go = [p.verdict == GO for p in s.points]
        first = go.index(True) if True in go else len(go)
        if not all(go[first:]) or any(go[:first]):
            starts = None
            break
        if first < len(go):
            starts.append(s.points[first].point.length)
    at = max(starts) if starts else None
    # in each series the GO points are a suffix (checked above), so below L a point may be NO-GO or
    # INCONCLUSIVE; from L on every point of every series is GO (a series without a GO point qualifies
    # only if all its points lie below L)
    if at is not None and counts[GO] and all(p.verdict == GO for s in series for p in s.points
                                             if p.point.length >= at):
        return f"GO FROM {at:,}", f"GO from {at:,} tokens on in every series ({counts[GO]} of {n} points)", counts
    return "MIXED", (f"{counts[GO]} GO, {counts[NO_GO]} NO-GO, {counts[INCONCLUSIVE]} INCONCLUSIVE of {n} "
                     "measured points"), counts


def evaluate(matched: Matched, models: Models, spread: RunSpread, rule: Rule) -> list[RegimeResult]:
    by: dict[Regime, dict[str, list[PointResult]]] = {}
    for p in matched.points:
        by.setdefault(p.regime, {}).setdefault(p.series, []).append(point_result(p, models, spread, rule))
    out = []
    for regime in matched.regimes():
        series = [_series_result(regime, s, prs, models) for s, prs in sorted(by[regime].items())]
        verdict, text, counts = regime_verdict(series)
        out.append(RegimeResult(regime, series, verdict, text, counts))
    return out


def median_of(values) -> float:
    v = [x for x in values if not math.isnan(x)]
    return float(np.median(v)) if v else float("nan")
