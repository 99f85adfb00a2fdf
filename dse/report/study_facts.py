"""What a study's summary rests on and how it words a design: the facts beside its tables
(Facts), values with their units, the best designs per objective, and a design's
objectives, ratios to the reference chips, trade-offs and the limits that hold it. No I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dse import units
from dse.search import robustness
from dse.search.budget import shown

# A design within this share of a limit is held by it (the area budget, the reticle, the
# power cap); a parameter within it of its range's end (of the range's width, or of the end
# itself for a log range) sits at that end.
NEAR = 0.02


MAX_CONSOLE_BEST = 3  # best designs the console names (summary.md lists every one)


def _fmt(column: str, value: float) -> str:
    """A table value with its unit, from the column's suffix."""
    return shown(column, value)


def number(value: float) -> str:
    """A plain number: thousands separated from 1,000, else four significant digits."""
    if not np.isfinite(value):
        return "—"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def quantity(value: float, unit: str) -> str:
    """A value in `unit` as a reader reads it: `1.36x h100-sxm`, `10,110 samples/s`,
    `3.68 ms`, `754 mm2`."""
    if not np.isfinite(value):
        return "—"
    if unit.startswith("x "):
        return f"{value:.3g}x {unit[2:]}"
    kinds = {"FLOP/s": units.FLOP_RATE, "s": units.TIME, "J": units.ENERGY}
    if unit in kinds:
        return units.format_quantity(value, kinds[unit], digits=4)
    if unit in ("W", "mm2"):
        return f"{value:,.0f} {unit}"
    return f"{number(value)} {unit}".strip()


@dataclass(frozen=True)
class Facts:
    """What the summary says about a study, beside its tables."""

    name: str
    description: str
    run_line: str
    base: str  # the base chip's name
    params: list[tuple[str, str, float, float, bool]]  # (column, path, low, high, log range)
    objectives: list[str]  # objective columns
    units_of: dict[str, str]  # objective column -> unit
    directions: Sequence[str]
    workloads: list[tuple[str, str, str]]  # (workload, throughput column, unit)
    shown_by: dict[str, str]  # throughput column -> the objective column that is the same
    base_throughput: dict[str, float]  # throughput column -> the base chip's value
    limits: list[tuple[str, str, float, str]]  # (what, column, limit, unit): held when near
    infeasible: list[tuple[int, str]]  # (designs, why), most first
    budget_mm2: float | None = None
    extra: list[str] = field(default_factory=list)
    regions: dict[str, robustness.Region] = field(default_factory=dict)  # objective -> region
    sensitivity: list[robustness.Run] = field(default_factory=list)  # the study, then each
    seed: int | None = None  # alternative
    # (chip, parameter column -> its value) of each reference chip, in the study's order
    reference_params: list[tuple[str, dict[str, float]]] = field(default_factory=list)
    tdp_w: float | None = None  # the base chip's TDP, which the power model holds designs to


def best_rows(front: pd.DataFrame, objectives: list[str], directions: Sequence[str]
              ) -> list[tuple[str, pd.Series]]:
    """(why, row): the best front design for each objective, one row per design naming every
    objective it is best for, and the balanced one (the design with the largest product of
    its objectives each relative to the front's best) when it is another design."""
    if front.empty:
        return []
    best: dict[int, list[str]] = {}
    for col, d in zip(objectives, directions, strict=True):
        i = front[col].idxmax() if d == "maximize" else front[col].idxmin()
        best.setdefault(i, []).append(col.removeprefix("objective."))
    out = [(f"best {' and '.join(names)}", front.loc[i]) for i, names in best.items()]
    if len(objectives) > 1:
        score = np.zeros(len(front))
        for col, d in zip(objectives, directions, strict=True):
            v = front[col].to_numpy(float)
            top = v.max() if d == "maximize" else v.min()
            score += np.log(v / top) if d == "maximize" else np.log(top / v)
        i = front.index[int(np.argmax(score))]
        if i not in best:
            out.append(("balanced (largest product of objectives relative to the best)",
                        front.loc[i]))
    return out


def bound_shares(op_records: list[dict]) -> str:
    """'HBM3 71%, compute 20%, ...' : step time by the resource bounding each operator."""
    total = sum(r["time_s"] for r in op_records) or 1.0
    by: dict[str, float] = {}
    for r in op_records:
        by[r["bound"]] = by.get(r["bound"], 0.0) + r["time_s"]
    return ", ".join(f"{b} {t / total:.0%}" for b, t in sorted(by.items(), key=lambda x: -x[1])
                     if t / total >= 0.01)


def _power(row: pd.Series) -> float:
    vals = [float(row[c]) for c in row.index if str(c).endswith(".power_per_chip_w")
            and np.isfinite(float(row[c]))]
    return max(vals) if vals else np.nan


def _design(facts: Facts, row: pd.Series) -> str:
    """'compute.units 144, memory.L2.capacity 16.8 MB, ...'"""
    return ", ".join(f"{path} {_fmt(col, row[col])}" for col, path, *_ in facts.params)


def _objectives(facts: Facts, row: pd.Series, area_shown: bool = False) -> list[str]:
    """'memory_bound 1.36x h100-sxm', ...; without the design's area where it is shown."""
    return [f"{c.removeprefix('objective.')} {quantity(row[c], facts.units_of[c])}"
            for c in facts.objectives if not (area_shown and c in _area_objectives(facts))]


def _area_objectives(facts: Facts) -> list[str]:
    """Objective columns that are the design's area (the table's area column already)."""
    return [c for c in facts.objectives if facts.units_of[c] == "mm2"]


def _ratios(facts: Facts, row: pd.Series, theirs: dict[str, float]) -> list[tuple[str, float]]:
    """(workload, this design's throughput / theirs) where both run it."""
    out = []
    for w, col, _ in facts.workloads:
        mine, other = float(row[col]), float(theirs.get(col, np.nan))
        if np.isfinite(mine) and np.isfinite(other) and other > 0:
            out.append((w, mine / other))
    return out


def _span(ratios: list[tuple[str, float]]) -> str:
    lo, hi = min(r for _, r in ratios), max(r for _, r in ratios)
    return f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}x"


def _against(facts: Facts, row: pd.Series, references: pd.DataFrame) -> str:
    """'on the 4 workloads its throughput is 1.16-1.35x h100-sxm's, ... and 1.31-1.42x
    middle-ground's (the base)'; empty without a chip to compare with."""
    chips: list[tuple[str, dict[str, float]]] = []
    names = [str(c) for c in references["chip"]] if len(references) else []
    if facts.base not in names:
        chips.append((facts.base, facts.base_throughput))
    for _, r in references.iterrows():
        chips.append((str(r["chip"]), {col: float(r[col]) for _, col, _ in facts.workloads
                                       if col in r}))
    parts = []
    for chip, theirs in chips:
        ratios = _ratios(facts, row, theirs)
        base = " (the base)" if chip == facts.base else ""
        some = (f" (on the {len(ratios)} of them it runs)"
                if ratios and len(ratios) < len(facts.workloads) else "")
        parts.append(f"{_span(ratios)} {chip}'s{base}{some}" if ratios
                     else f"not comparable with {chip}'s{base} (it runs none of them)")
    if not parts:
        return ""
    where = (f"on {facts.workloads[0][0]}" if len(facts.workloads) == 1
             else f"on the {len(facts.workloads)} workloads")
    return f"{where} its throughput is {_join(parts)}"


def _trade(facts: Facts, row: pd.Series) -> str:
    """What the best design gives up and buys against the first reference chip other than
    the base: each parameter's value against the chip's, with the change in percent."""
    chips = [(c, v) for c, v in facts.reference_params if c != facts.base] \
        or facts.reference_params
    if not chips:
        return ""
    chip, theirs = chips[0]
    more: list[str] = []
    fewer: list[str] = []
    same: list[str] = []
    for col, path, *_ in facts.params:
        mine, other = float(row[col]), theirs.get(col, np.nan)
        if not (np.isfinite(other) and other > 0):
            continue
        change = mine / other - 1
        text = f"{path} {_fmt(col, mine)} against {_fmt(col, other)} ({change:+.0%})"
        (more if change > 0.005 else fewer if change < -0.005 else same).append(text)
    if not (more or fewer):
        return ""
    parts = []
    if fewer:
        parts.append(f"gives up {_join(fewer)}")
    if more:
        parts.append(f"buys {_join(more)}")
    if same:
        parts.append(f"keeps {_join(same)}")
    return (f"Against {chip}, trial {int(row['number'])} " + "; ".join(parts) + ".")


def _held(facts: Facts, row: pd.Series) -> list[str]:
    """The limits this design is within NEAR of, and the parameters at a range's end."""
    out = []
    for what, col, limit, unit in facts.limits:
        value = _power(row) if col == "power_per_chip_w" else float(row.get(col, np.nan))
        if np.isfinite(value) and value >= (1 - NEAR) * limit:
            out.append(f"{what} ({value:,.0f} of {limit:,.0f} {unit})")
    top, bottom = [], []
    for col, path, low, high, log in facts.params:
        v = float(row[col])
        if not (high > low) or path.endswith(".generation"):
            continue  # a generation's choices have no ends (a named choice, not a range)
        near_low = v <= low * (1 + NEAR) if log else v - low <= NEAR * (high - low)
        near_high = v >= high / (1 + NEAR) if log else high - v <= NEAR * (high - low)
        if near_high:
            top.append(f"{path} ({_fmt(col, v)})")
        elif near_low:
            bottom.append(f"{path} ({_fmt(col, v)})")
    if top:
        out.append(f"the top of the range of {_join(top)}")
    if bottom:
        out.append(f"the bottom of the range of {_join(bottom)}")
    return out


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _why_not(facts: Facts, n: int) -> str:
    reasons = "; ".join(f"{k:,} {why}" for k, why in facts.infeasible)
    several = " (a design may break several)" if len(facts.infeasible) > 1 else ""
    return f"{reasons}{several}" if reasons else f"{n:,} not feasible"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(r) + " |" for r in rows)]
