"""A study on a shared database (PostgreSQL), made to lose no slot: every trial a worker asks
has a heartbeat from its creation; a RUNNING trial whose heartbeat stopped, or that a worker
killed between creating it and its first heartbeat left without one, is failed once it is
older than the grace period, so its slot runs again; the schema is created once even when
several commands start together on a fresh database; a restarted server is waited for with
backoff. I/O only.

Optuna's own stale-trial check skips RUNNING trials that have no heartbeat row at all, so a
worker killed while asking its batch left slots taken for ever; `Storage` counts those too.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

import optuna
from optuna.trial import TrialState

# A worker records a heartbeat for each trial as it asks it (and again every HEARTBEAT_S
# while evaluating); a RUNNING trial without one for GRACE_S belongs to a dead worker.
# DSE_HEARTBEAT_GRACE (seconds) shortens the grace, for tests of the recovery.
HEARTBEAT_S = 10
GRACE_S = float(os.environ.get("DSE_HEARTBEAT_GRACE", "60"))
# A lost connection (a server restart) is retried after 1, 2, 4 ... s, RETRY_S in all.
RETRY_S = float(os.environ.get("DSE_DATABASE_RETRY", "120"))

T = TypeVar("T")


class Storage(optuna.storages.RDBStorage):
    """Optuna's RDB storage whose stale trials include RUNNING ones without any heartbeat
    that started more than the grace period ago."""

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        import sqlalchemy
        from optuna.storages._rdb import models
        from optuna.storages._rdb.storage import _create_scoped_session
        from sqlalchemy import orm

        stale = set(super()._get_stale_trial_ids(study_id))
        grace = timedelta(seconds=self.grace_period or 2 * (self.heartbeat_interval or 1))
        with _create_scoped_session(self.scoped_session, True) as session:
            now = session.execute(sqlalchemy.func.now()).scalar().replace(tzinfo=None)
            running = (session.query(models.TrialModel)
                       .options(orm.selectinload(models.TrialModel.heartbeats))
                       .filter(models.TrialModel.state == TrialState.RUNNING)
                       .filter(models.TrialModel.study_id == study_id).all())
            for t in running:
                started = t.datetime_start
                if not t.heartbeats and started is not None \
                        and now - started.replace(tzinfo=None) > grace:
                    stale.add(t.trial_id)
        return sorted(stale)


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
    is unreachable; one line on stderr per wait. The last error is raised when the time is
    spent."""
    budget = RETRY_S if budget_s is None else budget_s
    waited, delay = 0.0, 1.0
    while True:
        try:
            return call()
        except Exception as e:
            if not transient(e) or waited >= budget:
                raise
            print(f"warning: {what}: the database is unreachable "
                  f"({type(e).__name__}); retrying in {delay:.0f} s", file=sys.stderr)
            time.sleep(delay)
            waited += delay
            delay = min(delay * 2, 16.0)
