"""Work executed on padded tiles (analytic/padding.py), charged by the energy model: causal_conv1d's
channel-first kernel walks L in chunks of 128 threads x (16 bytes / element size) tokens and computes
every slot of its last chunk; FlashAttention-2's decode computes every row of its 64- or 128-row query
tile, of which H / G hold queries."""

from __future__ import annotations

import numpy as np
import pytest
from ssmbench.analytic import energy as em
from ssmbench.analytic.padding import (
    causal_conv1d_chunk,
    executed_tensor_factor,
    executed_work_factor,
)
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


def _dec(b, g, h, s=8192, p=128):
    return {"B": b, "G": g, "H": h, "S": s, "P": p}


@pytest.mark.parametrize(("dims", "backend", "factor"), [
    (_dec(64, 8, 32), "torch.sdpa.flash", 128 / 4),   # 512 query tiles >= 0.8 x 132 SMs: one split, M = 128
    (_dec(16, 32, 32), "torch.sdpa.flash", 128 / 1),  # MHA: one row of the 128-row tile
    (_dec(1, 8, 32), "torch.sdpa.flash", 64 / 4),     # 8 tiles: split-KV kernel, M = 64
    (_dec(1, 8, 32, s=128), "torch.sdpa.flash", 128 / 4),  # one key block: one split
    (_dec(64, 8, 32), "flash_attn.fa2", 128 / 4),
    (_dec(64, 8, 32), None, 64 / 4),                 # a workload call: flash_attn_with_kvcache, split-KV kernel
    (_dec(1, 1, 128), None, 128 / 128),               # MQA: 128 rows fill two 64-row tiles
])
def test_fa2_decode_computes_every_row_of_its_query_tile(dims, backend, factor):
    for op in ("attention_causal", "attention_full"):
        assert executed_tensor_factor(op, "fa2", dims, "decode", backend, 132) == pytest.approx(factor)


def test_other_attention_kernels_and_modes_execute_the_count():
    dims = _dec(64, 8, 32)
    assert executed_tensor_factor("attention_causal", "fa2", dims, "decode", "torch.sdpa.cudnn", 132) == 1.0
    assert executed_tensor_factor("attention_causal", "fa2", {**dims, "L": 4096}, "fwd", "torch.sdpa.flash", 132) == 1.0
    assert executed_tensor_factor("attention_causal", "naive", dims, "decode", None, 132) == 1.0
    assert executed_tensor_factor("attention_causal", "splitkv", dims, "decode") == 64 / 4
    # without the SM count SDPA's split choice is unknown: the split-KV tile
    assert executed_tensor_factor("attention_causal", "fa2", dims, "decode", "torch.sdpa.flash") == 64 / 4


def test_counts_scale_tensor_work_of_either_instruction_class():
    w = np.zeros(len(WORK_COLUMNS))
    w[COL["tensor.bf16"]], w[COL["vector"]] = 1e6, 10.0
    c = em.counts(w, 0.0, 5.0, mma_sync=True, tensor_factor=32.0)
    assert c["tensor_mma_sync.bf16"] == 32e6 and c["tensor.bf16"] == 0.0 and c["vector.fp32"] == 10.0
    assert em.counts(w, 0.0, 5.0, tensor_factor=2.0)["tensor.bf16"] == 2e6


def test_measured_call_traits_carry_the_tensor_factor():
    t = measured_call_traits("attention_causal", "fa2", _dec(64, 8, 32), "bf16", "decode", "torch.sdpa.flash", 132)
    assert t["tensor_factor"] == 32.0 and t["work_factor"] == 1.0
