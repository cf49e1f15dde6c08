"""Pareto fronts of two quantities to minimise (time per token against energy per token or a cost proxy).

A point is on the front when no other point is at most as large in both quantities and smaller in one.
Sorted by the first quantity (ties by the second), a point is on the front exactly when its second
quantity is below that of every point before it: one sort and a running minimum, O(n log n).
Points with a NaN in either quantity take no part.
"""

from __future__ import annotations

import numpy as np


def front(x: np.ndarray, y: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """Indices of the points on the front, in increasing ``x`` (and decreasing ``y``)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = ~(np.isnan(x) | np.isnan(y))
    if valid is not None:
        ok &= np.asarray(valid, dtype=bool)
    idx = np.nonzero(ok)[0]
    if idx.size == 0:
        return idx
    order = idx[np.lexsort((y[idx], x[idx]))]
    ys = y[order]
    best_before = np.concatenate(([np.inf], np.minimum.accumulate(ys)[:-1]))
    return order[ys < best_before]


def dominated(x: np.ndarray, y: np.ndarray, i: int) -> bool:
    """Whether point ``i`` is dominated by another point (a check for tests and small sets: O(n))."""
    le = (x <= x[i]) & (y <= y[i])
    lt = (x < x[i]) | (y < y[i])
    return bool(np.any(le & lt))
