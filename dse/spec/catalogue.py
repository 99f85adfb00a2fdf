"""The memory catalogue: DRAM generations as data (dse/data/memory.yaml), per unit they are
bought and wired in (an HBM stack, a DRAM channel, a CXL x16 link): data width and rate as
shipped in accelerators, capacity, energy per bit, and the multiple of the node's PHY one
unit needs. A hardware level names one (`generation:`); a design or a study varies it
(`memory.<level>.generation`), and capacity, bandwidth, PHY area and edge, energy, price
(dse/data/cost.yaml by the entry's interface) and the stack footprint follow it.

This module does no I/O: the loader (dse.spec.load) registers the reader of the shipped
file, and `catalogue()` calls it once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import Field, model_validator

from dse.errors import DseError
from dse.spec.hardware_terms import Interface, interface_family
from dse.spec.types import Bandwidth, Bytes, EnergyPerByte, Spec

Unit = Literal["stack", "channel", "link"]


class PhyMultiple(Spec):
    """One unit's PHY and controller as a multiple of the node's instance of its family
    (hwspecs/tech/<node>.yaml `phy:`): the area at a node stays in the node file."""

    area: float = Field(gt=0, le=64)
    """Silicon: 2 for a 2048-bit HBM4 stack against the node's 1024-bit HBM PHY."""
    edge: float = Field(gt=0, le=64)
    """Die edge (shoreline)."""


class Generation(Spec):
    """One DRAM generation, per unit (`unit`), with its provenance."""

    interface: Interface
    """The JEDEC interface it speaks (hbm3e, lpddr5x, cxl ...): access granularity, PHY
    family, price (dse/data/cost.yaml) and stack footprint follow it."""
    unit: Unit
    """What one unit is: an HBM stack, a DRAM channel (device interface), a CXL x16 link."""
    width: int = Field(gt=0)
    """Data pins (bits) of one unit: 1024 (HBM3E), 2048 (HBM4), 16 (an LPDDR5X channel)."""
    rate: Bandwidth
    """Data rate per pin as shipped in accelerators (written "5.23 Gb/s"), B/s."""
    rate_max: Bandwidth
    """The vendor's (or standard's) maximum per pin, for reference."""
    bandwidth: Bandwidth
    """Peak per unit as shipped: width x rate / 8 (to 1%)."""
    die: Bytes
    """Capacity of one DRAM die (or, for CXL, one DIMM)."""
    height: int = Field(gt=0)
    """Dies per unit (stack height; dies or DIMMs behind a channel or link)."""
    capacity: Bytes
    """Per unit: die x height (to 1%)."""
    energy: EnergyPerByte
    """Per bit moved: device plus PHY, controller and transport (written "7 pJ/bit")."""
    phy: PhyMultiple
    source: str = Field(min_length=1)
    """Where the figures come from, dated."""

    @model_validator(mode="after")
    def _products(self) -> Generation:
        wide = self.width * self.rate  # rate is B/s per pin: bits x (Gb/s) / 8
        if abs(wide - self.bandwidth) > 0.01 * self.bandwidth:
            raise ValueError(f"bandwidth {self.bandwidth / 1e9:g} GB/s is not width x rate / 8 "
                             f"= {self.width} x {self.rate * 8 / 1e9:g} Gb/s / 8 = "
                             f"{wide / 1e9:g} GB/s")
        if abs(self.die * self.height - self.capacity) > 0.01 * self.capacity:
            raise ValueError(f"capacity {self.capacity / 2**30:g} GiB is not die x height = "
                             f"{self.die / 2**30:g} GiB x {self.height}")
        if self.rate_max < self.rate:
            raise ValueError("rate_max is below rate")
        family = interface_family(self.interface)
        want = {"hbm": "stack", None: "link"}.get(family, "channel")
        if self.unit != want:
            raise ValueError(f"a {self.interface} generation comes by the {want}, not the "
                             f"{self.unit}")
        return self


class MemoryCatalogue(Spec):
    """The shipped catalogue file."""

    date: str = Field(min_length=1)
    generations: dict[str, Generation] = Field(min_length=1)

    @property
    def names(self) -> tuple[str, ...]:
        """Generation keys in file order (a design's generation index is a position here)."""
        return tuple(self.generations)

    def index(self, name: str) -> int:
        return self.names.index(name)

    def at(self, index: int) -> Generation:
        return self.generations[self.names[index]]

    def family_of(self, name: str) -> str:
        """hbm, lpddr, ddr, gddr or cxl: a level's generation may change within one."""
        iface = self.generations[name].interface
        return interface_family(iface) or iface

    def unknown(self, name: object) -> str:
        """The message for a generation not in the catalogue."""
        from dse.errors import suggest
        shown = f"'{name}'" if isinstance(name, str) else repr(name)
        hint = suggest(name, list(self.names)) if isinstance(name, str) else ""
        return (f"unknown memory generation {shown}{hint}; expected one of: "
                f"{', '.join(self.names)} (dse/data/memory.yaml)")


_reader: Callable[[], MemoryCatalogue] | None = None
_loaded: MemoryCatalogue | None = None


def register(reader: Callable[[], MemoryCatalogue]) -> None:
    """The function that reads the shipped catalogue (dse.spec.load registers it)."""
    global _reader
    _reader = reader


def catalogue() -> MemoryCatalogue:
    """The memory catalogue (read once)."""
    global _loaded
    if _loaded is None:
        if _reader is None:
            raise DseError("the memory catalogue is not available: import dse.spec.load")
        _loaded = _reader()
    return _loaded
