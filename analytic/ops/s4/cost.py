"""S4 with a diagonal state matrix (S4D-ZOH, Gu et al. 2022): u [B, E, L] -> y [B, E, L].

Per channel e, N complex modes A[e, n] (Re < 0), output matrix C[e, n] (complex; B folded into C as
in S4D), step dt[e] = exp(log_dt[e]), skip D[e]. The real state has 2N entries: modes come in
conjugate pairs and only one of each pair is stored, hence the factor 2 Re(.) below.
  kernel  K[e, l] = 2 Re( sum_n C'[e, n] exp(dt A[e, n] l) ),  C' = C (exp(dt A) - 1) / A
  output  y = causal_conv(u, K) + D u
  recurrence (equivalent): h_t = Abar h_{t-1} + Bbar u_t, y_t = 2 Re(C h_t) + D u_t,
          Abar = exp(dt A), Bbar = (Abar - 1) / A  (h complex [B, E, N]).

Conventions (conventions.py): FMA = 2 FLOPs; complex arithmetic in real FLOPs (``COMPLEX_*``: a
complex multiply 6, multiply-add 8, complex x real 2, add 2, divide 11; a complex exp 2 vector + 3
transcendentals); a real FFT of length n 5 n log2(n) / 2 vector FLOPs (``real_fft_flops``; cuFFT's
extra cost at lengths that are not powers of two is left to calibration). Plus, for this family:
- Everything runs in fp32 / complex64 (8 bytes) whatever the storage dtype e of u and y; the casts
  to and from fp32 are launches of their own unless e is fp32.

Compulsory bytes: read u (e B E L) and the parameters log_dt (fp32 E), A, C (complex64 E N), D
(fp32 E), class weights; write y (e B E L). Decode: read u_t (e B E), the cached Abar, Bbar, C
(complex64 E N) and D, the state h [B, E, N] complex64 (class state); write y_t and the state.

Implementations (both plain PyTorch, one launch per dispatched op; ``s4_fft_ref`` and
``s4_recurrent_ref`` below are exactly these sequences):
- ``fft`` (S4D's FFTConv; ``s4_fft_ref``): kernel generation -- dt = exp(log_dt) (E exps),
  dtA = A dt (2 E N), exp(dtA) (complex exp on E N), - 1, C x (...), / A (C', 6 + 11 FLOPs on E N),
  arange(L), the Vandermonde argument dtA x arange(L) [E, N, L] (2 FLOPs per element), its complex
  exp [E, N, L] (3 transc + 2), K = 2 Re(einsum('en,enl->el')) (8 E N L: a complex
  matrix-vector product per channel, on the vector units: complex64 has no tensor-core path here),
  the factor 2 (E L) -- then convolution: rfft(K, n=2L) and rfft(u, n=2L), each preceded by
  PyTorch's padding (a fill of the [.., 2L] buffer and a copy into it: 2 launches); the pointwise
  product of the L + 1 frequencies (6 FLOPs each); irfft (n=2L): a clone of its input (cuFFT's c2r
  overwrites it), the transform, the 1/(2L) scale (1 FLOP per output); the [B, E, 2L] output
  sliced to L; y = y + u D (2 launches, 2 FLOPs): 23 launches, 25 unless fp32 (cast in, cast out),
  as counted with torch.profiler on an H200 (tests/test_ops_ssm_gpu_launches.py). One cuFFT
  launch per transform as seen at these sizes (large n may take two or three passes, each moving
  the data again: not counted). Forward only: the FFT
  path's backward is not modelled (an error to ask for).
- ``recurrent`` (S4's recurrent mode run over the sequence; ``s4_recurrent_ref``): discretize once
  (dt, dtA, Abar = exp(dtA), Abar - 1, Bbar = (Abar - 1) / A: 5 launches on [E] / [E, N]), h = 0,
  then per step 7 launches on [B, E, N] / [B, E] tensors: h = Abar h (6 E N B FLOPs), Bbar u_t (2),
  add (2), y = einsum('ben,en->be', h, C) (8 per mode: N complex multiply-adds per channel and
  step), 2 Re(y) (1), D u_t (1), add (1); the per-step outputs are stacked at the end: 7L + 7
  launches (7L + 9 unless fp32). The state is read and written in device memory every step.
  Decode (``s4_step_ref``): one step with Abar, Bbar cached (S4's ``setup_step``; read as
  weights), the state coming from and going back to the cache (7 launches, 9 unless fp32).

Working set: none modelled (0): these are streaming PyTorch kernels; cuFFT's shared-memory tiles are
library internals. Not counted: the conjugate-pair bookkeeping (views), address arithmetic.
"""

from __future__ import annotations

import dataclasses

import sympy as sp

from ...conventions import (COMPLEX_ADD, COMPLEX_DIV, COMPLEX_EXP, COMPLEX_MAC, COMPLEX_MUL, COMPLEX_TIMES_REAL, nbytes,
                            real_fft_flops)
from ...cost import Cost
from ...registry import Impl, Op, register
from ...symbols import B, E, L, N
from ..common.kernels import Kernel, Tensor, kernel_chain

FP32, C64 = 4, 8


def _params():
    return (Tensor("log_dt", "weights", E, FP32), Tensor("A", "weights", E * N, C64),
            Tensor("C", "weights", E * N, C64), Tensor("D", "weights", E, FP32))


def _cast_in(u, e: int, name: str, n):
    """``u.float()``: a launch unless the storage dtype is already fp32."""
    if e == FP32:
        return u, []
    u32 = Tensor(name, "intermediates", n, FP32)
    return u32, [Kernel(f"{name} = .float()", (u,), (u32,))]


def _cast_out(y32, y, e: int):
    return [Kernel("y.to(dtype)", (y32,), (y,))] if e != FP32 else []


def _discretize():
    """dt = exp(log_dt), dtA = A dt, exp(dtA), exp(dtA) - 1: launches on [E] / [E, N]."""
    log_dt, A, _, _ = _params()
    dt = Tensor("dt", "intermediates", E, FP32)
    dtA = Tensor("dtA", "intermediates", E * N, C64)
    abar = Tensor("Abar", "intermediates", E * N, C64)
    am1 = Tensor("Abar_minus_1", "intermediates", E * N, C64)
    return [
        Kernel("dt = exp(log_dt)", (log_dt,), (dt,), 0, E),
        Kernel("dtA = A * dt", (A, dt), (dtA,), COMPLEX_TIMES_REAL * E * N),
        Kernel("Abar = exp(dtA)", (dtA,), (abar,), COMPLEX_EXP[0] * E * N, COMPLEX_EXP[1] * E * N),
        Kernel("Abar - 1", (abar,), (am1,), E * N),
    ], dtA, am1


def _fft(mode: str, dtype: str) -> Cost:
    if mode != "fwd":
        raise ValueError(mode)
    e = nbytes(dtype)
    log_dt, A, C, D = _params()
    u = Tensor("u", "activations", B * E * L, e)  # [B, E, L]
    y = Tensor("y", "activations", B * E * L, e)
    disc, dtA, am1 = _discretize()
    cam1 = Tensor("C_Abar_minus_1", "intermediates", E * N, C64)
    ar = Tensor("arange", "intermediates", L, FP32)
    arg = Tensor("vandermonde_arg", "intermediates", E * N * L, C64)  # [E, N, L]
    vand = Tensor("vandermonde", "intermediates", E * N * L, C64)
    cprime = Tensor("C_prime", "intermediates", E * N, C64)
    kc = Tensor("K_complex", "intermediates", E * L, C64)
    k = Tensor("K", "intermediates", E * L, FP32)  # [E, L]
    k_pad = Tensor("K_padded", "intermediates", 2 * E * L, FP32)  # [E, 2L], zero-filled whole
    k_in = Tensor("K_into_padded", "intermediates", E * L, FP32)  # the copy into its first half
    k_f = Tensor("K_f", "intermediates", E * (L + 1), C64)
    u32, cast = _cast_in(u, e, "u_fp32", B * E * L)
    u_pad = Tensor("u_padded", "intermediates", 2 * B * E * L, FP32)  # [B, E, 2L]
    u_in = Tensor("u_into_padded", "intermediates", B * E * L, FP32)
    u_f = Tensor("u_f", "intermediates", B * E * (L + 1), C64)
    prod = Tensor("y_f", "intermediates", B * E * (L + 1), C64)
    prod_clone = Tensor("y_f_clone", "intermediates", B * E * (L + 1), C64)
    y_raw = Tensor("y_unscaled", "intermediates", 2 * B * E * L, FP32)
    y_full = Tensor("y_full", "intermediates", 2 * B * E * L, FP32)  # [B, E, 2L]
    y_slice = Tensor("y_slice", "intermediates", B * E * L, FP32)
    du = Tensor("u_D", "intermediates", B * E * L, FP32)
    y32 = Tensor("y_fp32", "intermediates", B * E * L, FP32) if e != FP32 else y
    launches = disc + [
        Kernel("C * (Abar - 1)", (C, am1), (cam1,), COMPLEX_MUL * E * N),
        Kernel("C' = ... / A", (cam1, A), (cprime,), COMPLEX_DIV * E * N),
        Kernel("arange(L)", (), (ar,)),
        Kernel("arg = dtA[..., None] * arange(L)", (dtA, ar), (arg,), COMPLEX_TIMES_REAL * E * N * L),
        Kernel("exp(arg)", (arg,), (vand,), COMPLEX_EXP[0] * E * N * L, COMPLEX_EXP[1] * E * N * L),
        Kernel("einsum('en,enl->el')", (cprime, vand), (kc,), COMPLEX_MAC * E * N * L),
        Kernel("K = 2 * Re", (kc,), (k,), E * L),
        Kernel("pad K: fill", (), (k_pad,)),
        Kernel("pad K: copy", (k,), (k_in,)),
        Kernel("rfft(K, n=2L)", (k_pad,), (k_f,), E * real_fft_flops(2 * L)),
        *cast,
        Kernel("pad u: fill", (), (u_pad,)),
        Kernel("pad u: copy", (u32,), (u_in,)),
        Kernel("rfft(u, n=2L)", (u_pad,), (u_f,), B * E * real_fft_flops(2 * L)),
        Kernel("u_f * K_f", (u_f, k_f), (prod,), COMPLEX_MUL * B * E * (L + 1)),
        Kernel("irfft: clone of the input (c2r overwrites it)", (prod,), (prod_clone,)),
        Kernel("irfft(n=2L) (c2r)", (prod_clone,), (y_raw,), B * E * real_fft_flops(2 * L)),
        Kernel("irfft: scale by 1/(2L)", (y_raw,), (y_full,), 2 * B * E * L),
        Kernel("u * D", (u32, D), (du,), B * E * L),
        Kernel("y + u D", (y_slice, du), (y32,), B * E * L),
        *_cast_out(y32, y, e),
    ]
    cost = kernel_chain(launches, [u, log_dt, A, C, D], [y], stream_working_sets=False)
    # Expanded, sympy splits log(2L) into log(2) + log(L): each transform's 5 L log2(2L) then evaluates
    # as 5 L log2(L) + 5 L, the log(2) / log(2) cancelled exactly, not through a rounded log(2L) / log(2).
    return dataclasses.replace(cost, vector=sp.expand(cost.vector))


def _step_launches(u_t, y_t32, h_in, h_out, abar, bbar, C, D, steps):
    """One recurrence step (``steps`` times): 7 launches on [B, E, N] and [B, E] tensors."""
    ah = Tensor("Abar_h", "intermediates", B * E * N, C64)
    bu = Tensor("Bbar_u", "intermediates", B * E * N, C64)
    yc = Tensor("y_complex", "intermediates", B * E, C64)
    y2 = Tensor("y_2re", "intermediates", B * E, FP32)
    yd = Tensor("u_D_t", "intermediates", B * E, FP32)
    yc_re = Tensor("y_complex_real", "intermediates", B * E, FP32)
    return [
        Kernel("h = Abar * h", (abar, h_in), (ah,), COMPLEX_MUL * B * E * N, count=steps),
        Kernel("Bbar * u_t", (bbar, u_t), (bu,), COMPLEX_TIMES_REAL * B * E * N, count=steps),
        Kernel("h = Abar h + Bbar u_t", (ah, bu), (h_out,), COMPLEX_ADD * B * E * N, count=steps),
        Kernel("einsum('ben,en->be', h, C)", (h_out, C), (yc,), COMPLEX_MAC * B * E * N, count=steps),
        Kernel("2 * y.real", (yc_re,), (y2,), B * E, count=steps),
        Kernel("D * u_t", (D, u_t), (yd,), B * E, count=steps),
        Kernel("y_t = 2 Re(C h) + D u_t", (y2, yd), (y_t32,), B * E, count=steps),
    ]


def _recurrent(mode: str, dtype: str) -> Cost:
    e = nbytes(dtype)
    log_dt, A, C, D = _params()
    if mode == "fwd":
        disc, _, am1 = _discretize()
        abar = Tensor("Abar", "intermediates", E * N, C64)
        bbar = Tensor("Bbar", "intermediates", E * N, C64)
        disc.append(Kernel("Bbar = (Abar - 1) / A", (am1, A), (bbar,), COMPLEX_DIV * E * N))
        u = Tensor("u", "activations", B * E * L, e)
        y = Tensor("y", "activations", B * E * L, e)
        u32, cast = _cast_in(u, e, "u_fp32", B * E * L)
        h = Tensor("h", "state", B * E * N * L, C64)  # the state, read and written every step
        h0 = Tensor("h0 = zeros", "state", B * E * N, C64)
        ys = Tensor("y_steps", "intermediates", B * E * L, FP32)
        y32 = Tensor("y_fp32", "intermediates", B * E * L, FP32) if e != FP32 else y
        # Each step kernel touches one step's slice (``per``) and runs L times (count): L-fold bytes.
        steps = _step_launches(u32.per(L), ys.per(L), h.per(L), h.per(L), abar, bbar, C, D, L)
        launches = disc + cast + [Kernel("h = zeros", (), (h0,))] + steps + [
            Kernel("torch.stack(ys)", (ys,), (y32,)),
            *_cast_out(y32, y, e),
        ]
        return kernel_chain(launches, [u, log_dt, A, C, D], [y], stream_working_sets=False)
    if mode == "decode":
        u_t = Tensor("u_t", "activations", B * E, e)
        y_t = Tensor("y_t", "activations", B * E, e)
        u32, cast = _cast_in(u_t, e, "u_t_fp32", B * E)
        h_in = Tensor("h", "state", B * E * N, C64)
        h_out = Tensor("h_new", "state", B * E * N, C64)
        abar_c = Tensor("Abar", "weights", E * N, C64)  # cached by setup_step
        bbar_c = Tensor("Bbar", "weights", E * N, C64)
        y32 = Tensor("y_t_fp32", "intermediates", B * E, FP32) if e != FP32 else y_t
        launches = cast + _step_launches(u32, y32, h_in, h_out, abar_c, bbar_c, C, D, 1) + _cast_out(y32, y_t, e)
        return kernel_chain(launches, [u_t, h_in, abar_c, bbar_c, C, D], [y_t, h_out], stream_working_sets=False)
    raise ValueError(mode)


S4 = register(Op(
    name="s4",
    family="s4",
    summary="diagonal S4 (S4D-ZOH): convolution with the SSM kernel (FFT) or the recurrence",
    dims=("B", "L", "E", "N"),
    impls=(
        Impl("fft", "S4D FFTConv in PyTorch: Vandermonde kernel generation [E, N, L], rfft/irfft "
             "at length 2L", _fft, ("fwd",)),
        Impl("recurrent", "the recurrence h = Abar h + Bbar u, y = 2 Re(C h) + D u, one set of "
             "7 small launches per step; decode = one step", _recurrent, ("fwd", "decode")),
    ),
    default_impl="fft",
    reference="ssmbench.analytic.ops.s4.ref:s4_fft_ref",
    dtypes=("fp32", "bf16", "fp16"),
))

