"""Plain-PyTorch references of S4 (FFT convolution and recurrence).

torch is imported inside each function: importing this module needs no torch.
"""

from __future__ import annotations

import math

from ...registry import Reference
from ..common.inputs import FP32, Input, Recipe, normal


def s4_kernel_ref(log_dt, A, C, L_):
    """S4D-ZOH kernel: log_dt [E], A, C [E, N] complex -> K [E, L] real (Vandermonde product)."""
    import torch
    dt = torch.exp(log_dt)  # [E]
    dtA = A * dt[:, None]  # [E, N]
    c_prime = C * (torch.exp(dtA) - 1.0) / A  # [E, N]
    arg = dtA[..., None] * torch.arange(L_, device=A.device, dtype=dt.dtype)  # [E, N, L]
    return 2 * torch.einsum("en,enl->el", c_prime, torch.exp(arg)).real  # [E, L]


def _acc(u):
    """fp32 (cuFFT has no bf16 transforms of any length), or fp64 when given fp64."""
    import torch
    return torch.promote_types(u.dtype, torch.float32)


def s4_fft_ref(u, log_dt, A, C, D):
    """``fft``: u [B, E, L] real -> y [B, E, L] by FFT convolution with the S4D kernel."""
    import torch
    L_ = u.shape[-1]
    u32 = u.to(_acc(u))
    k = s4_kernel_ref(log_dt, A, C, L_)  # [E, L]
    k_f = torch.fft.rfft(k, n=2 * L_)  # [E, L + 1]
    u_f = torch.fft.rfft(u32, n=2 * L_)  # [B, E, L + 1]
    y = torch.fft.irfft(u_f * k_f, n=2 * L_)[..., :L_]  # [B, E, L]
    return (y + u32 * D[:, None]).to(u.dtype)


def s4_discretize_ref(log_dt, A):
    """ZOH discretization: (Abar, Bbar) [E, N] complex from log_dt [E], A [E, N] (S4D, B = 1)."""
    import torch
    dtA = A * torch.exp(log_dt)[:, None]
    abar = torch.exp(dtA)
    return abar, (abar - 1.0) / A


def s4_step_ref(u_t, h, abar, bbar, C, D):
    """One recurrence step: u_t [B, E], h [B, E, N] complex -> (y_t [B, E], h_new [B, E, N])."""
    import torch
    dtype = u_t.dtype
    u_t = u_t.to(_acc(u_t))
    h = abar * h + bbar * u_t[..., None]  # [B, E, N]
    y = 2 * torch.einsum("ben,en->be", h, C).real + D * u_t  # [B, E]
    return y.to(dtype), h


def s4_recurrent_ref(u, log_dt, A, C, D):
    """``recurrent``: u [B, E, L] -> y [B, E, L], one step at a time from h = 0."""
    import torch
    Bsz, E_, L_ = u.shape
    u32 = u.to(_acc(u))
    abar, bbar = s4_discretize_ref(log_dt, A)
    h = torch.zeros(Bsz, E_, A.shape[-1], dtype=A.dtype, device=u.device)  # [B, E, N]
    ys = []
    for t in range(L_):
        y_t, h = s4_step_ref(u32[:, :, t], h, abar, bbar, C, D)
        ys.append(y_t)
    return torch.stack(ys, dim=-1).to(u.dtype)


REFERENCES = (
    Reference("s4", ("fft",), ("fwd", "bwd", "fwdbwd"), "eager", s4_fft_ref),
    Reference("s4", ("recurrent",), ("fwd", "bwd", "fwdbwd"), "eager", s4_recurrent_ref),
    Reference("s4", ("recurrent",), ("decode",), "eager", s4_step_ref),
)


def s4d_lin_a(d, r, p):
    """S4D-Lin: A[e, n] = -1/2 + i pi n  (complex64)."""
    t = r.torch
    n = t.arange(d["N"], device=r.device, dtype=t.float32)
    return t.complex(t.full_like(n, -0.5), math.pi * n).repeat(d["E"], 1)


def s4_c(d, r, p):
    t = r.torch
    return t.complex(r.normal((d["E"], d["N"]), std=math.sqrt(0.5)), r.normal((d["E"], d["N"]), std=math.sqrt(0.5)))


def s4_log_dt(d, r, p):
    return r.uniform((d["E"],), lo=math.log(1e-3), hi=math.log(1e-1))


def s4_discretized(which: int):
    """(Abar, Bbar) of a fresh log_dt and S4D-Lin A, made once and shared by the two inputs."""
    def make(d, r, p):
        if "_s4_disc" not in p:
            p["_s4_disc"] = s4_discretize_ref(s4_log_dt(d, r, p), s4d_lin_a(d, r, p))
        return p["_s4_disc"][which]
    return make


def s4_state(d, r, p):
    t = r.torch
    return t.complex(r.normal((d["B"], d["E"], d["N"]), std=0.1), r.normal((d["B"], d["E"], d["N"]), std=0.1))


_PREFILL = (
    Input("u", normal("B", "E", "L")), Input("log_dt", s4_log_dt, **FP32), Input("A", s4d_lin_a, **FP32),
    Input("C", s4_c, **FP32), Input("D", normal("E"), **FP32),
)
RECIPES = (
    Recipe("s4", "fft", _PREFILL, l1_decode=False, dtypes=("fp32",), notes="torch.fft has no bf16 path; fp32 only"),
    Recipe("s4", "recurrent", _PREFILL, step=(
        Input("u_t", normal("B", "E")), Input("h", s4_state, **FP32),
        Input("abar", s4_discretized(0), **FP32), Input("bbar", s4_discretized(1), **FP32),
        Input("C", s4_c, **FP32), Input("D", normal("E"), **FP32)),
        backend="torch_ref.recurrent", dtypes=("fp32",), notes="complex state; fp32 only"),
)
