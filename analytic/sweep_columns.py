"""The columns of ``sweep.sweep`` from the batched bounds (``sweep_fast``): plans, memory, energy, rows.

``columns`` collects the plans of every (model, phase), evaluates their work in one batch
(``workloads/batch.py``), projects them (``sweep_fast.bounds``, the state-on-chip and PIM variants),
then adds what ``evaluate.analyze`` adds per pair: memory by class and the device-memory verdict
(``evaluate.memory_by_class``, the training forward's bytes from the same batch), the energy at the
time bound (``energy.energy`` once over every plan and spec, again for a spec that serves state bytes
on chip, with those bytes moved: ``evaluate._energy``'s rule), and writes each column once, in the
general path's row order (model, phase, spec, batch, length).
"""

from __future__ import annotations

import numpy as np

from . import sweep_fast as sf
from .energy import NO_ESTIMATE, TERMS, counts, label, not_modelled, power_limit_stretch
from .registry import AnalyticError
from .roofline import COL, RESOURCES, SpecTable
from .workloads.batch import evaluate_plans
from .workloads.evaluate import (
    AT_BOUND,
    _energy_table,
    compile_plan,
    forward_plan,
    memory_by_class,
    phase_grid,
)
from .workloads.phases import PHASES, plan
from .workloads.placement import StateResidency, persistent_level
from .workloads.precision import as_precision

NAMES = np.array(list(RESOURCES) + ["none"], dtype=object)  # GridResult.bottleneck_names, as objects (the other text columns are)


def columns(models, specs, phases, b: np.ndarray, ln: np.ndarray, table: SpecTable, kinds: np.ndarray, *,
            dtype: str, launch: str | None, bytes_basis: str, unsupported: list[str] | None, general,
            column_names: tuple[str, ...], caveat) -> dict[str, np.ndarray]:
    """``sweep.sweep``'s columns. ``general(model, phase)`` is ``evaluate.analyze`` of one pair, run for a
    plan that fails a constraint check (it raises the check's message); ``kinds``: the ``ceilings``
    cell per spec; ``caveat(host_key)``: the PIM caveat text."""
    prec = as_precision(dtype)
    S, nb, nl = len(specs), len(b), len(ln)
    P, shape = nb * nl, (nb, nl)
    grids = [phase_grid(p, b.reshape(-1, 1), ln.reshape(1, -1)) for p in PHASES]
    entries, failed = [], {}
    plans, grid_of = [], []
    for m in models:
        for p in phases:
            k = len(entries)
            try:
                cp = compile_plan(plan(m, p), prec)
                fwd = forward_plan(m, None, prec) if p == "train" else None
            except AnalyticError as exc:
                if unsupported is None:
                    raise
                failed[k] = str(exc)
                entries.append((m, p, None, None, None))
                continue
            entries.append((m, p, cp, len(plans), None if fwd is None else len(plans) + 1))
            plans += [cp] + ([fwd] if fwd is not None else [])
            grid_of += [PHASES.index(p)] * (1 + (fwd is not None))
    batch = evaluate_plans(plans, grids, grid_of, shape, columns=sf.WORK_NEEDED)
    for k, (m, p, cp, i, j) in enumerate(entries):
        if cp is not None and (i in batch.failed or j in batch.failed):
            try:
                general(m, p)
            except AnalyticError as exc:
                if unsupported is None:
                    raise
                failed[k] = str(exc)
                continue
            raise AssertionError(f"{m.id} {p}: a constraint failed in the batch but not in evaluate.analyze")
    if unsupported is not None:
        unsupported += [f"{entries[k][0].id} {entries[k][1]}: {failed[k]}" for k in sorted(failed)]
    ok = [k for k in range(len(entries)) if k not in failed]
    n_calls = batch.work.shape[1]
    work = batch.work.reshape(batch.work.shape[0], n_calls, P)
    regimes = [launch or ("graph" if entries[k][1] == "decode" else "eager") for k in ok]
    pl = sf.plans_of([batch.index[entries[k][3]] for k in ok], work, regimes)
    hosts = [(s, h) for s, sc in enumerate(table.specs) if (h := sf.pim_host(sc)) is not None]
    bd = sf.bounds(work, pl, table, bytes_basis, hosts)

    # state on chip: decode plans of models with a recurrent state
    res: dict[int, list] = {}
    moved: dict[tuple[int, int], np.ndarray] = {}
    cnt = batch.counts[:, None]
    state = (batch.bytes["state_compulsory"].reshape(n_calls, P) * cnt,
             batch.bytes["state_executed"].reshape(n_calls, P) * cnt)
    levels = [persistent_level(sc) for sc in table.specs]  # once per spec, not per plan
    for i, k in enumerate(ok):
        m, p = entries[k][:2]
        per_seq = m.state_bytes_per_sequence(prec.state)
        if p == "decode" and per_seq > 0:
            res[i] = _residency(table, levels, per_seq, b, shape)
    for s in range(S):
        if any(r[s].resident.any() for r in res.values()):
            if s in dict(hosts):
                raise sf.NotCovered("a PIM spec that keeps the state on chip")
            got = sf.state_on_chip(bd, work, state, pl, table, s, {i: r[s] for i, r in res.items()}, bytes_basis)
            moved.update({(i, s): v for i, v in got.items()})

    # memory and capacity
    mem_cols = ("weights", "kv_cache", "state", "activations")
    mem = {c: np.empty((len(ok), P)) for c in mem_cols + ("total",)}
    fits = np.empty((len(ok), S, P), dtype=bool)
    cap = table.dram_bytes.reshape(-1, 1)
    for i, k in enumerate(ok):
        m, p, cp, pi, fi = entries[k]
        fwd = (plans[fi], batch.call_bytes(fi)) if fi is not None else None
        mb = memory_by_class(m, p, prec, False, grids[PHASES.index(p)], shape, batch.call_bytes(pi), None, cp,
                             forward=fwd)
        total = sum(mb.values())
        for c in mem_cols:
            mem[c][i] = mb[c].reshape(P)
        mem["total"][i] = total.reshape(P)
        on_chip = np.zeros((S, P))  # a resident state lives on chip, not in device memory
        for s, r in enumerate(res.get(i, ())):
            if r.resident.any():
                on_chip[s] = np.where(r.resident, mb["state"], 0.0).reshape(P)
        in_dram = total.reshape(1, P) - on_chip
        fits[i] = ~(in_dram > cap)

    energy_j, notes = _energy(bd, pl, table, moved, len(ok), S)
    tokens = np.stack([(b.reshape(-1, 1) * (ln.reshape(1, -1) if entries[k][1] != "decode" else 1)
                        + np.zeros(shape)).reshape(P) for k in ok]) if ok else np.zeros((0, P))
    return _assemble(column_names, entries, ok, bd, mem, fits, tokens, energy_j, notes, res, hosts, kinds,
                     specs, b, ln, S, P, caveat)


def _residency(table: SpecTable, levels: list, per_seq: int, b: np.ndarray, shape) -> list[StateResidency]:
    """``placement.state_residency`` of a decode plan whose model has a recurrent state, with each
    spec's persistent level looked up once (``levels``: ``persistent_level`` per spec)."""
    state = np.broadcast_to(b.reshape(-1, 1) * float(per_seq), shape).astype(float)
    nowhere = np.zeros(shape, dtype=bool)
    out = []
    for sc, (level, cap, bw, why) in zip(table.specs, levels):
        resident = (state <= cap) if level is not None and not why else nowhere
        out.append(StateResidency(sc.spec.id, level, cap, bw, state, resident, why))
    return out


def _used(c: dict, n: int) -> list[frozenset]:
    """Per plan the energy terms with counts > 0 somewhere on its grid (``energy.energy``'s rule, per plan)."""
    flags = {t: (np.asarray(c[t]).reshape(n, -1) > 0).any(axis=1) for t in TERMS}
    return [frozenset(t for t in TERMS if flags[t][i]) for i in range(n)]


def _energy(bd: sf.Bounds, pl: sf.Plans, table: SpecTable, moved: dict, n: int, S: int):
    """Energy [n_plans, S, P] at the time bound and its note per (plan, spec), as ``evaluate._energy``:
    one ``energy`` call for every plan and spec, and one per spec that serves state bytes on chip (those
    bytes moved from DRAM to the level, where they are; its other plans get the same numbers)."""
    et = _energy_table(table)
    tot = pl.tot
    executed = tot[COL["dram.executed"]]
    time = np.moveaxis(bd.time, 1, 0)  # [S, n, P]
    c = counts(tot, 0.0, executed, on_chip_bytes=0.0)
    out = np.moveaxis(_energy_j(c, time, et), 0, 1).copy()  # [n, S, P]
    used = _used(c, n)
    used_by = {s: used for s in range(S)}
    for s in sorted({s for _, s in moved}):
        on = np.zeros_like(executed)
        for (i, s2), v in moved.items():
            if s2 == s:
                on[i] = v
        cs = counts(tot, 0.0, executed - on, on_chip_bytes=on)
        out[:, s] = _energy_j(cs, time[s:s + 1], et.row(s))[0]
        used_by[s] = _used(cs, n)
    notes: dict[tuple, str] = {}
    for s in range(S):
        for u in set(used_by[s]):
            notes[(s, u)] = _note(et, s, set(u))
    return out, [[notes[(s, used_by[s][i])] for s in range(S)] for i in range(n)]


def _energy_j(c: dict, time: np.ndarray, et) -> np.ndarray:
    """``energy.energy(c, time, et).energy_j`` [S, n, P]: the dynamic energy as one matrix product of the
    coefficients [S, terms] by the counts [terms, n x P] over the terms with counts (a term without adds
    0 x a finite coefficient), then the same static power, power-limit stretch and NaN rule."""
    shape = time.shape
    terms = [t for t in TERMS if np.any(c[t])]
    if terms:
        k = np.stack([np.nan_to_num(et.per_term[t]) for t in terms], axis=1)
        e_dyn = (k @ np.stack([np.broadcast_to(c[t], shape[1:]).reshape(-1) for t in terms])).reshape(shape)
    else:
        e_dyn = np.zeros(shape)
    static_w = np.nan_to_num(et.static_w).reshape(-1, 1, 1)
    stretched, _ = power_limit_stretch(e_dyn, time, static_w, et.limit_w.reshape(-1, 1, 1))
    return np.where(et.has_section.reshape(-1, 1, 1), static_w * stretched + e_dyn, np.nan)


def _note(et, s: int, used: set[str]) -> str:
    if not et.has_section[s]:
        return NO_ESTIMATE
    miss = not_modelled(et, s, used)
    return (f"{label(et, s)} at the time bound ({AT_BOUND})"
            + (f"; excludes {', '.join(sorted(miss))} (unknown in the spec)" if miss else ""))


def _assemble(names, entries, ok, bd, mem, fits, tokens, energy_j, notes, res, hosts, kinds, specs, b, ln, S, P,
              caveat) -> dict[str, np.ndarray]:
    E, n = len(entries), len(entries) * S * P
    okr = np.array(ok, dtype=int)
    every = len(ok) == E  # no unsupported pair: the arrays are the columns as they are

    def put(v, fill=np.nan, dtype=float):
        if every:
            return np.ascontiguousarray(v, dtype=dtype).reshape(n)
        a = np.full((E, S, P), fill, dtype=dtype)
        a[okr] = v
        return a.reshape(n)

    t = bd.time
    tok = tokens[:, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.where(fits, energy_j, np.nan)
        cols = {
            "time_s": put(np.where(fits, t, np.nan)), "time_s_ignoring_capacity": put(t), "sum_s": put(bd.sum),
            "tokens_per_s": put(np.where(fits, tok / t, np.nan)), "fits": put(fits, False, bool),
            "energy_j": put(e), "energy_per_token_j": put(e / tok), "avg_power_w": put(e / t),
        }
    cols["model"] = np.repeat(np.array([en[0].id for en in entries], dtype=object), S * P)
    cols["spec"] = np.tile(np.repeat(np.array([s.id for s in specs], dtype=object), P), E)
    cols["phase"] = np.repeat(np.array([en[1] for en in entries], dtype=object), S * P)
    cols["batch"] = np.tile(np.repeat(b.astype(np.int64), len(ln)), S * E)
    cols["length"] = np.tile(ln.astype(np.int64), len(b) * S * E)
    cols["ceilings"] = np.tile(np.repeat(kinds, P), E)
    if every:
        cols["bottleneck"] = NAMES[bd.bottleneck].reshape(n)
    else:
        bott = np.full((E, S, P), "unsupported", dtype=object)
        bott[okr] = NAMES[bd.bottleneck]
        cols["bottleneck"] = bott.reshape(n)
    for c, key in (("memory_total_bytes", "total"), ("weights_bytes", "weights"), ("kv_cache_bytes", "kv_cache"),
                   ("state_bytes", "state"), ("activations_bytes", "activations")):
        cols[c] = put(np.broadcast_to(mem[key][:, None, :], (len(ok), S, P)))
    # state residency as codes into a few strings: "", then per spec (on chip, DRAM) texts
    texts, code = [""], np.zeros((E, S, P), dtype=np.intp)
    if res:  # the texts depend on the spec alone (its persistent level): codes per spec, then per plan
        on, off = np.zeros((S, 1), dtype=np.intp), np.zeros((S, 1), dtype=np.intp)
        for s, r in enumerate(next(iter(res.values()))):
            for t, at in ((f"on chip ({r.level})", on),
                          ("DRAM" if r.level is None or r.capacity is None else f"DRAM (exceeds {r.level})", off)):
                if t not in texts:
                    texts.append(t)
                at[s] = texts.index(t)
        for i, rs in res.items():
            code[ok[i]] = np.where(np.stack([r.resident.reshape(P) for r in rs]), on, off)
    cols["state_residency"] = np.array(texts, dtype=object)[code.reshape(n)]
    cav = np.zeros((E, S), dtype=np.intp)
    host = np.full((E, S, P), np.nan)
    words = [""]
    for s, h in hosts:
        words.append(caveat(h.key))
        cav[okr, s] = len(words) - 1
        host[okr, s] = bd.host_gemms[s]
    cols["caveat"] = np.repeat(np.array(words, dtype=object)[cav.reshape(-1)], P)
    cols["time_s_host_gemms"] = host.reshape(n)
    lab = np.full((E, S), "", dtype=object)
    if ok:
        lab[okr] = np.array(notes, dtype=object).reshape(len(ok), S)
    cols["energy_label"] = np.repeat(lab.reshape(-1), P)
    cols["achievable_s"] = np.full(n, np.nan)  # only with achievable=True, which takes the general path
    return {c: cols[c] for c in names}
