"""Workers on one study (dse.search.workers): each commits finished batches under the
storage's lock, so N workers complete exactly the requested trials, numbered once each, on a
journal and on PostgreSQL; a worker killed at any moment holds no slot (the others finish the
budget and the command says one worker ended early); a commit retried after its reply was
lost is not written twice; a database restarted mid-run is waited for."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from dse.search import database, journal
from dse.search import run as runner
from dse.search import workers as pool
from dse.search.space import load_study

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
    name = f"w-{uuid.uuid4().hex[:8]}"
    path = tmp_path / f"{name}.yaml"
    path.write_text(STUDY.format(name=name))
    return path, name


def _start(*args: str, cwd: Path, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dse", *args], cwd=cwd,
                            env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _complete(url: str, name: str) -> int:
    """The COMPLETE trials of the stored study, asserting their numbers are unique and no
    trial is left RUNNING."""
    st = optuna.load_study(study_name=name, storage=runner.open_storage(url))
    trials = st.get_trials(deepcopy=False)
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    numbers = [t.number for t in trials]
    assert len(set(numbers)) == len(numbers)
    return sum(t.state == TrialState.COMPLETE for t in trials)


def _children(pid: int) -> list[int]:
    """The worker processes of command `pid` (its children running multiprocessing's spawn)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"spawn_main" in cmd:
            out.append(int(entry.name))
    return out


def test_a_commit_never_passes_the_budget(tmp_path: Path) -> None:
    """Two workers' commits racing for the last slots: the second writes only the room
    left, and a commit on a full study writes nothing."""
    path, name = _write(tmp_path)
    study = load_study(path)
    url = str(tmp_path / "o" / "study.journal")
    storage = runner.open_storage(url)
    stored = runner.open_study(study, storage, url)
    mem = optuna.create_study(directions=study.directions)
    dists = study.distributions()
    trials = []
    for _ in range(8):
        t = mem.ask(dists)
        mem.tell(t, [1.0])
        trials.append(mem.trials[-1])
    a, b = pool.shared(storage, stored._study_id), pool.shared(storage, stored._study_id)
    assert a.commit(trials[:5], 7, "a") == (5, 5)
    assert b.commit(trials[5:], 7, "b") == (2, 7)
    assert a.commit(trials[:3], 7, "c") == (0, 7)
    assert [t.number for t in a.read_new()] == list(range(7))
    assert _complete(url, name) == 7


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_retried_database_commit_is_not_written_twice(tmp_path: Path, engine: str,
                                                        request) -> None:
    """And what a commit writes (by COPY on PostgreSQL) reads back, by dse's read and by
    Optuna's, as the trials were told."""
    path, _name = _write(tmp_path)
    study = load_study(path)
    url = (f"sqlite:///{tmp_path / 'db.sqlite'}" if engine == "sqlite"
           else request.getfixturevalue("postgres_url"))
    storage = runner.open_storage(url)
    stored = runner.open_study(study, storage, url)
    mem = optuna.create_study(directions=study.directions)
    for v in (2.0, float("inf"), -float("inf"), 3.5):
        t = mem.ask(study.distributions())
        t.set_user_attr("x", 1)
        t.set_constraint("area", -1.5)
        mem.tell(t, [v])
    share = pool.shared(storage, stored._study_id)
    assert isinstance(share, database.Shared)
    assert share.commit(mem.trials, 10, "tok") == (4, 4)
    assert share.commit(mem.trials, 10, "tok", retried=True) == (0, 4)  # its reply was lost
    assert share.commit(mem.trials, 10, "tok2", retried=True) == (4, 8)
    assert share.read_new() == []  # a worker does not read back its own trials
    other = pool.shared(storage, stored._study_id)
    got = other.read_new()
    assert [t.number for t in got] == list(range(8))
    assert got[0].user_attrs["x"] == 1 and got[0].values == [2.0]
    assert got[0].params == mem.trials[0].params
    assert got[0].distributions == mem.trials[0].distributions
    # the fast read gives what Optuna's own read gives
    theirs = optuna.load_study(study_name=stored.study_name, storage=url).trials
    assert [t.values for t in theirs[:4]] == [[2.0], [float("inf")], [-float("inf")], [3.5]]
    assert theirs[0].constraints == {"area": -1.5} and theirs[0].user_attrs["x"] == 1
    assert abs((theirs[0].datetime_start - mem.trials[0].datetime_start).total_seconds()) < 1e-3
    for a, b in zip(got, theirs, strict=True):
        assert (a.number, a.state, a.values, a.params, a.user_attrs, a.system_attrs,
                a.datetime_start, a.datetime_complete) == (
                b.number, b.state, b.values, b.params, b.user_attrs, b.system_attrs,
                b.datetime_start, b.datetime_complete)
    assert [t.number for t in other.read_all()] == list(range(8))


@pytest.mark.parametrize("workers", [2, 3])
def test_workers_on_a_journal_complete_exactly(tmp_path: Path, workers: int) -> None:
    path, name = _write(tmp_path)
    out = tmp_path / "o"
    p = _start("study", str(path), "--workers", str(workers), "--trials", "90", "--out",
               str(out), "-q", "--no-alternatives", cwd=tmp_path)
    assert p.wait(180) == 0, p.stderr.read()
    assert _complete(str(out / "study.journal"), name) == 90


def _kill_a_worker(tmp_path: Path, storage: list[str], url: str, name: str,
                   seed: int) -> None:
    path = tmp_path / f"{name}.yaml"
    p = _start("study", str(path), *storage, "--workers", "2", "--trials", "1500",
               "--batch", "5", "--out", str(tmp_path / "o"), "-q", "--no-alternatives",
               cwd=tmp_path)
    rng = random.Random(seed)
    kids: list[int] = []
    for _ in range(1200):  # until both workers have committed trials
        kids = _children(p.pid)
        if p.poll() is not None or (len(kids) == 2 and _started(url, name) >= 100):
            break
        time.sleep(0.05)
    assert len(kids) == 2, "the workers did not start"
    time.sleep(rng.random() * 0.5)  # a random moment of a batch: asking, evaluating, writing
    os.kill(kids[rng.randrange(2)], signal.SIGKILL)
    rc = p.wait(300)
    err = p.stderr.read()
    assert rc == 0, err
    assert "1 of 2 workers ended early" in err, err
    assert _complete(url, name) == 1500


def _started(url: str, name: str) -> int:
    """COMPLETE trials stored so far (0 before the study exists)."""
    try:
        st = optuna.load_study(study_name=name, storage=runner.open_storage(url))
    except KeyError:
        return 0
    return pool.shared(st._storage, st._study_id).complete()


@pytest.mark.parametrize("seed", [0, 1])
def test_a_worker_killed_on_a_journal_holds_no_slot(tmp_path: Path, seed: int) -> None:
    _path, name = _write(tmp_path)
    _kill_a_worker(tmp_path, [], str(tmp_path / "o" / "study.journal"), name, seed)


def test_a_worker_killed_on_postgres_holds_no_slot(tmp_path: Path, postgres_url: str) -> None:
    _path, name = _write(tmp_path)
    _kill_a_worker(tmp_path, ["--storage", postgres_url], postgres_url, name, 0)


def test_workers_on_postgres_complete_exactly(tmp_path: Path, postgres_url: str) -> None:
    path, name = _write(tmp_path)
    procs = [_start("study", str(path), "--storage", postgres_url, "--workers", "2",
                    "--trials", "120", "--out", str(tmp_path / f"o{i}"), "-q",
                    "--no-alternatives", cwd=tmp_path) for i in range(2)]
    for p in procs:
        assert p.wait(180) == 0, p.stderr.read()
    assert _complete(postgres_url, name) == 120


def test_commands_started_together_on_a_fresh_database_all_finish(tmp_path: Path,
                                                                  postgres_url: str) -> None:
    """Three commands racing to create the schema of a fresh database: it is made once (the
    ones that lose the race open it again), and together they complete the budget."""
    import sqlalchemy

    fresh = f"fresh_{uuid.uuid4().hex[:8]}"
    engine = sqlalchemy.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as c:
        c.execute(sqlalchemy.text(f"CREATE DATABASE {fresh}"))
    engine.dispose()
    url = postgres_url.rsplit("/", 1)[0] + f"/{fresh}"
    path, name = _write(tmp_path)
    procs = [_start("study", str(path), "--storage", url, "--trials", "60", "-q", "--out",
                    str(tmp_path / f"o{i}"), "--no-alternatives", cwd=tmp_path)
             for i in range(3)]
    errors = [(p.wait(180), p.stderr.read()) for p in procs]
    assert all(rc == 0 for rc, _ in errors), errors
    assert _complete(url, name) == 60


def test_running_trials_of_other_clients_do_not_take_slots(tmp_path: Path,
                                                           postgres_url: str) -> None:
    """Trials left RUNNING by another client (or an older dse) are not counted: the budget
    is COMPLETE trials, and only finished trials are written."""
    path, name = _write(tmp_path)
    first = _start("study", str(path), "--storage", postgres_url, "--trials", "20", "-q",
                   "--no-alternatives", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert first.wait(120) == 0, first.stderr.read()
    st = optuna.load_study(study_name=name, storage=postgres_url)
    for _ in range(5):
        st.ask()  # RUNNING, never told
    again = _start("study", str(path), "--storage", postgres_url, "--trials", "60", "-q",
                   "--no-alternatives", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert again.wait(120) == 0, again.stderr.read()
    trials = st.get_trials(deepcopy=False)
    assert sum(t.state == TrialState.COMPLETE for t in trials) == 60
    assert len({t.number for t in trials}) == len(trials) == 65


@pytest.fixture()
def own_postgres():
    """A PostgreSQL cluster of this test's own, to restart."""
    from tests.conftest import _Cluster, _postgres_driver_missing, postgres_bindir, unavailable

    bindir = postgres_bindir()
    if bindir is None or _postgres_driver_missing():
        unavailable("PostgreSQL server binaries or driver not found")
    cluster = _Cluster(bindir)
    try:
        yield cluster, cluster.start()
    finally:
        cluster.stop()


def test_a_database_restart_mid_run_is_waited_for(tmp_path: Path, own_postgres) -> None:
    cluster, url = own_postgres
    path, name = _write(tmp_path)
    p = _start("study", str(path), "--storage", url, "--workers", "2", "--trials", "600",
               "--batch", "5", "--out", str(tmp_path / "o"), "--no-alternatives", cwd=tmp_path)
    for _ in range(600):
        if p.poll() is not None or _started(url, name) >= 60:
            break
        time.sleep(0.1)
    assert p.poll() is None, p.stderr.read()
    # -l: the restarted server logs to its file (without it, it holds pg_ctl's output pipe
    # open and the call never returns); its other options are the first start's
    cluster.check("pg_ctl", "restart", "-w", "-m", "fast", "-D", str(cluster.data), "-l",
                  str(cluster.log))
    rc = p.wait(300)
    err = p.stderr.read()
    assert rc == 0, err
    assert "the database is unreachable" in err, err
    assert _complete(url, name) == 600


def test_journal_shared_needs_dse_journal(tmp_path: Path) -> None:
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "j")))
    with pytest.raises(TypeError):
        journal.Shared(storage, 0)


def test_workers_stop_when_their_command_is_killed(tmp_path: Path) -> None:
    """SIGKILL of the command: its workers end after their batch (no process outlives its
    command), and the next command completes exactly the budget."""
    path, name = _write(tmp_path)
    out = tmp_path / "o"
    args = ("study", str(path), "--workers", "2", "--trials", "3000", "--batch", "5",
            "--out", str(out), "-q", "--no-alternatives")
    p = _start(*args, cwd=tmp_path)
    url = str(out / "study.journal")
    kids: list[int] = []
    for _ in range(1200):
        kids = _children(p.pid) or kids
        if p.poll() is not None or (len(kids) == 2 and _started(url, name) >= 100):
            break
        time.sleep(0.05)
    assert len(kids) == 2
    p.kill()
    p.wait(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(Path(f"/proc/{k}").exists() and
                                              "Z" not in _state(k) for k in kids):
        time.sleep(0.1)
    assert not [k for k in kids if Path(f"/proc/{k}").exists() and "Z" not in _state(k)]
    again = _start(*args, cwd=tmp_path)
    assert again.wait(300) == 0, again.stderr.read()
    assert _complete(url, name) == 3000


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
