"""conv1d and s4: cost formulas over small dimensions, FLOP-counter cross-checks, references."""

import math

import pytest
from ssmbench.analytic.registry import AnalyticError, cost

B, L, E, K, N = 2, 16, 3, 4, 5


def c(op, dims, impl, mode, dtype="bf16"):
    return cost(op, dims, impl, mode, dtype)


# conv1d ------------------------------------------------------------------------------------------
CONV = dict(B=B, L=L, E=E, K=K)


@pytest.mark.parametrize("dtype,e", [("bf16", 2), ("fp32", 4)])
def test_conv1d_causal_fwd_formula(dtype, e):
    r = c("conv1d", CONV, "causal_conv1d", "fwd", dtype)
    assert r.vector == B * E * L * (2 * K + 3)
    assert r.transcendental == B * E * L
    assert r.read == {"activations": e * B * E * L, "weights": e * (E * K + E)}
    assert r.write == {"activations": e * B * E * L}
    assert r.executed_bytes == r.bytes  # every input read once, halo from shared memory
    assert r.launches == 1


@pytest.mark.parametrize("dtype,e", [("bf16", 2), ("fp32", 4)])
def test_conv1d_torch_conv_fwd_formula(dtype, e):
    r = c("conv1d", CONV, "torch_conv", "fwd", dtype)
    full = B * E * (L + K - 1)
    assert r.vector == (2 * K + 1) * full + 3 * B * E * L
    assert r.extra_write == {"intermediates": e * full}  # the [B, E, L + K - 1] conv output
    assert r.extra_read == {"intermediates": e * B * E * L}  # silu reads the slice
    assert r.launches == 2


def test_conv1d_bwd_formulas():
    fused = c("conv1d", CONV, "causal_conv1d", "bwd", "bf16")
    assert fused.vector == (6 * K + 8) * B * E * L + E * K + E  # + the two casts of dweight, dbias
    assert fused.launches == 5  # 2 zero-fills, kernel, 2 casts
    assert c("conv1d", CONV, "causal_conv1d", "bwd", "fp32").launches == 3
    eager = c("conv1d", CONV, "torch_conv", "bwd", "bf16")
    assert eager.launches == 6
    assert eager.tensor == {}


@pytest.mark.parametrize("dtype,e", [("bf16", 2), ("fp32", 4)])
def test_conv1d_decode_formulas(dtype, e):
    d = dict(B=B, E=E, K=K)
    r = c("conv1d", d, "causal_conv1d", "decode", dtype)
    assert r.read["state"] == e * B * E * (K - 1)
    assert r.write["state"] == e * B * E
    assert r.extra_write == {"state": e * B * E * (K - 1)}  # the shift of a length-K state
    assert r.vector == B * E * (2 * K + 3) and r.launches == 1
    t = c("conv1d", d, "torch_conv", "decode", dtype)
    assert t.launches == 7
    assert t.executed_bytes > r.executed_bytes


def test_conv1d_flop_counter():
    torch = pytest.importorskip("torch")
    from ssmbench.analytic.ops.conv1d.ref import conv1d_ref
    from torch.utils.flop_counter import FlopCounterMode
    x = torch.randn(B, E, L, dtype=torch.float64)
    w, b = torch.randn(E, K, dtype=torch.float64), torch.randn(E, dtype=torch.float64)
    with FlopCounterMode(display=False) as fc:
        conv1d_ref(x, w, b)
    r = c("conv1d", CONV, "torch_conv", "fwd")
    full = B * E * (L + K - 1)
    # FlopCounterMode counts the convolution's multiply-adds only: not the bias add, not silu.
    assert fc.get_total_flops() == r.vector - full - 3 * B * E * L


def test_conv1d_references_agree():
    torch = pytest.importorskip("torch")
    from ssmbench.analytic.ops.conv1d.ref import (
        conv1d_causal_ref,
        conv1d_ref,
        conv1d_update_ref,
    )
    torch.manual_seed(0)
    x = torch.randn(B, E, L, dtype=torch.float64)
    w, b = torch.randn(E, K, dtype=torch.float64), torch.randn(E, dtype=torch.float64)
    y = conv1d_ref(x, w, b)
    torch.testing.assert_close(conv1d_causal_ref(x, w, b), y, rtol=1e-12, atol=1e-12)
    state = torch.zeros(B, E, K, dtype=torch.float64)
    steps = torch.stack([conv1d_update_ref(x[:, :, t], state, w, b) for t in range(L)], dim=-1)
    torch.testing.assert_close(steps, y, rtol=1e-12, atol=1e-12)


# s4 ------------------------------------------------------------------------------------------------
S4 = dict(B=B, L=L, E=E, N=N)


def fft(n):
    return 2.5 * n * math.log2(n)


def test_s4_fft_formula():
    r = c("s4", S4, "fft", "fwd", "fp32")
    kernel_gen = 2 * E * N + 2 * E * N + E * N + 6 * E * N + 11 * E * N + 2 * E * N * L + 2 * E * N * L + 8 * E * N * L + E * L
    conv = (E + 2 * B * E) * fft(2 * L) + 6 * B * E * (L + 1) + 2 * B * E * L + 2 * B * E * L  # + irfft scale
    assert r.vector == pytest.approx(kernel_gen + conv, rel=1e-12)
    assert r.transcendental == 3 * E * N * L + 3 * E * N + E
    assert r.tensor == {}
    assert r.launches == 23 and c("s4", S4, "fft", "fwd", "bf16").launches == 25  # + cast in, cast out


def test_s4_recurrent_formula():
    r = c("s4", S4, "recurrent", "fwd", "fp32")
    assert r.vector == 18 * B * E * L * N + 3 * B * E * L + 16 * E * N
    # the state is read twice and written once per step in device memory
    assert r.extra_read["state"] == 16 * B * E * L * N
    assert r.extra_write["state"] == 8 * B * E * L * N + 8 * B * E * N
    assert r.launches == 7 * L + 7
    d = c("s4", dict(B=B, E=E, N=N), "recurrent", "decode", "fp32")
    assert d.read["state"] == d.write["state"] == 8 * B * E * N and d.launches == 7


def test_s4_fft_not_counted_by_flop_counter():
    """FlopCounterMode counts the Vandermonde einsum as a real bmm (2 E N L) and no FFT."""
    torch = pytest.importorskip("torch")
    from ssmbench.analytic.ops.s4.ref import s4_fft_ref
    from torch.utils.flop_counter import FlopCounterMode
    u, log_dt, A, C, D = _s4_inputs(torch)
    with FlopCounterMode(display=False) as fc:
        s4_fft_ref(u, log_dt, A, C, D)
    assert fc.get_total_flops() == 2 * E * N * L  # our rule: 8 E N L (complex multiply-adds) + FFTs


def _s4_inputs(torch):
    torch.manual_seed(0)
    f = torch.float64
    u = torch.randn(B, E, L, dtype=f)
    log_dt = torch.rand(E, dtype=f) * 2 - 4
    A = torch.complex(-torch.rand(E, N, dtype=f) - 0.1, torch.randn(E, N, dtype=f) * 3)
    C = torch.randn(E, N, dtype=torch.complex128)
    return u, log_dt, A, C, torch.randn(E, dtype=f)


def test_s4_fft_and_recurrent_agree():
    torch = pytest.importorskip("torch")
    from ssmbench.analytic.ops.s4.ref import (
        s4_discretize_ref,
        s4_fft_ref,
        s4_recurrent_ref,
        s4_step_ref,
    )
    u, log_dt, A, C, D = _s4_inputs(torch)
    y = s4_fft_ref(u, log_dt, A, C, D)
    torch.testing.assert_close(s4_recurrent_ref(u, log_dt, A, C, D), y, rtol=1e-10, atol=1e-10)
    abar, bbar = s4_discretize_ref(log_dt, A)
    h = torch.zeros(B, E, N, dtype=torch.complex128)
    ys = []
    for t in range(L):
        y_t, h = s4_step_ref(u[:, :, t], h, abar, bbar, C, D)
        ys.append(y_t)
    torch.testing.assert_close(torch.stack(ys, -1), y, rtol=1e-10, atol=1e-10)


def test_s4_modes():
    with pytest.raises(AnalyticError, match="no cost rule for mode 'bwd'"):
        c("s4", S4, "fft", "bwd")
    with pytest.raises(AnalyticError, match="no cost rule for mode 'decode'"):
        c("s4", S4, "fft", "decode")
