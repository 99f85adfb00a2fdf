"""The memory levels of N designs as [N, L] arrays: capacity and bandwidth with the causes
they follow (HBM stacks, DDR channels, cache slices, a memory generation from the
catalogue), the achieved and gather fractions. No I/O."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.errors import DseError
from dse.model.overrides import Values
from dse.spec.catalogue import catalogue
from dse.spec.hardware import (
    CHANNEL_INTERFACES,
    HBM_INTERFACES,
    ON_CHIP_KINDS,
    HardwareSpec,
    MemoryLevel,
    interface_family,
)
from dse.spec.vocabulary import COUPLED


@dataclass(frozen=True)
class MemoryArrays:
    """Every memory level of N designs: [N, L] arrays in SI units ([L] for `per_unit`)."""

    per_unit: np.ndarray  # [L] bool: one per compute unit (capacity and bandwidth x units)
    capacity: np.ndarray  # bytes of the chip
    unit_capacity: np.ndarray  # bytes of one instance (one unit's, for a per-unit level)
    peak_bandwidth: np.ndarray  # bytes/s
    bandwidth: np.ndarray  # achieved bytes/s (peak x the achievable fraction)
    gather_bandwidth: np.ndarray  # achieved bytes/s of random row reads
    gather_granularity: np.ndarray  # bytes moved per random access
    stacks: np.ndarray  # HBM stacks (0: none)
    channels: np.ndarray  # DDR/LPDDR/GDDR channels (0: none)
    slices: np.ndarray  # cache slices (0: not sliced)
    generation: np.ndarray  # catalogue index of the memory generation (-1: none)


def _columns(cols: list[np.ndarray]) -> np.ndarray:
    """[N, L] the levels' [N] values side by side; a read-only broadcast of one row where
    every level's value is one for all designs (no [N, L] array)."""
    if cols and all(c.ndim == 1 and c.strides == (0,) for c in cols):
        return np.broadcast_to(np.array([c[0] if c.size else np.nan for c in cols]),
                               (len(cols[0]), len(cols)))
    return np.stack(cols, axis=1)


def memory_arrays(v: Values, spec: HardwareSpec, units_: np.ndarray) -> MemoryArrays:
    """The levels of `spec` with the overrides of `v` applied (see the module text)."""
    cols: dict[str, list[np.ndarray]] = {k: [] for k in (
        "cap", "bw", "frac", "gfrac", "grain", "stacks", "channels", "slices", "generation")}
    for lv in spec.memory:
        at = f"memory.{lv.name}"
        gen = _generation(v, lv)
        scale = _coupled(v, lv)  # effect -> factor of its coupled cause
        cols["slices"].append(_slice_scale(v, spec, lv, scale))
        if v.given(f"{at}.generation"):
            _generation_scale(v, lv, gen, scale)
        cols["generation"].append(gen)
        cols["cap"].append(v.get(f"{at}.capacity", lv.capacity) * scale.get("capacity", 1.0))
        cols["bw"].append(v.get(f"{at}.bandwidth", lv.bandwidth) * scale.get("bandwidth", 1.0))
        frac = v.get(f"{at}.achievable.fraction",
                     lv.achievable.fraction if lv.achievable else 1.0)
        cols["frac"].append(frac)
        stated = lv.gather.fraction if lv.gather else None
        # the gather fraction follows a --set streaming fraction unless the level states its own
        cols["gfrac"].append(v.get(f"{at}.gather.fraction", stated) if stated is not None
                             or v.given(f"{at}.gather.fraction") else
                             frac * (lv.gather_fraction() / (lv.achievable.fraction
                                                             if lv.achievable else 1.0)))
        cols["grain"].append(v.get(f"{at}.gather.granularity", lv.gather_granularity()))
        cols["stacks"].append(v.get(f"{at}.stacks", lv.stacks or 0))
        cols["channels"].append(v.get(f"{at}.channels", lv.channels or 0))
    a = {k: _columns(c) for k, c in cols.items()}
    per_unit = np.array([lv.scope == "per_unit" for lv in spec.memory])
    mult = np.where(per_unit[None, :], units_[:, None], 1.0)
    peak_bandwidth = a["bw"] * mult
    v.finite("a memory level's capacity or bandwidth", a["cap"] * mult)
    v.finite("a memory level's bandwidth", peak_bandwidth)
    return MemoryArrays(
        per_unit=per_unit, capacity=a["cap"] * mult, unit_capacity=a["cap"],
        peak_bandwidth=peak_bandwidth, bandwidth=peak_bandwidth * a["frac"],
        gather_bandwidth=peak_bandwidth * a["gfrac"], gather_granularity=a["grain"],
        stacks=a["stacks"], channels=a["channels"], slices=a["slices"],
        generation=a["generation"])


def _coupled(v: Values, lv: MemoryLevel) -> dict[str, np.ndarray]:
    """The factors a given cause (stacks, channels, slices: COUPLED) puts on the capacity
    and bandwidth of level `lv`, for the effects not given themselves."""
    at = f"memory.{lv.name}"
    scale: dict[str, np.ndarray] = {}
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
    return scale


def _generation_scale(v: Values, lv: MemoryLevel, gen: np.ndarray,
                      scale: dict[str, np.ndarray]) -> None:
    """A generation given sets the figures per unit: the units (stacks or channels) x the
    catalogue's, unless the capacity or bandwidth is given too (then the value given wins)."""
    at = f"memory.{lv.name}"
    cat = catalogue()
    count = (v.get(f"{at}.stacks", lv.stacks) if lv.stacks is not None else
             v.get(f"{at}.channels", lv.channels) if lv.channels is not None else
             np.ones(v.n))
    idx = gen.astype(int)
    for effect, table in (("capacity", [g.capacity for g in cat.generations.values()]),
                          ("bandwidth", [g.bandwidth for g in cat.generations.values()])):
        if not v.given(f"{at}.{effect}"):
            scale[effect] = count * np.asarray(table)[idx] / getattr(lv, effect)


def _slice_scale(v: Values, spec: HardwareSpec, lv: MemoryLevel, scale: dict[str, np.ndarray]
                 ) -> np.ndarray:
    """The slice count of each design of level `lv` ([N]; 0 where the level gives no
    slices), and the factors it puts on the level's capacity and bandwidth (into `scale`,
    where neither they nor the slices are given; a given `slices` scales them through
    COUPLED). The rule (docs: guide/hardware.md, Caches as slices): a slice keeps the size and
    bandwidth the spec gives it (capacity / slices, bandwidth / slices). A design that changes the
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


def _generation(v: Values, lv: MemoryLevel) -> np.ndarray:
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
