"""Kernel paths (analytic/execution.kernel_path, calibrate/paths.py): SDPA's cuDNN backend with a
lower-right causal mask (L < S) runs cuDNN's masked kernel on a materialized mask, and FlashAttention on
a small grid runs its split-KV kernel; calibration fits such shapes as a group of their own
(calibrate/fit.group_key) and a profile finds that group by the shape (Profile.find)."""

import pytest
from ssmbench.analytic import execution
from ssmbench.calibrate.fit import group_key
from ssmbench.calibrate.join import Bounds, JoinedCase
from ssmbench.calibrate.paths import case_path, sm_count_of
from ssmbench.calibrate.profile import Profile

from ssmbench.errors import UserError

CUDNN, FLASH = "torch.sdpa.cudnn", "torch.sdpa.flash"
H200_SMS = 132


def _dims(L, S, B=1, G=8):
    return {"B": B, "H": 32, "G": G, "P": 128, "L": L, "S": S}


@pytest.mark.parametrize("op,L,S,mode,backend,path", [
    ("attention_causal", 512, 2048, "fwd", CUDNN, "dense_mask"),      # L < S: the mask is materialized
    ("attention_causal", 2048, 2048, "fwd", CUDNN, ""),               # L = S: is_causal=True, no mask
    ("attention_causal", 512, 2048, "fwd", FLASH, ""),                # flash knows the lower-right diagonal
    ("attention_full", 512, 2048, "fwd", CUDNN, ""),                  # no causal mask at all
    ("attention_causal", 512, 2048, "fwdbwd", CUDNN, "dense_mask"),
    ("attention_causal", 512, 2048, "fwd", None, ""),                 # no measured backend: the usual kernel
])
def test_kernel_path_of_sdpa_causal_attention(op, L, S, mode, backend, path):
    assert execution.kernel_path(op, "fa2", _dims(L, S), mode, backend, H200_SMS) == path


def test_cudnn_decode_has_no_mask_path():
    # decode: one query against S keys, is_causal=False and no mask (measure/backends/sdpa.py)
    assert execution.kernel_path("attention_causal", "fa2", {"B": 1, "H": 32, "G": 8, "P": 128, "S": 1024},
                                 "decode", CUDNN, H200_SMS) == ""


@pytest.mark.parametrize("B,sms,path", [
    # decode with G = 8 < H = 32: 4 query heads packed per KV head, grid = B x 8 x ceil(4 / 64) = 8 B
    # query blocks; FlashAttention splits below 0.8 x 2 x SMs = 211.2 on 132 SMs
    (1, H200_SMS, "split_kv"), (16, H200_SMS, "split_kv"),   # 8 and 128 blocks
    (64, H200_SMS, ""),                                      # 512 blocks: the tile loop
    (16, 40, ""),                                            # 128 blocks >= 64 on a 40-SM device
    (1, None, ""),                                           # SM count unknown: no split path
])
def test_flash_decode_split_kv_path_follows_the_grid(B, sms, path):
    dims = {"B": B, "H": 32, "G": 8, "P": 128, "S": 1024}
    assert execution.kernel_path("attention_causal", "fa2", dims, "decode", FLASH, sms) == path


def test_flash_prefill_on_a_small_grid_splits_too():
    # fwd, G = H = 32, L = 128: grid 32 x ceil(128 / 64) = 64 < 211.2, over S = 1024 keys (8 blocks of 128); at
    # S = 128 one key block leaves nothing to split (num_splits_heuristic: at most n_blocks splits); at L = 2048:
    # 1024 blocks
    assert execution.kernel_path("attention_causal", "fa2", _dims(128, 1024, G=32), "fwd", FLASH, H200_SMS) == "split_kv"
    assert execution.kernel_path("attention_causal", "fa2", _dims(128, 128, G=32), "fwd", FLASH, H200_SMS) == ""
    assert execution.kernel_path("attention_causal", "fa2", _dims(2048, 2048, G=32), "fwd", FLASH, H200_SMS) == ""
    # a backend that runs no FlashAttention chain (cuDNN) never splits
    assert execution.kernel_path("attention_causal", "fa2", _dims(128, 128, G=32), "fwd", CUDNN, H200_SMS) == ""


def test_case_path_takes_the_sm_count_from_the_spec():
    assert sm_count_of("h200-sxm") == H200_SMS
    assert sm_count_of("no-such-spec") is None and sm_count_of(None) is None
    decode = {"B": 1, "H": 32, "G": 8, "P": 128, "S": 1024}
    assert case_path("attention_causal", "fa2", decode, "decode", FLASH, "h200-sxm") == "split_kv"
    assert case_path("attention_causal", "fa2", decode, "decode", FLASH, "no-such-spec") == ""


def _case(L, S):
    b = Bounds({"tensor": 1e-5}, (), 1.0, {}, {}, (), {"spec": "h200-sxm"}, 1e-5)
    return JoinedCase(f"k{L}-{S}", "attention_causal", "fa2", CUDNN, "attention", _dims(L, S), "bf16", "fwd", "dev",
                      1e-4, None, None, b, "f.json", "sha", False, False, "s")


def test_masked_shapes_are_a_group_of_their_own():
    same, masked = group_key(_case(2048, 2048)), group_key(_case(512, 2048))
    assert same != masked and same.path == "" and masked.path == "dense_mask"
    assert masked.label.endswith("bf16 fwd (dense_mask)") and same.label.endswith("bf16 fwd")
    assert masked.to_dict()["path"] == "dense_mask"


def test_profile_finds_the_group_of_the_shapes_path():
    groups = [{"key": group_key(_case(L, S)).to_dict(), "label": group_key(_case(L, S)).label}
              for L, S in ((2048, 2048), (512, 2048))]
    prof = Profile({"spec": {"id": "h200-sxm"}, "groups": groups})
    assert prof.find("attention_causal", "fa2", "bf16", "fwd", backend=CUDNN, dims=_dims(512, 8192))["key"]["path"] \
        == "dense_mask"
    assert prof.find("attention_causal", "fa2", "bf16", "fwd", backend=CUDNN, dims=_dims(4096, 4096))["key"]["path"] == ""
    assert prof.find("attention_causal", "fa2", "bf16", "fwd", backend=CUDNN)["key"]["path"] == ""
    only_usual = Profile({"spec": {"id": "h200-sxm"}, "groups": groups[:1]})
    with pytest.raises(UserError, match="kernel path dense_mask"):
        only_usual.find("attention_causal", "fa2", "bf16", "fwd", backend=CUDNN, dims=_dims(512, 2048))


def test_the_dense_mask_call_runs_every_score_entry_after_building_the_mask():
    from ssmbench.analytic.registry import cost

    d = _dims(512, 2048)
    causal = cost("attention_causal", d, impl="fa2", mode="fwd", dtype="bf16")
    plain = execution.as_measured(causal, CUDNN, "fwd", "attention_causal", "fa2")
    masked = execution.measured_call(causal, CUDNN, "attention_causal", "fa2", d, "bf16", "fwd")
    # 512 x 2048 entries against the 512 x 1536 + 512 x 513 / 2 under the bottom-right diagonal
    grow = 512 * 2048 / (512 * 1536 + 512 * 513 / 2)
    assert float(masked.tensor["bf16"]) == pytest.approx(float(plain.tensor["bf16"]) * grow)
    assert float(masked.transcendental) == pytest.approx(float(plain.transcendental) * grow)
    # the mask: bool written, tril read and written, the conversion's bool read and bf16 bias written
    assert float(masked.bytes) - float(plain.bytes) == pytest.approx(6 * 512 * 2048)
    assert masked.launches - plain.launches == execution.DENSE_MASK_KERNELS
    assert masked.host["torch_eager"] - plain.host.get("torch_eager", 0) == execution.DENSE_MASK_HOST_OPS
    # the usual kernel (L = S) and the flash backend keep the causal count
    same = _dims(2048, 2048)
    c2 = cost("attention_causal", same, impl="fa2", mode="fwd", dtype="bf16")
    assert execution.measured_call(c2, CUDNN, "attention_causal", "fa2", same, "bf16", "fwd") == \
        execution.as_measured(c2, CUDNN, "fwd", "attention_causal", "fa2")
    assert execution.measured_call(causal, FLASH, "attention_causal", "fa2", d, "bf16", "fwd") == \
        execution.as_measured(causal, FLASH, "fwd", "attention_causal", "fa2")
