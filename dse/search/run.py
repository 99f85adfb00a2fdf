"""Running a study: batched ask/tell against Optuna, persisted to a journal file (default)
or a shared database, resumable, with any number of worker processes.

One process (the default): the sampler works on an in-memory copy of the study, loaded
from the storage at start; each batch is asked, evaluated in one vectorized call per
workload, told, and then appended to the storage as finished trials (`add_trials`), so a
kill loses at most the batch in flight and a re-run completes the rest. Workers (`workers`
> 1, or a database URL): each process does the same on its own in-memory copy and commits
each finished batch to the shared storage under its lock, within the budget, reading the
others' trials once per batch (dse.search.workers), so workers together complete exactly
the requested number.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import optuna
from optuna.trial import TrialState

from dse.errors import DseError
from dse.search import database, journal, signals
from dse.search.objective import Outcome, baseline_of, evaluate_designs
from dse.search.samplers import GP_MISSING as GP_MISSING
from dse.search.samplers import gp_available as gp_available
from dse.search.space import Study
from dse.search.trials import FEASIBLE as FEASIBLE
from dse.search.trials import attr_columns as attr_columns
from dse.search.trials import make_sampler, open_storage, params_of, tell_batch
from dse.search.urls import redact
from dse.search.workers import Snapshot

JOURNAL = "study.journal"
FINGERPRINT = "dse_fingerprint"
SURPLUS = "dse_surplus"  # user attr of a FAIL trial past the budget (stores of dse < 0.2)


@dataclass
class Options:
    """Run settings; None: the study file's."""

    trials: int | None = None
    out: Path | None = None
    storage: str | None = None
    workers: int = 1
    seed: int | None = None
    batch: int | None = None
    sampler: str | None = None


@dataclass
class Progress:
    """What a run reports as it goes (to a progress bar or log lines)."""

    done: int = 0
    feasible: int = 0
    front: int = 0
    started: float = field(default_factory=time.perf_counter)
    new: int = 0  # trials this run added
    evaluated: list = field(default_factory=list)  # (params, Outcome) of each batch run here
    stored: optuna.Study | Snapshot | None = None  # the stored trials, as this process has them

    @property
    def rate(self) -> float:
        return self.new / max(time.perf_counter() - self.started, 1e-9)


def out_dir(study: Study, opts: Options) -> Path:
    return opts.out if opts.out is not None else Path("runs") / study.spec.name


def storage_url(study: Study, opts: Options) -> str:
    """The storage a run uses: --storage, the file's `storage`, else the journal file."""
    return opts.storage or study.spec.storage or str(out_dir(study, opts) / JOURNAL)


def open_study(study: Study, storage: optuna.storages.BaseStorage, url: str
               ) -> optuna.Study:
    """The stored study of this name, created if new; refused if it was made by a different
    study file (another digest of parameters, workloads, objectives, constraints)."""
    name = study.spec.name
    try:
        stored = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        stored = optuna.create_study(study_name=name, storage=storage,
                                     directions=study.directions, load_if_exists=True)
        if FINGERPRINT not in stored.user_attrs:
            stored.set_user_attr(FINGERPRINT, study.fingerprint())
            with warnings.catch_warnings():  # experimental since Optuna 3.2, still in 5.0
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                stored.set_metric_names([g.name for g in study.goals])
            stored.set_user_attr("dse_study_file", str(study.path))
    found = stored.user_attrs.get(FINGERPRINT)
    if found is not None and found != study.fingerprint():
        raise DseError(f"{study.path}: the study '{name}' stored in {redact(url)} was run from "
                       "a different study file (its parameters, workloads, objectives or "
                       "constraints changed); refusing to mix the two: use another --out "
                       "(or --storage), or delete the stored run")
    if [d.name.lower() for d in stored.directions] != study.directions:
        raise DseError(f"{study.path}: the stored study '{name}' has other objectives")
    return stored


def _front(values: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    """The rows of `values` on their Pareto front (the front of a union is the front of
    the old front and the new rows, so a run keeps only its front)."""
    from dse.search.pareto import front_mask

    return values[front_mask(values, directions)] if len(values) else values


Evaluator = Callable[[Study, dict[str, np.ndarray], dict[str, dict[str, float]]], Outcome]


def run(study: Study, opts: Options, report: Callable[[Progress], None] | None = None,
        evaluator: Evaluator = evaluate_designs) -> Progress:
    """Run `study` until its storage holds the requested number of complete trials.
    `evaluator` replaces the model (the benchmark times Optuna alone with an empty one)."""
    url = storage_url(study, opts)
    workers = max(opts.workers, 1)
    baseline = baseline_of(study)
    if workers > 1 or "://" in url:
        return _run_workers(study, opts, url, workers, report)
    storage = open_storage(url)
    stored = open_study(study, storage, url)
    spec = study.spec.search
    target = opts.trials or spec.trials
    batch = opts.batch or spec.batch
    seed = spec.seed if opts.seed is None else opts.seed
    sampler_name = opts.sampler or spec.sampler
    _fail_running(stored)
    previous = stored.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    # A resumed run's sampler continues from the stored trials with a seed of its own, so
    # the first run and each resumption are reproducible.
    mem = optuna.create_study(directions=study.directions, sampler=make_sampler(
        sampler_name, seed + len(previous), spec.population or batch, local=True))
    mem.add_trials(previous)
    dists = study.distributions()
    prog = Progress(done=len(previous), stored=stored)
    feasible_values = np.array([t.values for t in previous
                                if all(v <= 0 for v in t.constraints.values())]
                               ).reshape(-1, len(study.goals))
    prog.feasible = len(feasible_values)
    front = _front(feasible_values, study.directions)
    prog.front = len(front)
    try:
        while prog.done < target:
            k = min(batch, target - prog.done)
            asked = [mem.ask(dists) for _ in range(k)]
            params = params_of(study, asked)
            outcome = evaluator(study, study.designs(params), baseline)
            tell_batch(mem, study, asked, outcome)
            finished = mem.get_trials(deepcopy=False)[-k:]
            with _no_interrupt(), journal.batch(storage):  # one append per batch, whole
                stored.add_trials(finished)
            prog.done += k
            prog.new += k
            prog.evaluated.append((params, outcome))
            ok = outcome.feasible
            prog.feasible += int(ok.sum())
            front = _front(np.vstack([front, outcome.values[ok]]), study.directions)
            prog.front = len(front)
            if report:
                report(prog)
    except KeyboardInterrupt:
        if report:
            report(prog)
        raise
    return prog


@contextlib.contextmanager
def _no_interrupt() -> Iterator[None]:
    """Hold a Ctrl-C (SIGINT) or SIGTERM (which the command takes as Ctrl-C) until the block
    ends, then hand it to the command's handler and raise KeyboardInterrupt: the batch is
    stored whole or not at all."""
    with signals.held() as caught:
        yield
    if caught:
        signum, handler = caught[0]
        if callable(handler):
            handler(signum, None)  # the command's own handler (it counts the signal)
        raise KeyboardInterrupt


def _fail_running(st: optuna.Study) -> None:
    """Trials left RUNNING in a journal by a killed run (one process writes a journal's
    trials at a time, so none is live when a run starts): FAIL, freeing their slots."""
    for t in st.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.WAITING)):
        st._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)


def _run_workers(study: Study, opts: Options, url: str, workers: int,
                 report: Callable[[Progress], None] | None) -> Progress:
    """Run `workers` processes (dse.search.workers) on the shared storage until it holds the
    requested COMPLETE trials; one worker on a database runs in this process."""
    from dse.search import workers as pool

    storage = open_storage(url)
    stored = open_study(study, storage, url)  # the study (and a database's schema) made once
    if "://" not in url:
        _fail_running(stored)
    share = pool.shared(storage, stored._study_id)
    target = opts.trials or study.spec.search.trials
    prog = Progress(done=database.retrying("the run", share.complete))
    before = prog.done
    spec = pool.Spec(study.path, study.alternative, url, opts.trials, opts.batch, opts.seed,
                     opts.sampler, workers)
    bad: list[int] = []
    if workers == 1:
        pool.work(spec, 0, report=lambda done: _polled(prog, before, done, report))
    else:
        ctx = mp.get_context("spawn")
        progress = ctx.Value("q", before)
        procs = [ctx.Process(target=pool.run_worker, args=(spec, i, progress), daemon=False)
                 for i in range(workers)]
        for p in procs:
            p.start()
        try:
            while any(p.is_alive() for p in procs):
                time.sleep(0.5)
                _polled(prog, before, progress.value, report)
        except KeyboardInterrupt:
            for p in procs:
                p.terminate()
            for p in procs:
                p.join()
            raise
        for p in procs:
            p.join()
        bad = [p.exitcode for p in procs if p.exitcode]
    done = database.retrying("the run", share.complete)
    if done < target:
        raise DseError(f"{len(bad)} of {workers} workers failed (exit codes "
                       f"{', '.join(map(str, bad))}); {done:,} of {target:,} trials are "
                       "complete and kept: run the same command again to finish")
    if bad:
        print(f"warning: {len(bad)} of {workers} workers ended early (exit codes "
              f"{', '.join(map(str, bad))}); the others completed the {target:,} trials",
              file=sys.stderr)
    prog.new = done - before
    prog.stored = pool.Snapshot(database.retrying("the run", share.read_all))
    out = _progress(prog.stored, study, prog)
    if report:
        report(out)
    return out


def _polled(prog: Progress, before: int, done: int,
            report: Callable[[Progress], None] | None) -> None:
    """Progress while workers run: the complete trials (feasibility and the front are
    counted once, at the end: a read of every trial each time would slow the workers)."""
    prog.done = done
    prog.new = done - before
    if report:
        report(prog)


def _progress(stored: optuna.Study | Snapshot, study: Study, prog: Progress) -> Progress:
    trials = stored.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    feasible = np.array([t.values for t in trials if all(v <= 0 for v in t.constraints.values())
                         ]).reshape(-1, len(study.goals))
    prog.done = len(trials)
    prog.feasible = len(feasible)
    prog.front = len(_front(feasible, study.directions))
    return prog
