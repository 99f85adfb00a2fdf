"""A study as resolved (dse.search.space.load_study): its parameters as Optuna distributions
in SI units (Param), its workloads ready to evaluate (Job), its objectives (Goal), and the
Study that holds them with its constraints and its digest."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import optuna

from dse import phases
from dse.model.execution import Execution
from dse.model.metrics import METRICS as METRIC_DEFS
from dse.spec.hardware import HardwareSpec
from dse.spec.study import (
    Objective,
    StudySpec,
    StudyWorkload,
)
from dse.spec.technology import TechSpec
from dse.spec.workload import WorkloadSpec
from dse.workloads import kind_of

# Metric -> Evaluation.metrics key, for the metrics that are one of them.
DIRECT = {"energy_per_token": "energy_per_token_j", "energy_per_sample": "energy_per_sample_j",
          "latency": "latency_s", "ttft": "ttft_s", "tpot": "tpot_s",
          "power": "power_per_chip_w"}


METRIC_UNIT = {"throughput_per_mm2": "/mm2", "throughput_per_watt": "/W",
               "throughput_per_dollar": "/USD", "cost": "USD",
               "energy_per_token": "J", "energy_per_sample": "J", "latency": "s", "ttft": "s",
               "tpot": "s", "power": "W", "area": "mm2"}


@dataclass(frozen=True)
class Param:
    """One varied path: its Optuna distribution (SI units) and its table column."""

    key: str  # as written in the study file
    path: str  # canonical (memory levels by name)
    column: str  # unit-suffixed column name
    integer: bool
    low: float | None
    high: float | None
    step: float | None
    log: bool
    choices: tuple[float, ...] | None
    labels: tuple[str, ...] | None = None  # a memory generation's choices by name: what
    # the sampler, its storage and the dashboard hold (the model takes catalogue indices)

    def distribution(self) -> optuna.distributions.BaseDistribution:
        if self.choices is not None:
            return optuna.distributions.CategoricalDistribution(self.labels or self.choices)
        assert self.low is not None and self.high is not None
        if self.integer:
            return optuna.distributions.IntDistribution(
                int(self.low), int(self.high), log=self.log, step=int(self.step or 1))
        return optuna.distributions.FloatDistribution(self.low, self.high, log=self.log,
                                                      step=self.step)

    def value(self, stored: object) -> float:
        """A sampled (stored) value as the model takes it: a name as its catalogue index."""
        if self.labels is not None and isinstance(stored, str):
            return self.choices[self.labels.index(stored)]  # type: ignore[index]
        return float(stored)  # type: ignore[arg-type]

    def stored(self, value: float) -> float | int | str:
        """A model value as the sampler stores it (whole numbers as int, names by name)."""
        if self.labels is not None:
            return self.labels[self.choices.index(float(value))]  # type: ignore[union-attr]
        return round(value) if self.integer and self.choices is None else float(value)

    def grid(self, points: int) -> np.ndarray:
        """The values a grid takes: the choices, every step, or `points` spread over the
        range (geometrically for a log range; whole numbers rounded and deduplicated)."""
        if self.choices is not None:
            return np.array(self.choices, dtype=float)
        assert self.low is not None and self.high is not None
        if self.step is not None or (self.integer and self.high - self.low < points):
            step = self.step or 1.0
            return self.low + step * np.arange(math.floor((self.high - self.low) / step
                                                          + 1e-9) + 1)
        values = (np.geomspace(self.low, self.high, points) if self.log
                  else np.linspace(self.low, self.high, points))
        return np.unique(np.round(values)) if self.integer else values


@dataclass(frozen=True)
class Job:
    """A workload scenario of the study, resolved."""

    name: str
    spec: StudyWorkload
    workload: WorkloadSpec
    scenario: str | None  # the workload file's scenario name (None: its first, phase replaced)
    phase: str
    fields: dict[str, Any]  # scenario fields replaced (batch, seq_in ...)
    execution: Execution  # on the workload's own chips (the base's and references' system)
    resolved: object = None  # the scenario as resolved (to check a varied chip count's split)

    @property
    def throughput_metric(self) -> str:
        """What `maximize: throughput` ranks by (dse.phases: Phase.throughput): tokens, or
        samples for a kind whose samples are not token sequences (a recommender's pairs)."""
        return phases.get(self.phase).throughput_of(kind_of(self.workload).tokens)

    @property
    def throughput_unit(self) -> str:
        """The unit of the system's throughput ("tokens/s"), from dse.model.metrics."""
        unit = METRIC_DEFS[self.throughput_metric].unit
        return unit if isinstance(unit, str) else unit.unit

    @property
    def throughput_per_chip(self) -> bool:
        """The phase's throughput metric is per chip: the system's is chips times it."""
        return phases.get(self.phase).throughput_per_chip


@dataclass(frozen=True)
class Goal:
    """One objective: a metric, its direction, and the jobs it combines (none: the design's
    own metric)."""

    name: str
    spec: Objective
    jobs: tuple[str, ...]
    weights: tuple[float, ...]  # normalized to sum 1

    @property
    def relative(self) -> bool:
        """Several workloads: a weighted geometric mean of each relative to the base chip."""
        return len(self.jobs) > 1

    def unit(self, jobs: dict[str, Job]) -> str:
        if self.relative:
            return "x base"
        metric = self.spec.metric
        if metric in ("throughput", "throughput_per_mm2", "throughput_per_watt",
                      "throughput_per_dollar"):
            return jobs[self.jobs[0]].throughput_unit + METRIC_UNIT.get(metric, "")
        return METRIC_UNIT[metric]


@dataclass(frozen=True)
class Study:
    """A study ready to run."""

    spec: StudySpec
    path: Path
    hardware: HardwareSpec
    tech: TechSpec | None
    params: tuple[Param, ...]
    jobs: dict[str, Job]
    goals: tuple[Goal, ...]
    references: tuple[tuple[str, HardwareSpec, TechSpec | None], ...]
    area_budget: float | None = None  # mm2: constraints.area, or area_of's modelled area
    cost_budget: float | None = None  # USD per chip: constraints.cost, or cost_of's cost
    # USD per workload's system (cost per chip x its chips): constraints.system_cost, or
    # system_cost_of's cost x the workload's own chips
    system_budget: dict[str, float] | None = None
    fixed: dict[str, float] = field(default_factory=dict)  # canonical path -> SI: `set`
    alternatives: dict[str, Study] = field(default_factory=dict)  # name -> its own study
    alternative: str | None = None  # this study's name among its parent's alternatives

    def designs(self, params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The overrides that build designs `params` (canonical path -> [N] SI values): the
        parameters and the study's fixed values (`set`), broadcast to N."""
        if not self.fixed or not params:
            return params
        n = len(next(iter(params.values())))
        return {**{k: np.full(n, v) for k, v in self.fixed.items()}, **params}

    @property
    def directions(self) -> list[Literal["maximize", "minimize"]]:
        return [g.spec.direction for g in self.goals]

    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        return {p.path: p.distribution() for p in self.params}

    def fingerprint(self) -> str:
        """A digest of what decides a trial's result, as resolved (the base chip, the
        parameters' ranges, each workload and scenario, the objectives, the constraints):
        a stored run with another digest is not resumed. Spelling does not count (a path
        written relatively or absolutely, a budget in mm2 or as a chip's area)."""
        c = self.spec.constraints
        keep = {
            "base": _dumped(self.hardware),
            "params": [(p.path, p.low, p.high, p.step, p.log, p.choices) for p in self.params],
            "jobs": {n: (j.workload.model_dump(mode="json"), j.scenario, j.fields,
                         (j.execution.chips, j.execution.tp, j.execution.pp,
                          *j.execution.more_degrees), j.spec.weight)
                     for n, j in self.jobs.items()},
            "goals": [(g.name, g.spec.metric, g.spec.direction, g.jobs, g.weights)
                      for g in self.goals],
            "constraints": (_digits(self.area_budget), c.reticle, c.shoreline,
                            _digits(c.power), c.fit)
            + ((_digits(self.cost_budget),) if self.cost_budget is not None else ()),
        }
        if self.fixed:  # only where there is one: a study without `set` keeps its digest
            keep["fixed"] = {k: _digits(v) for k, v in sorted(self.fixed.items())}
        if self.system_budget is not None:
            keep["system_cost"] = {k: _digits(v) for k, v in sorted(self.system_budget.items())}
        tp_all = sorted(n for n, j in self.jobs.items() if j.spec.tp == "all")
        if tp_all:  # the split a varied chip count follows
            keep["tp_all"] = tp_all
        text = json.dumps(keep, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _dumped(hw: HardwareSpec) -> dict:
    """The hardware as the digest reads it: the default spares policy left out, so a study
    stored before the policy existed keeps its digest (a stated policy counts)."""
    out = hw.model_dump(mode="json")
    tech = out.get("technology")
    if isinstance(tech, dict) and tech.get("spares") == "as-built":
        del tech["spares"]
    return out


def _digits(x: float | None) -> str | None:
    """A quantity to 12 significant digits: the same whether read from '800 mm2' or from
    the 799.9999999999999 that the unit conversion leaves."""
    return None if x is None else f"{x:.12g}"
