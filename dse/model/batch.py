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

from dse.errors import DseError
from dse.model.memory_levels import memory_arrays
from dse.model.overrides import Values
from dse.spec import assumptions
from dse.spec.catalogue import Generation, catalogue
from dse.spec.hardware import (
    ON_CHIP_KINDS,
    PRECISIONS,
    Compute,
    HardwareSpec,
    Interconnect,
)
from dse.spec.hardware_costs import fixed_cost


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
    scale_out_bandwidth: np.ndarray  # [N] B/s per chip per direction (all its NICs)
    scale_out_fraction: np.ndarray  # [N] achieved share of the scale-out line rate
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
    # the software stack's attention tables for this chip (dse.spec.stack.Attention; None:
    # attention at the GEMM fraction): dse.model.attention
    attention: Any = None

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

    def take(self, idx: np.ndarray | slice) -> DesignBatch:
        """The designs at `idx` of this batch (repeats allowed); a slice takes views (a
        chunk of designs costs no copy)."""
        fields = {}
        for name in self.__dataclass_fields__:
            v = getattr(self, name)
            if isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[0] == self.n \
                    and name not in ("resident", "per_unit"):
                v = v[idx]
            elif isinstance(v, dict):
                v = {key: a[idx] for key, a in v.items()}
            fields[name] = v
        fields["n"] = len(range(self.n)[idx]) if isinstance(idx, slice) else len(idx)
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


def _tile(v: Values, c: Compute) -> tuple[int, int, int] | np.ndarray | None:
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


def _peak(v: Values, c: Compute, name: str, units_: np.ndarray) -> dict[str, np.ndarray]:
    """[N] peak FLOP/s of engine `name` (matrix, vector) at each precision it has: a
    per-unit peak per cycle x units x clock, or a chip total."""
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
                out[p] = v.get(pu_path, per_unit) * units_ * v.clock
        elif v.given(fx_path) or fixed is not None:
            out[p] = v.get(fx_path, fixed)
        if p in out:
            v.finite(f"the {name} peak at {p}", out[p])
    return out


def _fractions(v: Values, c: Compute) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The matrix engines' achievable fraction of peak per precision ([N] each: its own,
    else the chip's) and their typical share on a model's layers ([N], NaN: none given)."""
    ach = c.matrix.achievable
    base_frac = v.get("compute.matrix.achievable.fraction", ach.fraction if ach else 1.0)
    matrix_fraction = {}
    for p in PRECISIONS:
        own = v.get(f"compute.matrix.achievable.per_precision.{p}",
                    ach.per_precision.get(p) if ach else None)  # type: ignore[call-overload]
        matrix_fraction[p] = base_frac if np.isnan(own).all() else \
            np.where(np.isnan(own), base_frac, own)
    return matrix_fraction, v.get("compute.matrix.achievable.typical",
                                  ach.typical if ach else None)


def _matrix_energy(v: Values, spec: HardwareSpec) -> dict[str, np.ndarray]:
    """[N] J per matrix FLOP at each precision the file states or an override gives (a
    precision the file leaves out can be given too: --set power.matrix_energy.fp8=...)."""
    stated: dict[str, float] = {str(k): e for k, e in spec.power.matrix_energy.items()} \
        if spec.power else {}
    return {p: v.get(f"power.matrix_energy.{p}", stated.get(p)) for p in PRECISIONS
            if p in stated or v.given(f"power.matrix_energy.{p}")}


def _out(ic: Interconnect | None) -> float:
    """The achieved fraction of the scale-out line rate the spec gives (1: none given)."""
    return ic.scale_out_achievable.fraction if ic and ic.scale_out_achievable else 1.0


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
    v = Values(spec, rest)
    n, c = v.n, spec.compute
    units_ = v.get("compute.units", c.units)
    clock = v.clock

    matrix_peak, vector_peak = _peak(v, c, "matrix", units_), _peak(v, c, "vector", units_)
    matrix_fraction, matrix_typical = _fractions(v, c)

    mem = memory_arrays(v, spec, units_)

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
        per_unit=mem.per_unit, stacks=mem.stacks, channels=mem.channels,
        slices=mem.slices, generation=mem.generation,
        peak_bandwidth=mem.peak_bandwidth,
        capacity=mem.capacity, unit_capacity=mem.unit_capacity, bandwidth=mem.bandwidth,
        gather_bandwidth=mem.gather_bandwidth, gather_granularity=mem.gather_granularity,
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
        scale_out_fraction=v.get("interconnect.scale_out_achievable.fraction", _out(ic)),
        scale_out_latency=v.get("interconnect.scale_out_latency",
                                fixed_cost(spec, "interconnect.scale_out_latency")),
        tdp=v.get("tdp", spec.tdp),
        matrix_energy=_matrix_energy(v, spec),
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
