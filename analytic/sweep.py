"""Sweeps over grids of models, specs, phases, batches and lengths; crossover and compute-bound searches.

``sweep`` evaluates every (model, phase) once over the whole (batch, length) grid and all specs at
once (``workloads/evaluate.analyze``) and returns columns (numpy arrays), one row per
(model, spec, phase, batch, length): analytic bounds, bottleneck, memory by class and the capacity
verdict, and energy (``energy_j`` per step, ``energy_per_token_j``, ``avg_power_w``, with
``energy_label``: the energy model of ``analytic/energy.py``, where the spec has an energy section). By
default the energy is at the time bound, computed with the grid (a lower estimate of its static part);
with ``achievable=True`` each row also gets the achievable estimate of the step time (``achievable_s``,
``workloads/report.achievable_rows``) and its energy at that time, exactly as ``predict``'s
``total.energy`` (one point analysis per row: ~10 ms each, so for grids of tens of thousands of rows
leave it off). Rows that do not fit in device memory keep their time bound in ``time_s_ignoring_capacity``
and have ``time_s`` = NaN (written as empty / null). ``state_residency`` (decode rows of models with a
recurrent state): ``on chip (sram)`` where the spec's persistent on-chip level holds the whole state of
the batch and serves its traffic, ``DRAM (exceeds sram)`` where it does not fit, ``DRAM`` on specs
without such a level (``workloads/placement.py``). ``caveat``: on a spec whose DRAM bandwidth is an
in-memory (PIM) rate, the flag that GEMM / tensor work is projected with it (optimistic for host-side
work), with ``time_s_host_gemms`` the time with those calls charged at the host bandwidth.

``crossover``: the smallest length from which an SSM or hybrid model's time bound stays below its
attention baseline's on a spec (prefill and train: prompt / sequence length at equal batch; decode:
context length), found on a geometric grid and refined by bisection on integers. Time bounds are
compared regardless of device-memory capacity; the result says whether each model fits at the
crossover. The default baseline is the built-in transformer with the nearest parameter count.

``compute_bound_batch``: the smallest batch at which a decode step's bottleneck becomes a compute
engine (tensor, vector or special-function) at a given context; ``max_batch_in_memory``: the largest
batch whose weights, KV cache, state and activations fit in device memory (the two are reported side
by side: the first ignores capacity).

Several specs are compared on one kind of ceiling (``common_prefer``): measured only when every spec
has measured values, else the datasheet's for all. Counts (batch, length, bytes) stay exact integers in
CSV, JSON and parquet output.
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Callable, Iterable, Sequence

import numpy as np

from ..errors import UserError
from ..hwspecs import Spec
from .registry import AnalyticError
from .roofline import BYTES_CHOICES, LAUNCH_CHOICES, RESOURCES, SpecTable, check_choice
from .workloads.evaluate import COMPUTE_RESOURCES, analyze
from .workloads.models import Model, builtin_models
from .workloads.phases import PHASES

COLUMNS = ("model", "spec", "phase", "batch", "length", "time_s", "time_s_ignoring_capacity", "sum_s",
           "tokens_per_s", "bottleneck", "fits", "memory_total_bytes", "weights_bytes", "kv_cache_bytes",
           "state_bytes", "activations_bytes", "state_residency", "caveat", "time_s_host_gemms", "ceilings",
           "achievable_s", "energy_j", "energy_per_token_j", "avg_power_w", "energy_label")
# Counts written as exact integers where whole (batch and length are always whole): 1048576 and
# 1000000 must not both print as "1.05e+06".
COUNT_COLUMNS = ("batch", "length", "memory_total_bytes", "weights_bytes", "kv_cache_bytes", "state_bytes",
                 "activations_bytes")
LABEL_NOTE = ("analytic bound (roofline lower bound on time); achievable_s (with --achievable): analytic estimate "
              "(achievable step time, as predict); memory: analytic estimate; energy: energy_label (static power x "
              "the time bound, or with --achievable the achievable step time as predict, + dynamic energy, "
              "analytic/energy.py)")
AT_ACHIEVABLE = ("at the achievable time (static power x the achievable step time + dynamic energy per FLOP and "
                 "per byte, analytic/energy.py, as predict's total.energy)")
FORMATS = ("csv", "json", "parquet")


def common_prefer(specs: Sequence[Spec], prefer: str) -> tuple[str, str]:
    """(ceiling preference, sentence) for comparing several specs: one kind of ceiling for all. Measured
    ceilings only when every spec has measured values; otherwise each spec's own values (datasheet, or
    design assumptions for a hypothetical spec), since a measured (attained) ceiling beside a datasheet
    peak would favour the spec that was not measured."""
    own = "the spec's own values (datasheet; design assumptions for a hypothetical spec)"
    if prefer == "datasheet":
        return "datasheet", f"{own} for every spec (--prefer datasheet)"
    if len(specs) == 1:
        kind = "design assumptions" if specs[0].hypothetical else "the datasheet's"
        return prefer, f"measured ceilings where the spec has them, else {kind}"
    missing = [s.id for s in specs if not s.measured]
    if not missing:
        return "measured", f"measured ceilings where each spec has them (every spec has measured values), else {own}"
    return "datasheet", (f"{own} for every spec: {', '.join(missing)} "
                         f"{'has' if len(missing) == 1 else 'have'} no measured values, so specs are compared on "
                         "one kind of ceiling")


def ceilings_kind(spec: Spec, prefer: str) -> str:
    """The ``ceilings`` cell of a sweep row: what kind of values the spec's bounds divide by."""
    if spec.hypothetical:
        return "design assumptions"
    return "datasheet" if prefer == "datasheet" or not spec.measured else "measured where present"


def _check_grid(name: str, values: Sequence[int], limit: int = 1 << 40) -> np.ndarray:
    vals = list(values)
    if not vals:
        raise UserError(f"{name}: give at least one value")
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 1 <= v <= limit:
            raise UserError(f"{name}: every value must be a positive integer (at most {limit}), got {v!r}")
    return np.asarray(vals, dtype=float)


def sweep(models: Sequence[Model], specs: Sequence[Spec], phases: Sequence[str], batches: Sequence[int],
          lengths: Sequence[int], *, dtype: str = "bf16", prefer: str = "measured", launch: str | None = None,
          bytes_basis: str = "executed", unsupported: list[str] | None = None,
          achievable: bool = False, force_general: bool = False) -> dict[str, np.ndarray]:
    """Columns of the sweep (see ``COLUMNS``), one entry per (model, spec, phase, batch, length);
    ``achievable``: the achievable step time and the energy at it per row (module docstring).

    A (model, phase) the analytic model cannot cost (an op without a rule for that mode, a shape an
    op's kernel cannot run) raises, unless ``unsupported`` is a list: then its rows carry NaN times and
    the bottleneck ``unsupported``, and the reason is appended to the list.

    The columns come from the batched path (``sweep_columns``: every plan's work in one batch, every
    plan projected on every spec in one array), equal to the general path (``evaluate.analyze`` per
    (model, phase)) to rounding; ``force_general`` takes the general path (the equivalence tests
    compare the two)."""
    for p in phases:
        if p not in PHASES:
            raise UserError(f"unknown phase {p!r}; valid phases: {', '.join(PHASES)}")
    if launch is not None:
        check_choice("launch regime", launch, LAUNCH_CHOICES)
    check_choice("bytes basis", bytes_basis, BYTES_CHOICES)
    b = _check_grid("batch", batches)
    ln = _check_grid("length", lengths)
    prefer, _ = common_prefer(specs, prefer)
    table = SpecTable.of(specs, prefer)
    per_spec = np.array([ceilings_kind(sp, prefer) for sp in specs], dtype=object)
    if not (force_general or achievable):  # the batched path computes no achievable estimate
        from . import sweep_columns, sweep_fast

        def general(m, p):
            return analyze(m, p, table, b, ln, dtype=dtype, launch=launch, bytes_basis=bytes_basis, energy=True)

        found: list[str] = []
        try:
            cols = sweep_columns.columns(models, specs, phases, b, ln, table, per_spec, dtype=dtype, launch=launch,
                                         bytes_basis=bytes_basis, unsupported=None if unsupported is None else found,
                                         general=general, column_names=COLUMNS, caveat=_host_caveat)
        except sweep_fast.NotCovered:
            pass
        else:
            if unsupported is not None:
                unsupported += found
            return cols
    kinds = np.repeat(per_spec, len(b) * len(ln))
    parts: dict[str, list] = {c: [] for c in COLUMNS}
    S, nb, nl = len(specs), len(b), len(ln)
    n = S * nb * nl
    spec_ids = np.repeat(np.array([s.id for s in specs], dtype=object), nb * nl)
    bb = np.tile(np.repeat(b, nl), S).astype(np.int64)
    ll = np.tile(np.tile(ln, nb), S).astype(np.int64)
    for m in models:
        for p in phases:
            try:
                r = analyze(m, p, table, b, ln, dtype=dtype, launch=launch, bytes_basis=bytes_basis,
                            energy=not achievable)
            except AnalyticError as exc:
                if unsupported is None:
                    raise
                unsupported.append(f"{m.id} {p}: {exc}")
                _fill_unsupported(parts, m.id, p, spec_ids, bb, ll, n)
                parts["ceilings"][-1] = kinds
                continue
            t = r.time_s.reshape(n)
            fits = r.fits.reshape(n)
            parts["model"].append(np.full(n, m.id, dtype=object))
            parts["spec"].append(spec_ids)
            parts["phase"].append(np.full(n, p, dtype=object))
            parts["batch"].append(bb)
            parts["length"].append(ll)
            parts["time_s"].append(np.where(fits, t, np.nan))
            parts["time_s_ignoring_capacity"].append(t)
            parts["sum_s"].append(r.sum_s.reshape(n))
            with np.errstate(divide="ignore", invalid="ignore"):
                parts["tokens_per_s"].append(np.where(fits, np.broadcast_to(r.tokens, r.time_s.shape).reshape(n) / t, np.nan))
            parts["bottleneck"].append(r.bottleneck_names().reshape(n))
            parts["fits"].append(fits)
            rep = lambda a: np.broadcast_to(a, r.time_s.shape).reshape(n)  # noqa: E731
            parts["memory_total_bytes"].append(rep(r.memory_total))
            parts["weights_bytes"].append(rep(r.memory["weights"]))
            parts["kv_cache_bytes"].append(rep(r.memory["kv_cache"]))
            parts["state_bytes"].append(rep(r.memory["state"]))
            parts["activations_bytes"].append(rep(r.memory["activations"]))
            parts["state_residency"].append(_residency_column(m, p, r, n))
            parts["caveat"].append(np.repeat(np.array([_caveat(c) for c in r.pim], dtype=object), nb * nl))
            parts["time_s_host_gemms"].append(np.concatenate([
                np.full(nb * nl, np.nan) if c is None or c["time_s_host_gemms"] is None
                else np.broadcast_to(c["time_s_host_gemms"], (nb, nl)).reshape(-1) for c in r.pim]))
            parts["ceilings"].append(kinds)
            if achievable:
                ach, e, power, notes = _achievable_energy(m, p, specs, b, ln, dtype=dtype, launch=launch,
                                                          bytes_basis=bytes_basis)
            else:
                ach, e, notes = np.full(n, np.nan), r.energy_j.reshape(n), np.repeat(
                    np.array(r.energy_note, dtype=object), nb * nl)
                with np.errstate(divide="ignore", invalid="ignore"):
                    power = e / t
            e = np.where(fits, e, np.nan)
            parts["achievable_s"].append(np.where(fits, ach, np.nan))
            with np.errstate(divide="ignore", invalid="ignore"):
                parts["energy_j"].append(e)
                parts["energy_per_token_j"].append(e / np.broadcast_to(r.tokens, r.time_s.shape).reshape(n))
                parts["avg_power_w"].append(np.where(fits, power, np.nan))
            parts["energy_label"].append(notes)
    return {c: np.concatenate(v) if v else np.array([]) for c, v in parts.items()}


def _achievable_energy(model: Model, phase: str, specs: Sequence[Spec], batches, lengths, **kw):
    """Per row (spec, batch, length, in the sweep's order): the achievable step time, the energy at it,
    the average power and the energy label, each point as ``predict`` computes it (one ``analyze`` of
    the point with its calls, ``report.achievable_rows``, ``energy_step.step_energy``): NaN energy and the
    reason where a spec has no energy section."""
    from .energy import NO_ESTIMATE
    from .workloads.energy_step import step_energy
    from .workloads.report import achievable_rows
    ach, energy, power, notes = [], [], [], []
    for spec in specs:
        table = SpecTable.of([spec], "measured")  # the attained ceilings of what runs, as predict's estimate
        for bi in batches:
            for li in lengths:
                res = analyze(model, phase, table, [bi], [li], keep_calls=True, **kw)
                ops = [{} for _ in res.calls.calls]
                a = achievable_rows(res, spec, ops)
                tokens = float(res.tokens[0, 0])
                e = step_energy(res, spec, ops, a["time_s"], tokens)
                ach.append(a["time_s"])
                energy.append(np.nan if e["energy_j"] is None else e["energy_j"])
                power.append(np.nan if e["avg_power_w"] is None else e["avg_power_w"])
                notes.append(f"{e['label']} {AT_ACHIEVABLE}" if e["label"] else NO_ESTIMATE)
    return np.array(ach), np.array(energy), np.array(power), np.array(notes, dtype=object)


def _residency_column(model: Model, phase: str, r, n: int) -> np.ndarray:
    if phase != "decode" or model.state_bytes_per_sequence(r.precision.state) == 0:
        return np.full(n, "", dtype=object)
    cells = []
    for res in r.residency:
        where = np.where(res.resident, f"on chip ({res.level})",
                         "DRAM" if res.level is None or res.capacity is None else f"DRAM (exceeds {res.level})")
        cells.append(where.astype(object).reshape(-1))
    return np.concatenate(cells)


def _caveat(pim: dict | None) -> str:
    return "" if pim is None else _host_caveat(pim["host_bandwidth_key"])


def _host_caveat(host_key: str) -> str:
    return ("pim: GEMM / tensor work projected with the in-memory DRAM bandwidth; host-side GEMMs see "
            f"{host_key} (optimistic; see time_s_host_gemms)")


def _fill_unsupported(parts: dict, model: str, phase: str, spec_ids, bb, ll, n: int) -> None:
    nan = np.full(n, np.nan)
    for c in COLUMNS:
        parts[c].append(nan)
    parts["model"][-1] = np.full(n, model, dtype=object)
    parts["spec"][-1] = spec_ids
    parts["phase"][-1] = np.full(n, phase, dtype=object)
    parts["batch"][-1], parts["length"][-1] = bb, ll
    parts["bottleneck"][-1] = np.full(n, "unsupported", dtype=object)
    parts["state_residency"][-1] = parts["caveat"][-1] = parts["energy_label"][-1] = np.full(n, "", dtype=object)
    parts["fits"][-1] = np.zeros(n, dtype=bool)


def _plain(c: str, v):
    """A cell as a plain Python value: None for NaN, int for a whole count, float, bool or str."""
    if isinstance(v, (np.floating, float)):
        if math.isnan(v):
            return None
        return int(v) if c in COUNT_COLUMNS and float(v).is_integer() else float(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def to_records(cols: dict[str, np.ndarray]) -> list[dict]:
    return [{c: _plain(c, cols[c][i]) for c in COLUMNS} for i in range(len(cols["model"]))]


def _csv_cell(c: str, v) -> str:
    v = _plain(c, v)
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if c in COUNT_COLUMNS else f"{v:.6g}"  # a fractional count keeps every digit
    return str(v)


def write_csv(cols: dict[str, np.ndarray], fh) -> None:
    """One header line, then one row per analysis; NaN (no bound, or does not fit) as an empty field;
    counts (``COUNT_COLUMNS``) exact, times and rates to 6 significant digits."""
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(COLUMNS)
    w.writerows([_csv_cell(c, cols[c][i]) for c in COLUMNS] for i in range(len(cols["model"])))


def write_json(cols: dict[str, np.ndarray], fh, meta: dict) -> None:
    json.dump({"label": LABEL_NOTE, "meta": meta, "columns": list(COLUMNS), "rows": to_records(cols)}, fh)
    fh.write("\n")


# Searches -----------------------------------------------------------------------------------------

def default_baseline(model: Model) -> Model:
    """The built-in transformer with the nearest parameter count (log scale)."""
    cands = [m for m in builtin_models().values() if m.spec.family == "transformer"]
    if not cands:
        raise UserError("no built-in transformer model to use as a baseline")
    return min(cands, key=lambda m: abs(math.log(m.params / model.params)))


def _times(model: Model, table: SpecTable, phase: str, batch: int, lengths: np.ndarray, **kw) -> np.ndarray:
    return analyze(model, phase, table, [batch], lengths, **kw).time_s[0, 0]


def crossover(model: Model, baseline: Model | None, spec: Spec, phase: str = "prefill", batch: int = 1, *,
              lo: int = 16, hi: int = 1 << 20, dtype: str = "bf16", prefer: str = "measured",
              bytes_basis: str = "executed", recompute: bool = False, impls: dict | None = None) -> dict:
    """Where ``model`` overtakes ``baseline`` (see the module docstring), as plain data. ``impls`` (op ->
    implementation) applies to both models wherever they run the op, as in the prediction."""
    baseline = baseline or default_baseline(model)
    table = SpecTable.of([spec], prefer)
    kw = dict(dtype=dtype, bytes_basis=bytes_basis, impls=impls)
    kw_a = dict(kw, recompute=recompute) if phase == "train" else kw
    out = {"label": "analytic bound", "model": model.id, "baseline": baseline.id, "spec": spec.id,
           "phase": phase, "batch": batch, "range": [lo, hi], "impls": dict(impls or {}),
           "meaning": ("smallest length (prompt / sequence, or decode context) from which the model's "
                       "time bound stays below the baseline's, up to the end of the range")}
    found = search_crossover(lambda x: _times(model, table, phase, batch, x, **kw_a),
                             lambda x: _times(baseline, table, phase, batch, x, **kw_a), lo, hi)
    out.update(found)
    if found["length"] is not None and "speedup_at_end_of_range" in found:
        at = np.array([found["length"]], dtype=float)
        out["fits_at_length"] = {"model": bool(analyze(model, phase, table, [batch], at, **kw_a).fits[0, 0, 0]),
                                 "baseline": bool(analyze(baseline, phase, table, [batch], at, **kw_a).fits[0, 0, 0])}
    return out


def search_crossover(model_times: Callable[[np.ndarray], np.ndarray],
                     baseline_times: Callable[[np.ndarray], np.ndarray], lo: int, hi: int,
                     per_octave: int = 8) -> dict:
    """The smallest length in [lo, hi] from which ``model_times`` stays below ``baseline_times`` (each maps
    lengths to times; NaN: unknown): a geometric grid of ``per_octave`` points per octave, refined by
    bisection on integers. Returns ``length`` (None: none), ``result`` and, where found between grid
    points, ``speedup_at_end_of_range``."""
    grid = np.unique(np.round(np.geomspace(lo, hi, per_octave * int(math.log2(hi / lo)) + 1)))
    ta, tb = model_times(grid), baseline_times(grid)
    if np.isnan(ta).any() or np.isnan(tb).any():
        return {"length": None, "result": "no bound: some resource of the spec is unknown for this work"}
    faster = ta < tb
    if not faster[-1]:
        return {"length": None, "result": f"the model is not faster than the baseline at length {hi}"}
    slower = np.nonzero(~faster)[0]
    if slower.size == 0:
        return {"length": int(grid[0]), "result": f"faster at every length in the range (from {lo})"}
    a, b = int(grid[slower[-1]]), int(grid[slower[-1] + 1])  # model slower at a, faster at b
    while b - a > 1:
        mid = (a + b) // 2
        m = np.array([mid], dtype=float)
        if model_times(m)[0] < baseline_times(m)[0]:
            b = mid
        else:
            a = mid
    return {"length": b, "result": f"faster from length {b}", "speedup_at_end_of_range": float(tb[-1] / ta[-1])}


def max_batch_in_memory(model: Model, spec: Spec, phase: str, length: float, *, limit: int = 1 << 40,
                        dtype: str = "bf16", prefer: str = "measured", impls: dict | None = None) -> dict:
    """Largest batch whose weights + KV cache + state + activations fit in the spec's device memory at
    ``length`` (prompt, sequence or decode context), as plain data; memory grows with the batch, so a
    doubling search and a bisection on integers find it."""
    table = SpecTable.of([spec], prefer)

    def fits(batch: int) -> bool:
        return bool(analyze(model, phase, table, [batch], [length], dtype=dtype, impls=impls).fits[0, 0, 0])

    out = {"label": "analytic estimate (device memory: weights + KV cache + state + activations)",
           "model": model.id, "spec": spec.id, "phase": phase, "length": length}
    if np.isnan(table.dram_bytes[0]):
        return {**out, "batch": None, "result": "not checked: the spec's device-memory capacity is unknown"}
    if not fits(1):
        return {**out, "batch": 0, "result": f"none: batch 1 does not fit in {spec.id}'s device memory"}
    lo = 1
    while lo < limit and fits(min(2 * lo, limit)):
        lo = min(2 * lo, limit)
    if lo == limit:
        return {**out, "batch": limit, "result": f"at least {limit} (the search limit)"}
    hi = 2 * lo  # fits at lo, not at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return {**out, "batch": lo, "result": f"batch {lo}"}


def compute_bound_batch(model: Model, spec: Spec, context: int, *, max_batch: int = 1 << 16,
                        dtype: str = "bf16", prefer: str = "measured", launch: str | None = "graph",
                        bytes_basis: str = "executed", impls: dict | None = None) -> dict:
    """Smallest decode batch whose bottleneck is a compute engine, at ``context`` (plain data)."""
    table = SpecTable.of([spec], prefer)
    compute = [RESOURCES.index(r) for r in COMPUTE_RESOURCES]

    def bound_by_compute(batches: np.ndarray) -> np.ndarray:
        r = analyze(model, "decode", table, batches, [context], dtype=dtype, launch=launch,
                    bytes_basis=bytes_basis, impls=impls)
        return np.isin(r.bottleneck[0, :, 0], compute), r.fits[0, :, 0]

    out = {"label": "analytic bound", "model": model.id, "spec": spec.id, "context": context,
           "meaning": "smallest decode batch whose time bound is set mostly by a compute engine"}
    powers = 2 ** np.arange(int(math.log2(max_batch)) + 1, dtype=float)
    cb, fits = bound_by_compute(powers)
    hits = np.nonzero(cb)[0]
    if hits.size == 0:
        return {**out, "batch": None, "result": f"memory- or launch-bound up to batch {max_batch}"}
    k = int(hits[0])
    if k == 0:
        return {**out, "batch": 1, "fits": bool(fits[0]), "result": "compute-bound already at batch 1"
                + ("" if fits[0] else " (but it does not fit in device memory)")}
    lo, hi = int(powers[k - 1]), int(powers[k])
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if bound_by_compute(np.array([mid], dtype=float))[0][0]:
            hi = mid
        else:
            lo = mid
    fit_hi = bool(bound_by_compute(np.array([hi], dtype=float))[1][0])
    return {**out, "batch": hi, "fits": fit_hi,
            "result": f"compute-bound from batch {hi}" + ("" if fit_hi else " (but it does not fit in device memory)")}


def parse_int_list(text: str, name: str) -> list[int]:
    """'1,2,4' or '1:64:x2' (geometric) or '128:1024:+128' (arithmetic) -> list of ints."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if ":" in part:
                a, b, step = part.split(":")
                a, b = int(a), int(b)
                if step.startswith("x"):
                    f = int(step[1:])
                    if f < 2:
                        raise ValueError
                    v = a
                    while v <= b:
                        out.append(v)
                        v *= f
                elif step.startswith("+"):
                    out.extend(range(a, b + 1, int(step[1:])))
                else:
                    raise ValueError
            else:
                out.append(int(part))
        except ValueError:
            raise UserError(f"{name}: cannot read {part!r}; write a list like 1,2,4 or a range like "
                            "1:64:x2 (geometric) or 128:1024:+128 (arithmetic)") from None
    if not out:
        raise UserError(f"{name}: give at least one value")
    bad = [v for v in out if v < 1]
    if bad:
        raise UserError(f"{name} must be a positive integer, got {bad[0]}")
    return out


def output_format(fmt: str | None, out: str | None) -> str:
    """The format of a sweep's output: ``fmt`` if given, else from ``out``'s extension (.csv, .json,
    .parquet), else csv. Checked before any work: an unknown extension, a binary format without a file,
    or parquet without pyarrow is an error."""
    if fmt is None and out:
        ext = out.rsplit(".", 1)[-1].lower() if "." in out.rsplit("/", 1)[-1] else ""
        if ext not in FORMATS:
            raise UserError(f"--out {out}: cannot tell the format from the extension "
                            f"{'.' + ext if ext else '(none)'}; use .csv, .json or .parquet, or give --format")
        fmt = ext
    fmt = fmt or "csv"
    check_choice("output format", fmt, FORMATS)
    if fmt == "parquet":
        if not out:
            raise UserError("parquet is a binary format: give --out FILE.parquet (stdout takes csv or json)")
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise UserError("writing parquet needs pyarrow, which is not installed: pip install pyarrow "
                            "(or write .csv or .json)") from None
    return fmt


def write_parquet(cols: dict[str, np.ndarray], path: str, meta: dict) -> None:
    """The columns as one parquet table (counts as int64, NaN as null); label and meta as JSON in the
    schema metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    records = to_records(cols)
    table = pa.table({c: [r[c] for r in records] for c in COLUMNS})
    table = table.replace_schema_metadata({"label": LABEL_NOTE, "meta": json.dumps(meta)})
    pq.write_table(table, path)


def records_text(cols: dict[str, np.ndarray], fmt: str, meta: dict) -> str:
    buf = io.StringIO()
    if fmt == "csv":
        write_csv(cols, buf)
    else:
        write_json(cols, buf, meta)
    return buf.getvalue()


def names(items: Iterable) -> list[str]:
    return [getattr(i, "id", str(i)) for i in items]
