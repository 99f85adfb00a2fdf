"""`dse validate`: every measured case through the model, predicted against measured per row
and summarised per phase, as tables, JSON or a plot. Thin: parse, call dse.validate,
render with dse.report.validation_view."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from dse.cli_options import Format
from dse.errors import DseError

T = TypeVar("T")


def _with_progress(label: str, work: Callable[[Callable[[int, int], None] | None], T]) -> T:
    """work(report): with a transient progress bar on stderr when it is a terminal (report
    gets done and total), else with no report."""
    if not sys.stderr.isatty():
        return work(None)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), transient=True,
                  console=Console(stderr=True)) as bar:
        task = bar.add_task(label, total=None)
        return work(lambda done, total: bar.update(task, completed=done, total=total))


def validate(
    measurements: Annotated[list[Path] | None, typer.Option(
        help="Measurement CSV; repeat for several (default: the shipped copies of "
             "shared/validation: measurements.csv, gemm-calibration.csv and "
             "current-stacks.csv, with current-stacks-pending.csv as --pending).")] = None,
    pending: Annotated[list[Path] | None, typer.Option(
        help="Measurement CSV whose rows may need what the model cannot express yet: a row "
             "that cannot run is reported with the reason instead of stopping the run; "
             "repeat for several.")] = None,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="table or json.")]
    = Format.table,
    plot: Annotated[Path | None, typer.Option(help="Write predicted vs measured (log axes, "
                                                   "+-20% band) to this image file.")] = None,
) -> None:
    """Run every measured case through the model: predicted vs measured, relative error per
    row, and median / p90 / max of |error| per phase. Exit 0 whatever the errors."""
    from dse import validate as val
    from dse.report import validation_view as view

    if fmt is Format.yaml:
        raise DseError("--format: expected table or json")
    rows, invalid = view.screen(_with_progress(
        "validate", lambda report: val.run(measurements or None, progress=report,
                                           pending=pending or None)))
    doc = view.validation_document(rows, val.summary(rows), invalid, val.hardware_facts(rows),
                                   by={k: val.summary_by(rows, k) for k in ("file", "stack")})
    if plot is not None:
        view.draw(view.plot_data(rows), plot)
    if fmt is Format.json:
        from dse.report import jsonout

        typer.echo(jsonout.dumps(doc))
    else:
        from rich.console import Console

        Console(width=max(160, Console().width)).print(view.validation_tables(doc))
        if plot is not None:
            typer.echo(f"plot written to {plot}")
