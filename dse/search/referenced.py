"""The chips and workloads a study file names: where they are (a path near the study file or
a shipped name), loaded, and the budgets modelled from a chip (area_of, cost_of,
system_cost_of)."""

from __future__ import annotations

from pathlib import Path

from dse.errors import Issue, SpecError
from dse.spec.hardware import HardwareSpec
from dse.spec.load import issue_at, load_design
from dse.spec.study import (
    StudyWorkload,
)
from dse.spec.technology import TechSpec


def referenced(ref: str, near: Path) -> str | Path:
    """A chip or workload a study file names: a path (it ends in .yaml or has a folder)
    relative to the study file's folder `near`, or a shipped name as it is."""
    if ref.endswith((".yaml", ".yml")) or "/" in ref:
        p = Path(ref).expanduser()
        return p if p.is_absolute() else near / p
    return ref


def problems_of(e: SpecError) -> str:
    """A referenced file's problems as one message (their own positions kept)."""
    return "; ".join(i.message if i.line is None else str(i) for i in e.issues)


def load_chip(ref: str, near: Path) -> tuple[HardwareSpec, TechSpec | None, str | None]:
    """(spec, process-node constants or None, why none) of a chip named in a study file."""
    return load_design(referenced(ref, near))


def _modelled(what: str, data, ref: str, near: Path, issues: list[Issue], loc: tuple
              ) -> float | None:
    """The area model's total (mm2, `what` "area") or the cost model's cost to make (USD,
    "cost") of chip `ref` as its file gives it; None, with the issue at `loc`, where the
    model cannot price it."""
    from dse.model.area import area
    from dse.model.batch import design_batch
    from dse.model.cost import cost

    try:
        spec, tech, why = load_chip(ref, near)
    except SpecError as e:
        issues.append(issue_at(data, loc, problems_of(e)))
        return None
    if tech is None or (what == "cost" and tech.wafer is None):
        why = why or f"node {tech.node} gives no wafer: constants"  # type: ignore[union-attr]
        issues.append(issue_at(data, loc, f"the {what} model cannot price {spec.name}: {why}"))
        return None
    db = design_batch(spec)
    die = area(db, tech)
    return float(die.total_mm2[0] if what == "area" else cost(db, tech, die).total_usd[0])


def modelled_cost(data, ref: str, near: Path, issues: list[Issue],
                   loc: tuple = ("constraints", "cost_of")) -> float | None:
    """The cost model's cost to make chip `ref` as its file gives it (USD per chip)."""
    return _modelled("cost", data, ref, near, issues, loc)


def system_budgets(data, c, workloads: dict[str, StudyWorkload], near: Path,
                   issues: list[Issue], loc: tuple = ("constraints",)
                   ) -> dict[str, float] | None:
    """Each workload's system cost budget (USD) from constraints `c`: system_cost for every
    workload, or system_cost_of's modelled cost x the workload's own chips (the reference
    system it is compared with); None without either."""
    if c.system_cost is not None:
        return {n: float(c.system_cost) for n in workloads}
    if c.system_cost_of is None:
        return None
    one = modelled_cost(data, c.system_cost_of, near, issues, loc=(*loc, "system_cost_of"))
    return None if one is None else {n: one * w.chips for n, w in workloads.items()}


def modelled_area(data, ref: str, near: Path, issues: list[Issue],
                   loc: tuple = ("constraints", "area_of")) -> float | None:
    """The area model's total for chip `ref` as its file gives it (mm2)."""
    return _modelled("area", data, ref, near, issues, loc)
