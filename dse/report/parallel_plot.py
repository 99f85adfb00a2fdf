"""The parallel-coordinates plot of a study: one vertical axis per objective (relative to the
base chip where it can be) and per parameter, the Pareto front's designs as lines over a
background of the other feasible designs."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dse.report.figure import Scale, describe_column, plain_number, save_all
from dse.spec.vocabulary import generation_names

PARALLEL_BACKGROUND = 20_000  # feasible designs drawn behind the front at most


@dataclass(frozen=True)
class ParallelAxis:
    """One vertical axis: a parameter (the study's range) or an objective (the range of
    the feasible designs), its numbers in `scale`'s unit, log-spaced where the study samples
    it so."""

    column: str
    words: str
    low: float  # stored units
    high: float
    scale: Scale
    log: bool = False
    integer: bool = False
    better: str = ""  # "up" or "down" for an objective, "" for a parameter
    categories: tuple[float, ...] = ()  # a memory generation's choices: ticked by name

    @property
    def label(self) -> str:
        arrow = {"up": " \u2191 better", "down": " \u2193 better", "": ""}[self.better]
        return self.scale.label(self.words) + arrow

    def position(self, values: np.ndarray) -> np.ndarray:
        """Heights 0 (low) to 1 (high) of stored values on this axis."""
        v = np.asarray(values, float)
        if self.log and self.low > 0:
            lo, hi = np.log(self.low), np.log(self.high)
            v = np.log(np.where(v > 0, v, np.nan))
        else:
            lo, hi = self.low, self.high
        return (v - lo) / (hi - lo) if hi > lo else np.full(v.shape, 0.5)

    def ticks(self) -> list[float]:
        """Tick values (stored units): both ends of the range and round numbers of the
        axis's unit between them (powers of two for a log capacity, of ten for other log
        ranges, whole numbers for a whole-number parameter), none crowding another."""
        from matplotlib.ticker import LogLocator, MaxNLocator

        if self.categories:  # named choices: one tick each
            return sorted(self.categories)
        f = self.scale.factor
        lo, hi = self.low / f, self.high / f
        if hi <= lo:
            return [self.low]
        if self.log and lo > 0:
            base = 2 if self.scale.unit.endswith("B") else 10
            inner = [t for t in LogLocator(base=base, subs=(1.0,), numticks=60
                                           ).tick_values(lo, hi) if lo < t < hi]
            while len(inner) > 5:
                inner = inner[1::2]
        else:
            inner = [t for t in MaxNLocator(5, integer=self.integer).tick_values(lo, hi)
                     if lo < t < hi]
        ends = [lo, hi]
        far = [t for t in inner
               if min(abs(float(self.position(np.array([t * f]))[0]) - e)
                      for e in (0.0, 1.0)) > 0.09]
        return [t * f for t in sorted(ends + far)]

    def tick_text(self, value: float) -> str:
        if self.column.endswith(".generation"):
            return generation_names([value])[0]
        return plain_number(value / self.scale.factor)


@dataclass(frozen=True)
class ParallelData:
    axes: list[ParallelAxis]
    lines: np.ndarray  # [P, A] stored values of the front's designs
    background: np.ndarray  # [B, A] stored values of other feasible designs (context)
    colour: int  # index of the axis whose values colour the lines
    title: str


def objective_axis(column: str, unit: str, base: str | None, maximize: bool,
                   values: np.ndarray) -> ParallelAxis:
    """An objective's axis over `values` (the feasible designs' and the front's), 5%
    margin when all are equal."""
    c = describe_column(column, unit, base)
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    lo, hi = (float(v.min()), float(v.max())) if len(v) else (0.0, 1.0)
    if hi <= lo:
        pad = abs(lo) * 0.05 or 1.0
        lo, hi = lo - pad, hi + pad
    return ParallelAxis(column, c.words, lo, hi, c.scale(v), better="up" if maximize
                        else "down")


def parameter_axis(column: str, low: float, high: float, log: bool = False,
                   integer: bool = False, categories: tuple[float, ...] = ()
                   ) -> ParallelAxis:
    """A design parameter's axis over the study's range (a log range in the unit of its
    low end: 16 MiB - 1 GiB in MiB); a memory generation's axis ticks its `categories`
    (catalogue indices) by name."""
    c = describe_column(column)
    return ParallelAxis(column, c.words, low, high, c.scale([low] if log else [low, high]),
                        log, integer, categories=categories)


def parallel_data(front: pd.DataFrame, feasible: pd.DataFrame, axes: list[ParallelAxis],
                  colour: int, title: str) -> ParallelData:
    """Lines of the front's designs on `axes`, the other feasible designs (every k-th
    where there are more than PARALLEL_BACKGROUND) behind them."""
    cols = [a.column for a in axes]
    lines = front[cols].to_numpy(float) if len(front) else np.zeros((0, len(cols)))
    rest = feasible[~feasible.index.isin(front.index)] if len(feasible) else feasible
    if len(rest) > PARALLEL_BACKGROUND:
        rest = rest.iloc[::int(np.ceil(len(rest) / PARALLEL_BACKGROUND))]
    back = rest[cols].to_numpy(float) if len(rest) else np.zeros((0, len(cols)))
    return ParallelData(axes, lines, back, colour, title)


def draw_parallel(d: ParallelData, paths: list[Path]) -> None:
    """One vertical axis per parameter and objective with its ticks in its unit; the
    front's designs as lines coloured by `d.colour`'s axis (the colour bar has the same
    scale and range as that axis, so a line's colour reads as its height there), the other
    feasible designs in grey behind."""
    from matplotlib.collections import LineCollection
    from matplotlib.colors import Normalize
    from matplotlib.ticker import FuncFormatter

    from dse.report.figure import pyplot

    plt = pyplot()
    n = len(d.axes)
    fig, ax = plt.subplots(figsize=(max(7.0, 1.45 * n + 1.5), 5.0), layout="constrained")
    xs = np.arange(n, dtype=float)

    def segments(rows: np.ndarray) -> np.ndarray:
        pos = np.column_stack([a.position(rows[:, i]) for i, a in enumerate(d.axes)])
        return np.stack([np.broadcast_to(xs, pos.shape), pos], axis=-1)

    if len(d.background):
        # faint where thousands overlap, visible where there are few
        alpha = float(np.clip(25.0 / len(d.background), 0.05, 0.5))
        # an (n, m, 2) array of segments, which matplotlib takes; its stub says a Sequence
        ax.add_collection(LineCollection(segments(d.background),  # type: ignore[arg-type]
                                         colors="0.6", alpha=alpha,
                                         lw=0.6, zorder=1, rasterized=True))
    c_axis = d.axes[d.colour]
    norm = Normalize(c_axis.low / c_axis.scale.factor, c_axis.high / c_axis.scale.factor)
    sm = plt.cm.ScalarMappable(cmap=plt.get_cmap("viridis"), norm=norm)
    if len(d.lines):
        order = np.argsort(d.lines[:, d.colour], kind="stable")
        rows = d.lines[order]
        colours = sm.to_rgba(rows[:, d.colour] / c_axis.scale.factor)
        segs = segments(rows)
        ax.add_collection(LineCollection(segs,  # type: ignore[arg-type]  # as above
                                         colors=colours, lw=1.5, alpha=0.95,
                                         zorder=3))
        ax.scatter(segs[..., 0].ravel(), segs[..., 1].ravel(),
                   c=np.repeat(colours, n, axis=0), s=10, zorder=4, lw=0)
    bar = fig.colorbar(sm, ax=ax, label=textwrap.fill(c_axis.label, 40), pad=0.01)
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: plain_number(v)))
    for i, a in enumerate(d.axes):
        ax.axvline(i, color="0.3", lw=0.9, zorder=2)
        for t in a.ticks():
            y = float(a.position(np.array([t]))[0])
            ax.plot([i - 0.03, i], [y, y], color="0.3", lw=0.8, zorder=2)
            ax.text(i - 0.05, y, a.tick_text(t), ha="right", va="center", fontsize=7,
                    color="0.15", zorder=5,
                    bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.75))
    ax.set_xticks(xs, [textwrap.fill(a.label, 16) for a in d.axes], fontsize=8)
    ax.tick_params(axis="x", length=0)
    ax.set_yticks([])
    ax.set_xlim(-0.6, n - 0.5)
    ax.set_ylim(-0.03, 1.03)
    for side in ("left", "right", "top", "bottom"):
        ax.spines[side].set_visible(False)
    # wrapped to the figure's width (about 11 characters an inch at 10.5 pt): a long study
    # name once ran the title off the image
    ax.set_title(textwrap.fill(d.title, width=int(fig.get_figwidth() * 11)), fontsize=10.5)
    save_all(fig, paths)
