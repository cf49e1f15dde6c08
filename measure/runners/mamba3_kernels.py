"""Mamba-3 SISO kernels of mamba-ssm 2.3.x (Triton).

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
References: ``_refs_ssm.mamba3_siso_ref`` (chunked) and ``mamba3_siso_step_ref``.
"""

from __future__ import annotations

from .base import Backend, register_backend
from ._kernel_util import (KernelSpec, Rand, batch_slices, dims_of, import_mamba_ssm, prepare_diff, prepare_step,
                           require_cuda, slice_step_for, torch_dtype)
from ._refs_ssm import mamba3_siso_ref, mamba3_siso_step_ref

CHUNK = 64  # Mamba3's default chunk_size for SISO


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
        return m3.mamba3_siso_combined(*(x[k] for k in names), chunk_size=CHUNK)

    def reference(x, hi):
        return mamba3_siso_ref(*(x[k] for k in names), hi=hi, chunk=CHUNK)

    step = slice_step_for(8 * (8 * l * h * n + 6 * h * l * CHUNK + 3 * h * p * n * (l // CHUNK + 1)), b)
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
        out, _angle, ssm, k = mamba3_siso_step_ref(*(t[k] for k in names), t["angle_state"], t["ssm_state"],
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
