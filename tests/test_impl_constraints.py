"""Per-implementation constraints (``Impl.constraints``): a kernel's limits bind that implementation
only, over the dimensions its cost uses, and a violation names the op, the implementation, the rule
and the values; through ``ssmbench cost`` it is exit code 2 without a traceback."""

from __future__ import annotations

import json

import numpy as np
import pytest
from ssmbench.analytic import registry
from ssmbench.analytic.cost import Cost
from ssmbench.analytic.registry import (
    AnalyticError,
    Constraint,
    Impl,
    Op,
    compiled_cost,
    cost,
    divisible,
    in_range,
)
from ssmbench.analytic.symbols import B, L

import ssmbench.cli as cli

CONV_RULE = "K must be between 2 and 4 (the causal-conv1d kernels support widths 2, 3 and 4)"
MIMO_RANK_RULE = "M (MIMO rank) must divide 64"
MIMO_CHUNK_RULE = "L * M must be divisible by 64"


@pytest.fixture
def run(capsys):
    """``ssmbench ARGV`` in-process (the analytic commands are wired into the CLI): (code, out, err)."""
    def _run(*argv):
        return (cli.main(list(argv)), *capsys.readouterr())
    return _run


def _fails(run, argv, *fragments):
    code, out, err = run(*argv)
    assert code == 2, err
    assert "Traceback" not in err and out == ""
    for f in fragments:
        assert f in err, (f, err)


@pytest.mark.parametrize("argv, got", [
    (("cost", "conv1d", "--impl", "causal_conv1d", "--dims", "B=1,L=16,E=8,K=5"), "(got K=5)"),
    (("cost", "conv1d", "--impl", "causal_conv1d", "--dims", "B=1,L=16,E=8,K=1"), "(got K=1)"),
    (("cost", "conv1d", "--dims", "B=1,L=16,E=8,K=8"), "(got K=8)"),  # the default implementation
    (("cost", "conv1d", "--impl", "causal_conv1d", "--mode", "decode", "--dims", "B=1,E=8,K=6"), "(got K=6)"),
    (("cost", "conv1d", "--impl", "causal_conv1d", "--mode", "fwdbwd", "--dims", "B=1,L=16,E=8,K=5"),
     "(got K=5)"),
])
def test_causal_conv1d_widths_outside_2_to_4_exit_2(run, argv, got):
    _fails(run, argv, "op 'conv1d', implementation 'causal_conv1d': " + CONV_RULE, got)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_causal_conv1d_widths_2_to_4_are_costed(run, k):
    code, out, _ = run("cost", "conv1d", "--impl", "causal_conv1d", "--dims", f"B=1,L=16,E=8,K={k}", "--json")
    assert code == 0 and json.loads(out)["flops"]["vector"] == 16 * 8 * (2 * k + 3)


def test_torch_conv_takes_any_width(run):
    code, out, _ = run("cost", "conv1d", "--impl", "torch_conv", "--dims", "B=1,L=16,E=8,K=7", "--json")
    assert code == 0 and json.loads(out)["launches"] == 2
    assert cost("conv1d", {"B": 1, "E": 8, "K": 9}, "torch_conv", "decode").launches == 7


@pytest.mark.parametrize("argv, rule, got", [
    (("cost", "mamba3", "--impl", "mimo", "--dims", "B=1,L=192,H=2,P=16,N=16,M=3"), MIMO_RANK_RULE, "(got M=3)"),
    (("cost", "mamba3", "--impl", "mimo", "--dims", "B=1,L=96,H=2,P=16,N=16,M=128"), MIMO_RANK_RULE,
     "(got M=128)"),
    (("cost", "mamba3", "--impl", "mimo", "--dims", "B=1,L=100,H=2,P=16,N=16,M=2"), MIMO_CHUNK_RULE,
     "(got L=100, M=2)"),
    (("cost", "mamba3", "--impl", "mimo", "--mode", "decode", "--dims", "B=1,H=2,P=16,N=16,M=5"), MIMO_RANK_RULE,
     "(got M=5)"),
])
def test_mamba3_mimo_chunking_violations_exit_2(run, argv, rule, got):
    _fails(run, argv, "op 'mamba3', implementation 'mimo': " + rule, got)


def test_mamba3_mimo_rules_do_not_bind_siso_or_unused_dims(run):
    # SISO has no M: its chunk is 64 tokens whatever M would be, and L need not be a multiple of 64.
    code, out, _ = run("cost", "mamba3", "--impl", "siso", "--dims", "B=1,L=100,H=2,P=16,N=16", "--json")
    assert code == 0 and json.loads(out)["launches"] == 2
    # decode has no L: the L * M rule is moot there, the rank rule still holds.
    code, out, _ = run("cost", "mamba3", "--impl", "mimo", "--mode", "decode", "--dims", "B=1,H=2,P=16,N=16,M=4",
                       "--json")
    assert code == 0 and json.loads(out)["launches"] == 5  # rotary, 3 projection copies, CuTe step
    assert cost("mamba3", {"B": 1, "L": 128, "H": 2, "P": 16, "N": 16, "M": 2}, "mimo").launches == 6


def test_python_api_raises_the_same_message_and_checks_arrays():
    with pytest.raises(AnalyticError, match=r"op 'conv1d', implementation 'causal_conv1d': K must be between "
                                            r"2 and 4 .*\(got K=5\)"):
        cost("conv1d", {"B": 1, "L": 16, "E": 8, "K": 5}, "causal_conv1d")
    with pytest.raises(AnalyticError, match=r"implementation 'causal_conv1d': K must be .*\(got some shapes\)"):
        cost("conv1d", {"B": 1, "L": 16, "E": 8, "K": np.array([2, 4, 6])}, "causal_conv1d")
    ok = cost("conv1d", {"B": 1, "L": 16, "E": 8, "K": np.array([2, 3, 4])}, "causal_conv1d")
    assert list(ok.launches) == [1, 1, 1]


def test_compiled_cost_lists_the_binding_constraints_by_owner():
    decode = compiled_cost("mamba3", "mimo", "decode", "bf16").constraints
    assert [(who, c.message) for who, c in decode] == [
        ("op 'mamba3', implementation 'mimo'", registry.get_op("mamba3").impl("mimo").constraints[0].message)]
    fwd = compiled_cost("mamba3", "mimo", "fwd", "bf16").constraints
    assert len(fwd) == 2 and all(who.endswith("implementation 'mimo'") for who, _ in fwd)
    assert compiled_cost("mamba3", "siso", "fwd", "bf16").constraints == ()
    owners = [who for who, _ in compiled_cost("ssd", "chunked", "fwd", "bf16").constraints]
    assert owners and set(owners) == {"op 'ssd'"}  # op constraints keep their owner


def test_ops_list_shows_implementation_constraints(run):
    code, out, _ = run("ops", "list", "--json")
    assert code == 0
    records = {r["name"]: r for r in json.loads(out)}
    conv = {i["name"]: i for i in records["conv1d"]["implementations"]}
    assert conv["causal_conv1d"]["constraints"] == [CONV_RULE] and conv["torch_conv"]["constraints"] == []
    m3 = {i["name"]: i for i in records["mamba3"]["implementations"]}
    assert len(m3["mimo"]["constraints"]) == 2 and m3["siso"]["constraints"] == []
    assert records["mamba3"]["constraints"] == []


def test_op_and_impl_constraints_both_apply(monkeypatch):
    registry.all_ops()
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    rule = lambda mode, dtype: Cost(vector=B * L)  # noqa: E731
    registry.register(Op(
        name="_test_impl_rules", family="test", summary="", dims=("B", "L"), default_impl="wide",
        constraints=(divisible("L", "B"),),
        impls=(Impl("wide", "", rule, ("fwd",)), Impl("narrow", "", rule, ("fwd",), (in_range("L", 1, 8, "tile"),)))))
    try:
        assert cost("_test_impl_rules", {"B": 2, "L": 16}, "wide").vector == 32
        with pytest.raises(AnalyticError, match=r"^op '_test_impl_rules', implementation 'narrow': L must be "
                                                r"between 1 and 8 \(tile\) \(got L=16\)$"):
            cost("_test_impl_rules", {"B": 2, "L": 16}, "narrow")
        with pytest.raises(AnalyticError, match=r"^op '_test_impl_rules': L must be divisible by B \(got L=7, B=2\)$"):
            cost("_test_impl_rules", {"B": 2, "L": 7}, "narrow")
    finally:
        registry.symbolic_cost.cache_clear()
        registry.compiled_cost.cache_clear()


def test_impl_constraint_on_a_dimension_the_op_lacks_is_a_definition_error():
    bad = Constraint(("K",), lambda k: k > 0, "K must be positive")
    with pytest.raises(ValueError, match=r"implementation 'a': constraint on dimension\(s\) \['K'\] not in op.dims"):
        Op(name="x", family="t", summary="", dims=("B",), default_impl="a",
           impls=(Impl("a", "", lambda mode, dtype: Cost(), ("fwd",), (bad,)),))
