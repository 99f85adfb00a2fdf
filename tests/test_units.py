"""The unit parser, prefix by prefix, and every way a quantity can be wrong."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dse import units
from dse.units import UnitError, format_quantity, parse_quantity, to_kind

DECIMAL = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}


@pytest.mark.parametrize("prefix,factor", [("", 1.0), *DECIMAL.items()])
def test_decimal_prefixes_on_bytes_bandwidth_and_rates(prefix, factor):
    assert to_kind(f"3 {prefix}B", units.BYTES) == pytest.approx(3 * factor)
    assert to_kind(f"3 {prefix}B/s", units.BANDWIDTH) == pytest.approx(3 * factor)
    assert to_kind(f"3 {prefix}FLOPS", units.FLOP_RATE) == pytest.approx(3 * factor)
    assert to_kind(f"3 {prefix}FLOP/s", units.FLOP_RATE) == pytest.approx(3 * factor)
    assert to_kind(f"3 {prefix}OPS", units.FLOP_RATE) == pytest.approx(3 * factor)
    assert to_kind(f"3 {prefix}Hz", units.FREQUENCY) == pytest.approx(3 * factor)
    assert to_kind(f"3 {prefix}W", units.POWER) == pytest.approx(3 * factor)


@pytest.mark.parametrize("prefix,factor", BINARY.items())
def test_binary_prefixes_are_powers_of_two(prefix, factor):
    assert to_kind(f"3 {prefix}B", units.BYTES) == 3 * factor
    assert to_kind(f"3 {prefix}B/s", units.BANDWIDTH) == 3 * factor


def test_decimal_and_binary_differ():
    assert to_kind("80 GB", units.BYTES) == 80e9
    assert to_kind("80 GiB", units.BYTES) == 80 * 2**30


@pytest.mark.parametrize("text,value", [
    ("1 s", 1.0), ("2 ms", 2e-3), ("3 us", 3e-6), ("3 \u00b5s", 3e-6), ("4 ns", 4e-9),
    ("5 ps", 5e-12),
])
def test_time(text, value):
    assert to_kind(text, units.TIME) == pytest.approx(value)


@pytest.mark.parametrize("text", ["814 mm2", "814 mm^2", "814 mm\u00b2", "8.14e-4 m2"])
def test_area_is_held_in_mm2(text):
    assert to_kind(text, units.AREA) == pytest.approx(814.0)


def test_bits_and_bytes():
    assert to_kind("400 Gb/s", units.BANDWIDTH) == pytest.approx(50e9)
    assert to_kind("400 Gbps", units.BANDWIDTH) == pytest.approx(50e9)
    # A capacity in bits is almost always a typo for bytes (80 Gib for 80 GiB): rejected with
    # both readings spelled out.
    with pytest.raises(UnitError, match=r"in bits.*write '80 GiB', or '10 GiB'"):
        to_kind("80 Gib", units.BYTES)
    with pytest.raises(UnitError, match="in bits"):
        to_kind("8 bit", units.BYTES)


def test_datasheet_examples():
    assert to_kind("3.35 TB/s", units.BANDWIDTH) == pytest.approx(3.35e12)
    assert to_kind("989 TFLOPS", units.FLOP_RATE) == pytest.approx(989e12)
    assert to_kind("1979 TOPS", units.FLOP_RATE) == pytest.approx(1979e12)
    assert to_kind("1.98 GHz", units.FREQUENCY) == pytest.approx(1.98e9)
    assert to_kind("0.5 pJ/B", units.ENERGY_PER_BYTE) == pytest.approx(0.5e-12)
    assert to_kind("0.05 W/mm2", units.POWER_DENSITY, positive=False) == pytest.approx(0.05)


def test_per_cycle_needs_a_clock():
    assert to_kind("64 B/cycle", units.BANDWIDTH, clock_hz=1.5e9) == pytest.approx(96e9)
    assert to_kind("4096 FLOP/cycle", units.OPS_PER_CYCLE) == 4096.0
    with pytest.raises(UnitError, match=r"per cycle; give compute\.clock"):
        to_kind("64 B/cycle", units.BANDWIDTH)


@pytest.mark.parametrize("value,kind,parts", [
    ("3 TB", units.BANDWIDTH, ["expected a positive bandwidth like '3.35 TB/s'",
                               "found '3 TB' (a capacity)"]),
    ("3.35 TB/s", units.BYTES, ["capacity like '80 GiB'", "(a bandwidth)"]),
    ("1 GHz", units.TIME, ["time like", "(a frequency)"]),
    (3350, units.BANDWIDTH, ["bare number 3350", "a unit is required"]),
    ("3350", units.BANDWIDTH, ["bare number '3350'", "e.g. '3350 GB/s'"]),
    (None, units.BYTES, ["found None"]),
    (True, units.BYTES, ["found True"]),
    ("fast", units.FREQUENCY, ["not a number followed by a unit"]),
    ("80 KB", units.BYTES, ["unknown unit 'KB'", "k (1000) or Ki (1024)"]),
    ("80 mB", units.BYTES, ["did you mean 'MB'"]),
    ("3 TFLOPs", units.FLOP_RATE, ["FLOPS or FLOP/s for a rate"]),
    ("3 KiFLOPS", units.FLOP_RATE, ["unknown unit"]),
    ("0 GB", units.BYTES, ["must be > 0"]),
    ("-1 GB/s", units.BANDWIDTH, ["must be > 0"]),
    ("3 GB/", units.BANDWIDTH, ["malformed unit"]),
    ("3 parsecs", units.TIME, ["unknown unit"]),
    ("1e999 GB", units.BYTES, ["not finite"]),
])
def test_rejections_name_the_expectation(value, kind, parts):
    with pytest.raises(UnitError) as info:
        to_kind(value, kind)
    for part in parts:
        assert part in str(info.value)


def test_zero_allowed_where_asked():
    assert to_kind("0 W/mm2", units.POWER_DENSITY, positive=False) == 0.0
    with pytest.raises(UnitError, match=">= 0"):
        to_kind("-1 W/mm2", units.POWER_DENSITY, positive=False)


def test_compound_dimensions():
    value, dim = parse_quantity("2 mm2/TFLOPS")
    assert value == pytest.approx(2e-6 / 1e12)
    assert dim == units.AREA_PER_RATE.dim


@pytest.mark.parametrize("value,kind,text", [
    (80e9, units.BYTES, "80 GB"), (80 * 2**30, units.BYTES, "80 GiB"),
    (3.35e12, units.BANDWIDTH, "3.35 TB/s"), (989e12, units.FLOP_RATE, "989 TFLOP/s"),
    (2e-6, units.TIME, "2 us"), (814.0, units.AREA, "814 mm2"), (700.0, units.POWER, "700 W"),
])
def test_format(value, kind, text):
    assert format_quantity(value, kind) == text


@given(st.floats(min_value=1e-3, max_value=1e20, allow_nan=False))
def test_format_then_parse_round_trips(value):
    for kind in (units.BYTES, units.BANDWIDTH, units.FLOP_RATE, units.POWER):
        back = to_kind(format_quantity(value, kind, digits=12), kind)
        assert math.isclose(back, value, rel_tol=1e-9)
