"""The shared kernel-sequence helper (``analytic/ops/_kernels.py``): repeated launches, tensor-core
FLOPs on a kernel, per-step slices, the two working-set conventions, and its consistency checks."""

from __future__ import annotations

import pytest
import sympy as sp
from ssmbench.analytic.ops.common.kernels import (
    STREAM_BLOCK,
    Kernel,
    Tensor,
    kernel_chain,
    with_io,
)
from ssmbench.analytic.symbols import B, L, N

X = Tensor("x", "activations", B * L, 2)  # [B, L]
Y = Tensor("y", "activations", B * L, 2)
H = Tensor("h", "state", B * N * L, 4)  # [B, L, N] over all steps


def test_count_repeats_a_launch_bytes_flops_and_launches():
    step = Kernel("step", (X.per(L), H.per(L)), (H.per(L),), vector=3 * B * N, transcendental=B,
                  tensor={"fp32": 2 * B * N}, count=L)
    out = Kernel("out", (H,), (Y,), vector=B * L)
    c = kernel_chain([step, out], [X], [Y])
    assert sp.expand(c.vector - (3 * B * N * L + B * L)) == 0
    assert c.transcendental == B * L and c.tensor == {"fp32": 2 * B * N * L}
    assert c.launches == L + 1
    assert c.read == {"activations": 2 * B * L} and c.write == {"activations": 2 * B * L}
    # the state: read and written every step, then read once more by "out"
    assert c.extra_read == {"state": 8 * B * L * N} and c.extra_write == {"state": 4 * B * L * N}


def test_slices_share_the_name_of_their_tensor_but_shapes_must_otherwise_agree():
    assert X.per(L).elements == B and X.per(L).name == "x"
    kernel_chain([Kernel("k", (X.per(L),), (Y,), count=L)], [X], [Y])  # the input read slice by slice
    other = Tensor("x", "activations", 2 * B * L, 2)
    with pytest.raises(ValueError, match="'x' declared twice with different shapes or classes"):
        kernel_chain([Kernel("k", (X, other), (Y,))], [X], [Y])
    with pytest.raises(ValueError, match="input 'x' is read by no kernel"):
        kernel_chain([Kernel("k", (), (Y,))], [X], [Y])
    with pytest.raises(ValueError, match="output 'y' is written by no kernel"):
        kernel_chain([Kernel("k", (X,), ())], [X], [Y])


def test_working_set_streaming_by_default_or_not_modelled():
    a = Kernel("elementwise", (X,), (Y,))
    tiled = Kernel("tiled", (Y,), (Tensor("z", "activations", B * L, 2),), working_set=4096)
    z = tiled.writes[0]
    assert kernel_chain([a], [X], [Y]).working_set == STREAM_BLOCK * 4
    assert kernel_chain([a], [X], [Y], stream_working_sets=False).working_set == 0
    assert kernel_chain([a, tiled], [X], [z], stream_working_sets=False).working_set == 4096
    assert kernel_chain([a, tiled], [X], [z]).working_set == sp.Max(STREAM_BLOCK * 4, 4096)


def test_with_io_keeps_executed_bytes_and_moves_the_rest_to_extra():
    mid = Tensor("mid", "intermediates", B * L, 4)
    stage1 = kernel_chain([Kernel("s1", (X,), (mid,))], [X], [mid])
    stage2 = kernel_chain([Kernel("s2", (mid,), (Y,))], [mid], [Y])
    c = with_io(stage1 + stage2, [X], [Y])
    assert c.read == {"activations": 2 * B * L} and c.extra_read == {"intermediates": 4 * B * L}
    assert c.extra_write == {"intermediates": 4 * B * L} and c.launches == 2
    assert sp.expand(c.executed_bytes - (stage1 + stage2).executed_bytes) == 0
