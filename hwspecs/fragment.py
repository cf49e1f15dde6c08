"""A ``measured:`` fragment, and a spec's data with a fragment merged into it.

A fragment is a file (YAML or JSON) whose ``measured:`` list is in the spec schema's own format,
``{key: dotted spec path, value: quantity with unit, date, method}``: what ``ssmbench probe`` writes,
with its metadata beside the list (``meta.device.name``: the device it measured). Other top-level
keys (the probe's sizes, observations, spread) are the probe's record and are not merged.

``with_measured`` merges: a fragment entry replaces the base's entry of the same key, and the base's
other entries are kept, because one probe run measures a few ceilings and the base may hold others
(an L2 size, idle power) that the probe does not measure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from ..files import UniqueKeyLoader, read_user_text
from . import units
from .loader import SpecError, describe_error
from .schema import Measured, Spec, value_kind

ENTRY_FORMAT = "{key: dotted spec path, value: quantity with unit, date: YYYY-MM-DD, method: text}"


@dataclass(frozen=True)
class Fragment:
    path: str
    entries: tuple[dict, ...]  # validated ``measured:`` entries, as a spec file writes them
    device_name: str | None  # the device the values were measured on, where the file records it


def check_measured(entries: object, file: str | Path) -> tuple[dict, ...]:
    """The entries of a ``measured:`` list in the schema's format (shape, a spec value path as key, a
    value in that path's unit, a date, a method); a SpecError naming each bad entry otherwise. Whether
    a given spec lists each key is checked when the entries are merged into it."""
    if not isinstance(entries, list) or not entries:
        raise SpecError(file, [f"measured: expected a non-empty list of entries {ENTRY_FORMAT}, got {entries!r}"])
    problems, good = [], []
    for i, entry in enumerate(entries):
        try:
            m = Measured.model_validate(entry)
        except ValidationError as exc:
            problems += [f"measured[{i}].{describe_error(err)}" for err in exc.errors()]
            continue
        try:
            kind = value_kind(m.key)
        except ValueError as exc:
            problems.append(f"measured[{i}].key: {exc}")
            continue
        try:
            parsed = units.parse(m.value, kind)
        except units.UnitError as exc:
            problems.append(f"measured[{i}].value: {exc}")
            continue
        if not parsed > 0:
            problems.append(f"measured[{i}].value: {m.value!r} must be greater than zero")
            continue
        good.append(m.model_dump(exclude_none=True))
    if problems:
        raise SpecError(file, problems)
    return tuple(good)


def load_fragment(path: str | Path) -> Fragment:
    """Read a probe file (or any file with a ``measured:`` list); errors name the file and the entry."""
    text = read_user_text(path, what="probe file")
    try:
        data = json.loads(text) if Path(path).suffix == ".json" else yaml.load(text, Loader=UniqueKeyLoader)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise SpecError(path, [f"not valid {'JSON' if Path(path).suffix == '.json' else 'YAML'} ({exc})"]) from None
    if not isinstance(data, dict) or "measured" not in data:
        raise SpecError(path, [f"expected a mapping with a 'measured:' list of entries {ENTRY_FORMAT} "
                               "(what ssmbench probe writes)"])
    meta = data.get("meta")
    device = meta.get("device") if isinstance(meta, dict) else None
    name = device.get("name") if isinstance(device, dict) else None
    return Fragment(str(path), check_measured(data["measured"], path), name if isinstance(name, str) else None)


def with_measured(base: Spec, entries: tuple[dict, ...]) -> dict:
    """The data of ``base`` (as a spec file writes it) with ``entries`` merged into its measured list:
    same-key entries replaced in place, new keys appended. A key the base lists no value at is an error:
    a measured ceiling sits beside a datasheet value (or an ``unknown: why``), never alone."""
    listed = dict(base.data())
    missing = [e["key"] for e in entries if e["key"] not in listed]
    if missing:
        raise SpecError(base.id, [
            f"measured key(s) {missing} are not values of this spec; a measured ceiling sits beside the spec's "
            "own value: start from a spec that lists them (give each a value or 'unknown: why' in a copy of the "
            "base and pass that file)"])
    data = base.model_dump(mode="python", exclude_none=True)
    new = {e["key"]: e for e in entries}
    merged = [new.pop(m["key"], m) for m in data.get("measured", [])]
    data["measured"] = merged + list(new.values())
    return data
