"""Faults while a study writes its outputs: SIGTERM, and a second command on the same folder.
The writer is paused (SIGSTOP) once its staging folder appears, so the fault lands inside
the output phase whatever the machine's speed. Asserted: SIGTERM ends it with exit 130 and
one line, the previous outputs whole, nothing temporary left, and the same command then
writes them; a second command on the folder's journal, the same study or another one with
--overwrite, is refused with one line naming the writer, which then completes; two commands
on one shared database writing one folder at once leave one whole set of outputs, not a
mix."""

from __future__ import annotations

import signal
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

pytestmark = [pytest.mark.faults,
              pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]


STOPPED_WRITING = ("stopped by Ctrl-C (or SIGTERM) while writing the outputs: every finished "
                   "trial is kept and o/ is left as it was before this run; run the same "
                   "command to write them")
STOPPED_WRITTEN = ("stopped by Ctrl-C (or SIGTERM) once the outputs were written: every "
                   "finished trial is kept and o/ holds this run's outputs")


@pytest.fixture()
def study(tmp_path: Path) -> Path:
    (tmp_path / "s.yaml").write_text(STUDY)
    (tmp_path / "t.yaml").write_text(STUDY.replace("name: faults", "name: other"))
    return tmp_path


def _paused_in_outputs(args: list[str], study: Path, written: str | None = None):
    """A run of `args`, stopped (SIGSTOP) as it starts writing its outputs, or once it has
    written `written` (a file of the set, in its staging folder): in the middle of them."""
    proc = start(args, cwd=study)
    wait_for_outputs_phase(study / "o", proc)
    while written is not None and not any((s / written).exists() for s in staging(study / "o")):
        assert staging(study / "o"), "the outputs were moved in before the pause"
        time.sleep(0.001)
    proc.send_signal(signal.SIGSTOP)
    assert staging(study / "o"), "the outputs were moved in before the pause"
    return proc


def test_sigterm_while_writing_outputs_keeps_the_previous_ones(study: Path):
    r = dse(command(200), cwd=study)
    assert r.returncode == 0, r.stderr
    proc = _paused_in_outputs(command(220), study)
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    lines = [x for x in err.splitlines() if x.strip()]
    # where C code swallowed the signal's KeyboardInterrupt (numpy comparing a pandas dtype
    # does), the outputs are finished first and that is said instead
    assert lines in (
        [STOPPED_WRITING],
        [STOPPED_WRITTEN]), err
    assert outputs_consistent(study / "o") == (200 if lines == [STOPPED_WRITING] else 220)
    assert complete(study / "o") == 220 and leftovers(study / "o") == []
    r = dse(command(220), cwd=study)
    assert r.returncode == 0, r.stderr
    all_outputs(study / "o", 220)


def test_a_second_command_on_the_folder_while_outputs_are_written_is_refused(study: Path):
    proc = _paused_in_outputs(command(200), study)
    try:
        for args in (command(200), ["study", "t.yaml", "--trials", "20", "--out", "o", "-q",
                                    "--no-alternatives", "--overwrite"]):
            r = dse(args, cwd=study)
            lines = [x for x in r.stderr.splitlines() if x.strip()]
            assert r.returncode == 2 and len(lines) == 1, r.stderr
            assert f"another dse study is running on this journal (pid {proc.pid}," in lines[0]
    finally:
        proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    all_outputs(study / "o", 200)


def test_two_commands_on_one_database_writing_one_folder_leave_one_whole_set(study: Path):
    """No run lock on a database (many commands share one by design): the first writer is
    paused half-way through its outputs while a second writes and moves in its own; the
    first then moves in its set, whole (the folder's lock: one set moved in at a time)."""
    db = f"sqlite:///{study / 'study.db'}"  # few trials: a database run is slower
    r = dse([*command(20), "--storage", db], cwd=study)
    assert r.returncode == 0, r.stderr
    proc = _paused_in_outputs([*command(20), "--storage", db], study, written="trials.csv")
    try:
        r = dse([*command(40), "--storage", db], cwd=study)
        assert r.returncode == 0, r.stderr
        assert outputs_consistent(study / "o") == 40
    finally:
        proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert outputs_consistent(study / "o") == 20  # the last set moved in, whole
    assert leftovers(study / "o") == []


def test_sigterm_while_the_outputs_are_moved_in_waits_for_the_last(study: Path, monkeypatch):
    """SIGTERM after the set is committed (at its first move) is held until every output is
    in place; then exit 130, one line saying the folder holds this run's outputs."""
    import os

    from typer.testing import CliRunner

    from dse.cli import app
    from dse.search import atomic

    real = os.replace
    moved: list[str] = []

    def replace(src, dst):
        if Path(src).parent.name.endswith(".ready"):
            if not moved:
                os.kill(os.getpid(), signal.SIGTERM)
            moved.append(Path(dst).name)
        real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    monkeypatch.chdir(study)
    r = CliRunner().invoke(app, command(200))
    assert r.exit_code == 130, r.output
    assert r.stderr.splitlines() == [STOPPED_WRITTEN]
    assert moved[-1] == "run.json" and len(moved) == 8
    all_outputs(study / "o", 200)


def _swallowing(monkeypatch, owner, name: str) -> None:
    """`owner.name`, on its first call, receives a SIGTERM whose KeyboardInterrupt is lost
    (as C code that clears errors loses it: numpy comparing a pandas dtype did, while the
    outputs were written)."""
    import os

    real = getattr(owner, name)
    calls = []

    def swallowed(*args, **kwargs):
        if not calls:
            calls.append(1)
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(1000):  # the handler runs at the next bytecode
                    pass
            except KeyboardInterrupt:
                pass
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, swallowed)


def test_a_sigterm_lost_while_writing_outputs_still_ends_the_run_130(study: Path, monkeypatch):
    """Regression: a SIGTERM whose KeyboardInterrupt C code swallowed ended the run 0, as if
    never sent."""
    from typer.testing import CliRunner

    from dse.cli import app
    from dse.search import run_record

    _swallowing(monkeypatch, run_record, "write_resolved")
    monkeypatch.chdir(study)
    r = CliRunner().invoke(app, command(200))
    assert r.exit_code == 130, r.output
    assert r.stderr.splitlines() == [STOPPED_WRITTEN]
    all_outputs(study / "o", 200)


def test_a_sigterm_lost_in_the_search_stops_it_at_the_batch_end(study: Path, monkeypatch):
    """A SIGTERM whose KeyboardInterrupt was lost in a batch's evaluation stops the run when
    that batch ends, as Ctrl-C does: its trials kept, outputs written, exit 130."""
    from typer.testing import CliRunner

    from dse.cli import app
    from dse.search.space import Study

    _swallowing(monkeypatch, Study, "designs")
    monkeypatch.chdir(study)
    r = CliRunner().invoke(app, command(200))
    assert r.exit_code == 130, r.output
    assert "stopped by Ctrl-C (or SIGTERM): every finished trial is kept" in r.stderr
    assert outputs_consistent(study / "o") == complete(study / "o") == 20
