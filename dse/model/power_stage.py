"""The power stage of the pipeline: area and static power of the die, each chip's energy
per operation (its own figures or its calibrated operating point), the clock its TDP
allows, and the metrics that follow (power, energy per token, sample and step, and the
time metrics stretched by a lower clock). Pure numpy, no I/O."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse import phases
from dse.model.area import PADDING, AreaResult, area
from dse.model.batch import DesignBatch, design_batch
from dse.model.cost import cost
from dse.model.power import StepEnergy, chip_power, step_energy, step_terms
from dse.model.reasons import Reasons
from dse.model.stages import Step, row_major
from dse.spec.technology import TechSpec
from dse.spec.workload import Scenario
from dse.workloads.serving import engine_of, front_end_of

POWER_METRICS = ("power_per_chip_w", "clock_hz", "energy_per_token_j", "energy_per_sample_j",
                 "energy_per_step_j", "area_per_chip_mm2", "cost_per_chip_usd",
                 "cost_usd")  # defined in dse.model.metrics
TIME_METRICS = ("latency_s", "ttft_s", "tpot_s", "step_time_s")  # stretched when the
# clock drops
# (design, node) -> energy per matrix FLOP per precision [N] J, clocked W per unit [N]
OperatingPoint = Callable[[DesignBatch, TechSpec], tuple[dict[str, np.ndarray], np.ndarray]]


def static_power(tech: TechSpec, die: AreaResult) -> np.ndarray:
    """[N] W leaking from the die's transistors: padding added for die edge holds none."""
    return tech.energy.static.per_area * (die.total_mm2 - die.components.get(PADDING, 0.0))


@dataclass(frozen=True)
class Powered:
    """What the power stage gives for N designs."""

    metrics: dict[str, np.ndarray]  # the rates, slowed where the TDP limits the clock, with
    # power, energy, area and cost added
    limited: np.ndarray  # [N] bool: slowed to fit the TDP
    energy: StepEnergy  # per chip and step, unthrottled
    reason: Reasons  # the reasons given, and the die's, the area budget's and the TDP's
    feasible: np.ndarray  # [N] bool: fits the reticle, the area budget and the TDP


def with_power(db: DesignBatch, tech: TechSpec, sc: Scenario, st: Step, raw: dict[str, Any], *,
               chips: int, stages: int, reason: Reasons, reticle: bool,
               area_budget: float | None, operating_point: OperatingPoint) -> Powered:
    """Metrics with power and energy added and the clock a TDP allows (stage `power`); see
    dse.model.power, dse.model.operating_point and dse.model.area. `operating_point`
    calibrates a chip whose file states no energies (its own file, one design)."""
    st = row_major(st)  # sums in the order one design's give (stages.row_major)
    die = area(db, tech, reticle=reticle)
    static_w = static_power(tech, die)
    calibrated, active = None, np.nan_to_num(db.active_per_unit, nan=0.0)
    if not db.matrix_energy and db.spec.tdp is not None:
        # Calibrated on the chip as its file gives it: designs varied from it (more units,
        # another TDP) keep its energy per operation and move along the DVFS curve. A chip
        # without a TDP has no operating point: the node's constants and no clocked power.
        own, unit_w = operating_point(design_batch(db.spec), tech)
        calibrated = {p: np.broadcast_to(v, (db.n,)) for p, v in own.items()}
        active = np.broadcast_to(unit_w, (db.n,))
    energy = step_energy(db, tech, st.precision, st.matrix, st.count, st.flops, st.traffic,
                         st.link_bytes, calibrated)
    # A latency-phase listing covers every pipeline stage; each chip runs 1/pp of it.
    chip_energy = StepEnergy(energy.compute / stages, energy.memory / stages,
                             energy.links / stages)
    terms = step_terms(db, st.count / stages, st.time, st.compute, st.traffic)
    ph = phases.get(sc.phase)
    host = engine_of(sc).iteration_overhead if ph.served else 0.0
    pw = chip_power(db, chip_energy, terms, static_w, active * db.units, db.tdp, host)
    s = pw.stretch
    m = {k: (v * s if k in TIME_METRICS else v / s) for k, v in raw.items()}
    front = front_end_of(sc)  # host time of the serving front-end: no clock stretches it
    if front and "ttft_s" in ph.headline:  # the phases whose first token it delays
        for k in ("ttft_s", "latency_s"):
            m[k] = raw[k] * s - front * (s - 1.0)
    system_w = chips * pw.power_w
    nan = np.full(db.n, np.nan)
    m["power_per_chip_w"] = pw.power_w
    m["clock_hz"] = db.clock * pw.clock_ratio if np.any(db.clock > 0) else nan
    m["energy_per_step_j"] = system_w * (st.total + host) * s
    m["area_per_chip_mm2"] = die.total_mm2
    priced = tech.wafer is not None and tech.market is not None  # a node with a cost model
    m["cost_per_chip_usd"] = cost(db, tech, die).total_usd if priced else nan
    m["cost_usd"] = chips * m["cost_per_chip_usd"]
    with np.errstate(divide="ignore", invalid="ignore"):
        # per unit of output: the system's power over its tokens or samples per second
        m["energy_per_token_j"] = system_w / (m["tokens_per_s_per_chip"] * chips) \
            if "token" in ph.energy_per else nan
        m["energy_per_sample_j"] = system_w / m["samples_per_s"] \
            if "sample" in ph.energy_per else nan
    fits = np.ones(db.n, dtype=bool) if area_budget is None else die.total_mm2 <= area_budget
    reason = reason.also(~die.feasible, lambda i: str(die.reason[i]))
    reason = reason.also(~fits, lambda i: f"a die area of {die.total_mm2[i]:.0f} mm2 exceeds "
                                          f"the area budget of {area_budget:.0f} mm2")
    reason = reason.also(~pw.feasible,
                         lambda i: f"{pw.reason[i]} (a {die.total_mm2[i]:.0f} mm2 die)")
    return Powered(metrics=m, limited=pw.limited, energy=chip_energy, reason=reason,
                   feasible=pw.feasible & die.feasible & fits)
