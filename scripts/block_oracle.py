"""The measurement-composed oracle of ``block_gap.py --ops measured``: each op call of a measured block
replaced by the device time that an op measurement of the same call implies, then composed exactly as
the achievable estimate composes the block (``blocks.compose_achievable``). Where the measured blocks
miss this composition, the plan or the composition is wrong; where they meet it but miss the
achievable composition, the op-level achievable estimate is.

Per call (op, implementation, mode, dtype, backend where the block names one, dimensions):
- ``measured``: an ok op record of exactly that call (the latest of its key);
- ``scaled``: none; the nearest record of the same (op, implementation, mode, dtype, backend) with the
  same dimension names, within ``max_distance`` (sum over dimensions of |ln(call / record)|), its
  implied device time x the achievable device-time ratio of the two shapes (the op's efficiency taken
  from the measurement, its scaling from the model);
- ``model``: neither; the achievable estimate's device time.

The device time a record implies: its median minus the host gap that the same queue model puts into
an isolated timed call (``achievable.issue_pipeline`` with the flush's lead, ``timed_call_lead``; a
graph-timed record pays one ``launch.host.cuda_graph``): for a device-bound call the median itself.
Nothing is fitted; every number keeps its label (measurement-composed, not an estimate).
"""

from __future__ import annotations

import math
from collections import defaultdict


def op_records(files) -> dict[tuple, list]:
    """ok op records (not block cases), latest per key, grouped by (op, impl, mode, dtype)."""
    from ssmbench.measure.results import latest_by_key

    out: dict[tuple, list] = defaultdict(list)
    for c in latest_by_key(files).values():
        if c.get("status") == "ok" and not str(c.get("op", "")).startswith("block:") and (c.get("time_s") or {}).get("median"):
            out[(c["op"], c["impl"], c["mode"], c["dtype"])].append(c)
    return out


def _model_times(op, impl, mode, dtype, dims, backend, spec, graph: bool) -> tuple[float, float]:
    """(achievable device s, modelled isolated timed-call s) of one op call."""
    from ssmbench.analytic.achievable import AchievableTable, estimate, host_cost, issue_pipeline, timed_call_lead
    from ssmbench.analytic.execution import as_measured, traits
    from ssmbench.analytic.registry import cost
    from ssmbench.analytic.workloads.blocks import flush_times

    t = traits(op, impl, backend)
    k = as_measured(cost(op, dims, impl=impl, mode=mode, dtype=dtype), backend, mode)
    a = estimate(k, spec, tf32=t.fp32_matmul == "tf32", serial=t.engines == "serial")
    table = AchievableTable.of([spec])
    h = host_cost(table, "cuda_graph") if graph else a.host_s
    fh, fg = flush_times(spec, table)
    return a.gpu_s, issue_pipeline([h], [a.gpu_s], timed_call_lead(h, a.gpu_s, fh, fg))


def _distance(a: dict, b: dict) -> float:
    return sum(abs(math.log(a[k] / b[k])) for k in a)


def oracle_gpu(row: dict, case: dict, records: dict, spec, max_distance: float) -> tuple[float, str, str | None]:
    """(device s, source, record key) of one call row of ``blocks.composed_bound``."""
    dims = row["dims"]
    group = [r for r in records.get((row["op"], row["impl"], row["mode"], case["dtype"]), ())
             if (row.get("backend") is None or r.get("backend") == row["backend"]) and set(r["dims"]) == set(dims)]
    if not group or not dims:
        return row["gpu_s"], "model", None
    best = min(group, key=lambda r: _distance(dims, r["dims"]))
    d = _distance(dims, best["dims"])
    if d > max_distance:
        return row["gpu_s"], "model", None
    graph = bool((best.get("timing") or {}).get("cuda_graph"))
    g_ref, iso_ref = _model_times(row["op"], row["impl"], row["mode"], case["dtype"], best["dims"],
                                  best.get("backend"), spec, graph)
    implied = max(best["time_s"]["median"] - (iso_ref - g_ref), 0.0) * row["count"]
    if d == 0:
        return implied, "measured", best.get("key") or _key(best)
    return implied * row["gpu_s"] / (g_ref * row["count"]), "scaled", best.get("key") or _key(best)


def _key(r: dict) -> str:
    return (f"{r['op']}/{r['impl']}/{r.get('backend')}/{r['dtype']}/{r['mode']}/"
            + ",".join(f"{k}={v}" for k, v in sorted(r["dims"].items())))


def compose(b: dict, case: dict, records: dict, spec, max_distance: float) -> dict:
    """The measurement-composed time of one block case (``b`` = ``composed_bound``'s result)."""
    from ssmbench.analytic.workloads.blocks import compose_achievable

    by_source: dict[str, float] = defaultdict(float)
    for row in b["calls"]:
        g, src, key = oracle_gpu(row, case, records, spec, max_distance)
        row.update(oracle_gpu_s=g, oracle_source=src, oracle_record=key)
        by_source[src] += g
    out = compose_achievable(b["calls"], spec, case["mode"], b["launch"], gpu_key="oracle_gpu_s")
    total = sum(by_source.values()) or 1.0
    out["label"] = "measurement-composed (op measurements through the achievable composition)"
    out["device_share"] = {k: v / total for k, v in sorted(by_source.items())}
    return out
