"""A lost database server is retried with backoff, other errors are not, and a server still
lost when the retries are spent is one line (dse.search.database.retrying). Workers killed,
a server restarted mid-run and commands racing on a fresh database:
tests/search/test_workers.py."""

from __future__ import annotations

import optuna
import pytest

from dse.errors import DseError


def test_a_lost_server_is_retried_with_backoff_and_other_errors_are_not(monkeypatch, capsys):
    import sqlalchemy.exc

    from dse.search import database

    slept: list[float] = []
    monkeypatch.setattr(database.time, "sleep", slept.append)
    calls = iter([sqlalchemy.exc.OperationalError("SELECT", {}, Exception("restarting")),
                  optuna.exceptions.StorageInternalError("lost"), "ok"])

    def flaky():
        v = next(calls)
        if isinstance(v, Exception):
            raise v
        return v

    assert database.retrying("worker 0", flaky, budget_s=60) == "ok"
    assert slept == [1.0, 2.0]
    assert capsys.readouterr().err.count("the database is unreachable") == 2
    with pytest.raises(ValueError):
        database.retrying("worker 0", lambda: (_ for _ in ()).throw(ValueError("a bug")))
    down = sqlalchemy.exc.OperationalError(
        "SELECT", {}, Exception("connection to postgresql://dse:secret@db:5432/x refused"))
    with pytest.raises(DseError) as e:
        database.retrying("worker 0", lambda: (_ for _ in ()).throw(down), budget_s=5)
    assert sum(slept[2:]) >= 5  # waited its budget, then gave up with one line
    assert "worker 0: the database is still unreachable after" in str(e.value)
    assert "secret" not in str(e.value) and "\n" not in str(e.value)
