"""Fault: kill -9 while a study writes its outputs (dse.search.atomic.staged), at 5 points
drawn from a seeded RNG across the output-writing phase (found by polling the folder for the
run's staging folder, and timed by a first, whole run). Asserted after each kill: every
output file there parses whole, those present agree on the trial count (the previous run's
or the new one's, never a mix), the journal holds exactly the requested COMPLETE trials;
and the same command run again completes with all outputs, consistent, nothing temporary
left. The same at 4 seeded points from the search's start to past its outputs (whole
batches stored, unique numbers). Also what recovery does with each thing a kill can leave
(a half-written staging folder, a committed one, a stray temporary file) and that Ctrl-C
during the moves waits."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from faultkit import (
    STUDY,
    all_outputs,
    command,
    complete,
    dse,
    leftovers,
    outputs_consistent,
    staging,
    start,
    wait_for_outputs_phase,
)

from dse.errors import DseError
from dse.search import atomic

pytestmark = [pytest.mark.faults,
              pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]
KILLS = 5


@pytest.fixture()
def study(tmp_path: Path) -> Path:
    (tmp_path / "s.yaml").write_text(STUDY)
    return tmp_path


def _writing_time(study: Path) -> float:
    """A whole run of 200 trials; how long its staging folder existed (s)."""
    proc = start(command(200), cwd=study)
    seen = wait_for_outputs_phase(study / "o", proc)
    while staging(study / "o") and proc.poll() is None:
        time.sleep(0.002)
    took = time.monotonic() - seen
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    all_outputs(study / "o", 200)
    return took


def test_kill_9_while_writing_outputs_leaves_them_whole(study: Path):
    folder = study / "o"
    writing = _writing_time(study)
    rng = random.Random(25)
    previous, in_flight = 200, 0
    for i in range(1, KILLS + 1):
        target = 200 + 20 * i
        proc = start(command(target), cwd=study)
        seen = wait_for_outputs_phase(folder, proc)
        time.sleep(max(0.0, seen + rng.uniform(0, 0.9 * writing) - time.monotonic()))
        in_flight += bool(staging(folder))
        proc.send_signal(signal.SIGKILL)  # (a run already ended is not killed: exit 0)
        proc.communicate(timeout=60)
        assert proc.returncode in (0, -signal.SIGKILL)
        shown = outputs_consistent(folder)
        assert shown in (previous, target), (i, shown)
        assert complete(folder) == target  # the search ended before the outputs
        r = dse(command(target), cwd=study)  # the same command again
        assert r.returncode == 0, r.stderr
        all_outputs(folder, target)
        previous = target
    assert in_flight >= 1, "no kill landed while the outputs were written"


def _journal_grows(folder: Path, proc, size: int) -> None:
    """Poll until the journal grows past `size` bytes: the run's search has begun."""
    journal = folder / "study.journal"
    while not (journal.exists() and journal.stat().st_size > size):
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.002)


def test_kill_9_at_random_points_of_a_run(study: Path):
    """Kills at seeded points from the search's first append to past its outputs (400 more
    trials: ~0.3 s of search, ~0.7 s of outputs): whole trials stored, never a torn or
    doubled one, outputs whole; the same command completes the rest. (A batch is one
    write, but Linux ends a write to a file early at a page boundary when SIGKILL arrives,
    so a kill can store the first trials of a batch: the journal keeps those whole records
    and cuts the torn one.)"""
    folder = study / "o"
    r = dse(command(200), cwd=study)
    assert r.returncode == 0, r.stderr
    rng = random.Random(8)  # two points in the search, two in the outputs, here
    previous = 200
    for i in range(1, 5):
        target = 200 + 400 * i
        proc = start(command(target), cwd=study)
        _journal_grows(folder, proc, (folder / "study.journal").stat().st_size)
        time.sleep(rng.uniform(0, 1.0))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        done = complete(folder)
        assert previous <= done <= target, (i, done)  # complete() asserts unique numbers
        assert outputs_consistent(folder) in (previous, target)
        r = dse(command(target), cwd=study)
        assert r.returncode == 0, r.stderr
        all_outputs(folder, target)
        previous = target


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_recovery_finishes_a_committed_set_and_removes_half_written_ones(tmp_path: Path):
    dead = _dead_pid()
    (tmp_path / "trials.csv").write_text("old\n")
    (tmp_path / "run.json").write_text("old\n")
    ready = tmp_path / f".dse-outputs-{dead}.ready"  # killed among the moves
    ready.mkdir()
    (ready / "run.json").write_text("new\n")
    partial = tmp_path / f".dse-outputs-{dead}.partial"  # killed while writing
    partial.mkdir()
    (partial / "summary.md").write_text("half")
    (tmp_path / f".pareto.{dead}.tmp.csv").write_text("half")  # a single file's temporary
    alive = tmp_path / f".dse-outputs-{os.getppid()}.partial"  # a live process's: kept
    alive.mkdir()
    (tmp_path / "trials.csv").rename(ready / "trials.csv")  # that one was moved... back
    (ready / "trials.csv").write_text("new\n")
    done = atomic.recover(tmp_path)
    assert len(done) == 3
    assert (tmp_path / "trials.csv").read_text() == "new\n"
    assert (tmp_path / "run.json").read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [alive.name, "run.json", "trials.csv"]


def test_a_failure_while_writing_keeps_the_previous_set(tmp_path: Path):
    (tmp_path / "trials.csv").write_text("old\n")
    with pytest.raises(RuntimeError), atomic.staged(tmp_path) as stage:
        (stage / "trials.csv").write_text("new\n")
        raise RuntimeError
    assert [p.name for p in tmp_path.iterdir()] == ["trials.csv"]
    assert (tmp_path / "trials.csv").read_text() == "old\n"


def test_a_full_disk_while_writing_names_the_file_and_keeps_the_previous_set(tmp_path: Path):
    (tmp_path / "summary.md").write_text("old\n")
    with pytest.raises(DseError) as caught, atomic.staged(tmp_path) as stage, \
            atomic.replacing(stage / "summary.md") as tmp:
        tmp.write_text("half")
        raise OSError(28, "No space left on device")  # as pandas raises it: no file named
    assert str(caught.value).startswith(f"{tmp_path / 'summary.md'}: cannot write it, the disk "
                                        "is full (No space left on device)")
    assert [p.name for p in tmp_path.iterdir()] == ["summary.md"]
    assert (tmp_path / "summary.md").read_text() == "old\n"


def test_ctrl_c_while_the_set_is_moved_in_waits_for_the_last_move(tmp_path: Path,
                                                                   monkeypatch):
    moves = []
    real = os.replace

    def replace(src, dst):
        if Path(src).parent.name.endswith(".ready"):  # moving the committed set in
            if not moves:
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C at the first move
            moves.append(Path(dst).name)
        real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(atomic.Interrupted), atomic.staged(tmp_path) as stage:
        for name in ("a.csv", "b.csv", "run.json"):
            (stage / name).write_text(name)
    assert moves == ["a.csv", "b.csv", "run.json"]  # run.json last: it names the study
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv", "run.json"]
    assert leftovers(tmp_path) == []
