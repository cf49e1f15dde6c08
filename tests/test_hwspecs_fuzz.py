"""Property tests: malformed specs always give a SpecError naming the file and a key path, never another
exception. Each example mutates the valid H200 spec once: deletes a required key, inserts an unknown key
somewhere, or replaces a quantity with garbage, a bare number, a negative value or a wrong-unit string."""

import copy
import re

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ssmbench.hwspecs import SpecError, builtin_dir, load_spec, parse_spec
from ssmbench.hwspecs.schema import Spec

BASE = yaml.safe_load((builtin_dir() / "h200-sxm.yaml").read_text(encoding="utf-8"))
FILE = "fuzz-spec.yaml"
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# "<file>: <dotted key path>: <message>", or the schema_version / top-level-mapping checks.
PROBLEM = re.compile(rf"^{re.escape(FILE)}: [A-Za-z_][\w-]*(\[\d+\])?(\.[\w\[\]-]+)*: ")

DATUM_FIELDS = {"value", "source", "note", "unknown"}
TOP_REQUIRED = {"schema_version", "id", "name", "vendor", "hypothetical", "architecture", "sources", "compute",
                "memory", "launch", "power"}


def _paths(node, prefix=()):
    """Every path into the spec (dict keys and list indices), leaves included."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield prefix + (i,)
            yield from _paths(v, prefix + (i,))


def _get(node, path):
    for p in path:
        node = node[p]
    return node


def _is_datum(node) -> bool:
    return isinstance(node, dict) and set(node) <= DATUM_FIELDS and ("value" in node or "unknown" in node)


CITED = {d.source for _, d in Spec.model_validate(BASE).data() if d.source}


def _required(path) -> bool:
    """Deleting the key at ``path`` must make the spec invalid."""
    parent, key = _get(BASE, path[:-1]), path[-1]
    if len(path) == 1:
        return key in TOP_REQUIRED
    if _is_datum(parent):
        return key in ("value", "unknown") or (key == "source" and "value" in parent)
    head = path[0]
    if head == "sources":
        return len(path) == 2 and key in CITED or len(path) == 3 and key in ("title", "tag")
    if head == "compute":  # compute.path (attained rates of software kernel paths) is optional
        return len(path) == 2 and key != "path" or path[1:] == ("vector", "fp32")
    if head == "memory":
        return path[1:] == ("dram",) or len(path) == 3 and key in ("scope", "capacity", "bandwidth")
    if head in ("launch", "power"):
        return len(path) == 2
    if head in ("measured", "interconnect"):
        return len(path) == 3 and key in ("key", "value", "date", "method", "name", "bandwidth")
    return False


REQUIRED = [p for p in _paths(BASE) if _required(p)]
DICTS = [p for p in [()] + list(_paths(BASE)) if isinstance(_get(BASE, p), dict)]
QUANTITIES = [p for p in _paths(BASE) if p[-1] == "value" and not isinstance(_get(BASE, p), dict)]


def _kind(path) -> str:
    if path[0] == "measured":
        path = tuple(BASE["measured"][path[1]]["key"].split("."))
    return dict(Spec.model_validate(BASE).data())[".".join(map(str, path[:-1] if path[-1] == "value" else path))].kind


def _garbage(kind):
    """Values that are never a valid quantity of ``kind``: another dimension, zero or negative, no unit,
    not a quantity at all, or arithmetic that pint would evaluate."""
    bad = ["5 GHz" if kind != "frequency" else "5 TB/s", "lots", "", [1, 2], {"a": 1}, None, "1 GB * 10**10**10"]
    if kind == "count":
        bad += [-4, 0, 2.5, "132", True]
    else:
        zero_and_negative = {"bandwidth": ["0 TB/s", "-3 TB/s"], "capacity": ["0 B", "-3 GB"],
                             "frequency": ["0 Hz", "-3 GHz"], "power": ["0 W", "-3 W"],
                             "flop_rate": ["0 TFLOP/s", "-3 TFLOP/s"], "time": ["0 s", "-3 us"],
                             "energy_per_flop": ["0 pJ/FLOP", "-3 pJ/FLOP", "3 pJ"],
                             "energy_per_byte": ["0 pJ/B", "-3 pJ/B", "3 pJ"]}[kind]
        bad += zero_and_negative + ["12", "1e999 GB/s", st.floats(allow_nan=True), st.integers()]
    return st.sampled_from(bad).flatmap(lambda b: b if isinstance(b, st.SearchStrategy) else st.just(b))


def _check(data):
    with pytest.raises(SpecError) as info:
        parse_spec(data, FILE)
    problems = str(info.value).splitlines()
    assert problems, "a SpecError carries at least one problem"
    for line in problems:
        assert PROBLEM.match(line), f"problem does not name the file and a key path: {line!r}"
    return problems


@SETTINGS
@given(st.sampled_from(REQUIRED))
def test_deleting_a_required_key_is_reported(path):
    data = copy.deepcopy(BASE)
    del _get(data, path[:-1])[path[-1]]
    _check(data)


@SETTINGS
@given(st.sampled_from(DICTS), st.from_regex(r"\Ax_[a-z]{1,8}\Z"),
       st.one_of(st.integers(), st.text(max_size=5), st.none(), st.lists(st.integers(), max_size=2)))
def test_inserting_an_unknown_key_is_reported(path, key, value):
    data = copy.deepcopy(BASE)
    _get(data, path)[key] = value
    problems = _check(data)
    assert any(key in p for p in problems)


@SETTINGS
@given(st.sampled_from(QUANTITIES).flatmap(lambda p: st.tuples(st.just(p), _garbage(_kind(p)))))
def test_replacing_a_quantity_with_garbage_is_reported(case):
    path, value = case
    data = copy.deepcopy(BASE)
    _get(data, path[:-1])[path[-1]] = value
    _check(data)


_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
    lambda children: st.one_of(st.lists(children, max_size=3),
                               st.dictionaries(st.text(max_size=6), children, max_size=3)),
    max_leaves=12,
)


@SETTINGS
@given(st.dictionaries(st.sampled_from(sorted(TOP_REQUIRED | {"measured", "interconnect", "energy", "notes"})),
                       _json, max_size=6))
def test_arbitrary_structures_raise_spec_error_only(data):
    data = {"schema_version": 1, **data}
    with pytest.raises(SpecError):
        parse_spec(data, FILE)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=80))
def test_arbitrary_file_text_raises_spec_error_only(tmp_path, text):
    path = tmp_path / "any.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(path) in str(info.value)
