"""The hardware schema's vocabulary: number formats (precisions), memory level kinds and
their nesting order, memory and link interfaces, network topologies, and the fraction type
of its efficiencies."""

from __future__ import annotations

import sys
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, Field

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


# How the scale-out network joins the scale-up domains. rail_optimized: a fat tree whose
# leaf k joins NIC k of every node (NVIDIA's DGX SuperPOD reference architecture), so a
# rank reaches the same local rank of any node in one leaf hop; fat_tree: any NIC reaches
# any at full bisection; dragonfly: groups of switches joined all-to-all. The
# hierarchical collectives (dse.model.parallel) assume full bisection per NIC, which all
# three give at the designs' scale; the fabric is the system's description.
Fabric = Literal["rail_optimized", "fat_tree", "dragonfly"]


def _normal(value: float) -> float:
    """Reject denormal floats: a fraction of 1e-320 is a typo, and arithmetic on it turns
    every rate it scales into zero."""
    if 0 < abs(value) < sys.float_info.min:
        raise ValueError(f"expected a normal number, found {value!r} (below the smallest "
                         "normal float)")
    return value


Fraction = Annotated[float, Field(gt=0, le=1), AfterValidator(_normal)]
