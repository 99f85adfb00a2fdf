"""Faults a long study meets on its journal (dse.search.journal): a kill leaves no lock that
blocks the next run (relative --out included), a torn tail is cut back and reported, a
corrupt middle record is one line, a full disk leaves the journal readable, a second command
on the same journal is refused naming the first, and SIGTERM ends a run as Ctrl-C does."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dse.errors import DseError
from dse.search import journal
from tests.faults.faultkit import STUDY  # the fault suite's small study

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(journal.fcntl is None, reason="POSIX locks")



def _dse(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dse", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def _start(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dse", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _complete(folder: Path) -> int:
    import optuna

    from dse.search.run import open_storage

    st = optuna.load_study(study_name="faults", storage=open_storage(str(folder / "study.journal")))
    done = [t for t in st.get_trials(deepcopy=False)
            if t.state == optuna.trial.TrialState.COMPLETE]
    assert len({t.number for t in done}) == len(done)
    return len(done)


@pytest.fixture()
def study(tmp_path: Path) -> Path:
    (tmp_path / "s.yaml").write_text(STUDY)
    return tmp_path


def _wait_for_journal(folder: Path, proc: subprocess.Popen, size: int = 2000) -> None:
    for _ in range(600):
        p = folder / "study.journal"
        if p.exists() and p.stat().st_size > size:
            return
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read())
        time.sleep(0.05)
    raise AssertionError("the run wrote no journal")


def test_sigkill_with_a_relative_out_leaves_no_lock_that_blocks(study: Path):
    """The reproducer: kill -9 mid-search with the default relative runs/<name>, then run
    again: it used to spin for ever on a dangling symlink lock."""
    proc = _start("study", "s.yaml", "--trials", "100000", "--out", "runs/hang", "-q",
                  "--no-alternatives", cwd=study)
    _wait_for_journal(study / "runs" / "hang", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    started = time.monotonic()
    r = _dse("study", "s.yaml", "--trials", "200", "--out", "runs/hang", "-q",
             "--no-alternatives", cwd=study, timeout=90)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - started < 60
    assert _complete(study / "runs" / "hang") >= 200


def test_a_torn_tail_is_cut_back_kept_aside_and_reported(study: Path):
    r = _dse("study", "s.yaml", "--trials", "40", "--out", "o", "-q", "--no-alternatives",
             cwd=study)
    assert r.returncode == 0, r.stderr
    path = study / "o" / "study.journal"
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"op_code": 4, "worker_id": "x", "trial_id": 7, "par')
    r = _dse("study", "s.yaml", "--trials", "60", "--out", "o", "-q", "--no-alternatives",
             cwd=study)
    assert r.returncode == 0, r.stderr
    assert "cut a torn tail of 1 record (52 bytes)" in r.stderr
    side = list((study / "o").glob("study.journal.torn-*"))
    assert len(side) == 1 and side[0].read_bytes().startswith(b'{"op_code": 4')
    assert _complete(study / "o") == 60
    # a garbage tail that ends in a newline is cut the same way
    path.write_bytes(path.read_bytes() + b"garbage\n")
    assert "cut a torn tail" in (journal.heal(path) or "")


def test_a_corrupt_middle_record_is_one_line_naming_its_line(study: Path):
    r = _dse("study", "s.yaml", "--trials", "20", "--out", "o", "-q", "--no-alternatives",
             cwd=study)
    assert r.returncode == 0, r.stderr
    path = study / "o" / "study.journal"
    lines = path.read_bytes().split(b"\n")
    lines.insert(3, b"not json")
    path.write_bytes(b"\n".join(lines))
    r = _dse("study", "s.yaml", "--trials", "30", "--out", "o", "-q", "--no-alternatives",
             cwd=study)
    assert r.returncode != 0
    err = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(err) == 1 and "study.journal:4: a corrupt journal record" in err[0]
    assert "head -n 3" in err[0] and "Traceback" not in r.stderr


def test_a_full_disk_is_one_line_and_the_journal_stays_readable(tmp_path: Path, monkeypatch):
    path = tmp_path / "study.journal"
    j = journal.Journal(path)
    j.append_logs([{"op_code": 0, "worker_id": "w", "study_name": "s", "directions": [1]}])
    before = path.read_bytes()
    real = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(DseError, match=r"cannot append 1 trial records \(the disk is full\)"):
        j.append_logs([{"op_code": 1, "worker_id": "w", "study_id": 0}])
    monkeypatch.setattr(os, "fsync", real)
    assert path.read_bytes() == before
    assert [json.loads(x) for x in before.splitlines()]


def test_a_second_command_on_one_journal_is_refused_naming_the_first(study: Path):
    proc = _start("study", "s.yaml", "--trials", "100000", "--out", "o", "-q",
                  "--no-alternatives", cwd=study)
    try:
        _wait_for_journal(study / "o", proc)
        r = _dse("study", "s.yaml", "--trials", "50", "--out", "o", "-q", cwd=study)
        assert r.returncode == 2
        err = [x for x in r.stderr.splitlines() if x.strip() and not x.startswith("warning")]
        assert len(err) == 1 and "another dse study is running on this journal (pid " \
            f"{proc.pid}," in err[0], r.stderr
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    r = _dse("study", "s.yaml", "--trials", "50", "--out", "o", "-q", "--no-alternatives",
             cwd=study)  # the holder is dead: its lock went with it
    assert r.returncode == 0, r.stderr


def test_sigterm_ends_a_run_as_ctrl_c_does(study: Path):
    proc = _start("study", "s.yaml", "--trials", "100000", "--out", "o", "--no-alternatives",
                  cwd=study)
    _wait_for_journal(study / "o", proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "SIGTERM" in err
    assert (study / "o" / "summary.md").exists() and (study / "o" / "trials.csv").exists()
    n = _complete(study / "o")
    r = _dse("study", "s.yaml", "--trials", str(n + 20), "--out", "o", "-q",
             "--no-alternatives", cwd=study)
    assert r.returncode == 0, r.stderr
    assert _complete(study / "o") == n + 20


def test_a_folder_holds_one_study_unless_asked(study: Path):
    r = _dse("study", "s.yaml", "--trials", "20", "--out", "o", "-q", "--no-alternatives",
             cwd=study)
    assert r.returncode == 0, r.stderr
    (study / "t.yaml").write_text(STUDY.replace("name: faults", "name: other"))
    before = (study / "o" / "trials.csv").read_bytes()
    r = _dse("study", "t.yaml", "--trials", "20", "--out", "o", "-q", "--no-alternatives",
             cwd=study)
    assert r.returncode == 2 and r.stderr.strip() == (
        "--out o: holds the outputs of study 'faults', not 'other'; give this study its own "
        "--out, or --overwrite to replace them")
    assert (study / "o" / "trials.csv").read_bytes() == before  # nothing overwritten
    r = _dse("study", "t.yaml", "--trials", "20", "--out", "o", "-q", "--no-alternatives",
             "--overwrite", cwd=study)
    assert r.returncode == 0, r.stderr
    assert '"study": "other"' in (study / "o" / "run.json").read_text()


def test_a_batch_of_trials_is_one_append_and_one_fsync(study: Path, monkeypatch):
    """A one-process run writes each told batch as one append (one fsync), not one per
    trial: 200 trials in batches of 20 are 10 appends of trials, whatever the study's own
    records cost."""
    from dse.search import run as runner
    from dse.search.space import load_study

    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(journal.os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    st = load_study(study / "s.yaml")
    runner.run(st, runner.Options(out=study / "out", trials=20))
    setup = len(calls)  # the study's creation and attributes, and one batch
    calls.clear()
    prog = runner.run(st, runner.Options(out=study / "out", trials=200))
    assert prog.new == 180
    assert len(calls) == 9, len(calls)
    assert setup <= 10
    assert _complete(study / "out") == 200


def test_sigterm_while_a_batch_is_stored_is_held_until_it_is_whole(study: Path, monkeypatch):
    """SIGTERM (as Ctrl-C) arriving while a batch is appended: the batch is stored whole,
    then the run stops."""
    from dse.search import run as runner
    from dse.search.space import load_study

    st = load_study(study / "s.yaml")
    real = journal.Journal.append_logs
    sent = []

    def append(self, logs):
        if not sent and len(logs) > 5:  # the first batch of trials
            sent.append(1)
            os.kill(os.getpid(), signal.SIGTERM)
        return real(self, logs)

    monkeypatch.setattr(journal.Journal, "append_logs", append)
    previous = signal.signal(signal.SIGTERM, lambda s, f: (_ for _ in ()).throw(
        KeyboardInterrupt()))
    try:
        with pytest.raises(KeyboardInterrupt):
            runner.run(st, runner.Options(out=study / "out", trials=200))
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert sent and _complete(study / "out") == 20
