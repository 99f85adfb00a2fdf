"""A study's alternatives (alternatives:), each resolved as a study of its own: the study's
parameters with the alternative's changes, its fixed values, constraints and trials."""

from __future__ import annotations

import re
from dataclasses import replace

from pydantic import ValidationError

from dse.errors import DseError, Issue
from dse.search import chips
from dse.search.referenced import modelled_area, modelled_cost, system_budgets
from dse.search.study import Param, Study
from dse.search.study_params import at_key, fixed_values, resolve_param, with_assumptions
from dse.spec import assumptions, vocabulary
from dse.spec.hardware import HardwareSpec
from dse.spec.load import issue_at
from dse.spec.study import Alternative, Constraints, Parameter, StudySpec

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


def resolve_alternative(data, name: str, alt: Alternative, main: Study,
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
    own = fixed_values(data, (*loc, "set"), alt.set, hw, issues)
    hw = with_assumptions(data, (*loc, "set"), alt.set, hw, issues)
    fixed = {**main.fixed, **own}
    changes = _changes(data, loc, alt, hw, own, issues)
    raw, resolved = _parameters(data, loc, spec, params, changes, fixed, hw, issues)
    if not resolved and len(issues) == before:
        issues.append(issue_at(data, loc, "the alternative sets every parameter of the study: "
                                          "nothing is left to vary"))
    constraints, budgets, system_budget = _constraints(data, loc, alt, main, issues)
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
                   area_budget=budgets["area"], cost_budget=budgets["cost"],
                   system_budget=system_budget, fixed=fixed, alternatives={}, alternative=name)


def _changes(data, loc: tuple, alt: Alternative, hw: HardwareSpec, own: dict[str, float],
             issues: list[Issue]) -> dict[str, tuple[str, dict]]:
    """The alternative's parameter changes: canonical path -> (its key, the fields it
    gives); a path it also sets, or a key that names no path, is an issue instead."""
    changes: dict[str, tuple[str, dict]] = {}
    for key, change in alt.params.items():
        if assumptions.is_assumption(key):
            resolve_param(data, key, Parameter(choices=[0]), hw, issues,
                          loc=(*loc, "params", key))
            continue
        try:
            path = key if chips.is_workload_path(key) else vocabulary.canonical(hw, key)[0]
        except DseError as e:
            issues.append(issue_at(data, (*loc, "params", key), at_key(e, key)))
            continue
        if path in own:
            issues.append(issue_at(data, (*loc, "params", key),
                                   "this alternative also sets the path (set): give a range "
                                   "or a fixed value, not both"))
            continue
        changes[path] = (key, change.model_dump(exclude_unset=True))
    return changes


def _parameters(data, loc: tuple, spec: StudySpec, params: list[Param | None],
                changes: dict[str, tuple[str, dict]], fixed: dict[str, float],
                hw: HardwareSpec, issues: list[Issue]
                ) -> tuple[dict[str, Parameter], list[Param]]:
    """(key -> parameter as written, resolved parameters) of the alternative: the study's
    parameters that are not fixed, changed where the alternative changes them, then the
    paths the alternative varies and the study does not."""
    raw: dict[str, Parameter] = {}
    resolved: list[Param] = []
    changes = dict(changes)
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
        got = resolve_param(data, key, merged, hw, issues, loc=at, inherited=inherited,
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
        got = resolve_param(data, ckey, new, hw, issues, loc=at, workloads=spec.workloads)
        if got is not None:
            raw[ckey] = new
            resolved.append(got)
    return raw, resolved


def _constraints(data, loc: tuple, alt: Alternative, main: Study, issues: list[Issue]
                 ) -> tuple[Constraints, dict[str, float | None], dict[str, float] | None]:
    """(constraints, {"area", "cost"} budgets, system budgets) of the alternative: the
    study's, with each budget the alternative gives resolved again."""
    spec = main.spec
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
    system_budget = main.system_budget if not system else system_budgets(
        data, constraints, spec.workloads, main.path.parent, issues, loc=(*loc, "constraints"))
    modelled = {"area": modelled_area, "cost": modelled_cost}
    for q in changed:
        chip = getattr(constraints, f"{q}_of")
        budgets[q] = getattr(constraints, q) if chip is None else modelled[q](
            data, chip, main.path.parent, issues, loc=(*loc, "constraints", f"{q}_of"))
    return constraints, budgets, system_budget
