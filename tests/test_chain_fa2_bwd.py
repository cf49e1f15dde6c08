"""FlashAttention-2's backward query-tile loop as a sequential chain (analytic/chain_fa2.py ``fa2_bwd_chain``,
class TILE_LOOP with shared-memory bytes per step): the shared-memory bytes of a tile counted by hand from the
kernel traits, the grid and causal steps, the step time, forward-backward links, what a spec without the
shared-memory bandwidth is told, and the step against the ncu profile of the kernel on the H200."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from ssmbench.analytic import chain as ch
from ssmbench.analytic import chain_fa2 as fa
from ssmbench.analytic import execution
from ssmbench.analytic.achievable import AchievableTable, chain_step_time, estimate
from ssmbench.analytic.cost import Cost
from ssmbench.analytic.roofline import TENSOR_DTYPES
from ssmbench.hwspecs import get_spec
from ssmbench.hwspecs.schema import Spec

CAUSAL = fa.fa2_bwd_chain(True)
FULL = fa.fa2_bwd_chain(False)
KIB = 1024
AUDIT = Path(__file__).resolve().parents[1] / "results/h200/2026-12-05/kernel-audit-fill/byte_audit_noext.json"


def test_shared_memory_bytes_of_one_tile_by_hand():
    # head dim 128, Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2>: per GEMM, the 8 warps' A and B sub-tiles.
    # S and dP (64 x 128 over K = 128, 2 x 4 warps: 32 x 32 each): 8 x (32 + 32) x 128 = 65536 elements each;
    # dV and dK (128 x 128 over K = 64, 4 x 2 warps: 32 x 64 each): 8 x (32 + 64) x 64 = 49152 each;
    # dQ (64 x 128 over K = 128, 2 x 4 warps): 65536; stored: P and dS (64 x 128), the next Q and dO (64 x 128)
    reads, stored = 2 * 65536 + 2 * 49152 + 65536, 4 * 64 * 128
    assert reads * 2 == 576 * KIB and stored * 2 == 64 * KIB
    assert fa.fa2_bwd_smem_bytes(128, "bf16") == (reads + stored) * 2
    # head dim 64, <64, 128, 128, 8, 4, 4, 4>: S, dP (128 x 128 over K = 64, 4 x 2 warps: 32 x 64 each)
    # 8 x (32 + 64) x 64; dV, dK, dQ (128 x 64 over K = 128: 32 x 32 each) 8 x (32 + 32) x 128;
    # stored: P, dS (128 x 128), Q, dO (128 x 64)
    reads64, stored64 = 2 * 8 * 96 * 64 + 3 * 8 * 64 * 128, 2 * 128 * 128 + 2 * 128 * 64
    assert fa.fa2_bwd_smem_bytes(64, "fp16") == (reads64 + stored64) * 2 == (576 + 96) * KIB
    # head dim 32 keeps V in registers: dP reads only dO's sub-tiles (8 x 32 x 32), not V's
    reads32 = 8 * (32 + 64) * 32 + 8 * 32 * 32 + 2 * 8 * (32 + 16) * 128 + 8 * (32 + 16) * 128
    assert fa.fa2_bwd_smem_bytes(32, "bf16") == (reads32 + 2 * 128 * 128 + 2 * 128 * 32) * 2


def test_grid_and_causal_steps_per_key_tile():
    # P = 128: tile 64 x 128; L = S = 512: 4 key tiles over 8 query tiles, the causal ones from 0, 2, 4, 6
    d = {"B": 2, "H": 3, "G": 3, "L": 512, "S": 512, "P": 128}
    c = CAUSAL(d, "bwd")
    assert (c.programs, c.steps, c.total_steps, c.programs_per_sm) == (2 * 3 * 4, 8, 2 * 3 * 20, 1)
    assert c.step_work == (5 * 2 * 64 * 128 * 128, 4 * 64 * 128, 64 * 128)
    assert c.mma_sync and c.smem_bytes == fa.fa2_bwd_smem_bytes(128, "bf16") and c.label == "tensor"
    assert FULL(d, "bwd").total_steps == 2 * 3 * 4 * 8
    # bottom-right alignment: L = 256 queries at the end of S = 1024 keys; key tile 7 starts at query tile 2
    assert CAUSAL({**d, "B": 1, "H": 1, "L": 256, "S": 1024}, "bwd").total_steps == 7 * 4 + 2
    assert CAUSAL(d, "fwd") is None and CAUSAL({**d, "L": 0}, "bwd") is None


def test_step_adds_the_shared_memory_bytes_at_the_ctas_share():
    c = ch.Chain(ch.TILE_LOOP, 1, 1, 1, step_work=(1e6, 2e4, 1e3), smem_bytes=5e5)
    t = ch.tile_step_time(c, 10, 1e12, 1e11, 1e10, 2e13)
    assert t == pytest.approx(10 * (1e6 / 1e12 + 2e4 / 1e11 + 1e3 / 1e10 + 5e5 / 2e13))


def test_forward_backward_links_and_label():
    d = {"B": 2, "H": 32, "G": 8, "L": 4096, "S": 4096, "P": 128}
    c = execution.chain_of("attention_causal", "fa2", d, "fwdbwd", "torch.sdpa.flash")
    fwd, bwd = c.links
    assert fwd.smem_bytes == fa.fa2_fwd_smem_bytes(128, 64, "bf16") and fwd.side_overlapped and bwd.smem_bytes > 0
    assert fwd.programs_per_sm == fa.FA2_FWD_CTAS_PER_SM and not bwd.side_overlapped
    assert c.keys == (ch.SMEM_BANDWIDTH_KEY,)
    spec = get_spec("h200-sxm")
    e = estimate(Cost(tensor={"bf16": 1.0}, launches=1), spec, chain=c)
    t = AchievableTable.of([spec])
    alone = [float(ch.chain_time(dataclasses.replace(link, then=None), t.sm_count, chain_step_time(link, t))[0])
             for link in c.links]
    assert e.chain_s == pytest.approx(sum(alone), rel=1e-9)
    assert alone[1] > alone[0] and e.bottleneck == "tensor"  # the backward's link is the longer: its label
    # CUTLASS's memory-efficient kernels have no FlashAttention-2 chain (cuDNN's has its own: test_chain_cudnn.py)
    assert execution.chain_of("attention_causal", "fa2", d, "bwd", "torch.sdpa.efficient") is None


def test_a_spec_without_the_shared_memory_bandwidth_says_so():
    d = {"B": 1, "H": 32, "G": 8, "L": 2048, "S": 2048, "P": 128}
    spec = get_spec("mi300x")  # the LDS bandwidth is not in its sources
    bwd = estimate(Cost(tensor={"bf16": 1.0}, launches=1), spec, chain=CAUSAL(d, "bwd"))
    assert ch.SMEM_BANDWIDTH_KEY in bwd.not_modelled
    # the H200 without the bandwidth: the step keeps its engines' time (the chain stays, without the delivery)
    data = get_spec("h200-sxm").model_dump(mode="python", exclude_none=True)
    data["memory"]["shared"]["bandwidth"] = {"unknown": "left out for the test"}
    no_smem = Spec.model_validate({**data, "id": "h200-no-shared-bandwidth"})
    cost = Cost(tensor={"bf16": 1.0}, launches=1)
    blind = estimate(cost, no_smem, chain=CAUSAL(d, "bwd"))
    engines_only = estimate(cost, get_spec("h200-sxm"), chain=dataclasses.replace(CAUSAL(d, "bwd"), smem_bytes=0.0))
    assert ch.SMEM_BANDWIDTH_KEY in blind.not_modelled
    assert blind.chain_s == pytest.approx(engines_only.chain_s) and 0 < blind.chain_s < estimate(
        cost, get_spec("h200-sxm"), chain=CAUSAL(d, "bwd")).chain_s
    fwd = estimate(Cost(tensor={"bf16": 1.0}, launches=1), spec, chain=fa.fa2_fwd_chain(True)(d, "fwd"))
    assert ch.SMEM_BANDWIDTH_KEY in fwd.not_modelled  # the forward's K and V operands cross it too


def test_profiled_step_lies_between_overlapped_and_serial_operand_delivery():
    """ncu's profile of the kernel on the H200 (B = 4, L = S = 8192, H = 32, P = 128; elapsed SM cycles at its
    own clock) against the step's parts in SM cycles: the measured step is longer than the shared-memory
    delivery and the MMAs fully overlapped, and no longer than the two in series (the chain's step)."""
    audit = json.loads(AUDIT.read_text())
    case = next(c for c in audit["cases"] if c["mode"] == "bwd" and c["backend"] == "torch.sdpa.flash")
    kernel = next(k for k in case["measured"]["per_kernel"] if "dq_dk_dv_loop_seqk_parallel" in k["name"])
    cycles = kernel["GPU Speed Of Light Throughput: Elapsed Cycles"]
    c = CAUSAL(case["dims"], "bwd")
    spec = get_spec("h200-sxm")
    sms = spec.compute.sm_count.value
    steps_per_sm = (c.total_steps - c.steps) / sms + c.steps  # the chain's schedule, one CTA per SM
    measured = cycles / steps_per_sm
    clock = 1.98e9  # the clock of the spec's derived shared-memory bandwidth and of the mma.sync probe
    t = AchievableTable.of([spec])
    tensor = c.step_work[0] * sms / t.rate_mma_sync[0, TENSOR_DTYPES.index("bf16")] * clock
    smem = c.smem_bytes / 128  # 32 banks x 4 B per clock
    other = float(chain_step_time(c, t)[0]) * clock - tensor - smem  # the softmax's vector and exp work
    print(f"cycles per step: measured {measured:.0f}, tensor {tensor:.0f}, shared memory {smem:.0f}, other {other:.0f}")
    assert max(tensor, smem) + other < measured < tensor + smem + other
