"""The Cost algebra and the strict op registry."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from ssmbench.analytic import registry
from ssmbench.analytic.cost import ZERO, Cost, traffic
from ssmbench.analytic.registry import (
    AnalyticError,
    Impl,
    Op,
    all_ops,
    compiled_cost,
    cost,
    divisible,
    get_op,
    register,
    symbolic_cost,
)
from ssmbench.analytic.symbols import B, C, D, L, symbol

from ssmbench.errors import UserError


@pytest.fixture
def scratch_registry(monkeypatch):
    """A copy of the registry for ops registered by one test; caches cleared around it."""
    all_ops()
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    symbolic_cost.cache_clear()
    compiled_cost.cache_clear()
    yield
    symbolic_cost.cache_clear()
    compiled_cost.cache_clear()


def _rule(mode, dtype):
    return Cost(vector=3 * B * L * D, read={"activations": 2 * B * L * D}, write={"activations": 2 * B * L * D},
                launches=1, working_set=4 * D)


def _op(name="_test_op", modes=("fwd",), rule=_rule, dims=("B", "L", "D"), constraints=()):
    return Op(name=name, family="test", summary="test op", dims=dims,
              impls=(Impl("only", "test impl", rule, modes),), default_impl="only", constraints=constraints)


# Cost algebra -----------------------------------------------------------------------------------------

A = Cost(tensor={"bf16": 10}, vector=5, transcendental=2, read={"weights": 100, "activations": 7},
         write={"activations": 8}, extra_read={"intermediates": 3}, launches=1, working_set=64)
Bc = Cost(tensor={"bf16": 1, "fp8": 4}, vector=1, read={"activations": 9}, write={"state": 2},
          extra_write={"intermediates": 6}, launches=2, working_set=32)


def test_add_sums_every_field_and_keeps_the_larger_working_set():
    s = A + Bc
    assert s.tensor == {"bf16": 11, "fp8": 4}
    assert (s.vector, s.transcendental, s.launches) == (6, 2, 3)
    assert s.read == {"weights": 100, "activations": 16}
    assert s.write == {"activations": 8, "state": 2}
    assert s.extra_read == {"intermediates": 3} and s.extra_write == {"intermediates": 6}
    assert s.working_set == 64  # kernels run one after another: max, not sum
    assert (Bc + A).terms() == s.terms()


def test_scalar_multiple_scales_everything_but_the_working_set():
    m = 3 * A
    assert m.tensor == {"bf16": 30} and m.vector == 15 and m.transcendental == 6 and m.launches == 3
    assert m.read == {"weights": 300, "activations": 21} and m.extra_read == {"intermediates": 9}
    assert m.working_set == 64
    assert (A * 3).terms() == m.terms()
    assert (A + A + A).terms() == m.terms()


def test_sum_of_costs_and_zero():
    assert sum([A, Bc]).terms() == (A + Bc).terms()
    assert (A + ZERO).terms() == A.terms()


def test_cost_rejects_bad_operands_and_unknown_classes():
    with pytest.raises(TypeError):
        A * Bc
    with pytest.raises(TypeError):
        A + 1
    with pytest.raises(ValueError, match="unknown tensor class"):
        Cost(read={"weight": 1})


def test_totals():
    assert A.flops == 15 and A.tensor_flops == 10
    assert A.bytes == 115 and A.executed_bytes == 118
    assert A.bytes_read == 107 and A.executed_read == 110 and A.executed_written == 8


def test_symbolic_and_array_working_set_max():
    s = Cost(working_set=4 * D) + Cost(working_set=sp.Integer(1024))
    assert s.working_set == sp.Max(4 * D, 1024)
    assert s.subs({D: 1000}).working_set == 4000
    arr = Cost(working_set=np.array([1, 50])) + Cost(working_set=np.array([10, 5]))
    assert arr.working_set.tolist() == [10, 50]


def test_terms_roundtrip_and_subs():
    c = Cost(tensor={"bf16": 2 * B * L}, read={"weights": D}, working_set=D)
    assert Cost.from_terms(c.terms()).terms() == c.terms()
    assert c.subs({B: 2, L: 3, D: 5}).terms() == {"tensor.bf16": 12, "read.weights": 5, "vector": 0,
                                                  "transcendental": 0, "launches": 0, "working_set": 5}
    assert c.free_symbols() == {B, L, D}


def test_traffic_helper():
    t = traffic(read={"weights": 4}, extra_write={"intermediates": 2})
    assert t.bytes == 4 and t.executed_bytes == 6 and t.flops == 0


# registry -----------------------------------------------------------------------------------------------

def test_registering_twice_raises(scratch_registry):
    register(_op("_test_dup"))
    with pytest.raises(ValueError, match="already registered"):
        register(_op("_test_dup"))


def test_unknown_op_lists_known_names():
    with pytest.raises(AnalyticError) as e:
        get_op("no_such_op")
    assert "linear" in str(e.value) and "rmsnorm" in str(e.value)
    assert isinstance(e.value, UserError)


def test_unknown_implementation_lists_valid_ones():
    with pytest.raises(AnalyticError, match="valid: cublas"):
        symbolic_cost("linear", "cutlass")


def test_mode_without_rule_is_an_error_never_zero(scratch_registry):
    register(_op("_test_fwd_only", modes=("fwd",)))
    with pytest.raises(AnalyticError, match="no cost rule for mode 'bwd'; valid modes: fwd"):
        symbolic_cost("_test_fwd_only", None, "bwd")
    with pytest.raises(AnalyticError, match="no cost rule for mode 'fwdbwd'"):
        symbolic_cost("_test_fwd_only", None, "fwdbwd")
    with pytest.raises(AnalyticError, match="unknown mode"):
        symbolic_cost("_test_fwd_only", None, "train")
    with pytest.raises(AnalyticError, match="no dtype 'fp64'"):
        symbolic_cost("_test_fwd_only", None, "fwd", "fp64")


def test_fwdbwd_is_fwd_plus_bwd():
    fwd, bwd = symbolic_cost("linear", None, "fwd"), symbolic_cost("linear", None, "bwd")
    both = symbolic_cost("linear", None, "fwdbwd")
    assert {k: sp.expand(v) for k, v in both.terms().items()} == \
        {k: sp.expand(v) for k, v in (fwd + bwd).terms().items()}


def test_rule_must_return_a_cost_over_declared_dims(scratch_registry):
    register(_op("_test_not_cost", rule=lambda mode, dtype: 3))
    with pytest.raises(TypeError, match="expected Cost"):
        symbolic_cost("_test_not_cost")
    register(_op("_test_stray", rule=lambda mode, dtype: Cost(vector=B * symbol("V"))))
    with pytest.raises(ValueError, match=r"dimension\(s\) \['V'\] not in op.dims"):
        symbolic_cost("_test_stray")


def test_op_definition_is_checked():
    with pytest.raises(ValueError, match="unknown dimension"):
        _op(dims=("B", "Q"))
    with pytest.raises(ValueError, match="unknown mode"):
        _op(modes=("prefill",))
    with pytest.raises(ValueError, match="default_impl"):
        Op(name="x", family="t", summary="", dims=("B",), impls=(Impl("a", "", _rule, ("fwd",)),), default_impl="b")
    with pytest.raises(ValueError, match="duplicate implementation"):
        Op(name="x", family="t", summary="", dims=("B",),
           impls=(Impl("a", "", _rule, ("fwd",)), Impl("a", "", _rule, ("fwd",))), default_impl="a")


# evaluation ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op, ranges", [
    ("linear", {"B": (1, 9), "L": (1, 5000), "I": (1, 9000), "O": (1, 9000)}),
    ("rmsnorm", {"B": (1, 9), "L": (1, 5000), "D": (1, 9000)}),
    ("moe", {"B": (1, 9), "L": (1, 50), "D": (1, 900), "F": (1, 900), "X": (4, 9), "Xk": (1, 5)}),
])
@pytest.mark.parametrize("mode", ["fwd", "bwd", "decode"])
def test_vectorized_evaluation_equals_scalar_evaluation(op, ranges, mode):
    rng = np.random.default_rng(1)
    dims = {d: rng.integers(lo, hi, 25) for d, (lo, hi) in ranges.items()}
    vec = cost(op, dims, mode=mode).terms()
    for i in range(25):
        one = cost(op, {d: int(v[i]) for d, v in dims.items()}, mode=mode).terms()
        exact = symbolic_cost(op, None, mode).subs({symbol(d): int(v[i]) for d, v in dims.items()}).terms()
        for k in one:
            assert vec[k][i] == pytest.approx(one[k], rel=1e-12), k
            assert one[k] == pytest.approx(float(exact[k]), rel=1e-12), k


def test_array_evaluation_does_not_wrap_around():
    # 2*B*L*I*O = 2**65 exceeds int64: integer arrays must not wrap around.
    dims = {"B": np.array([4096]), "L": np.array([2 ** 20]), "I": np.array([2 ** 16]), "O": np.array([2 ** 16])}
    assert cost("linear", dims).tensor["bf16"][0] == pytest.approx(2.0 ** 65, rel=1e-12)


def test_cost_needs_only_the_dims_the_mode_uses():
    c = cost("linear", {"B": 4, "I": 8, "O": 16}, mode="decode")
    assert c.tensor["bf16"] == 2 * 4 * 8 * 16


@pytest.mark.parametrize("dims, message", [
    ({"B": 1, "L": 2}, r"needs dimension\(s\) D: D \(model width\)"),
    ({"B": 1, "L": 2, "D": 4, "V": 3}, r"has no dimension\(s\) V; its dimensions: B \(batch"),
    ({"B": 0, "L": 2, "D": 4}, "dimension B must be a positive integer, got 0"),
    ({"B": -3, "L": 2, "D": 4}, "dimension B must be a positive integer, got -3"),
    ({"B": 1.5, "L": 2, "D": 4}, "dimension B must be a positive integer, got 1.5"),
    ({"B": "x", "L": 2, "D": 4}, "dimension B must be a positive integer, got 'x'"),
    ({"B": float("nan"), "L": 2, "D": 4}, "dimension B must be a positive integer"),
    ({"B": np.array([1, 0]), "L": 2, "D": 4}, "dimension B must be a positive integer"),
])
def test_dims_validation_messages(dims, message):
    with pytest.raises(AnalyticError, match=message):
        cost("rmsnorm", dims)


def test_constraint_messages(scratch_registry):
    register(_op("_test_chunked", dims=("B", "L", "C"), constraints=(divisible("L", "C"),),
                 rule=lambda mode, dtype: Cost(vector=B * L * C)))
    assert cost("_test_chunked", {"B": 1, "L": 8, "C": 4}).vector == 32
    with pytest.raises(AnalyticError, match=r"L must be divisible by C \(got L=10, C=4\)"):
        cost("_test_chunked", {"B": 1, "L": 10, "C": 4})
    with pytest.raises(AnalyticError, match=r"L must be divisible by C \(got some shapes\)"):
        cost("_test_chunked", {"B": 1, "L": np.array([8, 10]), "C": 4})
    with pytest.raises(AnalyticError, match="Xk must be at most X"):
        cost("moe", {"B": 1, "L": 1, "D": 8, "F": 8, "X": 2, "Xk": 3})
