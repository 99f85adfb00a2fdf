"""A study on PostgreSQL (dse.search.database): several commands started together on a fresh
database all finish (the schema is made once), and a lost server is retried with backoff
while other errors are not. Workers killed and a server restarted mid-run:
tests/search/test_workers.py."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from dse.errors import DseError

ROOT = Path(__file__).resolve().parents[2]
STUDY = """\
name: {name}
source: test
base: h100-sxm
parameters:
  compute.units: {{low: 96, high: 144, step: 4}}
  memory.HBM3.stacks: {{low: 4, high: 6}}
workloads:
  decode: {{workload: llama2-7b, scenario: chat-decode, batch: 16}}
objectives:
  t: {{maximize: throughput}}
search: {{trials: 60, batch: 10, seed: 0}}
"""


def _write(tmp_path: Path) -> tuple[Path, str]:
    name = f"db-{uuid.uuid4().hex[:8]}"
    path = tmp_path / f"{name}.yaml"
    path.write_text(STUDY.format(name=name))
    return path, name


def _dse(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dse", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _states(url: str, name: str) -> dict[str, int]:
    st = optuna.load_study(study_name=name, storage=url)
    out: dict[str, int] = {}
    for t in st.get_trials(deepcopy=False):
        out[t.state.name] = out.get(t.state.name, 0) + 1
    done = [t.number for t in st.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
    assert len(set(done)) == len(done)
    return out


def test_commands_started_together_on_a_fresh_database_all_finish(tmp_path: Path,
                                                                  postgres_url: str):
    import sqlalchemy

    fresh = f"fresh_{uuid.uuid4().hex[:8]}"
    engine = sqlalchemy.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as c:
        c.execute(sqlalchemy.text(f"CREATE DATABASE {fresh}"))
    engine.dispose()
    url = postgres_url.rsplit("/", 1)[0] + f"/{fresh}"
    path, name = _write(tmp_path)
    procs = [_dse("study", str(path), "--storage", url, "--trials", "60", "-q", "--out",
                  str(tmp_path / f"o{i}"), "--no-alternatives", cwd=tmp_path)
             for i in range(3)]
    errors = [(p.wait(180), p.stderr.read()) for p in procs]
    assert all(rc == 0 for rc, _ in errors), errors
    states = _states(url, name)
    assert states["COMPLETE"] == 60 and "RUNNING" not in states, states


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
