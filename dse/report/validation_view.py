"""What `dse validate` prints and plots: predicted vs measured per row, the error summary,
and a log-log scatter per phase and metric with the +-20% band. Plot data is computed first
(pure), then drawn."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dse import units
from dse.validate import Row

BAND = 0.20  # the +-20% band drawn around the diagonal


def screen(rows: list[Row]) -> tuple[list[Row], dict[str, str]]:
    """The rows with every unusable comparison taken out of the scores, and why each such
    row is invalid (by id). A row is invalid when its relative error is not a finite number
    (a measured value so small that (predicted - measured) / measured leaves the float
    range) or its prediction is not finite: it keeps its measured and predicted values but
    loses its rel_error, so no summary, table or plot counts it."""
    out, invalid = [], {}
    for r in rows:
        why = None
        if r.predicted is not None and not math.isfinite(r.predicted):
            why = f"the predicted value ({r.predicted}) is not a finite number"
        elif r.rel_error is not None and not math.isfinite(r.rel_error):
            why = (f"the measured value {r.measured!r} is too small to compare with: the "
                   "relative error is beyond the range of a float")
        if why is None:
            out.append(r)
            continue
        invalid[r.id] = why
        out.append(dataclasses.replace(r, rel_error=None))
    return out, invalid


def validation_document(rows: list[Row], summary: dict,
                        invalid: dict[str, str] | None = None,
                        hardware: list[dict] | None = None,
                        by: dict[str, dict] | None = None) -> dict[str, Any]:
    """Rows and summary as one document; an invalid row (`screen`) has a null rel_error and
    an `invalid` reason, and the summary counts them. `hardware`: each chip as the area and
    cost models give it (dse.validate.hardware_facts); `by`: the summary per file and per
    software stack it ran on (dse.validate.summary_by), as `by_file` and `by_stack`."""
    invalid = invalid or {}
    records = []
    for r in rows:
        rec = r.record()
        if r.id in invalid:
            rec["invalid"] = invalid[r.id]
        records.append(rec)
    doc: dict[str, Any] = {"rows": records, "summary": {**summary, "invalid": len(invalid)}}
    if hardware is not None:
        doc["hardware"] = hardware
    for key, table in (by or {}).items():
        doc[f"by_{key}"] = table
    return doc


def hardware_table(chips: list[dict]) -> Any:
    """The chips of the rows: modelled area beside the published die, and the modelled cost
    to make one chip where the node has a cost model."""
    from rich.table import Table

    t = Table(title="Hardware as modelled (area: the area model's, spares included; cost: to "
                    "make one chip, dse area --cost)", title_justify="left")
    for col in ("hardware", "node", "area", "published", "cost per chip", "note"):
        t.add_column(col, justify="left" if col in ("hardware", "node", "note") else "right",
                     overflow="fold")
    for c in chips:
        area, pub, usd = c["area_mm2"], c["published_mm2"], c["cost_per_chip_usd"]
        t.add_row(c["hardware"], c["node"] or "-",
                  "-" if area is None else f"{area:,.0f} mm2",
                  "-" if pub is None else f"{pub:,.0f} mm2",
                  "-" if usd is None else f"{usd:,.0f} USD", c.get("note") or "")
    return t


# Most rows the table view lists (in file order); the summary covers every row, and
# --format json lists them all. A terminal table of 100,000 rows took 148 s to lay out and
# is read by nobody; 500 rows take ~1 s.
TABLE_ROWS = 500


def validation_tables(doc: dict[str, Any]) -> Any:
    from rich.console import Group
    from rich.table import Table

    hidden = max(len(doc["rows"]) - TABLE_ROWS, 0)
    rows = Table(title="Predicted vs measured (rel_error = (predicted - measured) / measured)",
                 title_justify="left",
                 caption=f"the first {TABLE_ROWS:,} of {len(doc['rows']):,} rows; the summary "
                         "below covers all of them, --format json lists every row"
                 if hidden else None, caption_justify="left")
    for col in ("id", "hardware", "workload", "phase", "metric", "measured", "predicted",
                "rel_error", "bound", "note"):
        rows.add_column(col, justify="right" if col in ("measured", "predicted", "rel_error")
                        else "left", overflow="fold")
    for r in doc["rows"][:TABLE_ROWS]:
        if r["rel_error"] is None:
            why = ("invalid: " + r["invalid"]) if r.get("invalid") else \
                "skipped: " + (r.get("skipped") or "")
            predicted = "-" if r["predicted"] is None else f"{r['predicted']:.4g}"
            rows.add_row(r["id"], r["hardware"], r["workload"], r["phase"], r["metric"],
                         f"{r['measured']:.4g}", predicted, "-", "-", why)
            continue
        rows.add_row(r["id"], r["hardware"], r["workload"], r["phase"], r["metric"],
                     f"{r['measured']:.4g}", f"{r['predicted']:.4g}", f"{r['rel_error']:+.1%}",
                     r["bound"] or "", r.get("note", ""))
    summ = Table(title="|rel_error| by phase", title_justify="left")
    for col in ("phase", "rows", "median", "p90", "max"):
        summ.add_column(col, justify="left" if col == "phase" else "right")
    for phase, s in doc["summary"].items():
        if isinstance(s, dict):
            summ.add_row(phase, str(s["n"]), f"{s['median']:.1%}", f"{s['p90']:.1%}",
                         f"{s['max']:.1%}")
    summ.add_row("skipped", str(doc["summary"]["skipped"]), "", "", "")
    if doc["summary"].get("invalid"):
        summ.add_row("invalid", str(doc["summary"]["invalid"]), "", "", "")
    groups = [_by_table(doc[f"by_{key}"], title) for key, title in
              (("file", "file"), ("stack", "software stack"))
              if len(doc.get(f"by_{key}", {})) > 1]
    return Group(rows, summ, *groups, *([hardware_table(doc["hardware"])]
                                        if doc.get("hardware") else []))


def _by_table(stats: dict[str, dict], title: str) -> Any:
    """|rel_error| per file or per software stack."""
    from rich.table import Table

    table = Table(title=f"|rel_error| by {title}", title_justify="left")
    for col in (title, "rows", "median", "p90", "max"):
        table.add_column(col, justify="left" if col == title else "right", overflow="fold")
    for name, s in stats.items():
        table.add_row(name, str(s["n"]), f"{s['median']:.1%}", f"{s['p90']:.1%}",
                      f"{s['max']:.1%}")
    return table


@dataclass(frozen=True)
class Panel:
    """One panel of the validation plot: the rows of one phase and metric."""

    phase: str
    metric: str
    label: str  # what the metric is, for people
    kind: units.Kind | str  # its unit (a Kind, or a unit string such as tokens/s)
    points: tuple[tuple[str, str, float, float], ...]  # id, hardware, measured, predicted

    @property
    def unit(self) -> str:
        return self.kind if isinstance(self.kind, str) else self.kind.unit


@dataclass(frozen=True)
class ValidationPlot:
    panels: tuple[Panel, ...]
    hardware: tuple[str, ...]  # every chip, in the order of first appearance
    band: float = BAND


def metric_label(metric: str) -> tuple[str, units.Kind | str]:
    """A metric's label and unit: `dse eval`'s table, else from its unit suffix."""
    from dse.report.eval_view import _METRIC_UNITS

    if metric in _METRIC_UNITS:
        return _METRIC_UNITS[metric]
    if metric.endswith("_flop_per_s") or "_flop_per_s_" in metric:
        return metric.replace("_", " "), units.FLOP_RATE
    if metric.endswith("_per_s"):
        return metric.replace("_", " "), metric.removesuffix("_per_s").rsplit("_", 1)[-1] + "/s"
    if metric.endswith("_s"):
        return metric.replace("_", " "), units.TIME
    return metric.replace("_", " "), ""


def plot_data(rows: list[Row]) -> ValidationPlot:
    """The modelled rows as one panel per phase and metric (phases in the order they first
    appear), and the chips they ran on."""
    panels: dict[tuple[str, str], list[tuple[str, str, float, float]]] = {}
    for r in rows:
        if r.rel_error is None or r.predicted is None:
            continue
        panels.setdefault((r.phase, r.metric), []).append(
            (r.id, r.hardware, r.measured, r.predicted))
    return ValidationPlot(
        panels=tuple(Panel(phase, metric, *metric_label(metric), points=tuple(pts))
                     for (phase, metric), pts in panels.items()),
        hardware=tuple(dict.fromkeys(p[1] for pts in panels.values() for p in pts)))


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p")


def _tick(value: float, kind: units.Kind | str) -> str:
    """SI-prefixed for a Kind (200 TFLOP/s, 5 ms); a plain number for a unit string, which
    the axis label carries (20,000)."""
    if isinstance(kind, str):
        return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
    return units.format_quantity(value, kind, digits=3)


def draw(data: ValidationPlot, path: Path) -> None:
    """Predicted against measured on log axes, one panel per phase and metric (its unit on
    both axes), with the diagonal and the +-20% band; every chip its own colour and marker
    (one legend for all panels), row ids placed where they overlap nothing. Written to
    `path` (PNG, SVG or PDF by extension; another extension is a one-line error)."""
    from dse.report.figure import image_format, pyplot, save

    image_format(path, "--plot")
    plt = pyplot()
    n = max(len(data.panels), 1)
    cols = min(n, 3)
    rows = -(-(n + 1) // cols) if n >= 3 else 1  # a spare cell holds the chips' legend
    fig, axes = plt.subplots(rows, cols + (1 if n < 3 else 0),
                             figsize=(4.3 * (cols + (1 if n < 3 else 0)), 4.0 * rows),
                             squeeze=False)
    cells = list(axes.ravel())
    cmap = plt.get_cmap("tab10")
    style = {hw: (cmap(k % 10), MARKERS[k % len(MARKERS)])
             for k, hw in enumerate(data.hardware)}
    placed = []
    for ax, panel in zip(cells, data.panels, strict=False):
        _draw_panel(ax, panel, data.band, style)
        placed.append((ax, panel))
    for ax in cells[len(data.panels):]:
        ax.axis("off")
    # one legend for every panel: the band, the diagonal, then each chip
    seen: dict[str, object] = {}
    for ax, _ in placed:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, h)
    cells[-1].legend(seen.values(), seen.keys(), loc="center", fontsize=8, frameon=False)
    fig.suptitle("Model against measurement (rel. error = (predicted - measured) / measured)",
                 fontsize=10)
    fig.tight_layout()
    _label_rows(fig, placed)
    save(fig, path, "--plot")


def _draw_panel(ax: Any, panel: Any, band: float, style: dict[str, tuple[Any, str]]) -> None:
    """One panel of the validation plot: its points (each chip's colour and marker) over
    the diagonal and the band, on log axes around them."""
    import numpy as np
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    x = np.array([p[2] for p in panel.points])
    y = np.array([p[3] for p in panel.points])
    lo, hi = min(x.min(), y.min()), max(x.max(), y.max())
    mid, span = np.sqrt(lo * hi), max(np.sqrt(hi / lo) * 1.4, 2.0)  # at least 4x
    lo, hi = mid / span, mid * span
    line = np.geomspace(lo, hi, 50)
    ax.fill_between(line, line * (1 - band), line * (1 + band), color="0.9",
                    label=f"±{band:.0%} of measured", zorder=1)
    ax.plot(line, line, color="0.45", lw=0.8, label="predicted = measured", zorder=2)
    for _id, hw, mx, py in panel.points:
        colour, marker = style[hw]
        ax.scatter([mx], [py], s=30, color=colour, marker=marker, edgecolor="white",
                   linewidth=0.5, zorder=3, label=hw)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    subs = (1.0, 2.0, 5.0) if hi / lo < 300 else (1.0,)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10, subs=subs))
        axis.set_major_formatter(FuncFormatter(lambda v, _p, k=panel.kind: _tick(v, k)))
        axis.set_minor_formatter(NullFormatter())
    ax.tick_params(axis="x", labelrotation=30, labelsize=7.5)
    ax.tick_params(axis="y", labelsize=7.5)
    unit = f" ({panel.unit})" if panel.unit else ""
    ax.set_title(f"{panel.phase}: {panel.label}", fontsize=9)
    ax.set_xlabel(f"measured{unit}", fontsize=8.5)
    ax.set_ylabel(f"predicted{unit}", fontsize=8.5)
    ax.grid(True, color="0.93", lw=0.5, zorder=0)


def _label_rows(fig: Any, placed: list[tuple[Any, Any]]) -> None:
    """Each point's row id next to it, kept apart from the points and each other (a leader
    line to the point); an id with no free spot is left out."""
    from dse.report.label_placement import place_labels

    renderer = fig.canvas.get_renderer()
    for ax, panel in placed:
        pts = ax.transData.transform([(p[2], p[3]) for p in panel.points])
        occupied = [(px - 4, py - 4, px + 4, py + 4) for px, py in pts]
        texts = [ax.text(0, 0, p[0], fontsize=6.5, color="0.25", zorder=4)
                 for p in panel.points]
        sizes = [(b.width + 2, b.height + 1)
                 for b in (t.get_window_extent(renderer) for t in texts)]
        frame = ax.get_window_extent(renderer)
        spots = place_labels([tuple(a) for a in pts], sizes, occupied,
                             (frame.x0, frame.y0, frame.x1, frame.y1))
        inverse = ax.transData.inverted()
        for t, spot, (_, h), (px, py) in zip(texts, spots, sizes, pts, strict=True):
            if spot is None:
                t.remove()
                continue
            t.set_position(inverse.transform((spot[0] + 1, spot[1] + h / 2)))
            t.set_va("center")
            w = sizes[texts.index(t)][0]
            lx, ly = inverse.transform((min(max(px, spot[0]), spot[0] + w),
                                        min(max(py, spot[1]), spot[1] + h)))
            mx, my = inverse.transform((px, py))
            ax.plot([mx, lx], [my, ly], color="0.7", lw=0.4, zorder=2)
