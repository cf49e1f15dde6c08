"""mamba3 backward: formulas of the SISO Triton backward, fwdbwd = fwd + bwd, bwd >= fwd, executed >=
compulsory, monotone in every dimension, and autograd's matmul FLOPs on the chunked reference."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ssmbench.analytic.registry import cost

B, L, H, P, N = 1, 128, 2, 4, 8
SISO = dict(B=B, L=L, H=H, P=P, N=N)
C = 64


def test_siso_bwd_formulas():
    r = cost("mamba3", SISO, "siso", "bwd", "bf16")
    blh, blhp, S = B * L * H, B * L * H * P, N // 4
    assert r.tensor == {"bf16": blh * (12 * N * P + 8 * C * (N + P) + 2 * P + 2)}
    assert r.launches == 12
    dqkv_v = blh * (9 * C + 4 * N + 11 * P + 4 * P * N / C + 10)
    rot_v = blh * (33.5 * N + 2)
    sums = 2 * blh * 1 + 2 * B * (L // C) * H * N  # dScale/dGamma partials (N < 64: one), bias partials
    assert r.vector == pytest.approx(9 * blhp + dqkv_v + B * H + rot_v + sums + 14 * blh + 13 * blh * S + blh)
    assert r.transcendental == pytest.approx(blhp + blh * (C + 2 + 1 / C) + blh * N + blh + 2 * blh * S)
    # compulsory: dO, V, Z read, dV, dZ written (bf16); Q, K [B, L, N] and their gradients
    assert r.read["activations"] == 2 * 3 * blhp + 2 * 2 * B * L * N + 4 * blh + 2 * blh + 4 * blh * S
    # the forward's saves for backward (Out_v, per-chunk states, DA_CS, DA_CS_SUM) are charged here
    saved = 2 * blhp + 2 * B * H * P * (L // C) * N + 4 * blh + 4 * B * H * (L // C)
    assert r.extra_write["intermediates"] >= saved


@pytest.mark.parametrize("impl,dims", [("siso", SISO), ("mimo", dict(SISO, M=4))])
def test_fwdbwd_is_fwd_plus_bwd(impl, dims):
    f, b, fb = (cost("mamba3", dims, impl, m, "bf16") for m in ("fwd", "bwd", "fwdbwd"))
    assert fb == f + b
    assert b.tensor["bf16"] >= f.tensor["bf16"] and b.vector >= f.vector
    for side in ("read", "write"):
        for cls, v in getattr(b, "extra_" + side).items():
            assert v >= 0, (side, cls)


def test_mimo_bwd_model():
    M = 4
    f = cost("mamba3", dict(SISO, M=M), "mimo", "fwd", "bf16")
    b = cost("mamba3", dict(SISO, M=M), "mimo", "bwd", "bf16")
    blh = B * L * H
    main = blh * (4 * M * N * P + 4 * 64 * M * N + 2 * 64 * M * P)
    assert b.tensor == {"bf16": 3 * main}  # recompute + the two gradients of each product
    assert b.launches == 2 and f.launches == 6
    assert b.write["weights"] >= 3 * 4 * H * M * P  # d psi, d zeta, d phi


DIMS = st.fixed_dictionaries(dict(B=st.integers(1, 4), L=st.sampled_from([64, 128, 256]), H=st.integers(1, 8),
                                  P=st.sampled_from([16, 32, 64]), N=st.sampled_from([16, 64, 128])))


@settings(max_examples=30, deadline=None)
@given(DIMS, st.sampled_from(["B", "L", "H", "P", "N"]))
def test_siso_bwd_monotone(d, grow):
    a = cost("mamba3", d, "siso", "bwd", "bf16")
    b = cost("mamba3", dict(d, **{grow: d[grow] * 2}), "siso", "bwd", "bf16")
    assert b.tensor["bf16"] > a.tensor["bf16"] and b.vector > a.vector
    ta = sum(a.read.values()) + sum(a.write.values()) + sum(a.extra_read.values()) + sum(a.extra_write.values())
    tb = sum(b.read.values()) + sum(b.write.values()) + sum(b.extra_read.values()) + sum(b.extra_write.values())
    assert tb > ta


def _inputs(torch):
    torch.manual_seed(0)
    f = torch.float64
    dt = torch.rand(B, H, L, dtype=f) * 0.2 + 0.02
    xs = (torch.randn(B, L, 1, N, dtype=f), torch.randn(B, L, 1, N, dtype=f), torch.randn(B, L, H, P, dtype=f),
          -(torch.rand(B, H, L, dtype=f) + 0.1) * dt, dt, torch.randn(B, H, L, dtype=f),
          torch.randn(H, 1, N, dtype=f) * 0.1 + 1, torch.randn(H, 1, N, dtype=f) * 0.1 + 1,
          torch.randn(B, L, H, N // 4, dtype=f), torch.randn(H, dtype=f), torch.randn(B, L, H, P, dtype=f))
    return [x.requires_grad_(True) for x in xs]


def test_flop_counter_backward():
    """Autograd on the chunked reference forms each product's gradients once (2x the forward's
    matmuls) minus three it never needs: the ones-vector of the q.k dot (2 N per token), the initial
    (zero) state's gradient in the first chunk (2 C P N per (b, h)) and the last chunk's state update,
    whose result the loss does not use (4 C P N). The Triton backward instead recomputes V dO^T twice
    more and K Q^T twice (4 C (N + P) per token), forms Q S^T and K dS^T again for dADT (4 P N), and
    runs the dQK / dD reductions as ones-vector dots (2 P + 2) but the q.k gradient on the vector
    units (-4 N): the rule is autograd's count plus exactly these."""
    torch = pytest.importorskip("torch")
    from ssmbench.analytic.ops.mamba3.ref import mamba3_siso_chunked_ref
    from torch.utils.flop_counter import FlopCounterMode
    args = _inputs(torch)
    y, _ = mamba3_siso_chunked_ref(*args)
    with FlopCounterMode(display=False) as fc:
        y.backward(torch.randn_like(y))
    autograd = fc.get_total_flops()
    fwd = cost("mamba3", SISO, "siso", "fwd", "bf16").tensor["bf16"]
    bwd = cost("mamba3", SISO, "siso", "bwd", "bf16").tensor["bf16"]
    blh, bh = B * L * H, B * H
    assert autograd == 2 * fwd - 2 * N * blh - 6 * C * P * N * bh
    assert bwd == autograd + 2 * N * blh + 6 * C * P * N * bh + blh * (4 * C * (N + P) + 4 * P * N + 2 * P + 2 - 4 * N)
