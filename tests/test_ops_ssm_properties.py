"""Properties of every state-space op rule (conv1d, s4, mamba1_scan, ssd and its stages, mamba3),
checked with hypothesis over small dimensions: executed >= compulsory bytes, monotone in every
dimension, backward >= forward, naive scans move more than the fused one, per-step loops add a fixed
number of launches per step."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ssmbench.analytic.registry import AnalyticError, cost, get_op

SETTINGS = settings(max_examples=30, deadline=None)
SSM_OPS = ("conv1d", "s4", "mamba1_scan", "ssd", "ssd_chunk_cumsum", "ssd_bmm", "ssd_chunk_state",
           "ssd_state_passing", "ssd_chunk_scan", "mamba3")
# Dimensions that set a chunk size: growing them trades work between terms (not monotone).
CHUNKING = {"C"}


def _ssd_dims(draw):
    c = draw(st.sampled_from([1, 2, 4, 8, 16]))
    g = draw(st.sampled_from([1, 2]))
    return dict(B=draw(st.integers(1, 3)), L=c * draw(st.integers(1, 8)), H=g * draw(st.integers(1, 4)),
                P=draw(st.integers(1, 16)), N=draw(st.integers(1, 16)), G=g, C=c)


@st.composite
def op_dims(draw, op):
    if op == "conv1d":
        return dict(B=draw(st.integers(1, 4)), L=draw(st.integers(1, 64)), E=draw(st.integers(1, 16)),
                    K=draw(st.integers(2, 4)))
    if op == "s4":
        return dict(B=draw(st.integers(1, 3)), L=draw(st.integers(1, 64)), E=draw(st.integers(1, 8)),
                    N=draw(st.integers(1, 16)))
    if op == "mamba1_scan":
        return dict(B=draw(st.integers(1, 3)), L=draw(st.integers(1, 5000)), E=draw(st.integers(1, 16)),
                    N=draw(st.integers(1, 32)))
    if op == "mamba3":
        return dict(B=draw(st.integers(1, 2)), L=64 * draw(st.integers(1, 4)), H=draw(st.integers(1, 4)),
                    P=draw(st.integers(1, 64)), N=4 * draw(st.integers(1, 16)), M=draw(st.sampled_from([1, 2, 4, 8])))
    d = _ssd_dims(draw)
    return {k: v for k, v in d.items() if k in get_op(op).dims}


def cases(op):
    o = get_op(op)
    return [(i.name, m, d) for i in o.impls for m in i.modes for d in ("bf16", "fp32") if d in o.dtypes]


def _eval(op, dims, impl, mode, dtype):
    return cost(op, dims, impl, mode, dtype)


def _used(op, impl, mode, dtype):
    from ssmbench.analytic.registry import compiled_cost
    return compiled_cost(op, impl, mode, dtype).dims


def _fields(r):
    return dict(flops=r.flops, tensor=r.tensor_flops, vector=r.vector, transcendental=r.transcendental,
                bytes=r.bytes, executed=r.executed_bytes, launches=r.launches, working_set=r.working_set)


@pytest.mark.parametrize("op", SSM_OPS)
@SETTINGS
@given(data=st.data())
def test_executed_at_least_compulsory(op, data):
    dims = data.draw(op_dims(op))
    for impl, mode, dtype in cases(op):
        r = _eval(op, dims, impl, mode, dtype)
        for cls, v in {**r.extra_read, **r.extra_write}.items():
            assert v >= -1e-9, (impl, mode, dtype, cls, v)
        assert r.executed_bytes >= r.bytes > 0
        assert r.flops >= 0 and r.transcendental >= 0 and r.launches >= 1 and r.working_set >= 0


@pytest.mark.parametrize("op", SSM_OPS)
@SETTINGS
@given(data=st.data())
def test_monotone_in_every_dimension(op, data):
    dims = data.draw(op_dims(op))
    for impl, mode, dtype in cases(op):
        used = _used(op, impl, mode, dtype)
        base = _fields(_eval(op, dims, impl, mode, dtype))
        for d in used:
            if d in CHUNKING:
                continue
            try:
                grown = _fields(_eval(op, {**dims, d: 2 * dims[d]}, impl, mode, dtype))
            except AnalyticError:
                continue  # doubling broke a divisibility constraint
            # MIMO's chunk is 64/M tokens: M trades segment-sum bytes and tile sizes like C does.
            keys = ("flops", "tensor", "transcendental") if (op, d) == ("mamba3", "M") else base
            for k in keys:
                assert grown[k] >= base[k] - 1e-9 * abs(base[k]), (impl, mode, dtype, d, k, base[k], grown[k])


@pytest.mark.parametrize("op,impl", [("conv1d", "causal_conv1d"), ("conv1d", "torch_conv"),
                                     ("mamba1_scan", "fused"), ("ssd", "chunked")])
@SETTINGS
@given(data=st.data())
def test_backward_at_least_forward(op, impl, data):
    dims = data.draw(op_dims(op))
    for dtype in ("bf16", "fp32"):
        f, b = _eval(op, dims, impl, "fwd", dtype), _eval(op, dims, impl, "bwd", dtype)
        assert b.flops >= f.flops and b.executed_bytes >= f.executed_bytes and b.launches >= f.launches


@SETTINGS
@given(data=st.data())
def test_naive_scans_move_more_than_fused(data):
    dims = data.draw(op_dims("mamba1_scan"))
    for dtype in ("bf16", "fp32"):
        fused = _eval("mamba1_scan", dims, "fused", "fwd", dtype)
        for impl in ("naive", "loop"):
            r = _eval("mamba1_scan", dims, impl, "fwd", dtype)
            assert r.executed_bytes > fused.executed_bytes and r.launches > fused.launches
        d = {k: v for k, v in dims.items() if k != "L"}
        assert _eval("mamba1_scan", d, "naive", "decode", dtype).executed_bytes > \
            _eval("mamba1_scan", d, "fused", "decode", dtype).executed_bytes


@pytest.mark.parametrize("op,impl,per_step", [("mamba1_scan", "loop", 7), ("mamba1_scan", "naive", 3),
                                              ("s4", "recurrent", 7), ("ssd", "recurrent", 5)])
@SETTINGS
@given(data=st.data())
def test_loop_launches_scale_with_L(op, impl, per_step, data):
    dims = data.draw(op_dims(op))
    dims.pop("C", None)
    for dtype in ("bf16", "fp32"):
        a = _eval(op, dims, impl, "fwd", dtype).launches
        b = _eval(op, {**dims, "L": dims["L"] + 1}, impl, "fwd", dtype).launches
        assert b - a == per_step
        assert a > per_step * dims["L"]


def test_every_ssm_op_has_a_reference_that_imports():
    import importlib
    for op in SSM_OPS:
        mod, fn = get_op(op).reference.split(":")
        assert callable(getattr(importlib.import_module(mod), fn))


def test_fft_convention_uses_log2():
    r = cost("s4", dict(B=1, L=512, E=1, N=1), "fft", "fwd", "fp32")
    r2 = cost("s4", dict(B=2, L=512, E=1, N=1), "fft", "fwd", "fp32")
    # one more rfft and irfft of length 2L, the product of L + 1 frequencies, irfft's 1/(2L) scale
    # of 2L outputs, and the skip (u D, add) of L
    assert r2.vector - r.vector == pytest.approx(2 * 2.5 * 1024 * math.log2(1024) + 6 * 513 + 1024 + 2 * 512)
