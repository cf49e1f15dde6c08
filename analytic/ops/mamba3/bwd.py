"""Backward rules of ``mamba3`` (mode ``bwd``; fwdbwd = fwd + bwd is derived by the registry).

``siso`` -- read from state-spaces/mamba ``mamba_ssm/ops/triton/mamba3/mamba3_siso_combined.py``
(``_Mamba3Function.backward``) and ``mamba3_siso_bwd.py``, ``angle_dt.py`` (``angle_dt_bwd``).
Nothing of the forward is recomputed from scratch: the training forward (``store_states_adt_outv``)
saves the per-chunk SSM states [B, H, P, L/C * N] (at e: the backward feeds them to ``tl.dot`` with
dO), the pre-gate output Out_v [B, L, H, P] (e) and the decay cumsums DA_CS [B, H, L], DA_CS_SUM
[B, H, L/C] (fp32), next to the rotated q, scaled k, q.k, scale and gamma that the inference forward
already writes (``mamba3.py``). Those four extra stores happen in the forward kernel (no extra
launch) and are charged here, to ``bwd``'s extra writes, so that fwdbwd counts them once.
Launches (the module's training case: D and Z given, no input states, no final-state gradients), 12:
  1. ``mamba3_siso_bwd_kernel_dzdo`` (``compute_dzdo``): dZ and dO * silu'(...) scaling, per
     element of [B, L, H, P]: sigmoid (2 + 1 transc.) and 7 multiply/adds;
  2. ``mamba3_siso_bwd_kernel_dqkv`` (``compute_dqkv``, grid (H, B), chunks in reverse): per chunk
     it re-forms V dO^T three times (dAinv, dp_t, s: the source recomputes it rather than keep it
     live) and K Q^T twice, then (dp_t) Q, s^T K, p_t dO, V dS, dO S, K dS^T (twice: dV and dADT),
     Q S^T (dADT), dO^T Q (state gradient), plus the ones-vector dots for dQK (2 P) and dD (2):
     tensor per token and head 12 P N + 8 C (N + P) + 2 P + 2; vector 9 C (masks and score
     products on the [C, C] tiles) + 4 N + 11 P + 4 P N / C + 10, transcendental C + 2 + 1/C
     (the exp2 decay mask per tile element, two exp2 per token, one per chunk). It re-reads dO, V
     and the chunk state with volatile loads (L2, not counted);
  3. ``dD.sum(dim=0)`` of the per-batch dD partials;
  4. ``mamba3_siso_bwd_kernel_rotary_bias_angles`` (``compute_dqktheta``, grid (L/C, B)): per token,
     head and element of N: biases, q.k, rotation of k, dScale, inverse rotation of dQ and dK, the
     dQK path, GQA accumulation, bias partial sums, dtheta (19 per pair): 33.5 N + 2 vector and N
     transcendental (sin, cos of all N/2 lanes); writes dQ, dK [B, L, N] reduced over heads (one
     group), dAngles-cumsum, dScale / dGamma partials [B, H, max(1, N/64), L] and bias partials
     [B, L/C, H, N] (fp32);
  5-8. ``dscale.sum(2)``, ``dgamma.sum(2)``, ``dq_bias_partial.sum((0, 1))``, ``dk_bias_partial.sum``;
  9. ``Trap.float()`` (the wrapper passes ``trap=Trap.float()``);
  10. ``mamba3_siso_bwd_kernel_ddt_dtrap_dinput_states``: 14 vector + 1 transcendental per (token, head);
  11. ``angle_dt_bwd_kernel``: reverse cumsum, tanh and sech^2, per (token, head, angle) 13 vector
      + 2 transcendental;
  12. ``dDT + dDT_angle``.
``siso`` bwd >= fwd: 12 P N vs 4 P N and 8 C (N + P) vs 2 C (N + P) tensor FLOPs per token and head.

``mimo`` -- read: ``mamba_ssm/ops/tilelang/mamba3/mamba3_mimo.py`` (``_Mamba3Function``): the forward
saves only its inputs, and the backward calls ``compute_dacs_segsum_triton`` again and then
``mamba_mimo_bwd_combined`` (``mamba3_mimo_bwd.py``). The kernels inside
``mamba_mimo_bwd_combined`` were NOT read for this rule (time): it is modelled as ONE launch that
recomputes the forward's products (the chunk states and scores are not saved) and forms the two
gradients of each (the matmul convention): 3x the forward main kernel's tensor FLOPs, 2x its
vector and transcendental FLOPs, reading every forward input, dout and the recomputed segment sums
and writing every input gradient. Its launch count and any extra intermediates are a lower bound
until that file is read.
"""

from __future__ import annotations

import dataclasses

import sympy as sp

from ...conventions import SIGMOID, TENSOR_DTYPE, nbytes
from ...cost import Cost
from ...symbols import B, H, L, N, P
from ..common.kernels import Kernel, Tensor, kernel_chain

FP32 = 4


def siso_bwd_token_flops(c, n=N, p=P):
    """(tensor, vector, transcendental) per token and head of ``mamba3_siso_bwd_kernel_dqkv``."""
    tensor = 12 * p * n + 8 * c * (n + p) + 2 * p + 2
    vector = 9 * c + 4 * n + 11 * p + 4 * p * n / c + 10
    transc = c + 2 + sp.Rational(1, c)
    return tensor, vector, transc


def siso_bwd(dtype: str, chunk: int, S) -> Cost:
    e = nbytes(dtype)
    c = chunk
    nc = L / c
    blh, blhp, blhn, blhs = B * L * H, B * L * H * P, B * L * H * N, B * L * H * S
    nb = sp.Max(1, N / 64)  # HEADDIM_QK // BLOCK_HEADDIM_QK partial rows of dScale / dGamma

    def act(name, n, size=e):
        return Tensor(name, "activations", n, size)

    def inter(name, n, size=FP32):
        return Tensor(name, "intermediates", n, size)

    def weight(name, n):
        return Tensor(name, "weights", n, FP32)

    dO, Z, V = act("dO", blhp), act("Z", blhp), act("V", blhp)
    Q, K = act("Q", B * L * N), act("K", B * L * N)
    DT, Trap, Angles = act("DT", blh, FP32), act("Trap", blh), act("Angles", blhs, FP32)
    Qb, Kb, D = weight("Q_bias", H * N), weight("K_bias", H * N), weight("D", H)
    # saved by the forward
    out_v, states = inter("Out_v", blhp, e), inter("SSM_States", B * H * P * nc * N, e)
    da_cs, da_sum = inter("DA_CS", blh), inter("DA_CS_SUM", B * H * nc)
    q_rot, k_sc = inter("Q_store", blhn, e), inter("K_store", blhn, e)
    qk, scale, gamma = inter("QK_store", blh), inter("Scale_store", blh), inter("Gamma_store", blh)
    ang_cs = inter("angles_cumsum", blhs)
    # produced here
    dZ, dV, dQ, dK = act("dZ", blhp), act("dV", blhp), act("dQ", B * L * N), act("dK", B * L * N)
    dADT, dDT, dTrap = act("dADT", blh, FP32), act("dDT", blh, FP32), act("dTrap", blh, FP32)
    dAngles = act("dAngles", blhs, FP32)
    dQb, dKb, dD = weight("dQ_bias", H * N), weight("dK_bias", H * N), weight("dD", H)
    do_s = inter("dO_scaled", blhp, e)
    dq_mid, dk_mid = inter("dQ_mid", blhn, e), inter("dK_mid", blhn, e)
    dqk, dd_part = inter("dQK_dot", blh), inter("dD_partial", B * H)
    dang_cs = inter("dAngles_cumsum", blhs)
    dsc_p, dga_p = inter("dScale_partial", blh * nb), inter("dGamma_partial", blh * nb)
    dsc, dga = inter("dScale", blh), inter("dGamma", blh)
    dqb_p, dkb_p = inter("dQ_bias_partial", B * nc * H * N), inter("dK_bias_partial", B * nc * H * N)
    trap32, ddt_part, ddt_ang = inter("Trap_fp32", blh), inter("dDT_main", blh), inter("dDT_angle", blh)

    tens, vec, tr = siso_bwd_token_flops(c)
    launches = [
        Kernel("mamba3_siso_bwd_kernel_dzdo", (dO, Z, out_v), (dZ, do_s),
               (SIGMOID[0] + 7) * blhp, SIGMOID[1] * blhp),
        Kernel("mamba3_siso_bwd_kernel_dqkv", (q_rot, k_sc, V, da_cs, da_sum, qk, D, states, do_s),
               (dq_mid, dk_mid, dV, dADT, dqk, dd_part), vec * blh, tr * blh,
               tensor={TENSOR_DTYPE[dtype]: tens * blh},
               working_set=(2 * c * N + 3 * c * P) * e + FP32 * (2 * c * c + c * N + c * P + 2 * P * N)),
        Kernel("dD.sum(dim=0)", (dd_part,), (dD,), B * H),
        Kernel("mamba3_siso_bwd_kernel_rotary_bias_angles",
               (Q, K, scale, gamma, Qb, Kb, ang_cs, dq_mid, dk_mid, dqk),
               (dQ, dK, dang_cs, dsc_p, dga_p, dqb_p, dkb_p),
               (sp.Rational(67, 2) * N + 2) * blh, N * blh),
        Kernel("dscale.sum(dim=2)", (dsc_p,), (dsc,), blh * nb),
        Kernel("dgamma.sum(dim=2)", (dga_p,), (dga,), blh * nb),
        Kernel("dq_bias_partial.sum((0, 1))", (dqb_p,), (dQb,), B * nc * H * N),
        Kernel("dk_bias_partial.sum((0, 1))", (dkb_p,), (dKb,), B * nc * H * N),
        Kernel("Trap.float()", (Trap,), (trap32,)),
        Kernel("mamba3_siso_bwd_kernel_ddt_dtrap_dinput_states", (dsc, dga, DT, trap32), (ddt_part, dTrap),
               (SIGMOID[0] + 12) * blh, SIGMOID[1] * blh),
        Kernel("angle_dt_bwd_kernel", (dang_cs, Angles, DT), (dAngles, ddt_ang), 13 * blhs, 2 * blhs),
        Kernel("dDT + dDT_angle", (ddt_part, ddt_ang), (dDT,), blh),
    ]
    ins = [dO, Q, K, V, Z, DT, Trap, Qb, Kb, Angles, D]
    outs = [dQ, dK, dV, dZ, dADT, dDT, dTrap, dQb, dKb, dAngles, dD]
    cost = kernel_chain(launches, ins, outs, stream_working_sets=False)
    # the training forward's stores for backward (no launch of their own; see the docstring)
    saved = sum((t.nbytes for t in (out_v, states, da_cs, da_sum)), 0)
    extra_write = dict(cost.extra_write)
    extra_write["intermediates"] = sp.expand(extra_write.get("intermediates", 0) + saved)
    return dataclasses.replace(cost, tensor=dict(cost.tensor), extra_write=extra_write)


def mimo_bwd(dtype: str, fwd_launches, main_flops) -> Cost:
    """``fwd_launches``: the forward's (angle_dt, dacs_segsum, main) kernels, reused for their
    tensors; ``main_flops``: (tensor, vector, transc.) per token and head of the forward main kernel."""
    e = nbytes(dtype)
    blh, blhp = B * L * H, B * L * H * P
    angle_dt, dacs, main = fwd_launches
    dout = Tensor("dout", "activations", blhp, e)
    angles = angle_dt.reads[0]  # raw angles: this wrapper's backward takes them, not the cumsum
    fwd_in = [t for t in main.reads if t.cls in ("activations", "weights")] + [angles]
    reads = [t if t.name != "angles_cumsum" else angles for t in main.reads]
    grads = [Tensor("d" + t.name, t.cls, t.elements, FP32 if t.itemsize == FP32 else e) for t in fwd_in]
    adt = dacs.reads[0]
    dadt = Tensor("dADT", "activations", blh, FP32)
    tens, vec, tr = main_flops
    launches = [
        Kernel("compute_dacs_segsum_triton (recomputed)", dacs.reads, dacs.writes, dacs.vector),
        Kernel("mamba_mimo_bwd_combined (modelled as one launch)",
               (dout, *reads), (*grads, dadt), 2 * vec * blh, 2 * tr * blh,
               tensor={TENSOR_DTYPE[dtype]: 3 * tens * blh}, working_set=main.working_set),
    ]
    ins = [dout, adt, *fwd_in]
    return kernel_chain(launches, ins, [*grads, dadt], stream_working_sets=False)


