"""A study file resolved against its base chip and the workload library: parameters as
Optuna distributions in SI units, workload scenarios ready to evaluate, objectives and
constraints. Every problem is reported at once, as file:line:col: key.path: message."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import optuna
from pydantic import ValidationError

from dse import phases, units
from dse.errors import DseError, Issue, SpecError, suggest
from dse.model.execution import Execution
from dse.model.metrics import METRICS as METRIC_DEFS
from dse.search import chips
from dse.spec import assumptions, scenario_fields, vocabulary
from dse.spec.hardware import HardwareSpec
from dse.spec.load import issue_at, load_design, load_workload, read_yaml, validate
from dse.spec.study import (
    DESIGN_METRICS,
    Alternative,
    Objective,
    Parameter,
    StudySpec,
    StudyWorkload,
)
from dse.spec.technology import TechSpec
from dse.spec.types import MAX_WHOLE
from dse.spec.workload import WorkloadSpec
from dse.workloads import execution_issues, kind_of, resolve_scenario

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
                         (j.execution.chips, j.execution.tp, j.execution.pp), j.spec.weight)
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


def _strip(error: DseError, path: str) -> str:
    """A design-path error as a study words it at the key of `path`: its message alone
    when it is about that path (its structured field), else with its field named."""
    return error.message if error.field == path and not error.also else str(error)


def _value(data, at: tuple, path: str, term, value: object, clock: float | None,
           issues: list[Issue]) -> float | None:
    """One value a study file gives for design path `path` (a quantity with its unit, a
    plain number for a count), in SI units; None (an issue at `at`) when it is not one."""
    # a value in a study file is text a person wrote: a quantity carries its unit, as in a
    # hardware file and --set (a number is read as SI only from the API)
    unit_less = not isinstance(value, str) or vocabulary._plain_number(value)
    if term.kind is not None and unit_less and not isinstance(value, bool):
        issues.append(issue_at(data, at, units.bare_number(value, term.kind)))
        return None
    try:
        return float(vocabulary.convert(path, term, value, clock)[0])
    except DseError as e:
        issues.append(issue_at(data, at, _strip(e, path)))
        return None


def _param(data, key: str, p: Parameter, hw: HardwareSpec, issues: list[Issue],
           loc: tuple | None = None, inherited: dict[str, tuple] | None = None,
           workloads: dict[str, StudyWorkload] | None = None) -> Param | None:
    """Parameter `key` resolved; its problems at `loc` (default: parameters.<key>), a field
    named in `inherited` at that place instead (an alternative's change keeps the study's
    other fields, whose problems are where the study file writes them)."""
    loc = loc or ("parameters", key)
    inherited = inherited or {}
    if assumptions.is_assumption(key):
        issues.append(issue_at(data, loc, f"{assumptions.NOT_VARIED}; fix it with set: (the "
                                          "study's, or an alternative's to compare values)"))
        return None
    try:
        path, term = (_workload_term(key, workloads) if chips.is_workload_path(key)
                      else vocabulary.canonical(hw, key))
    except DseError as e:
        issues.append(issue_at(data, loc, _strip(e, key)))
        return None
    clock = hw.compute.clock
    if term.categorical and p.choices is None:
        issues.append(issue_at(data, loc, "a memory generation takes choices (a list of "
                                          "catalogue names), not a range"))
        return None

    def one(field: str | tuple[str, int], value: object) -> float | None:
        name = field[0] if isinstance(field, tuple) else field
        where = inherited.get(name, loc)
        at = (*where, *field) if isinstance(field, tuple) else (*where, field)
        return _value(data, at, path, term, value, clock, issues)

    if p.choices is not None:
        values = [one(("choices", i), v) for i, v in enumerate(p.choices)]
        if any(v is None for v in values):
            return None
        unique = tuple(dict.fromkeys(float(v) for v in values if v is not None))
        if term.categorical:  # a generation of another family than the level's
            from dse.model.batch import design_batch
            try:
                design_batch(hw, {path: np.array(unique)})
            except DseError as e:
                issues.append(issue_at(data, (*inherited.get("choices", loc), "choices"),
                                       _strip(e, path)))
                return None
        return Param(key, path, vocabulary.column_name(path), term.integer, None, None, None,
                     False, unique, tuple(vocabulary.generation_names(unique))
                     if term.categorical else None)
    low, high = one("low", p.low), one("high", p.high)
    step = None if p.step is None else one("step", p.step)
    if low is None or high is None or (p.step is not None and step is None):
        return None
    step_at = (*inherited.get("step", loc), "step")
    if not low < high:
        issues.append(issue_at(data, loc, f"empty range: low ({p.low}) must be below high "
                                          f"({p.high})"))
        return None
    if step is not None and not step > 0:
        issues.append(issue_at(data, step_at, f"expected a step > 0, found {p.step}"))
        return None
    if step is not None and step > high - low:
        issues.append(issue_at(data, step_at, f"step {p.step} is wider than the range "
                                              f"({p.low} to {p.high})"))
        return None
    if term.integer and step is not None and step != round(step):
        issues.append(issue_at(data, step_at, "expected a whole step"))
        return None
    if step is not None:  # Optuna needs high on the step grid
        high = low + math.floor((high - low) / step + 1e-9) * step
    return Param(key, path, vocabulary.column_name(path), term.integer, low, high, step,
                 p.log, None)


# A workload's chip count as a parameter (dse.search.chips): a whole number >= 1.
CHIPS_TERM = vocabulary.Term("workloads.<name>.chips", None, True, None, 1.0,
                             float(MAX_WHOLE), None, "chips that run the workload")


def _workload_term(key: str, workloads: dict[str, StudyWorkload] | None
                   ) -> tuple[str, vocabulary.Term]:
    """(path, term) of a workload parameter `workloads.<name>.chips`; DseError naming what
    is wrong (an unknown workload, a field other than chips)."""
    name, field_ = chips.split_key(key)
    names = list(workloads or {})
    if name not in names:
        raise DseError(f"'{name}' is not a workload of this study{suggest(name, names)}; "
                       f"expected one of: {', '.join(names)}", field=key, domain="design",
                       value=name, rule=f"one of: {', '.join(names)}")
    if field_ != chips.FIELD:
        raise DseError(f"a study varies a workload's chips only (its split follows them: "
                       f"tp: all), not '{field_}'", field=key, domain="design", value=field_)
    return key, CHIPS_TERM


def _job(data, name: str, w: StudyWorkload, near: Path, issues: list[Issue]) -> Job | None:
    loc = ("workloads", name)
    try:
        wl = load_workload(referenced(w.workload, near))
    except SpecError as e:
        issues.append(issue_at(data, (*loc, "workload"), _messages(e)))
        return None
    fields: dict[str, Any] = {k: getattr(w, k) for k in scenario_fields.SIMPLE
                              if getattr(w, k) is not None}
    try:
        sc_name, sc = resolve_scenario(wl, w.scenario, **fields)
    except DseError as e:  # at the key that set the field (the error's structured field)
        if e.field in fields:
            issues.append(issue_at(data, (*loc, e.field), e.message))
        else:
            issues.append(issue_at(data, (*loc, "scenario" if w.scenario else "workload"),
                                   str(e)))
        return None
    if w.tp == "all" and w.chips % w.pp:
        issues.append(issue_at(data, (*loc, "tp"), f"tp: all splits every chip of a pipeline "
                               f"stage, and chips ({w.chips}) is not a multiple of pp "
                               f"({w.pp})"))
        return None
    tp = w.chips // w.pp if w.tp == "all" else w.tp
    problems = [str(p) for p in execution_issues(wl, sc, tp, w.pp)[0]]  # as a study names them
    if tp * w.pp > w.chips or w.chips % (tp * w.pp):
        problems.append(f"chips ({w.chips}) must be a multiple of tp x pp ({tp * w.pp})")
    if problems:
        issues.append(issue_at(data, loc, "; ".join(problems)))
        return None
    ex = Execution(chips=w.chips, tp=tp, pp=w.pp)
    # a phase the workload has no scenario of runs its first scenario with the phase
    # replaced (resolve_scenario names it "<phase> (default)"): evaluate resolves it again
    named = sc_name if sc_name in wl.scenarios else w.scenario
    return Job(name, w, wl, named, sc.phase, fields, ex, sc)


def _goal(data, name: str, o: Objective, jobs: dict[str, StudyWorkload],
          issues: list[Issue]) -> Goal | None:
    if o.metric in DESIGN_METRICS:
        return Goal(name, o, (), ())
    names = o.workloads if o.workloads is not None else list(jobs)
    for i, n in enumerate(names):
        if n not in jobs:
            issues.append(issue_at(data, ("objectives", name, "workloads", i),
                                   f"'{n}' is not a workload of this study"
                                   f"{suggest(n, jobs)}; expected one of: {', '.join(jobs)}"))
            return None
    if len(set(names)) != len(names):
        issues.append(issue_at(data, ("objectives", name, "workloads"),
                               "a workload is listed twice"))
        return None
    w = np.array([jobs[n].weight for n in names])
    return Goal(name, o, tuple(names), tuple(float(x) for x in w / w.sum()))


def referenced(ref: str, near: Path) -> str | Path:
    """A chip or workload a study file names: a path (it ends in .yaml or has a folder)
    relative to the study file's folder `near`, or a shipped name as it is."""
    if ref.endswith((".yaml", ".yml")) or "/" in ref:
        p = Path(ref).expanduser()
        return p if p.is_absolute() else near / p
    return ref


def _messages(e: SpecError) -> str:
    """A referenced file's problems as one message (their own positions kept)."""
    return "; ".join(i.message if i.line is None else str(i) for i in e.issues)


def _hardware(ref: str, near: Path) -> tuple[HardwareSpec, TechSpec | None, str | None]:
    """(spec, process-node constants or None, why none) of a chip named in a study file."""
    return load_design(referenced(ref, near))


def load_study(path: str | Path) -> Study:
    """Read, validate and resolve a study file (a path, or a shipped study's name)."""
    from dse.spec.library import resolve

    file = resolve(path, "study")
    data = read_yaml(file, display=str(file))
    if "name" not in data:
        data.put("name", file.stem, data.pos, data.pos)
    spec = validate(StudySpec, data)
    assert isinstance(spec, StudySpec)
    issues: list[Issue] = []
    near = file.parent
    try:
        hw, tech, no_area = _hardware(spec.base, near)
    except SpecError as e:
        raise SpecError([issue_at(data, ("base",), _messages(e))]) from None
    params = [_param(data, k, p, hw, issues, workloads=spec.workloads)
              for k, p in spec.parameters.items()]
    seen: dict[str, str] = {}
    for p in params:
        if p is not None and p.path in seen:
            issues.append(issue_at(data, ("parameters", p.key),
                                   f"the same path as '{seen[p.path]}'"))
        elif p is not None:
            seen[p.path] = p.key
    hw = _assumed(data, ("set",), spec.set or {}, hw, issues)
    fixed = _fixed(data, ("set",), spec.set or {}, hw, issues)
    for p in params:
        if p is not None and p.path in fixed:
            issues.append(issue_at(data, ("set", next(k for k in spec.set or {} if
                                                      not assumptions.is_assumption(k) and
                                                      vocabulary.canonical(hw, k)[0] == p.path)),
                                   f"the study varies this path (parameters.{p.key}): "
                                   "give it a range or a fixed value, not both"))
    jobs = {n: _job(data, n, w, near, issues) for n, w in spec.workloads.items()}
    goals = [_goal(data, n, o, spec.workloads, issues) for n, o in spec.objectives.items()]
    budget = spec.constraints.area
    if spec.constraints.area_of is not None:
        budget = _modelled_area(data, spec.constraints.area_of, near, issues)
    cost_budget = spec.constraints.cost
    if spec.constraints.cost_of is not None:
        cost_budget = _modelled_cost(data, spec.constraints.cost_of, near, issues)
    system_budget = _system_budget(data, spec.constraints, spec.workloads, near, issues)
    needs_cost = cost_budget is not None or system_budget is not None or any(
        g is not None and g.spec.metric in ("cost", "throughput_per_dollar") for g in goals)
    if needs_cost and tech is not None and tech.wafer is None:
        issues.append(issue_at(data, ("base",), "the cost constraint and objectives need the "
                               f"cost model, and node {tech.node} gives no wafer: constants"))
    needs_area = (needs_cost or budget is not None or spec.constraints.shoreline
                  or spec.constraints.reticle
                  or any(g is not None and g.spec.metric in ("area", "throughput_per_mm2")
                         for g in goals))
    if needs_area and tech is None:
        issues.append(issue_at(data, ("base",), "the area constraints and objectives need "
                               f"the area model, and {no_area}"))
    if spec.search.sampler == "gp":
        from dse.search.samplers import GP_MISSING, gp_available

        if not gp_available():
            issues.append(issue_at(data, ("search", "sampler"), GP_MISSING))
    references = []
    for i, ref in enumerate(spec.references or [spec.base]):
        try:
            r_hw, r_tech, _ = _hardware(ref, near)
        except SpecError as e:
            issues.append(issue_at(data, ("references", i), _messages(e)))
            continue
        references.append((r_hw.name, r_hw, r_tech))
    main = Study(spec=spec, path=file, hardware=hw, tech=tech,
                 params=tuple(p for p in params if p is not None),
                 jobs={n: j for n, j in jobs.items() if j is not None},
                 goals=tuple(g for g in goals if g is not None), references=tuple(references),
                 area_budget=budget, cost_budget=cost_budget, system_budget=system_budget,
                 fixed=fixed)
    alternatives = {}
    for name, alt in (spec.alternatives or {}).items():
        resolved = _alternative(data, name, alt, main, params, issues)
        if resolved is not None:
            alternatives[name] = resolved
    if issues:
        raise SpecError(issues)
    return replace(main, alternatives=alternatives) if alternatives else main


def _modelled(what: str, data, ref: str, near: Path, issues: list[Issue], loc: tuple
              ) -> float | None:
    """The area model's total (mm2, `what` "area") or the cost model's cost to make (USD,
    "cost") of chip `ref` as its file gives it; None, with the issue at `loc`, where the
    model cannot price it."""
    from dse.model.area import area
    from dse.model.batch import design_batch
    from dse.model.cost import cost

    try:
        spec, tech, why = _hardware(ref, near)
    except SpecError as e:
        issues.append(issue_at(data, loc, _messages(e)))
        return None
    if tech is None or (what == "cost" and tech.wafer is None):
        why = why or f"node {tech.node} gives no wafer: constants"  # type: ignore[union-attr]
        issues.append(issue_at(data, loc, f"the {what} model cannot price {spec.name}: {why}"))
        return None
    db = design_batch(spec)
    die = area(db, tech)
    return float(die.total_mm2[0] if what == "area" else cost(db, tech, die).total_usd[0])


def _modelled_cost(data, ref: str, near: Path, issues: list[Issue],
                   loc: tuple = ("constraints", "cost_of")) -> float | None:
    """The cost model's cost to make chip `ref` as its file gives it (USD per chip)."""
    return _modelled("cost", data, ref, near, issues, loc)


def _system_budget(data, c, workloads: dict[str, StudyWorkload], near: Path,
                   issues: list[Issue], loc: tuple = ("constraints",)
                   ) -> dict[str, float] | None:
    """Each workload's system cost budget (USD) from constraints `c`: system_cost for every
    workload, or system_cost_of's modelled cost x the workload's own chips (the reference
    system it is compared with); None without either."""
    if c.system_cost is not None:
        return {n: float(c.system_cost) for n in workloads}
    if c.system_cost_of is None:
        return None
    one = _modelled_cost(data, c.system_cost_of, near, issues, loc=(*loc, "system_cost_of"))
    return None if one is None else {n: one * w.chips for n, w in workloads.items()}


def _fixed(data, loc: tuple, values: Mapping[str, object], hw: HardwareSpec,
           issues: list[Issue]) -> dict[str, float]:
    """A study's or an alternative's `set`: canonical path -> SI value (the technology-level
    assumptions apart: `_assumed`)."""
    out: dict[str, float] = {}
    for key, value in values.items():
        at = (*loc, key)
        if assumptions.is_assumption(key):
            continue
        try:
            path, term = vocabulary.canonical(hw, key)
        except DseError as e:
            issues.append(issue_at(data, at, _strip(e, key)))
            continue
        if path in out:
            issues.append(issue_at(data, at, "the same path as another key of set"))
            continue
        v = _value(data, at, path, term, value, hw.compute.clock, issues)
        if v is not None:
            out[path] = v
    return out


def _assumed(data, loc: tuple, values: Mapping[str, object], hw: HardwareSpec,
             issues: list[Issue]) -> HardwareSpec:
    """`hw` with the technology-level assumptions of a `set` (package geometry, spares
    policy: dse.spec.assumptions) applied, each checked alone so its problem is at its key;
    the study's hardware then carries them, so its digest covers them."""
    for key, value in values.items():
        if not assumptions.is_assumption(key):
            continue
        try:
            hw = assumptions.applied(hw, {key: value})
        except DseError as e:
            issues.append(issue_at(data, (*loc, key), _strip(e, key)))
    return hw


# An alternative's name is a folder of the output (<out>/alternatives/<name>/).
ALTERNATIVE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def _changed(p: Parameter, change: dict) -> Parameter:
    """Parameter `p` with an alternative's fields (`change`, the fields it gives) replacing
    its own: a range replaces choices and choices a range. ValueError when the result is
    not a parameter."""
    fields = p.model_dump(exclude_none=True)
    if "choices" in change:
        for k in ("low", "high", "step", "log"):
            fields.pop(k, None)
    elif change.keys() & {"low", "high", "step", "log"}:
        fields.pop("choices", None)
    fields.update({k: v for k, v in change.items() if v is not None})
    try:
        return Parameter(**fields)
    except ValidationError as e:
        raise ValueError("; ".join(str(x["msg"]).removeprefix("Value error, ")
                                   for x in e.errors())) from None


def _alternative(data, name: str, alt: Alternative, main: Study,
                 params: list[Param | None], issues: list[Issue]) -> Study | None:
    """Alternative `name` resolved as a study of its own: the study's parameters with the
    alternative's changes, its fixed values (`set`, the study's and then the alternative's;
    a varied path that is set is fixed), its constraints, its trials."""
    spec, hw = main.spec, main.hardware
    loc = ("alternatives", name)
    before = len(issues)
    if not ALTERNATIVE_NAME.match(name):
        issues.append(issue_at(data, loc, "an alternative's name is a folder of the output: "
                                          "letters, digits, '.', '_' or '-' (at most 64), "
                                          "starting with a letter or digit"))
    own = _fixed(data, (*loc, "set"), alt.set, hw, issues)
    hw = _assumed(data, (*loc, "set"), alt.set, hw, issues)
    fixed = {**main.fixed, **own}
    changes: dict[str, tuple[str, dict]] = {}
    for key, change in alt.params.items():
        if assumptions.is_assumption(key):
            _param(data, key, Parameter(choices=[0]), hw, issues, loc=(*loc, "params", key))
            continue
        try:
            path = key if chips.is_workload_path(key) else vocabulary.canonical(hw, key)[0]
        except DseError as e:
            issues.append(issue_at(data, (*loc, "params", key), _strip(e, key)))
            continue
        if path in own:
            issues.append(issue_at(data, (*loc, "params", key),
                                   "this alternative also sets the path (set): give a range "
                                   "or a fixed value, not both"))
            continue
        changes[path] = (key, change.model_dump(exclude_unset=True))
    raw: dict[str, Parameter] = {}
    resolved: list[Param] = []
    for (key, p), param in zip(spec.parameters.items(), params, strict=True):
        if param is None or param.path in fixed:
            continue
        if param.path not in changes:
            raw[key] = p
            resolved.append(param)
            continue
        ckey, change_ = changes.pop(param.path)
        at = (*loc, "params", ckey)
        try:
            merged = _changed(p, change_)
        except ValueError as e:
            issues.append(issue_at(data, at, str(e)))
            continue
        inherited = {f: ("parameters", key) for f in ("low", "high", "step", "choices")
                     if f not in change_}
        got = _param(data, key, merged, hw, issues, loc=at, inherited=inherited,
                     workloads=spec.workloads)
        if got is not None:
            raw[key] = merged
            resolved.append(got)
    for ckey, change_ in changes.values():  # a path the study does not vary
        at = (*loc, "params", ckey)
        try:
            new = Parameter(**{k: v for k, v in change_.items() if v is not None})
        except ValidationError as e:
            issues.append(issue_at(data, at, "; ".join(
                str(x["msg"]).removeprefix("Value error, ") for x in e.errors())))
            continue
        got = _param(data, ckey, new, hw, issues, loc=at, workloads=spec.workloads)
        if got is not None:
            raw[ckey] = new
            resolved.append(got)
    if not resolved and len(issues) == before:
        issues.append(issue_at(data, loc, "the alternative sets every parameter of the study: "
                                          "nothing is left to vary"))
    given = alt.constraints.model_dump(exclude_unset=True)
    # a budget is given once: a quantity (area, cost) replaces the study's chip (area_of,
    # cost_of) and the reverse; each budget the alternative gives is resolved again
    budgets = {"area": main.area_budget, "cost": main.cost_budget}
    changed = [q for q in budgets if q in given or f"{q}_of" in given]
    for q in changed:
        given[f"{q}_of" if q in given else q] = None
    system = "system_cost" in given or "system_cost_of" in given
    if system:
        given["system_cost_of" if "system_cost" in given else "system_cost"] = None
    constraints = spec.constraints.model_copy(update=given)
    system_budget = main.system_budget if not system else _system_budget(
        data, constraints, spec.workloads, main.path.parent, issues, loc=(*loc, "constraints"))
    modelled = {"area": _modelled_area, "cost": _modelled_cost}
    for q in changed:
        chip = getattr(constraints, f"{q}_of")
        budgets[q] = getattr(constraints, q) if chip is None else modelled[q](
            data, chip, main.path.parent, issues, loc=(*loc, "constraints", f"{q}_of"))
    budget, cost_budget = budgets["area"], budgets["cost"]
    if len(issues) > before:
        return None
    set_text = {**(spec.set or {}), **alt.set}
    for key in list(set_text):  # the study's own key for a path the alternative sets again
        if key not in alt.set and not assumptions.is_assumption(key) \
                and vocabulary.canonical(hw, key)[0] in own:
            del set_text[key]
    new_spec = spec.model_copy(update={
        "name": f"{spec.name}.{name}", "description": alt.description or spec.description,
        "parameters": raw, "constraints": constraints, "set": set_text or None,
        "alternatives": None,
        "search": spec.search.model_copy(update={"trials": alt.trials or spec.search.trials})})
    return replace(main, spec=new_spec, hardware=hw, params=tuple(resolved),
                   area_budget=budget, cost_budget=cost_budget, system_budget=system_budget,
                   fixed=fixed, alternatives={}, alternative=name)


def _modelled_area(data, ref: str, near: Path, issues: list[Issue],
                   loc: tuple = ("constraints", "area_of")) -> float | None:
    """The area model's total for chip `ref` as its file gives it (mm2)."""
    return _modelled("area", data, ref, near, issues, loc)
