"""Running a study: batched ask/tell against Optuna, persisted to a journal file (default)
or a shared database, resumable, with any number of worker processes.

One process (the default): the sampler works on an in-memory copy of the study, loaded
from the storage at start; each batch is asked, evaluated in one vectorized call per
workload, told, and then appended to the storage as finished trials (`add_trials`), so a
kill loses at most the batch in flight and a re-run completes the rest. Workers (`workers`
> 1, or a database URL): every process asks and tells through the shared storage, Optuna's
own distributed mode; a trial runs only if fewer than `trials` live trials come before it in
the storage's numbering, so workers together complete exactly the requested number.
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing as mp
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState

from dse.errors import DseError
from dse.search import database, journal
from dse.search.journal import Journal
from dse.search.objective import Outcome, baseline_of, evaluate_designs
from dse.search.space import Study
from dse.search.urls import redact

JOURNAL = "study.journal"
FINGERPRINT = "dse_fingerprint"
SURPLUS = "dse_surplus"  # user attr of a trial asked past the budget by a worker (FAIL)
REASON = "reason"  # user attr of an infeasible trial: why
FEASIBLE = "feasible"  # user attr of every trial: the study's verdict
# Database storages: a worker records a heartbeat per batch; a RUNNING trial without one for
# GRACE_S seconds belongs to a killed worker and is failed (and its slot freed).
HEARTBEAT_S, GRACE_S = database.HEARTBEAT_S, database.GRACE_S
LIVE = (TrialState.COMPLETE, TrialState.RUNNING, TrialState.WAITING)


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
    stored: optuna.Study | None = None  # the stored study as this process holds it

    @property
    def rate(self) -> float:
        return self.new / max(time.perf_counter() - self.started, 1e-9)


def out_dir(study: Study, opts: Options) -> Path:
    return opts.out if opts.out is not None else Path("runs") / study.spec.name


def storage_url(study: Study, opts: Options) -> str:
    """The storage a run uses: --storage, the file's `storage`, else the journal file."""
    return opts.storage or study.spec.storage or str(out_dir(study, opts) / JOURNAL)


def _rdb(url: str, heartbeat: bool) -> optuna.storages.RDBStorage:
    """The database storage (dse.search.database.Storage), its schema made once: a command
    that races another to create it on a fresh database opens it again. (A server lost
    later, mid-run, is waited for by the workers: dse.search.database.retrying.)"""
    def make() -> optuna.storages.RDBStorage:
        return database.Storage(
            url, heartbeat_interval=database.HEARTBEAT_S if heartbeat else None,
            grace_period=max(1, round(database.GRACE_S)) if heartbeat else None)

    for attempt in range(5):
        try:
            return make()  # a server that is down at the start is an error at once
        except Exception as e:
            if not database.schema_race(e) or attempt == 4:
                raise
            time.sleep(0.2 * (attempt + 1))  # the other command is creating the tables
    raise AssertionError("unreachable")


def open_storage(url: str, heartbeat: bool = False) -> optuna.storages.BaseStorage:
    """A journal file (a path) or a database (a URL with ://)."""
    if "://" in url:
        if heartbeat:  # the workers record each batch's heartbeats themselves (ask and tell,
            # not Study.optimize), so Optuna's warning that heartbeats are for optimize() is
            # about a use dse does not make: it would only print two lines on stderr
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be "
                                    "used with Study.optimize", category=UserWarning)
        try:
            return _rdb(url, heartbeat)
        except ImportError:
            raise DseError(f"--storage {redact(url)}: no driver for this database is installed; "
                           "for PostgreSQL: pip install 'dse[postgres]'") from None
        except Exception as e:  # server down, bad URL
            detail = redact(str(e).splitlines()[0]) if str(e) else "no detail"
            raise DseError(f"--storage {redact(url)}: cannot open the database "
                           f"({type(e).__name__}: {detail})") from None
    path = Path(url)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DseError(f"--out {path.parent}: cannot make the output folder "
                       f"({e.strerror or e})") from None
    if path.exists() and not path.is_file():
        raise DseError(f"{path}: expected an Optuna journal file, found a folder")
    backend = Journal(path)  # kernel-released locks, a torn tail healed, whole appends
    for note in backend.notices:
        print(f"warning: {note}", file=sys.stderr)
    return optuna.storages.JournalStorage(backend)


GP_MISSING = ("Optuna's GP sampler needs PyTorch, which dse does not install (pip install "
              "torch); or use nsga2, tpe or random")


def gp_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def make_sampler(name: str, seed: int, population: int, local: bool = False
                 ) -> optuna.samplers.BaseSampler:
    """`local`: the sampler's study is this process's alone (see samplers.NSGAII)."""
    if name == "nsga2":
        from dse.search.samplers import NSGAII

        return NSGAII(population_size=population, seed=seed, local=local)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True,
                                          constant_liar=True)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "gp":
        if not gp_available():
            raise DseError(f"--sampler gp: {GP_MISSING}")
        return optuna.samplers.GPSampler(seed=seed)
    raise DseError(f"--sampler: expected nsga2, tpe, random, gp or grid, found '{name}'")


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


def count(st: optuna.Study, states: tuple[TrialState, ...] = (TrialState.COMPLETE,)) -> int:
    return len(st.get_trials(deepcopy=False, states=states))


def params_of(study: Study, trials: list[optuna.trial.BaseTrial]) -> dict[str, np.ndarray]:
    return {p.path: np.array([p.value(t.params[p.path]) for t in trials], dtype=float)
            for p in study.params}


def attr_columns(columns: Iterable[str]) -> list[str]:
    """The table columns a trial also carries as user attributes, by their table names: the
    area per chip (`area_per_chip_mm2`, mm2), the cost to make one chip
    (`cost_per_chip_usd`, USD, where the node has a cost model) and each workload's power
    per chip (`<workload>.power_per_chip_w`, W)."""
    return [c for c in columns if c in ("area_per_chip_mm2", "cost_per_chip_usd")
            or c.endswith(".power_per_chip_w")]


def trial_attrs(values: Mapping[str, float], feasible: bool, reason: str) -> dict[str, Any]:
    """A trial's user attributes: `values` (column -> value; `attr_columns`' only, each where
    it exists), `feasible` (the study's verdict, which optuna-dashboard shows and `dse
    dashboard` marks by) and, for an infeasible design, `reason`."""
    out: dict[str, Any] = {c: float(v) for c, v in values.items() if math.isfinite(v)}
    out[FEASIBLE] = bool(feasible)
    if reason:
        out[REASON] = str(reason)
    return out


def tell_batch(target: optuna.Study, study: Study, asked: list[optuna.Trial],
               outcome: Outcome) -> None:
    """Constraints (Optuna 5's `set_constraint`, by name), user attributes (`trial_attrs`)
    and objectives of an evaluated batch, told to `target`."""
    told = outcome.told(study.directions)
    cols = attr_columns(outcome.columns)
    for i, trial in enumerate(asked):
        try:
            for name, v in outcome.constraints.items():
                trial.set_constraint(name, float(v[i]))
            attrs = trial_attrs({c: outcome.columns[c][i] for c in cols},
                                outcome.feasible[i], outcome.reason[i])
            for key, value in attrs.items():
                trial.set_user_attr(key, value)
            target.tell(trial, told[i].tolist())
        except optuna.exceptions.UpdateFinishedTrialError:
            # another worker failed it as stale while this one evaluated it (its heartbeat
            # lapsed: a database restart, a batch longer than the grace); its slot runs again
            continue


def _front(values: np.ndarray, directions: list[str]) -> np.ndarray:
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
    """Hold a Ctrl-C (SIGINT) until the block ends, then raise it: the journal is written
    whole or not at all. Outside the main thread, nothing is held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def _fail_running(st: optuna.Study) -> None:
    """Trials left RUNNING in a journal by a killed run (one process writes a journal's
    trials at a time, so none is live when a run starts): FAIL, freeing their slots."""
    for t in st.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.WAITING)):
        st._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)


def _run_workers(study: Study, opts: Options, url: str, workers: int,
                 report: Callable[[Progress], None] | None) -> Progress:
    storage = open_storage(url, heartbeat=True)
    stored = open_study(study, storage, url)
    if "://" not in url:
        _fail_running(stored)
    else:
        optuna.storages.fail_stale_trials(stored)
    target = opts.trials or study.spec.search.trials
    prog = Progress(done=count(stored))
    if workers == 1:
        _worker(study.path, opts, url, 0, study.alternative)
    else:
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=_worker, args=(study.path, opts, url, i, study.alternative),
                             daemon=False)
                 for i in range(workers)]
        for p in procs:
            p.start()
        try:
            while any(p.is_alive() for p in procs):
                time.sleep(0.5)
                try:  # progress only: a database restarting is waited for by the workers
                    prog.new = count(stored) - prog.done
                    if report:
                        report(_progress(stored, study, prog))
                except Exception as e:
                    if not database.transient(e):
                        raise
        except KeyboardInterrupt:
            for p in procs:
                p.terminate()
            for p in procs:
                p.join()
            raise
        for p in procs:
            p.join()
        bad = [p.exitcode for p in procs if p.exitcode]
        if bad:
            raise DseError(f"{len(bad)} of {workers} workers failed (exit codes "
                           f"{', '.join(map(str, bad))}); the finished trials are kept")
    done = database.retrying("the run", lambda: count(stored))
    prog.new = done - prog.done
    prog.done = done
    out = database.retrying("the run", lambda: _progress(stored, study, prog))
    if report:
        report(out)
    del target
    return out


def _progress(stored: optuna.Study, study: Study, prog: Progress) -> Progress:
    trials = stored.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    feasible = np.array([t.values for t in trials if all(v <= 0 for v in t.constraints.values())
                         ]).reshape(-1, len(study.goals))
    prog.done = len(trials)
    prog.feasible = len(feasible)
    prog.front = len(_front(feasible, study.directions))
    return prog


def _worker(path: Path, opts: Options, url: str, index: int,
            alternative: str | None = None) -> None:
    """One worker: ask a batch through the shared storage, keep the trials within the
    budget, evaluate, tell; stop when the budget is reached. `alternative`: run that
    alternative of the study file, not the study itself."""
    from dse.search.space import load_study

    logging.getLogger("optuna").setLevel(logging.WARNING)
    study = load_study(path)
    if alternative is not None:
        study = study.alternatives[alternative]
    spec = study.spec.search
    target = opts.trials or spec.trials
    batch = opts.batch or spec.batch
    seed = (spec.seed if opts.seed is None else opts.seed) + 1000 * index
    storage = open_storage(url, heartbeat=True)
    sampler_name = opts.sampler or spec.sampler
    sampler = make_sampler(sampler_name, seed + count(optuna.load_study(
        study_name=study.spec.name, storage=storage)), spec.population or batch)
    st = optuna.load_study(study_name=study.spec.name, storage=storage, sampler=sampler)
    baseline = baseline_of(study)
    dists = study.distributions()
    heartbeat = isinstance(storage, optuna.storages.RDBStorage)
    waited, patience = 0.0, 3 * database.GRACE_S + 30
    while True:
        state = database.retrying(f"worker {index}", lambda: _step(
            st, storage, study, dists, batch, target, baseline, heartbeat))
        if state == "done":
            return
        if state == "ran":
            waited = 0.0
            continue
        # every slot is taken but not every trial complete: other workers' batches in flight,
        # or a dead worker's trials until their grace ends and they are failed
        if waited >= patience:
            print(f"warning: worker {index} stops short: {count(st):,} of {target:,} trials "
                  f"complete, the rest held by trials still RUNNING after {waited:.0f} s "
                  "(a worker that died without a heartbeat on a journal?); run the command "
                  "again to finish them", file=sys.stderr)
            return
        time.sleep(1.0)
        waited += 1.0


def _step(st: optuna.Study, storage, study: Study, dists, batch: int, target: int,
          baseline, heartbeat: bool) -> str:
    """One batch of a worker: 'done' (the budget is complete), 'wait' (every slot is taken
    by live trials) or 'ran' (a batch asked, evaluated and told). Each trial asked gets its
    heartbeat at once, so a worker killed mid-batch leaves trials the others can fail."""
    if heartbeat:
        optuna.storages.fail_stale_trials(st)
    if count(st) >= target:
        return "done"
    if count(st, LIVE) >= target:
        return "wait"
    asked = []
    for _ in range(batch):
        t = st.ask(dists)
        if heartbeat:
            storage.record_heartbeat(t._trial_id)
        asked.append(t)
    live = sorted(t.number for t in st.get_trials(deepcopy=False, states=LIVE))
    keep, surplus = [], []
    for t in asked:
        (keep if np.searchsorted(live, t.number) < target else surplus).append(t)
    for t in surplus:
        t.set_user_attr(SURPLUS, True)
        st.tell(t, state=TrialState.FAIL)
    if keep:
        outcome = evaluate_designs(study, study.designs(params_of(study, keep)), baseline)
        tell_batch(st, study, keep, outcome)
    return "ran"
