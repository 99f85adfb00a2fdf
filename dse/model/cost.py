"""Cost to make N designs: good dies from wafers, memory by capacity, the package, and the
packages lost in assembly. Pure numpy, no I/O; the constants are the node file's `wafer:`
and the market prices (dse/data/cost.yaml), each a dated public estimate.

    dies per wafer  DPW = floor(pi (d/2)^2 / S - pi d / sqrt(2 S)),  d = diameter - 2 edge
                    exclusion, S the die area (the standard gross-die formula with edge loss;
                    de Vries, IEEE Trans. Semicond. Manuf. 18(1), 2005)
    yield           Y = E_lambda[ exp(-lambda A_c) P(Binomial(n, exp(-lambda a)) >= k) ],
                    lambda ~ Gamma(shape alpha, mean D): the negative-binomial defect model
                    (Stapper 1983; Cunningham, IEEE Trans. Semicond. Manuf. 3(2), 1990) as a
                    gamma mixture of Poisson, exact for harvesting. A_c: the die's area
                    outside the unit array (it must be defect-free); n units are built of
                    area a each, k must work (the enabled ones, per die). Without spares
                    (n = k) it is (1 + D S / alpha)^-alpha.
    good die        wafer price / (DPW x Y)
    memory          capacity x price per byte of its kind (HBM: taller stacks dearer)
    package         interposer (or substrate) area x price per area + fixed, for the area
                    and technology of the package geometry (dse.model.package: the design's
                    packaging, else CoWoS-S with HBM and organic without)
    chip            (dies x good die + memory + package) / assembly yield + final test
    system          chips x chip

The die area is the area model's (dse.model.area), spares included, so the cost and the area
budget price the same silicon and a derived design pays for its base's spares. Harvesting
covers the compute units (with their per-unit SRAM); other spares (L2, HBM sites) are paid
for in area and must work like the rest of the die.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import betainc

from dse.errors import DseError
from dse.model.area import AreaResult
from dse.model.batch import DesignBatch
from dse.spec.hardware import HBM_INTERFACES
from dse.spec.hardware_costs import spares
from dse.spec.technology import Market, Packaging, TechSpec, Wafer

_QUAD = 240  # points of the integral over the defect density (log-spaced)
_X_LOW = 1e-9  # below this a design sees no defect: the mass there counts as yield 1


@dataclass(frozen=True)
class CostResult:
    """Cost of N designs: components (name -> [N] USD per chip, in display order, summing to
    the total), and the quantities they follow from."""

    hardware: str
    node: str
    components: dict[str, np.ndarray]
    total_usd: np.ndarray  # [N] per chip
    die_mm2: np.ndarray  # [N] one die
    dies: np.ndarray  # [N] dies per chip
    dies_per_wafer: np.ndarray  # [N]
    die_yield: np.ndarray  # [N] share of dies with at least the enabled units working
    good_die_usd: np.ndarray  # [N] one good die
    wafer_usd: float
    package: np.ndarray  # [N] str: the packaging technology
    interposer_mm2: np.ndarray  # [N]
    assembly_yield: np.ndarray  # [N]
    feasible: np.ndarray  # [N] bool: the package can be made
    reason: np.ndarray  # [N] str
    memory: dict[str, tuple[np.ndarray, np.ndarray]]  # component -> ([N] bytes, [N] USD/B)


def dies_per_wafer(die_mm2: np.ndarray, wafer: Wafer) -> np.ndarray:
    """Whole dies on a wafer, [N]: pi (d/2)^2 / S - pi d / sqrt(2 S) with d the usable
    diameter; at least 1 where one die fits the usable disc (a wafer-scale die), else 0."""
    d = wafer.diameter - 2.0 * wafer.edge_exclusion
    s = np.asarray(die_mm2, dtype=float)
    gross = np.floor(math.pi * (d / 2.0) ** 2 / s - math.pi * d / np.sqrt(2.0 * s))
    fits = s <= math.pi * (d / 2.0) ** 2
    return np.where(fits, np.maximum(gross, 1.0), 0.0)


def _gamma_grid(alpha: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Nodes x (lambda = x D / alpha) and weights of E[g(X)] for X ~ Gamma(alpha, 1), and
    the mass below the first node (where g = 1), on a log-spaced grid."""
    lo = max(_X_LOW, alpha - 15.0 * math.sqrt(alpha) - 1.0)  # beyond 15 sd: no mass
    hi = alpha + 40.0 * math.sqrt(alpha) + 60.0
    t = np.linspace(math.log(lo), math.log(hi), _QUAD)
    x = np.exp(t)
    # density in log x: x^alpha e^-x / Gamma(alpha)
    w = np.exp(alpha * t - x - math.lgamma(alpha)) * (t[1] - t[0])
    w[0] *= 0.5
    w[-1] *= 0.5
    low = math.exp(alpha * math.log(lo) - math.lgamma(alpha + 1.0)) if lo == _X_LOW else 0.0
    w *= (1.0 - low) / w.sum()  # the grid's mass made exact
    return x, w, low


def harvest_yield(critical_mm2: np.ndarray, unit_mm2: np.ndarray, built: np.ndarray,
                  needed: np.ndarray, defect_density: float, alpha: float) -> np.ndarray:
    """[N] probability that a die's `critical_mm2` is defect-free and at least `needed` of
    its `built` units (each `unit_mm2`) are: the negative-binomial model (defect density
    `defect_density` per mm^2, clustering `alpha`) integrated over its gamma-distributed
    defect density, so the units' failures are correlated as the model says."""
    crit = np.asarray(critical_mm2, dtype=float)[:, None]
    a = np.asarray(unit_mm2, dtype=float)[:, None]
    n = np.asarray(built, dtype=float)[:, None]
    spare = np.maximum(np.asarray(built, dtype=float) - np.asarray(needed, dtype=float), 0)
    x, w, low = _gamma_grid(alpha)
    lam = (x * defect_density / alpha)[None, :]  # [1, Q] defects per mm^2
    with np.errstate(under="ignore"):
        q = -np.expm1(-lam * a)  # a unit fails
        # at most k = spare units failed: P(Binomial(n, q) <= k) = I_{1-q}(n - k, k + 1)
        k = spare[:, None]
        tail = np.where(k >= n, 1.0, betainc(np.maximum(n - k, 1.0), k + 1.0, 1.0 - q))
        good = np.exp(-lam * crit) * np.clip(tail, 0.0, 1.0)
    return (good * w).sum(axis=1) + low  # row by row: a design costs the same in any batch


def _memory(db: DesignBatch, market: Market) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Capacity and price per byte of each DRAM level ([N] bytes, [N] USD/B, by component
    name)."""
    spec = db.spec
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for i, level in enumerate(spec.memory):
        if level.kind != "dram":
            continue  # on-chip SRAM is in the die; a host's memory is the host's
        iface = level.interface
        cap = db.capacity[:, i]
        per_byte = np.zeros(db.n)
        ifaces = db.interfaces(i)  # a generation's interface prices it (cost.yaml by interface)
        for one in dict.fromkeys(ifaces):
            price = market.memory.get(one) if one else None
            if price is None:
                raise DseError(f"{spec.name} memory[{i}] ({level.name}).interface: the cost "
                               f"data give no price for {one or 'a DRAM without an interface'}"
                               f" (priced: {', '.join(market.memory)})")
            mine = ifaces == one
            per_byte = np.where(mine, price.per_byte, per_byte)
            if one in HBM_INTERFACES and price.tall is not None \
                    and price.tall_above is not None:
                count = db.stacks[:, i]
                per_stack = cap / np.where(count > 0, count, 1.0)
                per_byte = np.where(mine & (per_stack > price.tall_above * (1 + 1e-9)),
                                    price.tall, per_byte)
        out[f"{level.name} ({iface})"] = (cap, per_byte)
    return out


def _units(db: DesignBatch, die: AreaResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per die: area of the harvestable unit array [N] mm^2, units built, units needed."""
    spec = db.spec
    names = ["compute", "unit control", "vector units"] + [
        f"{lv.name} ({lv.kind})" for lv in spec.memory if lv.scope == "per_unit"]
    array = sum((die.components[k] for k in names if k in die.components), np.zeros(db.n))
    dies = db.dies
    built_total = np.maximum(np.round(db.units * spares(spec).units), db.units)
    built = np.maximum(np.round(built_total / dies), 1.0)
    needed = np.minimum(np.ceil(db.units / dies - 1e-9), built)
    return array / dies, built, needed


def cost(db: DesignBatch, tech: TechSpec, die: AreaResult) -> CostResult:
    """Cost to make one chip of every design of `db` ([N] USD), from its area `die`
    (dse.model.area.area of the same designs and node)."""
    spec, n = db.spec, db.n
    wafer, market = tech.wafer, tech.market
    if wafer is None:
        raise DseError(f"{spec.name}: technology.node {tech.node}: the node file gives no "
                       "wafer: (price, edge_exclusion, defect_density, clustering) for the "
                       "cost model")
    if market is None:
        raise DseError(f"{spec.name}: node {tech.node}: no market prices for the cost model")
    dies = np.asarray(db.dies, dtype=float) * np.ones(n)
    one = die.die_mm2
    array, built, needed = _units(db, die)
    unit = array / built
    y = harvest_yield(np.maximum(one - array, 0.0), unit, built, needed,
                      wafer.defect_density, wafer.clustering)
    dpw = dies_per_wafer(one, wafer)
    with np.errstate(divide="ignore"):
        good = np.where(dpw * y > 0, wafer.price / np.where(dpw * y > 0, dpw * y, 1.0), np.inf)
    comp: dict[str, np.ndarray] = {"dies": good * dies}
    mem = _memory(db, market)
    comp.update({k: cap * per_byte for k, (cap, per_byte) in mem.items()})
    geo = die.geometry
    if geo is None:
        raise DseError(f"{spec.name}: technology.node {tech.node}: the node file gives no "
                       "package: rules (die shape, stack footprints, packaging limits), which "
                       "the cost model needs to lay out and price the interposer")
    # the package geometry's interposer and technology (dse.model.package): the same
    # layout, technology and limit the study's interposer constraint checks
    area, tech_name = geo.interposer_mm2, geo.packaging
    techs: tuple[Packaging, ...] = ("organic", "cowos-s", "cowos-l")
    which = np.array([techs.index(t) for t in tech_name], dtype=int)

    def pick(field: str) -> np.ndarray:
        """[N] one packaging constant of each design's technology."""
        return np.array([getattr(market.packaging[t], field) for t in techs])[which]

    ay, test = pick("assembly_yield"), pick("test")
    comp["package"] = area * pick("per_area") + pick("fixed")
    before = sum(comp.values(), np.zeros(n))
    loss = np.full(n, np.inf)  # a die no wafer yields: infinite cost, whatever the yield
    np.multiply(before, 1.0 / ay - 1.0, out=loss, where=np.isfinite(before))
    comp["assembly loss"] = loss
    comp["test and assembly"] = test
    total = before + comp["assembly loss"] + test
    fits = geo.interposer_fits
    reason = np.where(fits, "", geo.interposer_reason).astype(object)
    return CostResult(hardware=spec.name, node=tech.node, components=comp, total_usd=total,
                      die_mm2=one, dies=dies, dies_per_wafer=dpw, die_yield=y,
                      good_die_usd=good, wafer_usd=wafer.price,
                      package=tech_name, interposer_mm2=area,
                      assembly_yield=ay, feasible=fits, reason=reason, memory=mem)
