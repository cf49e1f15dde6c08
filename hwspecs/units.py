"""Strict parsing of quantities with units ("4.8 TB/s", "989.4 TFLOP/s", "60 MiB").

pint does the parsing; this module adds the units pint lacks (FLOP, OP for integer operations,
transcendental evaluations) and the rule that a value must carry a unit of the expected dimension.
Decimal prefixes are decimal (1 TB = 1e12 B), binary prefixes binary (1 MiB = 2**20 B), as in
datasheets.
"""

from __future__ import annotations

import functools
import math
import re
from importlib import resources

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


def _information_registry() -> pint.UnitRegistry:
    """pint's default units, with ``bit`` a dimension of its own.

    pint (0.24 and later) defines ``bit = []``: a byte is then a plain number, so '1.98 GHz' converts
    to a bandwidth and '28.7 pJ' to an energy per byte. The default definitions are loaded with that
    one line changed; the import of the constants file is inlined because pint cannot follow it when
    definitions come as text.
    """
    root = resources.files("pint")
    text = (root / "default_en.txt").read_text(encoding="utf-8")
    text = text.replace("\n@import constants_en.txt\n", "\n" + (root / "constants_en.txt").read_text(encoding="utf-8") + "\n")
    text = text.replace("\nbit = []\n", "\nbit = [information]\n")
    ureg = pint.UnitRegistry(filename=None, autoconvert_offset_to_baseunit=False)
    ureg.load_definitions(text.splitlines())
    return ureg


@functools.lru_cache(maxsize=1)
def registry() -> pint.UnitRegistry:
    try:
        ureg = _information_registry()
    except (OSError, pint.errors.PintError):  # pint's definition files moved: its defaults, checked below
        ureg = pint.UnitRegistry(autoconvert_offset_to_baseunit=False)
    if ureg("byte").dimensionless:
        raise RuntimeError(f"pint {pint.__version__}: cannot give bytes a dimension; sizes would read as plain numbers")
    # One dimension for arithmetic work. Integer "operations" (TOPS) and transcendental evaluations
    # are counted in the same dimension so rates of every engine compare on one axis.
    ureg.define("FLOP = [operation] = flop = OP = op")
    ureg.define("FLOPS = FLOP / second")
    ureg.define("OPS = OP / second")
    return ureg


# The accepted grammar, checked before pint sees the text: a number, a space, then a unit expression
# made only of unit names joined by '/' or '*', each with an optional small integer power. pint
# evaluates arithmetic in the string ('1 GHz * 10**10**10' never returns), so nothing else may reach it.
_NUMBER = r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d{1,3})?"
_UNIT_ATOM = r"[A-Za-z\u00b5\u03bc_]+(\s*(\*\*|\^)\s*-?\d)?"
_NUMBER_THEN_UNIT = re.compile(rf"^\s*{_NUMBER}\s+{_UNIT_ATOM}(\s*[/*]\s*{_UNIT_ATOM})*\s*$")


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
        if not math.isfinite(text):
            raise UnitError(f"expected a finite number, got {text!r}")
        return float(text)
    if not isinstance(text, str):
        raise UnitError(f"expected {_HUMAN[kind]} as a string with a unit, got {text!r} (no unit)")
    return _parse_text(text, kind)


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str, kind: str) -> float:
    """The string case of ``parse``, cached: pint takes about a millisecond per quantity, and every
    spec file repeats the same few strings."""
    if not _NUMBER_THEN_UNIT.match(text):
        raise UnitError(
            f"expected {_HUMAN[kind]}: a number, a space, then a unit (unit names joined by '/' or '*'); got {text!r}"
        )
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
    value = float(q.to(target.units).magnitude)
    if not math.isfinite(value):
        raise UnitError(f"{text!r} is not a finite quantity; expected {_HUMAN[kind]}")
    return value


_WRITTEN_NUMBER = re.compile(r"^\s*[-+]?\d*(\.(?P<frac>\d*))?([eE](?P<exp>[-+]?\d{1,3}))?")


def resolution(text: object, kind: str) -> float:
    """Half a unit in the last digit of ``text`` as written, in canonical units: '67 TFLOP/s' is 67 +- 0.5
    TFLOP/s, '66.9 TFLOP/s' 66.9 +- 0.05. Two datasheets that print one rate to different precision
    ('67' and '66.9') agree within their rounding; comparisons use this to tell them apart from a real
    difference. A count (an SM count) is exact: 0."""
    si = parse(text, kind)
    if kind == "count":
        return 0.0
    m = _WRITTEN_NUMBER.match(text)  # parse() has checked the grammar, so the number is there
    number = float(text.split()[0])
    decimals = len(m.group("frac") or "")
    half_digit = 0.5 * 10.0 ** (int(m.group("exp") or 0) - decimals)
    return half_digit * si / number


# Short symbol of each canonical unit, for printing and for JSON ("" for a plain count).
SYMBOL = {
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
}


# Decimal SI prefixes, largest first.
SI_PREFIXES = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""),
               (1e-3, "m"), (1e-6, "u"), (1e-9, "n"), (1e-12, "p"), (1e-15, "f"))


def format_si(value: float | None, unit: str = "", digits: int = 4, smallest: float = 1e-15) -> str:
    """``value`` with the largest SI prefix it reaches and ``digits`` significant digits ('4.8 TB/s',
    '512 B', '1.2 G' without a unit), no prefix below ``smallest``; '-' for a missing value (None or
    NaN). The one number formatter: ``format_quantity`` picks the unit of a kind, and the CLI takes it
    as ``ssmbench.output.si``; it lives here, beside the parser, because spec checks print quantities
    too and may not import the CLI."""
    if value is None or value != value:
        return "-"
    mag = abs(value)
    for scale, prefix in SI_PREFIXES:
        if scale < smallest:
            break
        if mag >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}"


def format_quantity(value: float, kind: str, digits: int = 4) -> str:
    """Format a canonical-unit float with a readable prefix ('4.8 TB/s', '60 MiB')."""
    if kind not in SYMBOL:
        raise ValueError(f"unknown quantity kind {kind!r}; expected one of {', '.join(SYMBOL)}")
    unit = SYMBOL[kind]
    if kind == "count":
        return f"{value:g}"
    if kind == "capacity":
        # A binary prefix only where the size is a round binary multiple (60 MiB, 1.5 MiB), judged at the
        # largest prefix that fits: 40 GB is 37.25... GiB, and stays decimal.
        for prefix, scale in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= scale:
                if (value * 1000 / scale).is_integer():
                    return f"{value / scale:g} {prefix}{unit}"
                break
    return format_si(value, unit, digits)
