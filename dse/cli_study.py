"""`dse study`: run a study file and write its outputs (tables, Pareto plots, summary,
resolved study). Thin: parse, call dse.search, render with dse.report."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from dse.errors import DseError
from dse.spec.study import MAX_SEED


def _reporter(enabled: bool, total: int):
    """A progress bar on a terminal, a log line per ~2 s otherwise."""
    if not enabled:
        return None, None
    if sys.stderr.isatty():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        bar = Progress(TextColumn("study"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("{task.fields[info]}"), transient=False)
        task = bar.add_task("trials", total=total, info="")
        bar.start()

        def report(p) -> None:
            bar.update(task, completed=p.done, info=f"feasible {p.feasible}, front {p.front}, "
                                                    f"{p.rate:,.0f} trials/s")
        return report, bar
    last = [0.0]

    def log(p) -> None:
        now = time.perf_counter()
        if now - last[0] >= 2.0 or p.done >= total:
            last[0] = now
            typer.echo(f"trials {p.done}/{total}, feasible {p.feasible}, front {p.front}, "
                       f"{p.rate:,.0f} trials/s", err=True)
    return log, None


def study(
    file: Annotated[str, typer.Argument(help="Study file (a path, or a shipped study's name).",
                                        metavar="FILE")],
    trials: Annotated[int | None, typer.Option(help="Complete trials wanted in the storage "
                                                    "(default: search.trials).")] = None,
    out: Annotated[Path | None, typer.Option(help="Output folder (default: runs/<name>).")]
    = None,
    storage: Annotated[str | None, typer.Option(
        help="Optuna storage shared by workers, e.g. postgresql://user@host/db (default: "
             "the file's storage, else a journal file in the output folder).")] = None,
    workers: Annotated[int, typer.Option(help="Worker processes on this machine.")] = 1,
    seed: Annotated[int | None, typer.Option(help="Sampler seed (default: search.seed).")]
    = None,
    batch: Annotated[int | None, typer.Option(help="Trials asked and evaluated at a time "
                                                   "(default: search.batch).")] = None,
    sampler: Annotated[str | None, typer.Option(
        help="nsga2, tpe, random, gp or grid (default: search.sampler).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")] = False,
) -> None:
    """Search designs derived from the study's base chip for its objectives under its
    constraints, then write trials.csv / trials.parquet, pareto.csv, pareto.png/svg/pdf,
    parallel.png, summary.md and study.resolved.yaml to the output folder. Re-running resumes
    the stored study; Ctrl-C stops with every finished trial kept."""
    import logging
    import warnings

    import optuna

    from dse.search import run as runner
    from dse.search.space import load_study

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("optuna").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)

    for name, v in (("--trials", trials), ("--workers", workers), ("--batch", batch)):
        if v is not None and v < 1:
            raise DseError(f"{name}: expected a whole number >= 1, found {v}")
    if seed is not None and not 0 <= seed <= MAX_SEED:
        shown = seed if abs(seed) < 10**30 else f"a number of {len(str(abs(seed)))} digits"
        raise DseError(f"--seed: expected a whole number from 0 to {MAX_SEED} (2^32 - 1), "
                       f"found {shown}")
    st = load_study(file)
    opts = runner.Options(trials=trials, out=out, storage=storage, workers=workers, seed=seed,
                          batch=batch, sampler=sampler)
    name = sampler or st.spec.search.sampler
    if name not in ("nsga2", "tpe", "random", "gp", "grid"):
        raise DseError(f"--sampler: expected nsga2, tpe, random, gp or grid, found '{name}'")
    folder = runner.out_dir(st, opts)
    if folder.exists() and not folder.is_dir():
        raise DseError(f"--out {folder}: exists and is not a folder")
    if name == "grid":
        from dse.report.study_outputs import write_grid

        if storage is not None or workers > 1:
            raise DseError("--sampler grid: the grid runs in this process without a storage; "
                           "drop --storage and --workers")
        for line in write_grid(st, folder, quiet=quiet):
            typer.echo(line)
        return
    target = trials or st.spec.search.trials
    report, bar = _reporter(not quiet, target)
    started = time.perf_counter()
    stopped = False
    try:
        prog = runner.run(st, opts, report)
    except KeyboardInterrupt:
        stopped = True
        prog = None
    finally:
        if bar is not None:
            bar.stop()
    wall = time.perf_counter() - started
    from dse.report.study_outputs import write_all

    lines = write_all(st, opts, name, wall, prog)
    for line in lines:
        typer.echo(line)
    if stopped:
        typer.echo("stopped by Ctrl-C: every finished trial is kept; run the same command "
                   "to resume", err=True)
        raise typer.Exit(130)
