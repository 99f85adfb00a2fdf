"""Power and energy of evaluated designs: the energy of the FLOPs, bytes and link traffic the
performance model counted, plus static power over the modelled die area, and the clock a
TDP allows (DVFS). Pure numpy.

Per chip and step, at the rated clock (clock ratio s = 1; T seconds):
    E_core = sum over operators of count x (FLOPs x e_op(precision, engine)
             + sum over on-chip levels of bytes_l x e_byte(level))
    E_off  = sum over off-chip levels of bytes_l x e_byte(level) + link bytes x e_byte(c2c)
    P      = P_static + P_active + (E_core + E_off) / T,  P_static = W/mm^2 x die area,
             P_active = active W per unit x units (clocked cores, whatever they compute)
Dynamic voltage and frequency scaling: at clock ratio s the core voltage is
v(s) = max(VOLTAGE_FLOOR, s) of its rated value (V rises with f across the DVFS range), so
core energy per operation scales with v^2 and the clocked cores' power with s v^2 (about
s^3); DRAM, host and link energy per byte do not depend on the core clock. Every
operator's compute and on-chip memory time stretches by 1/s, its off-chip memory time does
not, and fixed costs and collectives stay as they are (`overlap` is the kernel's imperfect
overlap of the two, kernel.OVERLAP):
    T(s)   = sum over operators of count x (overlap(max(compute, on-chip) / s, off-chip) +
             overhead) + collectives
    P(s)   = P_static + P_active s v(s)^2 + (v(s)^2 E_core + E_off) / T(s)
A chip whose P(1) exceeds its TDP runs at the largest s with P(s) <= TDP (P rises with s,
so bisection finds it); its step takes T(s) and its metrics are scaled by T(s) / T(1). Host
time a serving engine adds per iteration is neither shortened by the clock nor spent with
the cores running: it adds to both times and divides the dynamic energy over a longer step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.model import die_links
from dse.model.batch import DesignBatch
from dse.model.kernel import FALLBACK, executed_precision, overlap
from dse.spec.hardware import interface_family
from dse.spec.technology import OpEnergy, TechSpec


@dataclass(frozen=True)
class StepEnergy:
    """Energy of one step of one chip, J, [N] arrays, by where it is spent."""

    compute: np.ndarray
    memory: np.ndarray  # [N, L] per level
    links: np.ndarray

    @property
    def total(self) -> np.ndarray:
        return self.compute + self.memory.sum(axis=1) + self.links


# A sliced cache's energy per byte grows with its capacity (docs: guide/hardware.md, Caches as
# slices). The node files give `cache` as a 1 MB SRAM access plus ~4 mm of on-chip wire (Dally's
# wire energy; TPUv4i Table 2: 1 MB SRAM 1.75 pJ/B against 0.94-1.06 pJ/B for the 8-32 KB arrays
# of the node's `sram` figure, so the array share is 1.75 x `sram`). The rest is wire, and
# wire energy is proportional to distance: the mean distance between two points of a square
# is 0.52 x its side, and the side grows with sqrt(capacity) at a fixed density (the
# wire-delay argument of CACTI: Muralimanohar, Balasubramonian and Jouppi, "CACTI 6.0",
# HP Labs 2009, where global-wire H-tree energy dominates large caches). ~4 mm is the mean
# distance across 50 MiB of N4/N5 cache (0.81 mm2/MiB: side 6.4 mm, mean 3.3 mm), so the
# table's figure is taken to hold at 50 MiB, GH100's L2, which leaves h100-sxm's own energy
# as it was. Per-access latency is not modelled (the performance model is throughput-bound
# per operator, with a fixed per-operator overhead), so no latency rule is needed.
CACHE_ARRAY_SHARE = 1.75  # x the node's `sram` J/B: a 1 MB array access (TPUv4i Table 2)
CACHE_ENERGY_CAPACITY = 50 * 2**20  # bytes at which the node's `cache` J/B holds (above)


def sliced_cache_energy(cache: float, sram: float, capacity: np.ndarray) -> np.ndarray:
    """J per byte of a sliced cache of `capacity` bytes ([N]): the array access
    (CACHE_ARRAY_SHARE x `sram`, capped at `cache`) plus the node's wire share, scaled by
    sqrt(capacity / CACHE_ENERGY_CAPACITY)."""
    array = min(CACHE_ARRAY_SHARE * sram, cache)
    return array + (cache - array) * np.sqrt(capacity / CACHE_ENERGY_CAPACITY)


def level_energy(db: DesignBatch, tech: TechSpec) -> np.ndarray:
    """[N, L] J per byte moved at each level: SRAM and caches by kind (a cache given as
    slices by its capacity, `sliced_cache_energy`); DRAM by its generation
    (dse/data/memory.yaml), else by its interface (an interface name in the node file
    overrides its family); host memory and CXL add the link that reaches
    them (PCIe, or NVLink-C2C)."""
    table = tech.energy.memory.per_byte

    def by_interface(iface: str | None) -> float:
        if iface is not None and iface in table:
            return table[iface]
        return table[interface_family(iface) or "host"]

    spec = db.spec
    hl = spec.interconnect.host_link if spec.interconnect else None
    host_link = by_interface(hl.interface) if hl is not None and hl.interface else \
        table["host"]
    out: list[float | np.ndarray] = []
    for i, level in enumerate(spec.memory):
        if level.kind == "cache" and level.slices is not None:
            out.append(sliced_cache_energy(table["cache"], table["sram"], db.capacity[:, i]))
        elif level.kind in ("register", "sram"):
            out.append(table["sram"])
        elif level.kind == "cache":
            out.append(table["cache"])
        elif level.kind == "host":
            media = by_interface(level.interface) if level.interface not in (
                None, "cxl", "nvlink-c2c", "pcie4", "pcie5", "pcie6") else 0.0
            out.append(host_link + media)
        elif level.interface == "cxl":
            out.append(db.by_generation(i, lambda g: g.energy, by_interface("cxl")
                                        if "cxl" in table else table["host"] + table["ddr"]))
        else:  # a catalogue generation's energy per bit replaces the node's family figure
            out.append(db.by_generation(i, lambda g: g.energy, by_interface(level.interface)))
    per_level = np.stack([np.broadcast_to(np.asarray(e, dtype=float), (db.n,)) for e in out],
                         axis=1)
    # a package of several dies: a DRAM byte crosses die-to-die joints (dse.model.die_links)
    crossing = die_links.crossing_energy(db, tech)
    return per_level + np.where(die_links.package_dram(db)[None, :], crossing[:, None], 0.0)


def _op_energy(table: OpEnergy, precision: str) -> float:
    for p in (*FALLBACK.get(precision, (precision,)), "bf16", "fp16"):
        if p in table.per_op:
            return table.per_op[p]
    raise AssertionError("a node file always has bf16 or fp16")  # pragma: no cover


def matrix_op_energy(db: DesignBatch, tech: TechSpec, precision: str,
                     calibrated: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """[N] J per matrix FLOP at `precision` (as the engine executes it) at the rated clock:
    the chip's own figure (`power.matrix_energy`, or `calibrated` when it gives none); a
    precision it does not list costs a listed one's energy x the ratio of their peaks (equal
    power at peak); the node's per-style constant where the chip has neither."""
    table = calibrated if calibrated is not None else db.matrix_energy
    p = executed_precision(db.matrix_peak, precision)
    if p in table:
        return np.broadcast_to(table[p], (db.n,))
    ref = next((q for q in table if q in db.matrix_peak), None)
    if ref is not None and p in db.matrix_peak:
        with np.errstate(divide="ignore", invalid="ignore"):
            return table[ref] * db.matrix_peak[ref] / db.matrix_peak[p]
    style = db.spec.compute.style or "gpu"
    return np.full(db.n, _op_energy(getattr(tech.energy, style), p))


def step_energy(db: DesignBatch, tech: TechSpec, precision: np.ndarray, matrix: np.ndarray,
                count: np.ndarray, flops: np.ndarray, traffic: np.ndarray,
                link_bytes: np.ndarray,
                calibrated: dict[str, np.ndarray] | None = None) -> StepEnergy:
    """Energy of the operators and collectives of one step at the rated clock, per chip as
    listed (the caller divides by the pipeline stages a latency-phase listing covers).
    precision, matrix: [J]; link_bytes: [J] or [N, J]; count, flops: [N, J]; traffic:
    [N, I, L] bytes per instance of the first I (the operators; collectives move no bytes
    through levels); `calibrated`: matrix energies for a chip without its own."""
    per_op = np.zeros((db.n, len(precision)))
    for p in {str(q) for q in precision if q}:
        cols = np.array([q == p for q in precision])
        m_cols, v_cols = cols & matrix, cols & ~matrix
        if m_cols.any():
            per_op[:, m_cols] = matrix_op_energy(db, tech, p, calibrated)[:, None]
        if v_cols.any():
            per_op[:, v_cols] = _op_energy(tech.energy.vector,
                                           executed_precision(db.vector_peak, p))
    compute = np.einsum("nj,nj->n", count * flops, per_op)
    ops = traffic.shape[1]  # traffic covers the first operators; collectives move none
    memory = np.einsum("nj,njl->nl", count[:, :ops], traffic) * level_energy(db, tech)
    links = (count * link_bytes).sum(axis=-1) * tech.energy.memory.per_byte["c2c"] \
        if np.size(link_bytes) else np.zeros(db.n)
    return StepEnergy(compute=compute, memory=memory, links=links)


# DVFS. Core voltage rises with the clock across the DVFS range, so energy per operation
# scales with V^2 and clocked power with f V^2. We take V proportional to f down to a floor:
# GPU voltage/frequency tables span roughly 0.65-1.1 V over their upper clock range (NVIDIA
# GPUs report ~0.7 V at their lowest P-state clocks and ~1.05-1.1 V at boost; Guerreiro et
# al., "GPU static modeling using PTX and deep structured learning", IEEE Access 2019, and
# Mei et al., "A survey and measurement study of GPU DVFS on energy conservation", 2017,
# measure core voltage falling roughly linearly with frequency above ~60% of the top
# clock): VOLTAGE_FLOOR = 0.65 of the rated voltage. Below it power falls only linearly.
VOLTAGE_FLOOR = 0.65
# The lowest clock the solver will choose, as a share of the rated clock (H100: 210 MHz of
# 1.98 GHz is its lowest supported application clock, nvidia-smi -q -d SUPPORTED_CLOCKS).
MIN_CLOCK = 0.1
_BISECTIONS = 40  # halvings of [MIN_CLOCK, 1]: the clock to within 1e-12


@dataclass(frozen=True)
class StepTerms:
    """One step's time at the rated clock split by how it follows the core clock, [N, J]
    per instance with counts: `scaled` (compute and on-chip memory terms, max of the two),
    `fixed` (off-chip memory terms), `overhead` (per-launch costs and collectives); an
    operator's time is overlap(scaled, fixed) + overhead, as in performance.op_times."""

    count: np.ndarray
    scaled: np.ndarray
    fixed: np.ndarray
    overhead: np.ndarray

    def take(self, rows: np.ndarray) -> StepTerms:
        """The terms of the designs `rows`."""
        return StepTerms(self.count[rows], self.scaled[rows], self.fixed[rows],
                         self.overhead[rows])

    def total(self, s: np.ndarray) -> np.ndarray:
        """[N] step time at clock ratio s ([N])."""
        t = overlap(self.scaled / s[:, None], self.fixed) + self.overhead
        return np.einsum("nj,nj->n", self.count, t)


def step_terms(db: DesignBatch, count: np.ndarray, time: np.ndarray, compute: np.ndarray,
               traffic: np.ndarray) -> StepTerms:
    """Split each operator's time (`time`, [N, J]: the first I operators then collectives)
    into its clock-scaled, fixed and overhead parts from its compute time ([N, I]) and its
    bytes per level ([N, I, L]) over the achieved bandwidths."""
    i, on = traffic.shape[1], db.on_chip
    with np.errstate(divide="ignore", invalid="ignore"):
        per_level = np.nan_to_num(traffic / db.bandwidth[:, None, :], nan=0.0)
    scaled = np.zeros_like(time)
    fixed = np.zeros_like(time)
    comp = np.where(np.isfinite(compute), compute, 0.0)
    scaled[:, :i] = np.maximum(comp, per_level[:, :, on].max(axis=2, initial=0.0))
    fixed[:, :i] = per_level[:, :, ~on].max(axis=2, initial=0.0)
    roof = overlap(scaled, fixed)
    overhead = np.maximum(time - roof, 0.0)  # launches x op_overhead; collectives whole
    overhead[:, i:] = time[:, i:]
    return StepTerms(count=count, scaled=scaled, fixed=fixed, overhead=overhead)


@dataclass(frozen=True)
class PowerResult:
    """Average power of one chip and the clock a TDP allows, [N] arrays."""

    power_w: np.ndarray  # average power per chip, W (at most the TDP)
    static_w: np.ndarray
    demand_w: np.ndarray  # what the chip would draw at the rated clock
    clock_ratio: np.ndarray  # core clock / rated clock (1: not power-limited)
    stretch: np.ndarray  # step time multiplier T(s) / T(1) (1: not power-limited)
    limited: np.ndarray  # bool: power-limited
    feasible: np.ndarray  # bool: False when the TDP cannot be met at any clock
    reason: np.ndarray  # why not, per design ("" where feasible)


def chip_power(db: DesignBatch, energy: StepEnergy, terms: StepTerms, static_w: np.ndarray,
               active_w: np.ndarray, tdp_w: np.ndarray, idle_s: float = 0.0) -> PowerResult:
    """Average power per chip and the clock its TDP allows (`tdp_w`, [N] W, NaN: no cap):
    energy at the rated clock, the step's time terms, static and clocked-core power, [N];
    `idle_s`: time per step the chip waits for its host (a serving engine's overhead per
    iteration), which no clock shortens and in which the cores draw only static power."""
    on = db.on_chip
    e_core = energy.compute + energy.memory[:, on].sum(axis=1)
    e_off = energy.memory[:, ~on].sum(axis=1) + energy.links
    ones = np.ones(db.n)
    t1 = terms.total(ones) + idle_s

    def power(s: np.ndarray, rows: np.ndarray | slice = slice(None),
              part: StepTerms = terms) -> np.ndarray:
        """[len(rows)] W at clock ratios s of the designs `rows`, whose terms are `part`."""
        v2 = np.maximum(VOLTAGE_FLOOR, s) ** 2
        busy = part.total(s)
        t = busy + idle_s
        with np.errstate(divide="ignore", invalid="ignore"):
            dyn = np.where(t > 0, (v2 * e_core[rows] + e_off[rows]
                                   + active_w[rows] * s * v2 * busy) / t, 0.0)
        return static_w[rows] + dyn

    demand = power(ones)
    capped = np.isfinite(tdp_w)
    limited = capped & (demand > tdp_w * (1.0 + 1e-12))
    s = ones.copy()
    rows = np.flatnonzero(limited)
    if rows.size:
        part = terms.take(rows)  # the limited designs' terms, once for every bisection
        lo, hi = np.full(rows.size, MIN_CLOCK), np.ones(rows.size)
        for _ in range(_BISECTIONS):
            mid = 0.5 * (lo + hi)
            fits = power(mid, rows, part) <= tdp_w[rows]
            lo, hi = np.where(fits, mid, lo), np.where(fits, hi, mid)
        s[rows] = lo
    power_w = np.where(limited, power(s), demand)
    reason = np.full(db.n, "", dtype=object)
    static_over = capped & (static_w >= tdp_w)
    floor_over = capped & ~static_over & limited & (power_w > tdp_w * (1.0 + 1e-9))
    for i in np.flatnonzero(static_over):
        reason[i] = f"static power {static_w[i]:.0f} W exceeds the {tdp_w[i]:.0f} W TDP"
    for i in np.flatnonzero(floor_over):
        reason[i] = (f"{power_w[i]:.0f} W even at the lowest clock ({MIN_CLOCK:.0%} of the "
                     f"rated one) exceeds the {tdp_w[i]:.0f} W TDP")
    with np.errstate(divide="ignore", invalid="ignore"):
        stretch = np.where(t1 > 0, (terms.total(s) + idle_s) / t1, 1.0)
    return PowerResult(power_w=np.minimum(power_w, np.where(capped, tdp_w, np.inf)),
                       static_w=static_w, demand_w=demand, clock_ratio=s, stretch=stretch,
                       limited=limited, feasible=~(static_over | floor_over), reason=reason)
