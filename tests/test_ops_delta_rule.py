"""Gated delta rule: formulas over small dims, FLOP-counter cross-checks, chunked vs recurrent
references in fp64, and properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ssmbench.analytic.ops.delta_rule.chunked import solve_tril_flops
from ssmbench.analytic.registry import AnalyticError, cost, get_op
from ssmbench.analytic.symbols import B as B_SYM
from ssmbench.analytic.symbols import C as C_SYM
from ssmbench.analytic.symbols import H as H_SYM
from ssmbench.analytic.symbols import L as L_SYM

OP = "gated_delta_rule"
CASES = [("chunked", "fwd"), ("chunked", "bwd"), ("recurrent", "fwd"), ("recurrent", "bwd"), ("recurrent", "decode")]
E = 2  # bf16


def ev(impl, mode, dtype="bf16", **dims):
    return cost(OP, dims, impl, mode, dtype)


def close(a, b):
    return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-9)


def assert_terms(c, expected):
    got = {k: float(v) for k, v in c.terms().items() if float(v) != 0}
    # host calls (execution traits) are one per launch here; the hand formulas count the rest
    host = {k: got.pop(k) for k in list(got) if k.startswith("host.")}
    assert sum(host.values()) == got.get("launches", 0.0), host
    want = {k: float(v) for k, v in expected.items() if float(v) != 0}
    assert got.keys() == want.keys(), (sorted(got), sorted(want))
    for k in want:
        assert close(got[k], want[k]), (k, got[k], want[k])


def solve_per_chunk(C):
    n = C // 16
    return 2 * 16**3 * (n + n * (n - 1) * (n + 4) // 6)


D = dict(B=1, L=32, H=2, P=16, Pv=8, C=16)


# Formulas over small dims ---------------------------------------------------------------------------
def test_chunked_fwd_formula():
    B, L, H, P, Pv, C = D.values()
    T, NC = B * L * H, B * L * H // C
    hb = NC * P * Pv * E  # per-chunk states
    exp = {
        "tensor.bf16": T * (6 * C * P + 4 * C * Pv + 6 * P * Pv),
        "vector": T + 3 * T * C + NC * solve_per_chunk(C) + T * (Pv + 2 * P) + T * (2 * Pv + 1) + NC * P * Pv
        + T * (4 * Pv + 2 * C),
        "transcendental": T * C + T + (T + NC) + T * (1 + C),
        "read.activations": T * (2 * P * E + Pv * E + 4 + E),
        "write.activations": T * Pv * E, "write.state": B * H * P * Pv * 4,
        "extra_read.activations": 3 * T * P * E + T * E,  # k read by 4 kernels, beta by 2
        "extra_read.intermediates": 4 * 4 * T + 4 * T * C + T * C * E + T * P * E + 2 * T * Pv * E + hb,
        "extra_write.intermediates": 4 * T + 4 * T * C + T * C * E + T * P * E + 2 * T * Pv * E + hb,
        "launches": 6,
        "working_set": 3 * C * 64 * E + P * 64 * 4,  # the state-passing kernel
    }
    assert_terms(ev("chunked", "fwd", **D), exp)


def test_chunked_bwd_formula():
    B, L, H, P, Pv, C = D.values()
    T, NC = B * L * H, B * L * H // C
    hb = NC * P * Pv * E
    exp = {
        "tensor.bf16": T * (20 * C * P + 10 * C * Pv + 16 * P * Pv + 4 * C * C),
        "vector": T * (Pv + 2 * P) + T * (2 * Pv + 1) + NC * P * Pv + 3 * T * C + T * (2 * Pv + 1 + P)
        + 3 * NC * P * Pv + 2 * NC * P * Pv + T * (9 * P + 1 + 6 * C) + T * (14 * P + 4 * Pv + 6 * C) + T * P + 2 * T,
        "transcendental": T + (T + NC) + T * C + (2 * T + NC) + (T * (2 + C) + NC) + T * (1 + C),
        "read.activations": T * (2 * P * E + 2 * Pv * E + 4 + E),
        "write.activations": T * (2 * P * E + Pv * E + 4 + E),
        # q by 3 kernels, k by 6, v by 2, beta by 2, g (its saved cumsum) by 6, dO by 3
        "extra_read.activations": 7 * T * P * E + 3 * T * Pv * E + T * E + 20 * T,
        "extra_read.intermediates": 2 * T * C * E + 5 * T * P * E + 5 * T * Pv * E + 2 * hb + 12 * T,
        "extra_write.intermediates": 4 * T * P * E + 4 * T * Pv * E + 2 * hb + 12 * T,
        "launches": 9,
        "working_set": 5 * C * 64 * E + P * 64 * 4,  # bwd_dhu
    }
    assert_terms(ev("chunked", "bwd", **D), exp)


def test_recurrent_formulas():
    B, L, H, P, Pv, _ = D.values()
    T = B * L * H
    state = B * H * P * Pv * 4
    io = dict(B=B, L=L, H=H, P=P, Pv=Pv)
    assert_terms(ev("recurrent", "fwd", **io), {
        "vector": T * (7 * P * Pv + 2 * Pv + P), "transcendental": T,
        "read.activations": T * (2 * P * E + Pv * E + 4 + E), "write.activations": T * Pv * E,
        "write.state": state, "launches": 1, "working_set": P * 8 * 4})
    assert_terms(ev("recurrent", "bwd", **io), {
        "vector": T * (5 * P * Pv + 2 * Pv) + T * (18 * P * Pv + 2 * P + 4 * Pv + 1), "transcendental": 2 * T,
        "read.activations": T * (2 * P * E + 2 * Pv * E + 4 + E), "write.activations": T * (2 * P * E + Pv * E + 4 + E),
        "extra_read.activations": T * (P * E + Pv * E + 4 + E),  # k, v, g, beta read by both kernels
        "extra_read.intermediates": T * P * Pv * 4, "extra_write.intermediates": T * P * Pv * 4,
        "launches": 2, "working_set": 3 * P * Pv * 4})
    dec = ev("recurrent", "decode", B=B, H=H, P=P, Pv=Pv)  # no L, no C
    assert_terms(dec, {
        "vector": B * H * (7 * P * Pv + 2 * Pv + P), "transcendental": B * H,
        "read.activations": B * H * (2 * P * E + Pv * E + 4 + E), "read.state": state,
        "write.activations": B * H * Pv * E, "write.state": state, "launches": 1, "working_set": P * 8 * 4})


def model_solve_per_chunk(C):
    return float(solve_tril_flops().subs({B_SYM: 1, H_SYM: 1, L_SYM: C, C_SYM: C}))


def test_solve_tril_count_matches_fla_merge_kernel():
    # fla's merge_16x16_to_64x64_inverse_kernel issues 16 tl.dot of 16 x 16 blocks; with the four
    # diagonal forward substitutions that is 2*16^3*(4 + 16) FLOPs per chunk at C = 64.
    assert model_solve_per_chunk(64) == solve_per_chunk(64) == 2 * 16**3 * (4 + 16)
    assert model_solve_per_chunk(16) == 2 * 16**3  # one block: forward substitution only


def test_bad_input_raises_user_errors():
    with pytest.raises(AnalyticError, match="fp32"):
        ev("chunked", "fwd", "fp32", **D)
    with pytest.raises(AnalyticError, match="no cost rule for mode 'decode'"):
        ev("chunked", "decode", B=1, H=2, P=16, Pv=8)
    with pytest.raises(AnalyticError, match="L must be divisible by C"):
        ev("chunked", "fwd", **{**D, "L": 40})
    with pytest.raises(AnalyticError, match="multiple of 16"):
        ev("chunked", "fwd", **{**D, "C": 8, "L": 32})
    ev("recurrent", "fwd", "fp32", B=1, L=7, H=2, P=16, Pv=8)  # recurrent needs no chunking


def test_registration():
    op = get_op(OP)
    assert op.dims == ("B", "L", "H", "P", "Pv", "C")
    assert set(op.modes) == {"fwd", "bwd", "fwdbwd", "decode"}


# References and FLOP counter ----------------------------------------------------------------------
torch = pytest.importorskip("torch")
from ssmbench.analytic.ops.delta_rule.ref import (  # noqa: E402
    gated_delta_rule_chunked_ref,
    gated_delta_rule_ref,
)
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402


def _inputs(B, L, H, P, Pv, seed=0, decay=1.0):
    g = torch.Generator().manual_seed(seed)
    rn = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    q, k, v = rn(B, L, H, P), rn(B, L, H, P), rn(B, L, H, Pv)
    k = torch.nn.functional.normalize(k, dim=-1)  # as Gated DeltaNet feeds it (l2-normalized keys)
    gate = torch.nn.functional.logsigmoid(rn(B, L, H)) * decay
    beta = torch.sigmoid(rn(B, L, H))
    return q, k, v, gate, beta


@pytest.mark.parametrize("C", [1, 4, 8, 24])
@pytest.mark.parametrize("with_state", [False, True])
def test_chunked_reference_matches_recurrent_fp64(C, with_state):
    B, L, H, P, Pv = 2, 24, 3, 8, 6
    q, k, v, gate, beta = _inputs(B, L, H, P, Pv, seed=C, decay=3.0)
    s0 = torch.randn(B, H, P, Pv, dtype=torch.float64) if with_state else None
    o_r, s_r = gated_delta_rule_ref(q, k, v, gate, beta, initial_state=s0)
    o_c, s_c = gated_delta_rule_chunked_ref(q, k, v, gate, beta, C, initial_state=s0)
    torch.testing.assert_close(o_c, o_r, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(s_c, s_r, rtol=1e-10, atol=1e-10)


def test_recurrent_reference_is_the_delta_rule():
    """One step by hand: S = a S0 + k (beta (v - a S0^T k))^T, o = S^T q / sqrt(P)."""
    q, k, v, gate, beta = _inputs(1, 1, 1, 4, 3)
    s0 = torch.randn(1, 1, 4, 3, dtype=torch.float64)
    o, s = gated_delta_rule_ref(q, k, v, gate, beta, initial_state=s0)
    a = gate[0, 0, 0].exp()
    S0, kk, vv, qq = s0[0, 0], k[0, 0, 0], v[0, 0, 0], q[0, 0, 0]
    S = a * S0 + torch.outer(kk, beta[0, 0, 0] * (vv - a * S0.T @ kk))
    torch.testing.assert_close(s[0, 0], S)
    torch.testing.assert_close(o[0, 0, 0], S.T @ qq / 2.0)


def test_flop_counter_on_chunked_reference():
    dims = dict(B=2, L=32, H=2, P=16, Pv=8, C=16)
    q, k, v, gate, beta = _inputs(dims["B"], dims["L"], dims["H"], dims["P"], dims["Pv"])
    with FlopCounterMode(display=False) as fc:
        gated_delta_rule_chunked_ref(q, k, v, gate, beta, dims["C"])
    # every matmul of the WY algorithm; the triangular solve is not a matmul for the counter, as it
    # is vector work (fp32 "ieee" dots) in the model
    assert fc.get_total_flops() == ev("chunked", "fwd", **dims).tensor_flops


def test_flop_counter_on_recurrent_reference():
    B, L, H, P, Pv = 2, 5, 3, 8, 4
    q, k, v, gate, beta = _inputs(B, L, H, P, Pv)
    with FlopCounterMode(display=False) as fc:
        gated_delta_rule_ref(q, k, v, gate, beta)
    T = B * L * H
    # the counter sees the two contractions S^T k and S^T q (4 P Pv per token-head); the rank-1 update
    # k u^T is a broadcast multiply to PyTorch (uncounted), 2 P Pv (multiply and add into S) in the
    # model; the model also counts the decay (P Pv) and the elementwise work (2 Pv + P), all vector
    assert fc.get_total_flops() == 4 * T * P * Pv
    c = ev("recurrent", "fwd", B=B, L=L, H=H, P=P, Pv=Pv)
    assert c.tensor_flops == 0
    assert close(c.vector - T * (2 * P * Pv + P * Pv + 2 * Pv + P), fc.get_total_flops())


def _blocked_unit_lower_inverse(M, bs=16):
    """(I + A)^-1 by fla's scheme: diagonal blocks inverted, then Ai_ij = -Ai_ii sum_k M_ik Ai_kj."""
    n = M.shape[0] // bs
    blk = lambda X, i, j: X[i * bs:(i + 1) * bs, j * bs:(j + 1) * bs]  # noqa: E731
    X = torch.zeros_like(M)
    eye = torch.eye(bs, dtype=M.dtype)
    for i in range(n):  # forward substitution: not a matmul for the counter
        blk(X, i, i).copy_(torch.linalg.solve_triangular(blk(M, i, i), eye, upper=False))
    for d in range(1, n):
        for j in range(n - d):
            i = j + d
            acc = sum(blk(M, i, kk) @ blk(X, kk, j) for kk in range(j, i))
            blk(X, i, j).copy_(-(blk(X, i, i) @ acc))
    return X


@pytest.mark.parametrize("C", [16, 32, 64, 96])
def test_solve_tril_merge_count_by_execution(C):
    A = torch.randn(C, C, dtype=torch.float64).tril(-1) * 0.1
    M = torch.eye(C, dtype=torch.float64) + A
    with FlopCounterMode(display=False) as fc:
        X = _blocked_unit_lower_inverse(M)
    torch.testing.assert_close(X @ M, torch.eye(C, dtype=torch.float64))
    diag = (C // 16) * 2 * 16**3  # forward substitution on the diagonal blocks
    assert fc.get_total_flops() == model_solve_per_chunk(C) - diag


# Properties -----------------------------------------------------------------------------------------
@st.composite
def shapes(draw):
    C = draw(st.sampled_from([16, 32, 64]))
    return dict(B=draw(st.integers(1, 8)), L=C * draw(st.integers(1, 64)), H=draw(st.integers(1, 32)),
                P=draw(st.sampled_from([16, 32, 64, 128, 256])), Pv=draw(st.sampled_from([8, 32, 64, 128, 256])), C=C)


def _dims(impl, mode, d):
    drop = {"L", "C"} if mode == "decode" else ({"C"} if impl == "recurrent" else set())
    return {k: v for k, v in d.items() if k not in drop}


@settings(max_examples=40, deadline=None)
@given(shapes())
def test_executed_at_least_compulsory(d):
    for impl, mode in CASES:
        c = ev(impl, mode, **_dims(impl, mode, d))
        for m in (c.extra_read, c.extra_write):
            assert all(float(v) >= 0 for v in m.values()), (impl, mode, m)
        assert c.executed_bytes >= c.bytes > 0 and c.flops > 0


@settings(max_examples=30, deadline=None)
@given(shapes(), st.sampled_from(["B", "L", "H", "P", "Pv"]))
def test_monotone_in_every_dimension_but_chunk(d, dim):
    """Monotone in B, L, H, P, Pv. Not in C by design: a longer chunk trades per-chunk state traffic
    (B*(L/C)*H*P*Pv) for quadratic intra-chunk work (C^2 per chunk)."""
    bigger = dict(d)
    bigger[dim] = d[dim] + (d["C"] if dim == "L" else 8)
    for impl, mode in CASES:
        if mode == "decode" and dim == "L":
            continue
        lo, hi = ev(impl, mode, **_dims(impl, mode, d)), ev(impl, mode, **_dims(impl, mode, bigger))
        for attr in ("tensor_flops", "vector", "transcendental", "bytes", "executed_bytes"):
            assert getattr(hi, attr) >= getattr(lo, attr), (impl, mode, dim, attr)


@settings(max_examples=30, deadline=None)
@given(shapes())
def test_backward_at_least_forward(d):
    for impl in ("chunked", "recurrent"):
        f, b = ev(impl, "fwd", **_dims(impl, "fwd", d)), ev(impl, "bwd", **_dims(impl, "bwd", d))
        for attr in ("tensor_flops", "flops", "transcendental", "executed_bytes", "launches"):
            assert getattr(b, attr) >= getattr(f, attr), (impl, attr)
    # backward matmul work over forward: (20CP + 10CPv + 16 P Pv + 4C^2) / (6CP + 4CPv + 6 P Pv)
    # >= min(20/6, 10/4, 16/6) = 2.5
    r = ev("chunked", "bwd", **d).tensor_flops / ev("chunked", "fwd", **d).tensor_flops
    assert r >= 2.5


@settings(max_examples=30, deadline=None)
@given(shapes())
def test_chunked_uses_tensor_cores_recurrent_does_not(d):
    ch, rec = ev("chunked", "fwd", **d), ev("recurrent", "fwd", **_dims("recurrent", "fwd", d))
    assert ch.tensor_flops > 0 and rec.tensor_flops == 0
    assert ch.bytes == rec.bytes  # same op, same compulsory traffic
    assert ch.executed_bytes > rec.executed_bytes  # per-chunk states and WY intermediates
    assert ch.launches == 6 and rec.launches == 1


@settings(max_examples=20, deadline=None)
@given(shapes(), st.integers(2, 64))
def test_costs_add_over_layers(d, layers):
    for impl, mode in CASES:
        c = ev(impl, mode, **_dims(impl, mode, d))
        stacked = sum([c] * layers)
        for key, v in (layers * c).terms().items():
            if key != "working_set":
                assert np.isclose(stacked.terms()[key], v)
        assert stacked.working_set == c.working_set


def test_decode_state_traffic_dominates():
    c = ev("recurrent", "decode", B=64, H=16, P=128, Pv=128)
    state = 64 * 16 * 128 * 128 * 4
    assert c.read["state"] == state and c.write["state"] == state
    assert c.read["state"] > 0.98 * c.bytes_read  # 64 KiB of state vs 774 B of token inputs per head
