"""Mamba-2 SSD (Dao & Gu 2024): ``ssd`` maps x [B, L, H, P], dt [B, L, H], A [H], B, C [B, L, G, N],
D, dt_bias [H] to y [B, L, H, P] and the final state [B, H, P, N] (fp32), through
  dt = softplus(dt + dt_bias),  h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T,  y_t = h_t C_t + D x_t
(h_0 = 0; per head, B_t and C_t of the head's group). No z gate: Mamba-2 gates in ``gated_rmsnorm``.
Stage definitions, the causal-triangle convention and the FLOP terms are in ``stages.py``.

Compulsory bytes: read x, dt, B, C (e) and A, D, dt_bias (fp32, weights); write y (e) and the final
state (fp32, class state). Backward: read dout, x, dt, B, C and the parameters; write dx, ddt, dB,
dC (e) and dA, dD, ddt_bias (fp32). Decode (one token): read x_t [B, H, P], dt_t [B, H], B_t, C_t
[B, G, N] and the parameters, the state [B, H, P, N] fp32; write y_t and the state. The chunked
decode rule takes ``state_dtype`` (registry ``Impl.storage``): selective_state_update loads and stores
the state at its cache tensor's dtype (computing in fp32), and mamba-ssm allocates that cache in the
model dtype (``allocate_inference_cache``); fp32 is what the measured decode cases use.

Implementations:
- ``chunked``: mamba-ssm's Triton path, the sum of the five stage costs (``ssd_chunk_cumsum`` +
  ``ssd_bmm`` + ``ssd_chunk_state`` + ``ssd_state_passing`` + ``ssd_chunk_scan``), re-split so that
  what the stages pass to each other (dt_out, dA_cumsum, CB, chunk states, entering states) is extra
  traffic. 5 launches. Decode: mamba-ssm's Triton ``selective_state_update`` with per-head A and dt
  (TIE_HDIM): one launch; per (b, h) dt + bias, softplus, exp(A dt) (3 vector, 3 transc.), per
  (b, h, n) B dt (1), per state element state dA + dB x (3) and the C contraction (2), per
  (b, h, p) D x (2). Backward (below).
- ``quadratic``: the masked attention-like form in PyTorch (``ref.ssd_quadratic_ref``), fp32
  throughout (tensor FLOPs in the fp32 entry): dt prep and its transpose to [B, H, L], dA, cumsum
  over L; segment sums, exp and the causal mask over [B, H, L, L] (the bool mask built per call:
  ones, triu; masked_fill_); C, B, x permuted and cast ([B, G, L, N], [B, H, L, P]);
  CB = C B^T [B, G, L, L] (bmm); M = decay * CB * dt; y = M x (bmm); D x; y cast back; the final
  state as (decay-to-end * dt * B)^T x (3 launches on [B, H, L], B scaled per head [B, H, L, N],
  one bmm). 25 launches. FLOPs are the algorithm's: exactly the chunked stage terms at C = L without
  the inter-chunk ones (cumsum, bmm, chunk-state, intra-chunk scan with D), even though PyTorch
  computes all L^2 entries of the masked products (the tests take FlopCounterMode's full count
  minus the upper triangle).
- ``recurrent``: the per-step recurrence in PyTorch (``ref.ssd_recurrent_ref``): dt prep,
  exp(dt A), dt x vectorized; per step 5 launches on [B, H, P, N] (x_t dt B_t outer product, decay,
  add, times C_t, sum over N); stack, + D x, cast. Vector FLOPs only: per (b, l, h) 3 + 3 transc.,
  per (b, l, h, p) 3, per (b, l, h, p, n) 5. Decode (``ref.ssd_step_ref``): one such step with
  the dt prep, the state read from and copied back to the cache (13 launches, 14 unless fp32).

What equals what (tests/test_ops_ssm_ssd.py checks both symbolically):
- chunked(C = L) = quadratic + state_passing(C = L) + the chunk-scan inter term at C = L: with one
  chunk the kernels still pass the (zero) state through and multiply C by it: 2 B L H N P tensor,
  B L H P + 2 B H P N vector, B L H + B H transcendentals. Nothing else differs, by construction
  (the quadratic rule is those stage terms evaluated at C = L). The engines differ for 16-bit
  storage (the PyTorch quadratic form multiplies in fp32).
- chunked(C = 1) vs recurrent: the same mathematics (h_t = a h_{t-1} + x (dt B)^T, y = C h), but
  not the same count. chunked(1) = recurrent + B L H (P N + 2P + N + 5) + 2 B L G N FLOPs and
  + 3 B L H transcendentals: the chunk state x (dt B)^T is a k = 1 matmul counted 2 P N (P N of it
  adds onto a zero accumulator) and then added into the decayed state in a separate pass, where the
  recurrence folds it in (3 P N against 4 P N); the output is formed from the entering state plus a
  diagonal term C_t . B_t (bmm, 2N per group) * dt * x (2P + 3, and its exp) where the recurrence
  contracts the updated state (2 P N both); the entering-state output is scaled by exp(dA) (P, one
  exp); and the chunk-state and state-passing decays are exps of their own (2 more).

Backward (``chunked`` only; ssd_combined ``_mamba_chunk_scan_combined_bwd``), one launch per line:
dt.clone(); recompute stages 1-4 (state passing writing fp32 states); ``_chunk_scan_bwd_dstates``
(2 B L H P N tensor; C scaled by exp(dA_cs) per (l, n), one exp per (b, l, h)); ``_state_passing_bwd``
(4 vector per state element and chunk; writes dstates and the states cast to e, ddA per 64-element
block) and the sum of those blocks; zero-fill of ddt; ``_chunk_scan_chunk_state_bwd_dx``
(2 B L H N P + B H L (C + 1) P tensor; 2 vector + 1 exp per triangle entry; 8 vector per
(b, l, h, p), 1 + 1 exp per (b, l, h)); dD partial sum and cast (2); ``_chunk_state_bwd_db`` (2 B L H P N
tensor; 3 per (b, l, h, n), 2 + 1 exp per (b, l, h)); ``_chunk_scan_bwd_dC`` (2 B L H P N; 3 per
(b, l, h, n), 1 exp per (b, l, h)); ``_chunk_scan_bwd_dcb`` (B H L (C + 1) P; 3 + 1 exp per
entry); dB, dC and dCB are written per head in fp32 and reduced over the H/G heads of a group (one
launch each); two ``_bmm_chunk_bwd`` (2 B L G C N each; dB, dC written at e); ddA bookkeeping (the
chunk-boundary add, flip / cumsum / flip: 4); ``_chunk_scan_bwd_ddAcs_stable`` (B H L (C + 1) P;
4 + 1 exp per entry); two adds of ddA; zero-fills of dA, ddt_bias; ``_chunk_cumsum_bwd`` (10 vector +
3 transc. per (b, l, h)). Coarser than the forward: the per-head partial buffers are assumed from the
wrapper's shapes, and the small ddA / dD reductions are counted by their main tensors only.

Not counted: seq_idx / varlen handling, initial states, dt clamping, autotuning runs.
"""

from __future__ import annotations

import sympy as sp

from ...conventions import SOFTPLUS, nbytes
from ...cost import Cost
from ...registry import Impl, Op, divisible, register
from ...symbols import B, C, G, H, L, N, P
from ..common.kernels import Kernel, Tensor, kernel_chain, with_io
from . import stages as st

FP32 = 4


def _io(e: int):
    t = st.tensors(e)
    return t, [t["x"], t["dt"], t["A"], t["B"], t["C"], t["D"], t["dt_bias"]], [t["y"], t["final_state"]]


def _chunked_fwd(dtype: str) -> Cost:
    total = (st.cumsum_cost(dtype) + st.bmm_cost(dtype) + st.chunk_state_cost(dtype)
             + st.state_passing_cost(dtype) + st.chunk_scan_cost(dtype))
    _, ins, outs = _io(nbytes(dtype))
    return with_io(total, ins, outs)


def _decode_tensors(e: int, s: int = FP32):
    """One token's tensors; ``s``: bytes per state element (fp32 as the measured kernels keep it)."""
    return {
        "x": Tensor("x_t", "activations", B * H * P, e), "dt": Tensor("dt_t", "activations", B * H, e),
        "B": Tensor("B_t", "activations", B * G * N, e), "C": Tensor("C_t", "activations", B * G * N, e),
        "A": Tensor("A", "weights", H, FP32), "D": Tensor("D", "weights", H, FP32),
        "dt_bias": Tensor("dt_bias", "weights", H, FP32),
        "s": Tensor("state", "state", B * H * P * N, s), "s_new": Tensor("state_new", "state", B * H * P * N, s),
        "y": Tensor("y_t", "activations", B * H * P, e),
    }


def _chunked_decode(dtype: str, state_dtype: str = "fp32") -> Cost:
    t = _decode_tensors(nbytes(dtype), nbytes(state_dtype))
    ins = [t[k] for k in ("s", "x", "dt", "A", "B", "C", "D", "dt_bias")]
    k = Kernel("selective_state_update (TIE_HDIM)", tuple(ins), (t["s_new"], t["y"]),
               (2 + SOFTPLUS[0]) * B * H + B * H * N + 5 * B * H * P * N + 2 * B * H * P,
               (SOFTPLUS[1] + 1) * B * H, working_set=4 * 512 * FP32)
    return kernel_chain([k], ins, [t["y"], t["s_new"]], stream_working_sets=False)


def _chunked(mode: str, dtype: str, state_dtype: str = "fp32") -> Cost:
    if mode == "fwd":
        return _chunked_fwd(dtype)
    if mode == "decode":
        return _chunked_decode(dtype, state_dtype)
    if mode == "bwd":
        from .bwd import chunked_bwd
        return chunked_bwd(dtype)
    raise ValueError(mode)


def quadratic_flops() -> Cost:
    """The quadratic form's FLOPs: the chunked stage terms at C = L minus the inter-chunk ones."""
    at_l = {C: L}
    return st.flops(st.cumsum_flops(L), st.bmm_flops("fp32", L), st.chunk_state_flops("fp32"),
                    st.scan_intra_flops("fp32", L)).subs(at_l)


def _quadratic(mode: str, dtype: str) -> Cost:
    if mode != "fwd":
        raise ValueError(mode)
    e = nbytes(dtype)
    t, ins, outs = _io(e)
    f = lambda name, n: Tensor(name, "intermediates", n, FP32)  # noqa: E731
    blh, bhll, blhp = B * L * H, B * H * L * L, B * L * H * P
    d0, dsp, d = f("dt_plus_bias", blh), f("dt_sp", blh), f("dt_BHL", blh)
    da, cs = f("dA", blh), f("dA_cumsum", blh)
    seg, ex, dec = f("segsum", bhll), f("exp_segsum", bhll), f("decay", bhll)
    ones, mask = Tensor("ones_LL", "intermediates", L * L, 1), Tensor("tril_mask", "intermediates", L * L, 1)
    cg, bg = f("C_g", B * G * L * N), f("B_g", B * G * L * N)
    cb = f("CB", B * G * L * L)
    m1, m2 = f("decay_CB", bhll), f("M", bhll)
    xh, y0, xd, y1 = f("x_h", blhp), f("Mx", blhp), f("x_D", blhp), f("y_plus_xD", blhp)
    sub, ex2, w = f("cs_last_minus_cs", blh), f("decay_to_end", blh), f("w", blh)
    bw = f("B_scaled", B * L * H * N)
    launches = [
        Kernel("dt + dt_bias", (t["dt"], t["dt_bias"]), (d0,)),
        Kernel("softplus", (d0,), (dsp,)),
        Kernel("transpose to [B, H, L] (contiguous)", (dsp,), (d,)),
        Kernel("dt * A", (d, t["A"]), (da,)),
        Kernel("cumsum over L", (da,), (cs,)),
        Kernel("segment sums [B, H, L, L]", (cs,), (seg,)),
        Kernel("ones(L, L)", (), (ones,)),
        Kernel("triu(1)", (ones,), (mask,)),
        Kernel("exp", (seg,), (ex,)),
        Kernel("masked_fill_(upper, 0)", (ex, mask), (dec,)),
        Kernel("C permute + cast", (t["C"],), (cg,)),
        Kernel("B permute + cast", (t["B"],), (bg,)),
        Kernel("CB = C B^T (bmm)", (cg, bg), (cb,)),
        Kernel("decay * CB", (dec, cb), (m1,)),
        Kernel("* dt", (m1, d), (m2,)),
        Kernel("x permute + cast", (t["x"],), (xh,)),
        Kernel("y = M x (bmm)", (m2, xh), (y0,)),
        Kernel("x * D", (xh, t["D"]), (xd,)),
        Kernel("y + x D", (y0, xd), (y1,)),
        Kernel("y permute + cast", (y1,), (t["y"],)),
        Kernel("cs_last - cs", (cs,), (sub,)),
        Kernel("exp", (sub,), (ex2,)),
        Kernel("* dt", (ex2, d), (w,)),
        Kernel("B * w per head", (bg, w), (bw,)),
        Kernel("final = x^T (B w) (bmm)", (xh, bw), (t["final_state"],)),
    ]
    c = kernel_chain(launches, ins, outs, stream_working_sets=False)
    q = quadratic_flops()
    return Cost(tensor={k: sp.expand(v) for k, v in q.tensor.items()}, vector=sp.expand(q.vector),
                transcendental=sp.expand(q.transcendental), read=c.read, write=c.write,
                extra_read=c.extra_read, extra_write=c.extra_write, launches=c.launches, working_set=0)


def _recurrent(mode: str, dtype: str) -> Cost:
    e = nbytes(dtype)
    f = lambda name, n: Tensor(name, "intermediates", n, FP32)  # noqa: E731
    blh, blhp, bhpn = B * L * H, B * L * H * P, B * H * P * N
    if mode == "fwd":
        t, ins, outs = _io(e)
        h = Tensor("final_state", "state", bhpn, FP32)  # written every step; the last write is the output
        h0 = Tensor("h0", "state", bhpn, FP32)
        x32 = f("x_fp32", blhp) if e != FP32 else t["x"]
        b32 = f("B_fp32", B * L * G * N) if e != FP32 else t["B"]
        c32 = f("C_fp32", B * L * G * N) if e != FP32 else t["C"]
        casts = [Kernel(f"{s.name}.float()", (t[k],), (s,)) for k, s in (("x", x32), ("B", b32), ("C", c32))
                 if e != FP32]
        d0, d, da0, da, dtx = f("dt_plus_bias", blh), f("dt_sp", blh), f("dt_A", blh), f("dA", blh), f("dt_x", blhp)
        outer, hd, hc = f("outer", bhpn), f("h_decayed", bhpn), f("h_C", bhpn)
        ys, yst, yd = f("ys", blhp), f("y_stacked", blhp), f("x_D", blhp)
        y1 = f("y_fp32", blhp) if e != FP32 else t["y"]
        bhpnl = B * L * H * P * N
        launches = casts + [
            Kernel("dt + dt_bias", (t["dt"], t["dt_bias"]), (d0,), blh),
            Kernel("softplus", (d0,), (d,), SOFTPLUS[0] * blh, SOFTPLUS[1] * blh),
            Kernel("dt * A", (d, t["A"]), (da0,), blh),
            Kernel("exp", (da0,), (da,), 0, blh),
            Kernel("dt * x", (d, x32), (dtx,), blhp),
            Kernel("h = zeros", (), (h0,)),
            Kernel("(dt x)_t B_t^T", (dtx.per(L), b32.per(L)), (outer,), bhpnl / L, count=L),
            Kernel("h * dA_t", (h, da.per(L)), (hd,), bhpnl / L, count=L),
            Kernel("+ outer", (hd, outer), (h,), bhpnl / L, count=L),
            Kernel("h * C_t", (h, c32.per(L)), (hc,), bhpnl / L, count=L),
            Kernel("sum over N", (hc,), (ys.per(L),), bhpnl / L, count=L),
            Kernel("torch.stack(ys)", (ys,), (yst,)),
            Kernel("x * D", (x32, t["D"]), (yd,), blhp),
            Kernel("y + x D", (yst, yd), (y1,), blhp),
        ]
        if e != FP32:
            launches.append(Kernel("y.to(dtype)", (y1,), (t["y"],)))
        return kernel_chain(launches, ins, outs, stream_working_sets=False)
    if mode == "decode":
        t = _decode_tensors(e)
        bh, bhp = B * H, B * H * P
        d0, d, da0, da, dtx = f("dt_plus_bias", bh), f("dt_sp", bh), f("dt_A", bh), f("dA", bh), f("dt_x", bhp)
        outer, hd, hn, hc = f("outer", bhpn), f("h_decayed", bhpn), f("h_next", bhpn), f("h_C", bhpn)
        y0, xd = f("y", bhp), f("x_D", bhp)
        y1 = f("y_fp32", bhp) if e != FP32 else t["y"]
        launches = [
            Kernel("dt + dt_bias", (t["dt"], t["dt_bias"]), (d0,), bh),
            Kernel("softplus", (d0,), (d,), SOFTPLUS[0] * bh, SOFTPLUS[1] * bh),
            Kernel("dt * A", (d, t["A"]), (da0,), bh),
            Kernel("exp", (da0,), (da,), 0, bh),
            Kernel("dt * x", (d, t["x"]), (dtx,), bhp),
            Kernel("(dt x) B^T", (dtx, t["B"]), (outer,), bhpn),
            Kernel("state * dA", (t["s"], da), (hd,), bhpn),
            Kernel("+ outer", (hd, outer), (hn,), bhpn),
            Kernel("state.copy_", (hn,), (t["s_new"],)),
            Kernel("state * C", (t["s_new"], t["C"]), (hc,), bhpn),
            Kernel("sum over N", (hc,), (y0,), bhpn),
            Kernel("x * D", (t["x"], t["D"]), (xd,), bhp),
            Kernel("y + x D", (y0, xd), (y1,), bhp),
        ]
        if e != FP32:
            launches.append(Kernel("y.to(dtype)", (y1,), (t["y"],)))
        ins = [t[k] for k in ("s", "x", "dt", "A", "B", "C", "D", "dt_bias")]
        return kernel_chain(launches, ins, [t["y"], t["s_new"]], stream_working_sets=False)
    raise ValueError(mode)


SSD = register(Op(
    name="ssd",
    family="ssd",
    summary="Mamba-2 SSD: y and the final state from x, dt, A, B, C, D (dt softplus); decode = one-token update",
    dims=("B", "L", "H", "P", "N", "G", "C"),
    impls=(
        Impl("chunked", "mamba-ssm Triton chunked SSD: the five stage kernels; backward recomputes "
             "stages 1-4; decode = selective_state_update", _chunked, ("fwd", "bwd", "decode"),
             storage=("state_dtype",)),
        Impl("quadratic", "the masked attention-like L x L form in PyTorch (fp32), [B, H, L, L] "
             "materialized", _quadratic, ("fwd",)),
        Impl("recurrent", "the per-step recurrence in PyTorch, state in device memory every step; "
             "decode = one step", _recurrent, ("fwd", "decode")),
    ),
    default_impl="chunked",
    constraints=(divisible("L", "C"), divisible("H", "G")),
    reference="ssmbench.analytic.ops.ssd.ref:ssd_chunked_ref",
))
