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
from typing import Any, TypeVar, cast

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
        self._own: list[int] = []  # ids this worker committed since its last read

    def read_new(self) -> list[optuna.trial.FrozenTrial]:
        trials = self._read(self._last, self._own)
        # every trial below this worker's own last commit was committed before it (ids are
        # drawn under the study's lock), so this read has seen them all
        self._last = max([self._last, *self._own, *(t._trial_id for t in trials)])
        self._own = []
        return trials

    def read_all(self) -> list[optuna.trial.FrozenTrial]:
        """Every trial of the study, any state, in number order (`_read`)."""
        return self._read(-1, [], states=None)

    def _read(self, after: int, skip: list[int],
              states: tuple[TrialState, ...] | None = (TrialState.COMPLETE,)
              ) -> list[optuna.trial.FrozenTrial]:
        """The study's trials with ids above `after`, but not `skip` (this worker's own, just
        committed), in `states`: five plain queries (trials, parameters, values, user and
        system attributes) assembled here. Optuna's ORM read takes ~1.5 ms a trial, most of
        a worker's time on a study of thousands; this takes a tenth of that."""
        import json

        import sqlalchemy as sa
        from optuna.distributions import json_to_distribution
        from optuna.storages._rdb import models

        trial = models.TrialModel.__table__
        where = [trial.c.study_id == self.study_id, trial.c.trial_id > after]
        if states is not None:
            where.append(trial.c.state.in_(states))
        if skip:
            where.append(trial.c.trial_id.not_in(skip))
        from optuna.storages._rdb.storage import _create_scoped_session

        with _create_scoped_session(self.storage.scoped_session) as session:
            rows = session.execute(sa.select(
                trial.c.trial_id, trial.c.number, trial.c.state, trial.c.datetime_start,
                trial.c.datetime_complete).where(*where).order_by(trial.c.trial_id)).all()
            if not rows:
                return []
            # the trials the first query saw: a commit between the queries adds none
            where.append(trial.c.trial_id <= rows[-1].trial_id)

            def child(table, *cols):
                return [r for r in session.execute(sa.select(table.c.trial_id, *cols).join(
                    trial, trial.c.trial_id == table.c.trial_id).where(*where)).all()
                    if r[0] in by_id]

            by_id: dict[int, tuple[dict[str, Any], ...]] = {
                r.trial_id: ({}, {}, {}, {}, {}) for r in rows}
            par = models.TrialParamModel.__table__
            val = models.TrialValueModel.__table__
            ua = models.TrialUserAttributeModel.__table__
            sa_ = models.TrialSystemAttributeModel.__table__
            params = child(par, par.c.param_name, par.c.param_value, par.c.distribution_json)
            values = child(val, val.c.objective, val.c.value, val.c.value_type)
            user = child(ua, ua.c.key, ua.c.value_json)
            system = child(sa_, sa_.c.key, sa_.c.value_json)
        dists: dict[str, Any] = {}
        for tid, name, value, dist_json in params:
            dist = dists.get(dist_json)
            if dist is None:
                dist = dists[dist_json] = json_to_distribution(dist_json)
            p, d = by_id[tid][0], by_id[tid][1]
            p[name] = dist.to_external_repr(value)
            d[name] = dist
        for tid, objective, value, kind in values:
            by_id[tid][2][objective] = models.TrialValueModel.stored_repr_to_value(value, kind)
        for tid, key, text in user:
            by_id[tid][3][key] = json.loads(text)
        for tid, key, text in system:
            by_id[tid][4][key] = json.loads(text)
        out = []
        for r in rows:
            p, d, v, u, sy = by_id[r.trial_id]
            out.append(optuna.trial.FrozenTrial(
                number=r.number, state=r.state, value=None,
                values=[v[k] for k in sorted(v)] if v else None,
                datetime_start=_local(r.datetime_start),
                datetime_complete=_local(r.datetime_complete), params=p, distributions=d,
                user_attrs=u, system_attrs=sy, intermediate_values={}, trial_id=r.trial_id))
        return out

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
            ids = _new_ids(session, len(keep))
            if ids is None:  # not PostgreSQL: the ORM draws the ids
                rows = []
                for i, t in enumerate(keep):
                    row = models.TrialModel(study_id=self.study_id, number=first + i,
                                            state=TrialState.COMPLETE)
                    row.datetime_start = t.datetime_start
                    row.datetime_complete = t.datetime_complete
                    rows.append(row)
                session.add_all(rows)
                session.flush()
                ids = [cast(int, row.trial_id) for row in rows]
            else:
                _insert(session, models.TrialModel, [dict(
                    trial_id=tid, number=first + i, study_id=self.study_id,
                    state=TrialState.COMPLETE, datetime_start=_utc(t.datetime_start),
                    datetime_complete=_utc(t.datetime_complete))
                    for i, (tid, t) in enumerate(zip(ids, keep, strict=True))])
            self._own += ids
            params, values, user, system = [], [], [], []
            for tid, t in zip(ids, keep, strict=True):
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
            system.append(dict(trial_id=ids[0], key=COMMIT,
                               value_json=json.dumps(token)))
            for model, records in ((models.TrialParamModel, params),
                                   (models.TrialValueModel, values),
                                   (models.TrialUserAttributeModel, user),
                                   (models.TrialSystemAttributeModel, system)):
                _insert(session, model, records)
            return len(keep), done + len(keep)

    def _committed(self, session, token: str) -> bool:
        """Whether a commit with this token is already stored (its first trial carries it)."""
        import json

        from optuna.storages._rdb import models

        attr = models.TrialSystemAttributeModel
        return session.query(attr.trial_id).join(models.TrialModel).filter(
            models.TrialModel.study_id == self.study_id, attr.key == COMMIT,
            attr.value_json == json.dumps(token)).first() is not None


def _local(utc):
    """A naive UTC time from the database as naive local time (as Optuna's TrialModel)."""
    import datetime

    if utc is None:
        return None
    return utc.replace(tzinfo=datetime.UTC).astimezone().replace(tzinfo=None)


def _insert(session, model, records: list[dict]) -> None:
    """Insert `records` (column -> value) into `model`'s table in this transaction: through
    COPY on PostgreSQL with psycopg 3 (a batch's ~6,000 rows in a few ms, where one INSERT per
    row takes ~0.25 s and one statement of many rows longer still to build), else as one
    executemany."""
    import sqlalchemy

    if not records:
        return
    table = model.__table__
    cols = list(records[0])
    connection = session.connection()
    if _copying(connection):
        raw = connection.connection.driver_connection
        with raw.cursor() as cur, cur.copy(
                f"COPY {table.name} ({', '.join(cols)}) FROM STDIN") as copy:
            for r in records:
                copy.write_row([_copy_value(r[c]) for c in cols])
        return
    session.execute(sqlalchemy.insert(model), records)


def _copy_value(value):
    """A value as COPY takes it: an Enum column's member by its name (as SQLAlchemy stores
    it), anything else as it is."""
    import enum

    return value.name if isinstance(value, enum.Enum) else value


def _copying(connection) -> bool:
    """Whether rows can go through COPY (PostgreSQL through psycopg 3)."""
    return connection.dialect.name == "postgresql" and connection.dialect.driver == "psycopg"


def _new_ids(session, k: int) -> list[int] | None:
    """`k` new trial ids from the trials table's own sequence, ascending (PostgreSQL), so the
    trials go in by COPY; None elsewhere."""
    import sqlalchemy

    connection = session.connection()
    if not _copying(connection):
        return None
    return [int(v) for v in connection.execute(sqlalchemy.text(
        "SELECT nextval(pg_get_serial_sequence('trials', 'trial_id')) "
        "FROM generate_series(1, :k)"), {"k": k}).scalars()]


def _utc(local):
    """A naive local time as the naive UTC time the trials table holds (Optuna's
    TrialModel converts the same way)."""
    import datetime

    if local is None:
        return None
    return local.astimezone(datetime.UTC).replace(tzinfo=None)
