"""mamba-ssm kernels (state-spaces/mamba 2.3.x): Mamba-1 selective scan (CUDA), Mamba-2 SSD (Triton),
and their decode steps (Triton ``selective_state_update``).

Backends (op / impl / modes):
- ``mamba_ssm.selective_scan_cuda``: mamba1_scan / fused / fwd, bwd, fwdbwd --
  ``selective_scan_fn(u, delta, A, B, C, D, z, delta_bias, delta_softplus=True)``, inputs laid out as
  ``Mamba.forward`` passes them: u, delta, z [B, E, L]; B, C [B, N, L]; A [E, N], D, delta_bias [E]
  in fp32. Gradients compared: u, delta, A, B, C, D, z, delta_bias.
- ``mamba_ssm.selective_state_update``: mamba1_scan / fused / decode -- one token, state [B, E, N] in
  fp32 (the analytic convention; ``Mamba.allocate_inference_cache`` keeps it at the model dtype),
  D and dt_bias passed (with ``D=None`` or ``dt_bias=None`` 2.3.2.post1 fails inside the launch).
  And ssd / ``SSD_DECODE_IMPL`` / decode -- as ``Mamba2.step`` calls it: state [B, H, P, N] fp32,
  A, dt, dt_bias, D broadcast over P and N with stride 0 (the kernel's ``tie_hdim`` path), z=None
  (Mamba-2 applies its gated RMSNorm after the scan). The state is updated in place; the compared
  outputs are the output and the new state.
- ``mamba_ssm.mamba_chunk_scan_combined``: ssd / chunked / fwd, bwd, fwdbwd --
  ``mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size=C, D=D, z=None, dt_bias, dt_softplus=True)``
  as ``Mamba2`` (rmsnorm=True) calls it: x [B, L, H, P], dt [B, L, H], B, C [B, L, G, N], A, D,
  dt_bias [H] fp32. Gradients compared: x, dt, A, B, C, D, dt_bias.

Input values follow the modules' initialisations: A = -(1..N) per channel (Mamba-1 S4D-real),
A ~ -U[1, 16] per head (Mamba-2), dt_bias = softplus^-1(dt), dt log-uniform in [1e-3, 0.1], D = 1;
activations standard normal, raw dt N(0, 0.5^2). References: ``_refs_ssm`` (plain PyTorch, chunked).
"""

from __future__ import annotations

from .base import Backend, register_backend
from ._kernel_util import (KernelSpec, Rand, batch_slices, dims_of, import_mamba_ssm, prepare_diff, prepare_step,
                           require_cuda, slice_step_for, torch_dtype)
from ._refs_ssm import selective_scan_ref, selective_scan_step_ref, ssd_ref, ssd_step_ref

SSD_DECODE_IMPL = "chunked"  # the analytic ssd implementation whose decode rule is selective_state_update


def _mamba1_scan(case, device, seed):
    require_cuda(device)
    import torch

    sif = import_mamba_ssm("mamba_ssm.ops.selective_scan_interface")
    b, l, e, n = dims_of(case, ("B", "L", "E", "N"))
    dt = torch_dtype(case.dtype)
    r = Rand(device, seed)
    f32 = torch.float32
    inputs = {
        "u": r.normal((b, e, l), dt),  # [B, E, L]
        "delta": r.normal((b, e, l), dt, std=0.5),  # [B, E, L] before softplus
        "A": -torch.arange(1, n + 1, device=device, dtype=f32).repeat(e, 1),  # [E, N]
        "B": r.normal((b, n, l), dt),  # [B, N, L]
        "C": r.normal((b, n, l), dt),  # [B, N, L]
        "D": torch.ones(e, device=device, dtype=f32),  # [E]
        "z": r.normal((b, e, l), dt),  # [B, E, L]
        "delta_bias": r.dt_bias((e,)),  # [E]
    }

    def kernel(x):
        return sif.selective_scan_fn(x["u"], x["delta"], x["A"], x["B"], x["C"], x["D"], x["z"],
                                     x["delta_bias"], delta_softplus=True)

    def reference(x, hi):
        return selective_scan_ref(x["u"], x["delta"], x["A"], x["B"], x["C"], x["D"], x["z"], x["delta_bias"], hi)

    diff = ("u", "delta", "A", "B", "C", "D", "z", "delta_bias")
    # fp64 autograd through the recurrence keeps ~4 [E, N, L] tensors per batch element
    step = b if case.mode == "fwd" else slice_step_for(4 * 8 * e * n * l, b)
    spec = KernelSpec(kernel, reference, inputs, diff, batch_slices(b, step, ("u", "delta", "B", "C", "z"), inputs),
                      tokens=b * l, out_shape=(b, e, l), out_dtype=dt,
                      notes="selective_scan_fn with delta_softplus, D and z (Mamba.forward's slow path layout).")
    return prepare_diff(spec, case.mode, r)


def _mamba1_decode(case, device, seed):
    require_cuda(device)
    import torch

    ssu = import_mamba_ssm("mamba_ssm.ops.triton.selective_state_update")
    b, e, n = dims_of(case, ("B", "E", "N"))
    if case.dims.get("L", 1) != 1:
        raise ValueError(f"decode case {case.key()}: L must be 1 (one token per sequence)")
    dt = torch_dtype(case.dtype)
    r = Rand(device, seed)
    f32 = torch.float32
    inputs = {
        "state": r.normal((b, e, n), f32, std=0.5),  # [B, E, N]
        "x": r.normal((b, e), dt), "dt": r.normal((b, e), dt, std=0.5), "z": r.normal((b, e), dt),
        "A": -torch.arange(1, n + 1, device=device, dtype=f32).repeat(e, 1),  # [E, N]
        "B": r.normal((b, n), dt), "C": r.normal((b, n), dt),
        "D": torch.ones(e, device=device, dtype=f32), "dt_bias": r.dt_bias((e,)),
    }

    def kernel(x):
        out = ssu.selective_state_update(x["state"], x["x"], x["dt"], x["A"], x["B"], x["C"], x["D"], z=x["z"],
                                         dt_bias=x["dt_bias"], dt_softplus=True)
        return [out, x["state"]]

    def reference(x, hi):
        return selective_scan_step_ref(x["state"], x["x"], x["dt"], x["A"], x["B"], x["C"], x["D"], x["z"],
                                       x["dt_bias"])

    return prepare_step(kernel, reference, inputs, tokens=b, state_names=("state",),
                        notes="selective_state_update, state [B, E, N] fp32 updated in place; "
                              "compared: output and new state.")


def _ssd_params(r, device, h: int):
    import torch

    return {"A": -r.uniform((h,), torch.float32, 1.0, 16.0), "D": torch.ones(h, device=device, dtype=torch.float32),
            "dt_bias": r.dt_bias((h,))}


def _ssd_chunked(case, device, seed):
    require_cuda(device)
    sc = import_mamba_ssm("mamba_ssm.ops.triton.ssd_combined")
    b, l, h, p, n, g, c = dims_of(case, ("B", "L", "H", "P", "N", "G", "C"))
    if h % g:
        raise ValueError(f"case {case.key()}: H must be divisible by G")
    dt = torch_dtype(case.dtype)
    r = Rand(device, seed)
    inputs = {"x": r.normal((b, l, h, p), dt), "dt": r.normal((b, l, h), dt, std=0.5),  # [B, L, H, P], [B, L, H]
              "B": r.normal((b, l, g, n), dt), "C": r.normal((b, l, g, n), dt), **_ssd_params(r, device, h)}

    def kernel(x):
        return sc.mamba_chunk_scan_combined(x["x"], x["dt"], x["A"], x["B"], x["C"], chunk_size=c, D=x["D"], z=None,
                                            dt_bias=x["dt_bias"], dt_softplus=True)

    def reference(x, hi):
        return ssd_ref(x["x"], x["dt"], x["A"], x["B"], x["C"], x["D"], x["dt_bias"], hi)

    diff = ("x", "dt", "A", "B", "C", "D", "dt_bias")
    # per batch element, fp64: the [H, L, 128] intra-chunk weights and the per-chunk states, a few of each
    per_b = 8 * (6 * h * l * 128 + 3 * h * p * n * (l // 128 + 1))
    step = slice_step_for(per_b * (1 if case.mode == "fwd" else 2), b)
    spec = KernelSpec(kernel, reference, inputs, diff, batch_slices(b, step, ("x", "dt", "B", "C"), inputs),
                      tokens=b * l, out_shape=(b, l, h, p), out_dtype=dt,
                      notes=f"mamba_chunk_scan_combined, chunk_size={c}, z=None, dt_softplus (Mamba2, rmsnorm=True).")
    return prepare_diff(spec, case.mode, r)


def _ssd_decode(case, device, seed):
    require_cuda(device)
    import torch

    ssu = import_mamba_ssm("mamba_ssm.ops.triton.selective_state_update")
    b, h, p, n, g = dims_of(case, ("B", "H", "P", "N", "G"))
    if case.dims.get("L", 1) != 1:
        raise ValueError(f"decode case {case.key()}: L must be 1 (one token per sequence)")
    dt = torch_dtype(case.dtype)
    r = Rand(device, seed)
    inputs = {"state": r.normal((b, h, p, n), torch.float32, std=0.5),  # [B, H, P, N]
              "x": r.normal((b, h, p), dt), "dt": r.normal((b, h), dt, std=0.5),
              "B": r.normal((b, g, n), dt), "C": r.normal((b, g, n), dt), **_ssd_params(r, device, h)}

    def kernel(x):
        # exactly Mamba2.step's call: per-head scalars broadcast with stride 0 (tie_hdim)
        out = ssu.selective_state_update(
            x["state"], x["x"], x["dt"][..., None].expand(b, h, p), x["A"][:, None, None].expand(h, p, n),
            x["B"], x["C"], x["D"][:, None].expand(h, p), z=None, dt_bias=x["dt_bias"][:, None].expand(h, p),
            dt_softplus=True)
        return [out, x["state"]]

    def reference(x, hi):
        return ssd_step_ref(x["state"], x["x"], x["dt"], x["A"], x["B"], x["C"], x["D"], x["dt_bias"])

    return prepare_step(kernel, reference, inputs, tokens=b, state_names=("state",),
                        notes="selective_state_update as Mamba2.step calls it (tie_hdim, z=None); state "
                              "[B, H, P, N] fp32 updated in place; compared: output and new state.")


register_backend(Backend(
    name="mamba_ssm.selective_scan_cuda", op="mamba1_scan", impl="fused", modes=("fwd", "bwd", "fwdbwd"),
    devices=("cuda",), prepare=_mamba1_scan,
    description="mamba-ssm selective_scan_fn (CUDA extension selective_scan_cuda)"))
register_backend(Backend(
    name="mamba_ssm.selective_state_update", op="mamba1_scan", impl="fused", modes=("decode",),
    devices=("cuda",), prepare=_mamba1_decode,
    description="mamba-ssm selective_state_update (Triton), Mamba-1 layout"))
register_backend(Backend(
    name="mamba_ssm.mamba_chunk_scan_combined", op="ssd", impl="chunked", modes=("fwd", "bwd", "fwdbwd"),
    devices=("cuda",), prepare=_ssd_chunked,
    description="mamba-ssm mamba_chunk_scan_combined (Triton SSD: 5 stage kernels)"))
register_backend(Backend(
    name="mamba_ssm.selective_state_update", op="ssd", impl=SSD_DECODE_IMPL, modes=("decode",),
    devices=("cuda",), prepare=_ssd_decode,
    description="mamba-ssm selective_state_update (Triton), Mamba-2 layout as in Mamba2.step"))
