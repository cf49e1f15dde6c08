"""The basic op families: norms, elementwise, softmax, embedding / LM head, MLP, MoE.

Expected values are formulas over small dims written out here; matmul FLOPs are cross-checked with
``torch.utils.flop_counter``; the eager implementations' launches and bytes are checked against the
aten ops their reference functions actually dispatch; properties run under hypothesis.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ssmbench.analytic.registry import cost, get_op

OURS = ("rmsnorm", "layernorm", "gated_rmsnorm", "silu", "softplus", "silu_gate", "softmax", "embedding",
        "lm_head", "mlp", "mlp_relu2", "gated_mlp", "gated_mlp_geglu", "moe")
TILE_WS = 2 * (128 * 64 + 128 * 64) * 2  # the linear rule's bf16 GEMM working set


def check(op, impl, mode, dims, dtype="bf16", **expected):
    """Compare the listed fields exactly; byte maps must match class by class (no stray classes)."""
    c = cost(op, dims, impl=impl, mode=mode, dtype=dtype)
    for field, want in expected.items():
        got = getattr(c, field)
        if isinstance(want, dict):
            got = {k: float(v) for k, v in got.items() if float(v) != 0}
            want = {k: float(v) for k, v in want.items() if v != 0}
        assert got == want, f"{op}/{impl} {mode} {field}: got {got}, want {want}"


# formulas over small dims ------------------------------------------------------------------------------

NB, NL, ND = 2, 3, 8
N, R = NB * NL * ND, NB * NL  # elements and rows of [B, L, D]
E = 2  # bf16 bytes
BLD = {"B": NB, "L": NL, "D": ND}


def test_rmsnorm_fused():
    check("rmsnorm", "fused", "fwd", BLD, vector=R * (4 * ND + 2), transcendental=R,
          read={"activations": N * E, "weights": ND * E}, write={"activations": N * E},
          extra_read={}, extra_write={"intermediates": 4 * R}, launches=1, working_set=2 * ND * 4)
    check("rmsnorm", "fused", "bwd", BLD, vector=R * (9 * ND + 1), transcendental=0,
          read={"activations": 2 * N * E, "weights": ND * E}, write={"activations": N * E, "weights": ND * E},
          extra_read={"intermediates": 4 * R}, extra_write={}, launches=2)
    check("rmsnorm", "fused", "decode", BLD, vector=NB * (4 * ND + 2), transcendental=NB,
          read={"activations": NB * ND * E, "weights": ND * E})


def test_rmsnorm_eager_fp32():
    # pow, mean, add, rsqrt, mul (re-reads x), mul by w; no casts in fp32
    check("rmsnorm", "torch_eager", "fwd", BLD, dtype="fp32", vector=R * (4 * ND + 2), transcendental=R,
          read={"activations": 4 * N, "weights": 4 * ND}, write={"activations": 4 * N},
          extra_read={"activations": 4 * N, "intermediates": 4 * N * 2 + 4 * R * 3},
          extra_write={"intermediates": 4 * N * 2 + 4 * R * 3}, launches=6)


@pytest.mark.parametrize("op, dims", [("rmsnorm", BLD), ("layernorm", BLD), ("gated_rmsnorm", BLD),
                                      ("silu_gate", BLD), ("softmax", {"B": 2, "H": 3, "L": 4, "S": 5})])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_eager_does_the_fused_arithmetic_with_more_traffic(op, dims, dtype):
    fused, eager = cost(op, dims, impl="fused", dtype=dtype), cost(op, dims, impl="torch_eager", dtype=dtype)
    assert (eager.vector, eager.transcendental) == (fused.vector, fused.transcendental)
    assert (eager.bytes_read, eager.bytes_written) == (fused.bytes_read, fused.bytes_written)
    assert eager.executed_bytes > fused.executed_bytes and eager.launches > fused.launches


def test_layernorm_and_gated_rmsnorm_fused():
    check("layernorm", "fused", "fwd", BLD, vector=R * (7 * ND + 3), transcendental=R,
          read={"activations": N * E, "weights": 2 * ND * E}, write={"activations": N * E},
          extra_write={"intermediates": 8 * R}, launches=1, working_set=3 * ND * 4)
    check("layernorm", "fused", "bwd", BLD, vector=R * (13 * ND + 2),
          write={"activations": N * E, "weights": 2 * ND * E}, extra_read={"intermediates": 8 * R})
    check("gated_rmsnorm", "fused", "fwd", BLD, vector=R * (8 * ND + 2), transcendental=R * (ND + 1),
          read={"activations": 2 * N * E, "weights": ND * E}, write={"activations": N * E},
          extra_write={"intermediates": 4 * R}, launches=1)
    check("gated_rmsnorm", "fused", "bwd", BLD, vector=R * (20 * ND + 1), transcendental=N,
          read={"activations": 3 * N * E, "weights": ND * E},
          write={"activations": 2 * N * E, "weights": ND * E}, launches=2)


def test_elementwise():
    check("silu", None, "fwd", BLD, vector=3 * N, transcendental=N, read={"activations": N * E},
          write={"activations": N * E}, extra_read={}, extra_write={}, launches=1)
    check("silu", None, "bwd", BLD, vector=7 * N, transcendental=N, read={"activations": 2 * N * E},
          write={"activations": N * E}, launches=1)
    check("softplus", None, "fwd", BLD, vector=N, transcendental=2 * N)
    check("softplus", None, "bwd", BLD, vector=3 * N, transcendental=N)
    check("silu_gate", "fused", "fwd", BLD, vector=4 * N, transcendental=N, read={"activations": 2 * N * E},
          write={"activations": N * E}, extra_read={}, extra_write={}, launches=1)
    check("silu_gate", "fused", "bwd", BLD, vector=10 * N, transcendental=N, read={"activations": 3 * N * E},
          write={"activations": 2 * N * E}, extra_read={}, launches=1)
    check("silu_gate", "torch_eager", "fwd", BLD, vector=4 * N, transcendental=N,
          extra_read={"intermediates": N * E}, extra_write={"intermediates": N * E}, launches=2)
    # dx = dy * t, dt = dy * x (dy read twice), dz = silu_backward(dt, z)
    check("silu_gate", "torch_eager", "bwd", BLD, vector=9 * N, transcendental=N,
          extra_read={"activations": N * E, "intermediates": 2 * N * E},
          extra_write={"intermediates": N * E}, launches=3)


def test_softmax():
    d = {"B": 2, "H": 3, "L": 4, "S": 5}
    rows, n = 2 * 3 * 4, 2 * 3 * 4 * 5
    one = {"activations": n * E}
    check("softmax", "fused", "fwd", d, vector=4 * n, transcendental=n, read=one, write=one,
          extra_read={}, launches=1, working_set=4 * 5)
    check("softmax", "online", "fwd", d, vector=7 * n, transcendental=3 * n, extra_read=one)
    check("softmax", "three_pass", "fwd", d, vector=5 * n, transcendental=2 * n,
          extra_read={"activations": 2 * n * E})
    check("softmax", "torch_eager", "fwd", d, vector=4 * n, transcendental=n, launches=5,
          extra_read={"activations": n * E, "intermediates": 3 * n * E + 2 * rows * E},
          extra_write={"intermediates": 2 * n * E + 2 * rows * E})
    check("softmax", "fused", "bwd", d, vector=4 * n, transcendental=0, read={"activations": 2 * n * E},
          write=one, extra_read={})
    check("softmax", "online", "bwd", d, extra_read={"activations": 2 * n * E})
    check("softmax", "fused", "decode", d, vector=4 * 2 * 3 * 5)


def test_embedding_and_lm_head():
    d = {"B": 2, "L": 3, "D": 8, "V": 5}  # 6 tokens, only 5 distinct rows exist
    check("embedding", None, "fwd", d, vector=0, tensor={}, read={"activations": 8 * 6, "weights": 5 * 8 * E},
          write={"activations": 6 * 8 * E}, extra_read={"weights": 1 * 8 * E}, launches=1)
    check("embedding", None, "fwd", {**d, "V": 100}, read={"activations": 8 * 6, "weights": 6 * 8 * E},
          extra_read={})
    check("embedding", None, "bwd", d, vector=6 * 8, read={"activations": 6 * 8 * E + 8 * 6},
          write={"weights": 5 * 8 * E}, extra_read={"weights": 6 * 8 * E}, extra_write={"weights": 6 * 8 * E},
          launches=2)
    check("embedding", None, "decode", d, read={"activations": 8 * 2, "weights": 2 * 8 * E})
    h = {"B": 2, "L": 3, "D": 8, "V": 10}
    check("lm_head", None, "fwd", h, tensor={"bf16": 2 * 6 * 8 * 10}, read={"activations": 6 * 8 * E,
          "weights": 8 * 10 * E}, write={"activations": 6 * 10 * E}, launches=1)
    check("lm_head", None, "bwd", h, tensor={"bf16": 4 * 6 * 8 * 10}, launches=2,
          write={"activations": 6 * 8 * E, "weights": 8 * 10 * E})
    check("lm_head", None, "decode", h, tensor={"bf16": 2 * 2 * 8 * 10}, read={"activations": 2 * 8 * E,
          "weights": 8 * 10 * E})


T, FD, FF = 6, 8, 16  # tokens, D, F
MLPD = {"B": 2, "L": 3, "D": FD, "F": FF}


def test_mlp():
    own = dict(read={"activations": T * FD * E, "weights": 2 * FD * FF * E}, write={"activations": T * FD * E})
    check("mlp", "torch_eager", "fwd", MLPD, tensor={"bf16": 4 * T * FD * FF}, vector=7 * T * FF,
          transcendental=T * FF, **own, extra_read={"intermediates": 2 * T * FF * E},
          extra_write={"intermediates": 2 * T * FF * E}, launches=3, working_set=TILE_WS)
    check("mlp", "fused", "fwd", MLPD, tensor={"bf16": 4 * T * FD * FF}, vector=7 * T * FF, **own,
          extra_read={"intermediates": T * FF * E}, extra_write={"intermediates": T * FF * E}, launches=2)
    # reads a, dA, u, dU; writes dA, dU
    check("mlp", "torch_eager", "bwd", MLPD, tensor={"bf16": 8 * T * FD * FF}, vector=14 * T * FF,
          read={"activations": 2 * T * FD * E, "weights": 2 * FD * FF * E},
          write={"activations": T * FD * E, "weights": 2 * FD * FF * E},
          # + each GEMM backward reads its dY twice (dX and dW GEMMs): dY [T, D] and dH [T, F] once more
          extra_read={"intermediates": 4 * T * FF * E + T * FD * E + T * FF * E},
          extra_write={"intermediates": 2 * T * FF * E}, launches=5)


def test_gated_mlp():
    own = dict(read={"activations": T * FD * E, "weights": 3 * FD * FF * E}, write={"activations": T * FD * E})
    check("gated_mlp", "fused", "fwd", MLPD, tensor={"bf16": 6 * T * FD * FF}, vector=4 * T * FF,
          transcendental=T * FF, **own, extra_read={"intermediates": 3 * T * FF * E},
          extra_write={"intermediates": 3 * T * FF * E}, launches=3)
    # x read by both GEMMs; g, u, silu(g), a written and read back
    check("gated_mlp", "torch_eager", "fwd", MLPD, tensor={"bf16": 6 * T * FD * FF}, **own,
          extra_read={"activations": T * FD * E, "intermediates": 4 * T * FF * E},
          extra_write={"intermediates": 4 * T * FF * E}, launches=5)
    check("gated_mlp", "fused", "bwd", MLPD, tensor={"bf16": 12 * T * FD * FF}, vector=10 * T * FF, launches=5)
    check("gated_mlp", "torch_eager", "bwd", MLPD, tensor={"bf16": 12 * T * FD * FF},
          vector=9 * T * FF + T * FD, launches=10)


def test_gated_mlp_merged_eager():
    """mamba-ssm's GatedMLP: merged fc1 (one read of x), eager silu and mul (SILU + 1 per element), fc2;
    the kernels reading a strided half of fc1's output put their bytes on the strided-copy path."""
    own = dict(read={"activations": T * FD * E, "weights": 3 * FD * FF * E}, write={"activations": T * FD * E})
    # h [T, 2F] and a [T, F] written and read back, t = silu(g) [T, F] written and read
    check("gated_mlp", "merged_eager", "fwd", MLPD, tensor={"bf16": 6 * T * FD * FF}, vector=4 * T * FF,
          transcendental=T * FF, **own, extra_read={"intermediates": 4 * T * FF * E},
          extra_write={"intermediates": 4 * T * FF * E}, launches=4)
    fwd = cost("gated_mlp", MLPD, impl="merged_eager", mode="fwd")
    assert fwd.host == {"cublas": 2, "torch_eager": 2}
    # silu reads g, writes t; mul reads u and t, writes a: 5 [T, F] tensors through the path
    assert fwd.path == {"dram.strided_copy": 5 * T * FF * E}
    # backward: du = da * t, dt = da * u, silu_backward (SILU_BWD = 7 + 1), cat: 9 vector FLOPs per element
    check("gated_mlp", "merged_eager", "bwd", MLPD, tensor={"bf16": 12 * T * FD * FF}, vector=9 * T * FF,
          transcendental=T * FF, launches=8)
    bwd = cost("gated_mlp", MLPD, impl="merged_eager", mode="bwd")
    # da * u (3 tensors) and silu_backward(dt, g) -> dg (3 tensors) read a strided half; da * t does not
    assert bwd.path == {"dram.strided_copy": 6 * T * FF * E}


def test_mlp_relu2():
    """ReLU^2 (conventions.RELU2 = 2 + 0, RELU2_BWD = 3 + 0 per hidden element), the mlp's GEMMs and bytes."""
    own = dict(read={"activations": T * FD * E, "weights": 2 * FD * FF * E}, write={"activations": T * FD * E})
    check("mlp_relu2", "torch_eager", "fwd", MLPD, tensor={"bf16": 4 * T * FD * FF}, vector=2 * T * FF,
          transcendental=0, **own, extra_read={"intermediates": 2 * T * FF * E},
          extra_write={"intermediates": 2 * T * FF * E}, launches=3, working_set=TILE_WS)
    check("mlp_relu2", "fused", "fwd", MLPD, tensor={"bf16": 4 * T * FD * FF}, vector=2 * T * FF, transcendental=0,
          **own, extra_read={"intermediates": T * FF * E}, extra_write={"intermediates": T * FF * E}, launches=2)
    check("mlp_relu2", "torch_eager", "bwd", MLPD, tensor={"bf16": 8 * T * FD * FF}, vector=3 * T * FF,
          transcendental=0, launches=5)
    check("mlp_relu2", "fused", "decode", MLPD, tensor={"bf16": 4 * 2 * FD * FF}, vector=2 * 2 * FF, launches=2)
    assert not get_op("mlp_relu2").impl("fused").supports("bwd")


def test_gated_mlp_geglu():
    """GeGLU: the gated_mlp's GEMMs with y = x * gelu(z) (GELU = 7 + 1, GELU_BWD = 14 + 1) as the gate."""
    own = dict(read={"activations": T * FD * E, "weights": 3 * FD * FF * E}, write={"activations": T * FD * E})
    check("gated_mlp_geglu", "fused", "fwd", MLPD, tensor={"bf16": 6 * T * FD * FF}, vector=8 * T * FF,
          transcendental=T * FF, **own, extra_read={"intermediates": 3 * T * FF * E},
          extra_write={"intermediates": 3 * T * FF * E}, launches=3)
    check("gated_mlp_geglu", "torch_eager", "fwd", MLPD, tensor={"bf16": 6 * T * FD * FF}, vector=8 * T * FF,
          transcendental=T * FF, **own, extra_read={"activations": T * FD * E, "intermediates": 4 * T * FF * E},
          extra_write={"intermediates": 4 * T * FF * E}, launches=5)
    # fused backward: recompute gelu (7 + 1), two multiplies, gelu' (14 + 1), one kernel
    check("gated_mlp_geglu", "fused", "bwd", MLPD, tensor={"bf16": 12 * T * FD * FF}, vector=23 * T * FF,
          transcendental=2 * T * FF, launches=5)
    # eager backward: dx = dy * t, dt = dy * x, gelu_backward (14 + 1), and the dx add over [T, D]
    check("gated_mlp_geglu", "torch_eager", "bwd", MLPD, tensor={"bf16": 12 * T * FD * FF},
          vector=16 * T * FF + T * FD, transcendental=T * FF, launches=10)


@pytest.mark.parametrize("op, base, impl, mode, act, base_act", [
    ("mlp_relu2", "mlp", "torch_eager", "fwd", "RELU2", "GELU"),
    ("mlp_relu2", "mlp", "fused", "fwd", "RELU2", "GELU"),
    ("mlp_relu2", "mlp", "fused", "decode", "RELU2", "GELU"),
    ("mlp_relu2", "mlp", "torch_eager", "bwd", "RELU2_BWD", "GELU_BWD"),
    ("gated_mlp_geglu", "gated_mlp", "torch_eager", "fwd", "GELU", "SILU"),
    ("gated_mlp_geglu", "gated_mlp", "fused", "fwd", "GELU", "SILU"),
    ("gated_mlp_geglu", "gated_mlp", "torch_eager", "bwd", "GELU_BWD", "SILU_BWD"),
])
@settings(max_examples=20, deadline=None)
@given(b=st.integers(1, 4), l=st.integers(1, 64), d=st.integers(1, 300), f=st.integers(1, 600))
def test_activation_variants_differ_by_the_activation_constants_only(op, base, impl, mode, act, base_act, b, l, d, f):
    """Same tensor FLOPs, bytes and launches as the base op; vector / transcendental FLOPs differ by
    exactly (act - base act) per hidden element [B, L, F]."""
    dims = {"B": b, "L": l, "D": d, "F": f}
    new, old = cost(op, dims, impl=impl, mode=mode), cost(base, dims, impl=impl, mode=mode)
    hidden = b * (1 if mode == "decode" else l) * f
    from ssmbench.analytic import conventions
    a, a0 = getattr(conventions, act), getattr(conventions, base_act)
    assert new.tensor == old.tensor
    for field in ("bytes", "executed_bytes", "launches", "working_set"):
        assert float(getattr(new, field)) == float(getattr(old, field)), field
    assert float(new.vector - old.vector) == (a[0] - a0[0]) * hidden
    assert float(new.transcendental - old.transcendental) == (a[1] - a0[1]) * hidden


def test_activation_references_compute_their_activation():
    torch = pytest.importorskip("torch")
    from ssmbench.analytic.ops.mlp.ref import gated_mlp_geglu_ref, mlp_relu2_ref
    g = torch.Generator().manual_seed(0)
    x, w1, w2, w3 = (torch.randn(*s, generator=g, dtype=torch.float64) for s in ((2, 3, 8), (16, 8), (16, 8), (8, 16)))
    u = x @ w1.T
    assert torch.allclose(mlp_relu2_ref(x, w1, w3), (torch.clamp(u, min=0) ** 2) @ w3.T)
    gelu = 0.5 * u * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (u + 0.044715 * u ** 3)))
    assert torch.allclose(gated_mlp_geglu_ref(x, w1, w2, w3), (gelu * (x @ w2.T)) @ w3.T)


def test_moe():
    d = {"B": 2, "L": 3, "D": 8, "F": 16, "X": 4, "Xk": 2}
    t, copies, D_, F_, X_, k = 6, 12, 8, 16, 4, 2
    hit = X_ * (1 - (1 - k / X_) ** t)  # expected distinct experts of 6 tokens, top-2 of 4: 3.9375
    check("moe", None, "fwd", d, tensor={"bf16": 2 * t * D_ * X_ + 6 * copies * D_ * F_},
          vector=t * (4 * X_ + k * X_ + 2 * k) + 4 * copies * F_ + 2 * k * D_ * t,
          transcendental=copies * F_ + t * X_,
          read={"activations": t * D_ * E, "weights": (D_ * X_ + hit * 3 * D_ * F_) * E},
          write={"activations": t * D_ * E}, launches=7)
    check("moe", None, "bwd", d, tensor={"bf16": 2 * (2 * t * D_ * X_ + 6 * copies * D_ * F_)}, launches=11,
          write={"activations": t * D_ * E, "weights": (D_ * X_ + hit * 3 * D_ * F_) * E})
    # decode, one token, 8 experts, top-2: only 2 experts' weights are read
    check("moe", None, "decode", {**d, "B": 1, "X": 8},
          read={"activations": D_ * E, "weights": (D_ * 8 + 2 * 3 * D_ * F_) * E})
    # 4 tokens, top-2 of 8: 8 (1 - (3/4)^4) = 5.47 experts, not min(8, 8) = 8 (tokens share experts)
    check("moe", None, "decode", {**d, "B": 4, "X": 8},
          read={"activations": 4 * D_ * E, "weights": (D_ * 8 + 8 * (1 - 0.75 ** 4) * 3 * D_ * F_) * E})


def test_composites_are_sums_of_their_parts():
    """mlp = linear + gelu + linear and gated_mlp = linear + silu_gate + linear, as executed."""
    from ssmbench.analytic.conventions import GELU
    from ssmbench.analytic.ops.elementwise.cost import unary_cost
    from ssmbench.analytic.symbols import B, D, F, L
    parts = cost("linear", {"B": 2, "L": 3, "I": FD, "O": FF}) + cost("linear", {"B": 2, "L": 3, "I": FF, "O": FD})
    gelu = unary_cost(B * L * F, GELU, "bf16").subs({B: 2, L: 3, F: FF, D: FD})
    mlp = cost("mlp", MLPD, impl="torch_eager")
    for field in ("tensor_flops", "vector", "transcendental", "executed_bytes", "launches"):
        assert float(getattr(mlp, field)) == float(getattr(parts + gelu, field)), field
    gate = cost("silu_gate", {"B": 2, "L": 3, "D": FF}, impl="fused")
    gated = cost("gated_mlp", MLPD, impl="fused")
    merged = cost("linear", {"B": 2, "L": 3, "I": FD, "O": 2 * FF}) + gate + \
        cost("linear", {"B": 2, "L": 3, "I": FF, "O": FD})
    for field in ("tensor_flops", "vector", "transcendental", "executed_bytes", "launches"):
        assert float(getattr(gated, field)) == float(getattr(merged, field)), field


def test_every_op_names_an_importable_reference_and_documents_its_counts():
    import importlib
    for name in OURS:
        op = get_op(name)
        module, function = op.reference.split(":")
        assert callable(getattr(importlib.import_module(module), function)), name
        assert "not counted" in importlib.import_module(op.impls[0].rule.__module__).__doc__.lower(), name


# hypothesis properties ---------------------------------------------------------------------------------

def _cases():
    for name in OURS:
        op = get_op(name)
        for impl in op.impls:
            for mode in ("fwd", "bwd", "decode", "fwdbwd"):
                if impl.supports(mode):
                    yield name, impl.name, mode


CASES = list(_cases())
METRICS = ("tensor_flops", "vector", "transcendental", "bytes", "executed_bytes", "launches", "working_set")


def _dims(op_name):
    op = get_op(op_name)
    base = {d: st.integers(1, 300) for d in op.dims}
    return st.fixed_dictionaries(base).filter(lambda d: all(c.check(*(d[x] for x in c.dims)) for c in op.constraints))


def _valid(op_name, dims):
    op = get_op(op_name)
    return all(bool(c.check(*(dims[x] for x in c.dims))) for c in op.constraints)


@pytest.mark.parametrize("op, impl, mode", CASES)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_monotone_in_every_dim(op, impl, mode, data):
    dims = data.draw(_dims(op))
    step = data.draw(st.integers(1, 64))
    c0 = cost(op, dims, impl=impl, mode=mode)
    for d in dims:
        bigger = {**dims, d: dims[d] + step}
        if not _valid(op, bigger):
            continue
        c1 = cost(op, bigger, impl=impl, mode=mode)
        for m in METRICS:
            assert float(getattr(c1, m)) >= float(getattr(c0, m)), (d, m)


@pytest.mark.parametrize("op, impl, mode", CASES)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_executed_bytes_cover_compulsory_bytes(op, impl, mode, data):
    c = cost(op, data.draw(_dims(op)), impl=impl, mode=mode)
    for cls, v in c.read.items():
        assert float(v) >= 0 and float(c.extra_read.get(cls, 0)) >= 0, cls
    for cls, v in c.write.items():
        assert float(v) >= 0 and float(c.extra_write.get(cls, 0)) >= 0, cls
    assert float(c.executed_read) >= float(c.bytes_read) and float(c.executed_written) >= float(c.bytes_written)


# softmax's gradient y * (dy - sum(dy * y)) needs no exp: its backward does less arithmetic than its
# forward. moe's forward top-k selection (Xk*X comparisons per token) has no backward counterpart and
# outweighs the backward's extra elementwise work when F is tiny.
BWD_ARITHMETIC_EXEMPT = {"softmax", "moe"}


@pytest.mark.parametrize("op, impl", sorted({(o, i) for o, i, m in CASES if m == "bwd"}))
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_backward_costs_at_least_forward(op, impl, data):
    dims = data.draw(_dims(op))
    f, b = cost(op, dims, impl=impl, mode="fwd"), cost(op, dims, impl=impl, mode="bwd")
    assert float(b.bytes) >= float(f.bytes)
    assert float(b.tensor_flops) >= float(f.tensor_flops)
    if op not in BWD_ARITHMETIC_EXEMPT:
        assert float(b.vector + b.transcendental) >= float(f.vector + f.transcendental)


@pytest.mark.parametrize("op, impl, mode", [c for c in CASES if c[2] == "fwd"])
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_decode_is_forward_at_one_token_and_fwdbwd_is_the_sum(op, impl, mode, data):
    dims = data.draw(_dims(op))
    impl_obj = get_op(op).impl(impl)
    if impl_obj.supports("decode"):
        d, f1 = cost(op, dims, impl=impl, mode="decode"), cost(op, {**dims, "L": 1}, impl=impl, mode="fwd")
        assert {k: float(v) for k, v in d.terms().items()} == {k: float(v) for k, v in f1.terms().items()}
    if impl_obj.supports("bwd"):
        both = cost(op, dims, impl=impl, mode="fwdbwd")
        parts = cost(op, dims, impl=impl, mode="fwd") + cost(op, dims, impl=impl, mode="bwd")
        assert {k: float(v) for k, v in both.terms().items()} == \
            pytest.approx({k: float(v) for k, v in parts.terms().items()}, rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 64), dims=_dims("gated_mlp"))
def test_costs_add_over_layers(n, dims):
    """n identical layers cost n times one layer (working set: one layer's), evaluated both ways."""
    layer = cost("rmsnorm", {k: dims[k] for k in "BLD"}) + cost("gated_mlp", dims)
    stacked = sum([layer] * n)
    scaled = n * layer
    for k, v in scaled.terms().items():
        assert float(stacked.terms()[k]) == pytest.approx(float(v), rel=1e-12), k
    assert float(scaled.working_set) == float(layer.working_set)
    arrays = cost("gated_mlp", {k: np.full(3, v) for k, v in dims.items()})
    assert float(arrays.executed_bytes[1]) * n == pytest.approx(float((n * cost("gated_mlp", dims)).executed_bytes))
