"""`dse study`: run a study file and write its outputs (tables, Pareto plots, summary,
resolved study). Thin: parse, call dse.search, render with dse.report."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Annotated

import typer

from dse.errors import DseError
from dse.spec.study import IN_MEMORY, MAX_SEED, in_memory_database

# The most worker processes one command starts: each is a Python interpreter holding the
# model (~150 MB); more processes than cores only wait on each other. More machines join a
# study through a shared database (--storage postgresql://...), not through --workers.
MAX_WORKERS = 256


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
    workers: Annotated[int, typer.Option(help="Worker processes on this machine (at most "
                                              f"{MAX_WORKERS}; with --sampler grid, Dask "
                                              "workers: the distributed extra).")] = 1,
    seed: Annotated[int | None, typer.Option(help="Sampler seed (default: search.seed).")]
    = None,
    batch: Annotated[int | None, typer.Option(help="Trials asked and evaluated at a time "
                                                   "(default: search.batch).")] = None,
    sampler: Annotated[str | None, typer.Option(
        help="nsga2, tpe, random, gp or grid (default: search.sampler).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")] = False,
    alternatives: Annotated[bool, typer.Option(
        "--alternatives/--no-alternatives",
        help="Also run the study file's alternatives (each its own study, outputs in "
             "<out>/alternatives/<name>/) and compare them in summary.md.")] = True,
    scheduler: Annotated[str | None, typer.Option(
        help="With --sampler grid: evaluate the grid's chunks on the Dask cluster of this "
             "scheduler, tcp://host:port (needs the distributed extra).")] = None,
    overwrite: Annotated[bool, typer.Option(
        "--overwrite",
        help="Write into an output folder that holds another study's outputs (they are "
             "replaced; its stored trials stay in the journal).")] = False,
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
    _check_options(trials, workers, batch, seed, storage)
    st = load_study(file)
    from dse.check import study_budgets

    # a budget no design meets is refused here (exit 2) rather than after every trial;
    # one the base chip alone breaks is a warning
    study_budgets(st, lambda w: typer.echo(f"warning: {w}", err=True), power=False)
    opts = runner.Options(trials=trials, out=out, storage=storage, workers=workers, seed=seed,
                          batch=batch, sampler=sampler)
    name = sampler or st.spec.search.sampler
    _check_sampler(name, scheduler, workers)
    folder = runner.out_dir(st, opts)
    if folder.exists() and not folder.is_dir():
        raise DseError(f"--out {folder}: exists and is not a folder")
    with _one_command(st, opts):  # a second command on this journal is refused
        if not overwrite:
            _one_study_per_folder(folder, st.spec.name)
        if name == "grid":
            _run_grid(st, opts, folder, quiet, alternatives, scheduler)
        else:
            _run_sampled(st, opts, name, folder, quiet, alternatives)


def _check_options(trials: int | None, workers: int, batch: int | None, seed: int | None,
                   storage: str | None) -> None:
    """DseError naming the option whose value `dse study` cannot run with."""
    for name, v in (("--trials", trials), ("--workers", workers), ("--batch", batch)):
        if v is not None and v < 1:
            raise DseError(f"{name}: expected a whole number >= 1, found {v}")
    if seed is not None and not 0 <= seed <= MAX_SEED:
        shown = seed if abs(seed) < 10**30 else f"a number of {len(str(abs(seed)))} digits"
        raise DseError(f"--seed: expected a whole number from 0 to {MAX_SEED} (2^32 - 1), "
                       f"found {shown}")
    if workers > MAX_WORKERS:
        raise DseError(f"--workers: expected at most {MAX_WORKERS} worker processes on one "
                       f"machine, found {workers if workers < 10**30 else 'more'}; to use more "
                       "machines, run the command on each with a shared --storage")
    if storage is not None and in_memory_database(storage):
        raise DseError(f"--storage {storage}: {IN_MEMORY}")  # sqlite: no password


def _check_sampler(name: str, scheduler: str | None, workers: int) -> None:
    """DseError for an unknown sampler, or a --scheduler that does not go with it."""
    if name not in ("nsga2", "tpe", "random", "gp", "grid"):
        raise DseError(f"--sampler: expected nsga2, tpe, random, gp or grid, found '{name}'")
    if scheduler is not None and name != "grid":
        raise DseError(f"--scheduler {scheduler}: only with --sampler grid (a sampled "
                       "study's workers on several machines share a --storage "
                       "postgresql://...)")
    if scheduler is not None and workers > 1:
        raise DseError(f"--scheduler {scheduler}: the grid runs on that cluster's workers; "
                       "drop --workers (it starts processes on this machine)")


def _run_grid(st, opts, folder: Path, quiet: bool, alternatives: bool,
              scheduler: str | None) -> None:
    """Evaluate the study's grid (and its alternatives') on this machine's workers or a
    Dask cluster, then write the outputs."""
    from dse.report.study_outputs import write_grid
    from dse.search.grid import check_grid_size, grid_cluster

    if opts.storage is not None:
        raise DseError("--sampler grid: the grid's designs are evaluated without a "
                       "storage; drop --storage (--workers N or --scheduler "
                       "tcp://host:port spread the grid over processes)")
    check_grid_size(st)  # before any worker starts
    with grid_cluster(opts.workers, scheduler) as cluster:
        alts = _alternatives(st, opts, "grid", folder, quiet, alternatives, cluster)
        with _writing(folder):
            report = write_grid(st, folder, quiet=quiet, alternatives=alts, cluster=cluster)
        for w in cluster.warnings() if cluster is not None else ():
            typer.echo(f"warning: {w}", err=True)
    _told(report)


def _run_sampled(st, opts, name: str, folder: Path, quiet: bool, alternatives: bool) -> None:
    """Run the sampler `name` to the trials wanted (then the alternatives) and write the
    outputs; Ctrl-C or SIGTERM stops it with every finished trial kept (exit 130)."""
    from dse.report.study_outputs import write_all
    from dse.search import run as runner

    report, bar = _reporter(not quiet, opts.trials or st.spec.search.trials)
    started = time.perf_counter()
    stopped = False
    try:
        prog = runner.run(st, opts, _checked(report))
        stopped = _lost_signal()  # one that arrived in the last batch
    except KeyboardInterrupt:
        _acted_on_signals()
        stopped = True
        prog = None
    finally:
        if bar is not None:
            bar.stop()
    wall = time.perf_counter() - started
    alts = None
    if not stopped:
        try:
            alts = _alternatives(st, opts, name, folder, quiet, alternatives)
        except KeyboardInterrupt:
            _acted_on_signals()
            stopped = True
    with _writing(folder):
        written = write_all(st, opts, name, wall, prog, alternatives=alts)
    if stopped:
        for line in written.lines:
            typer.echo(line)
        typer.echo("stopped by Ctrl-C (or SIGTERM): every finished trial is kept; run "
                   "the same command to resume", err=True)
        raise typer.Exit(130)
    _told(written)


@contextlib.contextmanager
def _one_command(st, opts):
    """For the whole command (search, alternatives, outputs): the run lock of the study's
    journal (dse.search.journal.RunLock; none for a database, which many processes share by
    design), and SIGTERM handled as Ctrl-C, so a `kill` ends the run the way Ctrl-C does:
    finished trials kept, outputs written, exit 130."""
    from dse.search import run as runner
    from dse.search.journal import RunLock

    url = runner.storage_url(st, opts)
    lock = contextlib.nullcontext() if "://" in url else RunLock(Path(url))
    main = threading.current_thread() is threading.main_thread()
    _acted_on_signals()
    previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGINT, signal.SIGTERM)} \
        if main else {}
    try:
        with lock:
            yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def _writing(folder: Path):
    """Ctrl-C or SIGTERM while the outputs are written: one line and exit 130. The outputs
    are a set moved in whole (dse.search.atomic.staged), so the folder keeps the previous
    run's (or none), and every finished trial is in the storage."""
    from dse.search.atomic import Interrupted

    written = ("stopped by Ctrl-C (or SIGTERM) once the outputs were written: every finished "
               f"trial is kept and {folder}/ holds this run's outputs")
    try:
        yield
    except Interrupted:  # held until the last output was moved in
        _acted_on_signals()
        typer.echo(written, err=True)
        raise typer.Exit(130) from None
    except KeyboardInterrupt:
        _acted_on_signals()
        typer.echo(f"stopped by Ctrl-C (or SIGTERM) while writing the outputs: every finished "
                   f"trial is kept and {folder}/ is left as it was before this run; run the "
                   "same command to write them", err=True)
        raise typer.Exit(130) from None
    if _lost_signal():
        typer.echo(written, err=True)
        raise typer.Exit(130)


def _one_study_per_folder(folder: Path, name: str) -> None:
    """Refuse an output folder whose outputs are another study's (its run.json names it):
    the two would overwrite each other's tables and summary."""
    import json

    try:
        held = json.loads((folder / "run.json").read_text()).get("study")
    except (OSError, ValueError, AttributeError):
        return  # no outputs yet (or not ours to read): nothing to overwrite
    if isinstance(held, str) and held != name:
        raise DseError(f"--out {folder}: holds the outputs of study '{held}', not '{name}'; "
                       "give this study its own --out, or --overwrite to replace them")


# Ctrl-C and SIGTERM received, and acted on, during this command. The KeyboardInterrupt a
# signal handler raises is lost when C code under it clears errors (numpy comparing a pandas
# dtype, while the outputs are written, does: the run then ended 0 as if never signalled), so
# a signal that no KeyboardInterrupt followed is raised again at the next batch
# (`_checked`), or noticed once the outputs are written.
_signals = {"received": 0, "acted": 0}


def _interrupt(signum, frame) -> None:
    _signals["received"] += 1
    raise KeyboardInterrupt


def _acted_on_signals() -> None:
    _signals["acted"] = _signals["received"]


def _lost_signal() -> bool:
    """Whether a signal arrived whose KeyboardInterrupt was lost (then: acted on now)."""
    lost = _signals["received"] > _signals["acted"]
    _acted_on_signals()
    return lost


def _checked(report):
    """`report` (or nothing) after each batch, first raising KeyboardInterrupt for a signal
    whose own was lost: the run stops at that batch's end as Ctrl-C stops it."""
    def checked(p) -> None:
        if _lost_signal():
            raise KeyboardInterrupt
        if report:
            report(p)
    return checked


def _alternatives(st, opts, sampler: str, folder: Path, quiet: bool, enabled: bool,
                  cluster=None):
    """Run each alternative of the study as a study of its own (its outputs in
    <folder>/alternatives/<name>/; its own trials, never more than the main run's) and print
    a line for each; their reports by name (None: the study has none, or --no-alternatives).
    A grid's chunks go to `cluster` (dse.search.cluster.GridCluster) when there is one."""
    if not st.alternatives or not enabled:
        return None
    from dataclasses import replace

    from dse.report.study_outputs import write_all, write_grid
    from dse.search import run as runner

    out = {}
    for alt_name, alt in st.alternatives.items():
        want = alt.spec.search.trials
        trials = want if opts.trials is None else min(want, opts.trials)
        alt_opts = replace(opts, out=folder / "alternatives" / alt_name, trials=trials)
        target = alt_opts.out
        assert target is not None
        if target.exists() and not target.is_dir():
            raise DseError(f"--out {target}: exists and is not a folder")
        started = time.perf_counter()
        if sampler == "grid":
            rep = write_grid(alt, target, quiet=quiet, cluster=cluster)
        else:
            report, bar = _reporter(not quiet, trials)
            try:
                prog = runner.run(alt, alt_opts, _checked(report))
            finally:
                if bar is not None:
                    bar.stop()
            rep = write_all(alt, alt_opts, sampler, time.perf_counter() - started, prog)
        out[alt_name] = rep
        head = rep.lines[0] if rep.lines else ""
        typer.echo(f"alternative {alt_name}: {head}; {rep.written} files in {target}/")
    return out


def _told(report) -> None:
    """Print a run's closing lines; with no feasible design, say why on stderr and exit 3
    (as `dse eval` does for an infeasible design: the outputs are written in full first)."""
    for line in report.lines:
        typer.echo(line)
    for w in report.warnings:
        typer.echo(f"warning: {w}", err=True)
    if report.trials and not report.feasible:
        raise typer.Exit(3)
