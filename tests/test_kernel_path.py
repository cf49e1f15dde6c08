"""Kernel paths (analytic/execution.kernel_path): SDPA's cuDNN backend with a lower-right causal mask
(L < S) runs cuDNN's masked kernel on a materialized mask, so calibration fits those shapes as a group
of their own (calibrate/fit.group_key) and a profile finds that group by the shape (Profile.find)."""

import pytest
from ssmbench.analytic import execution
from ssmbench.calibrate.fit import group_key
from ssmbench.calibrate.join import Bounds, JoinedCase
from ssmbench.calibrate.profile import Profile
from ssmbench.errors import UserError

CUDNN = "torch.sdpa.cudnn"


def _dims(L, S):
    return {"B": 1, "H": 32, "G": 8, "P": 128, "L": L, "S": S}


@pytest.mark.parametrize("op,L,S,mode,backend,path", [
    ("attention_causal", 512, 2048, "fwd", CUDNN, "dense_mask"),      # L < S: the mask is materialized
    ("attention_causal", 2048, 2048, "fwd", CUDNN, ""),               # L = S: is_causal=True, no mask
    ("attention_causal", 512, 2048, "fwd", "torch.sdpa.flash", ""),   # flash knows the lower-right diagonal
    ("attention_full", 512, 2048, "fwd", CUDNN, ""),                  # no causal mask at all
    ("attention_causal", 512, 2048, "fwdbwd", CUDNN, "dense_mask"),
    ("attention_causal", 512, 2048, "fwd", None, ""),                 # no measured backend: the usual kernel
])
def test_kernel_path_of_sdpa_causal_attention(op, L, S, mode, backend, path):
    assert execution.kernel_path(op, _dims(L, S), mode, backend) == path


def test_decode_has_no_mask_path():
    # decode: one query against S keys, is_causal=False and no mask (measure/backends/sdpa.py)
    assert execution.kernel_path("attention_causal", {"B": 1, "H": 32, "G": 8, "P": 128, "S": 1024}, "decode",
                                 CUDNN) == ""


def _case(L, S):
    b = Bounds({"tensor": 1e-5}, (), 1.0, {}, {}, (), {}, 1e-5)
    return JoinedCase(f"k{L}-{S}", "attention_causal", "fa2", CUDNN, "attention", _dims(L, S), "bf16", "fwd", "dev",
                      1e-4, None, None, b, "f.json", "sha", False, False, "s")


def test_masked_shapes_are_a_group_of_their_own():
    same, masked = group_key(_case(2048, 2048)), group_key(_case(512, 2048))
    assert same != masked and same.path == "" and masked.path == "dense_mask"
    assert masked.label.endswith("bf16 fwd (dense_mask)") and same.label.endswith("bf16 fwd")
    assert masked.to_dict()["path"] == "dense_mask"


def test_profile_finds_the_group_of_the_shapes_path():
    groups = [{"key": {**group_key(_case(L, S)).to_dict()}, "label": group_key(_case(L, S)).label}
              for L, S in ((2048, 2048), (512, 2048))]
    prof = Profile({"groups": groups})
    assert prof.find("attention_causal", "fa2", "bf16", "fwd", backend=CUDNN, dims=_dims(512, 8192))["key"]["path"] \
        == "dense_mask"
    assert prof.find("attention_causal", "fa2", "bf16", "fwd", backend=CUDNN, dims=_dims(4096, 4096))["key"]["path"] == ""
    assert prof.find("attention_causal", "fa2", "bf16", "fwd", backend=CUDNN)["key"]["path"] == ""
    only_usual = Profile({"groups": groups[:1]})
    with pytest.raises(UserError, match="kernel path dense_mask"):
        only_usual.find("attention_causal", "fa2", "bf16", "fwd", backend=CUDNN, dims=_dims(512, 2048))
