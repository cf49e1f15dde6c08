"""The roofline bound of many plans on many specs over one grid, as few numpy passes over one array.

``evaluate.analyze`` projects each plan on the specs (``roofline.project_work``: a time per resource,
their max per call, NaN where work has no ceiling) and sums the calls. Each resource's time is a work
column times a per-spec constant (1 / ceiling), so the projection of every plan is one product of a
[rows, specs, points] array, where a *row* is one (call, resource) pair whose work column is not zero
somewhere on the grid (a resource a call never uses gives time 0, which cannot be a call's unique max):

- ``tensor``: one row per tensor dtype the call uses, at 1 / compute.tensor.<dtype>; a call with several
  adds the others into its first (``project_work``'s sum over dtypes).
- ``vector``, ``special_function``, ``launch``: the column at its ceiling.
- ``dram`` and ``cache`` on the executed basis divide the same column (executed bytes) by two
  bandwidths: their max is the column times the larger 1 / bandwidth, labelled ``dram`` when that is
  DRAM's (ties go to the first resource, as in ``project_work``), else ``cache``: one row. On the
  compulsory basis each has its row.

**Which resource is the max** is carried through the max itself: before it, the three low bits of each
time's float64 are replaced by 7 - the resource's index (``RESOURCES`` order), so that of two equal
times the earlier resource compares larger, and after it the bits give the resource and are cleared
again. This changes a time by less than 8 units in the last place (relative 2e-15); two resources whose
times differ by less than that are labelled as if tied.

A call's bound is the max over its rows (calls with the same number of rows taken together, in blocks
that stay in cache), the seconds each resource bounds in a plan (``shares``) one ``np.bincount`` keyed by
(plan, spec, point, resource), the plan's time their sum, and the bottleneck the resource with the
largest share (ties to the first), as ``analyze``. Rows are built from the work's non-zero pattern on each grid; spec-dependent
variants (a recurrent state served on chip, ``placement.py``) bring their own rows (``RowKind``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..roofline import COL, RESOURCES, TENSOR_DTYPES, SpecTable
from . import grid_kernel

LOW = np.int64(7)  # the low bits that carry the resource
CLEAR = np.int64(~7)
R = {r: i for i, r in enumerate(RESOURCES)}


@dataclass(frozen=True)
class RowKind:
    """One kind of row: a work column (index into the work array) at a per-spec coefficient, labelled
    with a per-spec resource. ``tensor``: a tensor dtype (a call's later tensor rows add into its first);
    ``needs``: the column whose non-zero work makes the row (default ``col``); ``add_to``: this kind's
    rows are added into the same call's row of that kind index (a signed correction) instead of
    standing alone."""

    col: int
    coef: np.ndarray  # [V] seconds per unit of work (0: unknown ceiling)
    resource: np.ndarray  # [V] index into RESOURCES
    tensor: bool = False
    needs: int | None = None
    add_to: int | None = None


def standard_kinds(table: SpecTable, launch: str, bytes_basis: str, inv_dram: np.ndarray | None = None
                   ) -> list[RowKind]:
    """The rows of ``project_work`` on the table's specs (``inv_dram`` replaces the table's 1 / DRAM
    bandwidth, for a variant that projects DRAM bytes at another rate)."""
    V = len(table.specs)
    inv_dram = table.inv_dram if inv_dram is None else inv_dram

    def same(r: str) -> np.ndarray:
        return np.full(V, R[r])

    kinds = [RowKind(COL[f"tensor.{d}"], table.inv_tensor[:, j], same("tensor"), tensor=True)
             for j, d in enumerate(TENSOR_DTYPES)]
    kinds += [RowKind(COL["vector"], table.inv_vector, same("vector")),
              RowKind(COL["special_function"], table.inv_sfu, same("special_function"))]
    if bytes_basis == "executed":
        kinds.append(RowKind(COL["dram.executed"], np.maximum(inv_dram, table.inv_cache),
                             np.where(inv_dram >= table.inv_cache, R["dram"], R["cache"])))
    else:
        kinds += [RowKind(COL["dram.compulsory"], inv_dram, same("dram")),
                  RowKind(COL["dram.executed"], table.inv_cache, same("cache"))]
    kinds.append(RowKind(COL["launches"], table.launch_s[launch], same("launch")))
    return kinds


@dataclass(frozen=True)
class Rows:
    col: np.ndarray  # [nr]
    call: np.ndarray  # [nr] index into the work's call axis
    coef: np.ndarray  # [nr, V]
    code: np.ndarray  # [nr, V, 1] int64: 7 - resource index
    extra: np.ndarray  # [n, 2] int: (row, row it adds into), in order
    call_starts: np.ndarray  # [nc] first row of each call (calls in ``order``)


def make_rows(kinds: list[RowKind], nonzero: np.ndarray, order: np.ndarray) -> Rows:
    """The rows of the calls ``order`` (indices into the work's call axis, plans one after another):
    one per (call, kind) whose ``needs`` column is non-zero (``nonzero`` [n_cols, n_calls_all] bool);
    a call with none gets a zero row (its bound is 0)."""
    nc = len(order)
    present = np.stack([nonzero[k.col if k.needs is None else k.needs][order] for k in kinds])  # [nk, nc]
    lone = ~present.any(axis=0)
    present[-1] |= lone  # the last kind (launch) stands in for a call without work
    rows_pos, rows_kind = np.nonzero(present.T)  # row order: by call, then kind
    col = np.array([k.col for k in kinds])[rows_kind]
    coef = np.stack([k.coef for k in kinds])[rows_kind]
    code = (LOW - np.stack([k.resource for k in kinds]).astype(np.int64))[rows_kind][:, :, None]
    starts = np.searchsorted(rows_pos, np.arange(nc))
    # rows added into others, in order: a call's later tensor rows into its first, then each ``add_to``
    # row into the same call's row of that kind (where it has one)
    nr = len(rows_pos)
    at = np.full((nc, len(kinds)), -1)
    at[rows_pos, rows_kind] = np.arange(nr)
    tensor = np.array([k.tensor for k in kinds])
    first_t = np.where(tensor[None, :] & (at >= 0), at, nr).min(axis=1, initial=nr)
    later_t = np.nonzero(tensor[rows_kind] & (np.arange(nr) != first_t[rows_pos]))[0]
    into = np.array([-1 if k.add_to is None else k.add_to for k in kinds])[rows_kind]
    adds = np.nonzero(into >= 0)[0]
    target = at[rows_pos[adds], into[adds]]
    adds, target = adds[target >= 0], target[target >= 0]
    extra = np.stack([np.concatenate([later_t, adds]), np.concatenate([first_t[rows_pos[later_t]], target])],
                     axis=1).astype(np.int64)
    return Rows(col, order[rows_pos], coef, code, extra, starts)


def segment_sums(a: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sums over consecutive segments of axis 0 (segment k from ``starts[k]``; none empty), each in order
    like ``sum(axis=0)``. (``np.add.reduceat`` over a leading axis is many times slower.)"""
    ends = np.append(starts[1:], len(a))
    return np.stack([a[i:j].sum(axis=0) for i, j in zip(starts.tolist(), ends.tolist())])


CHUNK = 1 << 15  # elements of a block worked on at once: 256 KiB, to stay in cache
MARGIN = 1e-9  # relative: a row dominates another by at least this much, far beyond rounding


@dataclass(frozen=True)
class Projected:
    """Per plan the seconds each resource bounds ``shares`` [len(RESOURCES), n_plans, V, P] and the time
    (their sum) [n_plans, V, P], NaN where a call has work and no resource of known ceiling;
    ``values[v]`` [nc, P]: each call's bound on spec v, for the v asked for (NaN as above)."""

    time: np.ndarray
    shares: np.ndarray
    values: dict[int, np.ndarray]
    first: np.ndarray | None = None  # ``first_max(shares)`` where the compiled loop computed it

    def bottleneck(self) -> np.ndarray:
        """[n_plans, V, P] the resource with the largest share (the first of equals)."""
        return first_max(self.shares) if self.first is None else self.first


def _dominant(Wr: np.ndarray, rows: Rows, per_call: np.ndarray, plain: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """([nc, V] the row that bounds the call on spec v at every point of the grid, by at least
    ``MARGIN`` against each other row, or -1; [nr, V] whether a row may be the max on spec v somewhere,
    i.e. no other row beats it so everywhere). Row a beats row b on spec v where
    coef_a[v] x min_p(w_a[p] / w_b[p]) > coef_b[v] x (1 + MARGIN) (points where w_b = 0 left out); only
    for ``plain`` calls (no row added into another; the others keep every row); a dominant row has a
    known ceiling (coef > 0)."""
    nc, V = len(per_call), rows.coef.shape[1]
    dom = np.full((nc, V), -1)
    alive = np.ones(rows.coef.shape, dtype=bool)
    P = Wr.shape[1]
    for r in np.unique(per_call).tolist():
        every = np.nonzero((per_call == r) & plain)[0]
        step = max(1, CHUNK // (r * r * P))
        for a in range(0, len(every), step):
            _dominant_block(Wr, rows, every[a:a + step], r, dom, alive)
    return dom, alive


def _dominant_block(Wr: np.ndarray, rows: Rows, calls: np.ndarray, r: int, dom: np.ndarray,
                    alive: np.ndarray) -> None:
    """``_dominant`` for the calls ``calls``, each with ``r`` rows, written into ``dom`` and ``alive``."""
    ridx = rows.call_starts[calls][:, None] + np.arange(r)  # [n, r]
    c = rows.coef[ridx]  # [n, r, V]
    if r == 1:
        dom[calls] = np.where(c[:, 0] > 0, ridx, -1)
        return
    w = Wr[ridx]  # [n, r, P]
    with np.errstate(divide="ignore", invalid="ignore"):  # x / 0 = inf; 0 / 0 = NaN, which fmin skips
        least = np.fmin.reduce(w[:, :, None, :] / w[:, None, :, :], axis=-1)  # [n, a, b]
    beats = c[:, :, None, :] * least[:, :, :, None] > c[:, None, :, :] * (1 + MARGIN)  # [n, a, b, V]
    beats &= ~np.eye(r, dtype=bool)[None, :, :, None]
    alive[ridx] = ~beats.any(axis=1)
    wins = beats.sum(axis=2) == r - 1  # [n, a, V]: beats every other row
    wins &= c > 0
    dom[calls] = np.where(wins.any(axis=1), np.take_along_axis(ridx, wins.argmax(axis=1), axis=1), -1)


def _blocks(sizes: np.ndarray, P: int):
    """(r, positions) of the items with ``r`` rows, in blocks of about ``CHUNK`` elements."""
    for r in np.unique(sizes).tolist():
        every = np.nonzero(sizes == r)[0]
        step = max(1, CHUNK // (r * P))
        for a in range(0, len(every), step):
            yield r, every[a:a + step]


def project(work: np.ndarray, rows: Rows, plan_of: np.ndarray, n_plans: int, values: tuple[int, ...] = (),
            some: np.ndarray | None = None) -> Projected:
    """The bound of every call of ``rows`` and per plan the time and the shares (module docstring).
    ``work`` [n_cols, n_calls_all, P]; ``plan_of``: each call's plan (calls ordered by plan); ``some``
    [nc, P]: the call has work there (NaN where it has and no row gets a time; None: never NaN).

    Where one row bounds a call on a spec at every point (``_dominant``), the call's bound there is that
    row's time, added per plan by one matrix product per plan; the other (call, spec) pairs take the
    row max with the resource in the low bits, per pair, and a ``np.bincount``. Where numba is installed
    (``grid_kernel``), one compiled loop does all of it instead."""
    if grid_kernel.enabled():
        return _project_compiled(work, rows, plan_of, n_plans, values, some)
    nr, V = rows.coef.shape
    P = work.shape[-1]
    nc = len(rows.call_starts)
    R6 = len(RESOURCES)
    per_call = np.diff(np.append(rows.call_starts, nr))
    call_of_row = np.repeat(np.arange(nc), per_call)
    plain = np.ones(nc, dtype=bool)
    if len(rows.extra):
        plain[call_of_row[rows.extra[:, 0]]] = False
    Wr = work[rows.col, rows.call]  # [nr, P]
    dom, alive = _dominant(Wr, rows, per_call, plain)
    res_of = (LOW - rows.code[:, :, 0]).astype(int)  # [nr, V]
    # dominated pairs: per plan, shares += (coef one-hot by resource)^T @ work
    A = np.zeros((nr, R6, V))
    dc, dv = np.nonzero(dom >= 0)
    dr = dom[dc, dv]
    A[dr, res_of[dr, dv], dv] = rows.coef[dr, dv]
    shares = np.empty((R6, n_plans, V, P))  # resource first: sums and comparisons over contiguous blocks
    row_plan = plan_of[call_of_row]
    bounds_ = np.searchsorted(row_plan, np.arange(n_plans + 1))
    for k in range(n_plans):
        a, b = bounds_[k], bounds_[k + 1]
        shares[:, k] = (A[a:b].reshape(b - a, R6 * V).T @ Wr[a:b]).reshape(R6, V, P)
    # the other pairs, one row max each
    pc, pv = np.nonzero(dom < 0)
    plan_nan = np.zeros((n_plans, V, P), dtype=bool)
    exact = {}
    if len(pc):
        extra: dict[int, list[tuple[int, int]]] = {}
        for i, j in rows.extra.tolist():
            c = int(call_of_row[i])
            extra.setdefault(c, []).append((i - int(rows.call_starts[c]), j - int(rows.call_starts[c])))
        Mp = np.empty((len(pc), P))
        code = np.empty((len(pc), P), dtype=np.int64)
        # the rows that may be the max (a row beaten everywhere by another drops out: it can be neither
        # the max nor tied with it); a call with a row added into another keeps all of them, in place
        first = rows.call_starts[pc]
        rmax = int(per_call.max())
        cand = first[:, None] + np.arange(rmax)  # [n_pairs, rmax]
        inside = np.arange(rmax)[None, :] < per_call[pc][:, None]
        live = inside & alive[np.minimum(cand, nr - 1), pv[:, None]]
        for r, sel in _blocks(live.sum(axis=1), P):
            ridx = cand[sel][live[sel]].reshape(-1, r)  # [n, r], in row order
            v = pv[sel][:, None]
            T = rows.coef[ridx, v][:, :, None] * Wr[ridx]  # [n, r, P]
            for c in set(pc[sel].tolist()) & set(extra):
                at = np.nonzero(pc[sel] == c)[0]
                for li, lj in extra[c]:
                    T[at, lj] += T[at, li]
            Ti = T.view(np.int64)
            Ti &= CLEAR
            Ti |= rows.code[ridx, v]
            M = T.max(axis=1)
            Mi = M.view(np.int64)
            code[sel] = Mi & LOW
            Mi &= CLEAR
            Mp[sel] = M
        key = code * (n_plans * V * P) + np.add.outer((plan_of[pc] * V + pv) * P, np.arange(P))
        bins = np.bincount(key.reshape(-1), weights=Mp.reshape(-1), minlength=8 * n_plans * V * P)
        shares += bins.reshape(8, n_plans, V, P)[LOW:LOW - R6:-1]  # code 7 - r: RESOURCES order
        if some is not None:
            unknown = np.cumsum(rows.coef.T == 0, axis=1)  # [V, nr]; per call: a row of unknown ceiling?
            ends = np.append(rows.call_starts[1:], nr) - 1
            before = np.where(rows.call_starts[None, :] > 0, unknown[:, rows.call_starts - 1], 0)
            risky = (unknown[:, ends] - before > 0).T  # [nc, V]
            at = np.nonzero(risky[pc, pv])[0]
            if len(at):
                flags = (Mp[at] == 0) & some[pc[at]]
                hit = flags.any(axis=1)
                at, flags = at[hit], flags[hit]
                np.logical_or.at(plan_nan, (plan_of[pc[at]], pv[at]), flags)
                Mp[at] = np.where(flags, np.nan, Mp[at])
        exact = {v: (pc[pv == v], Mp[pv == v]) for v in values}
    time = shares.sum(axis=0)
    time[plan_nan] = np.nan
    out = {}
    for v in values:
        vals = np.empty((nc, P))
        c = np.nonzero(dom[:, v] >= 0)[0]
        vals[c] = rows.coef[dom[c, v], v][:, None] * Wr[dom[c, v]]
        if v in exact:
            vals[exact[v][0]] = exact[v][1]
        out[v] = vals
    return Projected(time, shares, out)


def _project_compiled(work, rows: Rows, plan_of, n_plans: int, values: tuple[int, ...], some) -> Projected:
    """``project`` by ``grid_kernel``'s loop: its inputs laid out as arrays (the added rows per call in
    order, whether a call has a row of unknown ceiling per spec)."""
    nr, V = rows.coef.shape
    nc = len(rows.call_starts)
    per_call = np.diff(np.append(rows.call_starts, nr))
    call_of_row = np.repeat(np.arange(nc), per_call)
    ex = rows.extra
    ex_call = call_of_row[ex[:, 0]]
    order = np.argsort(ex_call, kind="stable")  # per call, in the order of ``rows.extra``
    ex_start = np.searchsorted(ex_call[order], np.arange(nc + 1))
    rel = ex[order] - rows.call_starts[ex_call[order]][:, None]
    unknown = np.add.reduceat((rows.coef == 0).astype(np.int64), rows.call_starts, axis=0) > 0 if nr else (
        np.zeros((nc, V), dtype=bool))
    has_some = some is not None
    vidx = np.array(values, dtype=np.int64)
    if hasattr(work, "slot"):  # batch.Columns: its array and where each column lies in it
        arr, row_col = work.array, work.slot[rows.col]
    else:
        arr, row_col = work, rows.col
    arr = arr.reshape(arr.shape[0], arr.shape[1], -1)
    shares, time, first, vals = grid_kernel.kernel()(
        np.ascontiguousarray(arr, dtype=float), row_col.astype(np.int64), rows.call.astype(np.int64),
        np.ascontiguousarray(rows.coef, dtype=float),
        np.ascontiguousarray(rows.code[:, :, 0], dtype=np.int64), rows.call_starts.astype(np.int64),
        per_call.astype(np.int64), np.asarray(plan_of, dtype=np.int64), ex_start.astype(np.int64),
        np.ascontiguousarray(rel[:, 0]), np.ascontiguousarray(rel[:, 1]), np.ascontiguousarray(unknown),
        np.ascontiguousarray(some, dtype=bool) if has_some else np.zeros((1, 1), dtype=bool), has_some, vidx,
        len(RESOURCES), n_plans)
    return Projected(time, shares, {v: vals[i] for i, v in enumerate(values)}, first)


def plan_sum(values: np.ndarray, plan_of: np.ndarray, n_plans: int) -> np.ndarray:
    """Per plan the sum over its calls of ``values`` [nc, P] (call i in plan ``plan_of[i]``): [n_plans, P]."""
    P = values.shape[1]
    key = np.add.outer(plan_of * P, np.arange(P)).reshape(-1)
    return np.bincount(key, weights=values.reshape(-1), minlength=n_plans * P).reshape(n_plans, P)


def first_max(shares: np.ndarray) -> np.ndarray:
    """The index of the largest along axis 0, the first of equals (``argmax``), by comparisons over whole
    blocks."""
    best, at = shares[0].copy(), np.zeros(shares.shape[1:], dtype=int)
    for r in range(1, len(shares)):
        more = shares[r] > best
        at[more] = r
        np.maximum(best, shares[r], out=best)
    return at
