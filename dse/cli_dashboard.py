"""`dse dashboard`: a study's Optuna storage in optuna-dashboard (dse.dashboard)."""

from __future__ import annotations

from typing import Annotated

import typer


def dashboard(
    target: Annotated[str, typer.Argument(
        metavar="TARGET",
        help="A `dse study` output folder (its study.journal), a .journal file, or a "
             "database URL (postgresql://user@host:port/db, sqlite:///file.db).")],
    host: Annotated[str, typer.Option(help="Address to listen on (0.0.0.0: every interface; "
                                           "the dashboard has no login).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port).")] = 8080,
) -> None:
    """Serve a study in optuna-dashboard (trials, Pareto front, history, parameter plots) and
    print the address to open; Ctrl-C stops it."""
    from dse.cli_errors import user_errors

    user_errors(_serve)(target, host, port)


def _serve(target: str, host: str, port: int) -> None:
    from dse.dashboard import serve
    from dse.errors import DseError

    if not 0 <= port <= 65535:  # a TCP port (bind() raised OverflowError: exit 1)
        raise DseError(f"--port: expected a whole number from 0 to 65535, found {port}")

    serve(target, host, port, echo=typer.echo, warn=lambda line: typer.echo(line, err=True))
