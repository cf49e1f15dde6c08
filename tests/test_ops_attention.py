"""Attention op family: formulas over small dims, PyTorch FLOP-counter cross-checks, reference
agreement with SDPA, dispatched-kernel counts of the naive reference, and properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ssmbench.analytic.conventions import CAUSAL_FRACTION as _CF
from ssmbench.analytic.ops.attention.decode import SPLITKV_CHUNK
from ssmbench.analytic.ops.attention.flash import fa_smem_fwd
from ssmbench.analytic.registry import AnalyticError, cost, get_op, symbolic_cost
from ssmbench.analytic.symbols import L as L_SYM
from ssmbench.analytic.symbols import P as P_SYM

from ssmbench.errors import UserError

OPS = ("attention_causal", "attention_full")
IMPL_MODES = {"naive": ("fwd", "bwd", "decode"), "fa2": ("fwd", "bwd", "decode"), "fa3": ("fwd", "bwd"),
              "splitkv": ("decode",)}
CASES = [(op, impl, mode) for op in OPS for impl, modes in IMPL_MODES.items() for mode in modes]
E = 2  # bf16 bytes
CAUSAL_FRACTION = float(_CF)
KIB = 1024


def ev(op, impl, mode, dtype="bf16", **dims):
    return cost(op, dims, impl, mode, dtype)


def entries(causal, L, S):
    return L * S - L * L / 2 if causal else L * S


def close(a, b):
    return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-9)


def assert_terms(c, expected):
    got = {k: float(v) for k, v in c.terms().items() if float(v) != 0}
    # host calls (execution traits) are one per launch here; the hand formulas count the rest
    host = {k: got.pop(k) for k in list(got) if k.startswith("host.")}
    assert sum(host.values()) == got.get("launches", 0.0), host
    want = {k: float(v) for k, v in expected.items() if float(v) != 0}
    assert got.keys() == want.keys(), (sorted(got), sorted(want))
    for k in want:
        assert close(got[k], want[k]), (k, got[k], want[k])


D = dict(B=2, L=8, S=8, H=4, G=2, P=16)


# Formulas over small dims ---------------------------------------------------------------------------
@pytest.mark.parametrize("causal", [False, True])
def test_naive_fwd_formula(causal):
    B, L, S, H, G, P = D.values()
    qe, se = B * H * L * P * E, B * H * L * S * E
    exp = {
        "tensor.bf16": 4 * B * H * L * S * P,  # full even when causal: the GEMM computes every entry
        "vector": B * H * L * P + 4 * B * H * L * S, "transcendental": B * H * L * S,
        "read.activations": qe + 2 * B * G * S * P * E, "write.activations": qe,
        "extra_read.intermediates": qe + 2 * se + (se + L * S if causal else 0),
        "extra_write.intermediates": qe + 2 * se + (se if causal else 0),
        "launches": 5 if causal else 4, "working_set": 2 * (2 * 128 * 64) * E,
    }
    assert_terms(ev(OPS[0] if causal else OPS[1], "naive", "fwd", **D), exp)


@pytest.mark.parametrize("causal", [False, True])
def test_naive_bwd_formula(causal):
    B, L, S, H, G, P = D.values()
    qe, se, kve = B * H * L * P * E, B * H * L * S * E, B * G * S * P * E
    exp = {
        "tensor.bf16": 8 * B * H * L * S * P, "vector": 4 * B * H * L * S + B * H * L * P,
        "read.activations": 2 * qe + 2 * kve, "write.activations": qe + 2 * kve,
        "extra_read.activations": qe,  # dO is read by both grads of the PV GEMM
        "extra_read.intermediates": 5 * se + qe + (se + L * S if causal else 0),
        "extra_write.intermediates": 2 * se + qe + (se if causal else 0),
        "launches": 7 if causal else 6, "working_set": 2 * (2 * 128 * 64) * E,
    }
    assert_terms(ev(OPS[0] if causal else OPS[1], "naive", "bwd", **D), exp)


@pytest.mark.parametrize("impl", ["fa2", "fa3"])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_fwd_formula(impl, causal):
    B, L, S, H, G, P = D.values()
    a = entries(causal, L, S)
    # P = 16: FA2 128 x 128, one stage; FA3 (hdim <= 64) 192 x (128 causal, 192 full), two stages
    bm, bn, stages = (128, 128, 1) if impl == "fa2" else (192, 128 if causal else 192, 2)
    exp = {
        "tensor.bf16": 4 * B * H * a * P,
        "vector": 4 * B * H * a + (P + 3) * B * H * a / bn + (P + 3) * B * H * L,
        "transcendental": B * H * a + B * H * a / bn + B * H * L,
        "read.activations": B * H * L * P * E + 2 * B * G * S * P * E, "write.activations": B * H * L * P * E,
        "extra_write.intermediates": 4 * B * H * L,  # logsumexp
        "launches": 1, "working_set": (bm + 2 * stages * bn) * P * E,
    }
    assert_terms(ev(OPS[0] if causal else OPS[1], impl, "fwd", **D), exp)


def test_fa3_fp8_fwd_formula():
    B, L, S, H, G, P = D.values()
    c = ev("attention_full", "fa3", "fwd", "fp8", **D)
    assert set(c.tensor) == {"fp8"} and close(c.tensor["fp8"], 4 * B * H * L * S * P)
    assert close(c.read["activations"], B * H * L * P + 2 * B * G * S * P)  # 1 byte per element
    assert close(c.write["activations"], B * H * L * P * 2)  # output in bf16
    assert close(c.working_set, (192 + 2 * 2 * 160) * P * 1)


@pytest.mark.parametrize("gqa", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_fa2_bwd_formula(gqa, causal):
    B, L, S, H, P = 2, 8, 8, 4, 16
    G = 2 if gqa else H
    a = entries(causal, L, S)
    qe, lse, acc = B * H * L * P * E, 4 * B * H * L, 4 * B * H * L * P
    expanded = 2 * B * S * H * P * E if gqa else 0
    exp = {
        "tensor.bf16": 10 * B * H * a * P,
        "vector": 2 * B * H * L * P + 4 * B * H * a + B * H * S * P + B * H * L * P + 2 * B * S * (H - G) * P,
        "transcendental": B * H * a,
        "read.activations": 2 * qe + 2 * B * G * S * P * E, "write.activations": qe + 2 * B * G * S * P * E,
        "extra_read.activations": 2 * qe,  # O and a second read of dO (preprocess and main kernel)
        "extra_read.intermediates": 2 * lse + 2 * acc + expanded,
        "extra_write.intermediates": lse + 2 * acc + expanded,
        "launches": 5 if gqa else 3, "working_set": (3 * 64 * P + 2 * 128 * P + 2 * 64 * 128) * E,
    }
    assert_terms(ev(OPS[0] if causal else OPS[1], "fa2", "bwd", B=B, L=L, S=S, H=H, G=G, P=P), exp)


@pytest.mark.parametrize("gqa", [False, True])
def test_fa3_bwd_formula(gqa):
    B, L, S, H, P = 2, 8, 8, 4, 16
    G = 2 if gqa else H
    qe, lse, acc, kv_acc = B * H * L * P * E, 4 * B * H * L, 4 * B * H * L * P, 4 * B * G * S * P
    exp = {
        "tensor.bf16": 10 * B * H * L * S * P,
        "vector": 2 * B * H * L * P + B * H * L + 4 * B * H * L * S + B * H * L * P
        + (B * G * S * P if gqa else B * H * S * P),
        "transcendental": B * H * L * S,
        "read.activations": 2 * qe + 2 * B * G * S * P * E, "write.activations": qe + 2 * B * G * S * P * E,
        "extra_read.activations": 2 * qe,
        "extra_read.intermediates": 3 * lse + 2 * acc + (4 * kv_acc if gqa else 0),
        "extra_write.intermediates": 2 * lse + 2 * acc + (4 * kv_acc if gqa else 0),
        "launches": 7 if gqa else 3, "working_set": (4 * 80 * P + 2 * 128 * P + 2 * 80 * 128) * E,
    }
    assert_terms(ev("attention_full", "fa3", "bwd", B=B, L=L, S=S, H=H, G=G, P=P), exp)


@pytest.mark.parametrize("op", OPS)
def test_decode_formulas(op):
    B, S, H, G, P = 2, 1000, 4, 2, 16
    dims = dict(B=B, S=S, H=H, G=G, P=P)  # no L: decode is one query per sequence
    qe, kv, se = B * H * P * E, 2 * B * G * S * P * E, B * H * S * E
    common = {"tensor.bf16": 4 * B * H * S * P, "read.activations": qe, "read.kv_cache": kv, "write.activations": qe}
    assert_terms(ev(op, "naive", "decode", **dims), {
        **common, "vector": B * H * P + 4 * B * H * S, "transcendental": B * H * S,
        "extra_read.intermediates": qe + 2 * se, "extra_write.intermediates": qe + 2 * se,
        "launches": 4, "working_set": 2 * (2 * 128 * 64) * E})
    bn = 256  # split-KV kernel, hdim <= 64
    base_v = 4 * B * H * S + (P + 3) * B * H * S / bn
    base_t = B * H * S + B * H * S / bn
    assert_terms(ev(op, "fa2", "decode", **dims), {
        **common, "vector": base_v + (P + 3) * B * H, "transcendental": base_t + B * H,
        "extra_write.intermediates": 4 * B * H, "launches": 1, "working_set": (64 + 2 * bn) * P * E})
    n = math.ceil(S / SPLITKV_CHUNK)
    assert n == 2
    partial = 4 * n * B * H * (P + 1)
    assert_terms(ev(op, "splitkv", "decode", **dims), {
        **common, "vector": base_v + (P + 3) * n * B * H + B * H * (n * (2 * P + 4) + 1),
        "transcendental": base_t + n * B * H + B * H * (2 * n + 1),
        "extra_read.intermediates": partial, "extra_write.intermediates": partial + 4 * B * H,
        "launches": 2, "working_set": (64 + 2 * bn) * P * E})


def test_decode_does_not_depend_on_L():
    for op in OPS:
        for impl in ("naive", "fa2", "splitkv"):
            assert L_SYM not in symbolic_cost(op, impl, "decode", "bf16").free_symbols()


def test_short_sequence_backward_crossover():
    """Where FA2's backward moves more than naive: 2 queries, MHA, S = P (see the property below)."""
    dims = dict(B=1, L=2, S=128, H=8, G=8, P=128)
    assert ev("attention_full", "fa2", "bwd", **dims).executed_bytes > ev(
        "attention_full", "naive", "bwd", **dims).executed_bytes


def test_library_working_sets_at_head_dim_128():
    """Tiles against the shared-memory figures the libraries state for P = 128, bf16."""
    assert close(fa_smem_fwd("fa2", True, "bf16").subs(P_SYM, 128), 64 * KIB)  # 128 x 64, 1 stage
    assert close(fa_smem_fwd("fa3", True, "bf16").subs(P_SYM, 128), 160 * KIB)  # 128 x 128, 2 stages
    assert close(fa_smem_fwd("fa3", False, "bf16").subs(P_SYM, 128), 208 * KIB)  # 128 x 176 (< 227 KiB)
    dims = dict(B=1, L=4096, S=4096, H=8, G=8, P=128)
    assert close(ev("attention_full", "fa2", "bwd", **dims).working_set, 144 * KIB)  # "144KB" in FA2


def test_kv_cache_bytes_per_token():
    from ssmbench.analytic.ops.attention.common import kv_cache_bytes_per_token
    from ssmbench.analytic.symbols import G as G_SYM

    per_token = int(kv_cache_bytes_per_token("bf16").subs({G_SYM: 8, P_SYM: 128}))
    assert per_token == 2 * 8 * 128 * 2  # 4 KiB per token per layer for 8 KV heads of 128, bf16
    c = ev("attention_causal", "fa2", "decode", B=3, S=1000, H=32, G=8, P=128)
    assert c.read["kv_cache"] == 3 * 1000 * per_token


# Errors --------------------------------------------------------------------------------------------
def test_bad_input_raises_user_errors():
    dims = dict(B=1, L=8, S=8, H=4, G=2, P=64)
    with pytest.raises(AnalyticError, match="fp32"):
        ev("attention_full", "fa2", "fwd", "fp32", **dims)
    with pytest.raises(AnalyticError, match="fp8 backward"):
        ev("attention_full", "fa3", "bwd", "fp8", **dims)
    with pytest.raises(AnalyticError, match="no cost rule for mode 'fwd'"):
        ev("attention_full", "splitkv", "fwd", **dims)
    with pytest.raises(AnalyticError, match="H must be divisible by G"):
        ev("attention_full", "fa2", "fwd", **{**dims, "G": 3})
    with pytest.raises(AnalyticError, match="L must be at most S"):
        ev("attention_causal", "fa2", "fwd", **{**dims, "L": 16})
    assert issubclass(AnalyticError, UserError)
    ev("attention_full", "fa2", "fwd", **{**dims, "L": 16})  # cross attention: any L, S


# Properties -----------------------------------------------------------------------------------------
DTYPE_OF = {"naive": "bf16", "fa2": "bf16", "fa3": "bf16", "splitkv": "bf16"}


@st.composite
def shapes(draw):
    L = draw(st.integers(1, 512))
    S = L + draw(st.integers(0, 512))
    G = draw(st.sampled_from([1, 2, 4, 8]))
    H = G * draw(st.sampled_from([1, 2, 4]))
    P = draw(st.sampled_from([16, 64, 96, 128, 160, 192, 256]))
    return dict(B=draw(st.integers(1, 8)), L=L, S=S, H=H, G=G, P=P)


def _dims_for(mode, d):
    return {k: v for k, v in d.items() if k != "L"} if mode == "decode" else d


@settings(max_examples=40, deadline=None)
@given(shapes())
def test_executed_at_least_compulsory_and_nonnegative(d):
    for op, impl, mode in CASES:
        c = ev(op, impl, mode, DTYPE_OF[impl], **_dims_for(mode, d))
        for m in (c.extra_read, c.extra_write):
            assert all(float(v) >= 0 for v in m.values()), (op, impl, mode, m)
        assert c.executed_bytes >= c.bytes > 0 and c.tensor_flops > 0 and c.launches >= 1


@settings(max_examples=40, deadline=None)
@given(shapes())
def test_flash_and_naive_same_flops_naive_more_bytes(d):
    for op in OPS:
        fa2, fa3, naive = (ev(op, i, "fwd", **d) for i in ("fa2", "fa3", "naive"))
        assert fa2.tensor_flops == fa3.tensor_flops
        if op == "attention_full":
            assert naive.tensor_flops == fa2.tensor_flops
        else:  # naive computes the masked half too
            assert naive.tensor_flops == ev("attention_full", "naive", "fwd", **d).tensor_flops
        assert naive.bytes == fa2.bytes == fa3.bytes
        assert naive.executed_bytes > fa2.executed_bytes == fa3.executed_bytes
        fb2, fb3, nb = (ev(op, i, "bwd", **d) for i in ("fa2", "fa3", "naive"))
        assert fb2.tensor_flops == fb3.tensor_flops == 2.5 * fa2.tensor_flops
        # Backward extras (bf16): naive 14*B*H*L*S + 6*B*H*L*P (scores, probabilities and their grads);
        # FA2 20*B*H*L*P + 12*B*H*L (fp32 dQ accumulator, O, lse, D) + 8*B*S*H*P under GQA (expanded
        # dK, dV). Naive moves more once L >= P and S >= 4P (MHA: once S > P + 1); for short
        # sequences the fp32 dQ accumulator dominates and FA2 moves more.
        if d["L"] >= d["P"] and d["S"] >= 4 * d["P"]:
            assert nb.executed_bytes > fb2.executed_bytes
        if d["G"] == d["H"] and d["S"] > d["P"] + 1:
            assert nb.executed_bytes > fb2.executed_bytes


@settings(max_examples=40, deadline=None)
@given(shapes())
def test_causal_is_half_of_full_on_scores(d):
    d = {**d, "S": d["L"]}
    for impl in ("fa2", "fa3"):
        for mode in ("fwd", "bwd"):
            c, f = ev("attention_causal", impl, mode, **d), ev("attention_full", impl, mode, **d)
            assert c.tensor_flops == CAUSAL_FRACTION * f.tensor_flops
            assert c.bytes == f.bytes


@settings(max_examples=40, deadline=None)
@given(shapes())
def test_gqa_changes_kv_bytes_not_flops(d):
    H = d["H"]
    for op, impl, mode in CASES:
        dtype = DTYPE_OF[impl]
        mha = ev(op, impl, mode, dtype, **_dims_for(mode, {**d, "G": H}))
        mqa = ev(op, impl, mode, dtype, **_dims_for(mode, {**d, "G": 1}))
        a = {**d, "L": d["L"] if mode != "decode" else 1}
        expected = 4 * a["B"] * H * (entries(op == "attention_causal" and impl != "naive" and mode != "decode",
                                             a["L"], a["S"])) * a["P"]
        mult = {"fwd": 1, "decode": 1, "bwd": 2 if impl == "naive" else 2.5}[mode]
        assert close(mha.tensor_flops, mult * expected)  # G = H is plain MHA
        assert mha.tensor_flops == mqa.tensor_flops
        kv_delta = 2 * d["B"] * d["S"] * (H - 1) * d["P"] * E
        cls = "kv_cache" if mode == "decode" else "activations"
        assert close(mha.read[cls] - mqa.read[cls], kv_delta)
        if mode != "bwd":  # fwd / decode: nothing else depends on G
            assert mha.vector == mqa.vector and mha.extra_read == mqa.extra_read and mha.launches == mqa.launches


@settings(max_examples=30, deadline=None)
@given(shapes(), st.sampled_from(["B", "L", "S", "H", "P"]))
def test_monotone_in_every_dimension(d, dim):
    bigger = dict(d)
    if dim == "H":
        bigger["H"] = 2 * d["H"]  # stays divisible by G
    elif dim == "P":
        bigger["P"] = d["P"] + 32
    else:
        bigger[dim] = d[dim] + 7
    if dim == "L":
        bigger["S"] = max(d["S"], bigger["L"])  # causal needs L <= S
    for op, impl, mode in CASES:
        if mode == "decode" and dim == "L":
            continue
        lo = ev(op, impl, mode, **_dims_for(mode, d))
        hi = ev(op, impl, mode, **_dims_for(mode, bigger))
        attrs = ["tensor_flops", "flops", "bytes", "executed_bytes"]
        if dim != "P":  # a larger head dim can pick wider key tiles: fewer online-softmax rescales
            attrs += ["vector", "transcendental"]
        for attr in attrs:
            assert getattr(hi, attr) >= getattr(lo, attr), (op, impl, mode, dim, attr)


@settings(max_examples=30, deadline=None)
@given(shapes())
def test_compulsory_bytes_monotone_in_G(d):
    if d["G"] == d["H"]:
        return
    for op, impl, mode in CASES:
        lo = ev(op, impl, mode, **_dims_for(mode, d))
        hi = ev(op, impl, mode, **_dims_for(mode, {**d, "G": d["H"]}))
        assert hi.bytes > lo.bytes


@settings(max_examples=30, deadline=None)
@given(shapes())
def test_backward_at_least_forward(d):
    for op in OPS:
        for impl in ("naive", "fa2", "fa3"):
            f, b = ev(op, impl, "fwd", **d), ev(op, impl, "bwd", **d)
            for attr in ("tensor_flops", "flops", "bytes", "executed_bytes", "launches"):
                assert getattr(b, attr) >= getattr(f, attr), (op, impl, attr)


@settings(max_examples=30, deadline=None)
@given(shapes())
def test_splitkv_vs_fa2_decode(d):
    dd = _dims_for("decode", d)
    for op in OPS:
        s, f = ev(op, "splitkv", "decode", **dd), ev(op, "fa2", "decode", **dd)
        n = math.ceil(d["S"] / SPLITKV_CHUNK)
        BH, P = d["B"] * d["H"], d["P"]
        assert s.tensor_flops == f.tensor_flops
        # per-split finalization of the partial outputs, then the combine kernel
        assert close(s.vector - f.vector, (n - 1) * BH * (P + 3) + BH * (n * (2 * P + 4) + 1))
        assert close(s.transcendental - f.transcendental, (n - 1) * BH + BH * (2 * n + 1))
        assert close(s.executed_bytes - f.executed_bytes, 2 * 4 * n * BH * (P + 1))
        assert s.bytes == f.bytes and s.launches == f.launches + 1
        naive = ev(op, "naive", "decode", **dd)
        assert naive.tensor_flops == f.tensor_flops and naive.executed_bytes > f.executed_bytes


@settings(max_examples=20, deadline=None)
@given(shapes(), st.integers(2, 64))
def test_costs_add_over_layers(d, layers):
    for op, impl, mode in CASES[:6]:
        c = ev(op, impl, mode, **_dims_for(mode, d))
        stacked = sum([c] * layers)
        for key, v in (layers * c).terms().items():
            if key == "working_set":
                assert stacked.working_set == c.working_set  # kernels run one after another
            else:
                assert np.isclose(stacked.terms()[key], v)


def test_every_op_mode_has_a_rule_and_registered_dims():
    for op in OPS:
        o = get_op(op)
        assert o.dims == ("B", "L", "S", "H", "G", "P")
        assert set(o.modes) == {"fwd", "bwd", "fwdbwd", "decode"}
        assert o.reference.endswith("_ref")
