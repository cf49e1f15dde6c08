"""Which memory serves which bytes, where a spec says more than "everything crosses DRAM".

**Recurrent state kept on chip (decode).** A spec that declares a device-scope ``sram`` level
(``memory.sram`` with ``scope: device``: software-managed on-chip memory that every core addresses and
that keeps its contents from one kernel to the next, as ``ssm-sram-asic`` declares) can hold the
recurrent state between decode steps. GPU levels cannot: per-SM shared memory lives for one kernel,
and L1 / L2 / LLC are caches a kernel cannot pin, so a GPU spec never gets this. The rule, in decode:
when the whole recurrent state of the batch (conv + SSM state of every SSM block, per sequence
``Model.state_bytes_per_sequence`` at the state dtype, times the batch) fits in the level's capacity,
the state bytes of every decode call (tensor class ``state``: compulsory and as-executed) are served
by that level instead of DRAM. They leave the DRAM bound and are charged at the level's bandwidth:
the ``cache`` resource then bounds max((executed DRAM bytes - state bytes) / slowest device-wide
level, all the call's executed bytes / this level) (every byte still crosses the level, which is
where the state lives). Device-memory capacity no longer counts the state, and energy charges the
state bytes to the level, not to DRAM. When the state does not fit, nothing moves and the output
says so (state bytes against the capacity). A level whose capacity or bandwidth is unknown gives
no residency (never assumed).

**Bandwidth of a processing-in-memory level.** A spec whose DRAM computes in memory (PIM) declares
``memory.dram.host_bandwidth``: the bandwidth that work executed outside the memory sees, when
``memory.dram.bandwidth`` is the in-memory rate (``pim-hbm``: 19.66 TB/s in the banks, 4.8 TB/s over
the external interface). The roofline projects every byte at ``memory.dram.bandwidth``, which keeps
the bound a lower bound under the spec's claims, but for work that runs on the host (GEMMs and every
other tensor-core matmul: the in-memory units have no tensor engine) it is optimistic. ``pim_caveat``
names those calls and gives the time with them charged at the host bandwidth (a labelled alternative,
not the bound).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..roofline import COL, RESOURCES, TENSOR_DTYPES, Projected, SpecCeilings, SpecTable, project_work, spec_ceiling

PERSISTENT_LEVEL = "sram"


@dataclass(frozen=True)
class StateResidency:
    """One spec's verdict on keeping the recurrent state on chip, over a (batch, length) grid."""

    spec_id: str
    level: str | None  # the persistent on-chip level, None when the spec declares none
    capacity: float | None  # bytes
    bandwidth: float | None  # B/s
    state_bytes: np.ndarray  # [nb, nl] whole recurrent state of the batch
    resident: np.ndarray  # [nb, nl] bool: decode state traffic served by the level
    reason: str  # why not, where nothing is resident for a reason other than capacity

    def at(self, i: int = 0, j: int = 0) -> dict:
        """The verdict at one grid point, as plain data (``total.state_residency`` of predict)."""
        state = float(self.state_bytes[i, j])
        out = {"level": self.level, "state_bytes": state, "capacity_bytes": self.capacity,
               "on_chip": bool(self.resident[i, j])}
        if self.level is None or self.capacity is None or self.bandwidth is None:
            out["result"] = f"state in DRAM: {self.reason}"
        elif out["on_chip"]:
            out["result"] = (f"state on chip: the whole recurrent state, {state:.4g} B, fits in memory.{self.level} "
                             f"({self.capacity:.4g} B); its decode traffic is served by {self.level} at "
                             f"{self.bandwidth:.4g} B/s, not by DRAM")
        elif state <= self.capacity:
            out["result"] = f"state in DRAM: {self.reason}"
        else:
            out["result"] = (f"state in DRAM: the recurrent state, {state:.4g} B, does not fit in memory.{self.level} "
                             f"({self.capacity:.4g} B)")
        return out


def persistent_level(sc: SpecCeilings) -> tuple[str | None, float | None, float | None, str]:
    """(level, capacity, bandwidth, why none) of the spec's persistent on-chip level."""
    level = sc.spec.memory.get(PERSISTENT_LEVEL)
    if level is None or level.scope != "device":
        return None, None, None, ("the spec declares no device-scope sram level that keeps data between kernels "
                                  "(per-SM shared memory and the L1 / L2 caches do not)")
    cap = spec_ceiling(sc.spec, f"memory.{PERSISTENT_LEVEL}.capacity", sc.prefer)
    bw = spec_ceiling(sc.spec, f"memory.{PERSISTENT_LEVEL}.bandwidth", sc.prefer)
    missing = [c for c in (cap, bw) if c.value is None]
    why = "; ".join(f"{c.key} unknown ({c.provenance})" for c in missing)
    return PERSISTENT_LEVEL, cap.value, bw.value, why


def state_residency(model, phase: str, table, state_dtype: str, batch: np.ndarray, shape: tuple) -> list[StateResidency]:
    """Per spec of ``table``: is the whole recurrent state of the batch resident on chip in ``phase``?"""
    per_seq = model.state_bytes_per_sequence(state_dtype)
    state = np.broadcast_to(np.asarray(batch, dtype=float) * per_seq, shape).astype(float)
    out = []
    for sc in table.specs:
        level, cap, bw, why = persistent_level(sc)
        if level is not None and not why:
            if phase != "decode":
                why = f"only decode keeps the state between steps (phase {phase})"
            elif per_seq == 0:
                why = "the model has no recurrent state"
        ok = level is not None and not why
        resident = (state <= cap) & ok if ok else np.zeros(shape, dtype=bool)
        out.append(StateResidency(sc.spec.id, level, cap, bw, state, resident, why))
    return out


def apply_residency(proj: Projected, W: np.ndarray, state_c: np.ndarray, state_e: np.ndarray, table,
                    res: list[StateResidency], bytes_basis: str) -> Projected:
    """``proj`` [S, n_calls, *shape] with each resident spec's state bytes moved from DRAM to its level.
    ``W`` [n_calls, n_cols, *shape] is the work, ``state_c`` / ``state_e`` [n_calls, *shape] the state
    bytes in it (compulsory / as-executed)."""
    mask = np.stack([r.resident for r in res])[:, None]  # [S, 1, *shape]
    if not mask.any():
        return proj
    extra = (1,) * (W.ndim - 1)
    inv_dram = table.inv_dram.reshape((-1,) + extra)
    inv_level = np.array([1.0 / r.bandwidth if r.bandwidth else 0.0 for r in res]).reshape((-1,) + extra)
    moved_c, moved_e = np.where(mask, state_c[None], 0.0), np.where(mask, state_e[None], 0.0)
    times = dict(proj.times)
    dram_c = proj.dram_compulsory - moved_c * inv_dram
    dram_e = proj.dram_executed - moved_e * inv_dram
    times["dram"] = dram_e if bytes_basis == "executed" else dram_c
    executed = W[:, COL["dram.executed"]][None]
    others = (executed - moved_e) * table.inv_cache.reshape((-1,) + extra)
    times["cache"] = np.where(mask, np.maximum(others, executed * inv_level), proj.times["cache"])
    stacked = np.stack([np.broadcast_to(times[r], proj.bound.shape) for r in RESOURCES])
    any_bound = (stacked > 0).any(axis=0)
    bound = np.where(np.isnan(proj.bound), np.nan, stacked.max(axis=0))
    return dataclasses.replace(proj, times=times, dram_compulsory=dram_c, dram_executed=dram_e, bound=bound,
                               sum=stacked.sum(axis=0), bottleneck=np.where(any_bound, stacked.argmax(axis=0), -1))


def pim_caveat(sc: SpecCeilings, W: np.ndarray, bound: np.ndarray, labels: list[str], launch: str,
               bytes_basis: str) -> dict | None:
    """Where the spec's DRAM bandwidth is an in-memory (PIM) rate (the spec lists
    ``memory.dram.host_bandwidth``): the calls with tensor-core work projected with it and the time with
    those charged at the host bandwidth instead (``time_s_host_gemms``, same shape as the grid). ``W``
    [n_calls, n_cols, *shape] is the work, ``bound`` [n_calls, *shape] each call's bound on this spec.
    None for any other spec."""
    if sc.spec.memory["dram"].host_bandwidth is None:
        return None
    host = spec_ceiling(sc.spec, "memory.dram.host_bandwidth", sc.prefer)
    if host.origin == "unknown" and host.provenance.startswith("the spec lists no"):
        return None
    tensor = W[:, [COL[f"tensor.{d}"] for d in TENSOR_DTYPES]].sum(axis=1) > 0  # [n_calls, *shape]
    named = [lb for lb, t in zip(labels, tensor) if np.any(t)]
    out = {"flag": "pim_bandwidth_applied_to_host_work", "in_memory_bandwidth": sc.dram.value,
           "host_bandwidth": host.value, "host_bandwidth_key": host.key, "calls": named}
    if host.value is None:
        out["time_s_host_gemms"] = None
        out["result"] = (f"optimistic for host-side work: {len(named)} op calls with GEMM / tensor-core work are "
                         f"projected with memory.dram.bandwidth, the in-memory (PIM) rate; the host-side bandwidth "
                         f"is unknown ({host.provenance})")
        return out
    host_table = dataclasses.replace(SpecTable.of([sc.spec], sc.prefer), inv_dram=np.array([1.0 / host.value]))
    hp = project_work(np.moveaxis(W, 1, 0), host_table, launch, bytes_basis).bound[0]  # [n_calls, *shape]
    out["time_s_host_gemms"] = np.where(tensor, hp, bound).sum(axis=0)
    out["result"] = (f"optimistic for host-side work: {len(named)} op calls with GEMM / tensor-core work are "
                     f"projected with memory.dram.bandwidth = {sc.dram.value:.4g} B/s, the in-memory (PIM) rate, "
                     f"but run on the host, which sees {host.key} = {host.value:.4g} B/s")
    return out
