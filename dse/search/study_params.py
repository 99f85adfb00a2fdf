"""A study's parameters and fixed values (set:) resolved against its base chip: each value
in SI units, each problem at the key of the study file that wrote it."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from dse import units
from dse.errors import DseError, Issue, suggest
from dse.search import chips
from dse.search.study import Param
from dse.spec import assumptions, vocabulary
from dse.spec.hardware import HardwareSpec
from dse.spec.load import issue_at
from dse.spec.study import (
    Parameter,
    StudyWorkload,
)
from dse.spec.types import MAX_WHOLE


def at_key(error: DseError, path: str) -> str:
    """A design-path error as a study words it at the key of `path`: its message alone
    when it is about that path (its structured field), else with its field named."""
    return error.message if error.field == path and not error.also else str(error)


def si_value(data, at: tuple, path: str, term, value: object, clock: float | None,
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
        issues.append(issue_at(data, at, at_key(e, path)))
        return None


def resolve_param(data, key: str, p: Parameter, hw: HardwareSpec, issues: list[Issue],
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
        issues.append(issue_at(data, loc, at_key(e, key)))
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
        return si_value(data, at, path, term, value, clock, issues)

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
                                       at_key(e, path)))
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


def fixed_values(data, loc: tuple, values: Mapping[str, object], hw: HardwareSpec,
           issues: list[Issue]) -> dict[str, float]:
    """A study's or an alternative's `set`: canonical path -> SI value (the technology-level
    assumptions apart: `with_assumptions`)."""
    out: dict[str, float] = {}
    for key, value in values.items():
        at = (*loc, key)
        if assumptions.is_assumption(key):
            continue
        try:
            path, term = vocabulary.canonical(hw, key)
        except DseError as e:
            issues.append(issue_at(data, at, at_key(e, key)))
            continue
        if path in out:
            issues.append(issue_at(data, at, "the same path as another key of set"))
            continue
        v = si_value(data, at, path, term, value, hw.compute.clock, issues)
        if v is not None:
            out[path] = v
    return out


def with_assumptions(data, loc: tuple, values: Mapping[str, object], hw: HardwareSpec,
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
            issues.append(issue_at(data, (*loc, key), at_key(e, key)))
    return hw
