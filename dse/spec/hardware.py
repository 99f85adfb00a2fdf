"""Hardware description schema: compute engines, memory hierarchy, interconnect, technology.

One YAML file describes one chip (or one package, for multi-die parts). Every quantity has
a unit in YAML and is an SI float here (area in mm^2). Rates and on-chip capacities may be
given per compute unit; `chip_*` helpers give the chip totals. This module does no I/O.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, Field, ModelWrapValidatorHandler, PrivateAttr, model_validator

from dse import units
from dse.spec.fixed_costs import FIXED_COST_DEFAULTS, Spares, fixed_cost_default
from dse.spec.types import (
    Area,
    Bandwidth,
    Bytes,
    EnergyPerOp,
    FlopRate,
    Frequency,
    OpsPerCycle,
    Power,
    Spec,
    Time,
    TimeOrZero,
)

Precision = Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"]
PRECISIONS: tuple[str, ...] = get_args(Precision)
LevelKind = Literal["register", "sram", "cache", "dram", "host"]
LEVEL_KINDS: tuple[str, ...] = get_args(LevelKind)
# Position of each kind in a hierarchy listed innermost first: a level may not sit inside a
# level of a higher rank (no DRAM inside a cache). SRAM scratchpads and caches interleave.
LEVEL_RANK = {"register": 0, "sram": 1, "cache": 1, "dram": 2, "host": 3}
ON_CHIP_KINDS = ("register", "sram", "cache")
Interface = Literal[
    "hbm2", "hbm2e", "hbm3", "hbm3e", "hbm4", "ddr4", "ddr5", "lpddr4x", "lpddr5", "lpddr5x",
    "gddr6", "gddr6x", "gddr7", "cxl", "nvlink-c2c", "pcie4", "pcie5", "pcie6",
]
HBM_INTERFACES = ("hbm2", "hbm2e", "hbm3", "hbm3e", "hbm4")
CHANNEL_INTERFACES = ("ddr4", "ddr5", "lpddr4x", "lpddr5", "lpddr5x", "gddr6", "gddr6x", "gddr7")


def interface_family(interface: str | None) -> str | None:
    """hbm, lpddr, gddr or ddr for a DRAM interface; None for links (pcie, cxl, nvlink-c2c)."""
    if interface in HBM_INTERFACES:
        return "hbm"
    if interface in CHANNEL_INTERFACES:
        return next(f for f in ("lpddr", "gddr", "ddr") if interface.startswith(f))
    return None


Topology = Literal["switch", "fully_connected", "ring", "torus2d", "torus3d", "mesh"]
def _normal(value: float) -> float:
    """Reject denormal floats: a fraction of 1e-320 is a typo, and arithmetic on it turns
    every rate it scales into zero."""
    if 0 < abs(value) < sys.float_info.min:
        raise ValueError(f"expected a normal number, found {value!r} (below the smallest "
                         "normal float)")
    return value


Fraction = Annotated[float, Field(gt=0, le=1), AfterValidator(_normal)]


class Achievable(Spec):
    """Fraction of a datasheet peak that real code reaches on the real chip (hardware plus
    its best library), with the measurement it comes from."""

    fraction: Fraction
    """Achieved / peak, for every precision not listed in `per_precision` (0 < f <= 1)."""
    per_precision: dict[Precision, Fraction] = {}
    """Precision-specific fractions where they were measured separately (e.g. fp8)."""
    source: str = Field(min_length=1)
    """Where the measurement comes from (benchmark, paper, log)."""

    def at(self, precision: str) -> float:
        """The achievable fraction at `precision`."""
        return self.per_precision.get(precision, self.fraction)  # type: ignore[call-overload]


class MatrixAchievable(Achievable):
    """The matrix engines' achievable fractions: `fraction` is the best-shape rate (a shape
    search such as the maximum achievable matmul FLOPS finder), `typical` what a model's
    layer GEMMs get of it."""

    typical: Fraction | None = None
    """Share of the best-shape rate that the GEMMs inside a model reach with the library's
    own kernel choice at their layer shapes (0 < t <= 1); omitted: dse's default
    (dse.model.kernel.TYPICAL), measured on NVIDIA GPUs. A `gemm:MxNxK` microbenchmark runs
    at the best-shape rate."""


# Smallest access a DRAM interface serves, bytes: one burst of one (pseudo-)channel.
# HBM2/2E: 64-bit pseudo-channel x BL4 = 32 B (JESD235); HBM3/3E: 32-bit pseudo-channel x BL8
# = 32 B (JESD238; HBM4 keeps the 32-byte access); DDR4: 64-bit channel x BL8 = 64 B
# (JESD79-4); DDR5: 32-bit subchannel x BL16 = 64 B (JESD79-5); LPDDR4X/5/5X: 16-bit channel
# x BL16 = 32 B (JESD209-4/-5); GDDR6/6X/7: 16-bit channel x BL16 = 32 B (JESD250).
INTERFACE_GRANULARITY = {
    "hbm2": 32.0, "hbm2e": 32.0, "hbm3": 32.0, "hbm3e": 32.0, "hbm4": 32.0,
    "ddr4": 64.0, "ddr5": 64.0, "lpddr4x": 32.0, "lpddr5": 32.0, "lpddr5x": 32.0,
    "gddr6": 32.0, "gddr6x": 32.0, "gddr7": 32.0,
}
# Levels without such an interface: a cache moves whole lines (64 B: the x86 and Arm
# Neoverse line; NVIDIA GPUs' L2 moves 32-byte sectors and their spec files say so); host
# memory reached over a link moves CPU cache lines (64 B); a software-managed scratchpad or
# register file moves exactly the bytes asked for (1 B: no rounding).
KIND_GRANULARITY = {"cache": 64.0, "host": 64.0, "dram": 64.0, "sram": 1.0, "register": 1.0}
# Random row gathers reach less of a DRAM tier's bandwidth than streaming does (every row
# opens its own DRAM page): on an H100 SXM, FBGEMM's gather_along_first_dim moves 2,646 GB/s
# (pytorch/FBGEMM PR #3993, "Add Gather/Scatter related benchmark", H100 80GB SXM5 HBM3) where
# a device-to-device copy moves 2,903 GB/s (the h100-sxm spec's achievable fraction, 0.867):
# 2646 / 2903 = 0.911 of the streaming rate, 0.79 of peak. The ratio is the default for
# every DRAM and host level; caches and scratchpads gather at their streaming rate.
GATHER_TO_STREAM = 2646.0 / 2903.0


class GatherAccess(Spec):
    """How a level serves random row reads (embedding gathers): the smallest access it moves
    and the share of its peak bandwidth such reads reach, with the measurement it comes
    from. Either may be left out for the documented default."""

    granularity: Bytes | None = None
    """Smallest access, bytes: a gathered row is rounded up to whole accesses (default by
    interface, else by level kind: INTERFACE_GRANULARITY, KIND_GRANULARITY)."""
    fraction: Fraction | None = None
    """Achieved / peak bandwidth for random reads of large rows (default: the streaming
    fraction x GATHER_TO_STREAM for DRAM and host levels, the streaming fraction otherwise)."""
    source: str | None = None
    """Where the figures come from."""

    @model_validator(mode="after")
    def _granularity(self) -> GatherAccess:
        if self.granularity is not None and self.granularity < 1:
            raise ValueError("granularity is at least 1 byte")
        return self


class Tile(Spec):
    """Native tile of the matrix engine, in elements: a GEMM of shape M x N x K runs as
    ceil(M/m) * ceil(N/n) * ceil(K/k) tiles, so small or ragged shapes waste the array."""

    m: int = Field(gt=0)
    n: int = Field(gt=0)
    k: int = Field(gt=0)


class Engine(Spec):
    """Peak rates of one kind of execution unit, per precision, dense (no sparsity): for the
    whole chip (`peak`, fixed) or per compute unit per cycle (`peak_per_unit`, which scales
    with `compute.units` and `compute.clock`, so a derived design that changes either keeps
    a consistent peak)."""

    peak: dict[Precision, FlopRate] = {}
    """Dense peak of the whole chip per precision, FLOP/s, e.g. {bf16: 989 TFLOPS}."""
    peak_per_unit: dict[Precision, OpsPerCycle] = {}
    """Dense peak of one unit per precision, FLOP/cycle, e.g. {bf16: 4096 FLOP/cycle};
    chip peak = this * units * clock."""

    @model_validator(mode="after")
    def _one_way_per_precision(self) -> Engine:
        both = sorted(set(self.peak) & set(self.peak_per_unit))
        if both:
            raise ValueError(f"precision {', '.join(both)} is given both in peak and in "
                             "peak_per_unit; give each precision one way")
        if not self.peak and not self.peak_per_unit:
            raise ValueError("expected at least one rate in peak or peak_per_unit")
        return self

    def chip_peak(self, units: int, clock_hz: float | None) -> dict[str, float]:
        """Dense peak of the chip per precision, FLOP/s."""
        out = {p: v * units * (clock_hz or 0.0) for p, v in self.peak_per_unit.items()}
        out.update(self.peak)
        return {p: out[p] for p in PRECISIONS if p in out}


class ThreadBlocks(Spec):
    """Output tiles (thread blocks) a GEMM library splits a problem into, one compute unit
    each: a GEMM of M x N runs ceil(M / m) x ceil(N / n) tiles in waves of `units`, and the
    last, partial wave leaves units idle. The library runs the candidate that finishes
    first (a large tile for large problems, a small one when a large one leaves units idle)."""

    tiles: list[str] = Field(min_length=1)
    """Candidate tiles as "MxN" in elements, e.g. ["128x256", "128x128", "64x128"]."""
    source: str = Field(min_length=1)
    """Which library's tile configurations these are."""

    @model_validator(mode="after")
    def _shapes(self) -> ThreadBlocks:
        for t in self.tiles:
            parts = t.lower().split("x")
            if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
                raise ValueError(f"tile {t!r}: expected MxN with positive whole numbers, "
                                 "e.g. 128x256")
        return self

    def shapes(self) -> list[tuple[int, int]]:
        """The tiles as (m, n) pairs."""
        return [(int(a), int(b)) for a, b in (t.lower().split("x") for t in self.tiles)]


class Alignment(Spec):
    """The alignment rule of the matrix engine's fast path: the leading dimensions (K of the
    A operand, N of B and C, row-major) times the element size must be a multiple of
    `bytes`; a GEMM that misses it runs at `slowdown` of the aligned rate."""

    bytes: int = Field(gt=0)
    """Required multiple of the leading dimension in bytes (16 for cuBLAS tensor-op paths
    and Hopper TMA descriptors)."""
    slowdown: Fraction
    """Rate of the misaligned path relative to the aligned one (0 < s <= 1)."""
    source: str = Field(min_length=1)
    """Where the rule and the factor come from."""


class MatrixEngine(Engine):
    """Matrix engines (tensor cores, MXUs, systolic arrays): GEMMs and attention run here."""

    tile: Tile | None = None
    """Native tile of the engine (the MMA instruction shape) for shape utilization;
    omitted: no tile quantization is modelled."""
    register_file: Bytes | None = None
    """Register file per compute unit, bytes: it holds the GEMM accumulators, so it sets
    the reuse of operands read from the innermost memory level (omitted: the native tile
    sets it)."""
    achievable: MatrixAchievable | None = None
    """Achieved fraction of `peak` on large GEMMs, measured on the real chip, and the share
    of it that layer GEMMs reach (`typical`)."""
    blocks: ThreadBlocks | None = None
    """Thread-block tiles of the chip's GEMM library (wave quantization); omitted: none is
    modelled (a chip that runs a GEMM as one unit, or spreads it evenly)."""
    alignment: Alignment | None = None
    """Alignment rule of the fast GEMM path; omitted: any shape runs at full rate."""


class Compute(Spec):
    """The chip's compute: how many units, their clock and their engines."""

    units: int = Field(gt=0)
    """Number of compute units (SMs, cores, tiles, processing elements)."""
    unit_name: str = "unit"
    """What a unit is called on this chip (SM, CU, core, PE), for display."""
    clock: Frequency | None = None
    """Clock at which the peak rates hold; converts per-cycle values ("64 B/cycle")."""
    matrix: MatrixEngine
    """Matrix engines."""
    vector: Engine | None = None
    """Vector/SIMD units (softmax, norms, dequantization), where published."""
    op_overhead: TimeOrZero | None = None
    """Fixed time every operator (kernel) costs on top of its roofline time: launch,
    scheduling, pipeline fill and drain, end-of-kernel synchronisation. Seconds; omitted
    means none is charged (statically scheduled dataflow chips)."""
    style: Literal["gpu", "array"] | None = None
    """How the compute is built, which sets its area per FLOP/s in the area model: gpu
    (SIMT cores such as NVIDIA SMs or AMD CUs, whose matrix units sit among vector ALUs,
    register files and schedulers) or array (dedicated systolic or dot-product matrix
    arrays beside separate vector units)."""

    @model_validator(mode="after")
    def _clock_for_per_unit(self) -> Compute:
        engines = [("matrix", self.matrix), ("vector", self.vector)]
        if self.clock is None and any(e and e.peak_per_unit for _, e in engines):
            raise ValueError("peak_per_unit is per cycle and needs compute.clock")
        return self

    def matrix_peak(self) -> dict[str, float]:
        """Chip matrix-engine peak per precision, FLOP/s."""
        return self.matrix.chip_peak(self.units, self.clock)

    def vector_peak(self) -> dict[str, float]:
        """Chip vector-unit peak per precision, FLOP/s (empty when not given)."""
        return self.vector.chip_peak(self.units, self.clock) if self.vector else {}


class MemoryLevel(Spec):
    """One level of the memory hierarchy. Levels are listed innermost first."""

    name: str = Field(min_length=1)
    """Unique name of the level (L1, L2, HBM, LPDDR5X ...)."""
    kind: LevelKind
    """register, sram (software-managed scratchpad), cache, dram, or host memory."""
    capacity: Bytes
    """Capacity, bytes; per compute unit if `scope` is per_unit."""
    bandwidth: Bandwidth
    """Peak bandwidth to the level below (toward compute), B/s; per unit if per_unit."""
    latency: Time | None = None
    """Load-to-use latency, seconds."""
    scope: Literal["shared", "per_unit"] = "shared"
    """shared: one level for the chip; per_unit: one instance per compute unit."""
    interface: Interface | None = None
    """Off-chip memory technology (hbm3, lpddr5x, ddr4 ...), for DRAM and host levels."""
    generation: str | None = Field(default=None, min_length=1)
    """A DRAM generation of the memory catalogue (dse/data/memory.yaml: hbm3, hbm3e-12h,
    hbm4-12h, lpddr5x, ddr5, gddr7, cxl ...). It implies the interface and, per stack
    (channel, CXL link), capacity and bandwidth where the file does not state them; PHY
    area and edge, energy per bit and price follow it (README, "Memory generations")."""
    stacks: int | None = Field(default=None, gt=0)
    """Number of HBM stacks (area model: one PHY and controller each)."""
    channels: int | None = Field(default=None, gt=0)
    """Number of DDR/LPDDR/GDDR channels at the standard's width (area model)."""
    slices: int | None = Field(default=None, gt=0)
    """Slices of a shared cache or SRAM (an L2 / last-level cache): `capacity` and `bandwidth`
    are the totals, split evenly. A design that changes `capacity` adds or removes whole
    slices of this size, and its bandwidth follows the slices (README, "Caches as slices").
    Without it the level's bandwidth is fixed whatever its capacity."""
    slices_per: Literal["stack"] | None = None
    """`stack`: the slices sit on the memory partitions (GH100, MI300X's Infinity Cache), so a
    design that changes the chip's HBM stacks (and not this level's capacity or slices)
    scales the slices, and with them capacity and bandwidth, in proportion."""
    achievable: Achievable | None = None
    """Achieved fraction of `bandwidth` (e.g. a STREAM-like copy), with its source."""
    gather: GatherAccess | None = None
    """Random row reads (embedding gathers): access granularity and achieved fraction."""
    resident: bool | None = None
    """Whether weights and KV cache may stay in this level across steps. Default: yes for
    DRAM, host memory and chip-wide (shared) SRAM scratchpads; no for caches, registers and
    per-unit SRAM (a GPU's shared memory lives only as long as one kernel). Set it for
    designs whose per-unit SRAM is the main memory (Cerebras)."""

    @model_validator(mode="after")
    def _consistent(self) -> MemoryLevel:
        on_chip = self.kind in ON_CHIP_KINDS
        if self.scope == "per_unit" and not on_chip:
            raise ValueError(f"scope per_unit is only for on-chip levels, not kind {self.kind}")
        if self.interface is not None and on_chip:
            raise ValueError(f"interface is for dram and host levels, not kind {self.kind}")
        if self.generation is not None and self.kind != "dram":
            raise ValueError(f"generation is for dram levels, not kind {self.kind}")
        if self.stacks is not None and self.interface not in HBM_INTERFACES:
            raise ValueError("stacks needs an HBM interface (hbm2 ... hbm4)")
        if self.channels is not None and self.interface not in CHANNEL_INTERFACES:
            raise ValueError("channels needs a DDR, LPDDR or GDDR interface")
        if self.slices is not None and not (on_chip and self.scope == "shared"):
            raise ValueError("slices is for a shared on-chip level (an L2 or last-level "
                             f"cache), not a {self.scope} {self.kind} level")
        if self.slices_per is not None and self.slices is None:
            raise ValueError("slices_per needs slices: N (the slice count at the stated "
                             "stacks)")
        return self

    def slice_capacity(self) -> float | None:
        """Bytes per slice (None: the level is not described as slices)."""
        return self.capacity / self.slices if self.slices else None

    def slice_bandwidth(self) -> float | None:
        """B/s per slice (None: the level is not described as slices)."""
        return self.bandwidth / self.slices if self.slices else None

    @property
    def holds_resident(self) -> bool:
        """Whether persistent tensors can be placed here (see `resident`)."""
        if self.resident is not None:
            return self.resident
        return self.kind in ("dram", "host") or (self.kind == "sram" and self.scope == "shared")

    def gather_granularity(self) -> float:
        """Bytes of the smallest access a gather makes here (GatherAccess.granularity)."""
        if self.gather is not None and self.gather.granularity is not None:
            return self.gather.granularity
        return INTERFACE_GRANULARITY.get(self.interface or "", KIND_GRANULARITY[self.kind])

    def gather_fraction(self) -> float:
        """Achieved / peak bandwidth of random row gathers (GatherAccess.fraction)."""
        if self.gather is not None and self.gather.fraction is not None:
            return self.gather.fraction
        stream = self.achievable.fraction if self.achievable else 1.0
        return stream * (GATHER_TO_STREAM if self.kind in ("dram", "host") else 1.0)

    def chip_capacity(self, units: int) -> float:
        """Capacity of the whole level across the chip, bytes."""
        return self.capacity * (units if self.scope == "per_unit" else 1)

    def chip_bandwidth(self, units: int) -> float:
        """Aggregate bandwidth of the whole level across the chip, B/s."""
        return self.bandwidth * (units if self.scope == "per_unit" else 1)


class HostLink(Spec):
    """Link between the chip and its host CPU."""

    name: str | None = None
    """e.g. "PCIe Gen5 x16"."""
    bandwidth: Bandwidth
    """Per direction, B/s."""
    latency: Time | None = None
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
    """Chips reachable over the scale-up links (a node, a pod slice)."""
    scale_out_bandwidth: Bandwidth | None = None
    """Network bandwidth per chip to other nodes, per direction, B/s."""
    scale_out_latency: TimeOrZero | None = None
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
    description: str | None = None
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
