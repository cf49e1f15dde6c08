"""Case identity and strict suite loading."""

import dataclasses

import pytest

pytest.importorskip("torch")

from ssmbench.analytic.cases import Case
from ssmbench.measure.backends.base import all_backends, get_backend
from ssmbench.measure.suite import SuiteError, load_suite, parse_suite

from ssmbench.errors import UserError


def test_case_key_is_stable_and_sorted():
    a = Case("linear", "cublas", "torch_ref", {"O": 3, "B": 1, "L": 2, "I": 4}, "fp32", "fwd")
    b = Case("linear", "cublas", "torch_ref", {"B": 1, "I": 4, "L": 2, "O": 3}, "fp32", "fwd")
    assert a.key() == "linear/cublas/torch_ref/fp32/fwd/B=1,I=4,L=2,O=3"
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert Case.from_dict(a.to_dict()) == a


@pytest.mark.parametrize("bad", [
    dict(dims={"B": 0}), dict(dims={"B": True}), dict(dims={"B": 1.5}), dict(dtype="fp8"), dict(mode="train"),
])
def test_case_rejects_bad_fields(bad):
    kw = dict(op="linear", impl="cublas", backend="torch_ref", dims={"B": 1}, dtype="fp32", mode="fwd") | bad
    with pytest.raises(UserError):
        Case(**kw)


def _suite(**entry):
    e = {"op": "linear", "backend": "torch_ref", "dtype": "fp32", "modes": ["fwd"],
         "grid": {"B": [1, 2], "L": 4, "I": 8, "O": 8}}
    e.update(entry)
    return {"schema_version": 1, "name": "t", "entries": [e]}


def test_suite_expands_cartesian_product():
    s = parse_suite(_suite(dtype=["fp32", "bf16"], modes=["fwd", "bwd"]), "t.yaml")
    assert len(s.cases) == 2 * 2 * 2
    assert {sc.case.dims["B"] for sc in s.cases} == {1, 2}
    assert all(sc.case.impl == "cublas" for sc in s.cases)  # impl defaults to the backend's


@pytest.mark.parametrize("entry, words", [
    (dict(colour="red"), ["entries[0]", "unknown key", "colour"]),
    (dict(op="no_such_op"), ["entries[0]", "unknown op", "no_such_op"]),
    (dict(backend="no_such_backend"), ["entries[0]", "unknown backend", "no_such_backend", "torch_ref"]),
    (dict(impl="fused"), ["impl 'fused' does not match", "cublas"]),
    (dict(dtype="fp64"), ["dtype 'fp64'"]),
    (dict(modes=["train"]), ["mode 'train'"]),
    (dict(grid={"B": 1, "L": 4, "I": 8, "O": 8, "Q": 2}), ["no dimension", "Q"]),
    (dict(grid={"B": 1, "L": 4, "I": 8}), ["lacks dimension", "O"]),
    (dict(grid={"B": [1, 0], "L": 4, "I": 8, "O": 8}), ["grid.B", "positive integer"]),
    (dict(grid={"B": 1.5, "L": 4, "I": 8, "O": 8}), ["grid.B", "positive integer"]),
    (dict(grid={"B": [], "L": 4, "I": 8, "O": 8}), ["grid.B", "empty"]),
    (dict(timing={"graphs": True}), ["timing.graphs", "unknown key"]),
    (dict(timing={"cuda_graph": "yes"}), ["timing.cuda_graph", "true or false"]),
    (dict(modes=["fwd", "bwd"], timing={"cuda_graph": True}), ["timing.cuda_graph", "mode 'bwd'", "fwdbwd"]),
])
def test_suite_errors_name_file_entry_and_problem(entry, words):
    with pytest.raises(SuiteError) as exc:
        parse_suite(_suite(**entry), "mysuite.yaml")
    msg = str(exc.value)
    assert msg.startswith("mysuite.yaml: ")
    for w in words:
        assert w in msg, (w, msg)


def test_suite_top_level_errors():
    with pytest.raises(SuiteError, match="schema_version: expected 1, got 2"):
        parse_suite({**_suite(), "schema_version": 2}, "f.yaml")
    with pytest.raises(SuiteError, match="unknown top-level key"):
        parse_suite({**_suite(), "extra": 1}, "f.yaml")
    with pytest.raises(SuiteError, match="non-empty list"):
        parse_suite({**_suite(), "entries": []}, "f.yaml")


def test_duplicate_case_is_an_error():
    data = _suite()
    data["entries"].append(dict(data["entries"][0]))
    with pytest.raises(SuiteError, match=r"already listed by entries\[0\]"):
        parse_suite(data, "f.yaml")


def test_yaml_errors(tmp_path):
    p = tmp_path / "dup.yaml"
    p.write_text("schema_version: 1\nname: a\nname: b\nentries: []\n")
    with pytest.raises(SuiteError, match="appears twice"):
        load_suite(p)
    p2 = tmp_path / "bad.yaml"
    p2.write_text("schema_version: 1\nentries: [\n")
    with pytest.raises(SuiteError, match="not valid YAML"):
        load_suite(p2)
    with pytest.raises(SuiteError, match="file not found"):
        load_suite(tmp_path / "missing.yaml")
    with pytest.raises(SuiteError, match="built-in suites: .*cpu_smoke"):
        load_suite("no_such_suite")


def test_constraint_violations_error_or_are_skipped(monkeypatch):
    """A grid point that breaks an op constraint is an error, or dropped with skip_invalid."""
    from ssmbench.analytic import registry
    from ssmbench.analytic.registry import Constraint

    op = registry.get_op("linear")
    # A constraint on the existing op, removed again after the test (I must divide O).
    patched = dataclasses.replace(
        op, constraints=(Constraint(("O", "I"), lambda o, i: o % i == 0, "O must be divisible by I"),))
    monkeypatch.setitem(registry._REGISTRY, "linear", patched)
    registry.compiled_cost.cache_clear()  # compiled costs hold the op they were built from
    try:
        grid = {"B": 1, "L": 4, "I": 8, "O": [8, 12, 16]}
        with pytest.raises(SuiteError, match="O must be divisible by I"):
            parse_suite(_suite(grid=grid), "f.yaml")
        s = parse_suite(_suite(grid=grid, skip_invalid=True), "f.yaml")
        assert sorted(sc.case.dims["O"] for sc in s.cases) == [8, 16]
        assert s.skipped_invalid == 1
    finally:
        registry.compiled_cost.cache_clear()


def test_cpu_smoke_covers_every_torch_ref_op_and_mode():
    s = load_suite("cpu_smoke")
    covered = {(sc.case.op, sc.case.mode) for sc in s.cases}
    pairs = {(sc.case.backend, sc.case.op) for sc in s.cases}
    for b in all_backends():
        if b.name.startswith("torch_ref"):
            assert (b.name, b.op) in pairs, f"cpu_smoke lacks {b.name} for op {b.op}"
    assert all(sc.case.backend.startswith("torch_ref") for sc in s.cases)
    # at least one backward and one decode case, so those paths run in CI
    assert any(m == "bwd" for _, m in covered) and any(m == "decode" for _, m in covered)
    assert get_backend("torch_ref", "linear").impl == "cublas"


def test_one_case_type_and_vocabulary():
    """Case and its vocabularies live in analytic.cases; the modes are the analytic conventions' MODES."""
    import importlib
    import subprocess
    import sys

    from ssmbench.analytic import cases, conventions

    assert cases.COMPOSITE_PREFIXES == (cases.BLOCK_PREFIX, cases.MODEL_PREFIX) == ("block:", "model:")
    assert cases.is_composite("block:mamba2") and cases.is_composite("model:x") and not cases.is_composite("ssd")
    assert not hasattr(cases, "CASE_MODES")
    with pytest.raises(UserError, match="mode 'prefill' is not one of " + ", ".join(conventions.MODES)):
        Case("linear", "cublas", "torch_ref", {"B": 1}, "bf16", "prefill")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("ssmbench.measure.case")
    # analytic stays free of torch and of measure: importing the case identity loads neither
    code = ("import sys; import ssmbench.analytic.cases as c; c.case_family('ssd'); "
            "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith(('ssmbench.measure', "
            "'ssmbench.calibrate', 'ssmbench.figures'))); print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
