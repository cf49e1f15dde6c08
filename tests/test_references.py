"""The one reference set: every plain-PyTorch reference is declared in its family's ``ref.py``
(``REFERENCES``), names a registered (op, implementation, mode), and is what the backends resolve
through the registry; no reference name is defined twice."""

import ast
from pathlib import Path

import pytest
from ssmbench.analytic import registry
from ssmbench.analytic.conventions import MODES
from ssmbench.measure.backends.base import all_backends
from ssmbench.measure.backends.torch_ref import SKIPPED

REPO = Path(__file__).resolve().parents[1]
FAMILIES = sorted({op.family for op in registry.all_ops().values()})


def test_family_names_are_folder_names():
    folders = {p.name for p in (REPO / "analytic" / "ops").iterdir() if (p / "cost.py").exists()}
    assert set(FAMILIES) == folders


@pytest.mark.parametrize("family", FAMILIES)
def test_declared_references_name_registered_impls_and_modes(family):
    ops = registry.all_ops()
    for r in registry.family_references(family):
        assert r.op in ops and ops[r.op].family == family, r
        assert set(r.modes) <= set(MODES), r
        for impl in r.impls:
            # a reference computes gradients by autograd whether or not the cost model has a backward
            # rule for that implementation; it must serve at least one costed mode of each impl
            assert impl in ops[r.op].impl_map, (r.op, impl)
            assert any(ops[r.op].impl_map[impl].supports(m) for m in r.modes), (r.op, impl, r.modes)
        assert callable(r.fn) and r.fn.__module__ == f"ssmbench.analytic.ops.{family}.ref"


def test_every_kernel_backend_resolves_a_gate_reference_for_each_mode():
    kernel = [b for b in all_backends() if not b.name.startswith("torch_ref") and not b.op.startswith("block:")]
    assert kernel
    for b in kernel:
        for mode in b.modes:
            assert callable(registry.reference(b.op, b.impl, mode, "gate")), (b.name, b.op, mode)


def test_every_torch_ref_backend_resolves_an_eager_reference_for_each_mode():
    plain = [b for b in all_backends() if b.name.startswith("torch_ref")]
    assert len(plain) >= 20
    for b in plain:
        for mode in b.modes:
            assert callable(registry.reference(b.op, b.impl, mode, "eager")), (b.name, b.op, mode)
    # ops without a torch_ref backend say why (never silently absent)
    timed = {b.op for b in plain}
    assert all(op in timed or op in SKIPPED for op in registry.all_ops())


def test_a_missing_reference_is_an_error_naming_what_exists():
    with pytest.raises(registry.AnalyticError, match="no gate reference for mode 'decode'.*ssd_ref"):
        registry.reference("ssd", "quadratic", "decode", "gate")
    with pytest.raises(registry.AnalyticError, match="unknown reference kind"):
        registry.reference("ssd", "chunked", "fwd", "golden")


def test_no_reference_name_is_defined_twice():
    seen: dict[str, str] = {}
    for path in sorted((REPO / "analytic" / "ops").glob("*/ref.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.endswith("_ref"):
                assert node.name not in seen, f"{node.name} in {path} and {seen[node.name]}"
                seen[node.name] = str(path)
    assert not list(REPO.glob("measure/backends/_refs_*.py"))
