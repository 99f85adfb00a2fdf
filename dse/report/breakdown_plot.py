"""`dse plot breakdown`: where a scenario's step time goes, operator by operator, coloured
by the resource that bounds each one, with the step's time by bound above.

Times are per chip and per step, totals over each operator's count (`Evaluation.op_records`,
the table `dse eval` prints): a decode step covers seq_out tokens, a serve step one
iteration (without the serving engine's host overhead, which is no operator's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dse import units
from dse.model import Evaluation
from dse.report.figure import axis_scale, bound_colours, plain_number

TOP_OPERATORS = 20  # bars drawn; the rest are folded into one "other" bar
OTHER = "other"  # the bound shown for the folded bar


@dataclass(frozen=True)
class BreakdownData:
    title: str
    total_s: float  # s, the step's time over every operator and collective
    ops: pd.DataFrame  # name, count, time_s, share, bound: longest first, tail folded
    by_bound: pd.DataFrame  # bound, time_s, share: longest first
    colours: dict[str, str] = field(default_factory=dict)  # bound -> colour


def breakdown_data(ev: Evaluation, i: int = 0, top: int = TOP_OPERATORS,
                   title: str | None = None) -> BreakdownData:
    """Operators of design i by total time (the `top` longest, then one row for the rest,
    bound 'other'), and the step's time summed by bound."""
    rows = pd.DataFrame(ev.op_records(i), columns=["name", "count", "time_s", "share",
                                                   "bound"])
    total = float(rows["time_s"].sum())
    by_bound = (rows.groupby("bound", sort=False)["time_s"].sum()
                .sort_values(ascending=False).reset_index())
    by_bound["share"] = by_bound["time_s"] / total if total > 0 else 0.0
    shown = rows.head(top).reset_index(drop=True)
    rest = rows.iloc[top:]
    if len(rest):
        shown = pd.concat([shown, pd.DataFrame([{
            "name": f"{len(rest)} other operators", "count": float(rest["count"].sum()),
            "time_s": float(rest["time_s"].sum()), "share": float(rest["share"].sum()),
            "bound": OTHER}])], ignore_index=True)
    colours = bound_colours(ev.level_names)
    colours[OTHER] = "#c7c7c7"
    return BreakdownData(title=title or f"{ev.workload} on {ev.hardware}", total_s=total,
                         ops=shown, by_bound=by_bound, colours=colours)


def _time(v: float) -> str:
    return "0" if v == 0 else units.format_quantity(v, units.TIME, 3)


def share_text(v: float) -> str:
    """A share of the step: 22.6%, <0.1%."""
    return "<0.1%" if 0 < v < 0.001 else f"{v:.1%}"


def draw(data: BreakdownData, path: Path) -> Path:
    """Horizontal bars, one per operator (longest on top) coloured by bound and labelled
    with its share of the step; above them one bar of the step split by bound. Written to
    `path` (PNG, SVG or PDF by extension)."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    from dse.report.figure import image_format, pyplot, save

    image_format(path)
    plt = pyplot()
    ops = data.ops
    n = len(ops)
    fig, (top, ax) = plt.subplots(2, 1, figsize=(9, 1.9 + 0.3 * n),
                                  gridspec_kw={"height_ratios": [1.1, max(n, 1)]})
    # the step by bound: one stacked bar of shares, written where they fit
    top.set_xlim(0, 1)
    left = 0.0
    for row in data.by_bound.itertuples():
        top.barh(0, row.share, left=left, color=data.colours.get(row.bound, "black"),
                 edgecolor="white", height=0.7, label=f"{row.bound} {share_text(row.share)}")
        left += row.share
    top.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.0%}"))
    top.tick_params(axis="x", labelsize=7.5)
    top.set_yticks([0], ["step"])
    top.set_ylim(-0.5, 0.5)
    top.set_title(f"{data.title}\nstep time per chip {_time(data.total_s)}: share by bound "
                  "(top), operators by time (below)", fontsize=9.5)
    # operators, longest on top
    y = list(range(n))[::-1]
    ax.barh(y, ops["time_s"], color=[data.colours.get(b, "black") for b in ops["bound"]],
            height=0.72, edgecolor="white")
    longest = float(ops["time_s"].max()) if n else 1.0
    for yi, row in zip(y, ops.itertuples(), strict=True):
        ax.text(row.time_s + longest * 0.01, yi, f"{share_text(row.share)}  ({row.count:,.0f}x)",
                va="center", fontsize=7)
    ax.set_yticks(y, ops["name"], fontsize=8)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlim(0, longest * 1.22)
    # ticks in one unit, the one the longest bar needs (ms for a 1.6 s axis would read
    # 1,600: seconds then), named in the axis label
    scale = axis_scale(units.TIME, [longest * 1.22])
    ax.xaxis.set_major_locator(MaxNLocator(6))
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda v, _pos: plain_number(round(v / scale.factor, 9))))
    ax.set_xlabel(scale.label("time per step per chip") + ", total over each operator's "
                  "count")
    ax.grid(True, axis="x", color="0.92", lw=0.6)
    ax.set_axisbelow(True)
    handles, labels = top.get_legend_handles_labels()
    if OTHER in set(ops["bound"]):
        handles.append(plt.Rectangle((0, 0), 1, 1, color=data.colours[OTHER]))
        labels.append("several (folded operators)")
    ax.legend(handles, labels, title="bound (share of the step)", fontsize=7.5,
              title_fontsize=8, loc="lower right", framealpha=0.95)
    fig.tight_layout()
    # each bound's name and share inside its segment, or the share alone, where it fits
    renderer = fig.canvas.get_renderer()
    left = 0.0
    for row in data.by_bound.itertuples():
        room = top.transData.transform([(left, 0), (left + row.share, 0)])
        for text in (f"{row.bound}\n{row.share:.0%}", f"{row.share:.0%}"):
            t = top.text(left + row.share / 2, 0, text, ha="center", va="center",
                         fontsize=7.5, color="white", fontweight="bold")
            if t.get_window_extent(renderer).width < (room[1][0] - room[0][0]) - 4:
                break
            t.remove()
        left += row.share
    return save(fig, path)
