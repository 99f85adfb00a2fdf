"""`dse area`: die area from the process-node constants (breakdown, die edge, package
geometry, error against the published area) and, with --cost, the cost to make one chip.
Thin: parse, call dse.model.area and cost, render with dse.report.area_view."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dse.cli_options import Format
from dse.cli_options import set_values as _overrides
from dse.errors import DseError


def area(
    hardware: Annotated[list[str], typer.Argument(help="Shipped chip names or paths.")],
    fmt: Annotated[Format, typer.Option("--format", "-f", help="table or json.")]
    = Format.table,
    plot: Annotated[Path | None, typer.Option(help="Write a stacked bar of the breakdowns "
                                                   "(chips side by side) to this image.")]
    = None,
    reticle: Annotated[bool, typer.Option(help="Treat a die above the reticle, HBM stacks "
                                               "beyond their die edges or an interposer "
                                               "beyond its packaging as infeasible.")] = False,
    cost: Annotated[bool, typer.Option("--cost", help="Also the cost to make one chip: "
                                       "good dies (wafer price, dies per wafer, yield with "
                                       "harvesting), memory, package, assembly.")] = False,
    sets: Annotated[list[str] | None, typer.Option(
        "--set", help="Override a hardware field of every chip: dotted.path=value (with "
                      "units), one value; repeatable. Takes the package and spares "
                      "assumptions too (technology.package.hbm_edges=4, "
                      "technology.spares=none).")] = None,
) -> None:
    """Die area from the process-node constants: breakdown by component, the die edge the
    off-chip interfaces need, the package geometry, and the error against the published
    area; with --cost, the cost to make one chip from the same area."""
    from dse.model.area import area as die_area
    from dse.model.batch import design_batch
    from dse.model.cost import cost as chip_cost
    from dse.report import area_view
    from dse.spec.load import hardware_with_technology

    if fmt is Format.yaml:
        raise DseError("--format: expected table or json")
    if plot is not None:  # a bad --plot before any work, as every other --plot and --out
        from dse.report.figure import image_format

        image_format(plot, "--plot")
    overrides = {}
    for path, values in _overrides(sets).items():
        if len(values) != 1:
            raise DseError(f"--set {path}: dse area shows one design per chip; give one value")
        overrides[path] = values[0]
    docs = []
    for ref in hardware:
        spec, tech = hardware_with_technology(ref)
        db = design_batch(spec, overrides or None)
        res = die_area(db, tech, reticle=reticle, package=reticle)
        doc = area_view.area_document(res)
        if cost:
            doc["cost"] = area_view.cost_document(chip_cost(db, tech, res))
        docs.append(doc)
    if plot is not None:
        area_view.draw(docs, plot)
    if fmt is Format.json:
        from dse.report import jsonout

        typer.echo(jsonout.dumps(docs[0] if len(docs) == 1 else docs))
    else:
        from rich.console import Console

        Console(width=max(100, Console().width)).print(area_view.area_tables(docs))
        if plot is not None:
            typer.echo(f"plot written to {plot}")
