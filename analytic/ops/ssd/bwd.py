"""Backward of ``ssd`` / ``chunked``: mamba-ssm's ``_mamba_chunk_scan_combined_bwd`` as a launch list.

The derivation (which kernel does which product, what is recomputed) is in ``cost.py``'s docstring;
this module only spells it out tensor by tensor. e: storage dtype; fp32 elsewhere. The working set
of the three triangle kernels is taken as ``ssd_chunk_scan``'s tile (same tiling); the others' is
not modelled.
"""

from __future__ import annotations

from ...conventions import SOFTPLUS, TENSOR_DTYPE, nbytes
from ...cost import Cost
from ...symbols import B, C, G, H, L, N, P
from ..common.kernels import Kernel, Tensor, kernel_chain
from . import stages as st

FP32 = 4


def chunked_bwd(dtype: str) -> Cost:
    e = nbytes(dtype)
    tc = TENSOR_DTYPE[dtype]
    t = st.tensors(e)
    nc = st.NC
    f = lambda name, n: Tensor(name, "intermediates", n, FP32)  # noqa: E731
    blh, blhp, blhn = B * L * H, B * L * H * P, B * L * H * N
    states_n = B * nc * H * P * N
    entries = B * H * nc * st.triangle(C)  # causal entries over all chunks and heads

    dout = Tensor("dout", "activations", blhp, e)
    dx, ddt, dbo, dco = (Tensor(n, "activations", k, e) for n, k in
                         (("dx", blhp), ("ddt", blh), ("dB", B * L * G * N), ("dC", B * L * G * N)))
    da_w, dd_w, ddtb_w = (Tensor(n, "weights", H, FP32) for n in ("dA", "dD", "ddt_bias"))

    dt_in = Tensor("dt_clone", "intermediates", blh, e)
    states32 = Tensor("states_in_fp32", "state", states_n, FP32)
    final32 = Tensor("final_state", "state", B * H * P * N, FP32)
    dstates_raw = Tensor("dstates_fp32", "state", states_n, FP32)
    dstates = Tensor("dstates", "state", states_n, e)
    states_e = Tensor("states_in_e", "state", states_n, e)
    ddA_blocks = f("ddA_chunk_blocks", B * H * nc * P * N / 64)
    ddA_chunk = f("ddA_chunk", B * H * nc)
    ddt_acc = f("ddt_acc", blh)
    dD_part = f("dD_partial", blh / 32)
    db_heads, dc_heads = f("dB_heads", blhn), f("dC_heads", blhn)
    db_sum, dc_sum = f("dB_fp32", B * L * G * N), f("dC_fp32", B * L * G * N)
    ddA_next, ddA_prev = f("ddA_next", blh), f("ddA_prev", blh)
    ddA_prev_f1, ddA_prev_cs, ddA_prev_f2 = f("ddA_prev_flip", blh), f("ddA_prev_cumsum", blh), f("ddA_prev_rev", blh)
    dcb_heads = f("dCB_heads", B * nc * H * C * C)
    dcb = f("dCB", B * nc * G * C * C)
    ddA, ddA1, ddA2 = f("ddA", blh), f("ddA_plus_next", blh), f("ddA_total", blh)
    x, dt, A, Bm, Cm, D, dtb = (t[k] for k in ("x", "dt", "A", "B", "C", "D", "dt_bias"))
    dt_out, cs, dA_last, cb, chunk_states = (t[k] for k in ("dt_out", "dA_cumsum", "dA_last", "CB", "chunk_states"))

    ws = st._ws("chunk_scan", e)
    launches = [
        Kernel("dt.clone()", (dt,), (dt_in,)),
        # recompute stages 1-4 (state passing keeps fp32 states in backward)
        Kernel("_chunk_cumsum_fwd_kernel", (dt_in, A, dtb), (dt_out, cs),
               (1 + SOFTPLUS[0] + 1) * blh + B * H * nc * (C - 1), SOFTPLUS[1] * blh),
        Kernel("_bmm_chunk_fwd_kernel", (Cm, Bm), (cb,), tensor={tc: 2 * B * L * G * C * N}),
        Kernel("_chunk_state_fwd_kernel", (x, Bm, dt_out, cs), (chunk_states,),
               2 * blh + blhn, blh, tensor={tc: 2 * blhp * N}),
        Kernel("_state_passing_fwd_kernel", (chunk_states, dA_last), (states32, final32),
               2 * states_n, B * H * nc),
        Kernel("_chunk_scan_bwd_dstates", (Cm, cs, dout), (dstates_raw,), blhn, blh, tensor={tc: 2 * blhp * N}),
        Kernel("_state_passing_bwd_kernel", (dstates_raw, states32, dA_last), (dstates, states_e, ddA_blocks),
               4 * states_n, B * H * nc),
        Kernel("ddA_chunk blocks .sum(-1)", (ddA_blocks,), (ddA_chunk,), B * H * nc * P * N / 64),
        Kernel("zeros(ddt) (autotune pre_hook)", (), (ddt_acc,)),
        Kernel("_chunk_scan_chunk_state_bwd_dx", (x, cb, dout, dt_out, cs, Bm, dstates, D),
               (dx, ddt_acc, dD_part), 2 * entries + 8 * blhp + blh, entries + blh,
               tensor={tc: 2 * blhp * N + 2 * P * entries}, working_set=ws),
        Kernel("dD partial .sum().to()", (dD_part,), (dd_w,), blh / 32),
        Kernel("_chunk_state_bwd_db", (x, dt_out, cs, dstates, Bm), (db_heads, ddA_next),
               2 * blh + 3 * blhn, blh, tensor={tc: 2 * blhp * N}),
        Kernel("dB heads -> groups", (db_heads,), (db_sum,), blhn),
        Kernel("_chunk_scan_bwd_dC", (states_e, cs, dout, Cm), (dc_heads, ddA_prev), 3 * blhn, blh,
               tensor={tc: 2 * blhp * N}),
        Kernel("dC heads -> groups", (dc_heads,), (dc_sum,), blhn),
        Kernel("_chunk_scan_bwd_dcb", (x, dt_out, cs, dout), (dcb_heads,), 3 * entries, entries,
               tensor={tc: 2 * P * entries}, working_set=ws),
        Kernel("dCB heads -> groups", (dcb_heads,), (dcb,), B * nc * H * C * C),
        Kernel("_bmm_chunk_bwd (dB)", (Cm, dcb, db_sum), (dbo,), tensor={tc: 2 * B * L * G * C * N}),
        Kernel("_bmm_chunk_bwd (dC)", (Bm, dcb, dc_sum), (dco,), tensor={tc: 2 * B * L * G * C * N}),
        Kernel("ddA_prev[..., -1] += ddA_chunk", (ddA_chunk,), (), B * H * nc),
        Kernel("flip", (ddA_prev,), (ddA_prev_f1,)),
        Kernel("cumsum", (ddA_prev_f1,), (ddA_prev_cs,), blh),
        Kernel("flip", (ddA_prev_cs,), (ddA_prev_f2,)),
        Kernel("_chunk_scan_bwd_ddAcs_stable", (x, dt_out, cs, dout, cb), (ddA,), 4 * entries, entries,
               tensor={tc: 2 * P * entries}, working_set=ws),
        Kernel("ddA + ddA_next", (ddA, ddA_next), (ddA1,), blh),
        Kernel("+ ddA_prev", (ddA1, ddA_prev_f2), (ddA2,), blh),
        Kernel("zeros(dA)", (), (da_w,)),
        Kernel("zeros(ddt_bias)", (), (ddtb_w,)),
        Kernel("_chunk_cumsum_bwd_kernel", (ddA2, ddt_acc, dt_in, A, dtb), (ddt, da_w, ddtb_w), 10 * blh, 3 * blh),
    ]
    return kernel_chain(launches, [dout, x, dt, A, Bm, Cm, D, dtb], [dx, ddt, dbo, dco, da_w, dd_w, ddtb_w],
                        stream_working_sets=False)
