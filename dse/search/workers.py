"""Several processes on one study: each worker runs its own sampler on an in-memory copy of
the study and meets the others only through the shared storage, once per batch.

A worker's batch: ask `batch` trials of its in-memory study, evaluate them in one vectorized
call, tell them there, then **commit** them to the storage in one write (one journal append
under its lock; one database transaction under the study's row lock) that keeps only as many
as the budget has room for, and **read** the trials the other workers committed since its last
read (one read), adding them to its in-memory study so its sampler learns from every worker.

Nothing a worker has in flight is in the storage: a trial is written once, finished. So a
worker that dies (SIGKILL, a lost machine) holds no slot, and nothing has to time out or be
failed: the others run to the budget. The commit's room check runs under the storage's lock,
so N workers complete exactly the requested trials, numbered once each; at the end, each
worker may have evaluated one batch the budget had no room for (discarded, not stored).

A lost database connection (a server restart) is retried with backoff
(`database.retrying`); a commit carries a token, so one retried after a reply was lost is
not written twice. I/O and search only; the model is `objective.evaluate_designs`.
"""

from __future__ import annotations

import copy
import logging
import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import optuna
from optuna.trial import FrozenTrial, TrialState

from dse.errors import DseError
from dse.search import database

WORKER = "dse_worker"  # system attribute of a trial: the token of the worker that ran it


class Shared(Protocol):
    """A storage as workers share it (journal.Shared, database.Shared)."""

    def read_new(self) -> list[FrozenTrial]:
        """The COMPLETE trials committed since this object's last read (the first read: all
        of them), in commit order."""
        ...

    def commit(self, trials: list[FrozenTrial], target: int, token: str,
               retried: bool = False) -> tuple[int, int]:
        """Write finished `trials`, as many as keep the study's COMPLETE trials within
        `target`, in one write; (trials written, COMPLETE trials after the write).
        `retried`: an earlier attempt with this `token` may have been written."""
        ...

    def complete(self) -> int:
        """The study's COMPLETE trials now (a count, not a read of the trials)."""
        ...

    def read_all(self) -> list[FrozenTrial]:
        """Every trial of the study, any state, in number order."""
        ...


class Snapshot:
    """The stored trials as read once after a run: what the outputs need of an optuna.Study
    (`get_trials`), without a second read of a database."""

    def __init__(self, trials: list[FrozenTrial]) -> None:
        self._trials = trials

    def get_trials(self, deepcopy: bool = False,
                   states: tuple[TrialState, ...] | None = None) -> list[FrozenTrial]:
        del deepcopy  # read-only use
        return [t for t in self._trials if states is None or t.state in states]


def shared(storage: optuna.storages.BaseStorage, study_id: int) -> Shared:
    from optuna.storages._cached_storage import _CachedStorage

    from dse.search import journal

    if isinstance(storage, _CachedStorage):  # how optuna.load_study wraps a database
        storage = storage._backend
    if isinstance(storage, optuna.storages.RDBStorage):
        return database.Shared(storage, study_id)
    if isinstance(storage, optuna.storages.JournalStorage):
        return journal.Shared(storage, study_id)
    raise TypeError(f"no shared access to a {type(storage).__name__}")


@dataclass
class Spec:
    """What a worker process needs: the study file (and alternative) and the run settings."""

    path: Path
    alternative: str | None
    url: str
    trials: int | None
    batch: int | None
    seed: int | None
    sampler: str | None
    workers: int = 1  # the command's worker processes: the last batches are shared out


def run_worker(spec: Spec, index: int, progress=None) -> None:
    """A worker process's body: its batches until the budget is complete. Errors end it with
    one line on stderr and exit status 2 (bad input, a storage it cannot use) or 1.
    `progress`: a shared integer (multiprocessing.Value) raised to the study's COMPLETE
    trials after each commit, which the command shows (it reads no storage to do so)."""
    logging.getLogger("optuna").setLevel(logging.WARNING)
    parent = os.getppid()

    def report(done: int) -> None:
        if progress is not None:
            with progress.get_lock():
                progress.value = max(progress.value, done)
    try:
        work(spec, index, report=report, orphaned=lambda: os.getppid() != parent)
    except KeyboardInterrupt:
        sys.exit(130)  # the command's Ctrl-C (or SIGTERM): the parent reports it
    except DseError as e:
        print(f"error: worker {index}: {e}", file=sys.stderr)
        sys.exit(2)
    except Exception as e:  # a storage error after its retries: one line, not a traceback
        from dse.search.urls import redact

        detail = redact(str(e).splitlines()[0]) if str(e) else "no detail"
        print(f"error: worker {index}: {type(e).__name__}: {detail}", file=sys.stderr)
        sys.exit(1)


def work(spec: Spec, index: int, report: Callable[[int], None] | None = None,
         orphaned: Callable[[], bool] | None = None) -> int:
    """Run batches on the shared study until it holds `trials` COMPLETE trials; the number of
    trials this worker wrote. `report`: called with the study's COMPLETE trials after each
    commit. `orphaned`: true once the command that started this worker is gone (killed): the
    worker stops after its batch, so no process outlives its command."""
    from dse.search.objective import baseline_of, evaluate_designs
    from dse.search.space import load_study
    from dse.search.trials import make_sampler, open_storage, params_of, tell_batch

    study = load_study(spec.path)
    if spec.alternative is not None:
        study = study.alternatives[spec.alternative]
    search = study.spec.search
    target = spec.trials or search.trials
    batch = spec.batch or search.batch
    storage = open_storage(spec.url, checked=True)  # the command checked every record
    name = study.spec.name
    stored = database.retrying(f"worker {index}", lambda: optuna.load_study(
        study_name=name, storage=storage))
    share = shared(storage, stored._study_id)
    known = database.retrying(f"worker {index}", share.read_new)
    seed = (search.seed if spec.seed is None else spec.seed) + 1000 * index + len(known)
    sampler = make_sampler(spec.sampler or search.sampler, seed, search.population or batch,
                           local=True)
    mem = optuna.create_study(directions=study.directions, sampler=sampler)
    _learn(mem, sampler, known)
    token = uuid.uuid4().hex
    dists = study.distributions()
    baseline = baseline_of(study)
    done, wrote = len(known), 0
    while done < target:
        # the last batches shared out among the workers, so none evaluates a whole batch the
        # budget has no room for
        k = min(batch, max(1, -(-(target - done) // max(spec.workers, 1))))
        asked = [mem.ask(dists) for _ in range(k)]
        outcome = evaluate_designs(study, study.designs(params_of(study, asked)), baseline)
        tell_batch(mem, study, asked, outcome)
        finished = [_stamped(mem._storage.get_trial(t._trial_id), token) for t in asked]
        n, done = database.retrying(f"worker {index}", _committer(
            share, finished, target, f"{token}-{wrote}"))
        wrote += n
        if report:
            report(done)
        if done >= target or (orphaned is not None and orphaned()):
            break
        new = database.retrying(f"worker {index}", share.read_new)
        _learn(mem, sampler, [t for t in new if t.system_attrs.get(WORKER) != token])
    return wrote


def _committer(share: Shared, trials: list[FrozenTrial], target: int, token: str):
    """`share.commit` of one batch, as `database.retrying` calls it: attempts after the first
    say they are retries."""
    attempts = 0

    def commit() -> tuple[int, int]:
        nonlocal attempts
        attempts += 1
        return share.commit(trials, target, token, retried=attempts > 1)
    return commit


def _stamped(trial: FrozenTrial, token: str) -> FrozenTrial:
    """`trial` as a worker writes it: finished, with the token of the worker that ran it."""
    assert trial.state == TrialState.COMPLETE, trial.state
    out = copy.copy(trial)
    out.system_attrs = {**trial.system_attrs, WORKER: token}
    return out


def _learn(mem: optuna.Study, sampler: optuna.samplers.BaseSampler,
           trials: list[FrozenTrial]) -> None:
    """Add other workers' finished trials to this worker's in-memory study."""
    if not trials:
        return
    mem.add_trials(trials)
    added = getattr(sampler, "added", None)
    if added is not None:
        added(trials)
