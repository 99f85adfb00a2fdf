"""What `dse validate` prints and plots: predicted vs measured per row, the error summary,
and a log-log scatter with the +-20% band. Plot data is computed first (pure), then drawn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dse.validate import Row

BAND = 0.20  # the +-20% band drawn around the diagonal


def validation_document(rows: list[Row], summary: dict) -> dict[str, Any]:
    return {"rows": [r.record() for r in rows], "summary": summary}


def validation_tables(doc: dict[str, Any]) -> Any:
    from rich.console import Group
    from rich.table import Table

    rows = Table(title="Predicted vs measured (rel_error = (predicted - measured) / measured)",
                 title_justify="left")
    for col in ("id", "hardware", "workload", "phase", "metric", "measured", "predicted",
                "rel_error", "bound", "note"):
        rows.add_column(col, justify="right" if col in ("measured", "predicted", "rel_error")
                        else "left", overflow="fold")
    for r in doc["rows"]:
        if r["rel_error"] is None:
            rows.add_row(r["id"], r["hardware"], r["workload"], r["phase"], r["metric"],
                         f"{r['measured']:.4g}", "-", "-", "-", "skipped: " + r["skipped"])
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
    return Group(rows, summ)


def plot_data(rows: list[Row]) -> dict[str, Any]:
    """Points by phase and the axis range with the diagonal band."""
    done = [r for r in rows if r.rel_error is not None]
    points: dict[str, list[tuple[float, float, str]]] = {}
    for r in done:
        points.setdefault(r.phase, []).append((r.measured, r.predicted, r.id))  # type: ignore[arg-type]
    return {"points": points, "band": BAND}


def draw(data: dict[str, Any], path: Path) -> None:
    """Predicted against measured on log axes, one panel per phase (each in its metric's
    SI units), with the diagonal and the +-20% band; written to `path` (PNG, SVG, PDF)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    phases = list(data["points"])
    fig, axes = plt.subplots(1, max(len(phases), 1), figsize=(3.4 * max(len(phases), 1), 3.6),
                             squeeze=False)
    for ax, phase in zip(axes[0], phases, strict=False):
        pts = data["points"][phase]
        x = np.array([p[0] for p in pts])
        y = np.array([p[1] for p in pts])
        lo, hi = min(x.min(), y.min()) / 1.5, max(x.max(), y.max()) * 1.5
        line = np.geomspace(lo, hi, 50)
        ax.fill_between(line, line * (1 - data["band"]), line * (1 + data["band"]),
                        color="0.85", label=f"±{data['band']:.0%}")
        ax.plot(line, line, color="0.4", lw=0.8)
        ax.scatter(x, y, s=14, zorder=3)
        for xi, yi, label in pts:
            ax.annotate(label, (xi, yi), fontsize=6, xytext=(2, 2), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.yaxis.set_minor_formatter(plt.NullFormatter())
        ax.set_title(phase)
        ax.set_xlabel("measured")
        ax.set_ylabel("predicted")
    axes[0][0].legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
