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
activations standard normal, raw dt N(0, 0.5^2). References: the registry's gate references (``analytic/ops/mamba1/ref.py``, ``ssd/ref.py``: plain PyTorch, chunked).

Mamba-3 (the ``mamba3`` op):
Mamba-3 SISO kernels of mamba-ssm 2.3.x (Triton).

Backends (op / impl / modes):
- ``mamba_ssm.mamba3_siso_combined``: mamba3 / siso / fwd, bwd, fwdbwd -- ``mamba3_siso_combined``
  with the tensors ``Mamba3.forward`` (is_mimo=False, ngroups=1) passes: Q = C and K = B
  [B, L, 1, N] bf16 (RMS-normalised in the module: unit-RMS here), V = x and Z = z [B, L, H, P],
  ADT = A dt and DT [B, H, L] fp32, Trap [B, H, L] (pre-sigmoid), Q_bias = C_bias and
  K_bias = B_bias [H, N] fp32 (module init 1), Angles [B, L, H, N/4] fp32 (rope_fraction 0.5),
  D [H] fp32, chunk_size 64 (the module's default), no input states.
  The wrapper casts Q, K, V, Trap, Angles, Z to bf16 whatever it is given: bf16 only.
- ``mamba_ssm.mamba3_siso_step``: mamba3 / siso / decode -- the Triton step kernel
  ``mamba3_siso_step`` with input states (angle [B, H, N/4], ssm [B, H, P, N], k [B, H, N],
  v [B, H, P]); it writes new state tensors (nothing in place). Compared: the output, the new SSM
  state and the new k state. The new angle state is not compared element by element: it is reduced
  mod 2 pi, and an angle near the wrap point may land on either side in fp32; it enters the
  output and the k state through the rotation. (``Mamba3.step`` itself calls a CuTe-DSL kernel that
  needs nvidia-cutlass-dsl and quack-kernels; this backend times the Triton step kernel.)

MIMO (``mamba3_mimo``, TileLang) is not registered: it needs tilelang, and there is no plain-PyTorch
reference for it here, so the correctness gate could not check it.
References: ``analytic/ops/mamba3/ref.py`` ``mamba3_siso_ref`` (chunked) and ``mamba3_siso_step_ref``.
"""

from __future__ import annotations

from ..extensions import import_mamba_ssm
from .base import Backend, register_backend
from .common import (KernelSpec, Rand, batch_slices, dims_of, gate_reference, prepare_diff, prepare_step, require_cuda,
                     slice_step_for, torch_dtype)

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
        return gate_reference(case)(x["u"], x["delta"], x["A"], x["B"], x["C"], x["D"], x["z"], x["delta_bias"], hi)

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
        return gate_reference(case)(x["state"], x["x"], x["dt"], x["A"], x["B"], x["C"], x["D"], x["z"],
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
        return gate_reference(case)(x["x"], x["dt"], x["A"], x["B"], x["C"], x["D"], x["dt_bias"], hi)

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
        return gate_reference(case)(x["state"], x["x"], x["dt"], x["A"], x["B"], x["C"], x["D"], x["dt_bias"])

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


# Mamba-3 ------------------------------------------------------------------------------------------
MAMBA3_CHUNK = 64  # Mamba3's default chunk_size for SISO


def _check(case):
    if case.dims.get("M", 1) != 1:
        raise ValueError(f"case {case.key()}: SISO has MIMO rank M = 1")
    if case.dtype != "bf16":
        raise ValueError(f"case {case.key()}: mamba3_siso_combined computes in bf16 only")


def _common(r, device, b, h, p, n, lead):
    """Inputs shared by prefill (lead = (B, L)) and decode (lead = (B,)); time-like [B, H, (L)]."""
    import torch
    import torch.nn.functional as F

    bf, f32 = torch.bfloat16, torch.float32
    s = n // 4  # num_rope_angles for rope_fraction 0.5
    hl = (lead[0], h) + tuple(lead[1:])  # [B, H, L] or [B, H]
    dt = F.softplus(r.normal(hl, f32) + r.dt_bias((h,))[(slice(None),) + (None,) * (len(lead) - 1)])
    a = torch.clamp(-F.softplus(r.normal(hl, f32)), max=-1e-4)
    return {
        "Q": r.normal(lead + (1, n), bf), "K": r.normal(lead + (1, n), bf),  # [B, (L), 1, N]
        "V": r.normal(lead + (h, p), bf), "Z": r.normal(lead + (h, p), bf),  # [B, (L), H, P]
        "ADT": a * dt, "DT": dt, "Trap": r.normal(hl, bf),
        "Q_bias": torch.ones(h, n, device=device, dtype=f32), "K_bias": torch.ones(h, n, device=device, dtype=f32),
        # fp32 as the module passes them, holding bf16 values: the wrapper rounds Angles to bf16, and
        # the gate should measure arithmetic error, not that input rounding
        "Angles": r.normal(lead + (h, s), bf).to(f32), "D": torch.ones(h, device=device, dtype=f32),
    }


def _siso(case, device, seed):
    require_cuda(device)
    _check(case)
    m3 = import_mamba_ssm("mamba_ssm.ops.triton.mamba3.mamba3_siso_combined")
    b, l, h, p, n = dims_of(case, ("B", "L", "H", "P", "N"))
    r = Rand(device, seed)
    inputs = _common(r, device, b, h, p, n, (b, l))
    names = ("Q", "K", "V", "ADT", "DT", "Trap", "Q_bias", "K_bias", "Angles", "D", "Z")

    def kernel(x):
        return m3.mamba3_siso_combined(*(x[k] for k in names), chunk_size=MAMBA3_CHUNK)

    def reference(x, hi):
        return gate_reference(case)(*(x[k] for k in names), hi=hi, chunk=MAMBA3_CHUNK)

    step = slice_step_for(8 * (8 * l * h * n + 6 * h * l * MAMBA3_CHUNK + 3 * h * p * n * (l // MAMBA3_CHUNK + 1)), b)
    batched = ("Q", "K", "V", "ADT", "DT", "Trap", "Angles", "Z")
    spec = KernelSpec(kernel, reference, inputs, names, batch_slices(b, step, batched, inputs),
                      tokens=b * l, out_shape=(b, l, h, p), out_dtype=torch_dtype("bf16"),
                      notes="mamba3_siso_combined (Triton), chunk_size 64, ngroups 1, D and Z, no input states.")
    return prepare_diff(spec, case.mode, r)


def _step(case, device, seed):
    require_cuda(device)
    _check(case)
    import torch

    st = import_mamba_ssm("mamba_ssm.ops.triton.mamba3.mamba3_siso_step")
    b, h, p, n = dims_of(case, ("B", "H", "P", "N"))
    if case.dims.get("L", 1) != 1:
        raise ValueError(f"decode case {case.key()}: L must be 1 (one token per sequence)")
    r = Rand(device, seed)
    x = _common(r, device, b, h, p, n, (b,))  # Q, K [B, 1, N]: nheads_qk = 1
    f32 = torch.float32
    x.update(angle_state=r.uniform((b, h, n // 4), f32, 0.0, 6.28), ssm_state=r.normal((b, h, p, n), f32, std=0.5),
             k_state=r.normal((b, h, n), f32), v_state=r.normal((b, h, p), torch.bfloat16))
    names = ("Q", "K", "V", "ADT", "DT", "Trap", "Q_bias", "K_bias", "Angles", "D", "Z")

    def kernel(t):
        out, states = st.mamba3_siso_step(*(t[k] for k in names),
                                          Input_States=(t["angle_state"], t["ssm_state"], t["k_state"], t["v_state"]))
        return [out, states[1], states[2]]

    def reference(t, hi):
        out, _angle, ssm, k = gate_reference(case)(*(t[k] for k in names), t["angle_state"], t["ssm_state"],
                                                   t["k_state"], t["v_state"], hi)
        return [out, ssm, k]

    return prepare_step(kernel, reference, x, tokens=b,
                        notes="mamba3_siso_step (Triton), nheads_qk 1; compared: output, new SSM state, new k "
                              "state (new angle state not compared: mod-2pi wrap).")


register_backend(Backend(
    name="mamba_ssm.mamba3_siso_combined", op="mamba3", impl="siso", modes=("fwd", "bwd", "fwdbwd"),
    devices=("cuda",), prepare=_siso, dtypes=("bf16",),
    description="mamba-ssm Mamba-3 SISO prefill/training (Triton mamba3_siso_combined)"))
register_backend(Backend(
    name="mamba_ssm.mamba3_siso_step", op="mamba3", impl="siso", modes=("decode",),
    devices=("cuda",), prepare=_step, dtypes=("bf16",),
    description="mamba-ssm Mamba-3 SISO decode step (Triton mamba3_siso_step)"))
