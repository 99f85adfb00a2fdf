"""DesignBatch: N hardware designs as arrays, built from one spec plus overrides.

A design is the base spec with some fields replaced, given as paths of the design
vocabulary (`dse.spec.vocabulary`: `compute.units`, `memory.L2.capacity`,
`memory[2].bandwidth`, `compute.matrix.peak_per_unit.bf16`, `tdp` ...), each holding one
value or N values (numbers in SI units, or strings with units). The vocabulary checks each
value against its field's rules; coupled quantities follow their cause (HBM stacks scale
capacity and bandwidth, the clock scales per-cycle quantities, units scale per-unit ones; a
sliced cache's capacity sets its slice count and its bandwidth follows the slices, see
`_slice_scale`).
The batch holds every quantity the models read as an array over designs ([N], or [N, L] for
memory levels), in SI units. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dse import units
from dse.errors import DseError
from dse.spec import assumptions
from dse.spec.catalogue import Generation, catalogue
from dse.spec.hardware import (
    CHANNEL_INTERFACES,
    HBM_INTERFACES,
    ON_CHIP_KINDS,
    PRECISIONS,
    Compute,
    HardwareSpec,
    MemoryLevel,
    interface_family,
)
from dse.spec.hardware_costs import fixed_cost
from dse.spec.types import MAX_WHOLE
from dse.spec.vocabulary import COUPLED, Term, canonical, convert


@dataclass(frozen=True)
class DesignBatch:
    """N designs that share a base spec. Rates are chip totals; [N] or [N, L] arrays."""

    spec: HardwareSpec
    n: int
    units: np.ndarray  # [N]
    clock: np.ndarray  # [N] Hz (0 when the spec gives none)
    matrix_peak: dict[str, np.ndarray]  # precision -> [N] FLOP/s
    vector_peak: dict[str, np.ndarray]  # precision -> [N] FLOP/s
    matrix_fraction: dict[str, np.ndarray]  # precision -> [N] achievable fraction
    matrix_typical: np.ndarray  # [N] share of it a model's layer GEMMs reach (NaN: default)
    tile: tuple[int, int, int] | np.ndarray | None  # native tile m, n, k of the matrix
    # engine; [N, 3] where designs differ
    register_file: float | np.ndarray | None  # bytes per unit holding GEMM accumulators;
    # [N] where designs differ
    blocks: tuple[tuple[int, int], ...]  # thread-block tiles (m, n) of the GEMM library
    # (empty: no wave quantization)
    align_bytes: np.ndarray  # [N] leading-dimension multiple of the fast path (NaN: none)
    align_slowdown: np.ndarray  # [N] rate of the misaligned path / aligned (1: none)
    op_overhead: np.ndarray  # [N] s per operator
    level_names: tuple[str, ...]
    level_kinds: tuple[str, ...]
    resident: np.ndarray  # [L] bool: may hold weights / KV cache across steps
    per_unit: np.ndarray  # [L] bool: one instance per compute unit
    stacks: np.ndarray  # [N, L] HBM stacks of each level (0: none or not an HBM level)
    channels: np.ndarray  # [N, L] DRAM channels of each level (0: none given)
    slices: np.ndarray  # [N, L] slices of a sliced cache (0: not described as slices)
    generation: np.ndarray  # [N, L] memory-catalogue index of each DRAM level's generation
    # (-1: the level names none; dse.spec.catalogue)
    peak_bandwidth: np.ndarray  # [N, L] B/s datasheet peak, chip total
    capacity: np.ndarray  # [N, L] bytes, chip total
    unit_capacity: np.ndarray  # [N, L] bytes per instance (per unit or the whole level)
    bandwidth: np.ndarray  # [N, L] B/s achieved (peak x achievable fraction), chip total
    gather_bandwidth: np.ndarray  # [N, L] B/s random row gathers reach (peak x gather fraction)
    gather_granularity: np.ndarray  # [N, L] bytes of the smallest access a gather makes
    link_bandwidth: np.ndarray  # [N] B/s per link per direction
    links: np.ndarray  # [N]
    link_latency: np.ndarray  # [N] s per collective step
    link_fraction: np.ndarray  # [N] achieved share of the link bandwidth in collectives
    collective_overhead: np.ndarray  # [N] s per collective call
    scale_out_bandwidth: np.ndarray  # [N] B/s per chip per direction
    scale_out_latency: np.ndarray  # [N] s
    tdp: np.ndarray  # [N] W (NaN: none given)
    matrix_energy: dict[str, np.ndarray]  # precision -> [N] J per matrix FLOP at the rated
    # clock (the spec's `power`; empty: calibrated at evaluation)
    active_per_unit: np.ndarray  # [N] W per unit clocked while running (NaN: no `power`)
    dies: np.ndarray  # [N] compute dies in the package
    lanes_per_link: np.ndarray  # [N] SerDes lanes per chip-to-chip link (NaN: not given)
    host_link_bandwidth: np.ndarray  # [N] B/s per direction (0: no host link)
    host_link_lanes: np.ndarray  # [N] (NaN: not given)
    topology: str | None
    chips_per_node: int | np.ndarray  # [N] where designs differ
    overrides: dict[str, np.ndarray] = field(default_factory=dict)
    # the technology-level assumptions given with the overrides and applied to `spec`
    # (dse.spec.assumptions): (path, value) pairs, for what a report echoes
    assumed: tuple[tuple[str, object], ...] = ()

    @property
    def levels(self) -> int:
        return len(self.level_names)

    @property
    def on_chip(self) -> np.ndarray:
        """[L] bool: levels on the die (registers, SRAM, caches), listed before the off-chip
        ones (the schema orders kinds innermost first)."""
        return np.array([k in ON_CHIP_KINDS for k in self.level_kinds])

    def one_tile(self) -> tuple[int, int, int] | None:
        """The native tile the designs share (performance.op_times times designs of
        different tiles in groups of one tile each)."""
        if isinstance(self.tile, np.ndarray):
            raise ValueError("designs of several native tiles: time each tile apart "
                             "(dse.model.performance.op_times)")
        return self.tile

    def take(self, idx: np.ndarray) -> DesignBatch:
        """The designs at `idx` of this batch (repeats allowed)."""
        fields = {}
        for name in self.__dataclass_fields__:
            v = getattr(self, name)
            if isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[0] == self.n \
                    and name not in ("resident", "per_unit"):
                v = v[idx]
            elif isinstance(v, dict):
                v = {key: a[idx] for key, a in v.items()}
            fields[name] = v
        fields["n"] = len(idx)
        return DesignBatch(**fields)

    def by_generation(self, i: int, figure: Callable[[Generation], Any], default: Any
                      ) -> np.ndarray:
        """[N] `figure(generation)` of level `i`'s catalogue generation per design, `default`
        (a value or [N]) where the level names none."""
        gen = self.generation[:, i].astype(int)
        if np.all(gen < 0):
            return np.broadcast_to(np.asarray(default, dtype=object if isinstance(
                default, str) else float), (self.n,))
        gens = list(catalogue().generations.values())
        table = np.array([figure(g) for g in gens])
        return np.where(gen >= 0, table[np.maximum(gen, 0)], default)

    def interfaces(self, i: int) -> np.ndarray:
        """[N] DRAM interface of level `i` per design (its generation's, else the spec's)."""
        own = self.spec.memory[i].interface or ""
        return self.by_generation(i, lambda g: g.interface, own).astype(object)

    @property
    def resident_capacity(self) -> np.ndarray:
        """[N, L] bytes each level can hold across steps (0 for caches and scratch)."""
        return np.where(self.resident[None, :], self.capacity, 0.0)


# Fields the models read as one value for every design; a study cannot vary them yet (a
# package field or the spares policy given once is applied to the spec: dse.spec.assumptions).
_FIXED = ("technology.as_built.", "technology.package.")


class _Values:
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
        """[N] values of `path`: the override, else `default` (the spec's value; NaN for
        None), which follows the clock if the spec gives it per cycle."""
        if path in self.parsed:
            self.read.add(path)
            out = np.broadcast_to(self.parsed[path].ravel(), (self.n,)).astype(float)
            return out * self.clock if path in self.per_cycle else out
        out = np.full(self.n, np.nan if default is None else float(default))
        if path in self.spec.per_cycle and "compute.clock" in self.parsed:
            out = out * self.clock_ratio
        return out

    def check_all_read(self) -> None:
        for path in self.parsed:
            if path not in self.read:
                raise DseError("no model reads this field, so varying it "
                               "would change nothing", field=path, domain="design",
                               rule=UNREAD)

    def finite(self, what: str, values: np.ndarray) -> None:
        if not np.all(np.isfinite(values)):
            raise DseError(f"{what} overflows for some designs (beyond the range of a "
                           "float); check the values given", domain="design")


# The rule of the error for a varied field no model reads (dse.report.hardware_view marks
# such a field by it, not by the words).
UNREAD = "a field a model reads"


def _in_range(path: str, term: Term, values: np.ndarray) -> None:
    """The magnitudes YAML accepts (README, "Input limits"): a quantity within
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


def _tile(v: _Values, c: Compute) -> tuple[int, int, int] | np.ndarray | None:
    """The native tile: the spec's (m, n, k), or [N, 3] where overrides vary it."""
    paths = [f"compute.matrix.tile.{d}" for d in "mnk"]
    spec_tile = (c.matrix.tile.m, c.matrix.tile.n, c.matrix.tile.k) if c.matrix.tile else None
    if not any(v.given(p) for p in paths):
        return spec_tile
    if spec_tile is None and not all(v.given(p) for p in paths):
        raise DseError("the spec gives no native tile; give m, n "
                       "and k", field="compute.matrix.tile", domain="design")
    return np.stack([v.get(p, spec_tile[j] if spec_tile else None)
                     for j, p in enumerate(paths)], axis=1)


def _slice_scale(v: _Values, spec: HardwareSpec, lv: MemoryLevel, scale: dict[str, np.ndarray]
                 ) -> np.ndarray:
    """The slice count of each design of level `lv` ([N]; 0 where the level gives no
    slices), and the factors it puts on the level's capacity and bandwidth (into `scale`,
    where neither they nor the slices are given; a given `slices` scales them through
    COUPLED). The rule (README, "Caches as slices"): a slice keeps the size and bandwidth
    the spec gives it (capacity / slices, bandwidth / slices). A design that changes the
    capacity changes the slice count at that size, rounded to whole slices (at least one),
    so its capacity is as given and its bandwidth follows the slices, as adding slices to a
    floorplan does; with `slices_per: stack`, a design that changes the HBM stacks and
    not this level's capacity scales the slices with the stacks (memory partitions), and
    capacity and bandwidth follow."""
    at = f"memory.{lv.name}"
    if lv.slices is None:
        return v.get(f"{at}.slices", 0) if v.given(f"{at}.slices") else np.zeros(v.n)
    if v.given(f"{at}.slices"):
        return v.get(f"{at}.slices", None)
    if v.given(f"{at}.capacity"):
        count = np.maximum(1.0, np.round(v.get(f"{at}.capacity", None) / lv.slice_capacity()))
    elif lv.slices_per == "stack" and (hbm := next(
            (m for m in spec.memory if m.stacks is not None), None)) is not None \
            and v.given(f"memory.{hbm.name}.stacks"):
        count = np.maximum(1.0, np.round(lv.slices * v.get(f"memory.{hbm.name}.stacks", None)
                                         / hbm.stacks))
        scale.setdefault("capacity", count / lv.slices)
    else:
        return np.full(v.n, float(lv.slices))
    if not v.given(f"{at}.bandwidth"):
        scale["bandwidth"] = count / lv.slices
    return count


def _generation(v: _Values, lv: MemoryLevel) -> np.ndarray:
    """[N] catalogue index of level `lv`'s generation (-1: none). A design may change it
    within the level's family (an HBM level among HBM generations: its stacks stay stacks)."""
    at = f"memory.{lv.name}.generation"
    if not v.given(at):
        return np.full(v.n, float(catalogue().index(lv.generation)) if lv.generation
                       else -1.0)
    cat = catalogue()
    if lv.kind != "dram" or lv.interface is None:
        raise DseError(f"level '{lv.name}' is not a DRAM level with an interface",
                       field=at, domain="design")
    family = interface_family(lv.interface) or lv.interface
    gen = v.get(at, None)
    wrong = [name for name in dict.fromkeys(cat.names[int(g)] for g in gen)
             if cat.family_of(name) != family]
    if wrong:
        same = [k for k in cat.names if cat.family_of(k) == family]
        raise DseError(f"{wrong[0]} is a {cat.family_of(wrong[0])} generation and "
                       f"level '{lv.name}' is {family} memory; expected one of: "
                       f"{', '.join(same) or 'none in the catalogue'}", field=at, domain="design")
    return gen


def design_batch(spec: HardwareSpec, overrides: Mapping[str, object] | None = None
                 ) -> DesignBatch:
    """The designs `spec` with each override applied. All override arrays must have the same
    length N (scalars broadcast); no overrides gives one design. Bad paths or values raise
    DseError with one line."""
    if overrides is not None and not isinstance(overrides, dict):
        raise DseError(f"overrides: expected a mapping of dotted paths to values, found a "
                       f"{type(overrides).__name__}")
    # a technology-level assumption (package, spares) is the spec's: one value, applied to it
    spec, rest = assumptions.split(spec, dict(overrides or {}))
    assumed = assumptions.values_of(spec, [k for k in overrides or {} if k not in rest])
    v = _Values(spec, rest)
    n, c = v.n, spec.compute
    units_ = v.get("compute.units", c.units)
    clock = v.clock

    def engine(name: str) -> dict[str, np.ndarray]:
        eng = getattr(c, name)
        out: dict[str, np.ndarray] = {}
        for p in PRECISIONS:
            per_unit = eng.peak_per_unit.get(p) if eng else None
            fixed = eng.peak.get(p) if eng else None
            pu_path = f"compute.{name}.peak_per_unit.{p}"
            fx_path = f"compute.{name}.peak.{p}"
            if v.given(pu_path) and v.given(fx_path):
                raise DseError(f"give the {p} peak one way, per unit or "
                               "as a chip total", field=pu_path, domain="design")
            if v.given(pu_path) or (per_unit is not None and not v.given(fx_path)):
                if c.clock is None and not v.given("compute.clock"):
                    raise DseError("a per-cycle peak needs compute.clock",
                                   field=pu_path, domain="design")
                with np.errstate(over="ignore"):  # an overflow is reported just below
                    out[p] = v.get(pu_path, per_unit) * units_ * clock
            elif v.given(fx_path) or fixed is not None:
                out[p] = v.get(fx_path, fixed)
            if p in out:
                v.finite(f"the {name} peak at {p}", out[p])
        return out

    matrix_peak, vector_peak = engine("matrix"), engine("vector")
    ach = c.matrix.achievable
    base_frac = v.get("compute.matrix.achievable.fraction", ach.fraction if ach else 1.0)
    matrix_fraction = {}
    for p in PRECISIONS:
        own = v.get(f"compute.matrix.achievable.per_precision.{p}",
                    ach.per_precision.get(p) if ach else None)  # type: ignore[call-overload]
        matrix_fraction[p] = np.where(np.isnan(own), base_frac, own)
    matrix_typical = v.get("compute.matrix.achievable.typical", ach.typical if ach else None)

    cap_unit, bw_unit, frac, stacks, channels, gfrac, grain = [], [], [], [], [], [], []
    slices, generation = [], []
    for lv in spec.memory:
        at = f"memory.{lv.name}"
        scale: dict[str, np.ndarray] = {}  # effect -> factor of its coupled cause
        gen = _generation(v, lv)
        generation.append(gen)
        for cause, effects in COUPLED.items():
            if not v.given(f"{at}.{cause}"):
                continue
            if cause == "slices" and not (lv.kind in ON_CHIP_KINDS and lv.scope == "shared"):
                raise DseError(f"level '{lv.name}' is not a shared on-chip "
                               "level (an L2 or last-level cache)",
                               field=f"{at}.slices", domain="design")
            if cause == "stacks" and lv.interface not in HBM_INTERFACES:
                raise DseError(f"level '{lv.name}' is not an HBM level",
                               field=f"{at}.stacks", domain="design")
            if cause == "channels" and lv.interface not in CHANNEL_INTERFACES:
                raise DseError(f"level '{lv.name}' has no DDR, LPDDR or "
                               "GDDR interface", field=f"{at}.channels", domain="design")
            old = getattr(lv, cause)
            if old is None and not all(v.given(f"{at}.{e}") for e in effects):
                raise DseError(f"'{lv.name}' gives no {cause} to scale "
                               f"its {' and '.join(effects)} from; give them too",
                               field=f"{at}.{cause}", domain="design")
            if old is not None:
                factor = v.get(f"{at}.{cause}", None) / old
                scale.update({e: factor for e in effects if not v.given(f"{at}.{e}")})
        n_slices = _slice_scale(v, spec, lv, scale)
        slices.append(n_slices)
        if v.given(f"{at}.generation"):
            # the generation sets the figures per unit: units x the catalogue's, unless given
            cat = catalogue()
            count = (v.get(f"{at}.stacks", lv.stacks) if lv.stacks is not None else
                     v.get(f"{at}.channels", lv.channels) if lv.channels is not None else
                     np.ones(n))
            idx = gen.astype(int)
            for effect, table in (("capacity", [g.capacity for g in cat.generations.values()]),
                                  ("bandwidth", [g.bandwidth for g in cat.generations.values()])):
                if not v.given(f"{at}.{effect}"):  # a value given as well wins
                    scale[effect] = count * np.asarray(table)[idx] / getattr(lv, effect)
        cap_unit.append(v.get(f"{at}.capacity", lv.capacity) * scale.get("capacity", 1.0))
        bw_unit.append(v.get(f"{at}.bandwidth", lv.bandwidth) * scale.get("bandwidth", 1.0))
        frac.append(v.get(f"{at}.achievable.fraction",
                          lv.achievable.fraction if lv.achievable else 1.0))
        stated = lv.gather.fraction if lv.gather else None
        # the gather fraction follows a --set streaming fraction unless the level states its own
        gfrac.append(v.get(f"{at}.gather.fraction", stated) if stated is not None
                     or v.given(f"{at}.gather.fraction") else
                     frac[-1] * (lv.gather_fraction() / (lv.achievable.fraction
                                                         if lv.achievable else 1.0)))
        grain.append(v.get(f"{at}.gather.granularity", lv.gather_granularity()))
        stacks.append(v.get(f"{at}.stacks", lv.stacks or 0))
        channels.append(v.get(f"{at}.channels", lv.channels or 0))
    per_unit = np.array([lv.scope == "per_unit" for lv in spec.memory])
    mult = np.where(per_unit[None, :], units_[:, None], 1.0)
    cap_u = np.stack(cap_unit, axis=1)
    peak_bandwidth = np.stack(bw_unit, axis=1) * mult
    bandwidth = peak_bandwidth * np.stack(frac, axis=1)
    gather_bandwidth = peak_bandwidth * np.stack(gfrac, axis=1)
    gather_granularity = np.stack(grain, axis=1)
    v.finite("a memory level's capacity or bandwidth", cap_u * mult)
    v.finite("a memory level's bandwidth", peak_bandwidth)

    ic = spec.interconnect
    hl = ic.host_link if ic else None
    tech = spec.technology
    batch = DesignBatch(
        spec=spec, n=n, units=units_, clock=clock,
        matrix_peak=matrix_peak, vector_peak=vector_peak, matrix_fraction=matrix_fraction,
        matrix_typical=np.broadcast_to(matrix_typical, (n,)).astype(float),
        tile=_tile(v, c),
        register_file=(v.get("compute.matrix.register_file", c.matrix.register_file)
                       if v.given("compute.matrix.register_file") else c.matrix.register_file),
        blocks=tuple(c.matrix.blocks.shapes()) if c.matrix.blocks else (),
        align_bytes=v.get("compute.matrix.alignment.bytes",
                          c.matrix.alignment.bytes if c.matrix.alignment else None),
        align_slowdown=v.get("compute.matrix.alignment.slowdown",
                             c.matrix.alignment.slowdown if c.matrix.alignment else 1.0),
        op_overhead=v.get("compute.op_overhead", fixed_cost(spec, "compute.op_overhead")),
        level_names=tuple(lv.name for lv in spec.memory),
        level_kinds=tuple(lv.kind for lv in spec.memory),
        resident=np.array([lv.holds_resident for lv in spec.memory]),
        per_unit=per_unit, stacks=np.stack(stacks, axis=1), channels=np.stack(channels, axis=1),
        slices=np.stack(slices, axis=1), generation=np.stack(generation, axis=1),
        peak_bandwidth=peak_bandwidth,
        capacity=cap_u * mult, unit_capacity=cap_u, bandwidth=bandwidth,
        gather_bandwidth=gather_bandwidth, gather_granularity=gather_granularity,
        link_bandwidth=v.get("interconnect.link_bandwidth",
                             (ic.link_bandwidth or 0.0) if ic else 0.0),
        links=v.get("interconnect.links", ic.links if ic else 0),
        link_latency=v.get("interconnect.latency", fixed_cost(spec, "interconnect.latency")),
        link_fraction=v.get("interconnect.achievable.fraction",
                            ic.achievable.fraction if ic and ic.achievable else 1.0),
        collective_overhead=v.get("interconnect.collective_overhead",
                                  fixed_cost(spec, "interconnect.collective_overhead")),
        scale_out_bandwidth=v.get("interconnect.scale_out_bandwidth",
                                  (ic.scale_out_bandwidth or 0.0) if ic else 0.0),
        scale_out_latency=v.get("interconnect.scale_out_latency",
                                fixed_cost(spec, "interconnect.scale_out_latency")),
        tdp=v.get("tdp", spec.tdp),
        matrix_energy={p: v.get(f"power.matrix_energy.{p}", e)
                       for p, e in (spec.power.matrix_energy.items() if spec.power else ())},
        active_per_unit=v.get("power.active_per_unit",
                              (spec.power.active_per_unit or 0.0) if spec.power else None),
        dies=v.get("technology.dies", tech.dies if tech else 1),
        lanes_per_link=v.get("interconnect.lanes_per_link", ic.lanes_per_link if ic else None),
        host_link_bandwidth=v.get("interconnect.host_link.bandwidth",
                                  hl.bandwidth if hl else 0.0),
        host_link_lanes=v.get("interconnect.host_link.lanes", hl.lanes if hl else None),
        topology=ic.topology if ic else None,
        chips_per_node=(v.get("interconnect.chips_per_node", ic.chips_per_node)
                        if ic and v.given("interconnect.chips_per_node")
                        else (ic.chips_per_node if ic else 1)),
        overrides={k: np.broadcast_to(a.ravel(), (n,)) for k, a in v.parsed.items()},
        assumed=tuple(assumed.items()),
    )
    if "interconnect.links" in v.parsed and (ic is None or ic.link_bandwidth is None) \
            and not v.given("interconnect.link_bandwidth") and np.any(batch.links > 0):
        raise DseError("links need interconnect.link_bandwidth",
                       field="interconnect.links", domain="design")
    v.check_all_read()
    return batch
