"""The report as one self-contained HTML file (figures embedded as PNG data URIs, no network, print
CSS) or as Markdown (figures written beside it). Both come from one list of blocks, so they say the
same thing: headings, paragraphs, tables, lists and figures.

Every number carries its label (measurement, analytic count, calibrated estimate, achievable
estimate, analytic bound) in its column or sentence, and its unit (s, J, J/token, tokens, x for ratios).
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path

from ...hwspecs.units import format_si
from . import plots, stats
from .build import Report, answer
from .regimes import GO, NO_GO, PointResult, RegimeResult
from .wholemodel import MAX_PARAM_RATIO

TITLE = "Do GPUs turn an SSM's arithmetic savings into proportional speed and energy gains?"

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#1a1a1a;background:#fff;line-height:1.45}
main{max-width:1180px;margin:0 auto;padding:1.2rem 1.5rem 3rem}
h1{font-size:1.6rem;margin:.4rem 0}h2{font-size:1.25rem;border-bottom:1px solid #ccc;padding-bottom:.2rem;margin-top:2rem}
h3{font-size:1.05rem}p.meta{color:#555;font-size:.9rem}
nav ol{columns:2;font-size:.92rem}
.scroll{overflow-x:auto;margin:.6rem 0}
table{border-collapse:collapse;font-size:.8rem;min-width:60%}
th,td{border:1px solid #ccc;padding:.25rem .4rem;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;white-space:nowrap}
.v-GO{background:#d9f2d9;font-weight:600}.v-NO-GO{background:#f8d7d7;font-weight:600}
.v-other{background:#fff3cd;font-weight:600}
figure{margin:1rem 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85rem;color:#444}
.answer{font-size:1.05rem;background:#f6f8fa;border-left:4px solid #2f6fb0;padding:.6rem .9rem}
@media print{@page{size:A4 landscape;margin:12mm}main{max-width:none;padding:0}
 nav{display:none}h2{break-after:avoid}figure,tr{break-inside:avoid}.scroll{overflow:visible}
 table{font-size:7pt}a{color:inherit;text-decoration:none}}
"""


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    id: str | None = None
    classes: list[list[str]] = field(default_factory=list)  # per row, per cell: a CSS class or ""


@dataclass
class Figure:
    name: str
    data: bytes
    alt: str
    caption: str


# Blocks: ("h2", id, text) ("h3", id, text) ("p", text) ("answer", text) ("ul", [text]) Table Figure

def ratio_text(r: stats.Ratio | None, unit: str = "x") -> str:
    if r is None:
        return "-"
    ci = f" [{r.lo:.3g}, {r.hi:.3g}]" if r.lo is not None else " [no interval]"
    return f"{r.value:.3g}{unit}{ci}"


def _length(n: float | None) -> str:
    return "-" if n is None else f"{n:,.0f}"


def _cross(c: dict) -> str:
    if c.get("length") is not None:
        return f"{c['length']:,.0f}" + (" (extrapolated)" if c.get("note") else "")
    return c["result"]


def _verdict_class(v: str) -> str:
    return "v-GO" if v.startswith(GO) else "v-NO-GO" if v == NO_GO else "v-other"


def _binding(p: PointResult) -> str:
    return (f"SSM: {p.ssm.bottleneck} {p.ssm.roofline_pct:.0f}%; attention: {p.base.bottleneck} "
            f"{p.base.roofline_pct:.0f}%")


def _energy_pred(p: PointResult) -> str:
    def one(e):
        return "-" if not e else f"{format_si(e.get('energy_j'), 'J')} ({e.get('label', 'prediction')})"
    return f"SSM {one(p.ssm.predicted_energy)}; attention {one(p.base.predicted_energy)}"


def _won(counts: dict[str, int]) -> str:
    n = sum(counts.values())
    return ", ".join(f"{b} ({k} of {n})" for b, k in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def winners_text(rr: RegimeResult) -> str:
    w = rr.winners()
    return f"SSM: {_won(w['SSM'])}; attention: {_won(w['attention'])}"


def _others(recs) -> str:
    return ", ".join(f"{html.escape(r['backend'])} {format_si(r.time_s['median'], 's')}" for r in recs) or "-"


def verdict_table(rep: Report) -> Table:
    headers = ["Regime", "Verdict", "Points (measured)", "At (headline point)", "FLOP ratio (analytic count, x)",
               f"Time ratio (measurement, x) [{rep.rule.confidence:.0%} CI]",
               f"Energy ratio (measurement, x) [{rep.rule.confidence:.0%} CI]", "Realised fraction (time / FLOP ratio)",
               "Crossover, tokens: measured | calibrated estimate | achievable estimate | analytic bound",
               "Binding resource (analytic bound) and % of that roofline (measurement)",
               "Fastest backend of each side (points won)"]
    rows, classes = [], []
    for rr in rep.regimes:
        h = rr.headline
        cross = next(s.crossover for s in rr.series if h in s.points)
        rows.append([f'<a href="#{rr.regime.id}">{html.escape(rr.regime.title)}</a>', rr.verdict,
                     f"{len(rr.points)}: {html.escape(rr.verdict_text)}",
                     f"L={h.point.length:,}, B={h.point.batch}, width {h.point.width}",
                     f"{h.flop_ratio:.3g}x", ratio_text(h.time), ratio_text(h.energy), ratio_text(h.realised, ""),
                     " | ".join(_cross(cross[k]) for k in ("measured", "calibrated", "achievable", "bound")),
                     _binding(h), html.escape(winners_text(rr))])
        classes.append(["", _verdict_class(rr.verdict)] + [""] * 9)
    return Table(headers, rows, "verdict-table", classes)


def points_table(rr: RegimeResult, rep: Report) -> Table:
    headers = ["Series (SSM dims)", "Length (tokens)", "SSM (fastest measured backend), time (measurement, median)",
               "Attention baseline (fastest measured backend), time (measurement, median)",
               "Slower backends measured, SSM | attention (measurement, median)",
               "FLOP ratio (analytic count, x)", "Time ratio (measurement, x) [CI]",
               "Energy per call, SSM | attention (measurement, J)", "Energy ratio (measurement, x) [CI]",
               "Realised fraction", "Binding (analytic bound) and % of roofline (measurement)",
               "Achievable estimate, SSM | attention (binding class)", "Verdict"]
    if rep.predicts_energy:
        headers.insert(9, "Predicted energy per call (energy model)")
    rows, classes = [], []
    for s in rr.series:
        for p in s.points:
            row = [html.escape(s.series), f"{p.point.length:,}",
                   f"{html.escape(p.ssm.record['backend'])}: {format_si(p.ssm.time_s, 's')}",
                   f"{html.escape(p.base.record['backend'])}: {format_si(p.base.time_s, 's')}",
                   f"{_others(p.point.ssm_alternatives)} | {_others(p.point.alternatives)}",
                   f"{p.flop_ratio:.3g}x", ratio_text(p.time),
                   f"{format_si(p.ssm.energy_j, 'J')} | {format_si(p.base.energy_j, 'J')}", ratio_text(p.energy),
                   ratio_text(p.realised, ""), _binding(p),
                   (f"{format_si(p.ssm.achievable_s, 's')} ({p.ssm.achievable_bottleneck}) | "
                   f"{format_si(p.base.achievable_s, 's')} ({p.base.achievable_bottleneck})"),
                   f"{p.verdict}: {html.escape(p.why)}"]
            if rep.predicts_energy:
                row.insert(9, html.escape(_energy_pred(p)))
            rows.append(row)
            classes.append([""] * (len(row) - 1) + [_verdict_class(p.verdict)])
    return Table(headers, rows, f"points-{rr.regime.id}", classes)


def crossover_table(rr: RegimeResult) -> Table:
    headers = ["Series", "Measured (interpolated, tokens)", "Calibrated estimate (tokens)",
               "Achievable estimate (tokens)", "Analytic bound (tokens)"]
    rows = [[html.escape(s.series)] + [html.escape(_cross(s.crossover[k]))
                                       for k in ("measured", "calibrated", "achievable", "bound")]
            for s in rr.series]
    return Table(headers, rows)


def _model(rec: dict) -> str:
    p = rec.get("params")
    return html.escape(rec["model"]) + (f" ({p / 1e6:.1f}M parameters)" if p else "")


def whole_model_blocks(rep: Report) -> list:
    w, res = rep.whole, rep.whole_results
    b: list = [("h2", "whole-models", "Whole models")]
    if w is None or not w.pairs or res is None:
        return b + [("p", "Whole-model matched pairs were not measured: " + (w.why_none if w else "not read") + ". "
                          "The op and block regimes above are the matched comparison; whole-model records without "
                          "a partner are summarised by ssmbench characterize.")]
    source = ("repeated model cases" if res.spread_source == "model" else
              "the op-level run-to-run spread of this report (fewer than "
              f"{stats.MIN_REPEAT_PAIRS} model cases were measured twice; the same device and timing loop)")
    b.append(("p", (f"An SSM model and an attention model at the same d_model, parameter counts within "
                    f"{MAX_PARAM_RATIO:g}x, measured in the same phase, runtime, batch and length, judged by the "
                    "rule above. FLOP ratio: the attention model's FLOPs per step over the SSM model's (analytic "
                    "count of each model's plan). Time and energy ratios: attention model / SSM model, medians "
                    f"per step and NVML joules per step (measurements); intervals from {source}: "
                    f"{res.spread.describe()}.")))
    rows, classes = [], []
    for r in res.regimes:
        rows.append([html.escape(r.title), r.verdict, f"{len(r.points)}: {html.escape(r.verdict_text)}",
                     "; ".join(f"{html.escape(s.title)}: {html.escape(_cross(s.crossover['measured']))} | "
                               f"{html.escape(_cross(s.crossover['bound']))}" for s in r.series)])
        classes.append(["", _verdict_class(r.verdict), "", ""])
    b.append(Table(["Regime (phase, runtime)", "Verdict", "Points (measured)",
                    "Crossover per series, tokens: measured | analytic bound"], rows, "whole-model-verdicts", classes))
    rows, classes = [], []
    for r in res.regimes:
        for s in r.series:
            for p in s.points:
                a, m = p.pair.attention, p.pair.ssm
                ea, em = ((x.get("energy") or {}).get("joules_per_call") for x in (a, m))
                rows.append([p.pair.phase, p.pair.runtime, str(p.pair.batch), f"{p.pair.seqlen:,}",
                             f"{_model(m)}: {format_si(m['time_s']['median'], 's')}",
                             f"{_model(a)}: {format_si(a['time_s']['median'], 's')}",
                             f"{p.flop_ratio:.3g}x", ratio_text(p.time),
                             f"{format_si(em, 'J')} | {format_si(ea, 'J')}", ratio_text(p.energy),
                             ratio_text(p.realised, ""), f"{p.verdict}: {html.escape(p.why)}"])
                classes.append([""] * 11 + [_verdict_class(p.verdict)])
    b.append(Table(["Phase", "Runtime", "Batch", "Length (tokens)", "SSM model, time per step (measurement, median)",
                    "Attention model, time per step (measurement, median)", "FLOP ratio (analytic count, x)",
                    f"Time ratio (measurement, x) [{rep.rule.confidence:.0%} CI]",
                    "Energy per step, SSM | attention (measurement, J)",
                    f"Energy ratio (measurement, x) [{rep.rule.confidence:.0%} CI]",
                    "Realised fraction (time / FLOP ratio)", "Verdict"], rows, "whole-model-points", classes))
    return b


def blocks(rep: Report) -> list:
    b: list = [("answer", answer(rep))]
    b.append(Figure("headline", plots.png(plots.headline(rep)),
                    "Measured speedup and energy saving against the analytic FLOP ratio of every matched point",
                    "Each point is one matched pair: x, how much less arithmetic the SSM does (analytic count); y, "
                    "how much faster it runs (filled) and how much less energy it uses per call (hollow), both "
                    "measurements. On the dashed line the savings would be proportional."))
    b += [("h2", "rule", "The go/no-go rule"), ("p", rep.rule.text()),
          ("p", (f"Parameters: --min-speedup {rep.rule.min_speedup:g}, --min-energy-saving {rep.rule.min_energy:g}, "
                f"--confidence {rep.rule.confidence:g}, --kv-heads {rep.kv_heads}. The time ratio is attention's "
                "median time over the SSM's; the energy ratio attention's joules per call over the SSM's; both > 1 "
                "where the SSM saves."))]
    b += [("h2", "verdicts", "Verdict per regime"),
          ("p", ("One row per regime (phase x level x SSM op). The numbers are those of its headline point (the "
                "longest measured length, then the largest batch); every point is in the regime's section.")),
          verdict_table(rep)]
    for rr in rep.regimes:
        b += [("h2", rr.regime.id, rr.regime.title), ("p", f"Verdict: {rr.verdict} ({rr.verdict_text})."),
              ("p", ("The strongest of both sides at each point, the fastest measured backend (points won): "
                     f"{winners_text(rr)}.")),
              ("h3", None, "Crossover: the length from which the SSM is faster"), crossover_table(rr),
              ("p", ("Predicted crossovers come from both sides evaluated at 512..1,048,576 tokens on "
                    f"{rep.spec.id}; measured ones interpolate between the measured lengths.")),
              ("h3", None, "Matched points"), points_table(rr, rep),
              Figure(f"savings-{rr.regime.id}", plots.png(plots.savings(rr)),
                     f"Realised vs theoretical savings against length: {rr.regime.title}",
                     "Dashed: FLOP ratio (analytic count); solid: time ratio predicted by the calibrated estimate; "
                     "dotted: time ratio of the analytic bounds; points: measured time ratios with their intervals; "
                     "hollow diamonds: measured energy ratios.")]
    b += whole_model_blocks(rep)
    b += [("h2", "figures", "Roofline and energy"),
          Figure("roofline", plots.png(plots.roofline(rep)), f"Roofline of {rep.spec.id} with the measured pairs",
                 "Every paired record at its measured rate (analytic FLOPs over measured median time) against its "
                 "arithmetic intensity; lines: the spec's ceilings with their origin.")]
    e = plots.energy_per_token(rep)
    if e is not None:
        b.append(Figure("energy", plots.png(e), "Energy per token against length",
                        "Measured joules per token (NVML energy over a window of at least one second, divided by "
                        "the tokens per call) of the SSM (solid) and its attention baseline (dashed)."))
    b.append(("h2", "caveats", "Caveats"))
    for c in rep.caveats:
        b += [("h3", f"caveat-{c['id']}", c["title"]), ("p", c["text"])]
        if c["items"]:
            b.append(("ul", c["items"]))
    b += [("h2", "method", "Method"), ("p", rep.matching_rule),
          ("p", stats.__doc__.split("\n\n", 1)[1].replace("\n", " ")),
          ("p", ("Labels: a measurement is a median of CUDA-event timings of the real kernel after its output "
                "passed the correctness gate (energy: the NVML energy counter over at least one second of calls); "
                "an analytic count is the cost model's; the analytic bound is the roofline time at the spec's "
                "ceilings; the achievable estimate adds per-call host cost, latency and attained rates; the "
                "calibrated estimate fits the profile's per-group efficiencies on top.")),
          ("p", (f"Spec: {rep.spec.id} (measured ceilings where the spec has them). Calibration profile: "
                f"{rep.profile.path if rep.profile else 'none (--calibration not given): no calibrated estimates'}."))]
    b += [("h2", "provenance", "Provenance"),
          ("p", ("The report is a pure function of these files, the spec and the profile; regenerate it with "
                "ssmbench report.")),
          Table(["Result file", "Cases", "SHA-256"],
                [[html.escape(str(rf.path)), str(len(rf.cases)), rf.sha256[:16]] for rf in rep.matched.files])]
    return b


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{h}</th>" for h in t.headers)
    body = []
    for i, row in enumerate(t.rows):
        cls = t.classes[i] if i < len(t.classes) else [""] * len(row)
        body.append("<tr>" + "".join(f'<td class="{c}">{v}</td>' if c else f"<td>{v}</td>"
                                     for v, c in zip(row, cls)) + "</tr>")
    tid = f' id="{t.id}"' if t.id else ""
    return f'<div class="scroll"><table{tid}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def to_html(rep: Report) -> str:
    parts, toc = [], []
    for blk in blocks(rep):
        if isinstance(blk, Table):
            parts.append(_html_table(blk))
        elif isinstance(blk, Figure):
            src = "data:image/png;base64," + base64.b64encode(blk.data).decode()
            parts.append(f'<figure id="fig-{blk.name}"><img src="{src}" alt="{html.escape(blk.alt)}">'
                         f"<figcaption>{html.escape(blk.caption)}</figcaption></figure>")
        elif blk[0] in ("h2", "h3"):
            _, hid, text = blk
            if blk[0] == "h2":
                toc.append(f'<li><a href="#{hid}">{html.escape(text)}</a></li>')
            parts.append(f"<{blk[0]}{f' id={chr(34)}{hid}{chr(34)}' if hid else ''}>{html.escape(text)}</{blk[0]}>")
        elif blk[0] == "answer":
            parts.append(f'<p class="answer">{_bold(html.escape(blk[1]))}</p>')
        elif blk[0] == "p":
            parts.append(f"<p>{html.escape(blk[1])}</p>")
        elif blk[0] == "ul":
            parts.append("<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in blk[1]) + "</ul>")
    meta = (f"{html.escape(rep.matched.device)}, spec {html.escape(rep.spec.id)}; {len(rep.points)} matched points "
            f"from {len(rep.matched.files)} result files. Every number says whether it is a measurement, an analytic "
            "count, an achievable or calibrated estimate, or an analytic bound.")
    nav = f'<nav id="contents"><h2>Contents</h2><ol><li><a href="#answer">Answer</a></li>{"".join(toc)}</ol></nav>'
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(TITLE)}</title><style>{CSS}</style></head><body><main>"
            f'<h1 id="answer">{html.escape(TITLE)}</h1><p class="meta">{meta}</p>{nav}'
            + "\n".join(parts) + "</main></body></html>\n")


def _bold(text: str) -> str:
    """**x** at the start of the answer as <strong>."""
    if text.startswith("**") and "**" in text[2:]:
        end = text.index("**", 2)
        return f"<strong>{text[2:end]}</strong>{text[end + 2:]}"
    return text


def _strip_tags(s: str) -> str:
    import re
    return html.unescape(re.sub(r"<[^>]+>", "", s)).replace("|", "/")


def to_markdown(rep: Report, figure_dir: Path, link_prefix: str) -> tuple[str, dict[Path, bytes]]:
    """The Markdown text, and the figure files to write (path -> PNG bytes) beside it."""
    out, files = [f"# {TITLE}", ""], {}
    for blk in blocks(rep):
        if isinstance(blk, Table):
            out += ["| " + " | ".join(_strip_tags(h) for h in blk.headers) + " |",
                    "|" + "---|" * len(blk.headers)]
            out += ["| " + " | ".join(_strip_tags(c) for c in row) + " |" for row in blk.rows]
            out.append("")
        elif isinstance(blk, Figure):
            name = f"{blk.name}.png"
            files[figure_dir / name] = blk.data
            out += [f"![{blk.alt}]({link_prefix}{name})", "", f"*{blk.caption}*", ""]
        elif blk[0] in ("h2", "h3"):
            out += [("## " if blk[0] == "h2" else "### ") + blk[2], ""]
        elif blk[0] in ("p", "answer"):
            out += [blk[1], ""]
        elif blk[0] == "ul":
            out += [f"- {x}" for x in blk[1]] + [""]
    return "\n".join(out), files
