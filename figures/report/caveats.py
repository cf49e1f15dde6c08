"""The caveats a report states, each computed from the records it read:

- backends that did not run (records of the report's ops with status unavailable, error, timeout,
  failed_check or oom), grouped by backend, status and reason;
- records with no partner under the matching rule (so not in any ratio);
- energy not measured on both sides of a point;
- noise: records whose p80 / p20 spread exceeds ``NOISY_SPREAD``; the run-to-run spread;
- throttling: paired records whose clock block says they were throttled, with the reasons; the
  temperature and SM clock range of the paired records;
- measurements faster than their analytic bound (above 100% of the roofline): a bound must not be
  beaten, so each is listed with its percentage at datasheet peaks too.
"""

from __future__ import annotations

import math

from ...measure.results import Record
from .pairs import ATTENTION_OPS, SSM_OPS, Matched
from .regimes import NOISY_SPREAD, RegimeResult
from .stats import RunSpread

REPORT_OPS = set(SSM_OPS) | set(ATTENTION_OPS.values())
MAX_LISTED = 8


def _first_sentence(text: str | None) -> str:
    t = (text or "no reason recorded").strip()
    for sep in (". ", "; ", " (Triggered"):
        if sep in t[:240]:
            t = t[:t.index(sep)]
    return t[:240]


def not_run(matched: Matched) -> list[dict]:
    groups: dict[tuple, list[Record]] = {}
    for r in matched.records.values():
        if r["op"] in REPORT_OPS and r.status != "ok":
            groups.setdefault((r["backend"], r.status, _first_sentence(r.reason)), []).append(r)
    return [{"backend": b, "status": s, "reason": why, "cases": len(rs), "example": rs[0].key}
            for (b, s, why), rs in sorted(groups.items())]


def _paired(results: list[RegimeResult]) -> list[Record]:
    seen: dict[str, Record] = {}
    for rr in results:
        for p in rr.points:
            for r in (p.point.ssm, p.point.baseline):
                seen[r.key] = r
    return list(seen.values())


def _spread(r: Record) -> float:
    t = r.time_s or {}
    return t["p80"] / t["p20"] if t.get("p20") and t.get("p80") else 1.0


def caveats(matched: Matched, results: list[RegimeResult], spread: RunSpread) -> list[dict]:
    """[{"id", "title", "text", "items"}] in the order the report shows them."""
    out = []
    nr = not_run(matched)
    if nr:
        out.append({"id": "not-run", "title": "Backends that did not run",
                    "text": "Records of the compared ops that were not timed, with the reason they carry; the "
                            "strongest baseline of each point is the fastest of the backends that did run.",
                    "items": [f"{g['backend']}: {g['status']} ({g['cases']} case{'s' * (g['cases'] > 1)}): "
                              f"{g['reason']}" for g in nr]})
    if matched.unmatched:
        items = sorted(r.key for r in matched.unmatched)
        out.append({"id": "unmatched", "title": "Measurements without a matched partner",
                    "text": f"{len(items)} measured records of the compared ops have no partner under the matching "
                            "rule (another width, batch, length, KV-head count or timing method) and enter no ratio.",
                    "items": items[:MAX_LISTED] + ([f"... and {len(items) - MAX_LISTED} more"]
                                                   if len(items) > MAX_LISTED else [])})
    pts = [p for rr in results for p in rr.points]
    no_e = [p for p in pts if p.energy is None]
    if no_e:
        out.append({"id": "energy", "title": "Energy not measured on both sides",
                    "text": f"{len(no_e)} of {len(pts)} points lack an NVML energy window on one side (the run "
                            "switched energy off, or the case predates it): their energy ratio is missing and their "
                            "verdict is INCONCLUSIVE at best.", "items": []})
    noisy = sorted({r.key for r in _paired(results) if _spread(r) > NOISY_SPREAD})
    out.append({"id": "noise", "title": "Noise",
                "text": f"{spread.describe()}. Intervals add the within-run spread of each median (p20..p80, n) and "
                        "twice the run-to-run variance. "
                        + (f"{len(noisy)} paired records have p80 / p20 above {NOISY_SPREAD:g}:" if noisy else
                           f"No paired record has p80 / p20 above {NOISY_SPREAD:g}."),
                "items": noisy[:MAX_LISTED]})
    paired = _paired(results)
    throttled = [r for r in paired if (r.get("clocks") or {}).get("throttled")]
    temps = [t for r in paired for t in ((r.get("temperature_c") or {}).get("before"),
                                         (r.get("temperature_c") or {}).get("after")) if isinstance(t, (int, float))]
    clocks = [c.get("sm_clock_mhz") for r in paired for c in ((r.get("clocks") or {}).get("before") or {},
                                                              (r.get("clocks") or {}).get("after") or {})
              if isinstance(c.get("sm_clock_mhz"), (int, float))]
    rng = (f" Paired records ran at {min(temps)}-{max(temps)} degC and SM clocks {min(clocks)}-{max(clocks)} MHz "
           "(NVML, before and after each case)." if temps and clocks else " No clock or temperature was recorded.")
    out.append({"id": "throttling", "title": "Throttling",
                "text": (f"{len(throttled)} paired records were throttled (NVML clock-event reasons):" if throttled
                         else "No paired record reports throttling (NVML clock-event reasons).") + rng,
                "items": [f"{r.key}: {', '.join(r['clocks'].get('throttle_reasons') or [])}" for r in throttled]})
    beaten = []
    for p in pts:
        for who, s in (("SSM", p.ssm), ("attention", p.base)):
            if s.roofline_pct > 100:
                sheet = 100 * s.datasheet_bound_s / s.time_s if s.datasheet_bound_s else float("nan")
                beaten.append(f"{s.record.key}: {s.roofline_pct:.0f}% of its bound ({s.bottleneck}, measured ceilings)"
                              + (f", {sheet:.0f}% at datasheet peaks" if not math.isnan(sheet) else ""))
    if beaten:
        out.append({"id": "beaten", "title": "Measurements faster than their analytic bound",
                    "text": "A bound must not be beaten. These records beat the bound computed from the spec's measured "
                            "ceilings (attained copy bandwidth, matmul rate), which a kernel can exceed (a read-only "
                            "stream beats a copy); at datasheet peaks each stays within its bound where shown below "
                            "100%.", "items": sorted(set(beaten))})
    return out

