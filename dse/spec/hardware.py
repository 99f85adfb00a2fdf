"""Hardware description schema: compute engines, memory hierarchy, interconnect, technology.

One YAML file describes one chip (or one package, for multi-die parts). Every quantity has
a unit in YAML and is an SI float here (area in mm^2). Rates and on-chip capacities may be
given per compute unit; `chip_*` helpers give the chip totals. This module does no I/O.
Its parts: the compute engines in dse.spec.compute, a memory level in
dse.spec.memory_level, the vocabulary (precisions, kinds, interfaces) in
dse.spec.hardware_terms; here the interconnect, technology, power and the chip itself (the
`X as X` imports re-export the parts that the model and tests import from here).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ModelWrapValidatorHandler, PrivateAttr, model_validator

from dse import units
from dse.spec.compute import Achievable
from dse.spec.compute import Compute as Compute
from dse.spec.fixed_costs import FIXED_COST_DEFAULTS, Spares, fixed_cost_default
from dse.spec.hardware_terms import CHANNEL_INTERFACES as CHANNEL_INTERFACES
from dse.spec.hardware_terms import HBM_INTERFACES as HBM_INTERFACES
from dse.spec.hardware_terms import ON_CHIP_KINDS as ON_CHIP_KINDS
from dse.spec.hardware_terms import PRECISIONS as PRECISIONS
from dse.spec.hardware_terms import Fabric, Interface, Precision, Topology
from dse.spec.hardware_terms import interface_family as interface_family
from dse.spec.memory_level import GATHER_TO_STREAM as GATHER_TO_STREAM
from dse.spec.memory_level import MemoryLevel as MemoryLevel
from dse.spec.types import (
    Area,
    Bandwidth,
    Bytes,
    EnergyPerOp,
    Power,
    Spec,
    Time,
    TimeOrZero,
)


class HostLink(Spec):
    """Link between the chip and its host CPU."""

    name: str | None = None
    """e.g. "PCIe Gen5 x16"."""
    bandwidth: Bandwidth
    """Per direction, B/s."""
    latency: Time | None = None
    """Latency of a transfer over the link, s; documented only (offloaded state moves at the
    link's bandwidth, its latency is not timed)."""
    interface: Interface | None = None
    """pcie4, pcie5, pcie6, cxl or nvlink-c2c (area: PCIe or SerDes lanes; energy per byte).
    Omitted: PCIe."""
    lanes: int | None = Field(default=None, gt=0)
    """Lanes (area model); omitted: bandwidth / the node's lane rate for the interface."""


class Interconnect(Spec):
    """Chip-to-chip (scale-up) links, the scale-out network and the host link."""

    name: str | None = None
    """e.g. "NVLink 4", "ICI", "Infinity Fabric"."""
    links: int = Field(ge=0)
    """Number of chip-to-chip links on the chip (0: none)."""
    link_bandwidth: Bandwidth | None = None
    """Bandwidth of one link, per direction, B/s."""
    latency: TimeOrZero | None = None
    """Latency of one chip-to-chip hop (one step of a ring collective), seconds."""
    topology: Topology | None = None
    """How chips in a node connect: switch (NVSwitch), fully_connected (a direct link to
    every peer), ring, torus2d, torus3d, mesh (2-D grid)."""
    chips_per_node: int = Field(default=1, gt=0)
    """The scale-up domain: chips reachable over the scale-up links (an NVLink/NVSwitch
    node, an xGMI platform, a TPU pod's ICI torus). A collective's ranks within it
    communicate over the links; beyond it, over the scale-out network."""
    scale_out_bandwidth: Bandwidth | None = None
    """Network bandwidth per chip to other domains, per direction, B/s: all of the chip's
    scale-out NICs together (`scale_out_nics` x the NIC line rate)."""
    scale_out_nics: int | None = Field(default=None, gt=0)
    """Scale-out NICs (network ports) per chip (DGX H100: one 400 Gb/s ConnectX-7 per GPU;
    Gaudi 2: three on-die 100 GbE ports); their bandwidth together is
    `scale_out_bandwidth`. Omitted: one."""
    fabric: Fabric | None = None
    """How the scale-out network joins the domains: rail_optimized, fat_tree or dragonfly
    (dse.spec.hardware_terms.Fabric)."""
    scale_out_achievable: Achievable | None = None
    """Achieved fraction of the scale-out line rate in a large collective (nccl-tests
    multi-node bus bandwidth per NIC over the NIC's line rate), with its source. Omitted:
    the line rate."""
    scale_out_latency: TimeOrZero | None = None
    """Latency of one collective step across the scale-out network, s."""
    collective_overhead: TimeOrZero | None = None
    """Fixed cost of one collective call (all-reduce, all-gather) beyond its per-step
    latency and its bytes: the communication library's launch and synchronisation, s."""
    achievable: Achievable | None = None
    """Achieved fraction of the links' bandwidth in a large collective (e.g. the bus
    bandwidth nccl-tests reports), with its source."""
    host_link: HostLink | None = None
    lanes_per_link: int | None = Field(default=None, gt=0)
    """SerDes lanes per link (area model; NVLink 3: 4, NVLink 4: 2); omitted: the link
    bandwidth over the node's SerDes lane rate."""

    @model_validator(mode="after")
    def _links(self) -> Interconnect:
        if self.links > 0 and (self.link_bandwidth is None or self.topology is None):
            raise ValueError("links > 0 needs link_bandwidth and topology")
        if self.links == 0 and self.chips_per_node > 1:
            raise ValueError("chips_per_node > 1 needs chip-to-chip links (links > 0)")
        if self.scale_out_bandwidth is None and (
                self.scale_out_nics is not None or self.fabric is not None
                or self.scale_out_achievable is not None):
            raise ValueError("scale_out_nics, fabric and scale_out_achievable describe the "
                             "scale-out network: they need scale_out_bandwidth")
        return self

    @property
    def chip_bandwidth(self) -> float:
        """Total chip-to-chip bandwidth of the chip per direction, B/s (0 without links)."""
        return self.links * (self.link_bandwidth or 0.0)


class LevelBuilt(Spec):
    """A memory level as the die is built, where the product enables less."""

    capacity: Bytes | None = None
    """Capacity on the die (per unit if the level is per_unit)."""
    stacks: int | None = Field(default=None, gt=0)
    """HBM PHYs on the die."""
    channels: int | None = Field(default=None, gt=0)
    """DRAM channels the die has PHYs for."""


class AsBuilt(Spec):
    """What the die carries beyond what the product enables (spares fused off for yield).
    The area model charges the die as built; when a study varies a count, the spares scale
    with it in the same proportion."""

    units: int | None = Field(default=None, gt=0)
    """Compute units on the die (GA100: 128 SMs, of which an A100 enables 108)."""
    memory: dict[str, LevelBuilt] = {}
    """Per memory level name: capacity, HBM stacks or channels as built."""
    links: int | None = Field(default=None, ge=0)
    """Chip-to-chip links on the die."""


class PackageChoice(Spec):
    """How this design is packaged, where it departs from its node's rules (hwspecs/tech/
    <node>.yaml `package:`); see dse.model.package."""

    packaging: Literal["cowos-s", "cowos-l", "organic"] | None = None
    """Packaging technology; None: cowos-s with HBM, organic without."""
    aspect_ratio: float | None = Field(default=None, ge=1, le=4)
    """Long / short edge of each die; None: the node's default."""
    hbm_edges: int | None = Field(default=None, ge=1, le=4)
    """Die edges that may hold HBM (long edges first); None: the node's default (2)."""
    d2d_bandwidth: Bandwidth | None = None
    """Bandwidth between two adjacent dies (both directions); None: the node's default."""
    in_plane: int | None = Field(default=None, gt=0)
    """Dies side by side on the interposer, where the others are stacked on them (MI300X:
    8 compute dies hybrid-bonded on 4 I/O dies); None: all `dies`. The die-to-die joints
    and the layout are those of the dies in plane, each taking an equal share of the
    modelled silicon."""


class Technology(Spec):
    """Process technology and published physical facts, for the area and power models."""

    node: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    """Process node, naming hwspecs/tech/<node>.yaml (n14, n7, n5, n4 ...)."""
    die_area: Area | None = None
    """Published silicon area of the compute die(s), mm^2 (all dies of the package)."""
    dies: int = Field(default=1, gt=0)
    """Compute dies in the package."""
    transistors: float | None = Field(default=None, gt=0)
    """Published transistor count."""
    as_built: AsBuilt | None = None
    """The die as built, where the product fuses off part of it."""
    package: PackageChoice | None = None
    """Package geometry choices (packaging technology, die aspect, HBM edges)."""
    spares: Literal["as-built", "none"] = "as-built"
    """Spare silicon policy (dse.spec.hardware_costs.spares). as-built: the die carries the
    spares its `as_built` states, or a derived design its base's spare fraction; none: no
    spare silicon, every unit, cache byte, HBM site and link built is enabled (the die is
    smaller and must work whole, so its yield falls)."""
    same_die: bool = False
    """This design is its `base:`'s silicon (another product or bin of the same die): it
    inherits the base's die_area, transistors and as_built. Without it a derived design is
    a new die and inherits none of them."""


class ChipPower(Spec):
    """Dynamic power of the chip's compute at its rated clock (`compute.clock`) and core
    voltage, per chip design: what the DVFS model scales when a TDP forces the clock down
    (see dse.model.power). Derived designs inherit it, so a design with more units at the
    same TDP runs slower clocks rather than drawing more watts."""

    matrix_energy: dict[Precision, EnergyPerOp] = Field(min_length=1)
    """Energy per matrix-engine FLOP at the rated clock, per precision, e.g. {bf16: 0.6
    pJ/FLOP}; a precision not listed costs the listed one's energy scaled by the ratio of
    their peak rates (equal power at peak)."""
    active_per_unit: Power | None = None
    """Power of one compute unit clocked at the rated clock while the chip runs, beyond the
    energy of its operations (instruction issue, schedulers, clock tree): what memory-bound
    work still draws from the cores. None: 0."""
    source: str = Field(min_length=1)
    """How the figures were calibrated (the operating point they reproduce)."""


def with_fixed_costs(spec: HardwareSpec) -> HardwareSpec:
    """`spec` with each omitted fixed cost set to its documented default (in place: the spec
    is the one validation just built), remembering which were estimated."""
    estimated = []
    for section in ("compute", "interconnect"):
        part = getattr(spec, section)
        if part is None:
            continue
        update = {}
        for path in FIXED_COST_DEFAULTS:
            where, key = path.split(".")
            if where == section and getattr(part, key) is None:
                update[key] = fixed_cost_default(path, spec.compute.style).seconds
                estimated.append(path)
        if update:
            object.__setattr__(spec, section, part.model_copy(update=update))
    spec._estimated = frozenset(estimated)
    return spec


class HardwareSpec(Spec):
    """A chip: its compute, memory hierarchy (innermost first), interconnect, technology."""

    name: str = Field(min_length=1)
    """Name of the design; defaults to the file name."""
    source: str = Field(min_length=1)
    """Where the numbers come from (datasheets, papers); required."""
    base: str | None = None
    """Spec this one inherits from (a name or a path); only the keys given here override."""
    vendor: str | None = None
    """Who makes the chip; picks the default software stack (`stacks/`) when a scenario
    names none."""
    description: str | None = None
    """One line on what the chip is, shown by `dse show` and in the list of shipped chips."""
    compute: Compute
    memory: list[MemoryLevel] = Field(min_length=1)
    interconnect: Interconnect | None = None
    technology: Technology | None = None
    tdp: Power | None = None
    """Thermal design power (board or module), W."""
    power: ChipPower | None = None
    """Energy per operation of this chip's compute (calibrated at its TDP); None: calibrated
    at evaluation from the chip's own TDP and achievable GEMM rate (dse.model.power)."""
    _per_cycle: frozenset[str] = PrivateAttr(default_factory=frozenset)
    _estimated: frozenset[str] = PrivateAttr(default_factory=frozenset)
    _base_spares: Spares | None = PrivateAttr(default=None)
    """A derived design's base's spares (dse.spec.hardware_costs.spares), set by the loader."""

    @model_validator(mode="wrap")
    @classmethod
    def _remember_per_cycle(cls, data: object, handler: ModelWrapValidatorHandler[HardwareSpec]
                            ) -> HardwareSpec:
        spec = handler(data)
        if isinstance(data, dict):
            spec._per_cycle = frozenset(_per_cycle_paths(data, ""))
        return spec

    @model_validator(mode="wrap")
    @classmethod
    def _fixed_costs(cls, data: object, handler: ModelWrapValidatorHandler[HardwareSpec]
                     ) -> HardwareSpec:
        spec = handler(data)
        return with_fixed_costs(spec) if isinstance(data, dict) else spec

    @property
    def estimated(self) -> frozenset[str]:
        """Paths of the fixed costs (FIXED_COST_DEFAULTS) this spec omits and is charged the
        documented default for its compute style."""
        return self._estimated

    @property
    def per_cycle(self) -> frozenset[str]:
        """Paths of the quantities this spec gives per cycle other than peak_per_unit
        (`memory.L1.bandwidth` given as "128 B/cycle"): they follow compute.clock when a
        design varies it."""
        return self._per_cycle


def _per_cycle_paths(data: object, prefix: str) -> list[str]:
    """Dotted paths of the per-cycle quantities (other than peak_per_unit) in raw data."""
    out: list[str] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "peak_per_unit":
                continue
            out += _per_cycle_paths(value, f"{prefix}{key}.")
    elif isinstance(data, list):
        for item in data:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                out += _per_cycle_paths(item, f"{prefix}{item['name']}.")
    elif isinstance(data, str) and units.is_per_cycle(data):
        out.append(prefix.rstrip("."))
    return out


def derived_figures(spec: HardwareSpec) -> dict[str, Any]:
    """Figures a reader wants at a glance, SI units: chip peaks per precision, per-level
    totals, and the ridge point (FLOP per byte) of every level at every precision."""
    units = spec.compute.units
    matrix = spec.compute.matrix_peak()
    vector = spec.compute.vector_peak()
    peak = dict(vector)
    peak.update({p: max(v, peak.get(p, 0.0)) for p, v in matrix.items()})
    levels = []
    for level in spec.memory:
        bw = level.chip_bandwidth(units)
        levels.append({
            "name": level.name,
            "kind": level.kind,
            "capacity_bytes": level.chip_capacity(units),
            "bandwidth_bytes_per_s": bw,
            "ridge_flop_per_byte": {p: v / bw for p, v in peak.items()},
        })
    return {
        "matrix_peak_flop_per_s": matrix,
        "vector_peak_flop_per_s": vector,
        "peak_flop_per_s": {p: peak[p] for p in PRECISIONS if p in peak},
        "levels": levels,
        "interconnect_bytes_per_s": spec.interconnect.chip_bandwidth if spec.interconnect else 0.0,
    }
