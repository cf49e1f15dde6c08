"""Normalization over the last dim of x [B, L, D]: ``rmsnorm``, ``layernorm`` and ``gated_rmsnorm``
(Mamba-2's RMSNormGated with norm_before_gate=False: y = rmsnorm(x * silu(z)) * w).

Counted per row of D elements (R = B*L rows; conventions.py: FMA = 2 FLOPs, fp32 arithmetic,
rsqrt / exp are transcendentals):

rmsnorm forward: sum of squares D FMAs (2D), divide by D (1), + eps (1), rsqrt (1 transc.),
  x * rstd (D), * w (D)  ->  4D + 2 vector, 1 transcendental.
rmsnorm backward (rstd saved): xhat = x * rstd (D), g = dy * w (D), dw += dy * xhat (2D),
  c = sum(xhat * g) / D (2D + 1), dx = (g - xhat * c) * rstd (3D)  ->  9D + 1 vector.
layernorm forward: mean (D + 1), x - mean (D), variance sum of squares / D (2D + 1), + eps (1),
  rsqrt (1 transc.), xhat * rstd (D), * w + b (2D)  ->  7D + 3 vector, 1 transcendental.
layernorm backward (mean, rstd saved): xhat (2D), g = dy * w (D), dw (2D), db (D),
  c1 = sum(xhat * g) / D (2D + 1), c2 = sum(g) / D (D + 1), dx = (g - (xhat * c1 + c2)) * rstd (4D)
  ->  13D + 2 vector.
gated_rmsnorm forward: silu(z) per element (``SILU``), u = x * silu(z) (D), then rmsnorm of u
  ->  (SILU + 1 + 4) D + 2 vector, (D + 1) transcendentals.
gated_rmsnorm backward: recompute silu(z) and u ((SILU + 1) D vector, D transc.), rmsnorm backward
  of u (9D + 1), dx = du * silu(z) (D), dz = (du * x) * silu'(z) given the sigmoid
  (D + (SILU_BWD - SIGMOID) D)  ->  20D + 1 vector, D transcendentals.

Compulsory bytes (storage dtype, e bytes): forward reads x (and z), the weights w (and bias b) and
writes y; backward reads dy, x (and z), w and writes dx (and dz), dw (and db). Weights are class
``weights``.

Implementations:
- ``fused``: one kernel per row, the row held on chip in fp32 (Triton ``layer_norm_fn`` /
  ``rmsnorm_fn`` of mamba-ssm and flash-attn, apex's fused norms). Forward also writes the per-row
  fp32 statistics it keeps for backward (rstd; mean too for layernorm): extra intermediates. Backward
  is one kernel that reads them back and writes dx and per-program partial dw (db), plus one
  reduction of the partials into dw: 2 launches. The partial buffer (programs x D fp32, programs ~
  SM count) is not counted: it is O(SMs * D), hardware-dependent and negligible beside B*L*D.
- ``torch_eager``: the plain PyTorch composition of the reference functions below, one kernel per
  dispatched aten op, each materializing its output (fp32 upcasts, [B, L, 1] statistics, [B, L, D]
  temporaries). For fp32 storage the ``.float()`` / ``.to(dtype)`` casts dispatch nothing and are
  not counted. Same arithmetic as ``fused``. Backward: rmsnorm's is autograd's 16-kernel chain
  (``_eager_rmsnorm_bwd``: derivatives.yaml's formulas node by node, the saved fp32 upcast and
  statistics read back, every gradient materialized); layernorm's and gated_rmsnorm's (chains of the
  same kind, longer) are not modelled (asking for them is an error). Each kernel names its ATen path where it is not a contiguous vectorized one
  (``CAST``, ``REDUCE``, ``BCAST``): on the H200 these ran 1.35-1.56x over their DRAM bytes at copy
  bandwidth (calibration-torchref of 2026-12-02), the achievable model times their bytes at the
  path's probed bandwidth. The element sizes pick the kernel (``common/kernels.Kernel``): the weight
  multiply with 16-bit results is the 16-bit broadcast, the downcast to the storage dtype is PyTorch's
  vectorized float -> bfloat16 / half copy (no path), the upcast is the casting copy. ``F.layer_norm`` is
  a single native kernel: its bytes are ``fused``'s.

Decode is the forward with L = 1. Not counted: eps handling beyond the one add, groups in
RMSNormGated (``group_size`` < D adds one rsqrt per group and per row, nothing else), address
arithmetic.
"""

from __future__ import annotations

from ...conventions import SIGMOID, SILU, SILU_BWD, nbytes
from ...cost import Cost
from ...registry import Impl, Op, register
from ...symbols import B, D, L
from ..common.kernels import ACC_BYTES, Kernel, Tensor, kernel_chain, row_working_set

# ATen kernel paths of the eager kernels (Cost.path; achievable.py times their bytes at
# memory.dram.path.<p>): a dtype-converting copy, a reduction along the last dim, an elementwise op whose
# operands differ in shape (a [B, L, 1] statistic or the [D] weight broadcast over the rows)
CAST, REDUCE, BCAST = "dram.cast_copy", "dram.reduction", "dram.broadcast"

R = B * L  # rows
N = B * L * D  # elements, [B, L, D]

RMS_FWD = (4 * D + 2, 1)  # per row: (vector, transcendental)
RMS_BWD = 9 * D + 1
LN_FWD = (7 * D + 3, 1)
LN_BWD = 13 * D + 2
GATED_FWD = ((SILU[0] + 1 + 4) * D + 2, SILU[1] * D + 1)
GATED_BWD = ((SILU[0] + 1) * D + RMS_BWD + D + D + (SILU_BWD[0] - SIGMOID[0]) * D, SILU[1] * D)


class _T:
    """The tensors of one norm call at a storage dtype."""

    def __init__(self, dtype: str):
        e = nbytes(dtype)
        self.e, self.fp32 = e, e == ACC_BYTES
        act = lambda name, n=N: Tensor(name, "activations", n, e)  # noqa: E731
        self.x, self.z, self.y, self.dy, self.dx, self.dz = (act(n) for n in ("x", "z", "y", "dy", "dx", "dz"))
        self.w, self.b = Tensor("w", "weights", D, e), Tensor("b", "weights", D, e)
        self.dw, self.db = Tensor("dw", "weights", D, e), Tensor("db", "weights", D, e)
        self.rstd = Tensor("rstd", "intermediates", R, ACC_BYTES)  # [B, L] saved for backward
        self.mean = Tensor("mean", "intermediates", R, ACC_BYTES)  # [B, L]

    def tmp(self, name: str, rows_only: bool = False, fp32: bool = True) -> Tensor:
        return Tensor(name, "intermediates", R if rows_only else N, ACC_BYTES if fp32 else self.e)


# fused ---------------------------------------------------------------------------------------------

def _fused(kind: str, mode: str, dtype: str) -> Cost:
    t = _T(dtype)
    stats = (t.mean, t.rstd) if kind == "layernorm" else (t.rstd,)
    weights = (t.w, t.b) if kind == "layernorm" else (t.w,)
    acts = (t.x, t.z) if kind == "gated_rmsnorm" else (t.x,)
    fwd_counts = {"rmsnorm": RMS_FWD, "layernorm": LN_FWD, "gated_rmsnorm": GATED_FWD}[kind]
    if mode == "fwd":
        k = Kernel(f"{kind}_fwd", acts + weights, (t.y, *stats), R * fwd_counts[0], R * fwd_counts[1],
                   working_set=row_working_set(D, len(acts) + len(weights)))
        return kernel_chain([k], acts + weights, [t.y])
    if mode == "bwd":
        grads_act = (t.dx, t.dz) if kind == "gated_rmsnorm" else (t.dx,)
        grads_w = (t.dw, t.db) if kind == "layernorm" else (t.dw,)
        bwd_v = {"rmsnorm": RMS_BWD, "layernorm": LN_BWD, "gated_rmsnorm": GATED_BWD[0]}[kind]
        bwd_t = GATED_BWD[1] if kind == "gated_rmsnorm" else 0
        main = Kernel(f"{kind}_bwd", (t.dy, *acts, *weights, *stats), grads_act, R * bwd_v, R * bwd_t,
                      working_set=row_working_set(D, 1 + len(acts) + len(weights)))
        reduce_dw = Kernel("partial_dw_sum", (), grads_w)
        return kernel_chain([main, reduce_dw], (t.dy, *acts, *weights), (*grads_act, *grads_w))
    raise ValueError(mode)


# torch_eager ---------------------------------------------------------------------------------------

def _upcast(t: _T, src: Tensor, kernels: list[Kernel]) -> Tensor:
    """``src.float()``: one copy kernel, or nothing when the storage is already fp32."""
    if t.fp32:
        return src
    out = t.tmp(f"{src.name}_f32")
    kernels.append(Kernel("aten._to_copy", (src,), (out,), path=CAST))
    return out


def _rms_stats(t: _T, u: Tensor, kernels: list[Kernel]) -> Tensor:
    """rstd = rsqrt(mean(u^2) + eps): pow, mean, add, rsqrt."""
    sq, ms, mse, r = t.tmp(f"{u.name}_sq"), t.tmp("ms", True), t.tmp("ms_eps", True), t.tmp("rstd_e", True)
    kernels += [Kernel("aten.pow", (u,), (sq,), N),
                Kernel("aten.mean", (sq,), (ms,), N + R, path=REDUCE),
                Kernel("aten.add", (ms,), (mse,), R),
                Kernel("aten.rsqrt", (mse,), (r,), 0, R)]
    return r


def _downcast_mul_w(t: _T, src: Tensor, kernels: list[Kernel]) -> None:
    """y = w * src.to(dtype)."""
    if t.fp32:
        kernels.append(Kernel("aten.mul", (t.w, src), (t.y,), N, path=BCAST))
        return
    low = t.tmp(f"{src.name}_low", fp32=False)
    kernels += [Kernel("aten._to_copy", (src,), (low,), path=CAST), Kernel("aten.mul", (t.w, low), (t.y,), N, path=BCAST)]


def _eager_rmsnorm(t: _T) -> Cost:
    ks: list[Kernel] = []
    xf = _upcast(t, t.x, ks)
    r = _rms_stats(t, xf, ks)
    xn = t.tmp("xn")
    ks.append(Kernel("aten.mul", (xf, r), (xn,), N, path=BCAST))
    _downcast_mul_w(t, xn, ks)
    return kernel_chain(ks, [t.x, t.w], [t.y])


def _eager_layernorm(t: _T) -> Cost:
    ks: list[Kernel] = []
    xf = _upcast(t, t.x, ks)
    mu, xc, sq, var = t.tmp("mu", True), t.tmp("xc"), t.tmp("xc_sq"), t.tmp("var", True)
    vare, r, xn = t.tmp("var_eps", True), t.tmp("rstd_e", True), t.tmp("xn")
    ks += [Kernel("aten.mean", (xf,), (mu,), N + R, path=REDUCE),
           Kernel("aten.sub", (xf, mu), (xc,), N, path=BCAST),
           Kernel("aten.pow", (xc,), (sq,), N),
           Kernel("aten.mean", (sq,), (var,), N + R, path=REDUCE),
           Kernel("aten.add", (var,), (vare,), R),
           Kernel("aten.rsqrt", (vare,), (r,), 0, R),
           Kernel("aten.mul", (xc, r), (xn,), N, path=BCAST)]
    scaled = t.tmp("xw", fp32=t.fp32)
    if t.fp32:
        ks.append(Kernel("aten.mul", (xn, t.w), (scaled,), N, path=BCAST))
    else:
        low = t.tmp("xn_low", fp32=False)
        ks += [Kernel("aten._to_copy", (xn,), (low,), path=CAST), Kernel("aten.mul", (low, t.w), (scaled,), N, path=BCAST)]
    ks.append(Kernel("aten.add", (scaled, t.b), (t.y,), N, path=BCAST))
    return kernel_chain(ks, [t.x, t.w, t.b], [t.y])


def _eager_gated_rmsnorm(t: _T) -> Cost:
    ks: list[Kernel] = []
    xf, zf = _upcast(t, t.x, ks), _upcast(t, t.z, ks)
    sz, u = t.tmp("silu_z"), t.tmp("u")
    ks += [Kernel("aten.silu", (zf,), (sz,), SILU[0] * N, SILU[1] * N),
           Kernel("aten.mul", (xf, sz), (u,), N)]
    r = _rms_stats(t, u, ks)
    un = t.tmp("un")
    ks.append(Kernel("aten.mul", (u, r), (un,), N, path=BCAST))
    _downcast_mul_w(t, un, ks)
    return kernel_chain(ks, [t.x, t.z, t.w], [t.y])


def _eager_rmsnorm_bwd(t: _T) -> Cost:
    """autograd's backward of ``_eager_rmsnorm`` (derivatives.yaml's formulas, node by node from the
    output): MulBackward of w * h (dh = dy * w; dw = (dy * h).sum over rows), ToCopyBackward of the
    downcast, MulBackward of xf * rstd (dxf = g * rstd; drstd = (g * xf).sum(-1)), RsqrtBackward
    (-0.5 * drstd * rstd.pow(3): three [B, L, 1] kernels), AddBackward of + eps (no kernel),
    MeanBackward (the [B, L, 1] gradient expanded over D and divided by D: one [B, L, D] kernel),
    PowBackward of xf^2 (dy * 2 * xf.pow(1): pow, mul, mul), the accumulation of xf's two gradients,
    ToCopyBackward of the upcast. 16 kernels (14 at fp32 storage, whose casts dispatch nothing). Saved
    from the forward and read back: xf (the fp32 upcast), h (the downcast normalized rows), rstd."""
    ks: list[Kernel] = []
    xf = t.x if t.fp32 else t.tmp("x_f32")
    h = t.tmp("xn" if t.fp32 else "xn_low", fp32=t.fp32)
    r = t.tmp("rstd_e", True)
    dh, dw_rows = t.tmp("dh", fp32=t.fp32), t.tmp("dw_rows", fp32=t.fp32)
    ks += [Kernel("aten.mul", (t.dy, t.w), (dh,), N, path=BCAST),
           Kernel("aten.mul", (t.dy, h), (dw_rows,), N),
           Kernel("aten.sum", (dw_rows,), (t.dw,), N, path=REDUCE)]
    g = dh
    if not t.fp32:
        g = t.tmp("dh_f32")
        ks.append(Kernel("aten._to_copy", (dh,), (g,), path=CAST))
    dxa, dr_rows, dr = t.tmp("dx_a"), t.tmp("drstd_rows"), t.tmp("drstd", True)
    r3, dr_h, dv = t.tmp("rstd_cubed", True), t.tmp("drstd_half", True), t.tmp("dvar", True)
    dsq, xp, x2, dxb = t.tmp("dsq"), t.tmp("x_pow1"), t.tmp("x_times2"), t.tmp("dx_b")
    ks += [Kernel("aten.mul", (g, xf), (dr_rows,), N),
           Kernel("aten.mul", (g, r), (dxa,), N, path=BCAST),
           Kernel("aten.sum", (dr_rows,), (dr,), N, path=REDUCE),
           Kernel("aten.pow", (r,), (r3,), 2 * R),
           Kernel("aten.mul", (dr,), (dr_h,), R),
           Kernel("aten.mul", (dr_h, r3), (dv,), R),
           # the [B, L, 1] gradient read through a stride-0 view: R elements from memory, N writes
           Kernel("aten.div", (dv,), (dsq,), N, path=BCAST),
           Kernel("aten.pow", (xf,), (xp,), 0),  # pow(1): a copy
           Kernel("aten.mul", (xp,), (x2,), N),
           Kernel("aten.mul", (dsq, x2), (dxb,), N),
           Kernel("aten.add", (dxa, dxb), (t.dx if t.fp32 else t.tmp("dx_f32"),), N)]
    if not t.fp32:
        ks.append(Kernel("aten._to_copy", (t.tmp("dx_f32"),), (t.dx,), path=CAST))
    # at 16-bit storage the backward reads the saved fp32 upcast in place of x (an intermediate)
    return kernel_chain(ks, [t.dy, t.x, t.w] if t.fp32 else [t.dy, t.w], [t.dx, t.dw])


_EAGER = {"rmsnorm": _eager_rmsnorm, "layernorm": _eager_layernorm, "gated_rmsnorm": _eager_gated_rmsnorm}
# autograd's backward of the eager compositions where it is modelled
_EAGER_BWD = {"rmsnorm": _eager_rmsnorm_bwd}


def _rule(kind: str, impl: str):
    def rule(mode: str, dtype: str) -> Cost:
        m = "fwd" if mode == "decode" else mode
        if impl == "torch_eager" and m != "fwd" and not (m == "bwd" and kind in _EAGER_BWD):
            raise ValueError(mode)
        if impl == "fused":
            c = _fused(kind, m, dtype)
        else:
            c = (_EAGER_BWD if m == "bwd" else _EAGER)[kind](_T(dtype))
        return c.subs({L: 1}) if mode == "decode" else c
    return rule


def _op(kind: str, summary: str, fused_summary: str) -> Op:
    return register(Op(
        name=kind,
        family="norm",
        summary=summary,
        dims=("B", "L", "D"),
        impls=(
            Impl("fused", fused_summary, _rule(kind, "fused"), ("fwd", "bwd", "decode")),
            Impl("torch_eager", "unfused PyTorch ops of the reference, each materializing its output",
                 _rule(kind, "torch_eager"), ("fwd", "bwd", "decode") if kind in _EAGER_BWD else ("fwd", "decode")),
        ),
        default_impl="fused",
        reference=f"ssmbench.analytic.ops.norm.ref:{kind}_ref",
    ))


RMSNORM = _op("rmsnorm", "y = x * rsqrt(mean(x^2) + eps) * w over the last dim",
              "one row-per-program kernel (Triton rmsnorm / apex), rstd saved for backward")
LAYERNORM = _op("layernorm", "y = (x - mean) * rsqrt(var + eps) * w + b over the last dim",
                "one row-per-program kernel (Triton layer_norm_fn / apex / F.layer_norm), mean and rstd saved")
GATED_RMSNORM = _op("gated_rmsnorm", "y = rmsnorm(x * silu(z)) * w (Mamba-2 RMSNormGated, norm_before_gate=False)",
                    "one kernel (mamba-ssm layernorm_gated rmsnorm_fn with z), rstd saved for backward")

