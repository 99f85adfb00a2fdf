"""Command-line interface. Thin: parse arguments, call one API function, render.

Bad input (any DseError) prints its one-line messages to stderr and exits with 2; an
unexpected exception is an internal error: a short message and exit 1 (set DSE_DEBUG=1 for
the traceback).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
import yaml

import dse
from dse.errors import DseError

app = typer.Typer(
    name="dse",
    help="Design-space exploration for AI accelerators: hardware x workload -> performance.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable[..., Any])


class Format(StrEnum):
    table = "table"
    yaml = "yaml"
    json = "json"


def _err(text: str) -> None:
    typer.echo(text, err=True)


def user_errors(func: F) -> F:
    """Turn DseError into its message and exit 2; anything else into exit 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except DseError as e:
            _err(str(e))
            raise typer.Exit(e.exit_code) from None
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as e:
            if os.environ.get("DSE_DEBUG"):
                raise
            _err(f"internal error: {type(e).__name__}: {e} (set DSE_DEBUG=1 for details)")
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dse {dse.__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Design-space exploration for AI accelerators."""


@app.command()
@user_errors
def check(
    paths: Annotated[list[Path], typer.Argument(help="Hardware, workload or study YAML files.")],
) -> None:
    """Validate spec files; print every problem as file:line:col: key.path: message."""
    from dse.errors import SpecError
    from dse.spec.load import check_file

    issues = []
    for path in paths:
        try:
            kind = check_file(path)
            typer.echo(f"{path}: ok ({kind})")
        except SpecError as e:
            issues.extend(e.issues)
    if issues:
        raise SpecError(issues)


def _dump(doc: dict[str, Any], fmt: Format) -> str:
    if fmt is Format.json:
        return json.dumps(doc, indent=2)
    return yaml.safe_dump(doc, sort_keys=False, width=100)


@app.command()
@user_errors
def show(
    hardware: Annotated[str, typer.Argument(help="Shipped chip name (h100-sxm) or a path.")],
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.table,
) -> None:
    """Print a resolved hardware spec in SI units with derived figures (peaks, ridge points)."""
    from dse.report.hardware_view import hardware_document, hardware_tables

    spec = dse.load_hardware(hardware)
    if fmt is Format.table:
        from rich.console import Console

        Console(width=max(100, Console().width)).print(hardware_tables(spec))
    else:
        typer.echo(_dump(hardware_document(spec), fmt))


@app.command(name="list")
@user_errors
def list_specs(
    kind: Annotated[str, typer.Argument(help="hardware, workload or study")] = "hardware",
) -> None:
    """List the shipped specs of a kind."""
    from dse.spec.load import LIBRARY_FOLDERS, library_names

    if kind not in LIBRARY_FOLDERS:
        raise DseError(f"unknown kind '{kind}'; expected one of: {', '.join(LIBRARY_FOLDERS)}")
    for name in library_names(kind):
        typer.echo(name)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="dse")
