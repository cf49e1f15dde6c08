"""Mamba-1 selective scan (Gu & Dao 2023), one group of B, C (mamba-ssm's ``selective_scan_fn``):

  u, delta, z [B, E, L]; A [E, N] (fp32); B, C [B, N, L]; D, delta_bias [E] (fp32)
  dt = softplus(delta + delta_bias)                                   [B, E, L]
  h_t = exp(dt_t A) * h_{t-1} + (dt_t u_t) B_t        (per channel e, state [N], h_0 = 0)
  y_t = C_t . h_t + D u_t ;  out = y * silu(z)                        [B, E, L]

Storage dtype e for u, delta, z, B, C and out; parameters fp32; state and arithmetic fp32. The fused
decode rule takes ``state_dtype`` (registry ``Impl.storage``): selective_state_update loads and
stores the state at its cache tensor's dtype, which mamba-ssm allocates in the model dtype
(``allocate_inference_cache``); fp32 is what the measured decode cases use.

FLOPs (conventions.py; softplus = 1 vector + 2 transc., silu = 3 + 1):
- per (b, e, l), all implementations: bias add (1), softplus, dt u (1), the skip D u (1 multiply,
  + 1 add where it is not the FMA's initial value), silu(z) and the gate multiply (4).
    fused: 8 vector, 3 transc.     naive / loop: 9 vector, 3 transc.
- per (b, e, l, n):
    fused: dt A (1), exp (1 transc.), B (dt u) (1), the scan, C h accumulated (FMA, 2). The kernel's
      cub block scan (BLOCK_SCAN_WARP_SCANS over 2048-element chunks, 16 items per thread) applies
      the combine (a1, b1) o (a2, b2) = (a1 a2, a2 b1 + b2) (3 FLOPs) twice per element: once in
      the thread-serial reduction and once when the prefix is applied; the warp-level scans add
      log2(32) combines per 16 elements (not counted). 10 vector, 1 transc.
    naive / loop (sequential recurrence): dt A (1), exp (1 t.), B (dt u) (1), a h (1), + b (1),
      C . h (2: a bmm in naive, counted on the tensor engine at fp32; multiply + sum in loop).
      naive: 4 vector + 2 tensor(fp32), 1 transc.   loop: 6 vector, 1 transc.
- backward (fused only), per (b, e, l, n): recompute exp(dt A) (1 + 1 t.) and B (dt u) (1),
  dout C (1), forward and reverse block scans (2 x 6), then ddelta_u (1), du (2), the pre-update
  state (1), ddelta (5), dA (3), dB (1), dC (1): 29 vector, 1 transc; dB and dC are also
  accumulated with one atomicAdd each per (b, e, l, n) in L2 (not FLOPs, not device bytes).
  Per (b, e, l): softplus recomputed and differentiated (1 + 2 t., then 2 + 1 t.), bias (2),
  sigmoid(z) and dz (2 + 1 t., 8), du = D dout (1), dD (2), dt u (1), ddelta_bias (1): 20 vector,
  4 transc.
- decode (selective_state_update), per (b, e, n): dt A (1), exp (1 t.), B dt (1), state dA (1),
  dB x (1), add (1), state C (1), sum (1): 7 vector (naive: the C . h is a bmm: 5 vector + 2
  tensor), 1 transc; per (b, e): softplus(dt + bias) (2 + 2 t.), D x (2), silu gate (4 + 1 t.).

Compulsory bytes: forward reads u, delta, z, B, C (e) and A, D, delta_bias (fp32, weights) and
writes out (e). Backward reads dout and the forward inputs, writes du, ddelta, dz, dB, dC (e) and
dA, dD, ddelta_bias (fp32). Decode reads x, dt, z [B, E], B, C [B, N] (e), the state [B, E, N] fp32
and the parameters, writes out [B, E] and the state. The final state of a forward is not an output
of the op (the fused kernel has it in its chunk states; see below).

Implementations:
- ``fused``: mamba-ssm ``selective_scan_cuda``. Forward: one launch, grid (B, E); each block keeps
  its channel's state in registers and walks L in chunks of 2048 (128 threads x 16 items; smaller
  blocks for L <= 1024), reading u, delta, z once and writing out_z. It also writes the pre-gate
  out (e B E L, kept for backward) and, per chunk, the running (prod a, h) pairs as float2:
  8 B E ceil(L/2048) N bytes, the chunk states backward restarts from. B and C [B, N, L] are re-read
  by every channel of their batch element; those E-fold re-reads are served by L2 (B and C are
  small beside u, delta) and not counted as device bytes. Backward (no out_z recompute, as
  ``selective_scan_fn`` calls it): zero-fills of dA, dB, dC (fp32), dD, ddelta_bias (5 launches),
  one kernel that walks the chunks in reverse, recomputing each chunk's forward scan from the saved
  chunk state (counted above), reading u, delta, dout, z, the saved pre-gate out, B, C, the chunk
  states and writing du, ddelta, dz and, through L2 atomics, dB and dC in fp32; then dB, dC are cast
  to e (2 launches unless fp32). Decode: ``selective_state_update`` (Triton, one launch): state read
  and written once.
- ``naive``: the PyTorch composition of ``selective_scan_ref`` (``mamba1_scan_ref`` below): u,
  delta, B, C cast to fp32 (4 launches unless fp32; C_t is read as a strided [B, N] slice, which the
  bmm takes without a copy), dt = softplus(delta + bias) (2), dt u (1), deltaA = exp(dt A) and
  deltaB_u = (dt u) B materialized as [B, E, L, N] fp32 in device memory (mul, exp, mul: 3), h = 0
  (1), then per step 3 launches: deltaA[:, :, t] * h, + deltaB_u[:, :, t], einsum('bdn,bn->bd', h,
  C_t) (a bmm); stack (1), + D u (2), silu gate (2), cast out (1 unless fp32): 3L + 12 launches
  (3L + 17 unless fp32). Decode: ``selective_state_update_ref`` (``mamba1_step_ref``): 14 launches
  (16 unless fp32), the C contraction a bmm at the storage dtype.
- ``loop``: the per-timestep Python loop of small kernels (``mamba1_scan_loop_ref``), nothing of size
  [B, E, L, N]: casts, dt prep and dt u vectorized as in naive, h = 0, then per step 7 launches on
  [B, E, N]: dt_t A, exp, (dt u)_t B_t, a h, + b, h C_t, sum over N; the state is read and written
  in device memory every step; stack, skip, gate, cast as naive: 7L + 9 launches (7L + 14).

Padded length (``fused``): the kernels process whole chunks of kNThreads x kNItems items, chosen by
the length (selective_scan_fwd_kernel.cuh's dispatch: L <= 128: 32 x 4, <= 256: 32 x 8, <= 512:
32 x 16, <= 1024: 64 x 16, else 128 x 16 = 2048); where L is not a multiple of the chunk
(``kIsEvenLen`` false) the last chunk's missing items are loaded as zeros and computed in full, so
the FLOPs of the fused forward and backward are those of L_pad = ceil(L / chunk) x chunk items (the
measured Vision-Mamba scans at L = 196 and 3136 run the kIsEvenLen = false kernels: 256 and 4096
items computed); the bytes are the L items loaded and stored.

Bytes are counted per launch (each reads its operands from and writes its results to device
memory); L2 would hold the small per-step tensors of naive and loop when B E N is small, which these
counts deliberately do not assume (the calibrated efficiency carries it).

Working set: fused forward holds a chunk of min(L, 2048) items per block: u, delta at e and fp32
dt, dt u, out, B_t, C_t (2e + 20 bytes per item) plus 256 running-prefix float2 in shared memory;
backward: 3e + 48 bytes per item (loads; fp32 dt, dout, du, ddelta, B, C, dB, dC; two float2 scans)
plus 6 KiB of shared prefix arrays; decode: a BLOCK_M x N fp32 tile of 4 arrays (BLOCK_M N = 512).
The PyTorch kernels' working set is not modelled (0).
"""

from __future__ import annotations

import sympy as sp

from ...conventions import SILU, SOFTPLUS, TENSOR_DTYPE, nbytes
from ...cost import Cost
from ...registry import Impl, Op, register
from ...symbols import B, E, L, N
from ..common.kernels import Kernel, Tensor, kernel_chain

FP32 = 4
CHUNK = 2048  # selective_scan_fwd_kernel: 128 threads x 16 items for L > 1024
NCHUNKS = sp.ceiling(L / CHUNK)
# items per chunk of the kernel launched for L (kNThreads x kNItems, the dispatch in the module docstring)
CHUNK_OF_L = sp.Piecewise((128, L <= 128), (256, L <= 256), (512, L <= 512), (1024, L <= 1024), (CHUNK, True))
L_PAD = sp.ceiling(L / CHUNK_OF_L) * CHUNK_OF_L  # the items the fused kernels compute
COMBINE = 3  # (a1, b1) o (a2, b2) = (a1 a2, a2 b1 + b2): 1 mul + 1 FMA
PER_L_FUSED = (1 + SOFTPLUS[0] + 1 + 1 + SILU[0] + 1, SOFTPLUS[1] + SILU[1])  # bias, softplus, dt u, D u, gate
PER_L_EAGER = (PER_L_FUSED[0] + 1, PER_L_FUSED[1])  # + the add of D u
PER_N_FUSED = (1 + 1 + 2 * COMBINE + 2, 1)
PER_N_NAIVE_VECTOR = 4  # dt A, B (dt u), a h, + b  (C . h is the bmm)
PER_N_LOOP = (6, 1)
PER_N_BWD = (29, 1)
PER_L_BWD = (20, 4)


def _inputs(e: int):
    u = Tensor("u", "activations", B * E * L, e)  # [B, E, L]
    delta = Tensor("delta", "activations", B * E * L, e)
    z = Tensor("z", "activations", B * E * L, e)
    b = Tensor("B", "activations", B * N * L, e)  # [B, N, L]
    c = Tensor("C", "activations", B * N * L, e)
    a = Tensor("A", "weights", E * N, FP32)  # [E, N]
    d = Tensor("D", "weights", E, FP32)
    db = Tensor("delta_bias", "weights", E, FP32)
    return u, delta, z, b, c, a, d, db


def _ws_fused_fwd(e: int):
    return sp.Min(L, CHUNK) * (2 * e + 5 * FP32) + 256 * 8


def _fused(mode: str, dtype: str, state_dtype: str = "fp32") -> Cost:
    e = nbytes(dtype)
    u, delta, z, b, c, a, d, db = _inputs(e)
    out = Tensor("out", "activations", B * E * L, e)
    pre = Tensor("out_pregate", "intermediates", B * E * L, e)
    states = Tensor("chunk_states", "state", 2 * B * E * NCHUNKS * N, FP32)  # float2 (prod a, h) pairs
    bel = B * E * L
    pel, peln = B * E * L_PAD, B * E * L_PAD * N  # the computed (padded) items
    if mode == "fwd":
        k = Kernel("selective_scan_fwd", (u, delta, z, b, c, a, d, db), (out, pre, states),
                   PER_L_FUSED[0] * pel + PER_N_FUSED[0] * peln,
                   PER_L_FUSED[1] * pel + PER_N_FUSED[1] * peln, working_set=_ws_fused_fwd(e))
        return kernel_chain([k], [u, delta, z, b, c, a, d, db], [out], stream_working_sets=False)
    if mode == "bwd":
        dout = Tensor("dout", "activations", bel, e)
        du, ddelta, dz = (Tensor(n, "activations", bel, e) for n in ("du", "ddelta", "dz"))
        da, dd = Tensor("dA", "weights", E * N, FP32), Tensor("dD", "weights", E, FP32)
        ddb = Tensor("ddelta_bias", "weights", E, FP32)
        db32, dc32 = (Tensor(n, "activations", B * N * L, FP32) for n in ("dB_fp32", "dC_fp32"))
        launches = [Kernel(f"zeros({t.name})", (), (t,)) for t in (da, db32, dc32, dd, ddb)]
        launches.append(Kernel("selective_scan_bwd", (u, delta, dout, z, pre, b, c, states, a, d, db),
                               (du, ddelta, dz, db32, dc32, da, dd, ddb),
                               PER_L_BWD[0] * pel + PER_N_BWD[0] * peln, PER_L_BWD[1] * pel + PER_N_BWD[1] * peln,
                               working_set=sp.Min(L, CHUNK) * (3 * e + 48) + 6144))
        if e != FP32:
            dbe, dce = Tensor("dB", "activations", B * N * L, e), Tensor("dC", "activations", B * N * L, e)
            launches += [Kernel("dB.to", (db32,), (dbe,)), Kernel("dC.to", (dc32,), (dce,))]
        else:
            dbe, dce = db32, dc32
        return kernel_chain(launches, [dout, u, delta, z, b, c, a, d, db], [du, ddelta, dz, dbe, dce, da, dd, ddb],
                            stream_working_sets=False)
    if mode == "decode":
        x_, dt_, z_, b_, c_, s_in, s_out, out_t, a_, d_, dtb = _decode_tensors(e, nbytes(state_dtype))
        k = Kernel("selective_state_update", (s_in, x_, dt_, z_, b_, c_, a_, d_, dtb), (s_out, out_t),
                   (2 + SOFTPLUS[0] + 2 + SILU[0] + 1) * B * E + 7 * B * E * N,
                   (SOFTPLUS[1] + SILU[1]) * B * E + B * E * N, working_set=512 * 4 * FP32)
        return kernel_chain([k], [x_, dt_, z_, b_, c_, s_in, a_, d_, dtb], [out_t, s_out], stream_working_sets=False)
    raise ValueError(mode)


def _decode_tensors(e: int, s: int = FP32):
    """One token's tensors; ``s``: bytes per state element (fp32 as the measured kernels keep it)."""
    x_ = Tensor("x", "activations", B * E, e)  # [B, E]
    dt_ = Tensor("dt", "activations", B * E, e)
    z_ = Tensor("z", "activations", B * E, e)
    b_ = Tensor("B", "activations", B * N, e)  # [B, N]
    c_ = Tensor("C", "activations", B * N, e)
    s_in = Tensor("state", "state", B * E * N, s)  # [B, E, N]
    s_out = Tensor("state_new", "state", B * E * N, s)
    out_t = Tensor("out", "activations", B * E, e)
    a_ = Tensor("A", "weights", E * N, FP32)
    d_ = Tensor("D", "weights", E, FP32)
    dtb = Tensor("dt_bias", "weights", E, FP32)
    return x_, dt_, z_, b_, c_, s_in, s_out, out_t, a_, d_, dtb


def _prep(e: int, u, delta, b, c, d_bias):
    """Casts (unless fp32) and dt = softplus(delta + delta_bias), shared by naive and loop."""
    bel = B * E * L
    f = lambda name, n: Tensor(name, "intermediates", n, FP32)  # noqa: E731
    launches = []
    if e != FP32:
        u32, d32 = f("u_fp32", bel), f("delta_fp32", bel)
        launches += [Kernel("u.float()", (u,), (u32,)), Kernel("delta.float()", (delta,), (d32,))]
    else:
        u32, d32 = u, delta
    if e != FP32:
        b32, ct = f("B_fp32", B * N * L), f("C_fp32", B * N * L)
        launches += [Kernel("B.float()", (b,), (b32,)), Kernel("C.float()", (c,), (ct,))]
    else:
        b32, ct = b, c
    pre, dt = f("delta_plus_bias", bel), f("dt", bel)
    launches += [Kernel("delta + delta_bias", (d32, d_bias), (pre,), bel),
                 Kernel("softplus", (pre,), (dt,), SOFTPLUS[0] * bel, SOFTPLUS[1] * bel)]
    return launches, u32, b32, ct, dt


def _epilogue(e: int, ys, u32, d, z, out):
    """stack -> y + u D -> * silu(z) -> cast, shared by naive and loop."""
    bel = B * E * L
    f = lambda name: Tensor(name, "intermediates", bel, FP32)  # noqa: E731
    y, ud, yd = f("y"), f("u_D"), f("y_plus_uD")
    sz = Tensor("silu_z", "intermediates", bel, e)  # F.silu(z) at the storage dtype
    o32 = f("out_fp32") if e != FP32 else out
    launches = [Kernel("torch.stack(ys)", (ys,), (y,)),
                Kernel("u * D", (u32, d), (ud,), bel),
                Kernel("y + u D", (y, ud), (yd,), bel),
                Kernel("silu(z)", (z,), (sz,), SILU[0] * bel, SILU[1] * bel),
                Kernel("* silu(z)", (yd, sz), (o32,), bel)]
    if e != FP32:
        launches.append(Kernel("out.to(dtype)", (o32,), (out,)))
    return launches


def _eager(impl: str):
    def rule(mode: str, dtype: str) -> Cost:
        e = nbytes(dtype)
        if mode == "decode" and impl == "naive":
            return _naive_decode(e, dtype)
        if mode != "fwd":
            raise ValueError(mode)
        u, delta, z, b, c, a, d, dbias = _inputs(e)
        out = Tensor("out", "activations", B * E * L, e)
        launches, u32, b32, ct, dt = _prep(e, u, delta, b, c, dbias)
        bel, beln, ben = B * E * L, B * E * L * N, B * E * N
        f = lambda name, n: Tensor(name, "intermediates", n, FP32)  # noqa: E731
        h0, ys = Tensor("h0", "state", ben, FP32), f("ys", bel)
        h = Tensor("h", "state", beln, FP32)  # h over all steps (each step reads and writes one [B, E, N])
        dtu = f("dt_u", bel)
        launches.append(Kernel("dt * u", (dt, u32), (dtu,), bel))
        if impl == "naive":
            t1, da, dbu = f("dt_A", beln), f("deltaA", beln), f("deltaB_u", beln)
            ah = f("deltaA_h", beln)
            launches += [
                Kernel("dt[..., None] * A", (dt, a), (t1,), beln),
                Kernel("exp -> deltaA [B, E, L, N]", (t1,), (da,), 0, beln),
                Kernel("(dt u)[..., None] * B -> deltaB_u [B, E, L, N]", (dtu, b32), (dbu,), beln),
                Kernel("h = zeros", (), (h0,)),
                Kernel("deltaA[:, :, t] * h", (da.per(L), h.per(L)), (ah.per(L),), ben, count=L),
                Kernel("+ deltaB_u[:, :, t]", (ah.per(L), dbu.per(L)), (h.per(L),), ben, count=L),
                Kernel("einsum('bdn,bn->bd', h, C_t) (bmm)", (h.per(L), ct.per(L)), (ys.per(L),),
                       tensor={TENSOR_DTYPE["fp32"]: 2 * ben}, count=L),
            ]
        else:
            t1, da, dbu, ah, hc = (f(n, ben) for n in ("dt_A", "dA", "dB_u", "dA_h", "h_C"))
            launches += [
                Kernel("h = zeros", (), (h0,)),
                Kernel("dt[:, :, t, None] * A", (dt.per(L), a), (t1,), ben, count=L),
                Kernel("exp", (t1,), (da,), 0, ben, count=L),
                Kernel("(dt u)[:, :, t, None] * B_t", (dtu.per(L), b32.per(L)), (dbu,), ben, count=L),
                Kernel("dA * h", (da, h.per(L)), (ah,), ben, count=L),
                Kernel("+ dB_u", (ah, dbu), (h.per(L),), ben, count=L),
                Kernel("h * C_t", (h.per(L), ct.per(L)), (hc,), ben, count=L),
                Kernel("sum over N", (hc,), (ys.per(L),), ben, count=L),
            ]
        launches += _epilogue(e, ys, u32, d, z, out)
        return kernel_chain(launches, [u, delta, z, b, c, a, d, dbias], [out], stream_working_sets=False)
    return rule


def _naive_decode(e: int, dtype: str) -> Cost:
    x_, dt_, z_, b_, c_, s_in, s_out, out_t, a_, d_, dtb = _decode_tensors(e, FP32)
    be, ben = B * E, B * E * N
    f = lambda name, n, s=FP32: Tensor(name, "intermediates", n, s)  # noqa: E731
    p, dt, t1, da, dbt, sa, dbx, new = (f(n, k) for n, k in (("dt_plus_bias", be), ("dt_sp", be), ("dt_A", ben),
                                                               ("dA", ben), ("dB", ben), ("state_dA", ben),
                                                               ("dB_x", ben), ("state_next", ben)))
    launches = [
        Kernel("dt + dt_bias", (dt_, dtb), (p,), be),
        Kernel("softplus", (p,), (dt,), SOFTPLUS[0] * be, SOFTPLUS[1] * be),
        Kernel("dt[..., None] * A", (dt, a_), (t1,), ben),
        Kernel("exp", (t1,), (da,), 0, ben),
        Kernel("dt[..., None] * B", (dt, b_), (dbt,), ben),
        Kernel("state * dA", (s_in, da), (sa,), ben),
        Kernel("dB * x", (dbt, x_), (dbx,), ben),
        Kernel("add", (sa, dbx), (new,), ben),
        Kernel("state.copy_", (new,), (s_out,)),
    ]
    if e != FP32:
        se = f("state_e", ben, e)
        launches.append(Kernel("state.to(C.dtype)", (s_out,), (se,)))
    else:
        se = s_out
    y, xd, yd, sz = f("y", be, e), f("x_D", be), f("y_plus_xD", be, e), f("silu_z", be, e)
    launches.append(Kernel("einsum('bdn,bn->bd') (bmm)", (se, c_), (y,), tensor={TENSOR_DTYPE[dtype]: 2 * ben}))
    launches.append(Kernel("x * D", (x_, d_), (xd,), be))
    if e != FP32:
        xde = f("x_D_e", be, e)
        launches.append(Kernel("(x D).to(dtype)", (xd,), (xde,)))
    else:
        xde = xd
    launches += [Kernel("y + x D", (y, xde), (yd,), be),
                 Kernel("silu(z)", (z_,), (sz,), SILU[0] * be, SILU[1] * be),
                 Kernel("* silu(z)", (yd, sz), (out_t,), be)]
    return kernel_chain(launches, [x_, dt_, z_, b_, c_, s_in, a_, d_, dtb], [out_t, s_out], stream_working_sets=False)


MAMBA1_SCAN = register(Op(
    name="mamba1_scan",
    family="mamba1",
    summary="Mamba-1 selective scan with dt softplus, D skip and silu(z) gate; decode = one-token state update",
    dims=("B", "L", "E", "N"),
    impls=(
        Impl("fused", "mamba-ssm selective_scan_cuda: state in registers, chunk states saved; backward "
             "recomputes the forward scan; decode = selective_state_update", _fused, ("fwd", "bwd", "decode"),
             storage=("state_dtype",)),
        Impl("naive", "selective_scan_ref in PyTorch: deltaA and deltaB_u materialized [B, E, L, N], "
             "3 launches per step; decode = selective_state_update_ref", _eager("naive"), ("fwd", "decode")),
        Impl("loop", "per-timestep loop of 7 small launches, state in device memory every step",
             _eager("loop"), ("fwd",)),
    ),
    default_impl="fused",
    reference="ssmbench.analytic.ops.mamba1.ref:mamba1_scan_ref",
))

