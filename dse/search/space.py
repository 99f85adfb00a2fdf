"""A study file resolved against its base chip and the workload library: parameters as
Optuna distributions in SI units, workload scenarios ready to evaluate, objectives and
constraints. Every problem is reported at once, as file:line:col: key.path: message."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from dse.errors import DseError, Issue, SpecError, suggest
from dse.model.execution import Execution, training_degree_problems
from dse.search.alternatives import resolve_alternative
from dse.search.referenced import (
    load_chip,
    modelled_area,
    modelled_cost,
    problems_of,
    referenced,
    system_budgets,
)
from dse.search.study import Goal, Job, Param, Study
from dse.search.study_params import fixed_values, resolve_param, with_assumptions
from dse.spec import assumptions, scenario_fields, vocabulary
from dse.spec.hardware import HardwareSpec
from dse.spec.load import issue_at, load_workload, read_yaml, validate
from dse.spec.study import (
    DESIGN_METRICS,
    Objective,
    StudySpec,
    StudyWorkload,
)
from dse.spec.technology import TechSpec
from dse.workloads import execution_issues, resolve_scenario


def _job(data, name: str, w: StudyWorkload, near: Path, issues: list[Issue]) -> Job | None:
    loc = ("workloads", name)
    try:
        wl = load_workload(referenced(w.workload, near))
    except SpecError as e:
        issues.append(issue_at(data, (*loc, "workload"), problems_of(e)))
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
    ex = Execution(chips=w.chips, tp=tp, pp=w.pp, cp=w.cp, ep=w.ep)
    outside = training_degree_problems(sc.phase, ex)
    if outside:
        issues += [issue_at(data, (*loc, str(e.field)), e.message) for e in outside]
        return None
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
        hw, tech, no_area = load_chip(spec.base, near)
    except SpecError as e:
        raise SpecError([issue_at(data, ("base",), problems_of(e))]) from None
    params = [resolve_param(data, k, p, hw, issues, workloads=spec.workloads)
              for k, p in spec.parameters.items()]
    hw = with_assumptions(data, ("set",), spec.set or {}, hw, issues)
    fixed = fixed_values(data, ("set",), spec.set or {}, hw, issues)
    _check_paths_once(data, spec, params, fixed, hw, issues)
    jobs = {n: _job(data, n, w, near, issues) for n, w in spec.workloads.items()}
    goals = [_goal(data, n, o, spec.workloads, issues) for n, o in spec.objectives.items()]
    budget = spec.constraints.area
    if spec.constraints.area_of is not None:
        budget = modelled_area(data, spec.constraints.area_of, near, issues)
    cost_budget = spec.constraints.cost
    if spec.constraints.cost_of is not None:
        cost_budget = modelled_cost(data, spec.constraints.cost_of, near, issues)
    system_budget = system_budgets(data, spec.constraints, spec.workloads, near, issues)
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
    references = _references(data, spec, near, issues)
    main = Study(spec=spec, path=file, hardware=hw, tech=tech,
                 params=tuple(p for p in params if p is not None),
                 jobs={n: j for n, j in jobs.items() if j is not None},
                 goals=tuple(g for g in goals if g is not None), references=tuple(references),
                 area_budget=budget, cost_budget=cost_budget, system_budget=system_budget,
                 fixed=fixed)
    alternatives = {}
    for name, alt in (spec.alternatives or {}).items():
        resolved = resolve_alternative(data, name, alt, main, params, issues)
        if resolved is not None:
            alternatives[name] = resolved
    if issues:
        raise SpecError(issues)
    return replace(main, alternatives=alternatives) if alternatives else main


def _check_paths_once(data, spec: StudySpec, params: list[Param | None],
                      fixed: dict[str, float], hw: HardwareSpec, issues: list[Issue]) -> None:
    """An issue for each parameter whose path another parameter varies or `set` fixes."""
    seen: dict[str, str] = {}
    for p in params:
        if p is not None and p.path in seen:
            issues.append(issue_at(data, ("parameters", p.key),
                                   f"the same path as '{seen[p.path]}'"))
        elif p is not None:
            seen[p.path] = p.key
    for p in params:
        if p is not None and p.path in fixed:
            issues.append(issue_at(data, ("set", next(k for k in spec.set or {} if
                                                      not assumptions.is_assumption(k) and
                                                      vocabulary.canonical(hw, k)[0] == p.path)),
                                   f"the study varies this path (parameters.{p.key}): "
                                   "give it a range or a fixed value, not both"))


def _references(data, spec: StudySpec, near: Path, issues: list[Issue]
                ) -> list[tuple[str, HardwareSpec, TechSpec | None]]:
    """(name, spec, process-node constants) of each reference chip (default: the base)."""
    references = []
    for i, ref in enumerate(spec.references or [spec.base]):
        try:
            r_hw, r_tech, _ = load_chip(ref, near)
        except SpecError as e:
            issues.append(issue_at(data, ("references", i), problems_of(e)))
            continue
        references.append((r_hw.name, r_hw, r_tech))
    return references
