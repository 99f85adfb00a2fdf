"""What a study's budgets ask of its designs, known before any trial runs: the base chip's
area, die and edge padding against the area budget, the reticle and the shoreline, its power
against the cap, and the smallest area and die any design of the search space can have.

The smallest design is found at the corners of the parameters' ranges: the area model's
total and die grow or shrink monotonically with each parameter (more units, capacity,
stacks, channels or links add silicon and die edge; a faster clock needs fewer MACs), so
their minimum over the box of ranges is at a corner. Every corner is evaluated up to
MAX_CORNERS (12 parameters); beyond, each parameter's end that gives the smaller area from
the all-low corner. Only the area model runs (no workload), so this costs milliseconds.
`dse check` reports the findings; `dse study` refuses a budget no design can meet before
running a trial. No I/O."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import cast

import numpy as np

from dse import units
from dse.errors import DseError
from dse.model.area import PADDING, AreaResult, area
from dse.model.batch import design_batch
from dse.search.study import Param, Study
from dse.spec import vocabulary
from dse.spec.catalogue import catalogue

MAX_CORNERS = 2**12


@dataclass(frozen=True)
class Finding:
    """One budget the base chip (a warning) or every design (fatal) cannot meet."""

    key: tuple[str, ...]  # the study file's key it concerns: ("constraints", "area")
    message: str
    fatal: bool  # no design of the search space can meet it


def shown(column: str, value: float) -> str:
    """A table value with its unit, from its column's suffix (`_bytes`, `_mm2` ...)."""
    if column.endswith(".generation"):  # a memory generation: its catalogue name
        return vocabulary.generation_names([value])[0] if np.isfinite(value) else "-"
    if not np.isfinite(value):
        return "-"
    for kind in (units.BYTES, units.BANDWIDTH, units.FLOP_RATE, units.POWER, units.TIME,
                 units.FREQUENCY, units.ENERGY):
        if kind.suffix and column.endswith("_" + kind.suffix):
            return units.format_quantity(value, kind, digits=3)
    if column.endswith("_mm2"):
        return f"{value:,.0f} mm2"
    return f"{value:,.4g}"


def _ends(p: Param) -> tuple[float, float]:
    if p.choices is not None and p.path.endswith(".generation"):
        # named choices: the ends are the smallest and largest unit (PHY area, then capacity)
        cat = catalogue()
        size = sorted(p.choices, key=lambda i: (cat.at(int(i)).phy.area,
                                                cat.at(int(i)).capacity))
        return size[0], size[-1]
    if p.choices is not None:
        return min(p.choices), max(p.choices)
    assert p.low is not None and p.high is not None
    return p.low, p.high


def _hardware(study: Study) -> tuple:
    """The study's hardware parameters: a workload's chip count (dse.search.chips) changes
    no chip's area or cost."""
    from dse.search.chips import is_workload_path

    return tuple(p for p in study.params if not is_workload_path(p.path))


def _corner_designs(study: Study) -> dict[str, np.ndarray]:
    """Corners of the ranges (path -> [M] values): all of them up to MAX_CORNERS, else the
    all-low corner and each parameter raised alone (the caller picks each one's end)."""
    ends = [_ends(p) for p in _hardware(study)]
    k = len(ends)
    if 2**k <= MAX_CORNERS:
        picks = np.array(list(itertools.product((0, 1), repeat=k)), dtype=int).reshape(-1, k)
    else:
        picks = np.vstack([np.zeros((1, k), dtype=int), np.eye(k, dtype=int)])
    return {p.path: np.array([e[i] for i in picks[:, j]], dtype=float)
            for j, (p, e) in enumerate(zip(_hardware(study), ends, strict=True))}


@dataclass(frozen=True)
class Smallest:
    """The smallest design the ranges allow, and the base chip, as the area model sees them."""

    values: dict[str, float]  # path -> the smallest design's value
    area_mm2: float  # its total (padding included)
    die_mm2: float  # the smallest die any corner has
    edge_area_mm2: float  # the least area its off-chip interfaces' die edge alone asks
    base_area_mm2: float
    base_die_mm2: float
    base_padding_mm2: float
    base_edge_mm: float
    cost_usd: float = float("nan")  # the cheapest corner's cost to make (NaN: no cost model)
    cost_values: dict[str, float] | None = None  # the cheapest corner
    base_cost_usd: float = float("nan")


def _cost(study: Study, params: dict[str, np.ndarray] | None) -> np.ndarray | None:
    """[M] cost to make of the designs (None: the node has no cost model)."""
    from dse.model.cost import cost

    tech = study.tech
    if tech is None or tech.wafer is None or tech.market is None:
        return None
    db = design_batch(study.hardware, params or None)
    return cost(db, tech, area(db, tech)).total_usd


def smallest(study: Study) -> Smallest | None:
    """The base and the smallest design of `study`; None without an area model (or where the
    area model refuses the designs: the run reports that itself)."""
    if study.tech is None:
        return None
    try:
        base = area(design_batch(study.hardware), study.tech)
        designs = _corner_designs(study) if _hardware(study) else {}
        res = area(design_batch(study.hardware, designs or None), study.tech)
        corners = _cost(study, designs)  # cost grows with silicon and memory like area
        base_cost = _cost(study, None)
        cheap_values: dict[str, float] | None = None
        if corners is not None and 2**len(_hardware(study)) <= MAX_CORNERS:
            j = int(np.argmin(corners))
            cheap_values = {k: float(v[j]) for k, v in designs.items()}
        if 2**len(_hardware(study)) > MAX_CORNERS:  # one parameter at a time: pick each end
            lower = res.total_mm2[1:] < res.total_mm2[0]
            designs = {p.path: np.array([_ends(p)[int(lower[j])]])
                       for j, p in enumerate(_hardware(study))}
            res = area(design_batch(study.hardware, designs), study.tech)
            if corners is not None:
                cheaper = corners[1:] < corners[0]
                cheap_values = {p.path: float(_ends(p)[int(cheaper[j])])
                                for j, p in enumerate(_hardware(study))}
                corners = _cost(study, {k: np.array([v]) for k, v in cheap_values.items()})
    except DseError:
        return None
    i = int(np.argmin(res.total_mm2))
    edge_area = _edge_area(res)
    return Smallest(values={k: float(v[i]) for k, v in designs.items()},
                    area_mm2=float(res.total_mm2[i]), die_mm2=float(res.die_mm2.min()),
                    edge_area_mm2=float(edge_area.min()),
                    base_area_mm2=float(base.total_mm2[0]), base_die_mm2=float(base.die_mm2[0]),
                    base_padding_mm2=float(base.components.get(PADDING, np.zeros(1))[0]),
                    base_edge_mm=float(base.edge_needed_mm[0]),
                    cost_usd=float(corners.min()) if corners is not None else float("nan"),
                    cost_values=cheap_values,
                    base_cost_usd=float(base_cost[0]) if base_cost is not None
                    else float("nan"))


def _edge_area(res: AreaResult) -> np.ndarray:
    """[N] the area a die needs for its interfaces' edge alone: square dies whose perimeter
    is the edge needed (the area model's padding rule)."""
    dies = res.total_mm2 / res.die_mm2
    return dies * (res.edge_needed_mm / (4.0 * dies)) ** 2


def _described(study: Study, values: dict[str, float]) -> str:
    return ", ".join(f"{p.path} {shown(p.column, values[p.path])}" for p in _hardware(study))


def findings(study: Study, power: bool = True) -> list[Finding]:
    """The budgets the base chip cannot meet (warnings) and those no design of the search
    space can meet (fatal). `power`: also evaluate the base on the workloads for the power
    cap (the model's step, about as costly as one trial)."""
    out: list[Finding] = []
    s = smallest(study)
    base = study.hardware.name
    cons = study.spec.constraints
    if s is not None and study.area_budget is not None:
        key = ("constraints", "area_of" if cons.area_of is not None else "area")
        budget = study.area_budget
        what = f"the {budget:,.0f} mm2 area budget" + (
            f" (the modelled area of {cons.area_of})" if cons.area_of is not None else "")
        if s.area_mm2 > budget:
            edge = (f" (its off-chip interfaces alone need a die of {s.edge_area_mm2:,.0f} "
                    "mm2 for their edge)" if s.edge_area_mm2 > budget else "")
            ranged = (f"the smallest design the parameters' ranges allow "
                      f"({_described(study, s.values)})" if _hardware(study) else "every design")
            out.append(Finding(key, f"no design can meet {what}: {ranged} needs "
                               f"{s.area_mm2:,.0f} mm2{edge}; the base {base} needs "
                               f"{s.base_area_mm2:,.0f} mm2", True))
        elif s.base_area_mm2 > budget:
            out.append(Finding(key, f"the base {base} needs {s.base_area_mm2:,.0f} mm2, over "
                               f"{what}; designs from the parameters' ranges reach down to "
                               f"{s.area_mm2:,.0f} mm2, so only some derived designs can "
                               "meet it", False))
    if s is not None and study.cost_budget is not None and np.isfinite(s.cost_usd):
        key = ("constraints", "cost_of" if cons.cost_of is not None else "cost")
        budget = study.cost_budget
        what = f"the {budget:,.0f} USD cost budget" + (
            f" (the modelled cost of {cons.cost_of})" if cons.cost_of is not None else "")
        if s.cost_usd > budget:
            ranged = (f"the cheapest design the parameters' ranges allow "
                      f"({_described(study, s.cost_values or {})})"
                      if _hardware(study) and s.cost_values else "every design")
            out.append(Finding(key, f"no design can meet {what}: {ranged} costs "
                               f"{s.cost_usd:,.0f} USD to make; the base {base} "
                               f"{s.base_cost_usd:,.0f} USD", True))
        elif s.base_cost_usd > budget:
            out.append(Finding(key, f"the base {base} costs {s.base_cost_usd:,.0f} USD to make, "
                               f"over {what}; designs from the parameters' ranges reach down "
                               f"to {s.cost_usd:,.0f} USD, so only some derived designs can "
                               "meet it", False))
    if s is not None and study.system_budget is not None and np.isfinite(s.cost_usd):
        out.extend(_system_findings(study, s))
    if s is not None and cons.reticle:
        assert study.tech is not None
        reticle = study.tech.reticle
        node = study.tech.node
        if s.die_mm2 > reticle:
            out.append(Finding(("constraints", "reticle"), f"no design's die fits the "
                               f"{reticle:,.0f} mm2 reticle of {node}: the smallest die the "
                               f"parameters' ranges allow is {s.die_mm2:,.0f} mm2 (the base "
                               f"{base}: {s.base_die_mm2:,.0f} mm2)", True))
        elif s.base_die_mm2 > reticle:
            out.append(Finding(("constraints", "reticle"), f"the base {base} has a die of "
                               f"{s.base_die_mm2:,.0f} mm2, over the {reticle:,.0f} mm2 "
                               f"reticle of {node}; dies from the parameters' ranges reach "
                               f"down to {s.die_mm2:,.0f} mm2", False))
    if s is not None and cons.shoreline and s.base_padding_mm2 > 0:
        out.append(Finding(("constraints", "shoreline"), f"the base {base}'s off-chip "
                           f"interfaces need {s.base_edge_mm:,.0f} mm of die edge, more than "
                           f"its silicon gives it ({s.base_padding_mm2:,.0f} mm2 of padding); "
                           "only designs with fewer interfaces or more silicon meet it",
                           False))
    if power and cons.power is not None:
        from dse.search.objective import evaluate_designs

        ev = evaluate_designs(study, {})
        over = [(name, float(ev.columns[f"{name}.power_per_chip_w"][0])) for name in study.jobs
                if f"{name}.power_per_chip_w" in ev.columns
                and float(ev.columns[f"{name}.power_per_chip_w"][0]) > cons.power]
        if over:
            worst = max(over, key=lambda x: x[1])
            out.append(Finding(("constraints", "power"), f"the base {base} draws "
                               f"{worst[1]:,.0f} W on {worst[0]}, over the {cons.power:,.0f} W "
                               "cap; designs that draw less (fewer units, a lower clock) can "
                               "meet it", False))
    return out


def _system_findings(study: Study, s: Smallest) -> list[Finding]:
    """A workload whose system cost budget even the cheapest chip on the fewest chips the
    study allows cannot meet (fatal)."""
    from dse.search.chips import path_of

    cons = study.spec.constraints
    key = ("constraints", "system_cost_of" if cons.system_cost_of is not None
           else "system_cost")
    out = []
    assert study.system_budget is not None
    for name, job in study.jobs.items():
        p = next((p for p in study.params if p.path == path_of(name)), None)
        fewest = job.execution.chips if p is None else (
            min(p.choices) if p.choices is not None else p.low)
        need = s.cost_usd * float(cast(float, fewest))  # a range parameter has its low
        budget = study.system_budget[name]
        if need > budget:
            out.append(Finding(key, f"no design can meet the {budget:,.0f} USD system cost "
                               f"budget of {name}: the cheapest design the parameters' ranges "
                               f"allow costs {s.cost_usd:,.0f} USD a chip, {need:,.0f} USD on "
                               f"{fewest:g} chip{'' if fewest == 1 else 's'}", True))
    return out
