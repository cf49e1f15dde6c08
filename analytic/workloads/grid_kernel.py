"""``grid_bound.project`` as one compiled loop (numba), used where numba is installed (the ``fast`` extra).

The numpy path (``grid_bound.project``) avoids a Python loop per (call, spec) by first finding the row
that bounds a call on a spec everywhere (``_dominant``) and taking the rest in blocks; its time is the
numpy overhead of those many small steps. Here one loop walks (call, spec, point) once: the call's row
times (coefficient x work), the rows added into others (``Rows.extra``, in order), the resource put in
the three low bits of each time (``grid_bound`` module docstring: 7 - the resource's index), the max,
the bits read back and cleared, the time added to its plan's share of that resource, and the call's
value NaN where it has work, a row of unknown ceiling and a bound of 0. Every call's bound is the numpy
path's float (the same products, sums and max), its three low bits cleared also where the numpy path
finds one row dominant and skips the label (a relative 2e-15 at most); the per-plan shares are sums of
the same terms in another order. Per plan, the time (the shares summed in resource order) and the
bottleneck (the largest share, the first of equals) come from the same loop. tests/test_grid_kernel.py
compares the two paths; tests/test_sweep_fast.py compares both with the general path.

numba is optional: ``AVAILABLE`` says whether it imported; ``grid_bound.project`` falls back to numpy
without it or with ``SSMBENCH_NUMBA=0`` in the environment. The first call compiles the loop (about a
second; cached on disk by numba where it can write its cache).
"""

from __future__ import annotations

import os

import numpy as np

try:  # the optional ``fast`` extra
    import numba
except ImportError:  # pragma: no cover - depends on the environment
    numba = None

ENV = "SSMBENCH_NUMBA"  # "0": take the numpy path even where numba is installed
AVAILABLE = numba is not None


def enabled() -> bool:
    """numba is installed and not switched off by ``SSMBENCH_NUMBA=0``."""
    return AVAILABLE and os.environ.get(ENV, "1") != "0"


def _loop(work, row_col, row_call, coef, code, call_starts, per_call, plan_of, ex_start, ex_from, ex_into, risky,
          some, has_some, vidx, n_res, n_plans):  # pragma: no cover - compiled by numba
    V = coef.shape[1]
    P = work.shape[2]
    nc = call_starts.shape[0]
    shares = np.zeros((n_res, n_plans, V, P))
    nan_at = np.zeros((n_plans, V, P), dtype=np.bool_)
    vals = np.empty((vidx.shape[0], nc, P))
    vpos = np.full(V, -1, dtype=np.int64)
    for i in range(vidx.shape[0]):
        vpos[vidx[i]] = i
    rmax = 1
    for c in range(nc):
        rmax = max(rmax, per_call[c])
    T = np.empty((rmax, P))
    TI = T.view(np.int64)
    best = np.empty(P, dtype=np.int64)
    value = best.view(np.float64)
    f2 = np.empty(2)
    i2 = f2.view(np.int64)
    clear = np.int64(~7)
    for c in range(nc):
        s0, r, k = call_starts[c], per_call[c], plan_of[c]
        for v in range(V):
            for j in range(r):  # each row's time
                cj = coef[s0 + j, v]
                w = work[row_col[s0 + j], row_call[s0 + j]]
                for p in range(P):
                    T[j, p] = cj * w[p]
            for e in range(ex_start[c], ex_start[c + 1]):  # rows added into others, in order
                a, b = ex_from[e], ex_into[e]
                for p in range(P):
                    T[b, p] += T[a, p]
            # the max with the resource in the low bits; of non-negative floats the larger is the larger
            # int64 of the same bits (a negative float's int64 is negative: below every non-negative one)
            c0 = code[s0, v]
            for p in range(P):
                best[p] = (TI[0, p] & clear) | c0
            for j in range(1, r):
                cj = code[s0 + j, v]
                for p in range(P):
                    key = (TI[j, p] & clear) | cj
                    best[p] = max(best[p], key)
            for p in range(P):
                if best[p] < 0:  # every row negative: compare as floats (the largest, then its bits)
                    i2[0] = (TI[0, p] & clear) | code[s0, v]
                    for j in range(1, r):
                        i2[1] = (TI[j, p] & clear) | code[s0 + j, v]
                        if f2[1] > f2[0]:
                            i2[0] = i2[1]
                    best[p] = i2[0]
            for p in range(P):
                code_p = best[p] & 7
                best[p] = best[p] & clear
                shares[7 - code_p, k, v, p] += value[p]
            if has_some and risky[c, v]:
                for p in range(P):
                    if value[p] == 0.0 and some[c, p]:
                        value[p] = np.nan
                        nan_at[k, v, p] = True
            if vpos[v] >= 0:
                for p in range(P):
                    vals[vpos[v], c, p] = value[p]
    return shares, nan_at, vals


def _finish(shares, nan_at):  # pragma: no cover - compiled by numba
    """Per plan the time (the shares summed in resource order, as ``shares.sum(axis=0)``; NaN where a call
    has no bound) and the resource with the largest share (the first of equals, as ``grid_bound.first_max``)."""
    n_res, n_plans, V, P = shares.shape
    time = np.empty((n_plans, V, P))
    first = np.zeros((n_plans, V, P), dtype=np.int64)
    for k in range(n_plans):
        for v in range(V):
            for p in range(P):
                time[k, v, p] = shares[0, k, v, p]
            for r in range(1, n_res):
                for p in range(P):
                    x = shares[r, k, v, p]
                    time[k, v, p] += x
                    if x > shares[first[k, v, p], k, v, p]:
                        first[k, v, p] = r
            for p in range(P):
                if nan_at[k, v, p]:
                    time[k, v, p] = np.nan
    return time, first


_compiled = None


def kernel():
    """The compiled loop (compiled on first use)."""
    global _compiled
    if _compiled is None:
        loop, finish = (numba.njit(cache=True, nogil=True)(f) for f in (_loop, _finish))

        def run(*args):
            shares, nan_at, vals = loop(*args)
            return (shares, *finish(shares, nan_at), vals)

        _compiled = run
    return _compiled
