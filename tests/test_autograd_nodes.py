"""Backward-graph nodes per eager reference (analytic/execution.py AUTOGRAD_NODES), checked
independently: each reference runs under autograd on the CPU and its graph is walked through
grad_fn.next_functions, at two sizes (the declared count must not depend on the dimensions)."""

from __future__ import annotations

import dataclasses

import pytest
from ssmbench.analytic import execution, registry
from ssmbench.analytic.cost import Cost

torch = pytest.importorskip("torch")

SMALL = {"B": 2, "L": 8, "D": 16, "I": 16, "O": 8, "F": 16, "E": 16, "N": 4, "K": 4, "H": 2, "G": 1, "P": 8, "Pv": 8,
         "C": 4, "M": 1, "V": 32, "R": 4, "S": 8, "X": 4, "Xk": 4}
LARGER = {k: (2 * v if k in ("B", "L", "D", "I", "O", "F", "E", "S", "V") else v) for k, v in SMALL.items()}


def _recipe(op: str, impl: str):
    fam = registry.all_ops()[op].family
    return next(r for r in registry.family_ref_module(fam).RECIPES if (r.op, r.impl) == (op, impl))


def graph_nodes(op: str, impl: str, dims: dict) -> list[str]:
    """Names of the nodes autograd.grad runs for the eager reference of op/impl (no AccumulateGrad)."""
    from ssmbench.measure.backends.common import Rand

    r = _recipe(op, impl)
    fn = registry.reference(op, impl, "bwd", "eager")
    rand, built = Rand(torch.device("cpu"), 0), {}
    for i in r.prefill:
        built[i.name] = i.make(dims, rand, built)
    xs = [built[i.name].detach().requires_grad_(i.grad) if built[i.name].is_floating_point() else built[i.name]
          for i in r.prefill]
    y = fn(*xs)
    y = y[0] if isinstance(y, (tuple, list)) else y
    seen, stack = set(), [y.grad_fn]
    while stack:
        f = stack.pop()
        if f is None or f in seen:
            continue
        seen.add(f)
        stack.extend(g for g, _ in f.next_functions)
    return sorted(type(f).__name__ for f in seen if type(f).__name__ != "AccumulateGrad")


@pytest.mark.parametrize("op,impl", sorted(execution.AUTOGRAD_NODES))
def test_declared_node_count_matches_the_reference_graph(op, impl):
    small, larger = graph_nodes(op, impl, SMALL), graph_nodes(op, impl, LARGER)
    assert len(small) == len(larger) == execution.AUTOGRAD_NODES[(op, impl)], small


def test_linear_backward_is_four_nodes_around_one_gemm():
    assert graph_nodes("linear", "cublas", SMALL) == ["MmBackward0", "TransposeBackward0", "UnsafeViewBackward0",
                                                      "ViewBackward0"]


def test_as_measured_adds_the_nodes_beyond_the_first_for_the_eager_reference_only():
    c = Cost(launches=2, host={"cublas": 2})
    eager = execution.as_measured(c, "torch_ref", "bwd", "linear", "cublas")
    assert eager.host == {"cublas": 2, "autograd": 1, "autograd_node": 3}
    lib = execution.as_measured(c, "torch.sdpa.flash", "bwd", "attention_causal", "fa2")
    assert "autograd_node" not in lib.host and lib.host["autograd"] == 1
    fwd = execution.as_measured(c, "torch_ref", "fwd", "linear", "cublas")
    assert fwd.host == dataclasses.replace(c).host
