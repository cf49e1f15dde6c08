"""GPU check of the launch counts the PyTorch-composed implementations claim: the references are
exactly those launch sequences, so torch.profiler's count of CUDA kernels (fills and copies
included) on them must equal the rule's ``launches``. Skipped without CUDA."""

import pytest

torch = pytest.importorskip("torch")

from ssmbench.analytic.registry import cost  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

DT = {"bf16": torch.bfloat16, "fp32": torch.float32}


def kernels(fn):
    """CUDA kernels (fills and copies included) one call of ``fn`` runs, after a warm-up call."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def _r(*shape, dtype, scale=1.0, shift=0.0):
    return torch.randn(*shape, device="cuda", dtype=dtype) * scale + shift


def conv_cases(dtype):
    from ssmbench.analytic.ops.conv1d.ref import conv1d_ref, conv1d_update_ref
    B, L, E, K = 2, 64, 32, 4
    d = DT[dtype]
    x = _r(B, E, L, dtype=d).requires_grad_()
    w, b = _r(E, K, dtype=d).requires_grad_(), _r(E, dtype=d).requires_grad_()
    y = conv1d_ref(x, w, b)
    dy = torch.randn_like(y)
    state, x_t = _r(B, E, K, dtype=d), _r(B, E, dtype=d)
    dims = dict(B=B, L=L, E=E, K=K)
    yield ("conv1d", "torch_conv", "fwd", dims, lambda: conv1d_ref(x, w, b))
    yield ("conv1d", "torch_conv", "bwd", dims, lambda: torch.autograd.grad(y, (x, w, b), dy, retain_graph=True))
    with torch.no_grad():
        yield ("conv1d", "torch_conv", "decode", dims, lambda: conv1d_update_ref(x_t, state, w, b))


def s4_cases(dtype):
    from ssmbench.analytic.ops.s4.ref import (
        s4_discretize_ref,
        s4_fft_ref,
        s4_recurrent_ref,
        s4_step_ref,
    )
    B, L, E, N = 2, 16, 8, 4
    f = torch.float32
    u = _r(B, E, L, dtype=DT[dtype])
    log_dt = _r(E, dtype=f, scale=0.1, shift=-3)
    A = torch.complex(-torch.rand(E, N, device="cuda") - 0.1, torch.randn(E, N, device="cuda"))
    C = torch.randn(E, N, device="cuda", dtype=torch.complex64)
    D = _r(E, dtype=f)
    abar, bbar = s4_discretize_ref(log_dt, A)
    h = torch.zeros(B, E, N, device="cuda", dtype=torch.complex64)
    dims = dict(B=B, L=L, E=E, N=N)
    yield ("s4", "fft", "fwd", dims, lambda: s4_fft_ref(u, log_dt, A, C, D))
    yield ("s4", "recurrent", "fwd", dims, lambda: s4_recurrent_ref(u, log_dt, A, C, D))
    yield ("s4", "recurrent", "decode", dims, lambda: s4_step_ref(u[:, :, 0], h, abar, bbar, C, D))


def mamba1_cases(dtype):
    from ssmbench.analytic.ops.mamba1.ref import (
        mamba1_scan_loop_ref,
        mamba1_scan_ref,
        mamba1_step_ref,
    )
    B, L, E, N = 2, 8, 16, 4
    d, f = DT[dtype], torch.float32
    u, delta, z = _r(B, E, L, dtype=d), _r(B, E, L, dtype=d), _r(B, E, L, dtype=d)
    A, D, db = -torch.rand(E, N, device="cuda") - 0.1, _r(E, dtype=f), _r(E, dtype=f, scale=0.1)
    Bm, Cm = _r(B, N, L, dtype=d), _r(B, N, L, dtype=d)
    state = torch.zeros(B, E, N, device="cuda", dtype=f)
    dims = dict(B=B, L=L, E=E, N=N)
    args = (u, delta, A, Bm, Cm, D, z, db)
    yield ("mamba1_scan", "naive", "fwd", dims, lambda: mamba1_scan_ref(*args))
    yield ("mamba1_scan", "loop", "fwd", dims, lambda: mamba1_scan_loop_ref(*args))
    yield ("mamba1_scan", "naive", "decode", dims,
           lambda: mamba1_step_ref(state, u[:, :, 0], delta[:, :, 0], A, Bm[:, :, 0], Cm[:, :, 0], D, z[:, :, 0], db))


def ssd_cases(dtype):
    from ssmbench.analytic.ops.ssd.ref import (
        ssd_quadratic_ref,
        ssd_recurrent_ref,
        ssd_step_ref,
    )
    B, L, H, P, N, G = 2, 16, 4, 8, 8, 2
    d, f = DT[dtype], torch.float32
    x, dt = _r(B, L, H, P, dtype=d), _r(B, L, H, dtype=d, shift=-1)
    A, D, dtb = -torch.rand(H, device="cuda") - 0.5, _r(H, dtype=f), _r(H, dtype=f, scale=0.1)
    Bm, Cm = _r(B, L, G, N, dtype=d), _r(B, L, G, N, dtype=d)
    state = torch.zeros(B, H, P, N, device="cuda", dtype=f)
    dims = dict(B=B, L=L, H=H, P=P, N=N, G=G)
    args = (x, dt, A, Bm, Cm, D, dtb)
    yield ("ssd", "quadratic", "fwd", dims, lambda: ssd_quadratic_ref(*args))
    yield ("ssd", "recurrent", "fwd", dims, lambda: ssd_recurrent_ref(*args))
    yield ("ssd", "recurrent", "decode", dims,
           lambda: ssd_step_ref(state, x[:, 0], dt[:, 0], A, Bm[:, 0], Cm[:, 0], D, dtb))


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("family", [conv_cases, s4_cases, mamba1_cases, ssd_cases])
def test_pytorch_implementations_launch_what_the_rules_count(family, dtype):
    report = []
    for op, impl, mode, dims, fn in family(dtype):
        names = kernels(fn)
        want = cost(op, dims, impl, mode, dtype).launches
        report.append((op, impl, mode, len(names), want, names))
    bad = [r for r in report if r[3] != r[4]]
    assert not bad, "\n".join(f"{o}/{i}/{m} ran {n} kernels, rule says {w}: {names}" for o, i, m, n, w, names in bad)
