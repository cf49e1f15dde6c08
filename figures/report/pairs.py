"""Matched pairs: which measured SSM record stands against which measured attention record.

The rule (stated in the report's method section, from ``MATCHING_RULE``):

- sides: an SSM op or block (``SSM_OPS``) against causal attention at the same level (op:
  ``attention_causal``; block: ``block:attention``);
- phase from the mode: ``fwd`` is prefill, ``fwdbwd`` a training step, ``decode`` a decode step;
- same dtype, same timing method (CUDA-graph replays or eager calls: a decode step timed eagerly is
  mostly host time, a graph replay is not), same batch B, same width W: the channels each token's mixer carries (op level: the
  SSM's H x P, or E for the Mamba-1 scan, or H x Pv for the delta rule, against attention's H x P;
  block level: the model width D of both blocks);
- same length: prefill and training, the sequence length L (attention with S = L); decode, the
  attention's KV-cache length S; an SSM decode step carries no context (its state is fixed-size), so
  one SSM decode record stands against attention at every measured context;
- attention with ``kv_heads`` KV heads (G), by default 8 (GQA as in Llama-3-8B);
- the strongest of both sides: the SSM side of a point is the fastest median time over every SSM
  backend and implementation measured for that problem (the op, its dims but the length and the
  kernel's tiling ``IMPLEMENTATION_DIMS``, dtype, timing method), e.g. fla's chunked and recurrent
  gated delta rule; the baseline is the fastest over every attention backend measured at that point
  (cuDNN, the flash kernels in SDPA, FA3, ...); the slower ones of each side are kept as alternatives
  and the report names the backend that won each point.

A *regime* is (phase, level, SSM op); a *series* is one SSM problem (its dims but the length and the
tiling, and the batch) within a regime, whatever backend wins it; the points of a series differ only
in length. Only the latest record of each
case key counts (``measure.results.latest_by_key``); records that did not finish are caveats.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ...analytic.cases import BLOCK_PREFIX
from ...errors import UserError
from ...measure.results import (
    Record,
    ResultFile,
    find_results,
    latest_by_key,
    measured_on,
    oldest_first,
)

PHASES = {"fwd": "prefill", "decode": "decode", "fwdbwd": "training"}
PHASE_ORDER = ("prefill", "decode", "training")
DEFAULT_KV_HEADS = 8  # Llama-3-8B, Mistral 7B: 8 KV heads (GQA); the attention the suites measure

# width: the channels one token's mixer carries (see the module docstring)
_WIDTH: dict[str, Callable[[Mapping[str, int]], int]] = {
    "ssd": lambda d: d["H"] * d["P"],
    "mamba3": lambda d: d["H"] * d["P"],
    "mamba1_scan": lambda d: d["E"],
    "gated_delta_rule": lambda d: d["H"] * d["Pv"],
    "attention_causal": lambda d: d["H"] * d["P"],
    "block:mamba1": lambda d: d["D"],
    "block:mamba2": lambda d: d["D"],
    "block:mamba3": lambda d: d["D"],
    "block:attention": lambda d: d["D"],
}
SSM_OPS = {
    "ssd": "Mamba-2 SSD",
    "mamba1_scan": "Mamba-1 selective scan",
    "mamba3": "Mamba-3 (SISO)",
    "gated_delta_rule": "gated delta rule (Gated DeltaNet)",
    "block:mamba1": "Mamba block",
    "block:mamba2": "Mamba2 block",
    "block:mamba3": "Mamba3 block",
}
ATTENTION_OPS = {"op": "attention_causal", "block": "block:attention"}
# Dimensions that set a kernel's tiling, not the problem it solves (the output is the same for any
# value): records that differ only in them are backends of one problem. C, the chunk length of the
# chunked SSD / delta-rule kernels (a recurrent kernel has none).
IMPLEMENTATION_DIMS = ("C",)
MATCHING_RULE = (
    "A matched pair is one SSM record and the strongest attention record at the same level (op: causal "
    "attention; block: the attention block), dtype, batch, width (op level: the SSM's heads x head dim, "
    "or E for the Mamba-1 scan, against attention's heads x head dim; block level: the model width D) and "
    "length (prefill and training: the sequence length, attention with S = L; decode: the KV-cache "
    "length, against which one context-free SSM decode step stands at every measured context), with "
    "attention's KV heads fixed (--kv-heads). Both sides are the strongest measured: the SSM side is the "
    "fastest SSM backend or implementation measured for that problem (its dims but the chunk length, which "
    "only tiles the kernel), the baseline the fastest attention backend at that point; the others of each "
    "side are listed beside the winner.")


def level_of(op: str) -> str:
    return "block" if op.startswith(BLOCK_PREFIX) else "op"


@dataclass(frozen=True)
class Regime:
    phase: str
    level: str
    ssm_op: str

    @property
    def id(self) -> str:
        return f"{self.phase}-{self.level}-{self.ssm_op.replace(':', '-').replace('_', '-')}"

    @property
    def title(self) -> str:
        base = "causal attention" if self.level == "op" else "the attention block"
        return f"{self.phase.capitalize()}, {self.level} level: {SSM_OPS[self.ssm_op]} vs {base}"

    @property
    def short(self) -> str:
        return f"{self.phase} ({self.level} level) {SSM_OPS[self.ssm_op]}"

    def sort_key(self) -> tuple:
        return (PHASE_ORDER.index(self.phase), self.level != "op", self.ssm_op)


@dataclass
class Point:
    """One matched pair: the strongest SSM record and the strongest attention record at one length."""

    regime: Regime
    series: str           # the SSM problem and batch: "B=1, H=64, N=128, P=64, ..."
    batch: int
    width: int
    length: int           # tokens: sequence length (prefill, training) or KV-cache length (decode)
    ssm: Record           # the fastest SSM backend of the problem at this length
    baseline: Record      # the fastest attention backend at this point
    alternatives: list[Record] = field(default_factory=list)  # slower attention backends at the point
    ssm_alternatives: list[Record] = field(default_factory=list)  # slower SSM backends of the problem


@dataclass
class Matched:
    points: list[Point]
    records: dict[str, Record]          # every latest record of the files read, by key
    files: list[ResultFile]
    device: str
    skipped_files: list[dict]
    unmatched: list[Record]             # ok SSM / attention records with no partner

    def regimes(self) -> list[Regime]:
        return sorted({p.regime for p in self.points}, key=Regime.sort_key)


def read_folders(folders: list[str | Path]) -> tuple[list[ResultFile], list[dict]]:
    files, skipped = [], []
    for f in folders:
        p = Path(f)
        if not p.is_dir():
            raise UserError(f"--results {p}: no such folder (expected a folder of result files, e.g. results/h200)")
        found = find_results(p)
        files += found.files
        skipped += found.skipped
    if not files:
        raise UserError(f"--results {', '.join(map(str, folders))}: no result files (run-*.json / .jsonl) found")
    return oldest_first(files), skipped


def device_of(files: list[ResultFile]) -> str:
    names = {measured_on(rf) for rf in files}
    if None in names:
        bad = next(rf.path for rf in files if measured_on(rf) is None)
        raise UserError(f"{bad}: the result metadata names no device (meta.device.name); a report compares "
                        "measurements of one device")
    if len(names) > 1:
        raise UserError(f"--results: the files were measured on {len(names)} devices ({', '.join(sorted(names))}); "
                        "a report compares measurements of one device: give the folders of one device")
    return names.pop()


def _length(rec: Record) -> int | None:
    d = rec["dims"]
    if rec["mode"] == "decode":
        return d.get("S")
    if rec["op"] == "attention_causal" and d.get("S", d.get("L")) != d.get("L"):
        return None  # a chunked prefill (L < S): not self-attention over the prompt
    return d.get("L")


def graph_timed(rec: Record) -> bool:
    """Timed as CUDA-graph replays: by the timer, or by the backend's own graph (the blocks' decode
    steps); the launch regime of the record's bound and estimate (``measure.results.launch_regime``)."""
    return rec.launch == "graph"


def _problem(rec: Record) -> tuple:
    """The SSM problem a record solves, but its length: dims without L, S and the tiling."""
    return tuple(sorted((k, v) for k, v in rec["dims"].items() if k not in ("L", "S", *IMPLEMENTATION_DIMS)))


def _series(problem: tuple) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(problem, key=lambda kv: (kv[0] != "B", kv[0])))


def fastest_first(records: list[Record]) -> list[Record]:
    return sorted(records, key=lambda r: (r.time_s["median"], r["backend"], r.key))


def match(folders: list[str | Path], kv_heads: int = DEFAULT_KV_HEADS) -> Matched:
    """Read the result folders and pair their records by the rule of the module docstring."""
    files, skipped = read_folders(folders)
    device = device_of(files)
    records = latest_by_key(files)
    ok = [r for r in records.values() if r.status == "ok" and r["mode"] in PHASES]
    attention: dict[tuple, list[Record]] = {}
    ssm: dict[tuple, list[Record]] = {}  # one problem at one length (decode: None), every backend
    for r in ok:
        op = r["op"]
        if op in ATTENTION_OPS.values():
            if r["dims"].get("G") != kv_heads or _length(r) is None:
                continue
            key = (PHASES[r["mode"]], level_of(op), r["dtype"], graph_timed(r), r["dims"]["B"], _WIDTH[op](r["dims"]),
                   _length(r))
            attention.setdefault(key, []).append(r)
        elif op in SSM_OPS:
            length = None if r["mode"] == "decode" else _length(r)
            ssm.setdefault((op, _problem(r), r["mode"], r["dtype"], graph_timed(r), length), []).append(r)
    points, unmatched, used = [], [], set()
    for (op, problem, mode, dtype, graph, length), cands in ssm.items():
        ranked_ssm = fastest_first(cands)
        r = ranked_ssm[0]
        phase, level = PHASES[mode], level_of(op)
        base = (phase, level, dtype, graph, r["dims"]["B"], _WIDTH[op](r["dims"]))
        lengths = [k[-1] for k in attention if k[:-1] == base] if length is None else [length]
        found = False
        for n in sorted(x for x in lengths if x is not None):
            att = attention.get((*base, n))
            if not att:
                continue
            ranked = fastest_first(att)
            points.append(Point(Regime(phase, level, op), _series(problem), base[4], base[5], n, r, ranked[0],
                                ranked[1:], ranked_ssm[1:]))
            used.update(a.key for a in att)
            found = True
        if not found:
            unmatched += ranked_ssm
    unmatched += [a for cands in attention.values() for a in cands if a.key not in used]
    points.sort(key=lambda p: (p.regime.sort_key(), p.series, p.length))
    return Matched(points, records, files, device, skipped, unmatched)
