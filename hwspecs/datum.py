"""The typed values of a spec (split from schema.py): ``Datum``, one value with its unit and source
or an explicit ``unknown``, its unit kinds (count, bandwidth, FLOP rate, capacity, frequency, duration,
power, energy per FLOP and per byte), ``Source``, and the strict base model the spec's sections share."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from . import units


def _only_names(v, allowed, noun: str):
    """Before a mapping's values are validated: a misspelt key is reported as such (naming the keys
    allowed), not as a broken value."""
    if isinstance(v, dict):
        bad = sorted(map(str, set(v) - set(allowed)))
        if bad:
            raise ValueError(f"unknown {noun} {bad}; expected some of {list(allowed)}")
    return v


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _reject_computed(data: object) -> object:
    """``si`` is computed from ``value``; a spec file that sets it would bypass unit parsing."""
    if isinstance(data, dict):
        if "si" in data:
            raise ValueError("unknown key 'si' (computed from 'value'; a spec file cannot set it)")
        if isinstance(data.get("value"), bool):
            raise ValueError(f"value: expected a number or a quantity with a unit, got {data['value']!r}")
    return data


class Datum(_Strict):
    """One value with its unit and its source, or an explicit statement that it is unknown."""

    kind: ClassVar[str] = "count"
    positive: ClassVar[bool] = True
    integer: ClassVar[bool] = False

    value: str | int | float | None = None
    source: str | None = None
    note: str | None = None
    unknown: str | None = None
    si: float | None = Field(default=None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _no_computed(cls, data):
        return _reject_computed(data)

    @model_validator(mode="after")
    def _parse(self):
        if self.unknown is not None:
            if self.value is not None:
                raise ValueError("give either 'value' (with 'source') or 'unknown' (with a reason), not both")
            if not self.unknown.strip():
                raise ValueError("'unknown' needs a reason, e.g. unknown: 'not on the datasheet'")
            return self
        if self.value is None:
            raise ValueError("missing 'value' (or 'unknown: <reason>' if the value is not known)")
        if not self.source:
            raise ValueError("missing 'source': every value names the source it comes from")
        try:
            si = units.parse(self.value, self.kind)
        except units.UnitError as exc:
            raise ValueError(str(exc)) from None
        if self.positive and not si > 0:
            raise ValueError(f"{self.value!r} must be greater than zero")
        if self.integer and not si.is_integer():
            raise ValueError(f"{self.value!r} must be a whole number")
        object.__setattr__(self, "si", si)
        return self

    @property
    def known(self) -> bool:
        return self.si is not None


class Count(Datum):
    kind: ClassVar[str] = "count"
    integer: ClassVar[bool] = True


class Bandwidth(Datum):
    kind: ClassVar[str] = "bandwidth"


class FlopRate(Datum):
    kind: ClassVar[str] = "flop_rate"


class Capacity(Datum):
    kind: ClassVar[str] = "capacity"


class Frequency(Datum):
    kind: ClassVar[str] = "frequency"


class Duration(Datum):
    kind: ClassVar[str] = "time"


class Power(Datum):
    kind: ClassVar[str] = "power"


class EnergyPerFlop(Datum):
    kind: ClassVar[str] = "energy_per_flop"


class EnergyPerByte(Datum):
    kind: ClassVar[str] = "energy_per_byte"


class Source(_Strict):
    title: str
    url: str | None = None
    tag: Literal["P", "S", "R", "D", "A"]
    note: str | None = None
