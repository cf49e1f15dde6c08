"""Markdown of the energy section of a gap report (``calibrate/energy.evaluate``): the fitted
parameters, per family the leave-shape-out errors of energy per call on both time bases with their
intervals, and per case the measured and held-out predicted energy. Every number carries its label."""

from __future__ import annotations

from typing import Any

from ..hwspecs.units import format_si
from .energy import BASES, TIED
from .report import _table, pct

BASIS_TEXT = {"measured_time": "at the measured time (energy model alone)",
              "achievable_time": "at the achievable estimate of the time (energy and time predicted)"}


def _pi(iv: tuple[float, float]) -> str:
    return f"[{iv[0]:.1f}, {iv[1]:.1f}]"


def energy_markdown(ev: dict[str, Any] | None) -> list[str]:
    if not ev:
        return []
    if "note" in ev and "fit" not in ev:
        return ["", "## Energy", "", ev["note"]]
    f = ev["fit"]
    level = int(round(100 * ev["level"]))
    tgt = ev["target"]
    lines = ["", "## Energy (calibrated estimate; leave-shape-out)", "",
             f"Model: energy per call = static power x time + energy per FLOP by engine, dtype and tensor-instruction "
             f"class (mma.sync apart) + energy per byte at DRAM, at the cache and re-read from the cache "
             f"(`analytic/energy.py`); fitted by non-negative least squares on {f['n_fit_cases']} "
             f"cases below {100 * ev['power_limited_fraction']:.0f}% of the power limit ({f['power_limit_w']:g} W), "
             f"with the {ev['n_power_limited']} power-limited windows as lower bounds (their energy is limit x time "
             f"whatever the model's excess); those are predicted as min(model, limit x time). "
             f"Tied: {', '.join(f'{a} = {b}' for a, b in TIED.items())}.", ""]
    prow = [["static power", format_si(f["static_power_w"], "W")]]
    prow += [[t, format_si(v["value"], v["unit"])] for t, v in f["per_term"].items()]
    prow += [[t, f"not determined: {why}"] for t, why in f["undetermined"].items()]
    lines += _table(["parameter (calibrated estimate, all cases)", "value"], prow)
    for b in BASES:
        a = ev["bases"][b]["all"]
        lines += ["", f"### Energy per call {BASIS_TEXT[b]}", "",
                  f"Target (issue #14, per family): median |err| <= {tgt['median_ape_pct']:g}%, p90 <= "
                  f"{tgt['p90_ape_pct']:g}%. All cases: median {pct(a['median_ape_pct'])} "
                  f"{_pi(a['median_ape_pct_interval'])}, p90 {pct(a['p90_ape_pct'])} {_pi(a['p90_ape_pct_interval'])}; "
                  f"brackets: {level}% bootstrap intervals over shapes.", ""]
        rows = []
        for fam, s in ev["bases"][b]["families"].items():
            iv = s["interval"]
            rows.append([fam, s["n"], s["n_shapes"], f"{pct(s['median_ape_pct'])} {_pi(s['median_ape_pct_interval'])}",
                         f"{pct(s['p90_ape_pct'])} {_pi(s['p90_ape_pct_interval'])}",
                         f"x{iv['factor_lo']:.3f} .. x{iv['factor_hi']:.3f}", pct(100 * s["coverage"], 0),
                         "yes" if s["meets_target"] else "no"])
        lines += _table(["family", "cases", "shapes", "|err| median", "|err| p90", f"{level}% interval (factor)",
                         "coverage", "meets target"], rows)
    sc = ev.get("spec_check")
    for b, part in ((sc or {}).get("bases") or {}).items():
        a = part["all"]
        lines += ["", f"### Energy per call with the spec's own parameters (no fit), {BASIS_TEXT[b]}", "",
                  f"{sc['label']}; {sc['note']}. All cases: median {pct(a['median_ape_pct'])} "
                  f"{_pi(a['median_ape_pct_interval'])}, p90 {pct(a['p90_ape_pct'])} {_pi(a['p90_ape_pct_interval'])}.", ""]
        lines += _table(["family", "cases", "|err| median", "|err| p90", "meets target"],
                        [[f, s["n"], f"{pct(s['median_ape_pct'])} {_pi(s['median_ape_pct_interval'])}",
                          f"{pct(s['p90_ape_pct'])} {_pi(s['p90_ape_pct_interval'])}",
                          "yes" if s["meets_target"] else "no"] for f, s in part["families"].items()])
    lines += ["", "### Energy per case", ""]
    crow = [[r["key"], format_si(r["measured_j"], "J"), format_si(r["avg_power_w"], "W")
             + (" (power-limited)" if r["power_limited"] else ""),
             f"{format_si(r['heldout_j_measured_time'], 'J')} ({pct(r['ape_pct_measured_time'])})",
             f"{format_si(r['heldout_j_achievable_time'], 'J')} ({pct(r['ape_pct_achievable_time'])})"]
            for r in ev["cases"]]
    lines += _table(["case", "measured energy per call", "measured average power",
                     "held-out estimate at measured time (|err|)", "held-out estimate at achievable time (|err|)"], crow)
    return lines
