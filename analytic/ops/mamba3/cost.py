"""Mamba-3 (arXiv 2603.15569; state-spaces/mamba ``mamba_ssm/modules/mamba3.py``): exponential-
trapezoidal discretization, data-dependent rotary ("complex") state, optional MIMO of rank M.

Per head h (H heads, head dim P, state N; B and C shared by all heads: one group, the kernels'
optimized case), per token t, with lambda_t = sigmoid(trap_t), alpha_t = exp(A_t dt_t):
  theta_t = sum_{s <= t} pi tanh(angle_s) dt_s (mod 2 pi), S = N/4 angles (rope_fraction 1/2)
  k_t = R(theta_t)(B_t + B_bias_h), q_t = R(theta_t)(C_t + C_bias_h)          [N] (M of each: MIMO)
  h_t = alpha_t h_{t-1} + beta_t x_{t-1} k_{t-1}^T + gamma_t x_t k_t^T,  beta_t = alpha_t dt_t
        (1 - lambda_t), gamma_t = lambda_t dt_t      (two input terms per step: the trapezoid)
  y_t = (h_t q_t + D x_t) * silu(z_t)                                          [P]
MIMO: x enters as M rank copies x psi_r, q and k come in M copies, and the output is
sum_r phi_r * (h_t q_{t,r} + D x_t psi_r) * silu(z_t zeta_r); with M copies the state update and
the intra-chunk products become matmul-shaped with inner dimension M (tensor cores).

Op inputs (prefill, as the kernels take them): C -> Q and B -> K [B, L, M, N] (e; SISO: M = 1),
x -> V and z -> Z [B, L, H, P] (e), ADT = A dt and DT [B, H, L] (fp32), Trap [B, H, L] (e,
pre-sigmoid), Q_bias, K_bias [H, M, N], Angles [B, L, H, S], D [H] (fp32), MIMO only psi, zeta,
phi [H, M, P] (fp32). Outputs: y [B, L, H, P] (e) and, for the decode that follows (the prefill
case, ``return_final_states``), the final SSM state [B, H, P, N] and angle state [B, H, S] (fp32)
-- compulsory. The key and value states the implementations also hand to decode differ between them
(SISO: an fp32 [B, H, 64, N] buffer of which one row is used; MIMO: [B, M, H, N] at e plus a copy of
the last x) and count as extra state bytes. ``fwd`` is the inference forward; ``bwd`` (both impls)
is in ``bwd.py``, which also charges the SISO training forward's stores for backward.
Module-level pre-processing (softplus of A and dt, RMSNorm of B and C, cache copies)
belongs to other ops.

``siso`` does not depend on M (SISO is rank 1 by definition; leave M out). ``mimo`` needs M; the
tilelang kernel runs chunks of 64/M tokens (64 fused rows), so L M must be divisible by 64 and M
must divide 64 (tested ranks 1, 2, 4, 8): constraints of the ``mimo`` implementation only. SISO's
chunk is 64 tokens (the kernels' default, ``chunk_size=64``). Both chunk sizes are constants of the
kernels here, not dimensions.

FLOPs (conventions.py; a rotation of one pair = 4 mul + 2 add; sigmoid = 2 + 1 transc., silu = 3 + 1,
tanh 1 transc.; sin and cos 1 transc. each; exp2 1 transc.). Products over a tile are counted in
full where the kernel computes the full tile (one tile per chunk: nothing to skip) and elementwise
transcendentals once per tile element (each lane evaluates its own), which is what runs.

``siso`` (Triton ``angle_dt_fwd`` + ``mamba3_siso_fwd_kernel``, grid (H, B), C = 64), per token
and head: tensor 4 N P + 2 N + 2 C (N + P): q.k for the diagonal (a [C, N] x [N, 1] dot), q S^T,
q k^T and s v over the [C, C] chunk tile, v^T k into the state; vector 10 N + 8 P + 2 C + 14 +
2 P N / C: biases (2N), q*k (N) * gamma (1), rotations of all N/2 pairs of q and k (6N: lanes past
the S angles rotate by 0), k * scale (N), the two sigmoids and gamma / scale (8), decay prep (4),
output scale (P), the decay mask (2C), D + qk (2P + 1), the gate (4P), v * decay (P), the state
decay (2PN / C); transcendental N + P + C + 4 + 1/C: sin, cos of N/2 lanes, silu, the [C, C]
decays, two sigmoids, two exp2 per token and one per chunk. ``angle_dt_fwd`` per (token, head,
angle): tanh, x pi, x dt, cumsum, + carry, mod 2 pi (7 + 1 transc.), plus 4 per angle and chunk.
The kernel writes the rotated, biased q and k [B, L, H, N] (e) and the per-token q.k, scale and
gamma (fp32 [B, H, L]) in phase 1 and reads q, k, q.k back in phase 2 (TMA through device memory:
"an artifact of Triton's lack of programmatic access to shared memory", says the source): extra
bytes. Q and K are read by each head's program through L2 (not counted).

``mimo`` (``angle_dt_fwd``, ``compute_dacs_segsum_triton``, tilelang ``mamba_mimo_fwd_kernel`` grid
(H, B), chunk c = 64/M, F = c M = 64 fused rows; then the wrapper's ``remainder`` of the angle state,
``.contiguous()`` of the transposed final state and of the last x: 6 launches), per token and head:
tensor 4 M N P + 4 F M N + 2 F M P: the full [F, F] q k^T before rotation (only its M x M diagonal
blocks are used), q S, the masked q k^T, s (x psi), k^T (x psi); vector 7 M N + 13 M P + 2 M^2 P +
F M + 7 + M N P / 64: biases, rotations of the N/4 rotated pairs of the M copies of q and k, k
* trap scale, the same-step M x M diagonal on the vector units (2 M^2 P), x psi, D, gate
(z zeta / 2, tanh form, x phi), the reduction over M, the state decay; transcendental 2 M N + F M +
M P + 3 + M / 64 (sin and cos per rotated element of q and k, the decay of k per element, the
[F, F] mask's exp, tanh per gated element). ``compute_dacs_segsum_triton`` per (token, head):
2 + 2c (two cumsums and the [c, c] roll and segment sums), writing the [B, H, L/c, c, c] fp32
segment sums that the main kernel reads back.

Decode, ``siso``: the fused Triton ``mamba3_siso_step_kernel`` (state-spaces/mamba
``mamba_ssm/ops/triton/mamba3/mamba3_siso_step.py``, ``mamba3_siso_step``; what the measure backend
times): ONE launch, grid (H, B), doing biases, the angle update, rotation, both input outer
products, the state update, the output contraction, D and the silu gate (``siso_step_head_flops``);
it reads the states (angle, SSM, k fp32 [B, H, N], v at e) and writes new ones (y, angle, SSM, k;
the v state returned is V itself). The earlier rule (the module's rotary + CuTe path with three
ones-tensors: 5 launches, launch bound 34.8 us on the H200) contradicted the measured 8.6 us per
call at B = 1 (results/h200/2026-12-02/default/run-20261202T172122.267473Z-1902.jsonl).
Decode, ``mimo`` (mamba-ssm ``Mamba3.step``): ``apply_rotary_qk_inference_fwd`` (biases, angle update
tanh x pi x dt + carry mod 2 pi, sin/cos, rotation of q and k: 1.5 N + 5 M N vector, 0.75 N
transc. per (b, h)), writing the rotated q (intermediate) and k (the new key state) [B, M, H, N]
and the new angle state; then the CuTe ``mamba3_step_fn`` (vector units, no MMA) per (b, h):
(6M + 1) P N (both input outer products as M FMAs each, alpha h + ..., the M output contractions)
+ 12 M P + 2 P + 5 vector, 1 + M P transcendentals; between them the module copies
``rearrange(mimo_x / mimo_z / mimo_o, "h r p -> r h p").contiguous()`` every step (3 launches).
Decode reads x_t, z_t [B, H, P], q_t, k_t [B, M, N], A_t, dt_t, trap_t [B, H], the projection
angles [B, S] (e), the states (SSM fp32, previous key [B, M, H, N] and value [B, H, P] at e,
angle fp32) and writes y_t, the SSM, key and angle states (the value state is x_t itself: the
module's cache copy is not counted).

Working sets: SISO, the chunk tiles q, k [C, N] and v, z [C, P] at e, s [C, C], the output
accumulator [C, P] and the state [P, N] in fp32; MIMO, the tilelang shared / fragment buffers
(q, k [F, N], angles [c, N], x psi and q s [F, P], o and v [c, P], the cast state [N, P] and two
[F, F] score tiles at e; the state [N, P] and output accumulator [F, P] in fp32); decode: not
modelled (0). Not counted: varlen, initial states, tile padding of P, N to powers of two.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from ...conventions import SIGMOID, SILU, TENSOR_DTYPE, nbytes
from ...cost import Cost
from ...registry import Constraint, Impl, Op, register
from ...symbols import B, H, L, M, N, P
from ..common.kernels import Kernel, Tensor, kernel_chain
from .bwd import mimo_bwd, siso_bwd

FP32 = 4
SISO_CHUNK = 64
MIMO_ROWS = 64  # chunk c = 64 / M tokens, F = 64 fused rows
ROPE_FRACTION = sp.Rational(1, 2)
S = N * ROPE_FRACTION / 2  # rotary angles per head


def siso_token_flops(c=SISO_CHUNK):
    """(tensor, vector, transcendental) per token and head of the SISO main kernel."""
    tensor = 4 * N * P + 2 * N + 2 * c * (N + P)
    vector = 10 * N + 8 * P + 2 * c + 2 * SIGMOID[0] + 4 + 1 + 4 + 1 + 2 * P * N / c
    transc = N + SILU[1] * P + c + 2 * SIGMOID[1] + 2 + sp.Rational(1, c)
    return tensor, vector, transc


def mimo_token_flops(m=M):
    """(tensor, vector, transcendental) per token and head of the MIMO main kernel."""
    f = MIMO_ROWS
    tensor = 4 * m * N * P + 4 * f * m * N + 2 * f * m * P
    vector = 7 * m * N + 13 * m * P + 2 * m ** 2 * P + f * m + 7 + m * N * P / MIMO_ROWS
    transc = 2 * m * N + f * m + m * P + 3 + m / MIMO_ROWS
    return tensor, vector, transc


def decode_head_flops(m):
    """(vector, transcendental) per (b, h) of one decode step: rotary kernel + CuTe step."""
    vector = sp.Rational(3, 2) * N + 5 * m * N + (6 * m + 1) * P * N + 12 * m * P + 2 * P + 5
    transc = sp.Rational(3, 4) * N + 1 + m * P
    return vector, transc


def _prefill_tensors(e: int, m):
    return {
        "Q": Tensor("Q", "activations", B * L * m * N, e), "K": Tensor("K", "activations", B * L * m * N, e),
        "V": Tensor("V", "activations", B * L * H * P, e), "Z": Tensor("Z", "activations", B * L * H * P, e),
        "ADT": Tensor("ADT", "activations", B * H * L, FP32), "DT": Tensor("DT", "activations", B * H * L, FP32),
        "Trap": Tensor("Trap", "activations", B * H * L, e),
        "Q_bias": Tensor("Q_bias", "weights", H * m * N, FP32), "K_bias": Tensor("K_bias", "weights", H * m * N, FP32),
        "Angles": Tensor("Angles", "activations", B * L * H * S, FP32), "D": Tensor("D", "weights", H, FP32),
        "y": Tensor("y", "activations", B * L * H * P, e),
        "ssm_state": Tensor("ssm_state", "state", B * H * P * N, FP32),
        "angle_state": Tensor("angle_state", "state", B * H * S, FP32),
        "ang_cs": Tensor("angles_cumsum", "intermediates", B * L * H * S, FP32),
    }


def _angle_dt(t, out_state):
    blhs = B * L * H * S
    return Kernel("angle_dt_fwd", (t["Angles"], t["DT"]), (t["ang_cs"], out_state),
                  7 * blhs + 4 * B * H * (L / SISO_CHUNK) * S, blhs)


def _siso(mode: str, dtype: str) -> Cost:
    e = nbytes(dtype)
    if mode == "decode":
        return _siso_step(e, dtype)
    if mode == "bwd":
        return siso_bwd(dtype, SISO_CHUNK, S)
    if mode != "fwd":
        raise ValueError(mode)
    t = _prefill_tensors(e, 1)
    c = SISO_CHUNK
    blh = B * L * H
    q_st, k_st = (Tensor(n, "intermediates", blh * N, e) for n in ("Q_store", "K_store"))
    qk, sc, ga = (Tensor(n, "intermediates", blh, FP32) for n in ("QK_store", "Scale_store", "Gamma_store"))
    final_k = Tensor("final_k_chunk", "state", B * H * c * N, FP32)
    tens, vec, tr = siso_token_flops(c)
    main = Kernel("mamba3_siso_fwd_kernel",
                  (t["Q"], t["K"], t["V"], t["Z"], t["ADT"], t["DT"], t["Trap"], t["Q_bias"], t["K_bias"],
                   t["ang_cs"], t["D"], q_st, k_st, qk),
                  (t["y"], q_st, k_st, qk, sc, ga, final_k, t["ssm_state"]),
                  vec * blh, tr * blh, tensor={TENSOR_DTYPE[dtype]: tens * blh},
                  working_set=2 * c * N * e + 2 * c * P * e + FP32 * (c * c + c * P + P * N))
    ins = [t[k] for k in ("Q", "K", "V", "Z", "ADT", "DT", "Trap", "Q_bias", "K_bias", "Angles", "D")]
    return kernel_chain([_angle_dt(t, t["angle_state"]), main], ins, [t["y"], t["ssm_state"], t["angle_state"]],
                        stream_working_sets=False)


def _mimo(mode: str, dtype: str) -> Cost:
    e = nbytes(dtype)
    if mode == "decode":
        return _decode(e, dtype, M)
    if mode not in ("fwd", "bwd"):
        raise ValueError(mode)
    t = _prefill_tensors(e, M)
    f, c = MIMO_ROWS, MIMO_ROWS / M
    blh = B * L * H
    proj = [Tensor(n, "weights", H * M * P, FP32) for n in ("psi", "zeta", "phi")]
    da_cs, da_rev = Tensor("DA_CS", "intermediates", blh, FP32), Tensor("DA_CS_REV", "intermediates", blh, FP32)
    segsum = Tensor("SEGSUM", "intermediates", blh * c, FP32)  # [B, H, L/c, c, c]
    ang_raw = Tensor("angle_state_raw", "state", B * H * S, FP32)
    final_np = Tensor("final_state_NP", "state", B * H * P * N, FP32)  # [B, H, N, P] as the kernel writes it
    final_k = Tensor("final_k", "state", B * M * H * N, e)
    v_last = Tensor("V_last", "activations", B * H * P, e)
    v_state = Tensor("v_state", "state", B * H * P, e)
    tens, vec, tr = mimo_token_flops(M)
    launches = [
        _angle_dt(t, ang_raw),
        Kernel("compute_dacs_segsum_triton", (t["ADT"],), (da_cs, da_rev, segsum), (2 + 2 * c) * blh),
        Kernel("mamba_mimo_fwd_kernel",
               (t["Q"], t["K"], t["V"], t["Z"], t["Q_bias"], t["K_bias"], *proj, t["D"], t["ang_cs"],
                da_cs, da_rev, t["DT"], t["Trap"], segsum),
               (t["y"], final_np, final_k), vec * blh, tr * blh, tensor={TENSOR_DTYPE[dtype]: tens * blh},
               working_set=(2 * f * N + c * N + 2 * f * P + 2 * c * P + N * P + 2 * f * f) * e
               + FP32 * (N * P + f * P)),
    ]
    if mode == "bwd":
        return mimo_bwd(dtype, launches, (tens, vec, tr))
    launches += [
        Kernel("remainder(angle state, 2 pi)", (ang_raw,), (t["angle_state"],), 3 * B * H * S),
        Kernel("final state .permute().contiguous()", (final_np,), (t["ssm_state"],)),
        Kernel("V[:, -1].contiguous()", (v_last,), (v_state,)),
    ]
    ins = [t[k] for k in ("Q", "K", "V", "Z", "ADT", "DT", "Trap", "Q_bias", "K_bias", "Angles", "D")] + proj
    return kernel_chain(launches, ins, [t["y"], t["ssm_state"], t["angle_state"]], stream_working_sets=False)


def siso_step_head_flops():
    """(vector, transcendental) per (b, h) of the fused Triton ``mamba3_siso_step_kernel``."""
    # biases 2N; angle update on all N/2 lanes (x pi x dt + state, mod 2 pi = divide, floor,
    # multiply, subtract: 7); rotations of q and k 6N; sigmoid, adt log2e scale, beta 3, gamma 1;
    # beta v_prev, gamma v 2P; both outer products and their sum 3PN; alpha h + 2PN; the output
    # contraction 2PN (a [P, N] x [N, 1] dot, width 1: FMAs, not an MMA tile); D x + 2P; silu gate 4P
    vector = 2 * N + sp.Rational(7, 2) * N + 6 * N + SIGMOID[0] + 1 + 3 + 1 + 2 * P + 7 * P * N + 2 * P \
        + (SILU[0] + 1) * P
    transc = N / 2 + N + SIGMOID[1] + 1 + SILU[1] * P  # tanh, cos, sin on N/2 lanes; sigmoid; exp2; silu
    return vector, transc


def _siso_step(e: int, dtype: str) -> Cost:
    bh = B * H
    q, k = Tensor("Q_t", "activations", B * N, e), Tensor("K_t", "activations", B * N, e)
    x, z = Tensor("x_t", "activations", bh * P, e), Tensor("z_t", "activations", bh * P, e)
    adt, dt = Tensor("ADT_t", "activations", bh, FP32), Tensor("DT_t", "activations", bh, FP32)
    trap = Tensor("Trap_t", "activations", bh, e)
    qb, kb = Tensor("Q_bias", "weights", H * N, FP32), Tensor("K_bias", "weights", H * N, FP32)
    angp = Tensor("angles_t", "activations", bh * S, FP32)
    d = Tensor("D", "weights", H, FP32)
    s_in, s_out = Tensor("ssm_state", "state", bh * P * N, FP32), Tensor("ssm_state_new", "state", bh * P * N, FP32)
    k_old, k_new = Tensor("k_state", "state", bh * N, FP32), Tensor("k_state_new", "state", bh * N, FP32)
    v_old = Tensor("v_state", "state", bh * P, e)
    ang_in, ang_out = Tensor("angle_state", "state", bh * S, FP32), Tensor("angle_state_new", "state", bh * S, FP32)
    y = Tensor("y_t", "activations", bh * P, e)
    vec, tr = siso_step_head_flops()
    ins = [q, k, x, z, adt, dt, trap, qb, kb, angp, d, ang_in, s_in, k_old, v_old]
    outs = [y, ang_out, s_out, k_new]
    return kernel_chain([Kernel("mamba3_siso_step_kernel", tuple(ins), tuple(outs), vec * bh, tr * bh)],
                        ins, outs, stream_working_sets=False)


def _decode(e: int, dtype: str, m) -> Cost:
    """MIMO decode as ``Mamba3.step`` runs it (rotary kernel, projection copies, CuTe step)."""
    bh = B * H
    q, k = Tensor("Q_t", "activations", B * m * N, e), Tensor("K_t", "activations", B * m * N, e)
    x, z = Tensor("x_t", "activations", bh * P, e), Tensor("z_t", "activations", bh * P, e)
    a, dt, trap = (Tensor(n, "activations", bh, FP32) for n in ("A_t", "DT_t", "Trap_t"))
    qb, kb = Tensor("Q_bias", "weights", H * m * N, FP32), Tensor("K_bias", "weights", H * m * N, FP32)
    angp = Tensor("angle_proj_t", "activations", B * S, e)
    d = Tensor("D", "weights", H, FP32)
    s_in, s_out = Tensor("ssm_state", "state", bh * P * N, FP32), Tensor("ssm_state_new", "state", bh * P * N, FP32)
    k_old, k_new = Tensor("k_state", "state", B * m * H * N, e), Tensor("k_state_new", "state", B * m * H * N, e)
    v_old = Tensor("v_state", "state", bh * P, e)
    ang_in, ang_out = Tensor("angle_state", "state", bh * S, FP32), Tensor("angle_state_new", "state", bh * S, FP32)
    q_rot = Tensor("Q_rotated", "intermediates", B * m * H * N, e)
    y = Tensor("y_t", "activations", bh * P, e)
    proj = [Tensor(n, "weights", H * m * P, FP32) for n in ("psi", "zeta", "phi")]
    # rearrange(h r p -> r h p).contiguous() of mimo_x, mimo_z, mimo_o every step: 3 copies (a view
    # only at M = 1, which MIMO does not run)
    proj_rhp = [Tensor(p.name + "_rhp", "intermediates", H * m * P, FP32) for p in proj]
    copies = [Kernel(f"rearrange({p.name}).contiguous()", (p,), (c,)) for p, c in zip(proj, proj_rhp)]
    rot_v = sp.Rational(3, 2) * N + 5 * m * N
    rot_t = sp.Rational(3, 4) * N
    step_v, step_t = decode_head_flops(m)
    launches = [
        Kernel("apply_rotary_qk_inference_fwd", (q, k, qb, kb, angp, ang_in, dt), (q_rot, k_new, ang_out),
               rot_v * bh, rot_t * bh),
        *copies,
        Kernel("mamba3_step_fn (CuTe)", (s_in, k_old, v_old, a, dt, trap, k_new, q_rot, d, x, z, *proj_rhp),
               (s_out, y), (step_v - rot_v) * bh, (step_t - rot_t) * bh),
    ]
    ins = [q, k, x, z, a, dt, trap, qb, kb, angp, d, s_in, k_old, v_old, ang_in, *proj]
    return kernel_chain(launches, ins, [y, s_out, k_new, ang_out], stream_working_sets=False)


def _divides_64(m):
    m = np.asarray(m)
    return (m <= MIMO_ROWS) & (MIMO_ROWS % np.maximum(m, 1) == 0)


# The MIMO kernel's chunking (module docstring); SISO takes no M and has no such limit.
MIMO_CONSTRAINTS = (
    Constraint(("M",), _divides_64, "M (MIMO rank) must divide 64 (the kernel's fused chunk of 64 rows)"),
    Constraint(("L", "M"), lambda length, m: (np.asarray(length) * np.asarray(m)) % MIMO_ROWS == 0,
               "L * M must be divisible by 64 (the MIMO kernel runs whole chunks of 64/M tokens)"),
)


MAMBA3 = register(Op(
    name="mamba3",
    family="mamba3",
    summary="Mamba-3 layer core: trapezoidal, data-dependent-rotary SSM (SISO, or MIMO of rank M); "
            "prefill returns the decode states; decode = one-token step",
    dims=("B", "L", "H", "P", "N", "M"),
    impls=(
        Impl("siso", "Triton angle_dt + mamba3_siso_fwd (chunk 64); bwd = the Triton mamba3_siso_bwd "
             "kernels (12 launches); decode = Triton mamba3_siso_step (1 launch); independent of M",
             _siso, ("fwd", "bwd", "decode")),
        Impl("mimo", "Triton angle_dt + dacs_segsum + tilelang mamba_mimo_fwd (chunk 64/M, 64 fused "
             "rows); bwd = dacs_segsum + tilelang mamba_mimo_bwd_combined (modelled); decode = rotary + "
             "CuTe step (rank M)", _mimo, ("fwd", "bwd", "decode"),
             constraints=MIMO_CONSTRAINTS),
    ),
    default_impl="siso",
    reference="ssmbench.analytic.ops.mamba3.ref:mamba3_chunked_ref",
    dtypes=("bf16", "fp16"),
    notes="Pass M for mimo only. B and C are one group shared by all heads (the kernels' optimized case).",
))
