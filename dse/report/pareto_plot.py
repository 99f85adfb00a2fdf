"""Pareto plot of a study (every design, infeasible ones faded, the front drawn, the study's
budgets on their axes, the reference chips marked and named) and a parallel-coordinates plot
of the front's designs (each parameter and each objective an axis, in human units). Data
first (pure, tested), drawing second (matplotlib Agg, imported lazily)."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dse import units
from dse.report.figure import Column, Scale, describe_column, plain_number, save_all
from dse.report.parallel_plot import (
    PARALLEL_BACKGROUND,
    draw_parallel,
    objective_axis,
    parallel_data,
    parameter_axis,
)

if TYPE_CHECKING:
    from dse.search.outputs import Tables
    from dse.search.space import Study

# Reference chips: one marker shape and colour each (none used for the designs), hollow and
# drawn under the front's markers so that a chip on the front hides no design.
REF_MARKERS = ("*", "D", "s", "^", "v", "P", "X", "p", "h", "<", ">", "8")
REF_COLOURS = ("black", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
               "#7f7f7f", "#2ca02c", "#393b79", "#843c39", "#637939")
REF_SIZE = {"*": 130, "P": 70, "X": 70, "p": 70, "h": 70, "8": 70}  # marker area (pt²)
FRONT_ZORDER = 3.0  # the front's line and markers
REFERENCE_ZORDER = 2.0  # reference chips: above the designs' clouds (1), under the front
OUTSIDE = "outside the study's budget"
BUDGET_COLOUR = "#d62728"
BUDGET_WORDS = {"area": "area budget", "power": "power cap"}


@dataclass(frozen=True)
class Budget:
    """A study's budget drawn on an axis: its value in the axis's unit and its label."""

    axis: str  # "x" or "y"
    value: float
    text: str


@dataclass(frozen=True)
class ReferenceMark:
    """A reference chip drawn on the plot: where, how, and its legend entry."""

    name: str
    x: float  # in the axes' units
    y: float
    marker: str
    colour: str
    zorder: float
    label: str  # legend entry: the name, and why it breaks the study's constraints if it does
    outside: str = ""  # the budgets it exceeds, in words ("" within them)


@dataclass(frozen=True)
class ParetoData:
    x: str  # column names
    y: str
    x_label: str  # words and the unit the axis's numbers are in
    y_label: str
    x_max: bool | None  # the better direction of each axis (None: not known, no arrow)
    y_max: bool | None
    feasible: np.ndarray  # [F, 2] in the axes' units
    infeasible: np.ndarray  # [I, 2] (only those with finite values)
    front: np.ndarray  # [P, 2] sorted along x
    references: list[ReferenceMark]  # the chips that run both axes' workloads
    title: str
    budgets: tuple[Budget, ...] = ()
    not_drawn: tuple[str, ...] = ()  # chips without a value on an axis (a workload unrun)
    front_zorder: float = FRONT_ZORDER


def label(column: str, unit: str) -> str:
    """An axis label of a column in words with its unit (values as stored)."""
    return describe_column(column, unit).label([])


def budget_text(kind: str, value: float, scale: Scale) -> str:
    """'area budget 757 mm²': a budget in the axis's unit."""
    return f"{BUDGET_WORDS[kind]} {value / scale.factor:,.4g} {scale.unit}".strip()


def pareto_data(trials: pd.DataFrame, front: pd.DataFrame, refs: pd.DataFrame, x: str,
                y: str, x_col: Column, y_col: Column, x_max: bool | None,
                y_max: bool | None, title: str, budgets: dict[str, float] | None = None
                ) -> ParetoData:
    """Points of a Pareto plot of columns `x` and `y` (described by `x_col`, `y_col`), in
    the units their axes show; `budgets` (kind -> value in the stored unit: area mm²,
    power W) become lines on the axes held to them."""
    for col in (x, y):
        if col not in trials:
            raise KeyError(col)
    everything = [trials[[x, y]].to_numpy(float)] if len(trials) else []
    if len(refs) and x in refs and y in refs:
        everything.append(refs[[x, y]].to_numpy(float))
    values = np.vstack(everything) if everything else np.zeros((0, 2))
    sx, sy = x_col.scale(values[:, 0]), y_col.scale(values[:, 1])
    factor = np.array([sx.factor, sy.factor])

    def pts(frame: pd.DataFrame) -> np.ndarray:
        v = frame[[x, y]].to_numpy(float) / factor if len(frame) else np.zeros((0, 2))
        return v[np.isfinite(v).all(axis=1)]

    ok = trials["feasible"].astype(bool) if len(trials) else pd.Series(dtype=bool)
    f = pts(front)
    f = f[np.argsort(f[:, 0], kind="stable")] if len(f) else f
    references, not_drawn = reference_marks(refs, x, y, sx.factor, sy.factor)
    lines = tuple(Budget(axis, budgets[col.budget] / s.factor,
                         budget_text(col.budget, budgets[col.budget], s))
                  for axis, col, s in (("x", x_col, sx), ("y", y_col, sy))
                  if budgets and col.budget in budgets)
    return ParetoData(x, y, sx.label(x_col.words), sy.label(y_col.words), x_max, y_max,
                      pts(trials[ok]), pts(trials[~ok]), f, references, title, lines,
                      tuple(not_drawn))


def _text(value: object) -> str:
    """A text cell of references.csv ("" for an empty one, read back as NaN)."""
    return "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def reference_marks(refs: pd.DataFrame, x: str, y: str, fx: float = 1.0, fy: float = 1.0
                    ) -> tuple[list[ReferenceMark], list[str]]:
    """The reference chips with a value on both axes as marks (each its own shape and
    colour, by its place in the study's list; under the front), and the names of those
    without (they do not run an axis's workloads), in the study's order."""
    marks, missing = [], []
    for i, (_, r) in enumerate(refs.iterrows()):
        name = str(r["chip"])
        vx, vy = float(r.get(x, np.nan)) / fx, float(r.get(y, np.nan)) / fy
        if not (np.isfinite(vx) and np.isfinite(vy)):
            missing.append(name)
            continue
        outside = _text(r.get("outside_budget"))
        why = f" ({OUTSIDE})" if outside else ("" if bool(r["feasible"])
                                                else " (breaks a constraint)")
        marks.append(ReferenceMark(name, vx, vy, REF_MARKERS[i % len(REF_MARKERS)],
                                   REF_COLOURS[i % len(REF_COLOURS)],
                                   REFERENCE_ZORDER + 0.01 * i, name + why, outside))
    return marks, missing


def _draw_budget(ax: Any, b: Budget) -> Any:
    """The budget's line across the axes and the side beyond it shaded; returns its label
    (placed by `_place_budget` once the layout is known)."""
    from matplotlib.transforms import blended_transform_factory

    line, span, lim = ((ax.axhline, ax.axhspan, ax.get_ylim) if b.axis == "y"
                       else (ax.axvline, ax.axvspan, ax.get_xlim))
    line(b.value, color=BUDGET_COLOUR, ls="--", lw=1.0, zorder=4)
    low, high = lim()
    if high > b.value:  # area and power budgets are upper limits
        span(b.value, high, color=BUDGET_COLOUR, alpha=0.04, lw=0, zorder=0)
        (ax.set_ylim if b.axis == "y" else ax.set_xlim)(low, high)
    if b.axis == "y":
        where = blended_transform_factory(ax.transAxes, ax.transData)
        return ax.text(0.99, b.value, b.text, transform=where, ha="right", va="bottom",
                       fontsize=8, color=BUDGET_COLOUR, zorder=7, bbox=_WHITE)
    where = blended_transform_factory(ax.transData, ax.transAxes)
    return ax.text(b.value, 0.99, b.text, transform=where, ha="right", va="top",
                   rotation=90, fontsize=8, color=BUDGET_COLOUR, zorder=7, bbox=_WHITE)


_WHITE = dict(boxstyle="square,pad=0.15", fc="white", ec="none", alpha=0.85)


def _place_budget(text: Any, axis: str, renderer: Any, occupied: list) -> None:
    """Slide a budget's label along its line (from the far end) to the first spot, on
    either side of the line, that overlaps nothing in `occupied` (pixel boxes)."""
    from dse.report.label_placement import boxes_of

    value = text.get_position()[1 if axis == "y" else 0]
    for along in (0.99, 0.75, 0.5, 0.25, 0.01):
        for side in ("bottom", "top") if axis == "y" else ("right", "left"):
            end = "right" if along > 0.5 else "left"
            if axis == "y":
                text.set_position((along, value))
                text.set_ha(end)
                text.set_va(side)
            else:
                text.set_position((value, along))
                text.set_va("top" if along > 0.5 else "bottom")
                text.set_ha(side)
            box = boxes_of([text], renderer, pad=1.0)[0]
            if not any(box[0] < o[2] and o[0] < box[2] and box[1] < o[3] and o[1] < box[3]
                       for o in occupied):
                return
    text.set_position((0.99, value) if axis == "y" else (value, 0.99))
    text.set_ha("right")
    text.set_va("bottom" if axis == "y" else "top")


def draw_pareto(d: ParetoData, paths: list[Path]) -> None:
    """The plot to each of `paths` (PNG, SVG or PDF by extension)."""
    from matplotlib.ticker import FuncFormatter

    from dse.report.figure import pyplot
    from dse.report.label_placement import boxes_of, freeze_layout, label_markers, line_boxes

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 5.5), layout="constrained")
    if len(d.infeasible):
        ax.scatter(d.infeasible[:, 0], d.infeasible[:, 1], s=6, color="0.75", alpha=0.35,
                   lw=0, label=f"infeasible ({len(d.infeasible):,})", rasterized=True)
    if len(d.feasible):
        ax.scatter(d.feasible[:, 0], d.feasible[:, 1], s=8, color="tab:blue", alpha=0.35,
                   lw=0, label=f"feasible ({len(d.feasible):,})", rasterized=True)
    front_line = None
    if len(d.front):
        # the edge of what the front dominates: between two front designs, the better y is
        # the next design's when larger x is better, else this one's
        front_line, = ax.plot(d.front[:, 0], d.front[:, 1], "-o", color="tab:red", ms=4,
                              lw=1.2, label=f"Pareto front ({len(d.front)})",
                              drawstyle="steps-pre" if d.x_max else "steps-post",
                              zorder=d.front_zorder)
    placed, missing = [], list(d.not_drawn)
    for m in d.references:
        # hollow outlines in the chip's colour (dashed outside the study's budget), under
        # the front's markers, so chips at nearly one point and the front all stay visible
        ax.scatter([m.x], [m.y], marker=m.marker, s=REF_SIZE.get(m.marker, 55),
                   facecolor="none", edgecolor=m.colour, linewidth=1.4,
                   linestyle=(0, (2, 1)) if m.outside else "solid", zorder=m.zorder,
                   label=m.label)
        placed.append((m.name, m.x, m.y, m.colour))
    budget_texts = [(_draw_budget(ax, b), b.axis) for b in d.budgets]
    x_arrow = {True: "  \u2192  better", False: "  \u2190  better", None: ""}
    y_arrow = {True: "  \u2191  better", False: "  \u2193  better", None: ""}
    ax.set_xlabel(d.x_label + x_arrow[d.x_max])
    ax.set_ylabel(d.y_label + y_arrow[d.y_max])
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _pos: plain_number(v)))
    ax.set_title(d.title, fontsize=11)
    ax.grid(True, alpha=0.3)
    if missing:  # an entry without a marker, so the layout keeps it clear of the axes
        ax.plot([], [], " ", label="not drawn (a workload does not run):\n"
                + textwrap.fill(", ".join(missing), 40))
    legend = ax.legend(fontsize=8, loc="best", framealpha=0.9)
    renderer = freeze_layout(fig)
    occupied = boxes_of([legend], renderer)
    occupied += [(x - 6, y - 6, x + 6, y + 6)
                 for x, y in ax.transData.transform([(x, y) for _, x, y, _ in placed]
                                                    ).reshape(-1, 2)]
    if front_line is not None:
        xs, ys = front_line.get_xydata().T
        # the corners of the drawn steps (steps-pre: up then across; steps-post: across
        # then up)
        rx, ry = np.repeat(xs, 2), np.repeat(ys, 2)
        corners = (rx[:-1], ry[1:]) if d.x_max else (rx[1:], ry[:-1])
        occupied += line_boxes(ax, *corners, samples=300)
    for text, axis in budget_texts:
        _place_budget(text, axis, renderer, occupied)
        occupied += boxes_of([text], renderer)
    label_markers(fig, ax, [(n, x, y) for n, x, y, _ in placed], renderer, occupied,
                  fontsize=8.5, colours=[c for *_, c in placed], marker_px=5.0,
                  background=True)
    save_all(fig, paths)


# ---- parallel coordinates ----------------------------------------------------------------


# ---- a study's plots ---------------------------------------------------------------------

def study_budgets(study: Study) -> dict[str, float]:
    """The study's budgets by kind: area (mm², per chip) and power (W, per chip)."""
    out = {}
    if study.area_budget is not None:
        out["area"] = float(study.area_budget)
    if study.spec.constraints.power is not None:
        out["power"] = float(study.spec.constraints.power)
    return out


def study_plots(study: Study, t: Tables, folder: Path, title: str) -> list[Path]:
    """pareto.png/.svg/.pdf (the first two objectives) and parallel.png (the front) of a
    study's tables, written to `folder`."""
    from dse.search.outputs import objective_columns

    cols = objective_columns(study)
    unit_of = {c: g.unit(study.jobs) for c, g in zip(cols, study.goals, strict=True)}
    maximize = {c: d == "maximize" for c, d in zip(cols, study.directions, strict=True)}
    base = study.hardware.name
    written: list[Path] = []
    if len(cols) >= 2 and len(t.trials):
        x, y = cols[0], cols[1]
        d = pareto_data(t.trials, t.pareto, t.references, x, y,
                        describe_column(x, unit_of[x], base),
                        describe_column(y, unit_of[y], base), maximize[x], maximize[y],
                        title, study_budgets(study))
        paths = [folder / f"pareto.{ext}" for ext in ("png", "svg", "pdf")]
        draw_pareto(d, paths)
        written += paths
    if len(t.pareto):
        feasible = t.trials[t.trials["feasible"].astype(bool)] if len(t.trials) else t.pareto
        axes = []
        for p in study.params:
            low = float(p.low if p.low is not None else min(p.choices or [0]))
            high = float(p.high if p.high is not None else max(p.choices or [1]))
            named = tuple(p.choices or ()) if p.path.endswith(".generation") else ()
            axes.append(parameter_axis(p.column, low, high, p.log, p.integer, named))
        for c in cols:
            values = np.concatenate([feasible[c].to_numpy(float), t.pareto[c].to_numpy(float)])
            axes.append(objective_axis(c, unit_of[c], base, maximize[c], values))
        n_front = len(t.pareto)
        shown = "" if len(feasible) <= PARALLEL_BACKGROUND else (
            f", every {int(np.ceil(len(feasible) / PARALLEL_BACKGROUND))}th drawn")
        d2 = parallel_data(t.pareto, feasible, axes, len(study.params),
                           f"{study.spec.name}: the Pareto front's {n_front:,} design"
                           f"{'s' if n_front != 1 else ''} (coloured) among the "
                           f"{len(feasible):,} feasible (grey{shown})")
        path = folder / "parallel.png"
        draw_parallel(d2, [path])
        written.append(path)
    return written


def power_budget(text: object) -> float | None:
    """A study file's power cap ('700 W') in W, None when absent or unreadable."""
    if text is None:
        return None
    try:
        return float(units.to_kind(text, units.POWER))
    except (units.UnitError, TypeError, ValueError):
        return None
