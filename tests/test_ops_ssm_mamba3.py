"""mamba3: per-token formulas, FLOP-counter cross-checks of the kernel-shaped references, reference
agreement (chunked vs recurrent vs decode steps), SISO's independence of M, MIMO constraints."""

import pytest
from ssmbench.analytic.registry import AnalyticError, cost

B, L, H, P, N = 1, 128, 2, 4, 8
SISO = dict(B=B, L=L, H=H, P=P, N=N)


def test_siso_formulas():
    r = cost("mamba3", SISO, "siso", "fwd", "bf16")
    blh, c = B * L * H, 64
    assert r.tensor == {"bf16": blh * (4 * N * P + 2 * N + 2 * c * (N + P))}
    assert r.transcendental == blh * (N + P + c + 4 + 1 / c) + B * L * H * (N // 4)  # + angle_dt's tanh
    assert r.launches == 2
    # rotated q, k written and read back (e), q.k / scale / gamma (fp32) written, q.k read back
    assert r.extra_write["intermediates"] == 2 * 2 * blh * N + 3 * 4 * blh + 4 * B * L * H * (N // 4)
    assert r.write == {"activations": 2 * blh * P, "state": 4 * B * H * P * N + 4 * B * H * (N // 4)}


@pytest.mark.parametrize("M", [1, 2, 4, 8])
def test_mimo_formulas(M):
    r = cost("mamba3", dict(SISO, M=M), "mimo", "fwd", "bf16")
    blh, f = B * L * H, 64
    assert r.tensor == {"bf16": blh * (4 * M * N * P + 4 * f * M * N + 2 * f * M * P)}
    assert r.launches == 6
    assert r.extra_write["intermediates"] >= 4 * blh * (64 // M)  # the [c, c] segment sums per chunk


def test_siso_does_not_depend_on_M():
    a = cost("mamba3", SISO, "siso", "fwd", "bf16")
    b = cost("mamba3", dict(SISO, M=4), "siso", "fwd", "bf16")
    assert a == b
    with pytest.raises(AnalyticError, match="needs dimension"):
        cost("mamba3", SISO, "mimo", "fwd", "bf16")


def test_mimo_constraints():
    with pytest.raises(AnalyticError, match="must divide 64"):
        cost("mamba3", dict(SISO, M=3), "mimo", "fwd", "bf16")
    with pytest.raises(AnalyticError, match="divisible by 64"):
        cost("mamba3", dict(SISO, L=100, M=4), "mimo", "fwd", "bf16")


def test_decode():
    d = dict(B=B, H=H, P=P, N=N)
    s = cost("mamba3", d, "siso", "decode", "bf16")
    assert s.read["state"] >= 4 * B * H * P * N and s.write["state"] >= 4 * B * H * P * N
    # one fused Triton mamba3_siso_step_kernel (mamba_ssm/ops/triton/mamba3/mamba3_siso_step.py)
    assert s.launches == 1 and s.tensor == {}
    assert s.vector == B * H * (11.5 * N + 7 * P * N + 8 * P + 7)
    assert s.transcendental == B * H * (1.5 * N + P + 2)
    m = cost("mamba3", dict(d, M=4), "mimo", "decode", "bf16")
    assert m.launches == 5 and m.tensor == {}  # rotary, 3 projection copies, CuTe step
    assert m.vector == B * H * (1.5 * N + 20 * N + 25 * P * N + 48 * P + 2 * P + 5)


def _inputs(torch, M, L_=L):
    torch.manual_seed(0)
    f = torch.float64
    S = N // 4
    dt = torch.rand(B, H, L_, dtype=f) * 0.2 + 0.02
    return (torch.randn(B, L_, M, N, dtype=f), torch.randn(B, L_, M, N, dtype=f), torch.randn(B, L_, H, P, dtype=f),
            -(torch.rand(B, H, L_, dtype=f) + 0.1) * dt, dt, torch.randn(B, H, L_, dtype=f),
            torch.randn(H, M, N, dtype=f) * 0.1 + 1, torch.randn(H, M, N, dtype=f) * 0.1 + 1,
            torch.randn(B, L_, H, S, dtype=f), torch.randn(H, dtype=f), torch.randn(B, L_, H, P, dtype=f))


def test_flop_counter_matches_tensor_flops():
    torch = pytest.importorskip("torch")
    from ssmbench.analytic.ops.mamba3.ref import (
        mamba3_mimo_chunked_ref,
        mamba3_siso_chunked_ref,
    )
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as fc:
        mamba3_siso_chunked_ref(*_inputs(torch, 1))
    assert fc.get_total_flops() == cost("mamba3", SISO, "siso", "fwd", "bf16").tensor["bf16"]
    M = 4
    proj = [torch.randn(H, M, P, dtype=torch.float64) for _ in range(3)]
    with FlopCounterMode(display=False) as fc:
        mamba3_mimo_chunked_ref(*_inputs(torch, M), *proj)
    assert fc.get_total_flops() == cost("mamba3", dict(SISO, M=M), "mimo", "fwd", "bf16").tensor["bf16"]


@pytest.mark.parametrize("M", [1, 2])
def test_references_agree(M):
    torch = pytest.importorskip("torch")
    from ssmbench.analytic.ops.mamba3.ref import (
        mamba3_chunked_ref,
        mamba3_mimo_chunked_ref,
        mamba3_recurrent_ref,
        mamba3_siso_chunked_ref,
        mamba3_step_ref,
    )
    L_ = 24
    Q, K, V, ADT, DT, Trap, Qb, Kb, Ang, D, Z = args = _inputs(torch, M, L_)
    proj = [torch.randn(H, M, P, dtype=torch.float64) for _ in range(3)] if M > 1 else [None] * 3
    y, h = mamba3_recurrent_ref(*args, *proj)
    if M == 1:
        yc, hc = mamba3_siso_chunked_ref(*args, chunk=5)
        torch.testing.assert_close(mamba3_chunked_ref(*args)[0], y, rtol=1e-10, atol=1e-10)
    else:
        yc, hc = mamba3_mimo_chunked_ref(*args, *proj, chunk=5)
    torch.testing.assert_close(yc, y, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(hc, h, rtol=1e-10, atol=1e-10)
    f = torch.float64
    state = torch.zeros(B, H, P, N, dtype=f)
    k_prev, v_prev = torch.zeros(B, H, M, N, dtype=f), torch.zeros(B, H, P, dtype=f)
    angle = torch.zeros(B, H, N // 4, dtype=f)
    A = ADT / DT
    ys = []
    for t in range(L_):
        y_t, k_prev, angle = mamba3_step_ref(state, k_prev, v_prev, angle, Q[:, t], K[:, t], V[:, t], Z[:, t],
                                             A[:, :, t], DT[:, :, t], Trap[:, :, t], Qb, Kb, Ang[:, t], D, *proj)
        v_prev = V[:, t]
        ys.append(y_t)
    torch.testing.assert_close(torch.stack(ys, 1), y, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(state, h, rtol=1e-10, atol=1e-10)
