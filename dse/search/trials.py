"""The Optuna side of a run that the run (dse.search.run) and its worker processes
(dse.search.workers) share: the storage, the sampler, and how an evaluated batch is told
(constraints, user attributes, objectives). Below both, so neither imports the other for it."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from dse.errors import DseError
from dse.search import database
from dse.search.journal import Journal
from dse.search.objective import Outcome
from dse.search.samplers import GP_MISSING, NSGAII, gp_available
from dse.search.space import Study
from dse.search.urls import redact

REASON = "reason"  # user attr of an infeasible trial: why
FEASIBLE = "feasible"  # user attr of every trial: the study's verdict


def _rdb(url: str) -> optuna.storages.RDBStorage:
    """The database storage, its schema made once: a command that races another to create
    it on a fresh database opens it again. (A server lost later, mid-run, is waited for by
    the workers: dse.search.database.retrying.)"""
    for attempt in range(5):
        try:
            return optuna.storages.RDBStorage(url)  # a server down at the start: an error
        except Exception as e:
            if not database.schema_race(e) or attempt == 4:
                raise
            time.sleep(0.2 * (attempt + 1))  # the other command is creating the tables
    raise AssertionError("unreachable")


def open_storage(url: str, checked: bool = False) -> optuna.storages.BaseStorage:
    """A journal file (a path) or a database (a URL with ://). `checked`: the journal's
    records were all decoded by this command already (a worker's open checks the tail)."""
    if "://" in url:
        try:
            return _rdb(url)
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
    backend = Journal(path, full=not checked)  # kernel-released locks, a torn tail healed
    for note in backend.notices:
        print(f"warning: {note}", file=sys.stderr)
    return optuna.storages.JournalStorage(backend)


def make_sampler(name: str, seed: int, population: int, local: bool = False
                 ) -> optuna.samplers.BaseSampler:
    """`local`: the sampler's study is this process's alone (see samplers.NSGAII)."""
    if name == "nsga2":
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


def params_of(study: Study, trials: Sequence[optuna.trial.BaseTrial]) -> dict[str, np.ndarray]:
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
