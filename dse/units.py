"""Quantities with units: the only unit parser in dse.

Every quantity in a YAML file is a string such as "3.35 TB/s", "80 GiB", "989 TFLOPS",
"814 mm2" or "1.98 GHz". It is converted once, at load time, to a float in the internal
unit of its kind: bytes, FLOP (or OP), seconds, hertz, watts, joules, and mm^2 for area
(the one non-SI internal unit, used consistently as `*_mm2` everywhere) and mm for the
length of die edge that off-chip interfaces need.

Prefixes: decimal k M G T P E are powers of 10 (and m u n p for time, length, power,
energy); binary Ki Mi Gi Ti Pi are powers of 2 and apply to bytes and bits only.
"KB" and "mB" are rejected rather than guessed.

A unit is a product of atoms with an optional '/' denominator: "B/s", "FLOP/cycle",
"pJ/B", "W/mm2", "mm2/TFLOPS". Quantities per cycle ("64 B/cycle") are legal only
where a clock converts cycles to seconds (see `to_kind(..., clock_hz=...)`).

The parser is a small table rather than pint: the grammar is deliberately narrow (no
guessing between KB and KiB), per-cycle quantities need the design's clock, and every
rejection must produce one precise sentence naming what was expected.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass

# Base dimensions, in this order: bytes, operations (FLOP or integer OP), seconds,
# metres, joules, clock cycles, money (US dollars).
_N_DIMS = 7
Dim = tuple[int, int, int, int, int, int, int]
_B, _OP, _S, _M, _J, _CYC, _USD = range(_N_DIMS)


def _dim(**exps: int) -> Dim:
    out = [0] * _N_DIMS
    for name, e in exps.items():
        out[{"B": _B, "op": _OP, "s": _S, "m": _M, "J": _J, "cycle": _CYC,
                   "usd": _USD}[name]] = e
    return tuple(out)  # type: ignore[return-value]


class UnitError(ValueError):
    """A quantity string that cannot be read, or has the wrong dimension."""


@dataclass(frozen=True)
class Kind:
    """A physical kind of quantity a field expects: its dimension and how it is shown."""

    name: str  # "bandwidth", used in messages: "expected a bandwidth like ..."
    dim: Dim
    example: str  # a valid input, shown in error messages
    unit: str  # the internal unit's symbol, for display
    scale: float = 1.0  # internal value = SI value * scale (1e6 for m^2 -> mm^2)
    prefixes: str = "decimal"  # how values are displayed: decimal, binary, small, none
    suffix: str = ""  # column-name suffix of the internal unit: latency_s, capacity_bytes
    common: str = ""  # the unit people usually write it in, for the bare-number message


BYTES = Kind("capacity", _dim(B=1), "80 GiB", "B", prefixes="binary", suffix="bytes",
             common="MiB")
# Bytes moved (traffic) are always shown in decimal units, unlike capacities.
TRAFFIC = Kind("amount of data", _dim(B=1), "1.5 GB", "B", suffix="bytes", common="GB")
BANDWIDTH = Kind("bandwidth", _dim(B=1, s=-1), "3.35 TB/s", "B/s", suffix="bytes_per_s",
                 common="GB/s")
FLOP_RATE = Kind("compute rate", _dim(op=1, s=-1), "989 TFLOPS", "FLOP/s",
                 suffix="flop_per_s", common="TFLOPS")
TIME = Kind("time", _dim(s=1), "2 us", "s", prefixes="small", suffix="s", common="us")
FREQUENCY = Kind("frequency", _dim(s=-1), "1.98 GHz", "Hz", suffix="hz", common="MHz")
AREA = Kind("area", _dim(m=2), "814 mm2", "mm2", scale=1e6, prefixes="none", suffix="mm2",
            common="mm2")
LENGTH = Kind("length", _dim(m=1), "6.5 mm", "mm", scale=1e3, prefixes="none", suffix="mm",
              common="mm")
POWER = Kind("power", _dim(J=1, s=-1), "700 W", "W", suffix="w", common="W")
ENERGY = Kind("energy", _dim(J=1), "0.5 pJ", "J", prefixes="small", suffix="j", common="pJ")
ENERGY_PER_OP = Kind("energy per operation", _dim(J=1, op=-1), "0.3 pJ/FLOP", "J/FLOP",
                     prefixes="small", common="pJ/FLOP")
ENERGY_PER_BYTE = Kind("energy per byte", _dim(J=1, B=-1), "30 pJ/B", "J/B", prefixes="small",
                       common="pJ/B")
POWER_DENSITY = Kind("power density", _dim(J=1, s=-1, m=-2), "0.05 W/mm2", "W/mm2",
                     scale=1e-6, prefixes="none", common="W/mm2")
AREA_PER_BYTE = Kind("area per capacity", _dim(m=2, B=-1), "0.5 mm2/MiB", "mm2/B",
                     scale=1e6, prefixes="none", common="mm2/MiB")
AREA_PER_RATE = Kind("area per compute rate", _dim(m=2, op=-1, s=1), "0.4 mm2/TFLOPS",
                     "mm2/(FLOP/s)", scale=1e6, prefixes="none", common="mm2/TFLOPS")
OPS_PER_CYCLE = Kind("rate per cycle", _dim(op=1, cycle=-1), "4096 FLOP/cycle", "FLOP/cycle",
                     suffix="flop_per_cycle", common="FLOP/cycle")
# Money, for the cost model (dse.model.cost): US dollars of the estimate's date, written
# "$" or "USD" ("3500 USD", "17 $/GB", "0.3 $/mm2"); a defect density is per area ("0.1 /cm2").
COST = Kind("cost", _dim(usd=1), "3500 USD", "USD", prefixes="none", suffix="usd",
            common="USD")
COST_PER_BYTE = Kind("cost per capacity", _dim(usd=1, B=-1), "15 $/GB", "USD/B",
                     prefixes="none", common="$/GB")
COST_PER_AREA = Kind("cost per area", _dim(usd=1, m=-2), "0.3 $/mm2", "USD/mm2", scale=1e-6,
                     prefixes="none", common="$/mm2")
PER_AREA = Kind("density per area", _dim(m=-2), "0.1 /cm2", "/mm2", scale=1e-6,
                prefixes="none", common="/cm2")
KINDS = (OPS_PER_CYCLE, BYTES, BANDWIDTH, FLOP_RATE, TIME, FREQUENCY, AREA, LENGTH, POWER,
         ENERGY, ENERGY_PER_OP, ENERGY_PER_BYTE, POWER_DENSITY, AREA_PER_BYTE, AREA_PER_RATE, COST,
         COST_PER_BYTE, COST_PER_AREA, PER_AREA)

# The SI unit of each kind's dimension, for messages about magnitudes.
_SI_UNITS = {BYTES.dim: "B", BANDWIDTH.dim: "B/s", FLOP_RATE.dim: "FLOP/s", TIME.dim: "s",
             FREQUENCY.dim: "Hz", AREA.dim: "m2", LENGTH.dim: "m", POWER.dim: "W",
             ENERGY.dim: "J", ENERGY_PER_OP.dim: "J/FLOP", ENERGY_PER_BYTE.dim: "J/B",
             POWER_DENSITY.dim: "W/m2", AREA_PER_BYTE.dim: "m2/B",
             AREA_PER_RATE.dim: "m2/(FLOP/s)", OPS_PER_CYCLE.dim: "FLOP/cycle",
             COST.dim: "USD", COST_PER_BYTE.dim: "USD/B", COST_PER_AREA.dim: "USD/m2",
             PER_AREA.dim: "/m2"}

_DECIMAL_UP = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_DECIMAL_DOWN = {"m": 1e-3, "u": 1e-6, "\u00b5": 1e-6, "\u03bc": 1e-6, "n": 1e-9, "p": 1e-12}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}


@dataclass(frozen=True)
class _Atom:
    scale: float
    dim: Dim
    binary_ok: bool = False  # Ki Mi Gi ... allowed (bytes and bits only)
    down_ok: bool = False  # m u n p allowed (time, length, power, energy)


_ATOMS: dict[str, _Atom] = {
    "B": _Atom(1.0, _dim(B=1), binary_ok=True),
    "byte": _Atom(1.0, _dim(B=1), binary_ok=True),
    "bytes": _Atom(1.0, _dim(B=1), binary_ok=True),
    "b": _Atom(0.125, _dim(B=1), binary_ok=True),
    "bit": _Atom(0.125, _dim(B=1), binary_ok=True),
    "bits": _Atom(0.125, _dim(B=1), binary_ok=True),
    "Bps": _Atom(1.0, _dim(B=1, s=-1), binary_ok=True),
    "bps": _Atom(0.125, _dim(B=1, s=-1), binary_ok=True),
    "FLOP": _Atom(1.0, _dim(op=1)),
    "OP": _Atom(1.0, _dim(op=1)),
    "FLOPS": _Atom(1.0, _dim(op=1, s=-1)),
    "OPS": _Atom(1.0, _dim(op=1, s=-1)),
    "s": _Atom(1.0, _dim(s=1), down_ok=True),
    "Hz": _Atom(1.0, _dim(s=-1)),
    "m": _Atom(1.0, _dim(m=1), down_ok=True),
    "W": _Atom(1.0, _dim(J=1, s=-1), down_ok=True),
    "J": _Atom(1.0, _dim(J=1), down_ok=True),
    "cycle": _Atom(1.0, _dim(cycle=1)),
    "cycles": _Atom(1.0, _dim(cycle=1)),
    "USD": _Atom(1.0, _dim(usd=1)),
    "$": _Atom(1.0, _dim(usd=1)),
}
_ATOMS_LONGEST_FIRST = sorted(_ATOMS, key=len, reverse=True)

# Unit exponents a quantity may use: mm2, mm^2, the superscripts 2 and 3, s^-1 ... A larger
# one ("TB^30") is a typo, and (2^50)^30 leaves the float range.
MAX_EXPONENT = 3
# Magnitudes a quantity may take, in its SI unit (bytes, seconds, FLOP/s, W, m^2, J/B ...):
# 30 orders of magnitude either side of 1 hold every physical chip, workload and process
# constant (1 YB is 1e24 B; 1 fJ/B is 1e-15 J/B) with room to spare, and keep products of
# a dozen such numbers (units x clock x peak, bytes / bandwidth) inside the float range
# (1e308), so no model output overflows to inf or underflows to 0. Docs: guide/commands.md, Input
# limits.
MAX_MAGNITUDE = 1e30
MIN_MAGNITUDE = 1e-30

_NUMBER = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(.*?)\s*$")
_EXPONENT = re.compile(r"^(.*?)(?:\^?(-?\d+)|(\u00b2)|(\u00b3))$")

# Spellings people write that we refuse to guess, with the hint we give instead.
_HINTS = {
    "K": "use k (1000) or Ki (1024)",
    "FLOPs": "use FLOPS or FLOP/s for a rate, FLOP for a count",
    "flops": "use FLOPS or FLOP/s",
    "Flops": "use FLOPS or FLOP/s",
    "TOPs": "use TOPS or TOP/s",
}


def _atom(text: str, original: str) -> tuple[float, Dim]:
    m = _EXPONENT.match(text)
    core, exp = text, 1
    if m and (m.group(2) or m.group(3) or m.group(4)) and m.group(1):
        core = m.group(1)
        exp = int(m.group(2)) if m.group(2) else (2 if m.group(3) else 3)
        if exp == 0 or abs(exp) > MAX_EXPONENT:
            raise UnitError(f"unit '{text}' in '{original}': exponent {exp} is out of range "
                            f"(1 to {MAX_EXPONENT}, or -1 to -{MAX_EXPONENT})")
    for name in _ATOMS_LONGEST_FIRST:
        if not core.endswith(name):
            continue
        prefix = core[: len(core) - len(name)]
        atom = _ATOMS[name]
        if prefix == "":
            factor = 1.0
        elif prefix in _DECIMAL_UP:
            factor = _DECIMAL_UP[prefix]
        elif prefix in _BINARY and atom.binary_ok:
            factor = _BINARY[prefix]
        elif prefix in _DECIMAL_DOWN and atom.down_ok:
            factor = _DECIMAL_DOWN[prefix]
        elif prefix == "c" and name == "m":  # cm, for defect densities per cm2
            factor = 1e-2
        else:
            continue
        scale = (atom.scale * factor) ** exp
        return scale, tuple(d * exp for d in atom.dim)  # type: ignore[return-value]
    hint = next((h for bad, h in _HINTS.items() if bad in core), None)
    if core.endswith("B") and core[:-1] in _DECIMAL_DOWN:
        hint = f"'{core}' would be a fraction of a byte; did you mean '{core[:-1].upper()}B'?"
    raise UnitError(f"unknown unit '{text}' in '{original}'" + (f" ({hint})" if hint else ""))


def parse_quantity(text: str) -> tuple[float, Dim]:
    """Parse "3.35 TB/s" into (3.35e12, dimension of B/s). Raises UnitError."""
    m = _NUMBER.match(text)
    if not m:
        raise UnitError(f"'{text}' is not a number followed by a unit")
    value = float(m.group(1))  # digits beyond the float range give inf: rejected by to_kind
    unit = m.group(2)
    if not unit:
        raise UnitError(f"'{text}' has no unit")
    parts = unit.replace(" ", "").split("/")
    if len(parts) == 2 and parts[0] == "" and parts[1]:
        parts[0] = "1"  # "/cm2": a density, nothing in the numerator
    if any(p == "" for p in parts):
        raise UnitError(f"malformed unit '{unit}' in '{text}'")
    scale, dim = 1.0, [0] * _N_DIMS
    for i, part in enumerate(parts):
        sign = 1 if i == 0 else -1
        for atom_text in re.split(r"[*\u00b7]", part):
            if atom_text == "1" and i == 0:
                continue
            s, d = _atom(atom_text, text)
            scale *= s**sign  # a long product may reach inf or 0: rejected by to_kind
            dim = [a + sign * b for a, b in zip(dim, d, strict=True)]
    return value * scale, tuple(dim)  # type: ignore[return-value]


def _describe(dim: Dim) -> str:
    for kind in KINDS:
        if kind.dim == dim:
            return f"a {kind.name}"
    if dim[_CYC]:
        return "a per-cycle quantity"
    return "a quantity of another dimension"


_BITS = re.compile(r"^\s*(\S+?)\s*(k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi)?(?:b|bit|bits)\s*$")
_LEADING_NUMBER = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(.*)$")


def scale_quantity(value: str, factor: float) -> str:
    """A quantity string times `factor`, in the same unit ("80 GiB" x 1.2 -> "96 GiB"); the
    string itself when it has no leading number (the schema then reports it)."""
    m = _LEADING_NUMBER.match(value)
    if not m:
        return value
    return f"{float(m.group(1)) * factor:.12g} {m.group(2)}".strip()


def is_per_cycle(value: str) -> bool:
    """Whether a quantity string is given per clock cycle ("128 B/cycle")."""
    try:
        return parse_quantity(value)[1][_CYC] != 0
    except UnitError:
        return False


def article(word: str) -> str:
    """'an' before a vowel ("an energy per operation"), else 'a'."""
    return "an" if word[:1].lower() in "aeiou" else "a"


def is_bare_number(text: str) -> bool:
    """Whether `text` is a number with no unit ("1500", " 9.6e1 ")."""
    m = _NUMBER.match(text)
    return m is not None and not m.group(2)


def bare_number(value: object, kind: Kind) -> str:
    """The one message for a quantity given without a unit, on every route (YAML, --set, the
    API's strings, study ranges): what was expected, with the number written with a unit.

    A number in text is never read as SI: "1500" for a clock meant MHz, not 1.5 kHz, and
    "96" for a capacity MiB, not 96 bytes; guessing either way gives a silently wrong design.
    """
    text = (value.strip() if isinstance(value, str) else f"{value:g}"
            if isinstance(value, float) else str(value))
    mine = f"{text} {kind.common or kind.unit}"
    examples = f"'{mine}'" + (f" or '{kind.example}'" if kind.example != mine else "")
    return (f"expected {article(kind.name)} {kind.name} with a unit, e.g. {examples}, found "
            f"the bare number {value!r} (a unit is required)")


def to_kind(value: object, kind: Kind, *, clock_hz: float | None = None,
            positive: bool = True) -> float:
    """Convert a YAML value ("3.35 TB/s") to a float in `kind`'s internal unit.

    Per-cycle values ("64 B/cycle") are converted with `clock_hz`; without a clock they are
    an error. Raises UnitError with a one-line message naming the expected kind.
    """
    expect = (f"expected {'a positive' if positive else article(kind.name)} {kind.name} "
              f"like '{kind.example}'")
    if isinstance(value, bool) or value is None:
        raise UnitError(f"{expect}, found {value!r}")
    if isinstance(value, int | float) or (isinstance(value, str) and is_bare_number(value)):
        raise UnitError(bare_number(value, kind))
    if not isinstance(value, str):
        raise UnitError(f"{expect}, found a {type(value).__name__}")
    try:
        si, dim = parse_quantity(value)
    except UnitError as e:
        raise UnitError(f"{expect}; {e}") from None
    if dim[_CYC] and kind.dim[_CYC] == 0:
        c = dim[_CYC]
        converted = list(dim)
        converted[_S] += c
        converted[_CYC] = 0
        if tuple(converted) == kind.dim:
            if clock_hz is None:
                raise UnitError(
                    f"'{value}' is per cycle; give compute.clock so cycles can be converted "
                    f"to seconds, or write the {kind.name} per second like '{kind.example}'"
                )
            si, dim = si * clock_hz ** (-c), kind.dim
    if dim != kind.dim:
        raise UnitError(f"{expect}, found '{value}' ({_describe(dim)})")
    if kind.dim == _dim(B=1) and (m := _BITS.match(value)):
        # Capacities are counted in bytes; "80 Gib" is almost always a typo for "80 GiB".
        typo = f"{m.group(1)} {m.group(2) or ''}B"
        raise UnitError(f"{expect}, found '{value}', which is in bits (b); capacities are in "
                        f"bytes (B): write '{typo}', or "
                        f"'{format_quantity(si, BYTES)}' for the same amount")
    if not math.isfinite(si):
        raise UnitError(f"{expect}, found '{value}' (not finite: beyond the range of a float)")
    if 0 < abs(si) < sys.float_info.min:
        raise UnitError(f"{expect}, found '{value}' (below the smallest normal float)")
    if si != 0 and not MIN_MAGNITUDE <= abs(si) <= MAX_MAGNITUDE:
        raise UnitError(f"{expect}, found '{value}' ({magnitude_problem(si, kind)})")
    if positive and si <= 0:
        raise UnitError(f"{expect}, found '{value}' (must be > 0)")
    if si < 0:
        raise UnitError(f"{expect}, found '{value}' (must be >= 0)")
    return si * kind.scale


_UP = [("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1.0)]
_UP_BIN = [("Pi", 2.0**50), ("Ti", 2.0**40), ("Gi", 2.0**30), ("Mi", 2.0**20), ("Ki", 2.0**10),
           ("", 1.0)]
_DOWN = [("", 1.0), ("m", 1e-3), ("u", 1e-6), ("n", 1e-9), ("p", 1e-12)]


def magnitude_problem(si: float, kind: Kind) -> str:
    """Why an SI value lies outside [MIN_MAGNITUDE, MAX_MAGNITUDE]: 'above 1e+30 B/s ...'."""
    unit = _SI_UNITS.get(kind.dim, "in SI units")
    if abs(si) > MAX_MAGNITUDE:
        return f"above {MAX_MAGNITUDE:g} {unit}, the largest quantity dse accepts"
    return f"below {MIN_MAGNITUDE:g} {unit}, the smallest quantity dse accepts"


def format_quantity(value: float, kind: Kind, digits: int = 4) -> str:
    """Render an internal value for people: 3.35e12 B/s -> '3.35 TB/s', 8.6e10 B -> '80 GiB'."""
    if value is None or not math.isfinite(value):
        return str(value)
    if kind.prefixes == "none":
        return f"{value:.{digits}g} {kind.unit}"
    if kind.prefixes == "binary":
        table = _UP_BIN
    elif kind.prefixes == "small":
        table = _UP[:-1] + _DOWN
    else:
        table = _UP
    mag = abs(value)
    if kind.prefixes == "binary":
        f = next((f for _, f in _UP_BIN if mag >= f), 1.0)
        if (mag / f) * 1000 != round((mag / f) * 1000):
            table = _UP  # not a round binary amount (e.g. 80 GB): show it in decimal
    for prefix, factor in table:
        if mag >= factor * 0.9995 or factor == table[-1][1]:
            return f"{value / factor:.{digits}g} {prefix}{kind.unit}"
    raise AssertionError("unreachable")  # pragma: no cover
