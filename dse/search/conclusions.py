"""The conclusions of a run (dse.search.robustness): for its best design per objective, where
each parameter sits in its range, against the study's near-optimal span and against the base
chip, and whether the objective beats the base chip's; each with the spread of the run's
near-optimal designs, so a conclusion they disagree on is open."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dse.search.robustness import SAME, Band, Finding, Region, Span, position
from dse.spec import vocabulary


def _range(study, path: str) -> tuple[float, float, bool] | None:
    p = next((p for p in study.params if p.path == path), None)
    if p is None:
        return None
    if p.choices is not None:
        return min(p.choices), max(p.choices), False
    return float(p.low), float(p.high), p.log


def _value(study, row: pd.Series, path: str) -> float:
    """A design's value of `path`: its parameter, or the study's fixed value."""
    p = next((p for p in study.params if p.path == path), None)
    if p is not None:
        return float(row[p.column])
    return float(study.fixed.get(path, _current(study, path) or np.nan))


def _current(study, path: str) -> float | None:
    """The base chip's value of `path` (a workload parameter: the workload's own chips)."""
    from dse.search import chips

    if chips.is_workload_path(path):
        return chips.reference_value(study, path)
    return vocabulary.current(study.hardware, path)


_ORDER = {"range": ("bottom", "middle", "top"), "base": ("fewer", "same", "more"),
          "span": ("below", "inside", "above"),
          "objective": ("loses to", "ties", "beats")}


def _between(kind: str, a: str, b: str) -> tuple[str, ...]:
    """The categories from a to b (both included) in their order."""
    order = _ORDER[kind]
    if a not in order or b not in order:
        return tuple(dict.fromkeys((a, b)))
    i, j = sorted((order.index(a), order.index(b)))
    return order[i:j + 1]


def findings(study, best: dict[str, pd.Series], band_of: dict[str, Band | None],
             base: dict[str, float], fmt, regions: dict[str, Region] | None = None,
             anchor: dict[str, Region] | None = None) -> list[Finding]:
    """The conclusions of a run (its best design per objective, `best`: objective column ->
    row): where each parameter sits in its range (bottom, middle or top: EDGE of the width);
    whether it is more, fewer or the same as the base chip's (SAME); whether the objective
    beats, ties (within the band) or loses to the base chip. `base`: objective column -> the
    base chip's value; `fmt(column, value)` writes a parameter's value; `regions`: the run's
    near-optimal regions, whose designs give each conclusion's spread; `anchor`: the study's
    regions (default `regions`): whether each parameter lies within the study's near-optimal
    span of it (below, inside, above)."""
    out: list[Finding] = []
    regions = regions or {}
    anchor = regions if anchor is None else anchor
    for col, row in best.items():
        region = regions.get(col)
        spans = {sp.path: sp for sp in region.spans} if region is not None else {}
        home = anchor.get(col)
        for p in _paths(study):
            out += _parameter_findings(study, col, row, p, spans.get(p), home, fmt)
        out += _objective_finding(study, col, row, base, band_of.get(col), region)
    return out


def _parameter_findings(study, col: str, row: pd.Series, p: str, sp: Span | None,
                        home: Region | None, fmt) -> list[Finding]:
    """The conclusions about path `p` of the best design `row` for objective `col`: its
    generation (a named choice), or its place in the study's near-optimal span, in its
    range and against the base chip. `sp`: the run's near-optimal span of it."""
    name = col.removeprefix("objective.")
    v = _value(study, row, p)
    r = _range(study, p)
    column = vocabulary.column_name(p)
    if p.endswith(".generation"):  # named choices: the generation is the category
        gen = fmt(column, v)
        if r is None:  # set by the run's assumptions, not chosen
            return [Finding((col, "generation", p), f"{name}: {p} fixed", "fixed", gen,
                            ("fixed",))]
        spread = tuple(fmt(column, x) for x in sp.values) if sp is not None \
            and sp.values else (gen,)
        return [Finding((col, "generation", p), f"{name}: {p} {gen}", gen, gen, spread)]
    out = []
    hs = next((x for x in home.spans if x.path == p), None) if home else None
    if hs is not None and r is None:  # set by the run's assumptions
        out.append(Finding((col, "span", p), f"{name}: {p} fixed", "fixed",
                           fmt(column, v), ("fixed",)))
    elif hs is not None:
        def span_of(x: float, hs: Span = hs) -> str:
            tol = 1e-9 * max(abs(hs.high), 1.0)
            return ("below" if x < hs.low - tol else "above" if x > hs.high + tol
                    else "inside")
        lo, hi = fmt(column, hs.low), fmt(column, hs.high)
        where_s = lo if lo == hi else f"{lo} to {hi}"
        out.append(Finding((col, "span", p), f"{name}: {p} within the study's "
                           f"near-optimal {where_s}", span_of(v), fmt(column, v),
                           _between("span", span_of(sp.low), span_of(sp.high))
                           if sp is not None else (span_of(v),)))
    if r is not None:
        where = position(v, *r)
        at = "in the middle" if where == "middle" else f"at the {where}"
        spread = _between("range", position(sp.low, *r), position(sp.high, *r)) \
            if sp is not None else (where,)
        out.append(Finding((col, "range", p), f"{name}: {p} {at} of its range",
                           where, fmt(column, v), spread))
    else:
        out.append(Finding((col, "range", p), f"{name}: {p} fixed", "fixed",
                           fmt(column, v)))
    b = _current(study, p)
    if b is not None and np.isfinite(v):
        def side_of(x: float, b: float = b) -> str:
            rel = (x - b) / b if b else x
            return "more" if rel > SAME else "fewer" if rel < -SAME else "same"
        side = side_of(v)
        spread = _between("base", side_of(sp.low), side_of(sp.high)) \
            if sp is not None else (side,)
        if r is None:  # set by the run's assumptions, not chosen by its search
            side, spread = "fixed", ("fixed",)
        word = {"more": "more than", "fewer": "less than", "same": "the same as",
                "fixed": "set, not chosen, against"}[side]
        out.append(Finding((col, "base", p), f"{name}: {p} {word} the base's "
                           f"{fmt(column, b)}", side, fmt(column, v), spread))
    return out


def _objective_finding(study, col: str, row: pd.Series, base: dict[str, float],
                       band: Band | None, region: Region | None) -> list[Finding]:
    """Whether the best design `row` for objective `col` beats, ties (within `band`) or
    loses to the base chip; none where either value is not a positive number."""
    name = col.removeprefix("objective.")
    theirs, mine = base.get(col, np.nan), float(row[col])
    if not (np.isfinite(theirs) and theirs > 0 and np.isfinite(mine)):
        return []
    ratio = mine / theirs
    direction = study.goals[[f"objective.{g.name}" for g in study.goals].index(col)
                            ].spec.direction
    gain = ratio if direction == "maximize" else 1 / ratio
    e = band.value if band is not None else 0.0

    def verdict_of(g: float, e: float = e) -> str:
        return "beats" if g > 1 + e else "loses to" if g < 1 - e else "ties"
    verdict = verdict_of(gain)
    spread: tuple[str, ...] = (verdict,)
    if region is not None:
        edge = region.threshold / theirs
        spread = _between("objective", verdict,
                          verdict_of(edge if direction == "maximize" else 1 / edge))
    return [Finding((col, "objective", ""), f"{name}: the best design {verdict} "
                    f"the base", verdict, f"{ratio:.3g}x the base", spread)]


def _paths(study) -> list[str]:
    return [p.path for p in study.params] + [k for k in study.fixed
                                             if k not in {p.path for p in study.params}]
