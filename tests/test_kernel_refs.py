"""The chunked plain-PyTorch references of the GPU backends (analytic/ops/<family>/ref.py) against
step-by-step recurrences written out here, in fp64 on small shapes; and the lo path's dtypes."""

import math

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from ssmbench.analytic.ops.attention import ref as AT  # noqa: E402
from ssmbench.analytic.ops.conv1d import ref as CV  # noqa: E402
from ssmbench.analytic.ops.delta_rule import ref as DR  # noqa: E402
from ssmbench.analytic.ops.mamba1 import ref as M1  # noqa: E402
from ssmbench.analytic.ops.mamba3 import ref as M3  # noqa: E402
from ssmbench.analytic.ops.ssd import ref as SSD  # noqa: E402

D64 = torch.float64


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_selective_scan_matches_recurrence():
    b, e, l, n = 2, 6, 37, 4
    u, delta, z = (torch.randn(b, e, l, dtype=D64) for _ in range(3))
    a = -torch.rand(e, n, dtype=D64) * 3
    bb, cc = torch.randn(b, n, l, dtype=D64), torch.randn(b, n, l, dtype=D64)
    d, db = torch.randn(e, dtype=D64), torch.randn(e, dtype=D64) * 0.3
    y = M1.selective_scan_ref(u, 0.5 * delta, a, bb, cc, d, z, db, True, chunk=8)
    dt = F.softplus(0.5 * delta + db[:, None])
    h, ys = torch.zeros(b, e, n, dtype=D64), []
    for t in range(l):
        h = torch.exp(dt[:, :, t, None] * a) * h + dt[:, :, t, None] * bb[:, None, :, t] * u[:, :, t, None]
        ys.append((h * cc[:, None, :, t]).sum(-1))
    expect = (torch.stack(ys, -1) + u * d[:, None]) * F.silu(z)
    assert torch.allclose(y, expect, atol=1e-12, rtol=1e-10)
    # the decode step is the same recurrence, one token
    out, h1 = M1.selective_scan_step_ref(torch.zeros(b, e, n, dtype=D64), u[:, :, 0], 0.5 * delta[:, :, 0], a,
                                        bb[:, :, 0], cc[:, :, 0], d, z[:, :, 0], db)
    assert torch.allclose(out, expect[:, :, 0], atol=1e-12)


@pytest.mark.parametrize("chunk", [8, 16, 64])
def test_ssd_chunked_matches_steps(chunk):
    b, l, h, p, g, n = 2, 45, 6, 3, 2, 4
    x = torch.randn(b, l, h, p, dtype=D64)
    dt = torch.randn(b, l, h, dtype=D64) * 0.5
    a = -torch.rand(h, dtype=D64) * 4 - 0.5
    bb, cc = torch.randn(b, l, g, n, dtype=D64), torch.randn(b, l, g, n, dtype=D64)
    d, dtb = torch.randn(h, dtype=D64), torch.randn(h, dtype=D64) * 0.3
    y = SSD.ssd_ref(x, dt, a, bb, cc, d, dtb, True, chunk=chunk)
    st, ys = torch.zeros(b, h, p, n, dtype=D64), []
    for t in range(l):
        o, st = SSD.ssd_state_update_ref(st, x[:, t], dt[:, t], a, bb[:, t], cc[:, t], d, dtb)
        ys.append(o)
    assert torch.allclose(y, torch.stack(ys, 1), atol=1e-11)


def test_mamba3_chunked_matches_steps():
    b, l, h, p, n, s = 2, 40, 4, 4, 8, 2
    q, k = torch.randn(b, l, 1, n, dtype=D64), torch.randn(b, l, 1, n, dtype=D64)
    v, z = torch.randn(b, l, h, p, dtype=D64), torch.randn(b, l, h, p, dtype=D64)
    dt = F.softplus(torch.randn(b, h, l, dtype=D64))
    adt = -torch.rand(b, h, l, dtype=D64) * dt
    trap = torch.randn(b, h, l, dtype=D64)
    qb, kb = torch.randn(h, n, dtype=D64), torch.randn(h, n, dtype=D64)
    ang, d = torch.randn(b, l, h, s, dtype=D64), torch.randn(h, dtype=D64)
    y = M3.mamba3_siso_ref(q, k, v, adt, dt, trap, qb, kb, ang, d, z, True, chunk=8)
    a_st, ssm = torch.zeros(b, h, s, dtype=D64), torch.zeros(b, h, p, n, dtype=D64)
    k_st, v_st, ys = torch.zeros(b, h, n, dtype=D64), torch.zeros(b, h, p, dtype=D64), []
    for t in range(l):
        o, a_st, ssm, k_st = M3.mamba3_siso_step_ref(q[:, t], k[:, t], v[:, t], adt[:, :, t], dt[:, :, t],
                                                     trap[:, :, t], qb, kb, ang[:, t], d, z[:, t], a_st, ssm,
                                                     k_st, v_st, True)
        v_st = v[:, t]
        ys.append(o)
    assert torch.allclose(y, torch.stack(ys, 1), atol=1e-10)
    assert float(a_st.min()) >= 0 and float(a_st.max()) < 2 * math.pi  # the step reduces angles mod 2 pi


def test_rotate_pairs_rotates_adjacent_pairs_only():
    x = torch.arange(8, dtype=D64).reshape(1, 8)
    r = M3.rotate_pairs(x, torch.tensor([[math.pi / 2, 0.0]], dtype=D64))
    # pair (0, 1) rotated by 90 degrees: (x0, x1) -> (-x1, x0); pair (2, 3) by 0; dims 4..7 untouched
    assert torch.allclose(r, torch.tensor([[-1.0, 0.0, 2, 3, 4, 5, 6, 7]], dtype=D64), atol=1e-12)


def test_gated_delta_rule_chunked_matches_steps():
    b, l, h, dk, dv = 2, 37, 3, 8, 5
    q = torch.randn(b, l, h, dk, dtype=D64)
    k = F.normalize(torch.randn(b, l, h, dk, dtype=D64), dim=-1)
    v = torch.randn(b, l, h, dv, dtype=D64)
    g, beta = F.logsigmoid(torch.randn(b, l, h, dtype=D64)), torch.sigmoid(torch.randn(b, l, h, dtype=D64))
    y = DR.chunk_gated_delta_rule_ref(q, k, v, g, beta, dk ** -0.5, True, chunk=8)
    s, ys = torch.zeros(b, h, dk, dv, dtype=D64), []
    for t in range(l):
        o, s = DR.gated_delta_rule_step_ref(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], g[:, t:t + 1],
                                           beta[:, t:t + 1], s, dk ** -0.5, True)
        ys.append(o)
    assert torch.allclose(y, torch.cat(ys, 1), atol=1e-11)


@pytest.mark.parametrize("causal", [True, False])
def test_attention_matches_sdpa_math(causal):
    q = torch.randn(2, 8, 33, 16, dtype=D64)
    k, v = torch.randn(2, 2, 33, 16, dtype=D64), torch.randn(2, 2, 33, 16, dtype=D64)
    y = AT.sdpa_ref(q, k, v, causal, 16 ** -0.5, True)
    expect = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    assert torch.allclose(y, expect, atol=1e-12)


def test_attention_causal_aligns_queries_to_last_keys():
    q, k, v = torch.randn(1, 2, 3, 8, dtype=D64), torch.randn(1, 2, 7, 8, dtype=D64), torch.randn(1, 2, 7, 8, dtype=D64)
    y = AT.sdpa_ref(q, k, v, True, 8 ** -0.5, True)
    # the last query sees every key: same as unmasked attention for that row
    full = AT.sdpa_ref(q, k, v, False, 8 ** -0.5, True)
    assert torch.allclose(y[:, :, -1], full[:, :, -1])
    assert not torch.allclose(y[:, :, 0], full[:, :, 0])


def test_causal_conv1d_and_update():
    x, w, bias = torch.randn(2, 8, 20, dtype=D64), torch.randn(8, 4, dtype=D64), torch.randn(8, dtype=D64)
    y = CV.causal_conv1d_ref(x, w, bias, True)
    assert torch.allclose(y, F.silu(F.conv1d(x, w[:, None], bias, padding=3, groups=8)[..., :20]), atol=1e-12)
    state = x[..., 12:16].clone()  # the last K = 4 inputs before token 16
    out, new = CV.causal_conv1d_update_ref(x[..., 16], state, w, bias, True)
    assert torch.allclose(out, y[..., 16], atol=1e-12)
    assert torch.equal(new, x[..., 13:17])


def test_lo_path_keeps_activation_dtype_and_fp32_state():
    bf = torch.bfloat16
    y = SSD.ssd_ref(torch.randn(1, 64, 4, 8).to(bf), torch.randn(1, 64, 4).to(bf), -torch.rand(4),
                  torch.randn(1, 64, 1, 16).to(bf), torch.randn(1, 64, 1, 16).to(bf), torch.ones(4), torch.zeros(4),
                  hi=False, chunk=16)
    assert y.dtype == bf
    out, state = M1.selective_scan_step_ref(torch.zeros(2, 4, 3), *(torch.randn(2, 4).to(bf) for _ in range(2)),
                                           -torch.ones(4, 3), *(torch.randn(2, 3).to(bf) for _ in range(2)),
                                           torch.ones(4), torch.randn(2, 4).to(bf), torch.zeros(4))
    assert out.dtype == bf and state.dtype == torch.float32


# ---- against the analytic op modules' own references (independent implementations) ------------------
def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def test_against_analytic_mamba1_reference():
    ref = M1.mamba1_scan_ref
    b, e, l, n = 2, 5, 19, 3
    u, delta, z = (torch.randn(b, e, l, dtype=D64) for _ in range(3))
    a, bb, cc = -torch.rand(e, n, dtype=D64) * 2, torch.randn(b, n, l, dtype=D64), torch.randn(b, n, l, dtype=D64)
    d, db = torch.randn(e, dtype=D64), torch.randn(e, dtype=D64) * 0.3
    mine = M1.selective_scan_ref(u, delta, a, bb, cc, d, z, db, True, chunk=4)
    assert torch.allclose(mine, _first(ref(u, delta, a, bb, cc, d, z, db)), atol=1e-12)


def test_against_analytic_ssd_reference():
    ref = SSD.ssd_recurrent_ref
    b, l, h, p, g, n = 2, 21, 4, 3, 2, 5
    x, dt = torch.randn(b, l, h, p, dtype=D64), torch.randn(b, l, h, dtype=D64) * 0.5
    a, d, dtb = -torch.rand(h, dtype=D64) * 3, torch.randn(h, dtype=D64), torch.randn(h, dtype=D64) * 0.3
    bb, cc = torch.randn(b, l, g, n, dtype=D64), torch.randn(b, l, g, n, dtype=D64)
    mine = SSD.ssd_ref(x, dt, a, bb, cc, d, dtb, True, chunk=8)
    assert torch.allclose(mine, _first(ref(x, dt, a, bb, cc, d, dtb)), atol=1e-11)


def test_against_analytic_mamba3_reference():
    ref = M3.mamba3_recurrent_ref
    b, l, h, p, n, s = 2, 23, 3, 4, 8, 2
    q, k = torch.randn(b, l, 1, n, dtype=D64), torch.randn(b, l, 1, n, dtype=D64)
    v, z = torch.randn(b, l, h, p, dtype=D64), torch.randn(b, l, h, p, dtype=D64)
    dt = F.softplus(torch.randn(b, h, l, dtype=D64))
    adt, trap = -torch.rand(b, h, l, dtype=D64) * dt, torch.randn(b, h, l, dtype=D64)
    qb, kb = torch.randn(h, n, dtype=D64), torch.randn(h, n, dtype=D64)
    ang, d = torch.randn(b, l, h, s, dtype=D64), torch.randn(h, dtype=D64)
    mine = M3.mamba3_siso_ref(q, k, v, adt, dt, trap, qb, kb, ang, d, z, True, chunk=8)
    theirs = _first(ref(q, k, v, adt, dt, trap, qb[:, None], kb[:, None], ang, d, z))
    assert torch.allclose(mine, theirs.reshape(mine.shape), atol=1e-10)


def test_against_analytic_gated_delta_rule_reference():
    ref = DR.gated_delta_rule_ref
    b, l, h, dk, dv = 2, 19, 2, 8, 4
    q, k = torch.randn(b, l, h, dk, dtype=D64), F.normalize(torch.randn(b, l, h, dk, dtype=D64), dim=-1)
    v = torch.randn(b, l, h, dv, dtype=D64)
    g, beta = F.logsigmoid(torch.randn(b, l, h, dtype=D64)), torch.sigmoid(torch.randn(b, l, h, dtype=D64))
    mine = DR.chunk_gated_delta_rule_ref(q, k, v, g, beta, dk ** -0.5, True, chunk=8)
    assert torch.allclose(mine, _first(ref(q, k, v, g, beta, dk ** -0.5)), atol=1e-11)
