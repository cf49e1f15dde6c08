"""Mamba-3's module-level pre-processing (``Mamba3.forward`` of mamba_ssm/modules/mamba3.py, before
``mamba3_siso_combined`` / ``mamba3_mimo_combined``): eight eager PyTorch kernels on the per-head
slices of the in-projection.

    _A = -F.softplus(dd_A.to(torch.float32)); _A = torch.clamp(_A, max=-A_floor)
    DT = F.softplus(dd_dt + dt_bias)            # dt_bias [H] fp32: the sum is promoted to fp32
    ADT = _A * DT                               # DT and ADT then rearranged "b l h -> b h l" (views)
    angles = angles.unsqueeze(-2).expand(-1, -1, H, -1).to(torch.float32)   # [B, L, H, S]

Op ``mamba3_prep`` (B, L, H, N; S = N / 4 rotary angles per head, rope_fraction 1/2, as op
``mamba3``), implementation ``torch_eager``; n = B*L*H, e bytes of the dtype (bf16 / fp16: the
Mamba-3 kernels' dtypes). Per element: softplus 1 + 2 transcendentals (twice), neg 1, clamp 1 (a
min), add 1, mul 1. Bytes as each kernel moves them; the angle cast reads the [B, L, S] angles once
from device memory (the broadcast over H re-reads them from cache) and writes [B, L, H, S] fp32.
Inputs: dd_A, dd_dt [B, L, H] and angles [B, L, S] (activations, e), dt_bias [H] (weights, fp32);
outputs DT, ADT [B, L, H] and the angles [B, L, H, S] (fp32). 8 launches.

Backward (autograd, 14 kernels): ADT's MulBackward (two muls), the accumulation of DT's two
gradients (add), the angles' cast back and the sum over the H copies, softplus_backward of DT, the
add's gradients (dd_dt cast back to e, dt_bias summed over B and L), clamp's backward (``self <= max``
mask, the scalar zero, ``where``), neg's, softplus_backward of A, the cast back of dd_A.
Decode (``Mamba3.step``'s ``_preprocess``) differs (sigmoid of trap, no ADT, no angle cast) and runs
with the CuTe step, which the ``mamba3`` decode rule does not model: no decode rule here.
"""

from __future__ import annotations

from ...conventions import SOFTPLUS, SOFTPLUS_BWD, nbytes
from ...cost import Cost
from ...registry import Impl, Op, register
from ...symbols import B, H, L, N
from ..common.kernels import Kernel, Tensor, kernel_chain

F32 = 4
S = N / 4  # rotary angles per head (rope_fraction 1/2), as op mamba3
n = B * L * H


def _f(name: str, cls: str = "intermediates", elements=n) -> Tensor:
    return Tensor(name, cls, elements, F32)


def _prep_rule(mode: str, dtype: str) -> Cost:
    e = nbytes(dtype)
    dd_a, dd_dt = Tensor("dd_A", "activations", n, e), Tensor("dd_dt", "activations", n, e)
    angles = Tensor("angles", "activations", B * L * S, e)
    dt_bias = _f("dt_bias", "weights", H)
    a32, sp, nsp, a_, dtb = _f("dd_A_fp32"), _f("softplus_A"), _f("neg_softplus_A"), _f("A"), _f("dd_dt_plus_bias")
    dt, adt = _f("DT", "activations"), _f("ADT", "activations")
    ang32 = _f("angles_fp32", "activations", B * L * H * S)
    sp_v, sp_t = SOFTPLUS[0] * n, SOFTPLUS[1] * n
    if mode == "fwd":
        kernels = [
            Kernel("aten._to_copy (dd_A)", (dd_a,), (a32,)),
            Kernel("aten.softplus (A)", (a32,), (sp,), sp_v, sp_t),
            Kernel("aten.neg", (sp,), (nsp,), n),
            Kernel("aten.clamp", (nsp,), (a_,), n),
            Kernel("aten.add (dd_dt + dt_bias)", (dd_dt, dt_bias), (dtb,), n),
            Kernel("aten.softplus (DT)", (dtb,), (dt,), sp_v, sp_t),
            Kernel("aten.mul (ADT)", (a_, dt), (adt,), n),
            Kernel("aten._to_copy (angles, expanded over H)", (angles,), (ang32,)),
        ]
        return kernel_chain(kernels, [dd_a, dd_dt, angles, dt_bias], [dt, adt, ang32])
    if mode == "bwd":
        d_dt, d_adt, d_ang32 = _f("dDT", "activations"), _f("dADT", "activations"), _f("dangles_fp32", "activations", B * L * H * S)
        d_a, d_dt2, d_dt_sum, d_dtb = _f("dA"), _f("dDT_from_ADT"), _f("dDT_total"), _f("d_dd_dt_plus_bias")
        d_ang_e = Tensor("dangles_expanded", "intermediates", B * L * H * S, e)
        d_angles = Tensor("dangles", "activations", B * L * S, e)
        d_dd_dt, d_bias = Tensor("d_dd_dt", "activations", n, e), _f("d_dt_bias", "weights", H)
        mask = Tensor("clamp_mask", "intermediates", n, 1)
        zero = _f("zero", "intermediates", 1)
        d_nsp, d_sp, d_a32 = _f("d_neg_softplus_A"), _f("d_softplus_A"), _f("d_dd_A_fp32")
        d_dd_a = Tensor("d_dd_A", "activations", n, e)
        kernels = [
            Kernel("aten.mul (dA = dADT * DT)", (d_adt, dt), (d_a,), n),
            Kernel("aten.mul (dDT' = dADT * A)", (d_adt, a_), (d_dt2,), n),
            Kernel("aten.add (dDT + dDT')", (d_dt, d_dt2), (d_dt_sum,), n),
            Kernel("aten._to_copy (dangles to e)", (d_ang32,), (d_ang_e,)),
            Kernel("aten.sum (dangles over H)", (d_ang_e,), (d_angles,), B * L * H * S),
            Kernel("aten.softplus_backward (DT)", (d_dt_sum, dtb), (d_dtb,), SOFTPLUS_BWD[0] * n, SOFTPLUS_BWD[1] * n),
            Kernel("aten._to_copy (d dd_dt to e)", (d_dtb,), (d_dd_dt,)),
            Kernel("aten.sum (d dt_bias over B, L)", (d_dtb,), (d_bias,), n),
            Kernel("aten.le (clamp mask)", (nsp,), (mask,), n),
            Kernel("aten.scalar_tensor (0)", (), (zero,)),
            Kernel("aten.where (clamp backward)", (mask, d_a, zero), (d_nsp,)),
            Kernel("aten.neg (backward)", (d_nsp,), (d_sp,), n),
            Kernel("aten.softplus_backward (A)", (d_sp, a32), (d_a32,), SOFTPLUS_BWD[0] * n, SOFTPLUS_BWD[1] * n),
            Kernel("aten._to_copy (d dd_A to e)", (d_a32,), (d_dd_a,)),
        ]
        return kernel_chain(kernels, [d_dt, d_adt, d_ang32, dt, a_, dtb, nsp, a32],
                            [d_dd_a, d_dd_dt, d_bias, d_angles])
    raise ValueError(mode)


MAMBA3_PREP = register(Op(
    name="mamba3_prep",
    family="mamba3",
    summary="Mamba-3's eager pre-processing of A, dt and the rotary angles (8 kernels; backward 14)",
    dims=("B", "L", "H", "N"),
    impls=(Impl("torch_eager", "the module's eager PyTorch ops", _prep_rule, ("fwd", "bwd")),),
    default_impl="torch_eager",
    reference="ssmbench.analytic.ops.mamba3.ref:mamba3_prep_ref",
    dtypes=("bf16", "fp16"),
))
