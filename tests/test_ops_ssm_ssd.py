"""Mamba-2 SSD: stage formulas, chunked = sum of stages, the chunk = 1 and chunk = L identities,
FLOP-counter cross-checks and reference agreement."""

import pytest
import sympy as sp
from ssmbench.analytic.registry import AnalyticError, cost, get_op, symbolic_cost
from ssmbench.analytic.symbols import B as Bs
from ssmbench.analytic.symbols import C as Cs
from ssmbench.analytic.symbols import G as Gs
from ssmbench.analytic.symbols import H as Hs
from ssmbench.analytic.symbols import L as Ls
from ssmbench.analytic.symbols import N as Ns
from ssmbench.analytic.symbols import P as Ps

B, L, H, P, N, G, C = 2, 32, 4, 3, 5, 2, 8
DIMS = dict(B=B, L=L, H=H, P=P, N=N, G=G, C=C)
NC = L // C
TRI = C * (C + 1) // 2


def c(op, impl, mode="fwd", dtype="bf16", dims=DIMS):
    op_dims = {k: v for k, v in dims.items() if k in get_op(op).dims}
    return cost(op, op_dims, impl, mode, dtype)


def test_stage_formulas():
    cs = c("ssd_chunk_cumsum", "triton")
    assert cs.vector == 3 * B * L * H + B * H * NC * (C - 1) and cs.transcendental == 2 * B * L * H
    assert cs.write == {"intermediates": 2 * 4 * B * H * L}  # dt_out, dA_cumsum fp32
    bmm = c("ssd_bmm", "triton")
    assert bmm.tensor == {"bf16": 2 * B * NC * G * C * C * N}
    assert bmm.write == {"intermediates": 4 * B * NC * G * C * C}
    st = c("ssd_chunk_state", "triton")
    assert st.tensor == {"bf16": 2 * B * L * H * P * N}
    assert st.vector == 2 * B * L * H + B * L * H * N
    assert st.write == {"state": 4 * B * NC * H * P * N}
    sp_ = c("ssd_state_passing", "triton")
    assert sp_.vector == 2 * B * NC * H * P * N and sp_.transcendental == B * NC * H
    assert sp_.write == {"state": 2 * B * NC * H * P * N + 4 * B * H * P * N}  # entering states at e, final fp32
    sc = c("ssd_chunk_scan", "triton")
    assert sc.tensor == {"bf16": 2 * B * L * H * N * P + 2 * P * B * H * NC * TRI}
    assert sc.vector == B * L * H * P + 3 * B * H * NC * TRI + 2 * B * L * H * P
    assert sc.transcendental == B * L * H + B * H * NC * TRI


def test_chunked_is_the_sum_of_the_stages():
    stages = ["ssd_chunk_cumsum", "ssd_bmm", "ssd_chunk_state", "ssd_state_passing", "ssd_chunk_scan"]
    parts = [c(s, "triton") for s in stages]
    total = c("ssd", "chunked")
    assert total.tensor_flops == sum(p.tensor_flops for p in parts)
    assert total.vector == sum(p.vector for p in parts)
    assert total.transcendental == sum(p.transcendental for p in parts)
    assert total.executed_bytes == sum(p.executed_bytes for p in parts)
    assert total.launches == 5
    e = 2
    assert total.bytes == e * (2 * B * L * H * P + B * L * H + 2 * B * L * G * N) + 12 * H + 4 * B * H * P * N


def test_chunk_one_vs_recurrent():
    """Same mathematics, different counts; the difference is exactly the documented one."""
    ch = symbolic_cost("ssd", "chunked", "fwd", "fp32").subs({Cs: 1})
    rec = symbolic_cost("ssd", "recurrent", "fwd", "fp32")
    diff = sp.expand(ch.flops - rec.flops)
    assert diff == sp.expand(Bs * Ls * Hs * (Ps * Ns + 2 * Ps + Ns + 5) + 2 * Bs * Ls * Gs * Ns)
    assert sp.expand(ch.transcendental - rec.transcendental) == 3 * Bs * Ls * Hs
    # the state-sized work: 4 P N (chunked, k = 1 matmul convention) + 2 P N output vs 3 + 2 P N
    assert sp.Poly(sp.expand(ch.flops), Ns, Ps).coeff_monomial(Ns * Ps) == 6 * Bs * Ls * Hs
    assert sp.Poly(sp.expand(rec.flops), Ns, Ps).coeff_monomial(Ns * Ps) == 5 * Bs * Ls * Hs


def test_chunk_L_vs_quadratic():
    ch = symbolic_cost("ssd", "chunked", "fwd", "fp32").subs({Cs: Ls})
    q = symbolic_cost("ssd", "quadratic", "fwd", "fp32")
    inter = 2 * Bs * Ls * Hs * Ns * Ps
    assert sp.expand(ch.tensor["fp32"] - q.tensor["fp32"]) == inter
    assert sp.expand(ch.vector - q.vector) == Bs * Ls * Hs * Ps + 2 * Bs * Hs * Ps * Ns
    assert sp.expand(ch.transcendental - q.transcendental) == Bs * Ls * Hs + Bs * Hs
    # relative difference vanishes as L grows (the quadratic terms dominate)
    at = {Bs: 1, Hs: 8, Ps: 64, Ns: 64, Gs: 1}
    r = [float(((ch.flops - q.flops) / q.flops).subs({**at, Ls: n})) for n in (256, 4096)]
    assert r[1] < r[0] < 0.6


def test_quadratic_and_recurrent_formulas():
    q = c("ssd", "quadratic", dtype="bf16")
    assert q.tensor == {"fp32": 2 * B * L * G * L * N + 2 * P * B * H * L * (L + 1) // 2 + 2 * B * L * H * P * N}
    assert q.launches == 25
    assert q.extra_write["intermediates"] >= 4 * 4 * B * H * L * L  # four [B, H, L, L] fp32 temporaries
    r = c("ssd", "recurrent", dtype="fp32")
    assert r.tensor == {} and r.vector == 5 * B * L * H * P * N + 3 * B * L * H * P + 3 * B * L * H
    assert r.launches == 5 * L + 9


def test_decode_and_bwd():
    d = dict(B=B, H=H, P=P, N=N, G=G)
    ch = c("ssd", "chunked", "decode", dims=d)
    assert ch.read["state"] == ch.write["state"] == 4 * B * H * P * N
    assert ch.launches == 1 and ch.executed_bytes == ch.bytes
    assert ch.vector == 5 * B * H * P * N + B * H * N + 2 * B * H * P + 3 * B * H
    rec = c("ssd", "recurrent", "decode", dims=d)
    assert rec.launches == 14 and rec.executed_bytes > ch.executed_bytes
    fwd, bwd = c("ssd", "chunked"), c("ssd", "chunked", "bwd")
    assert bwd.tensor_flops > 2 * fwd.tensor_flops and bwd.executed_bytes > fwd.executed_bytes
    assert bwd.launches == 29


def test_constraints():
    with pytest.raises(AnalyticError, match="L must be divisible by C"):
        cost("ssd", dict(DIMS, L=30), "chunked")
    with pytest.raises(AnalyticError, match="H must be divisible by G"):
        cost("ssd", dict(DIMS, G=3), "chunked")


def _inputs(torch, L_=L):
    torch.manual_seed(0)
    f = torch.float64
    return (torch.randn(B, L_, H, P, dtype=f), torch.randn(B, L_, H, dtype=f) - 1, -torch.rand(H, dtype=f) - 0.5,
            torch.randn(B, L_, G, N, dtype=f), torch.randn(B, L_, G, N, dtype=f), torch.randn(H, dtype=f),
            torch.randn(H, dtype=f) * 0.1)


def test_flop_counter_chunked_and_quadratic():
    """FlopCounterMode counts the references' masked products in full: subtract the upper triangle."""
    torch = pytest.importorskip("torch")
    from ssmbench.analytic.ops.ssd.ref import ssd_chunked_ref, ssd_quadratic_ref
    from torch.utils.flop_counter import FlopCounterMode
    args = _inputs(torch)
    with FlopCounterMode(display=False) as fc:
        ssd_chunked_ref(*args, C)
    upper = B * H * NC * (C * C - TRI) * 2 * P
    assert fc.get_total_flops() - upper == c("ssd", "chunked", dtype="fp32").tensor["fp32"]
    with FlopCounterMode(display=False) as fc:
        ssd_quadratic_ref(*args)
    upper = B * H * (L * L - L * (L + 1) // 2) * 2 * P
    assert fc.get_total_flops() - upper == c("ssd", "quadratic", dtype="fp32").tensor["fp32"]


@pytest.mark.parametrize("chunk", [1, 4, L])
def test_references_agree(chunk):
    torch = pytest.importorskip("torch")
    from ssmbench.analytic.ops.ssd.ref import (
        ssd_chunked_ref,
        ssd_quadratic_ref,
        ssd_recurrent_ref,
        ssd_step_ref,
    )
    args = _inputs(torch)
    y, h = ssd_recurrent_ref(*args)
    for yy, hh in (ssd_chunked_ref(*args, chunk), ssd_quadratic_ref(*args)):
        torch.testing.assert_close(yy, y, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(hh, h, rtol=1e-12, atol=1e-12)
    x, dt, A, Bm, Cm, D, dtb = args
    state = torch.zeros(B, H, P, N, dtype=torch.float64)
    steps = torch.stack([ssd_step_ref(state, x[:, t], dt[:, t], A, Bm[:, t], Cm[:, t], D, dtb) for t in range(L)], 1)
    torch.testing.assert_close(steps, y, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(state, h, rtol=1e-12, atol=1e-12)
