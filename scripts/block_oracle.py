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

The device time a record implies: its median less the timed call's extra fixed time of its first kernel
(``blocks.timed_call_extra``: the as-measured model of ``analytic/timed.py`` times a device-bound sample
as device time + that extra, and the composition adds it once per block, not once per call), where the
same queue model says the isolated timed call was device-bound with that median as its device time (``achievable.timed_call_lead``: the modelled
host time of the call and the flush at most the median plus the flush's device time; a graph-timed
record issues one ``launch.host.cuda_graph``). A record the model calls host-bound (SSD's and
Mamba-3's autotuned Triton calls at small shapes) measures mostly host time: the call keeps the
model's device time (source ``model (nearest record host-bound)``).
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


def model_times(op, impl, mode, dtype, dims, backend, spec, graph: bool) -> tuple[float, float]:
    """(achievable device s, modelled host s of one timed call) of one op call."""
    from ssmbench.analytic.achievable import AchievableTable, estimate, host_cost
    from ssmbench.analytic.execution import as_measured, chain_of, traits
    from ssmbench.analytic.registry import cost

    t = traits(op, impl, backend)
    k = as_measured(cost(op, dims, impl=impl, mode=mode, dtype=dtype), backend, mode)
    a = estimate(k, spec, tf32=t.fp32_matmul == "tf32", serial=t.engines == "serial",
                 chain=chain_of(op, impl, dims, mode, backend))
    return a.gpu_s, host_cost(AchievableTable.of([spec]), "cuda_graph") if graph else a.host_s


def same_names(call: dict, rec: dict) -> bool:
    """Whether a record names the call's dimensions: the same names, or extra ones at 1 (a rank or group
    count that the call's cost rule leaves out because it is 1 there, e.g. Mamba-3 SISO's M)."""
    return set(call) <= set(rec) and all(rec[k] == 1 for k in set(rec) - set(call))


def distance(a: dict, b: dict) -> float:
    return sum(abs(math.log(a[k] / b[k])) for k in a)


def oracle_gpu(row: dict, case: dict, records: dict, spec, max_distance: float) -> tuple[float, str, str | None]:
    """(device s, source, record key) of one call row of ``blocks.composed_bound``."""
    dims = row["dims"]
    group = [r for r in records.get((row["op"], row["impl"], row["mode"], case["dtype"]), ())
             if (row.get("backend") is None or r.get("backend") == row["backend"]) and same_names(dims, r["dims"])]
    if not group or not dims:
        return row["gpu_s"], "model", None
    best = min(group, key=lambda r: distance(dims, r["dims"]))
    d = distance(dims, best["dims"])
    if d > max_distance:
        return row["gpu_s"], "model", None
    from ssmbench.analytic.achievable import timed_call_lead
    from ssmbench.measure.results import launch_regime

    graph = launch_regime(best) == "graph"  # the timer's graph or the backend's own (the blocks' decode)
    from ssmbench.analytic.workloads.blocks import flush_times, timed_call_extra

    g_ref, h_ref = model_times(row["op"], row["impl"], row["mode"], case["dtype"], {k: best["dims"][k] for k in dims},
                                best.get("backend"), spec, graph)
    median = best["time_s"]["median"]
    if timed_call_lead(h_ref, median, *flush_times(spec)) != float("inf"):  # host-bound as measured
        return row["gpu_s"], "model (nearest record host-bound)", best.get("key") or _key(best)
    implied = max(median - timed_call_extra(spec), 0.0) * row["count"]
    if d == 0:
        return implied, "measured", best.get("key") or _key(best)
    return implied * row["gpu_s"] / (g_ref * row["count"]), "scaled", best.get("key") or _key(best)


def _key(r: dict) -> str:
    return (f"{r['op']}/{r['impl']}/{r.get('backend')}/{r['dtype']}/{r['mode']}/"
            + ",".join(f"{k}={v}" for k, v in sorted(r["dims"].items())))


def compose_calls(b: dict, case: dict, spec, per_call, prefix: str, label: str) -> dict:
    """One block case composed exactly as the achievable estimate composes it
    (``blocks.compose_achievable``), each call's device time replaced by ``per_call(row)`` = (device time in s,
    its source, the record or group it came from), stored on the row as ``<prefix>_gpu_s``,
    ``<prefix>_source`` and ``<prefix>_ref``; ``device_share`` is the share of device time per source."""
    from ssmbench.analytic.workloads.blocks import compose_achievable

    by_source: dict[str, float] = defaultdict(float)
    for row in b["calls"]:
        g, src, ref = per_call(row)
        row.update({f"{prefix}_gpu_s": g, f"{prefix}_source": src, f"{prefix}_ref": ref})
        by_source[src] += g
    out = compose_achievable(b["calls"], spec, case["mode"], b["launch"], gpu_key=f"{prefix}_gpu_s")
    total = sum(by_source.values()) or 1.0
    out["label"] = label
    out["device_share"] = {k: v / total for k, v in sorted(by_source.items())}
    return out


def compose(b: dict, case: dict, records: dict, spec, max_distance: float) -> dict:
    """The measurement-composed time of one block case (``b`` = ``composed_bound``'s result)."""
    return compose_calls(b, case, spec, lambda row: oracle_gpu(row, case, records, spec, max_distance), "oracle",
                         "measurement-composed (op measurements through the achievable composition)")
