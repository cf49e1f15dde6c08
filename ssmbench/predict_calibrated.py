"""``predict --calibration``'s calibrated figures as table rows and CSV columns (ssmbench/commands/predict.py prints
them): per op the calibrated estimate beside the analytic bound, and the calibrated total with its parts. Every
time printed is labelled (the profile's label: calibrated or transferred; analytic bound where the profile does not
cover an op) and carries its unit and interval."""

from __future__ import annotations

from .output import si

CALIBRATED_CSV = ("calibrated_estimate_s", "calibrated_lo_s", "calibrated_hi_s", "calibrated_label",
                  "calibrated_level", "calibration_note")


def csv_calibrated(o: dict) -> list:
    c = o["calibrated"]
    if c is None:
        return [None, None, None, "analytic bound (not calibrated)", None, o["calibration_note"]]
    return [c["estimate_s"], c["lo_s"], c["hi_s"], c["label"], c["level"], o["calibration_note"]]


def rate(v: float | None) -> str:
    """A throughput in tokens/s, or "-" where there is none."""
    if v is None:
        return "-"
    return (f"{v:,.0f}" if v >= 1000 else f"{v:.4g}") + " tokens/s"


def interval(lo: float | None, hi: float | None) -> str:
    """An interval of times, "no upper end" where it has none."""
    if lo is None:
        return "-"
    return f"{si(lo, 's', 3)} .. " + ("no upper end" if hi is None else si(hi, "s", 3))


def calibrated_op_table(r: dict) -> tuple[str, list[str], list[list], str]:
    """(title, columns, rows, caption) of the per-op table: analytic bound and calibrated estimate."""
    cal = r["calibration"]
    pct = f"{100 * cal['level']:.0f}%"
    rows = []
    for o in r["ops"]:
        c = o["calibrated"]
        if c is None:
            rows.append([o["label"], f"{o['impl']}/{o['mode']}", o["count"], si(o["time_s"], "s"), "-", "-",
                         "analytic bound (not calibrated)", o["calibration_note"]])
        else:
            rows.append([o["label"], f"{o['impl']}/{o['mode']}", o["count"], si(o["time_s"], "s"),
                         si(c["estimate_s"], "s"), interval(c["lo_s"], c["hi_s"]),
                         c["label"] + (f", extrapolated in {', '.join(c.get('extrapolated_dims') or [])}"
                                       if c["extrapolated"] else ""), o["calibration_note"] or ""])
    return (f"Per op: analytic bound and {cal['label']} estimate ({pct} interval), profile {cal['profile']}",
            ["op call", "impl/mode", "x", "analytic bound", f"{cal['label']} estimate", f"{pct} interval",
             "label", "note"], rows,
            cal["note"] + ". Times are per model step (x calls). Ops the profile does not cover keep their analytic "
            "bound; where it calibrates an op with several backends, pick one with --calibration-backend OP=BACKEND. "
            "The profile holds: " + ", ".join(cal["holds"]) + ".")


def calibrated_total_rows(t: dict) -> list[list[str]]:
    c = t["calibrated"]
    pct = f"{100 * c['level']:.0f}%"
    p = c["calibrated_part"]
    if p is None:
        return [["calibrated estimate", ("none: the profile calibrates no op of this prediction (see the per-op "
                                         "table); the analytic bound stands")]]
    # under a runtime the total is the composed step (runtime_step.compose), not the ops' sum it started from
    what = (f"the step under {c['runtime']}: max(host {si(c['host_s'], 's')}, device {si(c['device_s'], 's')})"
            if c.get("runtime") else "sum over ops")
    rows = [[f"{c['label']} estimate ({what})",
             "-" if c["estimate_s"] is None else f"{si(c['estimate_s'], 's')} ({pct} interval "
             f"{interval(c['lo_s'], c['hi_s'])})"]]
    if c.get("runtime") and c.get("ops_sum_s") is not None:
        rows.append([f"  the ops' sum ({c['label']} estimate, each op as measured alone)", si(c["ops_sum_s"], "s")])
    pad = "    " if c.get("runtime") else "  "  # the parts of the ops' sum
    if p is not None and c["not_covered"]:
        rows.append([f"{pad}of which {p['label']} ({p['op_calls']} op calls)",
                     f"{si(p['estimate_s'], 's')} ({pct} interval {interval(p['lo_s'], p['hi_s'])})"])
        rows.append([f"{pad}of which analytic bound ({c['bound_part_op_calls']} op calls not calibrated)",
                     si(c["bound_part_s"], "s") + ": " + ", ".join(c["not_covered"])])
    rows.append([f"tokens / s ({c['label']} estimate)", rate(c["tokens_per_s"])])
    rows += [[f"{c['label']} estimate: note", n] for n in c["notes"]]
    return rows
