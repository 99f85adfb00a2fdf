"""Power and energy of evaluated designs: the energy of the FLOPs, bytes and link traffic the
performance model counted, plus static power over the modelled die area. Pure numpy.

Per chip and step (T seconds):
    E_dyn  = sum over operators of count x (FLOPs x e_op(precision, engine)
             + sum over levels of bytes_l x e_byte(kind of level l))
             + sum over collectives of count x bytes sent x e_byte(c2c)
    P      = P_static + E_dyn / T,   P_static = static W/mm^2 x die area
A design whose P exceeds its TDP is power-limited: its clocks drop until it fits, which a
first-order model (energy per operation unchanged) captures by stretching the step to
T' = E_dyn / (TDP - P_static); its metrics are scaled accordingly and flagged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.model.batch import DesignBatch
from dse.model.performance import FALLBACK, executed_precision
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


def level_energy(db: DesignBatch, tech: TechSpec) -> np.ndarray:
    """[L] J per byte moved at each level: SRAM and caches by kind; DRAM by its interface
    (an interface name in the node file overrides its family); host memory and CXL add the
    link that reaches them (PCIe, or NVLink-C2C)."""
    table = tech.energy.memory.per_byte

    def by_interface(iface: str | None) -> float:
        if iface is not None and iface in table:
            return table[iface]
        return table[interface_family(iface) or "host"]

    spec = db.spec
    hl = spec.interconnect.host_link if spec.interconnect else None
    host_link = by_interface(hl.interface) if hl is not None and hl.interface else \
        table["host"]
    out = []
    for level in spec.memory:
        if level.kind in ("register", "sram"):
            out.append(table["sram"])
        elif level.kind == "cache":
            out.append(table["cache"])
        elif level.kind == "host":
            media = by_interface(level.interface) if level.interface not in (
                None, "cxl", "nvlink-c2c", "pcie4", "pcie5", "pcie6") else 0.0
            out.append(host_link + media)
        elif level.interface == "cxl":
            out.append(by_interface("cxl") if "cxl" in table else table["host"] + table["ddr"])
        else:
            out.append(by_interface(level.interface))
    return np.array(out)


def _op_energy(table: OpEnergy, precision: str) -> float:
    for p in (*FALLBACK.get(precision, (precision,)), "bf16", "fp16"):
        if p in table.per_op:
            return table.per_op[p]  # type: ignore[index]
    raise AssertionError("a node file always has bf16 or fp16")  # pragma: no cover


def step_energy(db: DesignBatch, tech: TechSpec, precision: np.ndarray, matrix: np.ndarray,
                count: np.ndarray, flops: np.ndarray, traffic: np.ndarray,
                link_bytes: np.ndarray) -> StepEnergy:
    """Energy of the operators and collectives of one step, per chip as listed (the caller
    divides by the pipeline stages a latency-phase listing covers). precision, matrix: [J];
    link_bytes: [J] or [N, J]; count, flops: [N, J]; traffic: [N, I, L] bytes per
    instance of the first I (the operators; collectives move no bytes through levels)."""
    style = db.spec.compute.style or "gpu"
    m_table: OpEnergy = getattr(tech.energy, style)
    per_op = np.array([
        _op_energy(m_table, executed_precision(db.matrix_peak, p)) if is_m and p
        else _op_energy(tech.energy.vector, executed_precision(db.vector_peak, p)) if p
        else 0.0
        for p, is_m in zip(precision, matrix, strict=True)])
    compute = (count * flops) @ per_op if per_op.size else np.zeros(db.n)
    ops = traffic.shape[1]  # traffic covers the first operators; collectives move none
    memory = np.einsum("nj,njl->nl", count[:, :ops], traffic) * level_energy(db, tech)[None, :]
    links = (count * link_bytes).sum(axis=-1) * tech.energy.memory.per_byte["c2c"] \
        if np.size(link_bytes) else np.zeros(db.n)
    return StepEnergy(compute=compute, memory=memory, links=links)


@dataclass(frozen=True)
class PowerResult:
    """Average power of one chip and the stretch a TDP imposes, [N] arrays."""

    power_w: np.ndarray  # average power per chip, W (at most the TDP)
    static_w: np.ndarray
    demand_w: np.ndarray  # what the chip would draw at the unthrottled step time
    stretch: np.ndarray  # step time multiplier (1: not power-limited)
    limited: np.ndarray  # bool: power-limited
    feasible: np.ndarray  # bool: False when static power alone exceeds the TDP


def chip_power(energy_j: np.ndarray, step_s: np.ndarray, static_w: np.ndarray,
               tdp_w: np.ndarray) -> PowerResult:
    """Average power per chip from dynamic energy per step, step time and static power,
    capped at `tdp_w` ([N] W, NaN: no cap) by stretching the step (first-order DVFS)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        dynamic = np.where(step_s > 0, energy_j / step_s, 0.0)
    demand = static_w + dynamic
    capped = np.isfinite(tdp_w)
    headroom = np.where(capped, tdp_w - static_w, np.inf)
    feasible = headroom > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        stretch = np.where(feasible, np.maximum(1.0, dynamic / np.where(feasible, headroom,
                                                                          1.0)), np.nan)
    limited = feasible & (stretch > 1.0 + 1e-9)
    power = np.where(feasible, static_w + dynamic / stretch, demand)
    return PowerResult(power, static_w, demand, stretch, limited, feasible)
