"""A study on a shared database (PostgreSQL): how workers write it (`Shared`: one transaction
per batch of finished trials, under the study's row lock, so the budget is met exactly and a
worker in flight holds nothing in the database), which errors are a server restarting
(`transient`, waited for by `retrying` with backoff) and which are another command creating
the same schema at the same moment (`schema_race`). I/O only.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TypeVar

import optuna
from optuna.trial import TrialState

# A lost connection (a server restart) is retried after 1, 2, 4 ... s, RETRY_S in all
# (DSE_DATABASE_RETRY seconds).
RETRY_S = float(os.environ.get("DSE_DATABASE_RETRY", "120"))
COMMIT = "dse_commit"  # system attribute of a commit's first trial: the commit's token
T = TypeVar("T")


def transient(e: BaseException) -> bool:
    """Whether `e` is a lost or refused connection (a server restarting), worth a retry."""
    import sqlalchemy.exc

    if isinstance(e, optuna.exceptions.StorageInternalError):
        return True
    return isinstance(e, sqlalchemy.exc.OperationalError | sqlalchemy.exc.InterfaceError)


def schema_race(e: BaseException) -> bool:
    """Whether `e` is another process creating the same schema at the same moment."""
    import sqlalchemy.exc

    return isinstance(e, sqlalchemy.exc.IntegrityError | sqlalchemy.exc.ProgrammingError)


def retrying(what: str, call: Callable[[], T], budget_s: float | None = None) -> T:
    """`call()`, retried with backoff (1, 2, 4 ... s, `budget_s` in all) while the database
    is unreachable; one line on stderr per wait. When the time is spent: DseError, one line
    (finished trials are in the database already)."""
    from dse.errors import DseError
    from dse.search.urls import redact

    budget = RETRY_S if budget_s is None else budget_s
    waited, delay = 0.0, 1.0
    while True:
        try:
            return call()
        except Exception as e:
            if not transient(e):
                raise
            if waited >= budget:
                cause = e.__cause__ or e
                detail = redact(str(cause).splitlines()[0]) if str(cause) else "no detail"
                raise DseError(f"{what}: the database is still unreachable after {waited:.0f} s "
                               f"of retries ({type(cause).__name__}: {detail}); every trial "
                               "committed is kept: run the same command again when the "
                               "database is back") from None
            print(f"warning: {what}: the database is unreachable "
                  f"({type(e).__name__}); retrying in {delay:.0f} s", file=sys.stderr)
            time.sleep(delay)
            waited += delay
            delay = min(delay * 2, 16.0)


class Shared:
    """A database as workers share it (dse.search.workers): a commit is one transaction
    under the study's row lock (the lock Optuna's own trial creation takes), which counts the
    COMPLETE trials, numbers the new ones after every trial of the study and inserts them
    with their parameters, values and attributes in a few multi-row statements; a read
    fetches only the COMPLETE trials with ids above the last one seen (ids grow in commit
    order: they are drawn under the same lock)."""

    def __init__(self, storage: optuna.storages.RDBStorage, study_id: int) -> None:
        self.storage, self.study_id = storage, study_id
        self._last = -1  # the highest trial id read

    def read_new(self) -> list[optuna.trial.FrozenTrial]:
        trials = self.storage._get_trials(self.study_id, [TrialState.COMPLETE], set(),
                                          self._last)
        if trials:
            self._last = max(t._trial_id for t in trials)
        return trials

    def _count(self, session, *states: TrialState) -> int:
        import sqlalchemy
        from optuna.storages._rdb import models

        query = session.query(sqlalchemy.func.count(models.TrialModel.trial_id)).filter(
            models.TrialModel.study_id == self.study_id)
        if states:
            query = query.filter(models.TrialModel.state.in_(states))
        return int(query.scalar())

    def complete(self) -> int:
        from optuna.storages._rdb.storage import _create_scoped_session

        with _create_scoped_session(self.storage.scoped_session) as session:
            return self._count(session, TrialState.COMPLETE)

    def commit(self, trials: list[optuna.trial.FrozenTrial], target: int, token: str,
               retried: bool = False) -> tuple[int, int]:
        import json

        import sqlalchemy
        from optuna.distributions import distribution_to_json
        from optuna.storages._rdb import models
        from optuna.storages._rdb.storage import _create_scoped_session

        with _create_scoped_session(self.storage.scoped_session) as session:
            models.StudyModel.find_or_raise_by_id(self.study_id, session, for_update=True)
            done = self._count(session, TrialState.COMPLETE)
            if retried and self._committed(session, token):  # its reply was lost
                return 0, done
            keep = trials[:max(target - done, 0)]
            if not keep:
                return 0, done
            first = self._count(session)
            rows = []
            for i, t in enumerate(keep):
                row = models.TrialModel(study_id=self.study_id, number=first + i,
                                        state=TrialState.COMPLETE)
                row.datetime_start = t.datetime_start
                row.datetime_complete = t.datetime_complete
                rows.append(row)
            session.add_all(rows)
            session.flush()  # the trial ids
            params, values, user, system = [], [], [], []
            for row, t in zip(rows, keep, strict=True):
                tid = row.trial_id
                for name, value in t.params.items():
                    dist = t.distributions[name]
                    params.append(dict(trial_id=tid, param_name=name,
                                       param_value=dist.to_internal_repr(value),
                                       distribution_json=distribution_to_json(dist)))
                for k, v in enumerate(t.values or ()):
                    stored, kind = models.TrialValueModel.value_to_stored_repr(v)
                    values.append(dict(trial_id=tid, objective=k, value=stored, value_type=kind))
                user += [dict(trial_id=tid, key=k, value_json=json.dumps(v))
                         for k, v in t.user_attrs.items()]
                system += [dict(trial_id=tid, key=k, value_json=json.dumps(v))
                           for k, v in t.system_attrs.items()]
            system.append(dict(trial_id=rows[0].trial_id, key=COMMIT,
                               value_json=json.dumps(token)))
            for model, records in ((models.TrialParamModel, params),
                                   (models.TrialValueModel, values),
                                   (models.TrialUserAttributeModel, user),
                                   (models.TrialSystemAttributeModel, system)):
                if records:
                    session.execute(sqlalchemy.insert(model), records)
            return len(keep), done + len(keep)

    def _committed(self, session, token: str) -> bool:
        """Whether a commit with this token is already stored (its first trial carries it)."""
        import json

        from optuna.storages._rdb import models

        attr = models.TrialSystemAttributeModel
        return session.query(attr.trial_id).join(models.TrialModel).filter(
            models.TrialModel.study_id == self.study_id, attr.key == COMMIT,
            attr.value_json == json.dumps(token)).first() is not None
