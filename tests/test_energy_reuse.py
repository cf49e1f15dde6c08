"""Cache re-reads the SMs' L1 serves (analytic/reuse.py): the Mamba-1 scan's blocks resident on one SM
share their batch's B and C chunks when the batch count divides into the SM count."""

from __future__ import annotations

import pytest
from ssmbench.analytic import execution
from ssmbench.analytic.reuse import (
    l1_share,
    l2_reread_share,
    scan_blocks_per_sm,
    scan_threads,
)
from ssmbench.calibrate.energy import measured_call_traits

SCAN = "mamba_ssm.selective_scan_cuda"


def test_launch_bounds_occupancy():
    assert [scan_threads(n) for n in (128, 512, 1024, 2048)] == [32, 32, 64, 128]
    assert [scan_blocks_per_sm(n) for n in (128, 1024, 2048)] == [5, 5, 3]
    assert [scan_blocks_per_sm(n, backward=True) for n in (512, 4096)] == [2, 3]


@pytest.mark.parametrize(("batch", "r", "sms", "share"), [
    (1, 3, 132, 1 / 3),    # one batch per SM
    (4, 3, 132, 1 / 3),    # 4 divides 132: ids k + 132 j all have batch k mod 4
    (8, 3, 132, 2 / 3),    # 132 = 4 mod 8: batches k, k + 4 alternate
    (64, 3, 132, 1.0),     # 16 batches cycle: every resident block its own
    (64, 5, 132, 1.0),
    (2, 5, 132, 1 / 5),
    (3, 3, 128, 1.0),      # 3 and 128 coprime
])
def test_share_is_distinct_batches_over_resident_blocks(batch, r, sms, share):
    assert l1_share(batch, r, sms) == pytest.approx(share)


def test_scan_share_by_mode():
    dims = {"B": 1, "E": 4096, "L": 8192, "N": 16}
    assert l2_reread_share("mamba1_scan", "fused", dims, "bf16", "fwd", SCAN, 132) == pytest.approx(1 / 3)
    # fwdbwd: two passes of B, C loads (2 B E L N e each) at 1/3, atomics (2 B E L N 4) in full
    loads, atomics = 2.0 * 4096 * 8192 * 16 * 2, 2.0 * 4096 * 8192 * 16 * 4
    expect = (2 * loads / 3 + atomics) / (2 * loads + atomics)
    assert l2_reread_share("mamba1_scan", "fused", dims, "bf16", "fwdbwd", SCAN, 132) == pytest.approx(expect)
    assert l2_reread_share("mamba1_scan", "fused", {**dims, "B": 64, "L": 128}, "bf16", "fwd", SCAN, 132) == 1.0


def test_no_share_without_the_sm_count_or_for_other_kernels():
    dims = {"B": 1, "E": 4096, "L": 8192, "N": 16}
    assert l2_reread_share("mamba1_scan", "fused", dims, "bf16", "fwd", SCAN, None) == 1.0
    assert l2_reread_share("mamba1_scan", "fused", {"B": 1, "E": 4096, "N": 16}, "bf16", "decode",
                           "mamba_ssm.selective_state_update", 132) == 1.0
    assert l2_reread_share("ssd", "chunked", {}, "bf16", "fwd", "mamba_ssm.mamba_chunk_scan_combined", 132) == 1.0


def test_measured_call_traits_charge_the_l2_share_of_the_rereads():
    dims = {"B": 1, "E": 4096, "L": 8192, "N": 16}
    full = execution.l2_reread_bytes("mamba1_scan", "fused", dims, "bf16", "fwd", SCAN)
    assert full == 2.0 * 4096 * 8192 * 16 * 2
    t = measured_call_traits("mamba1_scan", "fused", dims, "bf16", "fwd", SCAN, 132)
    assert t["l2_reread"] == pytest.approx(full / 3)
    assert measured_call_traits("mamba1_scan", "fused", dims, "bf16", "fwd", SCAN)["l2_reread"] == full
