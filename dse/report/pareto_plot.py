"""Pareto plot of a study (every design, infeasible ones faded, the front drawn, the
reference chips marked by name) and a parallel-coordinates plot of the front's parameters.
Data first (pure, tested), drawing second (matplotlib Agg, imported lazily)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class ParetoData:
    x: str  # column names
    y: str
    x_label: str
    y_label: str
    x_max: bool | None  # the better direction of each axis (None: not known, no arrow)
    y_max: bool | None
    feasible: np.ndarray  # [F, 2]
    infeasible: np.ndarray  # [I, 2] (only those with finite values)
    front: np.ndarray  # [P, 2] sorted along x
    references: list[tuple[str, float, float, bool]]  # name, x, y, feasible
    title: str


def label(column: str, unit: str) -> str:
    name = column.removeprefix("objective.").replace("_", " ")
    return f"{name} ({unit})" if unit else name


def pareto_data(trials: pd.DataFrame, front: pd.DataFrame, refs: pd.DataFrame, x: str,
                y: str, x_label: str, y_label: str, x_max: bool | None, y_max: bool | None,
                title: str
                ) -> ParetoData:
    """Points of a Pareto plot of columns `x` and `y`."""
    for col in (x, y):
        if col not in trials:
            raise KeyError(col)

    def pts(frame: pd.DataFrame) -> np.ndarray:
        v = frame[[x, y]].to_numpy(float) if len(frame) else np.zeros((0, 2))
        return v[np.isfinite(v).all(axis=1)]

    ok = trials["feasible"].astype(bool) if len(trials) else pd.Series(dtype=bool)
    f = pts(front)
    f = f[np.argsort(f[:, 0])] if len(f) else f
    references = [(str(r["chip"]), float(r.get(x, np.nan)), float(r.get(y, np.nan)),
                   bool(r["feasible"])) for _, r in refs.iterrows()] if len(refs) else []
    return ParetoData(x, y, x_label, y_label, x_max, y_max, pts(trials[ok]), pts(trials[~ok]),
                      f, references, title)


def _label_references(fig, ax, placed: list[tuple[str, float, float]]) -> None:
    """Name each reference chip beside its marker, trying a few offsets so that no two
    names overlap (chips with near-equal results sit on top of each other)."""
    offsets = [(8, 6, "left"), (8, -14, "left"), (-8, 6, "right"), (-8, -14, "right"),
               (8, 20, "left"), (8, -28, "left")]
    renderer = fig.canvas.get_renderer()
    boxes = []
    for name, x, y in placed:
        for dx, dy, ha in offsets:
            text = ax.annotate(name, (x, y), xytext=(dx, dy), textcoords="offset points",
                               fontsize=9, ha=ha)
            box = text.get_window_extent(renderer)
            if not any(box.overlaps(b) for b in boxes):
                boxes.append(box)
                break
            text.remove()
        else:
            boxes.append(ax.annotate(name, (x, y), xytext=offsets[0][:2],
                                     textcoords="offset points", fontsize=9
                                     ).get_window_extent(renderer))


def draw_pareto(d: ParetoData, paths: list[Path]) -> None:
    """The plot to each of `paths` (PNG, SVG or PDF by extension)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5.5), constrained_layout=True)
    if len(d.infeasible):
        ax.scatter(d.infeasible[:, 0], d.infeasible[:, 1], s=6, color="0.75", alpha=0.35,
                   lw=0, label=f"infeasible ({len(d.infeasible)})", rasterized=True)
    if len(d.feasible):
        ax.scatter(d.feasible[:, 0], d.feasible[:, 1], s=8, color="tab:blue", alpha=0.35,
                   lw=0, label=f"feasible ({len(d.feasible)})", rasterized=True)
    if len(d.front):
        ax.plot(d.front[:, 0], d.front[:, 1], "-o", color="tab:red", ms=4, lw=1.2,
                label=f"Pareto front ({len(d.front)})",
                # the edge of what the front dominates: between two front designs, the
                # better y is the next design's when larger x is better, else this one's
                drawstyle="steps-pre" if d.x_max else "steps-post")
    markers = ["*", "D", "s", "^", "v", "P", "X"]
    placed = []
    for i, (name, x, y, ok) in enumerate(d.references):
        if not (np.isfinite(x) and np.isfinite(y)):
            continue
        ax.scatter([x], [y], marker=markers[i % len(markers)], s=90, color="black",
                   facecolor="black" if ok else "white", zorder=5,
                   label=name + ("" if ok else " (breaks a constraint)"))
        placed.append((name, x, y))
    _label_references(fig, ax, placed)
    arrow = {True: "  →  better", False: "  ←  better", None: ""}
    ax.set_xlabel(d.x_label + arrow[d.x_max])
    ax.set_ylabel(d.y_label + arrow[d.y_max])
    ax.set_title(d.title, fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best", framealpha=0.9)
    for p in paths:
        fig.savefig(p, dpi=150)
    plt.close(fig)


@dataclass(frozen=True)
class ParallelData:
    columns: list[str]  # parameter and objective columns
    labels: list[str]
    low: np.ndarray  # [C] axis ranges (the study's ranges for parameters)
    high: np.ndarray
    lines: np.ndarray  # [P, C] values of the front's designs
    colour: np.ndarray  # [P] the first objective, for the colour scale
    title: str


def parallel_data(front: pd.DataFrame, columns: list[str], labels: list[str],
                  low: list[float], high: list[float], colour: str, title: str
                  ) -> ParallelData:
    lines = front[columns].to_numpy(float) if len(front) else np.zeros((0, len(columns)))
    return ParallelData(columns, labels, np.array(low, float), np.array(high, float), lines,
                        front[colour].to_numpy(float) if len(front) else np.zeros(0), title)


def draw_parallel(d: ParallelData, paths: list[Path], colour_label: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    span = np.where(d.high > d.low, d.high - d.low, 1.0)
    norm = (d.lines - d.low) / span
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(d.columns)), 4.8),
                           constrained_layout=True)
    cmap = plt.get_cmap("viridis")
    if len(d.colour):
        c_lo, c_hi = float(np.nanmin(d.colour)), float(np.nanmax(d.colour))
        c = (d.colour - c_lo) / (c_hi - c_lo) if c_hi > c_lo else np.zeros(len(d.colour))
        for row, ci in zip(norm, c, strict=True):
            ax.plot(range(len(d.columns)), row, color=cmap(ci), alpha=0.7, lw=1.2)
        sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(c_lo, c_hi))
        fig.colorbar(sm, ax=ax, label=colour_label)
    for i in range(len(d.columns)):
        ax.axvline(i, color="0.4", lw=0.8)
        ax.annotate(f"{d.high[i]:.4g}", (i, 1.0), xytext=(0, 4), textcoords="offset points",
                    ha="center", fontsize=8)
        ax.annotate(f"{d.low[i]:.4g}", (i, 0.0), xytext=(0, -12), textcoords="offset points",
                    ha="center", fontsize=8)
    ax.set_xticks(range(len(d.columns)), d.labels, fontsize=8, rotation=15)
    ax.set_yticks([])
    ax.set_ylim(-0.08, 1.08)
    ax.set_title(d.title, fontsize=11)
    for p in paths:
        fig.savefig(p, dpi=150)
    plt.close(fig)
