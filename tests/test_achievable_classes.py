"""The achievable model's tensor-instruction classes and cache re-reads (analytic/achievable.py,
analytic/execution.py): the mma.sync rate of sm80 kernels, the selective scan's B/C re-reads from L2,
the schema's checks of ``compute.tensor_mma_sync``, and the probe kernel's FLOP count."""

from __future__ import annotations

import pytest
from ssmbench.analytic import execution
from ssmbench.analytic.achievable import estimate
from ssmbench.analytic.cases import case_cost
from ssmbench.analytic.cost import Cost
from ssmbench.hwspecs import get_spec, parse_spec
from test_achievable import toy_spec
from test_roofline import GRAPH_NODE, L2_BW, SFU, TENSOR_BF16, VECTOR

MMA_BF16 = 60e12


def mma_spec(**rates):
    s = toy_spec()
    d = s.model_dump(mode="json", exclude_none=True)
    d["compute"]["tensor_mma_sync"] = {dt: {"value": v, "source": "a"} for dt, v in rates.items()}
    return parse_spec(d)


def test_mma_sync_kernels_run_their_matmuls_at_the_class_rate():
    spec = mma_spec(bf16="60 TFLOP/s")
    c = Cost(tensor={"bf16": 3e12}, launches=1)
    full, mma = estimate(c, spec), estimate(c, spec, mma_sync=True)
    assert full.times_s["tensor"] == pytest.approx(3e12 / TENSOR_BF16)
    assert mma.times_s["tensor"] == pytest.approx(3e12 / MMA_BF16)
    assert mma.gpu_s == pytest.approx(GRAPH_NODE + 3e12 / MMA_BF16)
    assert "compute.tensor_mma_sync.bf16" not in mma.not_modelled


def test_a_spec_without_the_class_rate_uses_the_full_rate_and_says_so():
    c = Cost(tensor={"bf16": 3e12}, launches=1)
    e = estimate(c, toy_spec(), mma_sync=True)
    assert e.times_s["tensor"] == pytest.approx(3e12 / TENSOR_BF16)
    assert "compute.tensor_mma_sync.bf16" in e.not_modelled
    # a kernel that does not issue mma.sync does not report the missing key
    assert "compute.tensor_mma_sync.bf16" not in estimate(c, toy_spec()).not_modelled


def test_schema_rejects_a_class_rate_above_the_peak_or_without_one():
    with pytest.raises(ValueError, match="exceeds compute.tensor.bf16"):
        mma_spec(bf16="200 TFLOP/s")
    with pytest.raises(ValueError, match="no compute.tensor.int4 rate"):
        mma_spec(int4="1 TFLOP/s")
    with pytest.raises(ValueError, match="unknown dtype"):
        mma_spec(bf17="1 TFLOP/s")


def test_rereads_cross_l2_and_add_to_serial_phases():
    spec = toy_spec()
    c = Cost(vector=1e12, transcendental=1e11, launches=1)
    reread = 1e12  # 0.2 s at L2_BW: the largest phase
    over = estimate(c, spec, l2_reread=reread)
    ser = estimate(c, spec, serial=True, l2_reread=reread)
    assert over.times_s["l2"] == pytest.approx(reread / L2_BW)
    assert over.gpu_s == pytest.approx(GRAPH_NODE + max(1e12 / VECTOR, 1e11 / SFU, reread / L2_BW))
    assert ser.gpu_s == pytest.approx(GRAPH_NODE + 1e12 / VECTOR + 1e11 / SFU + reread / L2_BW)
    assert ser.bottleneck == "l2"


def test_execution_traits_name_the_instruction_class():
    assert execution.tensor_instr("attention_causal", "fa2", "torch.sdpa.flash") == "mma_sync"
    assert execution.tensor_instr("attention_causal", "fa2", "torch.sdpa.efficient") == "mma_sync"
    assert execution.tensor_instr("attention_causal", "fa2", "torch.sdpa.cudnn") == "full"
    assert execution.tensor_instr("attention_causal", "fa3") == "full"
    assert execution.tensor_instr("attention_causal", "splitkv") == "mma_sync"
    assert execution.tensor_instr("linear", "cublas") == "full"


@pytest.mark.parametrize("dtype,e", [("bf16", 2), ("fp32", 4)])
def test_selective_scan_rereads_b_and_c_once_per_channel(dtype, e):
    d = {"B": 2, "E": 3, "L": 5, "N": 7}
    n = d["B"] * d["E"] * d["L"] * d["N"]

    def rr(mode):
        return execution.l2_reread_bytes("mamba1_scan", "fused", d, dtype, mode)

    assert rr("fwd") == 2 * n * e
    assert rr("bwd") == 2 * n * e + 2 * n * 4
    assert rr("fwdbwd") == 2 * (2 * n * e) + 2 * n * 4
    assert rr("decode") == 0
    assert execution.l2_reread_bytes("linear", "cublas", {"B": 1}, dtype, "fwd") == 0


def test_h200_selective_scan_is_not_labelled_special_function_and_fp32_costs_twice():
    """Issue #13: the scan's time follows bytes (fp32 ~2x bf16 at the same exp count, measured 628 vs
    317 us at B=2, E=2048, L=4096, N=16), so neither dtype may be labelled special_function."""
    spec = get_spec("h200-sxm")
    dims = {"B": 2, "E": 2048, "L": 4096, "N": 16}
    est = {}
    for dt in ("bf16", "fp32"):
        c = execution.as_measured(case_cost("mamba1_scan", dims, impl="fused", mode="fwd", dtype=dt),
                                  "mamba_ssm.selective_scan_cuda", "fwd")
        est[dt] = estimate(c, spec, serial=execution.serial_engines("mamba1_scan", "fused"),
                           l2_reread=execution.l2_reread_bytes("mamba1_scan", "fused", dims, dt, "fwd"))
        assert est[dt].bottleneck != "special_function"
        assert est[dt].bottleneck == "l2"
    assert est["fp32"].times_s["l2"] == pytest.approx(2 * est["bf16"].times_s["l2"], rel=0.01)
    assert est["fp32"].gpu_s > 1.3 * est["bf16"].gpu_s


def test_probe_kernel_flop_count():
    from ssmbench.measure import _probe_mma as pm

    assert pm.FLOPS_PER_MMA == 2 * 16 * 8 * 16
    assert pm.mma_flops(3, 5) == 3 * pm.WARPS_PER_BLOCK * 5 * pm.CHAINS * 2 * 16 * 8 * 16


@pytest.mark.gpu
def test_probe_mma_sync_rate_is_within_the_peak():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from ssmbench.measure import _probe_mma as pm

    ext = pm.build()
    out = torch.empty(132 * 256, device="cuda")
    ext.mma_loop(out, 132, 64, True)
    torch.cuda.synchronize()
    assert torch.isfinite(out).all()


def test_a_step_names_only_the_class_rates_its_mma_sync_kernels_use():
    # a step's not_modelled lists compute.tensor_mma_sync.<dtype> only for dtypes an mma.sync kernel of
    # the step runs matmuls in: not fp64 for a bf16 Mamba-2 prefill (no mma.sync kernel at all), and bf16
    # for a Llama prefill (FlashAttention-2) on a spec that lacks that class rate
    from ssmbench import predict

    mamba = predict("mamba2-2.7b", hw="h200-sxm", phase="prefill", batch=1, seqlen=4096).to_dict()["total"]["achievable"]
    assert not any(k.startswith("compute.tensor_mma_sync.") for k in mamba["not_modelled"])
    llama = predict("llama-3-8b", hw="h100-pcie", phase="prefill", batch=1, seqlen=8192).to_dict()["total"]["achievable"]
    assert [k for k in llama["not_modelled"] if k.startswith("compute.tensor_mma_sync.")] == ["compute.tensor_mma_sync.bf16"]
