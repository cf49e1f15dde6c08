"""Pick the ceiling a projection uses: the attained (measured) value or the spec's own value.

A ceiling always says what it is, so that every bound printed downstream can be labelled: "measured"
(an attained ceiling of the spec's ``measured:`` section), "datasheet" (a published value: source tags
P, S, R), "derived" (computed from published values by a stated method: tag D), "design assumption"
(a value a hypothetical design declares: tag A; never printed as a datasheet value) or "unknown".
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Literal

from .schema import Spec

Preference = Literal["measured", "datasheet"]
# the origin of a spec value by its source's tag (P primary, S secondary, R not re-read: published values)
ORIGIN_OF_TAG = {"D": "derived", "A": "design assumption"}


@dataclass(frozen=True)
class Ceiling:
    key: str
    value: float | None  # canonical SI units; None when the spec states it is unknown
    origin: Literal["measured", "datasheet", "derived", "design assumption", "unknown"]
    provenance: str  # source title, or measurement date and method, or the reason it is unknown


# Per live spec object (a Spec is frozen): its values by dotted path and the ceilings looked up so far.
# Keyed by id() with a weak reference beside it, so that a freed spec's entry goes and an id reused by a
# new object is never mistaken for the old one.
_MEMO: dict[int, tuple[weakref.ref, dict, dict]] = {}


def _memo(spec: Spec) -> tuple[dict, dict]:
    entry = _MEMO.get(id(spec))
    if entry is None or entry[0]() is not spec:
        key = id(spec)
        entry = (weakref.ref(spec, lambda _, key=key: _MEMO.pop(key, None)), dict(spec.data()), {})
        _MEMO[key] = entry
    return entry[1], entry[2]


def ceiling(spec: Spec, key: str, prefer: Preference = "measured") -> Ceiling:
    """The value at ``key`` (dotted path), preferring a measured ceiling when ``prefer='measured'``."""
    data, seen = _memo(spec)
    if (key, prefer) not in seen:
        seen[(key, prefer)] = _ceiling(spec, data, key, prefer)
    return seen[(key, prefer)]


def _ceiling(spec: Spec, data: dict, key: str, prefer: Preference) -> Ceiling:
    if key not in data:
        raise KeyError(f"{spec.id}: no value {key!r}; known: {sorted(data)}")
    if prefer not in ("measured", "datasheet"):
        raise ValueError(f"prefer must be 'measured' or 'datasheet', got {prefer!r}")
    if prefer == "measured":
        for m in spec.measured:
            if m.key == key:
                return Ceiling(key, m.si, "measured", f"measured {m.date.isoformat()}: {m.method}")
    datum = data[key]
    if datum.si is None:
        return Ceiling(key, None, "unknown", datum.unknown or "")
    src = spec.sources[datum.source]
    origin = ORIGIN_OF_TAG.get(src.tag, "datasheet")
    return Ceiling(key, datum.si, origin, f"{src.title} [{src.tag}]" + (f" ({datum.note})" if datum.note else ""))
