"""The overrides of one design batch: each path of the design vocabulary read as N values
(an override, else the spec's value), checked against its field's magnitudes, with the
overrides no model reads refused so that none is silently ignored. No I/O."""

from __future__ import annotations

import numpy as np

from dse import units
from dse.errors import DseError
from dse.spec import assumptions
from dse.spec.hardware import HardwareSpec
from dse.spec.types import MAX_WHOLE
from dse.spec.vocabulary import Term, canonical, convert

# Fields the models read as one value for every design; a study cannot vary them yet (a
# package field or the spares policy given once is applied to the spec: dse.spec.assumptions).
_FIXED = ("technology.as_built.", "technology.package.")


def same(value: float, n: int) -> np.ndarray:
    """[N] `value` for every design, read-only: a broadcast view (no [N] array) for many
    designs, a small array for a few (cheaper to make than a view)."""
    if n > 64:
        return np.broadcast_to(np.float64(value), (n,))
    key = (value if value == value else "nan", n)  # (NaN is not equal to itself)
    out = _SAME.get(key)
    if out is None:
        if len(_SAME) > 4096:  # a spec's constants are few; a sweep of them is not kept
            _SAME.clear()
        out = _SAME[key] = np.full(n, value)
        out.flags.writeable = False
    return out


# The read-only arrays `same` made, by (value, designs): the spec's constants recur in every
# call (a call of one design reads some 60 of them).
_SAME: dict[tuple[float | str, int], np.ndarray] = {}


class Values:
    """The overrides of one batch: reads a path's N values (an override, else the spec's
    value) and remembers which overrides were read, so none is silently ignored."""

    def __init__(self, spec: HardwareSpec, overrides: dict[str, object]):
        self.spec = spec
        self.parsed: dict[str, np.ndarray] = {}
        self.per_cycle: set[str] = set()
        clock0 = spec.compute.clock
        for key, value in overrides.items():
            path, term = canonical(spec, key)
            if path in self.parsed:
                raise DseError(f"{path} is given twice", field=key, domain="design")
            if path.startswith(_FIXED):
                raise DseError(assumptions.NOT_VARIED, field=path, domain="design")
            if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":
                cyc = [False]  # plain numbers: SI values, never per cycle
            else:
                items = value if isinstance(value, list | tuple | np.ndarray) else [value]
                cyc = [isinstance(v, str) and units.is_per_cycle(v)
                       for v in np.asarray(items, dtype=object).ravel()]
            if any(cyc) and not all(cyc):
                raise DseError("give every value per cycle or none", field=path, domain="design")
            if any(cyc) and term.kind is not units.OPS_PER_CYCLE:
                # a per-cycle value of a per-second field follows the clock; a field kept
                # per cycle (peak_per_unit, which the model multiplies by the clock) does not
                self.per_cycle.add(path)
            self.parsed[path] = convert(path, term, value, 1.0 if any(cyc) else clock0)
            _in_range(path, term, self.parsed[path])
            self.parsed[path].flags.writeable = False  # read by every design's field
        sizes = {a.size for a in self.parsed.values() if a.size != 1}
        if len(sizes) > 1:
            raise DseError("overrides have different lengths "
                           f"({', '.join(str(s) for s in sorted(sizes))}); give one value or "
                           "N values for every path")
        self.n = sizes.pop() if sizes else 1
        self.read: set[str] = set()
        self.clock = self.get("compute.clock", clock0 or 0.0)
        if "compute.clock" in self.parsed and clock0 is None and spec.per_cycle:
            raise DseError("the spec gives no clock to scale its "
                           "per-cycle quantities from", field="compute.clock", domain="design")
        self.clock_ratio = self.clock / clock0 if clock0 else np.ones(self.n)

    def given(self, path: str) -> bool:
        return path in self.parsed

    def get(self, path: str, default: float | None) -> np.ndarray:
        """[N] values of `path` (read-only; may be a broadcast view): the override, else
        `default` (the spec's value; NaN for None), which follows the clock if the spec
        gives it per cycle."""
        if path in self.parsed:
            self.read.add(path)
            given = self.parsed[path].ravel()
            out = given if given.size == self.n else np.broadcast_to(given, (self.n,))
            if out.dtype != np.float64:
                out = out.astype(float)
            return out * self.clock if path in self.per_cycle else out
        out = same(np.nan if default is None else float(default), self.n)
        if "compute.clock" in self.parsed and path in self.spec.per_cycle:
            out = out * self.clock_ratio
        return out

    def check_all_read(self) -> None:
        for path in self.parsed:
            if path not in self.read:
                why = next((w for pattern, w in UNREAD_TERMS.items()
                            if _instance(pattern, path)), None)
                raise DseError("no model reads this field" + (f" ({why})" if why else "")
                               + ", so varying it would change nothing", field=path,
                               domain="design", rule=UNREAD)

    def finite(self, what: str, values: np.ndarray) -> None:
        if not np.all(np.isfinite(values)):
            raise DseError(f"{what} overflows for some designs (beyond the range of a "
                           "float); check the values given", domain="design")


# Fields of the hardware schema no model reads, each with why. A --set of one is refused
# ("no model reads this field"); tests/model/test_vocabulary_reads.py holds every other term
# of the design vocabulary to being read by design_batch, so a field added to the schema is
# either read by the model or listed here with its reason: never silently ignored.
UNREAD_TERMS = {
    "memory.<level>.latency": "the roofline times each operator by bandwidth; a level's "
    "latency is documented, not timed",
    "interconnect.host_link.latency": "the host link carries offloaded state at its "
    "bandwidth; its latency is not timed",
    "technology.die_area": "the published die area, which dse area compares with the "
    "modelled one; never an input",
    "technology.transistors": "the chip as built, documented; the area model works from the "
    "design's contents",
    "interconnect.scale_out_nics": "the collectives use the NICs' bandwidth together "
    "(scale_out_bandwidth); their count describes the system",
}

# The rule of the error for a varied field no model reads (dse.report.hardware_view marks
# such a field by it, not by the words).
UNREAD = "a field a model reads"


def _in_range(path: str, term: Term, values: np.ndarray) -> None:
    """The magnitudes YAML accepts (docs: guide/commands.md, Input limits): a quantity within
    units.MIN_MAGNITUDE .. MAX_MAGNITUDE of its SI unit, a plain number likewise, a whole
    number up to MAX_WHOLE; so a value given as a plain number (an SI value) cannot take a
    design past the float range where its unit-carrying spelling would be refused."""
    scale = term.kind.scale if term.kind is not None else 1.0
    si = np.abs(values.ravel()) / scale
    bad = (si != 0) & ((si < units.MIN_MAGNITUDE) | (si > units.MAX_MAGNITUDE))
    if term.integer:
        bad |= si > MAX_WHOLE
    if not bad.any():
        return
    j = int(np.argmax(bad))
    found, value = values.ravel()[j], float(si[j])
    if term.integer and value > MAX_WHOLE:
        why = f"above {MAX_WHOLE} (2^53), the largest whole number dse accepts"
    elif term.kind is not None:
        why = units.magnitude_problem(value, term.kind)
    else:
        why = (f"below {units.MIN_MAGNITUDE:g}, the smallest magnitude dse accepts"
               if value < units.MIN_MAGNITUDE else
               f"above {units.MAX_MAGNITUDE:g}, the largest magnitude dse accepts")
    raise DseError(f"expected {term.describe_range()}, found {found:g} ({why})",
                   field=path, domain="design")


def _instance(pattern: str, path: str) -> bool:
    """Whether canonical `path` (memory levels by name) is an instance of a term pattern
    (`memory.<level>.latency`): the pattern's fixed parts match and a slot takes one part."""
    head, _, tail = pattern.partition(".<level>.")
    if tail:
        return path.startswith(head + ".") and path.endswith("." + tail)
    return path == pattern
