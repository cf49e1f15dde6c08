"""Gated delta rule kernels of fla-core 0.6 (Triton), op ``gated_delta_rule`` (B, L, H, P, Pv, C).

Backends (impl / modes):
- ``fla.chunk_gated_delta_rule``: chunked / fwd, bwd, fwdbwd -- ``chunk_gated_delta_rule(q, k, v, g,
  beta, scale=P^-1/2, output_final_state=True, chunk_size=C)`` with q, k [B, L, H, P] already
  L2-normalised (``use_qk_l2norm_in_kernel=False``: the analytic op leaves the norm to the norm op),
  v [B, L, H, Pv], g = log decay [B, L, H] fp32 (as GatedDeltaNet computes it:
  -exp(A_log) softplus(a + dt_bias)), beta = sigmoid(b) [B, L, H] at the activation dtype. The final
  state is written (prefill), as the analytic count assumes; the compared outputs are o and, for
  bwd/fwdbwd, the gradients of q, k, v, g, beta.
- ``fla.fused_recurrent_gated_delta_rule``: recurrent / fwd, decode -- ``fused_recurrent_gated_delta_rule``
  (forward only: fla has no backward for it). decode: one token per sequence from an initial state
  [B, H, P, Pv] fp32, ``output_final_state=True``: compared o and the new state (written to a new
  tensor, nothing in place). fwd: L tokens from a zero state, compared o.
References: ``analytic/ops/delta_rule/ref.py`` ``chunk_gated_delta_rule_ref`` (chunked WY form) and ``gated_delta_rule_step_ref``.
"""

from __future__ import annotations

from ..extensions import import_or_unavailable
from .base import Backend, register_backend
from .common import (KernelSpec, Rand, batch_slices, dims_of, gate_reference, prepare_diff, prepare_step, require_cuda,
                     slice_step_for, torch_dtype)

FLA_HINT = "install fla-core (pure Python + Triton) from its sdist or wheel (docs/gpu_setup.md)"


def _inputs(r, b, l, h, p, pv, dt, device):
    import torch
    import torch.nn.functional as F

    f32 = torch.float32
    a_log = torch.log(r.uniform((h,), f32, 1.0, 16.0))
    g = -torch.exp(a_log) * F.softplus(r.normal((b, l, h), f32) + r.dt_bias((h,)))  # [B, L, H] log decay
    return {"q": F.normalize(r.normal((b, l, h, p), f32), dim=-1).to(dt),
            "k": F.normalize(r.normal((b, l, h, p), f32), dim=-1).to(dt),
            "v": r.normal((b, l, h, pv), dt), "g": g,
            "beta": torch.sigmoid(r.normal((b, l, h), f32)).to(dt)}


def _chunked(case, device, seed):
    require_cuda(device)
    gdr = import_or_unavailable("fla.ops.gated_delta_rule", FLA_HINT)
    b, l, h, p, pv, c = dims_of(case, ("B", "L", "H", "P", "Pv", "C"))
    if c not in (16, 32, 64):
        raise ValueError(f"case {case.key()}: fla's chunk_gated_delta_rule takes chunk_size 16, 32 or 64")
    dt = torch_dtype(case.dtype)
    r = Rand(device, seed)
    inputs = _inputs(r, b, l, h, p, pv, dt, device)
    scale = p ** -0.5

    def kernel(x):
        o, _final = gdr.chunk_gated_delta_rule(x["q"], x["k"], x["v"], x["g"], x["beta"], scale=scale,
                                               output_final_state=True, chunk_size=c)
        return o

    def reference(x, hi):
        return gate_reference(case)(x["q"], x["k"], x["v"], x["g"], x["beta"], scale, hi)

    per_b = 8 * (10 * h * l * 64 + 6 * h * l * (p + pv) + 2 * h * p * pv * (l // 64 + 1))
    step = slice_step_for(per_b * (1 if case.mode == "fwd" else 3), b)
    spec = KernelSpec(kernel, reference, inputs, ("q", "k", "v", "g", "beta"),
                      batch_slices(b, step, ("q", "k", "v", "g", "beta"), inputs), tokens=b * l,
                      out_shape=(b, l, h, pv), out_dtype=dt,
                      notes=f"chunk_gated_delta_rule(chunk_size={c}, output_final_state=True), q/k L2-normalised "
                            "outside, g fp32 log decay; final state written, not compared.")
    return prepare_diff(spec, case.mode, r)


def _recurrent(case, device, seed):
    require_cuda(device)
    import torch

    gdr = import_or_unavailable("fla.ops.gated_delta_rule", FLA_HINT)
    b, h, p, pv = dims_of(case, ("B", "H", "P", "Pv"))
    l = 1 if case.mode == "decode" else dims_of(case, ("L",))[0]
    if case.mode == "decode" and case.dims.get("L", 1) != 1:
        raise ValueError(f"decode case {case.key()}: L must be 1 (one token per sequence)")
    dt = torch_dtype(case.dtype)
    r = Rand(device, seed)
    inputs = _inputs(r, b, l, h, p, pv, dt, device)
    scale = p ** -0.5
    if case.mode == "decode":
        inputs["state"] = r.normal((b, h, p, pv), torch.float32, std=0.5)  # [B, H, P, Pv]

        def step_kernel(x):
            o, final = gdr.fused_recurrent_gated_delta_rule(x["q"], x["k"], x["v"], g=x["g"], beta=x["beta"],
                                                            scale=scale, initial_state=x["state"],
                                                            output_final_state=True)
            return [o, final]

        def step_reference(x, hi):
            return gate_reference(case)(x["q"], x["k"], x["v"], x["g"], x["beta"], x["state"], scale, hi)

        return prepare_step(step_kernel, step_reference, inputs, tokens=b,
                            notes="fused_recurrent_gated_delta_rule, one token from a random fp32 state; "
                                  "compared: o and the new state.")

    def kernel(x):
        o, _ = gdr.fused_recurrent_gated_delta_rule(x["q"], x["k"], x["v"], g=x["g"], beta=x["beta"], scale=scale)
        return o

    def reference(x, hi):
        return gate_reference(case)(x["q"], x["k"], x["v"], x["g"], x["beta"], scale, hi)

    spec = KernelSpec(kernel, reference, inputs, (), batch_slices(b, b, ("q", "k", "v", "g", "beta"), inputs),
                      tokens=b * l, out_shape=(b, l, h, pv), out_dtype=dt,
                      notes="fused_recurrent_gated_delta_rule over L tokens from a zero state (forward only).")
    return prepare_diff(spec, "fwd", r)


register_backend(Backend(
    name="fla.chunk_gated_delta_rule", op="gated_delta_rule", impl="chunked", modes=("fwd", "bwd", "fwdbwd"),
    devices=("cuda",), prepare=_chunked, dtypes=("bf16", "fp16", "fp32"),
    description="fla-core chunk_gated_delta_rule (Triton, WY representation)"))
register_backend(Backend(
    name="fla.fused_recurrent_gated_delta_rule", op="gated_delta_rule", impl="recurrent", modes=("fwd", "decode"),
    devices=("cuda",), prepare=_recurrent, dtypes=("bf16", "fp16", "fp32"),
    description="fla-core fused_recurrent_gated_delta_rule (Triton, per-step, forward only)"))
