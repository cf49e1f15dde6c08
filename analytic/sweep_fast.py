"""The bounds of ``sweep.sweep`` for all (model, phase) pairs at once: the fast path of a sweep.

``sweep`` (the general path) calls ``workloads/evaluate.analyze`` once per (model, phase). Here the same
numbers come from batched steps (``sweep_columns.columns`` drives them and writes the columns):

1. **Work**: every plan's calls evaluated together, one call per cost function
   (``workloads/batch.evaluate_plans``: the same values as ``evaluate_plan``).
2. **Bound** (``bounds`` here): every plan projected on every spec in one array
   (``workloads/grid_bound``: per call the max over resources, per plan the sum and the shares), once
   per launch regime, plus two spec-dependent variants:

   - *processing in memory* (``placement.pim_caveat``): a spec whose DRAM bandwidth is an in-memory rate
     is projected a second time with its host bandwidth, as an extra column of specs; its
     ``time_s_host_gemms`` sums that bound over the calls with tensor work and the plain bound over
     the others.
   - *state on chip* (``placement.apply_residency``): in decode, a spec with a persistent on-chip level
     serves the state bytes where the batch's whole state fits; its rows take those bytes off the DRAM
     row (executed DRAM bytes / bandwidth - state bytes / bandwidth) and add the level to the ``cache``
     resource (max(other executed bytes / slowest cache, all executed bytes / the level)); the points
     where the state fits take this variant's bound (NaN where the plain one is NaN).

   The sum bound (no overlap) is linear in the work: the ceilings' reciprocals times the plan's work
   summed over its calls (and, where the state is on chip, the per-call cache max summed).

Everything equals the general path to rounding (the bound's resource label travels in the three low
bits of each time: ``grid_bound``), which ``tests/test_sweep_fast.py`` checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .roofline import COL, TENSOR_DTYPES, WORK_COLUMNS, SpecTable, spec_ceiling
from .workloads import grid_bound as gb
from .workloads.placement import StateResidency

NCOL = len(WORK_COLUMNS)
TENSOR_COLS = tuple(COL[f"tensor.{d}"] for d in TENSOR_DTYPES)
TIME_COLS = TENSOR_COLS + tuple(COL[c] for c in ("vector", "special_function", "dram.compulsory",
                                                 "dram.executed", "launches"))
WORK_NEEDED = tuple(sorted(set(TIME_COLS) | {COL["tensor.fp32"]}))  # what the bounds and the energy read


class NotCovered(Exception):
    """A sweep this path does not cover (a PIM spec that keeps the state on chip): the general path runs."""


def pim_host(sc):
    """The host-side DRAM ceiling of a PIM spec, None for any other (as ``placement.pim_caveat``)."""
    if sc.spec.memory["dram"].host_bandwidth is None:
        return None
    host = spec_ceiling(sc.spec, "memory.dram.host_bandwidth", sc.prefer)
    if host.origin == "unknown" and host.provenance.startswith("the spec lists no"):
        return None
    return host


@dataclass
class Plans:
    """The supported plans of a sweep, their calls in plan order in the batch (``order``; plan i's from
    ``starts[i]``), and each plan's work summed over its calls ``tot`` [NCOL, n_plans, P]."""

    order: np.ndarray
    starts: np.ndarray
    sizes: np.ndarray
    regimes: list[str]  # launch regime per plan
    tot: np.ndarray = field(default=None)

    def calls(self, idx) -> tuple[np.ndarray, np.ndarray]:
        """(calls, starts) of the plans ``idx``, one after another."""
        sel = np.concatenate([self.order[self.starts[i]:self.starts[i] + self.sizes[i]] for i in idx])
        starts = np.concatenate([[0], np.cumsum(self.sizes[idx])[:-1]]).astype(int)
        return sel, starts


def plans_of(index: list[np.ndarray], work: np.ndarray, regimes: list[str]) -> Plans:
    sizes = np.array([len(i) for i in index], dtype=int)
    order = np.concatenate(index) if index else np.zeros(0, dtype=int)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    pl = Plans(order, starts, sizes, regimes)
    P = work.shape[-1]
    pl.tot = np.zeros((NCOL, len(index), P))
    cols = np.array(WORK_NEEDED)
    for k, i in enumerate(index):  # every column needed at once, one plan's calls (in order) at a time
        if len(i):
            pl.tot[cols, k] = work[cols[:, None], i[None, :]].sum(axis=1)
    return pl


def _kinds(table: SpecTable, regime: str, bytes_basis: str, hosts: list[tuple[int, object]]) -> list[gb.RowKind]:
    """Row kinds on the table's specs followed by the host-bandwidth variants of its PIM specs."""
    kinds = gb.standard_kinds(table, regime, bytes_basis)
    known = [(s, h) for s, h in hosts if h.value is not None]
    if not known:
        return kinds
    sub = table.take([s for s, _ in known])
    variant = gb.standard_kinds(sub, regime, bytes_basis, inv_dram=np.array([1.0 / h.value for _, h in known]))
    return [gb.RowKind(a.col, np.concatenate([a.coef, b.coef]), np.concatenate([a.resource, b.resource]),
                       a.tensor) for a, b in zip(kinds, variant)]


def sum_bound(table: SpecTable, tot: np.ndarray, regime: str, bytes_basis: str) -> np.ndarray:
    """The sum bound [n_plans, S, P] of plans whose work summed over calls is ``tot`` [NCOL, n_plans, P]:
    the ceilings' reciprocals [S, terms] times the work [terms, n_plans x P], one matrix product."""
    cols = [COL[f"tensor.{d}"] for d in TENSOR_DTYPES] + [COL[c] for c in (
        "vector", "special_function", f"dram.{bytes_basis}", "dram.executed", "launches")]
    inv = np.concatenate([table.inv_tensor, np.stack([table.inv_vector, table.inv_sfu, table.inv_dram,
                                                      table.inv_cache, table.launch_s[regime]], axis=1)], axis=1)
    n, P = tot.shape[1:]
    return np.moveaxis((inv @ tot[cols].reshape(len(cols), n * P)).reshape(-1, n, P), 0, 1)


@dataclass
class Bounds:
    """Per supported plan [n_plans, S, P]: time bound (NaN where none), bottleneck index (-1: none), sum
    bound; per PIM spec the host-GEMM time [n_plans, P] (NaN where unknown)."""

    time: np.ndarray
    bottleneck: np.ndarray
    sum: np.ndarray
    host_gemms: dict[int, np.ndarray]


def bounds(work: np.ndarray, pl: Plans, table: SpecTable, bytes_basis: str, hosts: list[tuple[int, object]]
           ) -> Bounds:
    """``work`` (``batch.Columns``) [NCOL, n_calls, P]; ``hosts``: (spec index, host DRAM ceiling) of the PIM
    specs."""
    n, S, P = len(pl.sizes), len(table.specs), work.shape[-1]
    out = Bounds(np.empty((n, S, P)), np.empty((n, S, P), dtype=int), np.empty((n, S, P)),
                 {s: np.full((n, P), np.nan) for s, _ in hosts})
    nonzero = work.any_per_call()
    used = [c for c in TENSOR_COLS if nonzero[c].any()]  # tensor dtypes some call uses
    tensor = sum(work[c] for c in used) > 0 if used else np.zeros(work.shape[1:], dtype=bool)
    some = tensor | (work[COL["vector"]] > 0) | (work[COL["special_function"]] > 0) | (
        work[COL["dram.executed"]] > 0) | (work[COL["launches"]] > 0)
    known = [s for s, h in hosts if h.value is not None]
    for regime in dict.fromkeys(pl.regimes):
        idx = np.array([i for i, r in enumerate(pl.regimes) if r == regime])
        sel, _ = pl.calls(idx)
        plan_of = np.repeat(np.arange(len(idx)), pl.sizes[idx])
        rows = gb.make_rows(_kinds(table, regime, bytes_basis, hosts), nonzero, sel)
        pr = gb.project(work, rows, plan_of, len(idx), values=tuple(s for s in known) + tuple(
            S + h for h in range(len(known))), some=some[sel])
        out.time[idx] = pr.time[:, :S]
        out.bottleneck[idx] = np.where(np.isnan(pr.time), -1, pr.bottleneck())[:, :S]
        for h, s in enumerate(known):
            mixed = np.where(tensor[sel], pr.values[S + h], pr.values[s])
            out.host_gemms[s][idx] = gb.plan_sum(mixed, plan_of, len(idx))
        out.sum[idx] = sum_bound(table, pl.tot[:, idx], regime, bytes_basis)
    return out


def state_on_chip(out: Bounds, work: np.ndarray, state: tuple[np.ndarray, np.ndarray], pl: Plans,
                  table: SpecTable, s: int, res: dict[int, StateResidency], bytes_basis: str) -> dict[int, np.ndarray]:
    """Spec ``s``'s state-on-chip variant (module docstring) written into ``out`` where ``res[i]`` (plan i,
    a decode plan with a recurrent state) says the state is resident. ``state`` (compulsory, executed)
    state bytes per call x multiplicity [n_calls, P]. Returns the executed state bytes moved on chip per
    plan [P] (0 where not resident)."""
    idx = np.array([i for i, r in res.items() if r.resident.any()])
    if not len(idx):
        return {}
    level = res[int(idx[0])]
    sel, starts = pl.calls(idx)
    P = work.shape[-1]
    ex, st_e, st_c, xm = COL["dram.executed"], NCOL, NCOL + 1, NCOL + 2
    se, sc = state[1][sel], state[0][sel]
    Wr = np.zeros((NCOL + 3, len(sel), P))  # the work columns the bound reads, then the state columns
    for c in TIME_COLS:
        Wr[c] = work[c][sel]
    Wr[NCOL:] = np.stack([se, sc, Wr[ex] - se])
    one = table.take([s])
    inv_level = np.array([1.0 / level.bandwidth])
    base_col, state_col = (ex, st_e) if bytes_basis == "executed" else (COL["dram.compulsory"], st_c)
    regime = pl.regimes[int(idx[0])]
    if any(pl.regimes[i] != regime for i in idx):
        raise ValueError("decode plans share one launch regime")
    std = gb.standard_kinds(one, regime, "compulsory")  # tensor.., vector, sfu, dram, cache, launch
    dram = gb.RowKind(base_col, one.inv_dram, np.array([gb.R["dram"]]))
    kinds = std[:-3] + [dram,
                        gb.RowKind(state_col, -one.inv_dram, dram.resource, add_to=len(std) - 3),
                        gb.RowKind(xm, one.inv_cache, np.array([gb.R["cache"]]), needs=ex),
                        gb.RowKind(ex, inv_level, np.array([gb.R["cache"]])), std[-1]]
    nonzero = np.zeros(Wr.shape[:2], dtype=bool)
    for c in TIME_COLS + (st_e, st_c, xm):
        nonzero[c] = Wr[c].any(axis=1)
    rows = gb.make_rows(kinds, nonzero, np.arange(len(sel)))
    pr = gb.project(Wr, rows, np.repeat(np.arange(len(idx)), pl.sizes[idx]), len(idx))  # NaN: plain variant's
    time, bott = pr.time, pr.bottleneck()[:, 0]
    cache = gb.segment_sums(np.maximum(Wr[xm] * one.inv_cache[0], Wr[ex] * inv_level[0]), starts)
    state_tot = gb.segment_sums(Wr[state_col], starts)
    tot = pl.tot[:, idx]
    lin = (sum(one.inv_tensor[0, j] * tot[COL[f"tensor.{d}"]] for j, d in enumerate(TENSOR_DTYPES))
           + one.inv_vector[0] * tot[COL["vector"]] + one.inv_sfu[0] * tot[COL["special_function"]]
           + (one.inv_dram[0] * tot[base_col] - one.inv_dram[0] * state_tot)
           + one.launch_s[regime][0] * tot[COL["launches"]])
    moved = gb.segment_sums(se, starts)
    out_moved = {}
    for n, i in enumerate(idx.tolist()):
        mk = res[i].resident.reshape(P)
        plain = out.time[i, s].copy()
        out.time[i, s] = np.where(mk, np.where(np.isnan(plain), np.nan, time[n, 0]), plain)
        out.bottleneck[i, s] = np.where(mk, np.where(np.isnan(plain), -1, bott[n]), out.bottleneck[i, s])
        out.sum[i, s] = np.where(mk, lin[n] + cache[n], out.sum[i, s])
        out_moved[i] = np.where(mk, moved[n], 0.0)
    return out_moved
