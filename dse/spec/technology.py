"""Process-node schema: the constants the area and power models read, one file per node
(`hwspecs/tech/<node>.yaml`).

Every group of constants carries `source` (where the numbers come from) and `includes`
(what silicon or what energy they cover), so a reader can trace each figure in a
breakdown to a published fact. Values are SI floats after loading (area in mm^2, length in
mm, energy in J). This module does no I/O.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field, model_validator

from dse.spec.hardware_terms import Interface, Precision
from dse.spec.types import (
    Area,
    AreaPerByte,
    AreaPerRate,
    Bandwidth,
    Bytes,
    Cost,
    CostOrZero,
    CostPerArea,
    CostPerByte,
    EnergyPerByte,
    EnergyPerOp,
    Frequency,
    Length,
    PerArea,
    PowerDensity,
    Spec,
)

Ratio = Annotated[float, Field(gt=0)]
Text = Annotated[str, Field(min_length=1)]
CoreStyle = Literal["gpu", "array"]
CORE_STYLES = ("gpu", "array")
# Memory kinds that have a read energy per byte in a node file.
ENERGY_KINDS = ("sram", "cache", "hbm", "lpddr", "ddr", "gddr", "host", "c2c")
INTERFACES: tuple[str, ...] = get_args(Interface)


class Documented(Spec):
    """A group of constants with its provenance."""

    includes: Text
    """What the constants cover (which circuits, which overheads)."""
    source: Text
    """Published facts they derive from, and how."""


class ComputeArea(Documented):
    """Area of compute per unit of dense peak rate."""

    per_rate: AreaPerRate
    """mm^2 per FLOP/s at the reference precision (written e.g. "0.8 mm2/TFLOPS")."""
    reference: Precision
    """The precision `per_rate` is quoted at (bf16 for matrix engines, fp32 for vector)."""
    clock: Frequency
    """Clock at which `per_rate` holds. Area follows the MACs built, not the rate, so a
    design at clock f pays rate x per_rate x (clock / f): a slower clock needs more MACs."""
    ratio: dict[Precision, Ratio] = {}
    """Area per FLOP/s at other precisions relative to the reference. An engine is sized for
    its most expensive precision: area = max over its precisions of rate x per_rate x ratio.
    Precisions not listed here (and not the reference) are taken to reuse the datapath at no
    extra area."""

    def factor(self, precision: str) -> float | None:
        """Relative area per FLOP/s at `precision`, None if it adds no area."""
        if precision == self.reference:
            return 1.0
        return self.ratio.get(precision)  # type: ignore[call-overload]


class UnitArea(Documented):
    """Area per compute unit, whatever its rate."""

    area: Area
    """mm^2 per unit."""


class Compute(Spec):
    """Area of compute per dense matrix FLOP/s, by the kind of core."""

    gpu: ComputeArea
    """GPU-style cores (NVIDIA SM, AMD CU): matrix units plus SIMT vector ALUs, register
    files, schedulers, load/store and special-function units; the core's SRAM (L1/shared
    memory) is charged separately as SRAM. Per dense matrix FLOP/s."""
    array: ComputeArea
    """Dedicated matrix engines (systolic or dot-product arrays) with their operand staging
    and accumulators, fed by software-managed memories. Per dense matrix FLOP/s."""
    array_unit: UnitArea
    """Per processing element of an array-style chip: its control cores, DMA and router."""
    vector: ComputeArea
    """Vector/SIMD units beside matrix arrays (array-style designs only; a GPU core's
    vector ALUs are inside `gpu`). Per FLOP/s of the vector units."""


class SramArea(Documented):
    """On-chip SRAM at macro level, periphery included, per byte of capacity."""

    scratchpad: AreaPerByte
    """Software-managed SRAM (kind sram): bit cells, sense amps, decoders, banking."""
    cache: AreaPerByte
    """Hardware-managed cache (kind cache): the data arrays plus tags, ports, controllers
    and the crossbar slices that serve them."""


class Phy(Documented):
    """One off-chip interface instance: PHY plus its controller."""

    area: Area
    """mm^2 per instance (an HBM stack, a DRAM channel, a SerDes or PCIe lane)."""
    edge: Length
    """Die edge (shoreline) one instance needs, mm."""
    rate: Bandwidth | None = None
    """Per-direction bandwidth of one lane (SerDes, PCIe), B/s: sets how many lanes a
    link of a given bandwidth needs when the hardware spec does not say."""


class PhyArea(Spec):
    """Each off-chip interface's PHY and controller, per instance: area, die edge, lane
    rate, each with its source."""

    hbm: Phy
    """Per HBM stack (1024-bit interface)."""
    lpddr: Phy
    """Per 16-bit LPDDR channel."""
    ddr: Phy
    """Per 64-bit DDR channel (one DIMM channel)."""
    gddr: Phy
    """Per 32-bit GDDR device interface."""
    serdes: Phy
    """Per chip-to-chip SerDes lane (one transmit and one receive pair)."""
    pcie: Phy
    """Per PCIe (or CXL) lane."""

    @model_validator(mode="after")
    def _rates(self) -> PhyArea:
        for name in ("serdes", "pcie"):
            if getattr(self, name).rate is None:
                raise ValueError(f"{name}.rate is needed to size links in lanes")
        return self


class Uncore(Documented):
    """Silicon outside compute, SRAM and PHYs: on-chip network, I/O and control."""

    fraction: float = Field(ge=0, lt=1)
    """Share of the die it takes: uncore = fraction x total (so total = rest / (1 - f))."""
    fixed: Area | None = None
    """A fixed term added to the rest before the fraction is applied, mm^2."""


class OpEnergy(Documented):
    """Dynamic energy per operation of one kind of compute."""

    per_op: dict[Precision, EnergyPerOp]
    """Per FLOP (or OP) at each precision; a precision not listed uses the next one the
    performance model would fall back to (fp16 -> bf16 ...)."""

    @model_validator(mode="after")
    def _bf16(self) -> OpEnergy:
        if "bf16" not in self.per_op and "fp16" not in self.per_op:
            raise ValueError("per_op needs an energy at bf16 or fp16 at least")
        return self


class ByteEnergy(Documented):
    """Dynamic energy per byte moved at each kind of memory or link."""

    per_byte: dict[str, EnergyPerByte]
    """Keys: sram, cache, hbm, lpddr, ddr, gddr, host (PCIe/CXL), c2c (chip-to-chip links,
    per byte sent); a DRAM interface name (hbm2e, lpddr5x ...) overrides its family."""

    @model_validator(mode="after")
    def _kinds(self) -> ByteEnergy:
        known = (*ENERGY_KINDS, *INTERFACES)
        unknown = [k for k in self.per_byte if k not in known]
        missing = [k for k in ENERGY_KINDS if k not in self.per_byte]
        if unknown:
            raise ValueError(f"unknown memory kind(s) {', '.join(unknown)} in per_byte; "
                             f"expected {', '.join(ENERGY_KINDS)} or an interface name")
        if missing:
            raise ValueError(f"per_byte needs an energy for {', '.join(missing)}")
        return self


class StaticPower(Documented):
    """Power drawn whatever the chip does: leakage and idle clocking."""

    per_area: PowerDensity
    """W per mm^2 of die."""


class Energy(Spec):
    """Dynamic energy per operation and per byte moved, and static power."""

    gpu: OpEnergy
    """Matrix FLOPs on GPU-style cores (register-file operand traffic, scheduling and the
    core's clocking included)."""
    array: OpEnergy
    """Matrix FLOPs on dedicated arrays (operand staging and accumulation included)."""
    vector: OpEnergy
    """FLOPs on vector units (elementwise, softmax, norms), instruction overhead included."""
    memory: ByteEnergy
    static: StaticPower


class Wafer(Documented):
    """What a wafer of this node costs and how many good dies it gives (dse.model.cost)."""

    price: Cost
    """Foundry sale price of one processed wafer, USD (an estimate with its date)."""
    diameter: Length = 300.0
    """Wafer diameter, mm."""
    edge_exclusion: Length
    """Ring at the wafer's edge where no die is good, mm."""
    defect_density: PerArea
    """Killer defects per area (written "0.1 /cm2"; internally per mm^2)."""
    clustering: float = Field(ge=0.05, le=1000)
    """Clustering parameter alpha of the negative-binomial yield model: small alpha, defects
    bunch together (yield above Poisson's); large alpha approaches Poisson. Published fits
    lie between 0.3 and 5 (Cunningham 1990); 0.05-1000 is accepted."""

    @model_validator(mode="after")
    def _usable(self) -> Wafer:
        if 2 * self.edge_exclusion >= self.diameter:
            raise ValueError(f"edge_exclusion ({self.edge_exclusion:g} mm) leaves no usable "
                             f"wafer: it must be below half the diameter "
                             f"({self.diameter / 2:g} mm)")
        return self


class Price(Spec):
    """One price with its provenance."""

    source: Text
    """Where the figure comes from and its date; "estimate" where it is one."""


class MemoryPrice(Price):
    """A DRAM kind's price per capacity."""

    per_byte: CostPerByte
    """USD per byte (written "15 $/GB")."""
    tall: CostPerByte | None = None
    """HBM: the price of a taller stack (12-high), used when a stack holds more than
    `tall_above`."""
    tall_above: Bytes | None = None
    """HBM: capacity per stack above which a stack is taller (e.g. 24 GiB: 8-high 24 Gbit
    dies)."""

    @model_validator(mode="after")
    def _both(self) -> MemoryPrice:
        if (self.tall is None) != (self.tall_above is None):
            raise ValueError("tall and tall_above go together: the taller stack's price and "
                             "the capacity per stack above which it applies")
        return self


class PackagePrice(Price):
    """A packaging technology: what it costs per area and per package, and the share of
    packages that survive assembly (its size limit is the node's package rules')."""

    per_area: CostPerArea
    """USD per mm^2 of interposer (CoWoS) or substrate area (written "0.3 $/mm2")."""
    fixed: CostOrZero
    """USD per package whatever its area: organic substrate, bumping."""
    test: CostOrZero
    """USD per shipped package for final test, burn-in and module assembly (after the
    assembly yield: paid once per good package)."""
    assembly_yield: float = Field(gt=0, le=1)
    """Share of assembled packages that work: dies, memory and package of a failed
    assembly are lost."""


class Market(Spec):
    """Prices that do not depend on the node: memory per capacity by kind, packaging by
    technology (shipped in dse/data/cost.yaml; a node file may give its own `market:`)."""

    date: Text
    """When the prices were gathered."""
    memory: dict[str, MemoryPrice]
    """Keys: DRAM interface names (hbm3, hbm3e, lpddr5x, ddr5, gddr7, cxl ...)."""
    packaging: dict[Literal["cowos-s", "cowos-l", "organic"], PackagePrice]

    @model_validator(mode="after")
    def _kinds(self) -> Market:
        unknown = [k for k in self.memory if k not in INTERFACES]
        if unknown:
            raise ValueError(f"unknown memory interface(s) {', '.join(unknown)}; expected "
                             f"one of {', '.join(INTERFACES)}")
        missing = [k for k in ("cowos-s", "cowos-l", "organic") if k not in self.packaging]
        if missing:
            raise ValueError(f"packaging needs {', '.join(missing)}")
        return self
# --- Package geometry (dse.model.package): die aspect, which edges hold HBM, the stacks'
# footprints, the die-to-die interface and each packaging technology's limit. Kept in its
# own block: cost fields for the same node files live elsewhere.

PACKAGINGS = ("cowos-s", "cowos-l", "organic")
Packaging = Literal["cowos-s", "cowos-l", "organic"]


class StackFootprint(Spec):
    """A DRAM stack's package outline on the interposer, mm."""

    width: Length
    """Along the die edge it faces."""
    depth: Length
    """Away from the die edge."""


class DieToDie(Documented):
    """The die-to-die interface between dies of one package (NV-HBI, Infinity Fabric AP,
    UCIe-A class): one PHY module's rate, edge and area, and the energy of a bit across."""

    rate: Bandwidth
    """Bandwidth of one module, both directions together, B/s."""
    edge: Length
    """Die edge one module takes, mm."""
    area: Area
    """Silicon of one module (PHY, adapter), mm^2."""
    energy: EnergyPerByte
    """Energy per byte sent across, J/B."""
    bandwidth: Bandwidth
    """Default bandwidth between two adjacent dies (both directions), when the hardware
    file does not state technology.package.d2d_bandwidth."""


class PackagingLimit(Documented):
    """One packaging technology: the largest interposer (or substrate) it builds, and
    whether it can carry HBM (which needs an interposer or silicon bridges)."""

    limit: Area
    """Largest interposer (or substrate) it builds, mm^2; a design with HBM whose
    interposer needs more is infeasible (the cost model's reason, a study's reticle
    constraint)."""
    hbm: bool
    """Whether it can carry HBM stacks; a design with HBM on one that cannot is infeasible."""


class PackageRules(Documented):
    """Geometry rules of a package: how a die is shaped and which edges hold what."""

    aspect_ratio: float = Field(ge=1, le=4)
    """Long edge / short edge of each die (default from shipped reticle-class dies)."""
    hbm_edges: int = Field(ge=1, le=4)
    """Edges of a die that may hold HBM stacks, long edges first (2: the two long edges,
    as on GH100/GA100/B200; 4: the whole perimeter)."""
    hbm_overhang: Length | None = None
    """How far a row of stacks may reach past each end of the die edge it faces, mm."""
    footprint: dict[Interface, StackFootprint]
    """Stack outline per HBM interface (hbm2 ... hbm4)."""
    gap: Length
    """Keep-out between neighbouring dies and stacks on the interposer, mm."""
    margin: Length
    """Interposer border beyond the outermost die or stack (seal ring, edge keep-out), mm."""
    d2d: DieToDie
    packaging: dict[Packaging, PackagingLimit]
    """Limits per packaging technology (cowos-s, cowos-l, organic)."""


class TechSpec(Spec):
    """A process node: area and energy constants, each with its source."""

    node: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    """Node name as hardware specs refer to it (n7, n5 ...)."""
    name: Text
    """What the node is (e.g. "TSMC N7 class: N7, N7P, N6")."""
    source: Text
    """The main references of the file."""
    reticle: Area = 858.0
    """Largest die one exposure can print, mm^2 (26 mm x 33 mm)."""
    compute: Compute
    sram: SramArea
    phy: PhyArea
    uncore: Uncore
    energy: Energy
    wafer: Wafer | None = None
    """Wafer price and yield constants; None: the node has no cost model."""
    market: Market | None = None
    """Memory and packaging prices; the loader fills the shipped ones (dse/data/cost.yaml)
    where a node file gives none."""
    package: PackageRules | None = None
    """Package geometry rules (dse.model.package); None: no geometry checks."""
