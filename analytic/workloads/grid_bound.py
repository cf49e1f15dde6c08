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
    extra: tuple[tuple[int, int], ...]  # (row, row it adds into), in order
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
    extra = []
    tensor = np.array([k.tensor for k in kinds])
    adds = [k.add_to for k in kinds]
    if tensor.any() or any(a is not None for a in adds):
        first: dict[tuple[int, int], int] = {}
        for i, (p, k) in enumerate(zip(rows_pos.tolist(), rows_kind.tolist())):
            if tensor[k]:
                if (p, -1) in first:
                    extra.append((i, first[(p, -1)]))
                else:
                    first[(p, -1)] = i
            first[(p, k)] = i
        for i, (p, k) in enumerate(zip(rows_pos.tolist(), rows_kind.tolist())):
            if adds[k] is not None and (p, adds[k]) in first:
                extra.append((i, first[(p, adds[k])]))
    return Rows(col, order[rows_pos], coef, code, tuple(extra), starts)


def segment_sums(a: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sums over consecutive segments of axis 0 (segment k from ``starts[k]``; none empty), each in order
    like ``sum(axis=0)``. (``np.add.reduceat`` over a leading axis is many times slower.)"""
    ends = np.append(starts[1:], len(a))
    return np.stack([a[i:j].sum(axis=0) for i, j in zip(starts.tolist(), ends.tolist())])


CHUNK = 1 << 17  # elements of a [calls, rows, specs, points] block: about 1 MiB, to stay in cache


@dataclass(frozen=True)
class Projected:
    """Per call (calls grouped by their number of rows: call ``order[i]`` at position i) the bound
    ``M`` [nc, V, P] and the code of its resource ``code`` (7 - index); per plan the seconds each
    resource bounds ``shares`` [n_plans, V, P, len(RESOURCES)] and the time (their sum); ``unknown``
    [nc, V]: the call has a row of unknown ceiling on that spec."""

    order: np.ndarray
    M: np.ndarray
    code: np.ndarray
    unknown: np.ndarray
    time: np.ndarray
    shares: np.ndarray


def project(work: np.ndarray, rows: Rows, plan_of: np.ndarray, n_plans: int) -> Projected:
    """The bound of every call of ``rows`` (``plan_of``: each call's plan) and per plan the time and the
    shares (module docstring). ``work`` [n_cols, n_calls_all, P]. Calls with the same number of rows
    r are taken together, in blocks [n, r, V, P] of about ``CHUNK`` elements reduced over r."""
    nr, V = rows.coef.shape
    P = work.shape[-1]
    nc = len(rows.call_starts)
    per_call = np.diff(np.append(rows.call_starts, nr))
    order = np.argsort(per_call, kind="stable")
    M = np.empty((nc, V, P))
    unknown = np.empty((nc, V), dtype=bool)
    extra: dict[int, list[tuple[int, int]]] = {}
    call_of_row = np.repeat(np.arange(nc), per_call)
    for i, j in rows.extra:
        extra.setdefault(int(call_of_row[i]), []).append((i, j))
    at = 0
    for r in np.unique(per_call).tolist():
        calls = order[at:at + int((per_call == r).sum())]
        step = max(1, CHUNK // (r * V * P))
        for a in range(0, len(calls), step):
            cs = calls[a:a + step]
            ridx = (rows.call_starts[cs][:, None] + np.arange(r)).reshape(-1)
            T = rows.coef[ridx][:, :, None] * work[rows.col[ridx], rows.call[ridx]][:, None, :]  # [n * r, V, P]
            for c in set(cs.tolist()) & set(extra):
                local = {g: k for k, g in enumerate(ridx.tolist())}
                for i, j in extra[c]:
                    T[local[j]] += T[local[i]]
            Ti = T.view(np.int64)
            Ti &= CLEAR
            Ti |= rows.code[ridx]
            np.max(T.reshape(len(cs), r, V, P), axis=1, out=M[at + a:at + a + len(cs)])
        unknown[at:at + len(calls)] = (rows.coef[(rows.call_starts[calls][:, None] + np.arange(r)).reshape(-1)] == 0
                                       ).reshape(len(calls), r, V).any(axis=1)
        at += len(calls)
    Mi = M.view(np.int64)
    code = Mi & LOW
    Mi &= CLEAR
    slots = 8
    key = np.add.outer(plan_of[order] * (V * P * slots), np.arange(V * P) * slots).reshape(M.shape)
    key += code
    bins = np.bincount(key.reshape(-1), weights=M.reshape(-1), minlength=n_plans * V * P * slots)
    bins = bins.reshape(n_plans, V, P, slots)
    shares = bins[..., LOW:LOW - len(RESOURCES):-1]  # code 7 - r: resource r in RESOURCES order
    return Projected(order, M, code, unknown, shares.sum(axis=-1), shares)


def plan_sum(values: np.ndarray, plan_of: np.ndarray, n_plans: int) -> np.ndarray:
    """Per plan the sum over its calls of ``values`` [nc, P] (call i in plan ``plan_of[i]``): [n_plans, P]."""
    P = values.shape[1]
    key = np.add.outer(plan_of * P, np.arange(P)).reshape(-1)
    return np.bincount(key, weights=values.reshape(-1), minlength=n_plans * P).reshape(n_plans, P)
