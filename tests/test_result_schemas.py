"""The JSON Schemas of docs/schemas/ (described in docs/results-schema.md) hold for the stored data in
results/h200/2026-12-02/ and for the names the code writes, so that the docs cannot drift from either."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

jsonschema = pytest.importorskip("jsonschema")  # the `test` extra (absent on a bare GPU machine)

REPO = Path(__file__).resolve().parent.parent
SCHEMAS = REPO / "docs" / "schemas"
STORED = REPO / "results" / "h200" / "2026-12-02"
RESULT_FILES = sorted(STORED.glob("*/run-*.json")) + sorted(STORED.glob("*/run-*.jsonl"))


def _validator(name: str, ref: str | None = None):
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    if ref is not None:  # a part of the schema (a .jsonl line), with the schema's $defs
        schema = {"$ref": f"#/$defs/{ref}", "$defs": schema["$defs"]}
    return jsonschema.Draft202012Validator(schema)


def _errors(validator, doc) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"[:300] for e in validator.iter_errors(doc)][:5]


def test_stored_files_are_found():
    assert any(p.suffix == ".json" for p in RESULT_FILES) and any(p.suffix == ".jsonl" for p in RESULT_FILES)


@pytest.mark.parametrize("path", RESULT_FILES, ids=lambda p: p.name)
def test_stored_result_files_match_the_schema(path):
    if path.suffix == ".json":
        assert not _errors(_validator("result"), json.loads(path.read_text(encoding="utf-8")))
        return
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert not _errors(_validator("result", "header_line"), lines[0])
    case_line = _validator("result", "case_line")
    for n, line in enumerate(lines[1:], start=2):
        assert not _errors(case_line, line), f"{path.name} line {n}"


@pytest.mark.parametrize("name,path", [
    ("profile", STORED / "calibration" / "profile.json"),
    ("gap", STORED / "calibration" / "gap.json"),
    ("probe", STORED / "default" / "probe-h200.yaml"),
])
def test_stored_profile_gap_and_probe_match_their_schemas(name, path):
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))  # JSON is YAML
    assert not _errors(_validator(name), doc)


def test_the_schemas_reject_what_the_readers_reject():
    doc = json.loads(next(p for p in RESULT_FILES if p.suffix == ".json").read_text(encoding="utf-8"))
    v = _validator("result")
    for mutate in (lambda d: d["cases"][0].update(status="finished"),  # not a status
                   lambda d: d["cases"][0].pop("key"),
                   lambda d: d.update(schema_version=2),
                   lambda d: d["cases"][0].update(unexpected_field=1)):  # a new field needs its documentation
        bad = copy.deepcopy(doc)
        mutate(bad)
        assert _errors(v, bad)


def test_schemas_name_what_the_code_writes():
    from ssmbench.calibrate.profile import PROFILE_KIND, PROFILE_SCHEMA_VERSION
    from ssmbench.measure.environment import REQUIRED_KEYS
    from ssmbench.measure.results import SCHEMA_VERSION, STATUSES
    from ssmbench.measure.sweep import RECORD_FIELDS

    result = json.loads((SCHEMAS / "result.schema.json").read_text(encoding="utf-8"))
    case = result["$defs"]["case"]
    assert case["properties"]["status"]["enum"] == list(STATUSES)
    assert set(RECORD_FIELDS) <= set(case["required"]) and set(RECORD_FIELDS) <= set(case["properties"])
    assert set(result["$defs"]["environment"]["required"]) == set(REQUIRED_KEYS)
    assert result["properties"]["schema_version"]["const"] == SCHEMA_VERSION
    profile = json.loads((SCHEMAS / "profile.schema.json").read_text(encoding="utf-8"))
    assert (profile["properties"]["kind"]["const"], profile["properties"]["schema_version"]["const"]) == (
        PROFILE_KIND, PROFILE_SCHEMA_VERSION)
    from ssmbench.calibrate.achievable_forms import MODELS

    for name in ("profile", "gap"):  # every model form calibration can choose
        schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
        assert set(schema["$defs"]["fit_model"]["properties"]["name"]["enum"]) == set(MODELS), name
    doc = (REPO / "docs" / "results-schema.md").read_text(encoding="utf-8")
    for name in ("result", "profile", "gap", "probe"):
        assert f"schemas/{name}.schema.json" in doc
    for field in (*STATUSES, *RECORD_FIELDS):
        assert f"`{field}`" in doc, f"docs/results-schema.md does not describe {field}"
