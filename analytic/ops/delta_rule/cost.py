"""Gated delta rule (Gated DeltaNet, Yang, Kautz & Hatamizadeh 2024): ``gated_delta_rule``.

Per (batch, head), state S [P, Pv] (fla's h [K, V]), inputs q_t, k_t [P], v_t [Pv], log decay g_t
and write strength beta_t:
    S_t = exp(g_t) S_{t-1} + k_t (beta_t (v_t - (exp(g_t) S_{t-1})^T k_t))^T,    o_t = S_t^T (q_t / sqrt(P))
Dimensions: B batch, L tokens, H heads, P key (state) dim, Pv value dim, C chunk length (``chunked``
only; L divisible by C, C a multiple of 16 for fla's solve_tril). Layout (fla's): q, k [B, L, H, P],
v, o [B, L, H, Pv], g, beta [B, L, H]; g and the state are fp32, the rest at the storage dtype e.
Modes: ``fwd`` (prefill / training forward: writes the final state [B, H, P, Pv] fp32, as prefill
does to hand it to decode), ``bwd``, ``decode`` (one token against the carried state; ``recurrent``).

Compulsory bytes: forward reads q, k, v, g, beta (activations) and writes o (activations) and the
final state (state); backward reads q, k, v, g, beta, dO and writes dq, dk, dv, dg, dbeta; decode
reads q, k, v, g, beta of one token and the state, and writes o and the state.

Implementations
---------------
``chunked``: fla-core ``chunk_gated_delta_rule`` (WY representation; ``chunked.py`` lists
its launches and derives every count). Matmuls on tensor cores at the storage dtype: forward
B*L*H*(6CP + 4CPv + 6 P Pv), backward B*L*H*(20CP + 10CPv + 16 P Pv + 4C^2); the C x C triangular
inverse per chunk is fp32 on CUDA cores (vector). The state at every chunk boundary, h
[B, L/C, H, P, Pv] at e, is materialized in device memory (written by the forward, written again by
the backward's recompute and read by the output / gradient kernels), as are the per-chunk dh.
6 launches forward, 9 backward. fla's chunk kernels fix C = 64 and have no fp32 path (an error here);
other C extrapolate the same kernels.

``recurrent``: fla-core ``fused_recurrent_gated_delta_rule``: one kernel, a CTA per (batch, head,
8 value columns) stepping through time with its P x 8 fp32 state slice in registers; every FLOP on
CUDA cores. Per token-head: q * scale (P), decay S *= exp(g) (P Pv, 1 exp), prediction S^T k
(2 P Pv), v - prediction and * beta (2 Pv), rank-1 update S += k u^T (2 P Pv), o = S^T q (2 P Pv):
7 P Pv + 2 Pv + P vector FLOPs, 1 exp. Executed bytes = compulsory: the state never leaves the chip;
q and k, read by the Pv/8 CTAs of a head at the same step, are served from L2 after the first.
Decode: the same kernel for one token with the state read and written (fp32): B*H*P*Pv*4 bytes each
way, which dominate.
Backward: fla has none ("Backward pass is not implemented yet and we do not have plans to implement
it because we haven't figured out how to compute dg without materializing the full hidden states
for all time steps", fla/ops/gated_delta_rule/fused_recurrent.py). The rule models the reverse-mode
scan that remark implies, a hypothetical two-kernel implementation that no library ships (so no
measurement can check it): (1) re-run the recurrence and write every S_t, B*L*H*P*Pv fp32 (5 P Pv +
2 Pv vector, 1 exp per token-head); (2) one CTA per (batch, head) runs backwards in time holding dS,
S_t, S_{t-1} [P, Pv] fp32 (working set 3*P*Pv*4), reading each stored S_t once:
  dS += (s q) dO^T, dq = s S_t dO, du = dS^T k, dk = dS u, r = v - (a S_{t-1})^T k, dbeta = du . r,
  dr = beta du, dv = dr, dhd = dS - k dr^T, dk -= a S_{t-1} dr, dg = a sum(dhd * S_{t-1}),
  dS = a dhd          (a = exp(g_t), s = P^-0.5)
  -> 18 P Pv + 2P + 4 Pv + 1 vector FLOPs, 1 exp per token-head.

Not counted: q/k l2-normalisation (a norm op), the gates' projections and activations (g =
-exp(A) softplus(.), beta = sigmoid(.): elementwise ops), the initial state in prefill (none),
grouped value heads (fla's HV > H), output gating and norm.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from ...conventions import nbytes
from ...cost import Cost
from ...registry import AnalyticError, Constraint, Impl, Op, divisible, register
from ...symbols import B, H, L, P, Pv
from ..attention.common import F32
from ..common.kernels import Kernel, Tensor, kernel_chain
from .chunked import chunked_bwd, chunked_fwd

RECURRENT_BV = 8  # value columns per CTA in fla's fused_recurrent (BV = min(8, next_pow2(V)))
FWD_STEP_VECTOR = 7 * P * Pv + 2 * Pv + P  # per token-head, forward
RECOMPUTE_STEP_VECTOR = 5 * P * Pv + 2 * Pv  # per token-head, the backward's state recompute
BWD_STEP_VECTOR = 18 * P * Pv + 2 * P + 4 * Pv + 1  # per token-head, the reverse scan


def _io(dtype: str, tokens=L) -> dict[str, Tensor]:
    e = nbytes(dtype)
    n = B * tokens * H
    act = "activations"
    return {name: Tensor(name, act, el, sz) for name, el, sz in (
        ("q", n * P, e), ("k", n * P, e), ("v", n * Pv, e), ("g", n, F32), ("beta", n, e), ("o", n * Pv, e),
        ("do", n * Pv, e), ("dq", n * P, e), ("dk", n * P, e), ("dv", n * Pv, e), ("dg", n, F32), ("dbeta", n, e),
    )}


def _state(name: str = "state") -> Tensor:
    return Tensor(name, "state", B * H * P * Pv, F32)  # [B, H, P, Pv]


def _recurrent_slice_ws():
    """The P x BV fp32 state slice one CTA keeps in registers."""
    return P * sp.Min(RECURRENT_BV, Pv) * F32


def _recurrent(mode: str, dtype: str) -> Cost:
    if mode in ("fwd", "decode"):
        t = _io(dtype, L if mode == "fwd" else 1)
        inputs = [t[n] for n in ("q", "k", "v", "g", "beta")]
        steps = B * H * (L if mode == "fwd" else 1)
        if mode == "fwd":
            reads, writes, outputs = tuple(inputs), (t["o"], _state("final_state")), [t["o"], _state("final_state")]
        else:
            s = _state()
            inputs.append(s)
            reads, writes, outputs = tuple(inputs), (t["o"], s), [t["o"], s]
        k = Kernel("fused_recurrent_gated_delta_rule_fwd", reads, writes, steps * FWD_STEP_VECTOR, steps,
                   working_set=_recurrent_slice_ws())
        return kernel_chain([k], inputs, outputs)
    if mode == "bwd":
        t = _io(dtype)
        states = Tensor("states", "intermediates", B * L * H * P * Pv, F32)  # [B, L, H, P, Pv]
        steps = B * L * H
        kernels = [
            Kernel("recompute states", (t["k"], t["v"], t["g"], t["beta"]), (states,),
                   steps * RECOMPUTE_STEP_VECTOR, steps, working_set=P * Pv * F32),
            Kernel("reverse scan", (states, t["q"], t["k"], t["v"], t["g"], t["beta"], t["do"]),
                   (t["dq"], t["dk"], t["dv"], t["dg"], t["dbeta"]), steps * BWD_STEP_VECTOR, steps,
                   working_set=3 * P * Pv * F32),
        ]
        inputs = [t[n] for n in ("q", "k", "v", "g", "beta", "do")]
        return kernel_chain(kernels, inputs, [t[n] for n in ("dq", "dk", "dv", "dg", "dbeta")])
    raise ValueError(mode)


def _chunked(mode: str, dtype: str) -> Cost:
    if dtype == "fp32":
        raise AnalyticError("implementation 'chunked' has no fp32 path (fla's chunk_gated_delta_rule asserts "
                            "bf16/fp16); valid dtypes: bf16, fp16")
    if mode == "fwd":
        return chunked_fwd(dtype)
    if mode == "bwd":
        return chunked_bwd(dtype)
    raise ValueError(mode)


GATED_DELTA_RULE = register(Op(
    name="gated_delta_rule",
    family="delta_rule",
    summary="gated delta rule linear attention (Gated DeltaNet): "
            "S_t = a_t S_{t-1} + k_t (beta_t (v_t - a_t S_{t-1}^T k_t))^T, o_t = S_t^T q_t / sqrt(P)",
    dims=("B", "L", "H", "P", "Pv", "C"),
    impls=(
        Impl("chunked", "fla chunk_gated_delta_rule: WY representation, per-chunk states in device memory, "
             "tensor-core matmuls", _chunked, ("fwd", "bwd")),
        Impl("recurrent", "fla fused_recurrent_gated_delta_rule: per-step update, state in registers, "
             "CUDA cores; bwd hypothetical (no library kernel)", _recurrent, ("fwd", "bwd", "decode")),
    ),
    default_impl="chunked",
    constraints=(
        divisible("L", "C"),
        Constraint(("C",), lambda c: np.asarray(c) % 16 == 0,
                   "C must be a multiple of 16 (fla's solve_tril inverts 16 x 16 blocks)"),
    ),
    reference="ssmbench.analytic.ops.delta_rule.ref:gated_delta_rule_ref",
    dtypes=("fp32", "bf16", "fp16"),
    notes="decode (one token, fp32 state read and written) on 'recurrent' only; 'chunked' is bf16/fp16 only",
))

