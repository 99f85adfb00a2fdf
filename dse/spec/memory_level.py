"""One level of a chip's memory hierarchy in the hardware schema (registers, SRAM, caches,
DRAM, host memory): capacity and bandwidth per unit or per chip, interface and access
granularity, and the achievable share of gathered accesses."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from dse.spec.compute import Achievable
from dse.spec.hardware_terms import (
    CHANNEL_INTERFACES,
    HBM_INTERFACES,
    ON_CHIP_KINDS,
    Fraction,
    Interface,
    LevelKind,
)
from dse.spec.types import (
    Bandwidth,
    Bytes,
    Spec,
    Time,
)

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
    area and edge, energy per bit and price follow it (docs: guide/hardware.md, Memory
    generations)."""
    stacks: int | None = Field(default=None, gt=0)
    """Number of HBM stacks (area model: one PHY and controller each)."""
    channels: int | None = Field(default=None, gt=0)
    """Number of DDR/LPDDR/GDDR channels at the standard's width (area model)."""
    slices: int | None = Field(default=None, gt=0)
    """Slices of a shared cache or SRAM (an L2 / last-level cache): `capacity` and `bandwidth`
    are the totals, split evenly. A design that changes `capacity` adds or removes whole
    slices of this size, and its bandwidth follows the slices (docs: guide/hardware.md, Caches as
    slices). Without it the level's bandwidth is fixed whatever its capacity."""
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
