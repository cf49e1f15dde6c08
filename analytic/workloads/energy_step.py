"""The energy of one model step (``predict``): the energy model (``analytic/energy.py``) over the op
calls of a plan, at the step's achievable time.

Each call contributes its operations and bytes as the achievable estimate charges them
(``report.achievable_rows`` records per call the bytes served by the device-wide cache, by DRAM and,
for a recurrent state kept on chip, by that level), with fp32 matmul FLOPs on TF32 where the
implementation's matmuls run there (``execution.fp32_matmul_on_tf32``), tensor FLOPs of mma.sync kernels
on their own term (``execution.tensor_instr``) and the bytes a kernel re-reads from the cache
(``execution.l2_reread_bytes`` at the call's dims and the step's dtype, times the call's count: the
achievable step times them where they bind), and the work a kernel executes on padded tiles
(``padding.executed_work_factor``, ``executed_tensor_factor``: a workload's decode attention names no
backend, so it is FlashAttention-2's split-KV kernel, as its cost rule says). Static power runs over the
whole step's achievable time (the device stays clocked up while the host issues calls), and the power
limit is checked on the step's average power. Tokens: those of the step (``GridResult.tokens``), so
the energy per token of a training step is the step's energy over its B x L tokens.
"""

from __future__ import annotations

import numpy as np

from ..energy import EnergyTable, counts, energy, path_issue_seconds, summary
from ..execution import fp32_matmul_on_tf32, l2_reread_bytes, tensor_instr
from ..padding import executed_tensor_factor, executed_work_factor
from ..reuse import l2_reread_share
from ..roofline import spec_ceiling
from .evaluate import GridResult, call_shape


def call_rereads(res: GridResult, sm_count: float | None = None) -> np.ndarray:
    """Bytes each call of the step re-reads from the device-wide cache at the first grid point [n_calls]
    (``execution.l2_reread_bytes`` at the call's dims and the step's dtype, times its count, less what the
    SMs' L1 serves: ``reuse.l2_reread_share`` with the spec's ``sm_count``)."""
    out = []
    for c in res.calls.calls:
        call, dims = c.call, _dims(res, c.call)
        out.append(call.count * l2_reread_bytes(call.op, call.impl, dims, res.dtype, call.mode, call.backend)
                   * l2_reread_share(call.op, call.impl, dims, res.dtype, call.mode, call.backend, sm_count))
    return np.array(out, dtype=float)


def _dims(res: GridResult, call) -> dict[str, int]:
    return {k: round(v) for k, v in call_shape(call, res.phase, float(res.batch[0]), float(res.length[0])).items()}


def step_energy(res: GridResult, spec, ops: list[dict], time_s: float, tokens: float | None) -> dict:
    """``energy.summary`` of the step of ``res`` (first spec, first grid point) taking ``time_s``; ``ops``
    are the step's op rows with their ``achievable`` entries (``report.achievable_rows``)."""
    table = EnergyTable.of([spec], "measured")  # the parameters of what runs, as the achievable time
    total: dict[str, np.ndarray] = {}
    sms = spec_ceiling(spec, "compute.sm_count", "measured").value
    rereads = call_rereads(res, None if sms is None else float(sms))
    for i, c in enumerate(res.calls.calls):
        a = ops[i]["achievable"]
        w = np.array(res.call_work[i, :, 0, 0])
        call = c.call
        part = counts(w, a["l2_bytes"], a["dram_bytes"], tf32=fp32_matmul_on_tf32(call.op, call.impl, call.backend),
                      on_chip_bytes=a["on_chip_bytes"],
                      mma_sync=tensor_instr(call.op, call.impl, call.backend) == "mma_sync",
                      l2_reread=rereads[i],
                      work_factor=executed_work_factor(call.op, call.impl, _dims(res, call), res.dtype, call.mode,
                                                       call.backend),
                      tensor_factor=executed_tensor_factor(call.op, call.impl, _dims(res, call), call.mode,
                                                           call.backend),
                      path_issue_s=path_issue_seconds(w, spec))
        for t, v in part.items():
            total[t] = total.get(t, 0.0) + np.asarray(v, dtype=float)
    arr = energy(total, np.array([time_s]), table)
    return summary(arr, table, total, time_s, tokens)
