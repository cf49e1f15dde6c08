"""Strict unit parsing: good quantities convert to canonical SI; bare numbers, unknown units, the wrong
dimension and arithmetic in the string are refused with UnitError (never another exception, never a hang)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ssmbench.hwspecs import units
from ssmbench.hwspecs.units import UnitError, format_quantity, parse


@pytest.mark.parametrize("text, kind, expected", [
    ("4.8 TB/s", "bandwidth", 4.8e12),
    ("4186 GB/s", "bandwidth", 4.186e12),
    ("1 Gbit/s", "bandwidth", 1.25e8),
    ("4.8 TB / s", "bandwidth", 4.8e12),
    ("989.4 TFLOP/s", "flop_rate", 989.4e12),
    ("1979 TOP/s", "flop_rate", 1979e12),
    ("60 MiB", "capacity", 60 * 2**20),
    ("141 GB", "capacity", 141e9),
    ("256 KiB", "capacity", 256 * 1024),
    ("1.98 GHz", "frequency", 1.98e9),
    ("4 us", "time", 4e-6),
    ("0.25 \u00b5s", "time", 0.25e-6),
    ("700 W", "power", 700.0),
    ("1.2 kW", "power", 1200.0),
    ("0.32 pJ/FLOP", "energy_per_flop", 0.32e-12),
    ("28.7 pJ/B", "energy_per_byte", 28.7e-12),
    ("12 mJ", "energy", 0.012),
    (132, "count", 132.0),
    (1.5, "count", 1.5),
])
def test_good_quantities_convert_to_canonical_units(text, kind, expected):
    assert parse(text, kind) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("text, kind", [
    (4.8, "bandwidth"),
    (4800000000000, "bandwidth"),
    ("4.8", "bandwidth"),
    ("141", "capacity"),
    ("4.8TB/s", "bandwidth"),
    ("TB/s", "bandwidth"),
    ("", "capacity"),
    (None, "power"),
    (True, "power"),
])
def test_bare_numbers_and_missing_units_are_refused(text, kind):
    with pytest.raises(UnitError, match="unit|expected"):
        parse(text, kind)


@pytest.mark.parametrize("text, kind", [
    ("1.98 GHz", "bandwidth"),      # bytes have a dimension of their own: a frequency is not a bandwidth
    ("4.8 TB", "bandwidth"),
    ("4.8 TB/s", "flop_rate"),
    ("60 MiB", "bandwidth"),
    ("5 rad", "capacity"),          # a dimensionless unit is not a size
    ("28.7 pJ", "energy_per_byte"),
    ("700 W", "energy"),
    ("4 us", "frequency"),
    ("3 m/s**2", "power"),
])
def test_wrong_dimension_is_refused_naming_the_expectation(text, kind):
    with pytest.raises(UnitError, match="expected"):
        parse(text, kind)


@pytest.mark.parametrize("text", ["5 zorks", "5 GB/zz", "1 TFLOPS/s/q"])
def test_unknown_units_are_refused(text):
    with pytest.raises(UnitError, match="unknown unit|expected"):
        parse(text, "capacity")


@pytest.mark.parametrize("text", [
    "1 GHz * 10**10**10",   # pint would evaluate this and never return
    "1 (GB)/s",
    "1 GB/s + 2 GB/s",
    "1e400 TB/s",
    "1e300 TB/s",           # overflows to infinity in canonical units
    "nan GB",
    "inf W",
    "1 2",
])
def test_arithmetic_and_non_finite_values_are_refused(text):
    with pytest.raises(UnitError):
        parse(text, "bandwidth" if "/s" in text else "capacity")


@pytest.mark.parametrize("value", [True, "132", float("inf"), float("nan"), [132]])
def test_count_needs_a_finite_plain_number(value):
    with pytest.raises(UnitError):
        parse(value, "count")


def test_unknown_kind_is_a_programming_error():
    with pytest.raises(KeyError):
        parse("1 W", "voltage")


def test_bytes_are_not_dimensionless():
    assert not units.registry()("byte").dimensionless


@pytest.mark.parametrize("text, kind", [
    ("4.8 TB/s", "bandwidth"), ("60 MiB", "capacity"), ("40 GB", "capacity"), ("1.5 MiB", "capacity"),
    ("989.4 TFLOP/s", "flop_rate"), ("1.98 GHz", "frequency"), ("4 us", "time"), ("700 W", "power"),
    ("0.32 pJ/FLOP", "energy_per_flop"), ("28.7 pJ/B", "energy_per_byte"),
])
def test_formatted_quantities_parse_back(text, kind):
    value = parse(text, kind)
    assert parse(format_quantity(value, kind), kind) == pytest.approx(value, rel=1e-3)


@pytest.mark.parametrize("text, shown", [
    ("40 GB", "40 GB"), ("50 MB", "50 MB"), ("60 MiB", "60 MiB"), ("256 KiB", "256 KiB"), ("141 GB", "141 GB"),
])
def test_capacities_keep_the_prefix_family_they_were_written_in(text, shown):
    assert format_quantity(parse(text, "capacity"), "capacity") == shown


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=30), st.from_regex(r"\A-?\d{1,4}(\.\d{1,3})? [A-Za-z/*^ 0-9]{1,12}\Z")),
       st.sampled_from(sorted(units.CANONICAL)))
def test_any_text_gives_a_float_or_unit_error(text, kind):
    try:
        value = parse(text, kind)
    except UnitError:
        return
    assert math.isfinite(value)


@pytest.mark.parametrize("text, kind, half_digit", [
    ("67 TFLOP/s", "flop_rate", 0.5e12), ("66.9 TFLOP/s", "flop_rate", 0.05e12), ("4800 GB/s", "bandwidth", 0.5e9),
    ("60 MiB", "capacity", 0.5 * 2**20), ("1e12 FLOP/s", "flop_rate", 0.5e12), (".5 W", "power", 0.05),
    (132, "count", 0.0),
])
def test_resolution_is_half_the_last_written_digit(text, kind, half_digit):
    assert units.resolution(text, kind) == pytest.approx(half_digit)
