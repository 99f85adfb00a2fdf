"""The design vocabulary: every numeric field of the hardware schema as a dotted path, with
its unit, whether it is a whole number, and the range it can physically take.

The terms are derived from the schema (`HardwareSpec` and the models it nests), not kept by
hand: a field added to the schema is a term at once. `--set`, the Python API
(`design_batch(spec, overrides)`) and study parameters name a term by its path and obey the
same rules; YAML derivation (`base:`) obeys them through the schema itself.

Paths: `compute.units`, `compute.matrix.peak_per_unit.bf16`, `memory.L2.capacity` (or
`memory[1].capacity`), `interconnect.link_bandwidth`, `tdp` ... A `<precision>` segment
takes any precision of the schema, a `<level>` segment any memory level name of the design.

Coupled quantities follow their cause (`COUPLED`): changing an HBM level's `stacks` (or a
DRAM level's `channels`) scales its capacity and bandwidth per stack (channel) unless those
are given too; a sliced cache's `slices` likewise; changing the capacity of a sliced cache
changes its slice count at the same slice size, and its bandwidth follows the slices
(`dse.model.batch`); `compute.clock` scales every quantity the spec gives per cycle;
`compute.units` scales per-unit rates and per-unit memory levels by construction. No I/O.
The terms themselves are derived in dse.spec.terms.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from dse import units
from dse.errors import DseError, suggest
from dse.spec import catalogue
from dse.spec.hardware import PRECISIONS, HardwareSpec
from dse.spec.terms import COUPLED as COUPLED  # re-exported: the model reads it here
from dse.spec.terms import LEVEL_SLOT, PRECISION_SLOT
from dse.spec.terms import Term as Term  # re-exported: the model and search read it here
from dse.spec.terms import terms as terms  # re-exported: the reports read it here


def generation_names(values: ArrayLike) -> list[str]:
    """Catalogue names of generation indices (a batch's or a study's values)."""
    names = catalogue.catalogue().names
    return [names[int(v)] if 0 <= v < len(names) else "" for v in np.ravel(values)]


_INDEXED = re.compile(r"^memory\[(\d+)\]")


def canonical(spec: HardwareSpec, path: str) -> tuple[str, Term]:
    """(`path` with memory[i] written as memory.<name>, its term); DseError when `path` names
    no numeric field of the schema, or an unknown level or precision."""
    if not isinstance(path, str) or not path:
        raise DseError(f"override {path!r}: expected a dotted path such as "
                       "memory.L2.capacity")
    names = [lv.name for lv in spec.memory]
    m = _INDEXED.match(path)
    if m:
        i = int(m.group(1))
        if i >= len(names):
            raise DseError(f"{spec.name} has {len(names)} memory levels "
                           f"(memory[0] .. memory[{len(names) - 1}])", field=path, domain="design")
        path = f"memory.{names[i]}{path[m.end():]}"
    term = _term_of(path, tuple(names))
    if term is None:
        raise DseError(_why_not(path, spec, names), field=path, domain="design")
    return path, term


@functools.lru_cache(maxsize=4096)
def _term_of(path: str, names: tuple[str, ...]) -> Term | None:
    """The term `path` is an instance of with memory levels `names` (None: none); the
    vocabulary is fixed, so each (path, levels) is matched once (a study reads the same few
    paths in every call)."""
    for pattern, term in terms().items():
        if _matches(pattern, path, list(names)):
            return term
    return None


def _slot_values(slot: str, names: list[str]) -> tuple[str, ...]:
    return PRECISIONS if slot == PRECISION_SLOT else tuple(names)


def _matches(pattern: str, path: str, names: list[str] | None) -> bool:
    """Whether `path` is an instance of `pattern`; <level> is one of `names` (None: any
    name, which may contain dots)."""
    if pattern.startswith("memory.<level>."):
        tail = pattern.removeprefix("memory.<level>.").split(".")
        parts = path.split(".")
        level = ".".join(parts[1:-len(tail)])
        return (parts[0] == "memory" and len(parts) > len(tail) + 1
                and (names is None or level in names)
                and _parts_match(tail, parts[-len(tail):], names))
    return _parts_match(pattern.split("."), path.split("."), names)


def _parts_match(want: list[str], got: list[str], names: list[str] | None) -> bool:
    if len(want) != len(got):
        return False
    for w, g in zip(want, got, strict=True):
        if w == PRECISION_SLOT:
            if g not in PRECISIONS:
                return False
        elif w == LEVEL_SLOT:
            if names is not None and g not in names:
                return False
        elif w != g:
            return False
    return True


def column_name(path: str) -> str:
    """Table column of a canonical path: the path with its SI unit as a suffix
    (`memory.L2.capacity_bytes`, `compute.clock_hz`); plain numbers keep the bare path."""
    term = next((t for p, t in terms().items() if _matches(p, path, None)), None)
    kind = term.kind if term is not None else None
    return f"{path}_{kind.suffix}" if kind is not None and kind.suffix else path


def _why_not(path: str, spec: HardwareSpec, names: list[str]) -> str:
    """The closest explanation of an unknown path."""
    if path.startswith("memory."):
        level = next((n for n in sorted(names, key=len, reverse=True)
                      if path.startswith(f"memory.{n}.")), None)
        fields = [p.removeprefix("memory.<level>.") for p in terms()
                  if p.startswith("memory.<level>.")]
        if level is None:
            rest = path[len("memory."):]
            tail = next((f for f in sorted(fields, key=len, reverse=True)
                         if rest.endswith(f".{f}")), None)
            guess = rest[:-len(tail) - 1] if tail else rest.split(".")[0]
            return (f"{spec.name} has no memory level '{guess}'{suggest(guess, names)}; "
                    f"expected one of: {', '.join(names)}")
        field = path[len(f"memory.{level}."):]
        return (f"memory level '{level}' has no numeric field '{field}'"
                f"{suggest(field, fields)}; expected one of: {', '.join(fields)}")
    parts = path.split(".")
    for i, part in enumerate(parts):
        if part not in PRECISIONS and any(p.split(".")[i:i + 1] == [PRECISION_SLOT]
                                          and p.split(".")[:i] == parts[:i]
                                          for p in terms()):
            return f"unknown precision '{part}'; expected one of: {', '.join(PRECISIONS)}"
    shown = list(terms())
    return (f"not a field that can be varied{suggest(path, shown)}; "
            f"expected one of: {', '.join(shown)}")


def convert(path: str, term: Term, value: object, clock_hz: float | None) -> np.ndarray:
    """An override value (a number, a string with a unit, or a list / array of them) as a
    float array in the field's internal unit, checked against the field's rules.

    One rule for bare numbers: a string is text a person wrote, so a dimensioned field's
    string must carry a unit ("1500 MHz"; "1500" is refused, as in YAML); a number object
    (int, float, numpy) is already a value in the field's internal unit, the unit its table
    column names (`compute.clock_hz`: Hz, `technology.die_area_mm2`: mm2), as the API's
    arrays and a study's sampled values are. Counts and fractions take plain numbers."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf" and value.size \
            and not term.categorical:  # N designs' plain numbers, checked at once
        return _numbers(path, term, value.astype(float, copy=False).ravel()).reshape(
            value.shape)
    if isinstance(value, np.ndarray):
        items = list(value.ravel())
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        items = [value]
    if not items:
        raise DseError("expected at least one value", field=path, domain="design")
    if term.categorical:
        out = np.array([_generation(path, item) for item in items], dtype=float)
    else:
        out = np.empty(len(items))
        for j, item in enumerate(items):
            out[j] = _one(path, term, item, clock_hz)
    if isinstance(value, np.ndarray):
        out = out.reshape(value.shape)
    return out


def _generation(path: str, item: object) -> float:
    """A generation named by its catalogue key (or, from a batch or a study, its index)."""
    cat = catalogue.catalogue()
    if isinstance(item, str) and item.strip() in cat.generations:
        return float(cat.index(item.strip()))
    if isinstance(item, int | float | np.integer | np.floating) \
            and not isinstance(item, bool | np.bool_) and np.isfinite(float(item)) \
            and float(item) == round(float(item)) and 0 <= item < len(cat.names):
        return float(item)
    raise DseError(cat.unknown(item), field=path, domain="design")


def _numbers(path: str, term: Term, a: np.ndarray) -> np.ndarray:
    """The checks of `_one` on an array of plain numbers at once (N designs from the API
    or a study): the first offending value is reported."""
    bad = ~np.isfinite(a)
    if term.integer:
        bad |= a != np.round(a)
    checks: tuple[tuple[float | None, Callable[[float], np.ndarray]], ...] = (
        (term.gt, lambda b: ~(a > b)), (term.ge, lambda b: a < b),
        (term.le, lambda b: a > b), (term.lt, lambda b: ~(a < b)))
    for bound, fails in checks:
        if bound is not None:
            bad |= fails(bound)
    bad |= (a != 0) & (np.abs(a) < _SMALLEST_NORMAL)
    if bad.any():
        _one(path, term, float(a[np.argmax(bad)]), None)  # raises with the message
    return a.copy()


def _one(path: str, term: Term, item: object, clock_hz: float | None) -> float:
    expect = _Lazy(term.describe_range)
    if isinstance(item, bool | np.bool_) or item is None:
        raise DseError(f"expected {expect}, found {item!r}", field=path, domain="design")
    if isinstance(item, str):
        text = item.strip()
        if term.kind is not None and _plain_number(text):
            # text is what a person wrote: a quantity in it carries its unit on every route
            # (docs: guide/hardware.md, Units); only a number object is a value in the internal unit
            raise DseError(units.bare_number(text, term.kind), field=path, domain="design")
        if term.kind is not None:
            try:
                v = units.to_kind(text, term.kind, clock_hz=clock_hz,
                                  positive=term.gt is not None and term.gt >= 0)
            except units.UnitError as e:
                raise DseError(str(e), field=path, domain="design") from None
        else:
            try:
                v = float(text) if not term.integer or not text.lstrip("-").isdigit() \
                    else int(text)
            except ValueError:
                raise DseError(f"expected {expect}, found '{item}'",
                               field=path, domain="design") from None
    elif isinstance(item, int | float | np.integer | np.floating):
        v = item if isinstance(item, int | float) else item.item()  # numpy scalar: Python
    else:
        raise DseError(f"expected {expect}, found a {type(item).__name__}",
                       field=path, domain="design")
    try:
        f = float(v)
    except OverflowError:
        raise DseError(f"expected {expect}, found a number beyond the range "
                       "of a float", field=path, domain="design") from None
    if not math.isfinite(f):
        raise DseError(f"expected {expect}, found {f} (not finite)", field=path, domain="design")
    if term.integer and f != round(f):
        raise DseError(f"expected a whole number, found {f:g}", field=path, domain="design")
    bad = ((term.gt is not None and not f > term.gt) or (term.ge is not None and f < term.ge)
           or (term.le is not None and f > term.le) or (term.lt is not None and not f < term.lt))
    if bad:
        raise DseError(f"expected {expect}, found {f:g}", field=path, domain="design")
    if f != 0 and abs(f) < _SMALLEST_NORMAL:
        raise DseError(f"expected {expect}, found {f:g} (below the smallest "
                       "normal float: a value this small is a typo)", field=path, domain="design")
    return f


class _Lazy:
    """A message part computed only when an error is formatted."""

    def __init__(self, make: Callable[[], str]):
        self.make = make

    def __format__(self, spec: str) -> str:
        return format(self.make(), spec)


# Values below this are denormal: arithmetic on them loses precision and a rate or fraction
# this small turns every time into infinity.
_SMALLEST_NORMAL = float(np.finfo(float).tiny)


def _plain_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def variable_paths(spec: HardwareSpec) -> list[str]:
    """Every path a design of `spec` can vary, with its level names and precisions filled in
    (for help texts and error messages)."""
    names = [lv.name for lv in spec.memory]
    out = []
    for pattern in terms():
        paths = [pattern]
        for slot in (LEVEL_SLOT, PRECISION_SLOT):
            paths = [p.replace(slot, v, 1) for p in paths for v in _slot_values(slot, names)] \
                if any(slot in p for p in paths) else paths
        out.extend(paths)
    return out


def current(spec: HardwareSpec, path: str) -> float | None:
    """The value `spec` gives a canonical path (memory levels by name), in SI units; None
    where the spec leaves the field out."""
    node: object = spec
    parts = path.split(".")
    if parts[0] == "memory":
        level = next(lv for lv in spec.memory if path.startswith(f"memory.{lv.name}."))
        node, parts = level, path[len(f"memory.{level.name}."):].split(".")
    for part in parts:
        if node is None:
            return None
        node = node.get(part) if isinstance(node, dict) else getattr(node, part, None)
    if isinstance(node, str):  # a generation: its catalogue index
        return float(catalogue.catalogue().index(node))
    return None if node is None else float(node)  # type: ignore[arg-type]
