"""Die area of N designs from process-node constants: a breakdown by component, the die
edge the off-chip interfaces need, and the constraints that follow. Pure numpy, no I/O.

    compute   = max over precisions p of  peak_p x per_rate(style) x ratio_p x f_ref / f
                (style gpu: whole SIMT cores; style array: the matrix arrays alone; f_ref the
                clock the constant holds at, f the design's clock: area follows MACs built)
    unit ctl  = units x area per unit (array style: each PE's control cores, DMA, router)
    vector    = max over p of vector peak_p x per_rate(vector) x ratio_p   (array style)
    SRAM      = capacity x (cache or scratchpad area per byte)             per on-chip level
    PHYs      = HBM stacks x area per stack, DRAM channels x area per channel,
                SerDes lanes x area per lane (chip-to-chip, NVLink-C2C), PCIe/CXL lanes
    uncore    = (rest + fixed) x f / (1 - f) + fixed, so that uncore is a share f of the die
    edge      = the same counts x the die edge each instance needs
    padding   = max(0, dies x (edge / (4 dies))^2 - total)   (pad-limited dies)
    perimeter = dies x 4 sqrt(total / dies)   (square dies)

Counts are the die as built (`technology.as_built`, dse.spec.hardware_costs.spares): spares
fused off for yield take silicon too, and a design derived from a die with spares (by
`base:`, `--set` or a study) keeps its base's spare fraction. A design whose interfaces
need more edge than its contents' perimeter is pad-limited: its dies grow until the edge
fits (I/O-bound dies are made this way), which costs area and, past the node's reticle
(858 mm^2), makes it infeasible when `reticle` is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from dse.errors import DseError
from dse.model.batch import DesignBatch
from dse.model.package import Geometry, d2d_joints, geometry
from dse.spec.hardware import CHANNEL_INTERFACES, HBM_INTERFACES, interface_family
from dse.spec.hardware_costs import spares
from dse.spec.technology import ComputeArea, Phy, TechSpec

UNCORE = "uncore"
PADDING = "edge padding"  # silicon added so the interfaces fit along the die edge


@dataclass(frozen=True)
class AreaResult:
    """Area of N designs: components (name -> [N] mm^2, in display order), total, edge."""

    hardware: str
    node: str
    components: dict[str, np.ndarray]
    total_mm2: np.ndarray  # [N]
    edge_needed_mm: np.ndarray  # [N] die edge the off-chip interfaces need
    perimeter_mm: np.ndarray  # [N] die edge available: dies x 4 sqrt(area per die)
    die_mm2: np.ndarray  # [N] area of one die
    feasible: np.ndarray  # [N] bool
    reason: np.ndarray  # [N] str ("" when feasible)
    published_mm2: float | None  # the spec's published die area (all dies), if any
    geometry: Geometry | None = None  # package geometry (the node's `package:` rules)

    @property
    def rel_error(self) -> np.ndarray | None:
        """(model - published) / published, [N]; None without a published area."""
        if self.published_mm2 is None:
            return None
        return (self.total_mm2 - self.published_mm2) / self.published_mm2


def _engine_area(peaks: dict[str, np.ndarray], const: ComputeArea, scale: np.ndarray,
                 what: str, n: int) -> np.ndarray:
    """max over precisions of peak x area per FLOP/s x ratio; [N] mm^2."""
    terms = [peaks[p] * scale * const.per_rate * f
             for p in peaks if (f := const.factor(p)) is not None]
    if not terms and peaks:
        raise DseError(f"{what}: the node gives no area for precisions "
                       f"{', '.join(peaks)} (reference {const.reference}, ratios for "
                       f"{', '.join(const.ratio) or 'none'})")
    return np.max(np.stack(terms), axis=0) if terms else np.zeros(n)


class _Scaled:
    """A PHY instance whose area and edge are [N] (one unit of a level's generation: the
    node's instance x the catalogue's multiple, dse/data/memory.yaml `phy:`)."""

    def __init__(self, area: np.ndarray, edge: np.ndarray):
        self.area, self.edge = area, edge


def _per_unit(db: DesignBatch, i: int, phy: Phy) -> Phy | _Scaled:
    """The PHY one unit of level `i` needs: the node's, times its generation's multiple."""
    if np.all(db.generation[:, i] < 0):
        return phy
    return _Scaled(phy.area * db.by_generation(i, lambda g: g.phy.area, 1.0),
                   phy.edge * db.by_generation(i, lambda g: g.phy.edge, 1.0))


def _lanes(bandwidth: np.ndarray, phy: Phy) -> np.ndarray:
    """Lanes needed to carry `bandwidth` per direction at the PHY's lane rate."""
    assert phy.rate is not None
    return np.ceil(bandwidth / phy.rate - 1e-9)


def area(db: DesignBatch, tech: TechSpec, *, reticle: bool = False,
         package: bool = False) -> AreaResult:
    """Die area of every design of `db` with the constants of `tech`. `reticle`: designs
    whose dies exceed the reticle are infeasible (a constraint a study turns on).
    `package`: so are designs whose HBM stacks do not fit the die edges the package rules
    give them or whose interposer exceeds its packaging technology (dse.model.package)."""
    spec, n = db.spec, db.n
    style = spec.compute.style
    if style is None:
        raise DseError(f"{spec.name}: compute.style: the area model needs how the compute is "
                       "built (gpu or array)")
    sp = spares(spec)  # one rule for a shipped die, a derived file and --set / a study
    f_units, f_level, f_links = sp.units, sp.levels, sp.links
    comp = _compute_areas(db, tech, style, f_units)
    edge = np.zeros(n)
    for i, level in enumerate(spec.memory):  # on-chip levels: SRAM area per byte
        if level.kind in ("register", "sram", "cache"):
            per_byte = tech.sram.cache if level.kind == "cache" else tech.sram.scratchpad
            cap = db.capacity[:, i] * f_level.get(level.name, {}).get("capacity", 1.0)
            if level.scope == "per_unit":
                cap = cap * f_units
            comp[f"{level.name} ({level.kind})"] = cap * per_byte
    phys = _memory_phys(db, tech, f_level) + _link_phys(db, tech, sp.idle_links, f_links)
    for name, count, part in phys:
        comp[name] = comp.get(name, 0.0) + count * part.area
        edge = edge + count * part.edge
    pk = spec.technology.package if spec.technology else None
    rules = tech.package
    hbm_sites, hbm_iface = _hbm_sites(db, f_level)
    plane = np.full(n, float(pk.in_plane)) if pk and pk.in_plane else db.dies
    if rules is not None and np.any(plane > 1):
        # Each joint between dies carries a die-to-die PHY on both dies (dse.model.package).
        bw = pk.d2d_bandwidth if pk and pk.d2d_bandwidth else rules.d2d.bandwidth
        modules = np.ceil(bw / rules.d2d.rate - 1e-9)
        joints = d2d_joints(plane)
        comp["die-to-die PHY"] = 2.0 * joints * modules * rules.d2d.area
        edge = edge + 2.0 * joints * modules * rules.d2d.edge

    rest = sum(comp.values(), np.zeros(n))
    f, fixed = tech.uncore.fraction, tech.uncore.fixed or 0.0
    comp[UNCORE] = (rest + fixed) * f / (1.0 - f) + fixed
    total = rest + comp[UNCORE]

    dies = db.dies
    # A die whose off-chip interfaces need more edge than its contents give it is made
    # larger (pad-limited): each square die grows to a side of edge / (4 dies).
    padded = dies * (edge / (4.0 * dies)) ** 2
    pad = np.maximum(padded - total, 0.0)
    if np.any(pad > 0):
        comp[PADDING] = pad
    total = total + pad
    die = total / dies
    perimeter = dies * 4.0 * np.sqrt(die)
    big = (die > tech.reticle) if reticle else np.zeros(n, dtype=bool)
    reason = np.full(n, "", dtype=object)
    for i in np.flatnonzero(big).tolist():
        reason[i] = reticle_reason(die[i], tech.reticle, edge[i] if pad[i] > 0 else None)
    geo = None
    if rules is not None:
        geo = geometry(total / plane, plane, hbm_sites, rules, interface=hbm_iface,
                       aspect=pk.aspect_ratio if pk else None,
                       hbm_edges=pk.hbm_edges if pk else None,
                       packaging=pk.packaging if pk else None,
                       d2d_bandwidth=pk.d2d_bandwidth if pk else None)
    feasible = ~big
    if package and geo is not None:
        for i in np.flatnonzero(~geo.feasible).tolist():
            reason[i] = "; ".join(w for w in (str(reason[i]), str(geo.reason[i])) if w)
        feasible = feasible & geo.feasible
    published = spec.technology.die_area if spec.technology else None
    return AreaResult(hardware=spec.name, node=tech.node, components=comp, total_mm2=total,
                      edge_needed_mm=edge, perimeter_mm=perimeter, die_mm2=die,
                      feasible=feasible, reason=reason, published_mm2=published,
                      geometry=geo)


def _compute_areas(db: DesignBatch, tech: TechSpec, style: str, f_units: float
                   ) -> dict[str, np.ndarray]:
    """[N] mm2 of the matrix engines (and, for an array, the units' control and the vector
    units), from the node's area per FLOP/s at its reference clock, spares included."""
    spec, n = db.spec, db.n
    units_scale = np.full(n, f_units)
    comp: dict[str, np.ndarray] = {}

    def at_clock(const: ComputeArea) -> np.ndarray:
        """Spares x (reference clock / design clock): area follows the MACs built."""
        return units_scale * np.where(db.clock > 0, const.clock / np.where(db.clock > 0,
                                                                          db.clock, 1.0), 1.0)

    matrix = getattr(tech.compute, style)
    comp["compute"] = _engine_area(db.matrix_peak, matrix, at_clock(matrix),
                                   f"{spec.name} compute.matrix", n)
    if style == "array":
        comp["unit control"] = db.units * f_units * tech.compute.array_unit.area
    if style == "array" and db.vector_peak:
        comp["vector units"] = _engine_area(db.vector_peak, tech.compute.vector,
                                            at_clock(tech.compute.vector),
                                            f"{spec.name} compute.vector", n)

    return comp


Phys = list[tuple[str, np.ndarray, Phy | _Scaled]]  # (component, instances [N], its PHY)


def _memory_phys(db: DesignBatch, tech: TechSpec, f_level: dict[str, dict[str, float]]
                 ) -> Phys:
    """The PHYs of the off-chip memory levels: one per HBM stack or DDR channel (spares
    included), SerDes or PCIe lanes for NVLink-C2C and CXL; on-chip and host levels none."""
    spec = db.spec
    phys: Phys = []
    for i, level in enumerate(spec.memory):
        spare = f_level.get(level.name, {})
        if level.kind in ("register", "sram", "cache", "host"):
            continue  # on the die: SRAM (area()); the host's memory: its PHYs are the host's
        iface, where = level.interface, f"{spec.name} memory[{i}] ({level.name})"
        if iface in HBM_INTERFACES:
            count = db.stacks[:, i] * spare.get("stacks", 1.0)
            if not np.all(count > 0):
                raise DseError(f"{where}.stacks: the area model needs the number of HBM "
                               "stacks")
            phys.append((f"{level.name} PHY", count, _per_unit(db, i, tech.phy.hbm)))
        elif iface in CHANNEL_INTERFACES:
            count = db.channels[:, i] * spare.get("channels", 1.0)
            if not np.all(count > 0):
                raise DseError(f"{where}.channels: the area model needs the number of "
                               f"{iface} channels")
            phys.append((f"{level.name} PHY", count,
                         _per_unit(db, i, getattr(tech.phy, cast(str, interface_family(iface))))))
        elif iface == "nvlink-c2c":
            phys.append((f"{level.name} PHY", _lanes(db.peak_bandwidth[:, i], tech.phy.serdes),
                         tech.phy.serdes))
        elif iface == "cxl":
            phys.append((f"{level.name} PHY", _lanes(db.peak_bandwidth[:, i], tech.phy.pcie),
                         tech.phy.pcie))
        else:
            raise DseError(f"{where}.interface: the area model needs the DRAM interface "
                           "(hbm3, lpddr5, ddr5 ...)")

    return phys


def _link_phys(db: DesignBatch, tech: TechSpec, idle_links: float, f_links: float) -> Phys:
    """The PHYs of the chip-to-chip links the die carries and of its host link."""
    phys: Phys = []
    ic = db.spec.interconnect
    # Links on the die: the enabled ones scaled by the spares, or the as-built count where the
    # product enables none (a PCIe card whose die carries NVLink).
    links = np.where(db.links > 0, db.links * f_links, idle_links)
    if ic is not None and np.any(links > 0):
        given = np.isfinite(db.lanes_per_link)
        if not np.all(given | (db.link_bandwidth > 0)):
            raise DseError(f"{db.spec.name} interconnect.lanes_per_link: the area model needs the "
                           "lanes of the links the die carries (or their link_bandwidth)")
        per_link = np.where(given, db.lanes_per_link, _lanes(db.link_bandwidth,
                                                            tech.phy.serdes))
        phys.append(("chip-to-chip PHY", links * per_link, tech.phy.serdes))
    if ic is not None and ic.host_link is not None:
        hl = ic.host_link
        phy = tech.phy.serdes if hl.interface == "nvlink-c2c" else tech.phy.pcie
        lanes = np.where(np.isfinite(db.host_link_lanes), db.host_link_lanes,
                         _lanes(db.host_link_bandwidth, phy))
        phys.append(("host PHY", lanes, phy))
    return phys


def _hbm_sites(db: DesignBatch, f_level: dict[str, dict[str, float]]
               ) -> tuple[np.ndarray, Any]:
    """[N] HBM sites as built (spares round up) and the stacks' interface (one name, or one
    per design where the generation varies): the package geometry places them."""
    hbm_sites = np.zeros(db.n)
    hbm_iface = None
    for i, level in enumerate(db.spec.memory):
        if level.kind == "dram" and level.interface in HBM_INTERFACES:
            hbm_sites = hbm_sites + db.stacks[:, i] * f_level.get(level.name, {}).get(
                "stacks", 1.0)
            if hbm_iface is None:  # the stack outline follows the generation per design
                ifaces = db.interfaces(i)
                hbm_iface = ifaces[0] if len(set(ifaces)) == 1 else ifaces
    hbm_sites = np.ceil(hbm_sites - 1e-9)  # sites as built: a spare fraction rounds up
    return hbm_sites, hbm_iface


def reticle_reason(die_mm2: float, reticle_mm2: float, padded_edge_mm: float | None = None
                   ) -> str:
    """Why a die exceeds the reticle, naming the area compared: the die as the model builds
    it (spares and edge padding included; it reads ~7% below published dies), the same
    area the area budget counts."""
    pad = (f"; pad-limited: its off-chip interfaces need {padded_edge_mm:.0f} mm of die edge"
           if padded_edge_mm is not None else "")
    return (f"a die of {die_mm2:.0f} mm2 (modelled, with spares{pad}) exceeds the "
            f"{reticle_mm2:.0f} mm2 reticle")
