"""The ``chunked`` implementation of ``gated_delta_rule`` (registered in ``delta_rule.py``): the
launches of fla-core's ``chunk_gated_delta_rule`` (fla/ops/gated_delta_rule/chunk.py), forward and
backward, each with its tensors, FLOPs by engine and working set.

Notation: T = B*L*H token-heads, NC = B*(L/C)*H chunk-heads, e the storage dtype's bytes; g and its
chunk cumsum are fp32, A (the C x C gated, beta-scaled k k^T, strictly lower) is fp32, its inverse Ai
and w, u, v_new, the per-chunk states h and their gradients dh are at e, as fla allocates them.
Per chunk, with gamma_i = exp(gcum_i):
  A   = tril(beta_i * (k_i . k_j) * gamma_i / gamma_j, -1)   Ai = (I + A)^-1
  w   = Ai (k * beta * gamma)   u = Ai (v * beta)           (WY representation)
  v_new = u - w h               h' = gamma_C h + (k * gamma_C / gamma)^T v_new
  o   = scale * ((q * gamma) h + tril(q k^T * gamma_i / gamma_j) v_new)

Forward launches (tensor FLOPs per chunk-head; T*C*P = NC*C^2*P):
1. chunk_local_cumsum(g): g -> gcum (T vector).
2. chunk_scaled_dot_kkt_fwd: k, beta, gcum -> A: k k^T 2C^2 P; then x beta, gate exp(g_i - g_j): 3C^2
   vector, C^2 exp.
3. solve_tril: A -> Ai. Forward substitution on the C/16 diagonal 16 x 16 blocks (2*16^3 each) and
   block merges Ai_ij = -Ai_ii (sum_k A_ik Ai_kj): with n = C/16 blocks, sum over d = 1..n-1 of
   (n - d)(d + 1) = n(n-1)(n+4)/6 products of 16 x 16 blocks (16 at C = 64), 2*16^3 each. fla runs
   these dots in fp32 ("ieee" precision by default), i.e. on CUDA cores: vector FLOPs. One kernel
   (recent fla; fla <= 0.2 used two kernels and a memset: +2 launches, +A_inv_diag traffic).
4. recompute_w_u_fwd: k, v, beta, Ai, gcum -> w, u: 2C^2 P + 2C^2 Pv; v*beta (C Pv), k*beta*gamma
   (2 C P, C exp).
5. chunk_gated_delta_rule_fwd_h: k, w, u, gcum -> h (stored for every chunk: NC*P*Pv*e), v_new, and
   the final state [B, H, P, Pv] fp32 (written, as for prefill: output_final_state=True). Sequential
   over chunks; each CTA keeps a P x BV fp32 slice of the state in registers. w h and k^T v_new:
   4 C P Pv; u - w h (C Pv), v_new gating (C Pv + C, C exp), h decay (P Pv, 1 exp).
6. chunk_fwd_o: q, k, v_new, h, gcum -> o: q h 2 C P Pv, q k^T 2C^2 P, A v_new 2C^2 Pv; o*gamma (C Pv,
   C exp), A gating (2C^2, C^2 exp), scale and add (3 C Pv).
Forward tensor FLOPs: T*(6CP + 4CPv + 6 P Pv).

Backward launches (fla chunk_gated_delta_rule_bwd; Ai and gcum saved by the forward, h recomputed):
1. recompute_w_u_fwd (as forward 4).      2. fwd_h without final state (as forward 5).
3. chunk_bwd_dv_local: q, k, gcum, dO -> dv_local: k q^T 2C^2 P, A^T dO 2C^2 Pv; gate and scale
   (3C^2, C^2 exp).
4. chunk_gated_delta_rule_bwd_dhu: reverse over chunks, dh slice in registers; q, k, w, gcum, dO,
   dv_local -> dh (every chunk, at e), dv2: k dh, q^T dO, w^T dv2: 6 C P Pv; gating and adds
   (C(2Pv + 1 + P) + 3 P Pv vector, 2C + 1 exp).
5. chunk_bwd_dqkwg: v_new, dO, h, dh, dv2, q, k, gcum -> dq, dk (part), dw, dg (part): dO v_new^T
   2C^2 Pv; dO h^T, v_new dh^T, dv2 h^T 6 C P Pv; q k^T, dS k, dS^T q 6C^2 P; elementwise gate
   and dg reductions (2 P Pv + C(9P + 1) + 6C^2 vector, C(2 + C) + 1 exp).
6. prepare_wy_repr_bwd: k, v, beta, gcum, Ai, dw, dv2 -> dk (part), dv, dbeta, dg (part): dw kbg^T,
   Ai dw, dv2 vb^T, Ai dv2 (4C^2 P + 4C^2 Pv), dA Ai and Ai dA (4 C^3), kb k^T, dA k, dA^T kb
   (6C^2 P); elementwise C(14P + 4Pv + 6C) vector, C(1 + C) exp.
7. dk.add_(dk2) (T P vector).  8. dg.add_(dg2) (T).  9. chunk_local_cumsum(dg, reverse) (T).
Backward tensor FLOPs: T*(20CP + 10CPv + 16 P Pv + 4C^2), about 2.7x forward at C = 64, P = Pv = 128.

Working sets (shared memory and register-resident tiles of one CTA, nominal): one chunk tile of each
operand (C rows x min(dim, 64) columns; fla's BK = BV = 64) at its itemsize, plus C x C fp32 where the
kernel forms a C x C matrix, plus the P x 64 fp32 state slice of the state-passing kernels.
Streaming torch kernels (steps 7-9) use ``common.kernels.stream_working_set``.

Not counted: l2-normalisation of q, k inside the kernel (use_qk_l2norm_in_kernel; the norm op counts
it), the initial state (none in training from scratch), the dht gradient of the final state, the
NK = ceil(P / 64) > 1 partial dg sums of step 5 when P > 128 on Hopper (BK = 128), varlen indexing.
"""

from __future__ import annotations

from typing import Any

import sympy as sp

from ...conventions import TENSOR_DTYPE, nbytes
from ...cost import Cost
from ...symbols import B, C, H, L, P, Pv
from ..attention.common import F32
from ..common.kernels import Kernel, Tensor, kernel_chain

SOLVE_BLOCK = 16  # fla solve_tril inverts 16 x 16 diagonal blocks, then merges them
FLA_BLOCK = 64  # BK = BV = 64 column blocks of fla's chunk kernels

T = B * L * H  # token-heads
NC = B * (L / C) * H  # chunk-heads


def solve_tril_flops() -> Any:
    """Vector FLOPs of inverting (I + A) for every chunk-head (see module docstring, step 3)."""
    n = C / SOLVE_BLOCK
    per_chunk = 2 * SOLVE_BLOCK**3 * (n + n * (n - 1) * (n + 4) / 6)
    return NC * per_chunk


def _mm(dtype: str, per_token_head: Any) -> dict[str, Any]:
    """``Kernel.tensor``: matmul FLOPs given per token-head (the docstring's per-chunk-head counts / C)."""
    return {TENSOR_DTYPE[dtype]: sp.expand(T * per_token_head)}


def _tensors(dtype: str) -> dict[str, Tensor]:
    e = nbytes(dtype)
    act, inter = "activations", "intermediates"
    return {n: Tensor(n, c, el, sz) for n, c, el, sz in (
        ("q", act, T * P, e), ("k", act, T * P, e), ("v", act, T * Pv, e),  # [B, L, H, P | Pv]
        ("g", act, T, F32), ("beta", act, T, e), ("o", act, T * Pv, e),  # [B, L, H]
        ("final_state", "state", B * H * P * Pv, F32),  # [B, H, P, Pv]
        ("gcum", inter, T, F32), ("A", inter, T * C, F32), ("Ai", inter, T * C, e),  # [B, L, H, C]
        ("w", inter, T * P, e), ("u", inter, T * Pv, e), ("v_new", inter, T * Pv, e),
        ("h", inter, NC * P * Pv, e),  # [B, L/C, H, P, Pv]
        ("do", act, T * Pv, e), ("dq", act, T * P, e), ("dk", act, T * P, e), ("dv", act, T * Pv, e),
        ("dg", act, T, F32), ("dbeta", act, T, e),
        ("dv_local", inter, T * Pv, e), ("dh", inter, NC * P * Pv, e), ("dv2", inter, T * Pv, e),
        ("dk_part1", inter, T * P, e), ("dk_part2", inter, T * P, e), ("dw", inter, T * P, e),
        ("dg_part1", inter, T, F32), ("dg_part2", inter, T, F32), ("dg_sum", inter, T, F32),
    )}


def _ws(dtype: str, tiles: int, cxc: bool = False, state_slice: bool = False) -> Any:
    """Nominal working set: ``tiles`` chunk tiles C x 64 at e, a C x C fp32 matrix, a P x 64 fp32 state."""
    return (tiles * C * FLA_BLOCK * nbytes(dtype) + (C * C * F32 if cxc else 0)
            + (P * FLA_BLOCK * F32 if state_slice else 0))


def _w_u(t, dtype: str, name: str) -> Kernel:
    return Kernel(name, (t["k"], t["v"], t["beta"], t["Ai"], t["gcum"]), (t["w"], t["u"]),
                  T * (Pv + 2 * P), T, working_set=_ws(dtype, 4) + C * C * nbytes(dtype),
                  tensor=_mm(dtype, 2 * C * P + 2 * C * Pv))


def _fwd_h(t, dtype: str, name: str, final: bool) -> Kernel:
    writes = (t["h"], t["v_new"]) + ((t["final_state"],) if final else ())
    return Kernel(name, (t["k"], t["w"], t["u"], t["gcum"]), writes,
                  T * (2 * Pv + 1) + NC * P * Pv, T + NC, working_set=_ws(dtype, 3, state_slice=True),
                  tensor=_mm(dtype, 4 * P * Pv))


def chunked_fwd(dtype: str) -> Cost:
    t = _tensors(dtype)
    kernels = [
        Kernel("chunk_local_cumsum", (t["g"],), (t["gcum"],), T),
        Kernel("chunk_scaled_dot_kkt_fwd", (t["k"], t["beta"], t["gcum"]), (t["A"],), 3 * T * C, T * C,
               working_set=_ws(dtype, 1, cxc=True), tensor=_mm(dtype, 2 * C * P)),
        Kernel("solve_tril", (t["A"],), (t["Ai"],), solve_tril_flops(), working_set=C * C * F32),
        _w_u(t, dtype, "recompute_w_u_fwd"),
        _fwd_h(t, dtype, "chunk_gated_delta_rule_fwd_h", final=True),
        Kernel("chunk_fwd_o", (t["q"], t["k"], t["v_new"], t["h"], t["gcum"]), (t["o"],),
               T * (4 * Pv + 2 * C), T * (1 + C), working_set=_ws(dtype, 4, cxc=True),
               tensor=_mm(dtype, 2 * P * Pv + 2 * C * P + 2 * C * Pv)),
    ]
    inputs = [t[n] for n in ("q", "k", "v", "g", "beta")]
    return kernel_chain(kernels, inputs, [t["o"], t["final_state"]])


def chunked_bwd(dtype: str) -> Cost:
    t = dict(_tensors(dtype))
    # The backward reads the cumsum of g saved by the forward: it stands in for the input g.
    t["gcum"] = t["g"]
    kernels = [
        _w_u(t, dtype, "recompute_w_u_fwd"),
        _fwd_h(t, dtype, "chunk_gated_delta_rule_fwd_h (recompute)", final=False),
        Kernel("chunk_bwd_dv_local", (t["q"], t["k"], t["gcum"], t["do"]), (t["dv_local"],), 3 * T * C, T * C,
               working_set=_ws(dtype, 3, cxc=True), tensor=_mm(dtype, 2 * C * P + 2 * C * Pv)),
        Kernel("chunk_gated_delta_rule_bwd_dhu",
               (t["q"], t["k"], t["w"], t["gcum"], t["do"], t["dv_local"]), (t["dh"], t["dv2"]),
               T * (2 * Pv + 1 + P) + 3 * NC * P * Pv, 2 * T + NC, working_set=_ws(dtype, 5, state_slice=True),
               tensor=_mm(dtype, 6 * P * Pv)),
        Kernel("chunk_bwd_dqkwg",
               (t["v_new"], t["do"], t["h"], t["dh"], t["dv2"], t["q"], t["k"], t["gcum"]),
               (t["dq"], t["dk_part1"], t["dw"], t["dg_part1"]),
               2 * NC * P * Pv + T * (9 * P + 1 + 6 * C), T * (2 + C) + NC, working_set=_ws(dtype, 6, cxc=True),
               tensor=_mm(dtype, 2 * C * Pv + 6 * P * Pv + 6 * C * P)),
        Kernel("prepare_wy_repr_bwd",
               (t["k"], t["v"], t["beta"], t["gcum"], t["Ai"], t["dw"], t["dv2"]),
               (t["dk_part2"], t["dv"], t["dbeta"], t["dg_part2"]),
               T * (14 * P + 4 * Pv + 6 * C), T * (1 + C), working_set=_ws(dtype, 5, cxc=True) + C * C * nbytes(dtype),
               tensor=_mm(dtype, 4 * C * P + 4 * C * Pv + 4 * C**2 + 6 * C * P)),
        Kernel("aten.add_ (dk)", (t["dk_part1"], t["dk_part2"]), (t["dk"],), T * P),
        Kernel("aten.add_ (dg)", (t["dg_part1"], t["dg_part2"]), (t["dg_sum"],), T),
        Kernel("chunk_local_cumsum (reverse, dg)", (t["dg_sum"],), (t["dg"],), T),
    ]
    inputs = [t[n] for n in ("q", "k", "v", "g", "beta", "do")]
    outputs = [t[n] for n in ("dq", "dk", "dv", "dg", "dbeta")]
    return kernel_chain(kernels, inputs, outputs)
