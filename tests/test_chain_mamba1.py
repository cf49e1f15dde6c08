"""Mamba-1's selective scan as a chain paced by the SM's intake of B and C (analytic/chain.py,
``lane_state_cta``): the launchers' tiles by sequence length, blocks per SM from registers and shared memory,
the (chunk, state) steps, the shared intake (time x blocks per SM x KiB per step), the forward-backward
call as the forward kernel then the backward one, the ``l2`` label where it binds, and the H200 figures:
the two cases the step is derived from and cases it predicts."""

from __future__ import annotations

import pytest
from ssmbench.analytic import chain as ch
from ssmbench.analytic import execution
from ssmbench.analytic.achievable import estimate
from ssmbench.analytic.registry import cost
from ssmbench.hwspecs import get_spec
from ssmbench.hwspecs.ceilings import ceiling
from ssmbench.hwspecs.schema import CHAIN_CLASSES

BACKEND = "mamba_ssm.selective_scan_cuda"
KIB_STEP = 35.91e-9  # the H200 spec's compute.chain_step.lane_state_cta


def dims(b, e, l_, n=16):
    return {"B": b, "E": e, "L": l_, "N": n}


@pytest.mark.parametrize("seqlen, tile", [(1, (32, 4)), (128, (32, 4)), (129, (32, 8)), (256, (32, 8)),
                                          (512, (32, 16)), (1000, (64, 16)), (1024, (64, 16)),
                                          (1025, (128, 16)), (65536, (128, 16))])
def test_launcher_tiles_follow_the_sequence_length(seqlen, tile):
    assert ch._mamba1_tile(seqlen) == tile


def test_blocks_per_sm_by_hand():
    # 128 threads x 128 registers: 4096 registers per warp, 16 warps of 65536, 4 blocks of 4 warps
    assert ch.blocks_per_sm(128, 128, 10560) == 4
    # 144 registers: 4608 per warp, 14 warps, 3 blocks (fp32 forward)
    assert ch.blocks_per_sm(128, 144, 19008) == 3
    # 84 registers round up to 88: 2816 per warp, 23 one-warp blocks
    assert ch.blocks_per_sm(32, 84, 3136) == 23
    # shared memory binds: 100 KiB + 1 KiB reserved per block in 228 KiB: 2 blocks
    assert ch.blocks_per_sm(32, 32, 100 * 1024) == 2
    # the block limit binds for tiny one-warp blocks
    assert ch.blocks_per_sm(32, 16, 0) == ch.SM90_MAX_BLOCKS_PER_SM


def test_forward_grid_steps_occupancy_and_bytes():
    c = ch.mamba1_scan_chain(dims(3, 5, 4097, 16), "fwd", "bf16")
    # three chunks of 2048 x 16 states; grid B x E; 4 blocks per SM; B and C rows of 2048 2-byte items; 4097 is
    # not a whole number of chunks: the kernel's bounds-checked variant
    assert (c.cls, c.steps, c.programs, c.programs_per_sm) == ("lane_state_cta_uneven", 3 * 16, 15, 4)
    assert ch.mamba1_scan_chain(dims(3, 5, 4096, 16), "fwd", "bf16").cls == "lane_state_cta"
    assert ch.mamba1_scan_chain(dims(3, 5, 196, 16), "fwdbwd", "bf16").then.cls == "lane_state_cta_uneven"
    assert c.shared_kib == pytest.approx(2 * 2048 * 2 / 1024) and c.label == "l2" and c.then is None
    f = ch.mamba1_scan_chain(dims(3, 5, 4097, 16), "fwd", "fp32")
    assert (f.programs_per_sm, f.shared_kib) == (3, pytest.approx(2 * 2048 * 4 / 1024))
    # L = 1024: one chunk of 64 x 16, 8 blocks per SM (bf16), 6 (fp32)
    assert ch.mamba1_scan_chain(dims(1, 1, 1024), "fwd", "bf16").programs_per_sm == 8
    assert ch.mamba1_scan_chain(dims(1, 1, 1024), "fwd", "fp32").programs_per_sm == 6
    assert ch.mamba1_scan_chain(dims(1, 1, 1024), "decode", "bf16") is None
    assert ch.mamba1_scan_chain(dims(0, 1, 1024), "fwd", "bf16") is None


def test_fwdbwd_is_the_forward_kernel_then_the_backward_one():
    c = ch.mamba1_scan_chain(dims(2, 2048, 2048), "fwdbwd", "bf16")
    b = ch.mamba1_scan_chain(dims(2, 2048, 2048), "bwd", "bf16")
    # the backward step also adds fp32 dB and dC atomically: 2 x 2048 x (2 + 4) bytes; 168 registers: 3 blocks
    assert (b.programs_per_sm, b.shared_kib) == (3, pytest.approx(2 * 2048 * 6 / 1024))
    assert c.then == b and (c.cls, b.cls) == ("lane_state_cta", "lane_state_cta_bwd")
    assert c.keys == ("compute.chain_step.lane_state_cta", "compute.chain_step.lane_state_cta_bwd")
    sms, steps = 132, {"lane_state_cta": 1e-9, "lane_state_cta_bwd": 2e-9}
    fwd_t = 16 * (32 + 3) * 8.0 * 1e-9  # ceil(4096 / 132) = 32 blocks per SM, and the last one's tail of 4 - 1
    bwd_t = 16 * (32 + 2) * 24.0 * 2e-9  # 3 blocks per SM: a tail of 2; the backward class's own step
    assert float(ch.chain_time(c, sms, lambda link: steps[link.cls])) == pytest.approx(fwd_t + bwd_t)
    assert float(ch.chain_time(c.repeated(2), sms, lambda link: steps[link.cls])) == pytest.approx(2 * (fwd_t + bwd_t))
    with pytest.raises(ValueError, match="one step each"):   # two classes need a step per link
        ch.chain_time(c, sms, 1e-9)
    # an uneven length runs the bounds-checked variant of both kernels: one class, one step
    u = ch.mamba1_scan_chain(dims(2, 2048, 2047), "fwdbwd", "bf16")
    assert {link.cls for link in u.links} == {"lane_state_cta_uneven"} and float(ch.chain_time(u, sms, 1e-9)) > 0


def test_traits_attach_the_chain_to_the_fused_scan_only():
    d = dims(1, 64, 2048)
    assert execution.chain_of("mamba1_scan", "fused", d, "fwd", BACKEND, "fp32").programs_per_sm == 3
    assert execution.chain_of("mamba1_scan", "naive", d, "fwd") is None
    assert execution.chain_of("mamba1_scan", "fused", d, "decode", BACKEND, "bf16") is None


def _estimate(b, e, l_, dtype, mode="fwd"):
    spec = get_spec("h200-sxm")
    d = dims(b, e, l_)
    return estimate(cost("mamba1_scan", d, "fused", mode, dtype), spec, serial=True,
                    l2_reread=execution.l2_reread_bytes("mamba1_scan", "fused", d, dtype, mode),
                    chain=execution.chain_of("mamba1_scan", "fused", d, mode, BACKEND, dtype))


def test_h200_step_is_measured_and_reproduces_its_two_cases():
    assert "lane_state_cta" in CHAIN_CLASSES
    step = ceiling(get_spec("h200-sxm"), "compute.chain_step.lane_state_cta")
    assert step.value == pytest.approx(KIB_STEP) and step.origin == "measured"
    # bf16 B=4, E=8192, L=2048: (249 blocks per SM + a tail of 3) x 16 steps x 8 KiB; measured 1163.6 us
    bf = _estimate(4, 8192, 2048, "bf16")
    assert bf.chain_s == pytest.approx((249 + 3) * 16 * 8 * KIB_STEP)
    assert bf.time_s == pytest.approx(1163.6e-6, rel=0.01) and bf.bottleneck == "l2"
    # fp32 B=4, E=5120: (156 + 2) x 16 x 16 KiB; measured 1448.6 us: twice the bytes per step
    fp = _estimate(4, 5120, 2048, "fp32")
    assert fp.chain_s == pytest.approx((156 + 2) * 16 * 16 * KIB_STEP)
    assert fp.time_s == pytest.approx(1448.6e-6, rel=0.01) and fp.bottleneck == "l2"


@pytest.mark.parametrize("b, e, l_, dtype, measured_us", [
    (8, 2048, 1024, "bf16", 293.2),    # 64-thread blocks, 8 per SM, 4 KiB steps
    (8, 2048, 1024, "fp32", 578.6),    # 6 per SM, 8 KiB steps
    (32, 2048, 256, "bf16", 292.6),    # one-warp blocks, 23 per SM, 1 KiB steps
    (4, 5120, 2048, "fp16", 725.4),
    (2, 2048, 4096, "fp32", 628.4),    # two chunks
])
def test_h200_predicts_other_tiles_and_types_within_5_percent(b, e, l_, dtype, measured_us):
    # measured on the H200 (results/h200/2026-12-02 and 2026-12-03; the calibration's gap report)
    est = _estimate(b, e, l_, dtype)
    assert est.time_s == pytest.approx(measured_us * 1e-6, rel=0.05) and est.bottleneck == "l2"


def test_h200_fp32_takes_twice_the_bf16_time_at_the_same_exponentials():
    # same shape, same exp count: fp32 steps take in twice the bytes at 3 blocks per SM instead of 4
    bf, fp = _estimate(4, 5120, 2048, "bf16"), _estimate(4, 5120, 2048, "fp32")
    assert fp.time_s / bf.time_s == pytest.approx(2.0, rel=0.02)  # measured 1448.6 / 732.7 = 1.98


def test_h200_fwdbwd_adds_the_backward_kernel():
    fwd, both = _estimate(2, 5120, 2048, "bf16"), _estimate(2, 5120, 2048, "bf16", "fwdbwd")
    assert both.chain_s > 3 * fwd.chain_s and both.bottleneck == "l2"


BWD_STEP = 48.73e-9  # the H200 spec's compute.chain_step.lane_state_cta_bwd


@pytest.mark.parametrize("b, e, l_, measured_us, rel", [
    (2, 5120, 2048, 1885.5, 0.02),   # the two cases the step is derived from (mean of 48.53 and 48.93 ns)
    (8, 2048, 1024, 1483.9, 0.02),
    (2, 2048, 2048, 808.9, 0.03),    # predicted: another width, two chunks, both
    (2, 2048, 4096, 1597.9, 0.03),
    (2, 5120, 4096, 3663.3, 0.04),
    (1, 2048, 8192, 1872.3, 0.10),   # one batch, four chunks: the slower intake the forward also shows
])
def test_h200_backward_step_is_measured_and_predicts_the_other_calls(b, e, l_, measured_us, rel):
    """Forward-backward calls (results/h200/2026-12-02/default, 2026-12-03/fill/call3) as the forward kernel's
    chain then the backward's at its own step; with the forward's step for both they were 19 - 30 % below."""
    step = ceiling(get_spec("h200-sxm"), "compute.chain_step.lane_state_cta_bwd")
    assert step.value == pytest.approx(BWD_STEP) and step.origin == "measured"
    assert _estimate(b, e, l_, "bf16", "fwdbwd").time_s == pytest.approx(measured_us * 1e-6, rel=rel)


def test_h200_as_measured_label_follows_the_chain():
    # the estimate as the timing loop measures it (analytic/timed.py) keeps the chain's label: l2, not latency
    from ssmbench.analytic.timed import as_timed

    est = _estimate(1, 2048, 8192, "fp32")
    timing = {"flush_l2": True, "flush_bytes": 125829120, "cuda_graph": False}
    d = as_timed(est, get_spec("h200-sxm"), calls=1, head_host_s=0.0, timing=timing)
    assert est.chain_label == "l2" and d["bottleneck"] == "l2"
    # (16 blocks per SM (2048 lanes) + a tail of 2 at 3 per SM) x 64 steps x 16 KiB: 662 us, measured 727.3 us
    assert est.chain_s == pytest.approx((16 + 2) * 64 * 16 * KIB_STEP)


UNEVEN_STEP = 61.07e-9  # the H200 spec's compute.chain_step.lane_state_cta_uneven


def test_h200_uneven_step_is_measured_and_reproduces_its_two_cases():
    """A length that is not a whole number of chunks runs the bounds-checked variant, slower per KiB: the
    spec's step is the mean of two measured cases (results/h200/2026-12-04/vim-scan), each within 6 %."""
    step = ceiling(get_spec("h200-sxm"), "compute.chain_step.lane_state_cta_uneven")
    assert step.value == pytest.approx(UNEVEN_STEP) and step.origin == "measured"
    one = _estimate(256, 768, 196, "bf16")   # one chunk of 32 x 8, 23 one-warp blocks per SM; measured 1537.0 us
    assert one.chain_s == pytest.approx(1490 * 16 * 1 * UNEVEN_STEP)   # ceil(196608 / 132) blocks per SM, no tail
    assert one.time_s == pytest.approx(1537.0e-6, rel=0.06)
    two = _estimate(64, 768, 3136, "bf16")   # two chunks of 128 x 16, 4 blocks per SM; measured 5555.9 us
    assert two.time_s == pytest.approx(5555.9e-6, rel=0.06)
    # the even controls of the same call keep the even step: L = 256 measured 856.0 us, L = 4096 3781.0 us
    assert _estimate(256, 768, 256, "bf16").time_s == pytest.approx(856.0e-6, rel=0.05)
    assert _estimate(64, 768, 4096, "bf16").time_s == pytest.approx(3781.0e-6, rel=0.1)


@pytest.mark.parametrize("b, e, l_, measured_us", [
    (1, 1536, 2048, 68.4), (1, 4096, 2048, 160.8), (1, 5120, 2048, 194.9), (1, 8192, 2048, 304.6),
    (4, 1536, 2048, 235.0), (1, 1536, 8192, 274.7), (1, 2048, 8192, 375.1),
])
def test_h200_small_grids_pay_the_last_blocks_tail(b, e, l_, measured_us):
    """On grids of a few blocks per SM the last 128-thread block's lone steps are a visible part of the time (module
    docstring): with them the estimate is within 9 % of these measurements (results/h200/2026-12-02 and 2026-12-03,
    the calibration's gap report); counted in whole waves without a tail, B = 1, E = 1536 was 12 % (L = 2048) and
    17 % (L = 8192) below."""
    est = _estimate(b, e, l_, "bf16")
    assert est.time_s == pytest.approx(measured_us * 1e-6, rel=0.09)
    c = ch.mamba1_scan_chain(dims(b, e, l_), "fwd", "bf16")
    assert c.fluid and c.tail_programs == c.programs_per_sm - 1 == 3
    # the one-warp and 64-thread tiles have no tail
    assert ch.mamba1_scan_chain(dims(b, e, 256), "fwd", "bf16").tail_programs == 0
    assert ch.mamba1_scan_chain(dims(b, e, 1024), "fwd", "bf16").tail_programs == 0
