"""Markdown rendering of gap reports and calibration summaries. Every number carries its label
(bound, measured, calibrated, transferred) and its unit; the labels are explained at the top."""

from __future__ import annotations

import math
from typing import Any

from ..hwspecs.units import format_quantity, format_si


def pct(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}%"


def dims_text(d: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in d.items())


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return out


def _cell(v: Any) -> str:
    return " ".join(str(v).split()).replace("|", "\\|")


def ceiling_text(key: str, value: float | None) -> str:
    """A ceiling in its unit: rates of compute engines, bandwidths, times."""
    if value is None:
        return "unknown"
    if key.startswith("compute."):
        kind = "flop_rate"
    elif key.endswith(".bandwidth"):
        kind = "bandwidth"
    elif key.startswith("launch."):
        kind = "time"
    else:
        return f"{value:.4g} (SI units)"
    return format_quantity(value, kind)


def status_text(group: dict) -> str:
    """A group's status for tables: a pooled group names the level it borrowed from."""
    if group.get("status") == "pooled" and group.get("pooled_from"):
        return f"pooled from {group['pooled_from']['label']}"
    return str(group.get("status", "-")).replace("_", " ")


def model_text(group: dict) -> str:
    m = group.get("model")
    if not m:
        return "-"
    parts = []
    for k, v in m["params"].items():
        if k.startswith("t0"):
            parts.append(f"t0={format_quantity(v, 'time')}/launch")
        elif k == "W_half_s":
            parts.append(f"W_half={format_quantity(v, 'time')}")
        else:
            parts.append(f"{k}={v:.3g}")
    return f"{m['name']} ({', '.join(parts)})"


def _achievable_md(a: dict[str, Any] | None) -> list[str]:
    if not a:
        return []
    lines = ["", "## Achievable estimate (no fitted parameters)", "",
             f"Label: **{a['label']}**. Median |err| over all cases: {pct(a['all']['median_ape_pct'])} "
             f"(p90 {pct(a['all']['p90_ape_pct'])}; target <= {a['target_median_ape_pct']:g}%); the datasheet "
             f"roofline bound alone is {pct(a['datasheet_bound_median_ape_pct'])} off. Median estimate / measured: "
             f"{a['all']['median_ratio']:.2f}." if a["all"]["n"] else "No case has an achievable estimate.", ""]
    if a.get("basis"):
        lines += [(f"Compared: the estimate {a['basis']}. The plain steady-state estimate (back-to-back calls, "
                   f"what predict uses) is {pct(a.get('plain_median_ape_pct'))} off (median |err|)."), ""]
    lines += _table(["family", "cases", "|err| median", "|err| p90", "estimate / measured (median)"],
                    [[f, s["n"], pct(s["median_ape_pct"]), pct(s["p90_ape_pct"]),
                      "-" if s["median_ratio"] is None else f"{s['median_ratio']:.2f}"]
                     for f, s in a["families"].items()])
    lines += ["", "Bottleneck classes (achievable): " + ", ".join(f"{k} {v}" for k, v in sorted(a["bottlenecks"].items(), key=lambda kv: str(kv[0]))) + "."]
    below = a["faster_than_datasheet_bound"]
    lines += ["", f"Cases measured faster than the datasheet bound (measured p80 below it): {len(below)}"
              + ("." if not below else ": " + "; ".join(f"{b['key']} ({format_si(b['measured_s'], 's')} vs "
                                                        f"{format_si(b['datasheet_bound_s'], 's')})" for b in below))]
    return lines


def _overall_md(o: dict[str, Any] | None, level: int) -> list[str]:
    if not o:
        return []
    t = o["target"]
    lines = ["", "## All groups (held-out)", "",
             f"Target: median |err| <= {t['median_ape_pct']:g}%, p90 <= {t['p90_ape_pct']:g}%, {level}% intervals "
             f"covering {100 * t['coverage_min']:.0f}-{100 * t['coverage_max']:.0f}% (printed, not enforced). "
             "*pooled* groups have too few shapes of their own and are estimated from their family and backend "
             "(or family, or every case); their errors are leave-shape-out within that level. "
             f"Cases without an estimate: {o['n_without_estimate']} of {o['n_cases']}.", ""]
    lines += _table(["groups", "held-out cases", "|err| median", "|err| p90", "coverage"],
                    [[k, o[k]["n"], pct(o[k]["median_ape_pct"]), pct(o[k]["p90_ape_pct"]),
                      pct(None if o[k]["coverage"] is None else 100 * o[k]["coverage"], 0)]
                     for k in ("calibrated", "pooled", "all")])
    v = o.get("validation")
    if v and v["n"]:
        lines += ["", f"Validation (results the profile was not fitted on; a profile of another spec is *transferred*): "
                      f"{v['n']} cases, |err| median {pct(v['median_ape_pct'])}, p90 {pct(v['p90_ape_pct'])}, "
                      f"coverage {pct(100 * v['coverage'], 0)}."]
    return lines


def _repeat_md(rep: dict[str, Any] | None) -> str:
    """The model-free repeat errors between sessions (calibrate/sessions.py repeatability), one sentence."""
    if not rep:
        return ""
    paces = (("host-bound", rep["host_bound"]), ("GPU-bound", rep["gpu_bound"]))
    parts = [f"{name}: median {s['median_pct']:.1f}%, p90 {s['p90_pct']:.1f}% ({s['n']} session records of "
             f"{s['n_cases']} cases)" for name, s in paces if s]
    return (" Each session's time of a case measured in two or more sessions against the median of its other "
            "sessions (measurement; the error a model that knew each case's typical time exactly would still "
            "show): " + "; ".join(parts) + ".") if parts else ""


def _by_pace_md(bp: dict[str, Any] | None, level: int) -> list[str]:
    if not bp:
        return []
    hs = bp.get("host_sessions") or {}
    t = bp["target"]
    spread = ("" if not hs else
              f" The same host-bound case measured in different sessions moves by a log sd of "
              f"{hs['sigma_log']:.2f} (x{math.exp(hs['sigma_log']):.2f} at one sd; {hs['n_cases']} cases over "
              f"{hs['n_sessions']} sessions, {hs['source']}): a floor that no model of the host can beat on "
              "these measurements." + _repeat_md(hs.get("repeatability")))
    lines = ["", "### Per family, by what sets the pace (held-out)", "",
             f"Rule: {bp['rule']}. GPU-bound cases judge the model of the device; host-bound ones the host "
             f"cost per call.{spread} Target (issue #13) judged on the GPU-bound cases: median |err| <= "
             f"{t['median_ape_pct']:g}%, p90 <= {t['p90_ape_pct']:g}%, {level}% intervals covering "
             f"{100 * t['coverage']:.0f}-{100 * t['coverage_max']:.0f}%.", ""]

    def cells(s: dict) -> list[Any]:
        return [s["n"], pct(s["median_ape_pct"]), pct(s["p90_ape_pct"]),
                pct(None if s["coverage"] is None else 100 * s["coverage"], 0)]

    rows = [["all", *cells(bp["all"]["gpu"]), "yes" if bp["all"]["gpu_meets_target"] else "no",
             *cells(bp["all"]["host"])]]
    rows += [[f["family"], *cells(f["gpu"]), "yes" if f["gpu_meets_target"] else "no", *cells(f["host"])]
             for f in bp["families"]]
    v = bp.get("validation")
    if v and (v["gpu"]["n"] or v["host"]["n"]):
        rows.append(["validation (not fitted on these results)", *cells(v["gpu"]),
                     "yes" if v["gpu_meets_target"] else "no", *cells(v["host"])])
    return lines + _table(["family", "GPU-bound cases", "|err| median", "|err| p90", "coverage",
                           "GPU-bound meets target", "host-bound cases", "|err| median", "|err| p90",
                           "coverage"], rows)


def gap_markdown(rep: dict[str, Any]) -> str:
    cal = rep["calibration"]
    est_label = "transferred" if cal["transferred"] else "calibrated"
    level = int(round(100 * cal["level"]))
    lines = [f"# Gap report: {rep['spec']['name']} ({rep['spec']['id']})", ""]
    lines.append("Results: " + "; ".join(f"`{f['path']}` (sha256 {f['sha256'][:12]}, device {f['device']!r}, "
                                           f"{f['n_cases']} cases)" for f in rep["results"]))
    src = "fitted on these results" if cal["fitted_here"] else f"profile `{cal['path']}` (spec {cal['spec_id']})"
    lines.append(f"Calibration: {src}; groups by {cal['group_by']}; intervals at {level}%.")
    if cal["transferred"]:
        lines.append(f"**Transferred**: the profile was fitted on spec {cal['spec_id']} and is applied to "
                     f"{rep['spec']['id']}; estimates are labelled *transferred* and their intervals widened.")
    if rep["device_mismatch"]:
        lines.append(f"**Device mismatch**: results from {', '.join(rep['devices'])} were joined with spec "
                     f"{rep['spec']['id']} on request; bounds are those of the spec, not of the measuring device.")
    changed = sum(1 for r in rep["cases"] if r["analytic_changed"])
    if changed:
        lines.append(f"**Note**: for {changed} case(s) the analytic counts differ from those recorded when they were "
                     "measured (the cost rules changed since); bounds here use the current rules.")
    lines += ["", "Labels: **bound** = analytic roofline bound (max over resources of work / ceiling); "
              "**measured** = median time per call; **% of roofline** = bound / measured; "
              f"**{est_label}** = the group's fitted model ({level}% interval); **residual** = measured / "
              f"{est_label} - 1; **CV |err|** = leave-shape-out held-out absolute error; **coverage** = share "
              "of held-out cases inside an interval built without their shape.", ""]
    lines += ["## Ceilings used", ""]
    lines += _table(["key", "value", "origin", "provenance"],
                    [[k, ceiling_text(k, c["value"]), c["origin"], c["provenance"]]
                     for k, c in sorted(rep["spec"]["ceilings"].items())])
    lines += _achievable_md(rep.get("achievable"))
    lines += _overall_md(rep.get("overall"), level)
    tgt = rep["target"]
    lines += ["", "## Per family", "",
              f"Target (issue #13, every family): CV median |err| <= {tgt['median_ape_pct']:g}%, p90 <= "
              f"{tgt['p90_ape_pct']:g}%, {level}% intervals covering {100 * tgt['coverage']:.0f}-"
              f"{100 * tgt.get('coverage_max', 1.0):.0f}% of held-out cases.", ""]
    fam_rows = []
    for f in rep["families"]:
        s = f["cv"] if f["cv"]["n"] else f["validation"]
        kind = "CV" if f["cv"]["n"] else ("validation" if f["validation"]["n"] else "-")
        fam_rows.append([
            f["family"], f["n_cases"],
            f"{f['n_calibrated']}/{f['n_groups']}" + (f" (+{f['n_pooled']} pooled)" if f.get("n_pooled") else ""),
            pct(f["roofline_pct_median"]), kind, pct(s["median_ape_pct"]), pct(s["p90_ape_pct"]),
            pct(None if s["coverage"] is None else 100 * s["coverage"], 0), f["gap_mostly"] or "-",
            "yes" if f["meets_target"] else "no: " + "; ".join(f["shortfall"]),
        ])
    lines += _table(["family", "cases", "groups calibrated", "% of roofline (median, measured vs bound)",
                     "error kind", "|err| median", "|err| p90", "coverage", "gap mostly", "meets target"], fam_rows)
    lines += _by_pace_md(rep.get("by_pace"), level)
    lines += ["", "## Per group", ""]
    grows = []
    for g in rep["groups"]:
        cv = g.get("cv") or {}
        iv = g.get("interval") or {}
        grows.append([
            g["label"], status_text(g), g.get("n_shapes", "-"), model_text(g),
            pct(cv.get("median_ape_pct")), pct(cv.get("p90_ape_pct")),
            pct(None if cv.get("coverage") is None else 100 * cv["coverage"], 0),
            "-" if not iv else f"x{iv['factor_lo']:.3f} .. x{iv['factor_hi']:.3f}",
            g.get("reason") or "",
        ])
    lines += _table(["group", "status", "shapes", "model (calibrated parameters)", "CV |err| median",
                     "CV |err| p90", "coverage", f"{level}% interval (factor on estimate)", "note"], grows)
    lines += ["", "## Per case", ""]
    crows = []
    for r in rep["cases"]:
        iv = "" if r["lo_s"] is None else f" [{format_si(r['lo_s'], 's')}, {format_si(r['hi_s'], 's')}]"
        att = r["attribution"]
        att_text = "-" if not att else (f"{att['to']} (" + ", ".join(
            f"{c} {v:.0f}%" for c, v in att["share_pct"].items() if v >= 0.5) + ")")
        crows.append([
            f"{r['op']}/{r['impl']} {r['dtype']} {r['mode']}", dims_text(r["dims"]),
            f"{format_si(r['bound_s'], 's')} ({r['bottleneck']})", format_si(r["measured_s"], "s"),
            pct(r["roofline_pct"]),
            f"{format_si(r['achievable_s'], 's')} ({r['achievable_bottleneck']}; {pct(r['achievable_ape_pct'])} off)",
            ("-" if r["calibrated_s"] is None else f"{format_si(r['calibrated_s'], 's')}{iv} ({r['label']})"),
            pct(r["residual_pct"]), pct(r["heldout_ape_pct"]), att_text,
        ])
    lines += _table(["case", "dims", "bound (analytic, bottleneck)", "measured (median)", "% of roofline",
                     "achievable estimate (bottleneck; |err|)", f"{est_label} [{level}% interval]", "residual", "held-out |err|", "gap attributed to"], crows)
    from .energy_report import energy_markdown  # it reuses this module's table helpers

    lines += energy_markdown(rep.get("energy"))
    if rep["excluded"]:
        lines += ["", "## Excluded cases", ""]
        lines += _table(["case", "status", "reason", "file"],
                        [[e["key"], e["status"], e["reason"], e["file"]] for e in rep["excluded"]])
    return "\n".join(lines) + "\n"
