"""Strict parsing of quantities with units ("4.8 TB/s", "989.4 TFLOP/s", "60 MiB").

pint does the parsing; this module adds the units pint lacks (FLOP, OP for integer operations,
transcendental evaluations) and the rule that a value must carry a unit of the expected dimension.
Decimal prefixes are decimal (1 TB = 1e12 B), binary prefixes binary (1 MiB = 2**20 B), as in
datasheets.
"""

from __future__ import annotations

import functools
import re

import pint

# Canonical unit per physical kind; quantities are stored as floats in these units.
CANONICAL = {
    "bandwidth": "byte / second",
    "flop_rate": "FLOP / second",
    "capacity": "byte",
    "frequency": "hertz",
    "time": "second",
    "power": "watt",
    "energy_per_flop": "joule / FLOP",
    "energy_per_byte": "joule / byte",
    "energy": "joule",
    "count": "dimensionless",
}

_HUMAN = {
    "bandwidth": "a bandwidth such as '4.8 TB/s'",
    "flop_rate": "an operation rate such as '989.4 TFLOP/s' or '1979 TOP/s'",
    "capacity": "a size such as '60 MiB' or '141 GB'",
    "frequency": "a frequency such as '1.98 GHz'",
    "time": "a time such as '4 us'",
    "power": "a power such as '700 W'",
    "energy_per_flop": "an energy per operation such as '0.32 pJ/FLOP'",
    "energy_per_byte": "an energy per byte such as '28.7 pJ/B'",
    "energy": "an energy such as '12 mJ'",
    "count": "a plain number",
}


class UnitError(ValueError):
    """A value whose unit is missing, unknown or of the wrong kind."""


@functools.lru_cache(maxsize=1)
def registry() -> pint.UnitRegistry:
    ureg = pint.UnitRegistry(autoconvert_offset_to_baseunit=False)
    # One dimension for arithmetic work. Integer "operations" (TOPS) and transcendental evaluations
    # are counted in the same dimension so rates of every engine compare on one axis.
    ureg.define("FLOP = [operation] = flop = OP = op")
    ureg.define("FLOPS = FLOP / second")
    ureg.define("OPS = OP / second")
    return ureg


_NUMBER_THEN_UNIT = re.compile(r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s+\S")


def parse(text: object, kind: str) -> float:
    """Parse ``text`` as a quantity of ``kind`` (a key of CANONICAL); return it in canonical units.

    A bare number is refused for every kind except ``count``: a datasheet value without its unit is
    the trap this project exists to avoid.
    """
    if kind not in CANONICAL:
        raise KeyError(f"unknown quantity kind {kind!r}; known: {sorted(CANONICAL)}")
    if kind == "count":
        if isinstance(text, bool) or not isinstance(text, (int, float)):
            raise UnitError(f"expected {_HUMAN[kind]}, got {text!r}")
        return float(text)
    if not isinstance(text, str):
        raise UnitError(f"expected {_HUMAN[kind]} as a string with a unit, got {text!r} (no unit)")
    if not _NUMBER_THEN_UNIT.match(text):
        raise UnitError(f"expected {_HUMAN[kind]}: a number, a space, then a unit; got {text!r}")
    ureg = registry()
    try:
        q = ureg.Quantity(text)
    except (pint.errors.UndefinedUnitError, pint.errors.DefinitionSyntaxError) as exc:
        raise UnitError(f"unknown unit in {text!r} ({exc}); expected {_HUMAN[kind]}") from None
    except Exception as exc:  # pint raises several unrelated types on garbage input
        raise UnitError(f"cannot read {text!r} as a quantity ({exc}); expected {_HUMAN[kind]}") from None
    target = ureg(CANONICAL[kind])
    if not isinstance(q, pint.Quantity) or q.dimensionality != target.dimensionality:
        got = q.units if isinstance(q, pint.Quantity) else "no unit"
        raise UnitError(f"{text!r} has unit '{got}', expected {_HUMAN[kind]}")
    return float(q.to(target.units).magnitude)


def format_quantity(value: float, kind: str, digits: int = 4) -> str:
    """Format a canonical-unit float with a readable prefix ('4.8 TB/s')."""
    unit = {
        "bandwidth": "B/s",
        "flop_rate": "FLOP/s",
        "capacity": "B",
        "frequency": "Hz",
        "time": "s",
        "power": "W",
        "energy_per_flop": "J/FLOP",
        "energy_per_byte": "J/B",
        "energy": "J",
        "count": "",
    }[kind]
    if kind == "count":
        return f"{value:g}"
    if kind == "capacity" and value >= 1024 and float(value).is_integer() and value % 1024 == 0:
        for prefix, scale in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= scale and value % scale == 0:
                return f"{value / scale:g} {prefix}{unit}"
    prefixes = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""),
                (1e-3, "m"), (1e-6, "u"), (1e-9, "n"), (1e-12, "p"), (1e-15, "f")]
    mag = abs(value)
    for scale, prefix in prefixes:
        if mag >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}"
