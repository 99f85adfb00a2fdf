"""A batch of designs through a study: one vectorized `evaluate` per workload, then the
objectives, the constraint values (<= 0: satisfied) and the table columns of every design.
No I/O and no Optuna: arrays in, arrays out."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dse.model.area import PADDING, area, reticle_reason
from dse.model.batch import DesignBatch, design_batch
from dse.model.cost import cost
from dse.search import chips as chip_count
from dse.search import memo
from dse.search.study import DIRECT, Goal, Job, Study

# The value an infeasible design's objective is told as when its metric does not exist
# (it does not run the workload): the worst a maximized quantity can be, and for a minimized
# one a value beyond any design's. Constrained samplers rank such designs by their
# constraint violation first, so the value only orders them among themselves.
WORST_MINIMIZED = 1e30


@dataclass(frozen=True)
class Outcome:
    """What a batch of N designs gives in a study."""

    values: np.ndarray  # [N, G] objectives (NaN where the design does not run a workload)
    constraints: dict[str, np.ndarray]  # name -> [N]; <= 0 satisfied
    feasible: np.ndarray  # [N] bool: every constraint satisfied
    reason: np.ndarray  # [N] str ("" when feasible)
    columns: dict[str, np.ndarray]  # table columns, one value per design
    per_job: dict[str, dict[str, np.ndarray]]  # workload -> study metric -> [N]
    job_reason: dict[str, np.ndarray] = field(default_factory=dict)
    """workload -> [N] str: why each design does not run it ("" where it does); `reason`
    joins these with the budgets' and constraints', and no reader takes them back apart."""
    budget_reason: np.ndarray | None = None
    """[N] str: the study budgets (area, cost, power) each design exceeds, in words."""

    def told(self, directions: Sequence[str]) -> np.ndarray:
        """[N, G] objective values as told to the sampler: finite everywhere."""
        out = self.values.copy()
        for g, d in enumerate(directions):
            bad = ~np.isfinite(out[:, g])
            out[bad, g] = 0.0 if d == "maximize" else WORST_MINIMIZED
        return out


def job_metric(job: Job, metric: str, metrics: dict[str, np.ndarray], area_mm2: np.ndarray,
               cost_usd: np.ndarray | None = None, chips: np.ndarray | int | None = None
               ) -> np.ndarray:
    """[N] one study metric of one workload from `evaluate`'s metrics (system throughput;
    per mm2 of all chips' silicon; per watt of all chips; per USD of all chips' cost to
    make). `chips`: [N] chips per design (default: the workload's own)."""
    chips = job.execution.chips if chips is None else chips
    thr = metrics[job.throughput_metric]
    if job.throughput_per_chip:
        thr = thr * chips
    if metric == "throughput":
        return thr
    if metric == "throughput_per_mm2":
        return thr / (area_mm2 * chips)
    if metric == "throughput_per_watt":  # NaN: a chip without a power model
        if "power_per_chip_w" not in metrics:
            return np.full_like(thr, np.nan, dtype=float)
        return thr / (metrics["power_per_chip_w"] * chips)
    if metric == "throughput_per_dollar":  # NaN: a node without a cost model
        if cost_usd is None:
            return np.full_like(thr, np.nan, dtype=float)
        return thr / (cost_usd * chips)
    return metrics[DIRECT[metric]]


def goal_values(goal: Goal, per_job: dict[str, dict[str, np.ndarray]], area_mm2: np.ndarray,
                baseline: dict[str, dict[str, float]], cost_usd: np.ndarray | None = None
                ) -> np.ndarray:
    """[N] one objective: the design's own metric (area, cost per chip), one workload's
    metric, or the weighted geometric mean over several workloads of each relative to the
    base chip."""
    metric = goal.spec.metric
    if not goal.jobs:
        if metric == "cost":
            return np.full_like(area_mm2, np.nan) if cost_usd is None else cost_usd.copy()
        return area_mm2.copy()
    if not goal.relative:
        return per_job[goal.jobs[0]][metric]
    with np.errstate(divide="ignore", invalid="ignore"):
        log = sum(w * np.log(per_job[j][metric] / baseline[j][metric])
                  for j, w in zip(goal.jobs, goal.weights, strict=True))
        return np.exp(log)


def evaluate_designs(study: Study, params: dict[str, np.ndarray],
                     baseline: dict[str, dict[str, float]] | None = None) -> Outcome:
    """Evaluate N designs (`params`: canonical path -> [N] SI values; none: the study's
    hardware alone) on every workload of `study`."""
    hardware = {k: v for k, v in params.items() if not chip_count.is_workload_path(k)}
    db = design_batch(study.hardware, hardware or None)
    n = db.n
    cons = study.spec.constraints
    constraints: dict[str, np.ndarray] = {}
    why: dict[Any, list[str]] = defaultdict(list)  # design index (numpy int) -> what it breaks
    over: dict[Any, list[str]] = defaultdict(list)  # -> the budgets (area, cost, power) of it
    columns: dict[str, np.ndarray] = {p: np.asarray(v, dtype=float) for p, v in params.items()}
    if "bf16" in db.matrix_peak:  # what a design gives up in peak FLOPS (summary's verdict)
        columns["peak_bf16_flop_per_s"] = db.matrix_peak["bf16"]
    area_mm2, cost_usd = _chip_constraints(study, db, columns, constraints, why, over)
    job_reason: dict[str, np.ndarray] = {}
    per_job, misfit, power, system_over = _run_jobs(study, params, db, area_mm2, cost_usd,
                                                    columns, why, job_reason)
    if study.system_budget is not None and cost_usd is not None:
        # finite for the sampler: a die no wafer yields costs inf
        constraints["system_cost_usd"] = np.minimum(system_over, WORST_MINIMIZED)
    if cons.fit:
        constraints["unfit_workloads"] = np.where(misfit > 0, misfit, -1.0)
    if cons.power is not None:
        constraints["power_w"] = np.where(np.isfinite(power), power - cons.power, -1.0)
        for i in np.flatnonzero(np.isfinite(power) & (power > cons.power)):
            for book in (why, over):
                book[i].append(f"power {power[i]:.0f} W exceeds the cap of {cons.power:.0f} W")
    base = baseline if baseline is not None else {
        j: {k: float(v[0]) for k, v in d.items()} for j, d in per_job.items()}
    values = np.column_stack([goal_values(g, per_job, area_mm2, base, cost_usd)
                              for g in study.goals])
    for g, goal in enumerate(study.goals):
        columns[f"objective.{goal.name}"] = values[:, g]
    feasible = np.ones(n, dtype=bool)
    for v in constraints.values():
        feasible &= v <= 0
    if not cons.fit:
        feasible &= np.isfinite(values).all(axis=1)
    reason, budget_reason = np.full(n, "", dtype=object), np.full(n, "", dtype=object)
    for i, w in why.items():
        if not feasible[i]:
            reason[i] = "; ".join(w)
    for i, w in over.items():
        budget_reason[i] = "; ".join(w)
    return Outcome(values=values, constraints=constraints, feasible=feasible, reason=reason,
                   columns=columns, per_job=per_job, job_reason=job_reason,
                   budget_reason=budget_reason)


def _chip_constraints(study: Study, db: DesignBatch, columns: dict[str, np.ndarray],
                      constraints: dict[str, np.ndarray], why: dict[Any, list[str]],
                      over: dict[Any, list[str]]) -> tuple[np.ndarray, np.ndarray | None]:
    """(area per chip in mm2, NaN without the area model; cost per chip in USD or None) of
    each design; the chip's constraints (cost, area, reticle, interposer, shoreline, HBM
    edges) into `constraints`, their reasons into `why` (the budgets' also into `over`), its
    area columns into `columns`."""
    tech, cons, n = study.tech, study.spec.constraints, db.n
    area_mm2 = np.full(n, np.nan)
    cost_usd: np.ndarray | None = None
    if tech is None:
        return area_mm2, cost_usd
    die = area(db, tech, reticle=False)
    area_mm2 = die.total_mm2
    pad = die.components.get(PADDING, np.zeros(n))
    columns["area_per_chip_mm2"], columns["die_mm2"] = area_mm2, die.die_mm2
    if tech.wafer is not None and tech.market is not None:
        cost_usd = cost(db, tech, die).total_usd
        columns["cost_per_chip_usd"] = cost_usd
    cost_budget = study.cost_budget
    if cost_budget is not None and cost_usd is not None:
        # finite for the sampler: a die no wafer yields costs inf
        constraints["cost_usd"] = np.minimum(cost_usd - cost_budget, WORST_MINIMIZED)
        for i in np.flatnonzero(cost_usd > cost_budget):
            for book in (why, over):
                book[i].append(f"cost {cost_usd[i]:,.0f} USD exceeds the budget of "
                            f"{cost_budget:,.0f} USD")
    if die.geometry is not None:
        columns["interposer_mm2"] = die.geometry.interposer_mm2
    budget = study.area_budget
    if budget is not None:
        constraints["area_mm2"] = area_mm2 - budget
        for i in np.flatnonzero(area_mm2 > budget):
            for book in (why, over):
                book[i].append(f"area {area_mm2[i]:.0f} mm2 exceeds the budget of "
                            f"{budget:.0f} mm2")
    geo = die.geometry
    if cons.reticle:  # the die as modelled (spares, padding): the area the budget counts
        constraints["reticle_mm2"] = die.die_mm2 - tech.reticle
        for i in np.flatnonzero(die.die_mm2 > tech.reticle):
            why[i].append(reticle_reason(die.die_mm2[i], tech.reticle))
        if geo is not None:  # the interposer within its packaging technology
            constraints["interposer_mm2"] = np.where(
                geo.interposer_fits, np.minimum(
                    geo.interposer_mm2 - geo.interposer_limit_mm2, -1.0),
                np.maximum(geo.interposer_mm2 - geo.interposer_limit_mm2, 1.0))
            for i in np.flatnonzero(~geo.interposer_fits):
                why[i].append(str(geo.interposer_reason[i]))
    if cons.shoreline:
        constraints["shoreline_mm2"] = np.where(pad > 0, pad, -1.0)
        for i in np.flatnonzero(pad > 0):
            why[i].append(f"the off-chip interfaces need {die.edge_needed_mm[i]:.0f} mm "
                          f"of die edge ({pad[i]:.0f} mm2 of padding)")
        if geo is not None:  # HBM stacks per edge (package rules), beside the total edge
            short = np.ceil(geo.per_edge_needed * geo.hbm_edges - geo.capacity)
            constraints["hbm_stacks_over_edges"] = np.where(geo.edges_fit, -1.0,
                                                            np.maximum(short, 1.0))
            for i in np.flatnonzero(~geo.edges_fit):
                why[i].append(str(geo.edge_reason[i]))
    return area_mm2, cost_usd


def _run_jobs(study: Study, params: dict[str, np.ndarray], db: DesignBatch,
              area_mm2: np.ndarray, cost_usd: np.ndarray | None,
              columns: dict[str, np.ndarray], why: dict[Any, list[str]],
              job_reason: dict[str, np.ndarray]
              ) -> tuple[dict[str, dict[str, np.ndarray]], np.ndarray, np.ndarray, np.ndarray]:
    """(each workload's objective metrics, workloads each design cannot run, highest power
    per chip over the workloads it runs in W, most a workload's system is over its cost
    budget in USD) of each design; each workload's columns into `columns`, why a design
    fails into `why`."""
    n = db.n
    per_job: dict[str, dict[str, np.ndarray]] = {}
    misfit = np.zeros(n)
    power = np.full(n, -np.inf)
    system_over = np.full(n, -np.inf)  # most a workload's system is over its cost budget
    for name, job in study.jobs.items():
        n_chips = chip_count.chips_of(job, params, n)
        ev = memo.evaluate_job(study, job, params, db, n_chips, study.tech)  # shared by runs
        m = ev.metrics
        if study.system_budget is not None and cost_usd is not None:
            system = cost_usd * n_chips
            columns[f"{name}.system_cost_usd"] = system
            over = system - study.system_budget[name]
            system_over = np.fmax(system_over, over)
            for i in np.flatnonzero(over > 0):
                why[i].append(f"system cost {system[i]:,.0f} USD on {name} ({n_chips[i]:.0f} "
                              f"chips) exceeds the budget of "
                              f"{study.system_budget[name]:,.0f} USD")
        metrics = {k: job_metric(job, k, m, area_mm2, cost_usd, n_chips) for k in
                   ("throughput", "throughput_per_mm2", "throughput_per_watt",
                    "throughput_per_dollar", *DIRECT)
                   if k not in DIRECT or DIRECT[k] in m}
        per_job[name] = metrics
        misfit += ~ev.feasible
        if "power_per_chip_w" in m:
            power = np.fmax(power, np.where(ev.feasible, m["power_per_chip_w"], -np.inf))
        columns[f"{name}.{job.throughput_metric}"] = metrics["throughput"]
        for k in ("power_per_chip_w", "clock_hz", "energy_per_token_j", "energy_per_sample_j",
                  "ttft_s", "tpot_s", "latency_s", "mfu", chip_count.MEMORY_SHORT):
            if k in m and np.isfinite(m[k]).any():
                columns[f"{name}.{k}"] = m[k]
        columns[f"{name}.sequences"] = ev.sequences
        for k, v in (ev.training or {}).items():  # the training setup each design chose
            columns[f"{name}.{k}"] = v
        job_reason[name] = np.full(n, "", dtype=object)
        for i in np.flatnonzero(~ev.feasible):
            job_reason[name][i] = ev.reason[i]
            why[i].append(f"{name}: {ev.reason[i]}")
    return per_job, misfit, power, system_over


def baseline_of(study: Study) -> dict[str, dict[str, float]]:
    """Each workload's metrics on the base chip as its file gives it: the reference of
    multi-workload objectives. A base that cannot run a workload such an objective combines
    cannot be that reference: DseError naming the objective."""
    from dse.errors import DseError

    out = evaluate_designs(study, {})
    for goal in study.goals:
        for j in goal.jobs if goal.relative else ():
            if not np.isfinite(out.per_job[j]["throughput"][0]):
                raise DseError(f"{study.path}: objectives.{goal.name}: the base chip "
                               f"{study.hardware.name} does not run workload '{j}' "
                               f"({out.reason[0]}), so designs cannot be measured against it")
    return {j: {k: float(v[0]) for k, v in d.items()} for j, d in out.per_job.items()}
