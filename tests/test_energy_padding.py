"""Work executed on padded tiles (analytic/padding.py), charged by the energy model: causal_conv1d's
channel-first kernel walks L in chunks of 128 threads x (16 bytes / element size) tokens and computes
every slot of its last chunk."""

from __future__ import annotations

import numpy as np
import pytest
from ssmbench.analytic import energy as em
from ssmbench.analytic.padding import causal_conv1d_chunk, executed_work_factor
from ssmbench.analytic.roofline import COL, WORK_COLUMNS
from ssmbench.calibrate.energy import measured_call_traits

FN = "causal_conv1d.causal_conv1d_fn"


def test_chunk_is_128_threads_times_one_16_byte_vector():
    assert causal_conv1d_chunk("bf16") == 128 * 8 == 1024
    assert causal_conv1d_chunk("fp16") == 1024
    assert causal_conv1d_chunk("fp32") == 128 * 4 == 512


@pytest.mark.parametrize(("length", "dtype", "factor"), [
    (128, "bf16", 1024 / 128),         # one chunk, 128 of its 1024 slots used
    (256, "bf16", 1024 / 256),
    (1024, "bf16", 1.0),
    (1500, "bf16", 2048 / 1500),       # two chunks
    (8192, "bf16", 1.0),
    (128, "fp32", 512 / 128),
])
def test_channel_first_factor_is_padded_over_counted_length(length, dtype, factor):
    dims = {"B": 2, "E": 64, "K": 4, "L": length}
    for mode in ("fwd", "bwd", "fwdbwd"):
        assert executed_work_factor("conv1d", "causal_conv1d", dims, dtype, mode, FN) == pytest.approx(factor)
        assert executed_work_factor("conv1d", "causal_conv1d", dims, dtype, mode) == pytest.approx(factor)


def test_other_kernels_and_decode_execute_the_count():
    dims = {"B": 2, "E": 64, "K": 4, "L": 128}
    assert executed_work_factor("conv1d", "causal_conv1d", dims, "bf16", "fwd", FN + "_cl") == 1.0
    assert executed_work_factor("conv1d", "torch_conv", dims, "bf16", "fwd", "torch.conv1d") == 1.0
    assert executed_work_factor("conv1d", "causal_conv1d", {"B": 2, "E": 64, "K": 4}, "bf16", "decode") == 1.0
    assert executed_work_factor("gemm", "cublas", {"M": 1, "N": 1, "K": 1}, "bf16", "fwd") == 1.0


def test_counts_scale_vector_and_special_function_work_only():
    w = np.zeros(len(WORK_COLUMNS))
    w[COL["vector"]], w[COL["special_function"]], w[COL["tensor.bf16"]] = 100.0, 10.0, 1e6
    c = em.counts(w, 0.0, 500.0, work_factor=8.0)
    assert c["vector.fp32"] == 800.0 and c["special_function"] == 80.0
    assert c["tensor.bf16"] == 1e6 and c["dram"] == 500.0 and c["cache"] == 500.0


def test_measured_call_traits_carry_the_factor():
    t = measured_call_traits("conv1d", "causal_conv1d", {"B": 64, "E": 4096, "K": 4, "L": 128}, "bf16", "fwd", FN)
    assert t["work_factor"] == 8.0
