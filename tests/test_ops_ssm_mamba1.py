"""mamba1_scan: cost formulas, FLOP-counter cross-check of the naive scan, reference agreement."""

import pytest
from ssmbench.analytic.registry import cost

B, L, E, N = 2, 16, 3, 4
DIMS = dict(B=B, L=L, E=E, N=N)


def c(impl, mode, dtype="bf16", dims=DIMS):
    return cost("mamba1_scan", dims, impl, mode, dtype)


@pytest.mark.parametrize("L_,chunks,padded", [(16, 1, 128), (196, 1, 256), (1024, 1, 1024), (2048, 1, 2048),
                                               (2049, 2, 4096), (3136, 2, 4096), (4096, 2, 4096)])
def test_fused_fwd_formula(L_, chunks, padded):
    r = c("fused", "fwd", "bf16", dict(B=B, L=L_, E=E, N=N))
    bel = B * E * L_
    pel, peln = B * E * padded, B * E * padded * N  # whole chunks of the kernel's items are computed
    assert r.vector == 10 * peln + 8 * pel  # dt A, B dt u, two scan combines (3 each), C h FMA
    assert r.transcendental == peln + 3 * pel  # exp per element; softplus (2) and silu (1) per (b, e, l)
    assert r.tensor == {}
    assert r.read == {"activations": 2 * (3 * bel + 2 * B * N * L_), "weights": 4 * E * N + 8 * E}
    assert r.write == {"activations": 2 * bel}
    # pre-gate out (kept for backward) and the float2 chunk states of 2048-step chunks
    assert r.extra_write == {"intermediates": 2 * bel, "state": 8 * B * E * chunks * N}
    assert r.launches == 1


def test_fused_bwd_formula():
    r = c("fused", "bwd", "bf16")
    pel, peln = B * E * 128, B * E * 128 * N  # L = 16 runs one chunk of 32 threads x 4 items
    assert r.vector == 29 * peln + 20 * pel  # the recomputed forward scan is in the 29
    assert r.transcendental == peln + 4 * pel
    assert r.launches == 8 and c("fused", "bwd", "fp32").launches == 6  # 5 fills + kernel (+ 2 casts)
    assert r.extra_read["state"] == 8 * B * E * N  # the chunk state it restarts from


@pytest.mark.parametrize("dtype,e", [("bf16", 2), ("fp32", 4)])
def test_decode_formulas(dtype, e):
    d = dict(B=B, E=E, N=N)
    f = c("fused", "decode", dtype, d)
    assert f.read["state"] == f.write["state"] == 4 * B * E * N  # fp32 state, read and written once
    assert f.executed_bytes == f.bytes and f.launches == 1
    assert f.vector == 7 * B * E * N + 9 * B * E
    n = c("naive", "decode", dtype, d)
    assert n.launches == (16 if e == 2 else 14)
    assert n.tensor == {"fp32" if e == 4 else "bf16": 2 * B * E * N}
    assert n.executed_bytes > f.executed_bytes


def test_naive_and_loop_formulas():
    bel, beln = B * E * L, B * E * L * N
    n = c("naive", "fwd", "fp32")
    assert n.tensor == {"fp32": 2 * beln}
    assert n.vector == 4 * beln + 9 * bel
    assert n.launches == 3 * L + 12 and c("naive", "fwd", "bf16").launches == 3 * L + 17
    # deltaA and deltaB_u written as [B, E, L, N] fp32 (plus the dt A temporary), read back per step
    assert n.extra_write["intermediates"] >= 3 * 4 * beln
    lp = c("loop", "fwd", "fp32")
    assert lp.vector == 6 * beln + 9 * bel and lp.tensor == {}
    assert lp.launches == 7 * L + 9
    assert lp.extra_write["state"] == 4 * beln + 4 * B * E * N  # the state written every step (+ zeros)


def test_naive_flop_counter():
    torch = pytest.importorskip("torch")
    from ssmbench.analytic.ops.mamba1.ref import mamba1_scan_ref
    from torch.utils.flop_counter import FlopCounterMode
    args = _inputs(torch)
    with FlopCounterMode(display=False) as fc:
        mamba1_scan_ref(*args)
    assert fc.get_total_flops() == c("naive", "fwd", "fp32").tensor["fp32"]


def _inputs(torch, L_=L):
    torch.manual_seed(0)
    f = torch.float64
    u, delta, z = (torch.randn(B, E, L_, dtype=f) for _ in range(3))
    A = -torch.rand(E, N, dtype=f) - 0.1
    Bm, Cm = torch.randn(B, N, L_, dtype=f), torch.randn(B, N, L_, dtype=f)
    return u, delta, A, Bm, Cm, torch.randn(E, dtype=f), z, torch.randn(E, dtype=f) * 0.1


@pytest.mark.parametrize("chunk", [1, 4, 5, 2048])
def test_fused_semantics_match_naive(chunk):
    """The fused kernel's chunked associative scan (carried prefix) equals selective_scan_ref."""
    torch = pytest.importorskip("torch")
    from ssmbench.analytic.ops.mamba1.ref import (
        mamba1_scan_chunked_ref,
        mamba1_scan_loop_ref,
        mamba1_scan_ref,
    )
    args = _inputs(torch, 13)
    y, h = mamba1_scan_ref(*args)
    yl, hl = mamba1_scan_loop_ref(*args)
    yc, states = mamba1_scan_chunked_ref(*args, chunk=chunk)
    torch.testing.assert_close(yl, y, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(hl, h, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(yc, y, rtol=1e-12, atol=1e-12)
    assert states.shape[2] == -(-13 // chunk)
    torch.testing.assert_close(states[:, :, -1, :, 1], h, rtol=1e-12, atol=1e-12)  # last h = final state


def test_decode_steps_match_scan():
    torch = pytest.importorskip("torch")
    from ssmbench.analytic.ops.mamba1.ref import mamba1_scan_ref, mamba1_step_ref
    u, delta, A, Bm, Cm, D, z, db = _inputs(torch)
    y, h = mamba1_scan_ref(u, delta, A, Bm, Cm, D, z, db)
    state = torch.zeros(B, E, N, dtype=torch.float64)
    steps = [mamba1_step_ref(state, u[:, :, t], delta[:, :, t], A, Bm[:, :, t], Cm[:, :, t], D, z[:, :, t], db)
             for t in range(L)]
    torch.testing.assert_close(torch.stack(steps, -1), y, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(state, h, rtol=1e-12, atol=1e-12)
