"""docs/spec-template.yaml: the commented template for a hypothetical accelerator loads with the spec
loader, uses every section and key of the schema, and cites only design assumptions."""

import types
from pathlib import Path
from typing import Union, get_args, get_origin

import yaml
from pydantic import BaseModel
from ssmbench.hwspecs import load_spec
from ssmbench.hwspecs.schema import Datum, Measured, Spec

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = REPO / "docs" / "spec-template.yaml"


def _keys_seen(tp, data, seen: dict) -> None:
    """Record, per schema model (every Datum kind counted as Datum), the keys the template writes."""
    if get_origin(tp) in (Union, types.UnionType):
        tp = next(a for a in get_args(tp) if a is not type(None))
    if get_origin(tp) is dict:
        for value in data.values():
            _keys_seen(get_args(tp)[1], value, seen)
    elif get_origin(tp) is list:
        for value in data:
            _keys_seen(get_args(tp)[0], value, seen)
    elif isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(data, dict):
        model = Datum if issubclass(tp, Datum) else tp
        seen.setdefault(model, set()).update(data)
        for key, value in data.items():
            _keys_seen(tp.model_fields[key].annotation, value, seen)


def _schema_models(tp, found: set) -> None:
    if get_origin(tp) in (Union, types.UnionType, dict, list):
        for arg in get_args(tp):
            _schema_models(arg, found)
    elif isinstance(tp, type) and issubclass(tp, BaseModel):
        model = Datum if issubclass(tp, Datum) else tp
        if model not in found:
            found.add(model)
            for field in model.model_fields.values():
                _schema_models(field.annotation, found)


def test_the_template_loads_with_the_spec_loader():
    spec = load_spec(TEMPLATE)
    assert spec.hypothetical and not spec.measured and not spec.device_names


def test_the_template_writes_every_key_of_the_schema():
    data = yaml.safe_load(TEMPLATE.read_text(encoding="utf-8"))
    seen: dict = {}
    _keys_seen(Spec, data, seen)
    models: set = set()
    _schema_models(Spec, models)
    for model in models - {Measured}:  # a hypothetical design has no measurements: its keys are in a comment
        expected = {k for k, f in model.model_fields.items() if not f.exclude}
        assert expected <= seen.get(model, set()), (model.__name__, expected - seen.get(model, set()))
    text = TEMPLATE.read_text(encoding="utf-8")
    for key in Measured.model_fields:
        if key != "si":
            assert f"{key}:" in text.split("measured: []", 1)[1], key


def test_every_template_value_is_a_design_assumption_or_unknown():
    spec = load_spec(TEMPLATE)
    for key, datum in spec.data():
        assert datum.unknown or spec.sources[datum.source].tag == "A", key


def test_the_readme_tour_names_the_template_next_to_specs_validate():
    tour = (REPO / "README.md").read_text(encoding="utf-8")
    line = next(i for i, t in enumerate(tour.splitlines()) if t.startswith("ssmbench specs validate"))
    assert "docs/spec-template.yaml" in "\n".join(tour.splitlines()[line - 1:line + 2])
