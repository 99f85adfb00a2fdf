"""Fault: the disk fills up, for real where the machine allows (a small tmpfs mounted for
the test: root with CAP_SYS_ADMIN), else through a fault-injecting file layer (every file
written under the output folder through Python's `open`, which the journal, pandas, pyarrow
through pandas, matplotlib and Pillow all use, counted against a quota; a write past it
writes what fits and raises ENOSPC, as the kernel does). Two cases: the journal fills
during the search, and the disk fills while the outputs are written. Asserted: exit 2 (not
1), one line on stderr naming the file and saying the disk is full, no traceback, the
journal readable afterwards, the previous outputs whole, nothing temporary left; and, once
space is freed, the same command completes with exactly the requested trials and
consistent outputs."""

from __future__ import annotations

import builtins
import errno
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from faultkit import (
    OUTPUTS,
    STUDY,
    all_outputs,
    command,
    complete,
    dse,
    leftovers,
    outputs_consistent,
)

pytestmark = [pytest.mark.faults,
              pytest.mark.skipif(sys.platform == "win32", reason="POSIX file systems")]

SIZE = "16m"  # the tmpfs: room for every run once the filler is gone


class Tmpfs:
    """A real, small file system (tmpfs) at `root`; `fill` leaves it nearly full with a
    filler file, `free` deletes the filler. Runs are processes (`python -m dse`)."""

    def __init__(self, root: Path, cwd: Path) -> None:
        self.root, self.cwd = root, cwd

    def run(self, args: list[str]) -> tuple[int, str]:
        r = dse(args, cwd=self.cwd)
        return r.returncode, r.stderr

    def fill(self, leaving: int) -> None:
        st = os.statvfs(self.root)
        free = st.f_bavail * st.f_frsize
        with open(self.root / "filler", "wb") as f:
            f.write(b"\0" * (free - leaving))

    def free(self) -> None:
        (self.root / "filler").unlink()


class _Counted:
    """A file opened for writing under a quota'd folder (Injected)."""

    def __init__(self, f, disk: Injected, path: Path) -> None:
        self._f, self._disk, self._path = f, disk, path

    def write(self, data):
        room = self._disk.room(self._path, self._f)
        size = len(data.encode() if isinstance(data, str) else data)
        if room is not None and size > room:
            self._f.write(data[:max(room, 0)])
            self._f.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # no file named, as pandas
        return self._f.write(data)

    def close(self) -> None:  # what was written through the descriptor (Pillow) counts too
        if self._f.closed:
            return
        self._f.flush()
        room = self._disk.room(self._path, self._f)
        if room is not None and room < 0:
            self._f.truncate(self._f.tell() + room)
            self._f.close()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __iter__(self) -> Iterator:
        return iter(self._f)

    def __getattr__(self, name: str):
        return getattr(self._f, name)


class Injected:
    """The fault-injecting layer: files opened for writing under `root` through Python's
    `open` share a quota (`fill`: the bytes there now plus `leaving`; `free`: none). Runs
    are in this process (CliRunner), with `open` patched."""

    def __init__(self, root: Path, cwd: Path, monkeypatch) -> None:
        self.root, self.cwd = root.resolve(), cwd
        self.quota: int | None = None
        real = builtins.open

        def opened(file, mode="r", *args, **kwargs):
            f = real(file, mode, *args, **kwargs)
            if isinstance(file, int) or not any(c in mode for c in "wax+"):
                return f
            path = Path(os.fsdecode(file)).resolve()
            return _Counted(f, self, path) if path.is_relative_to(self.root) else f

        monkeypatch.setattr(builtins, "open", opened)
        monkeypatch.setattr(io, "open", opened)
        monkeypatch.chdir(cwd)

    def _used(self, besides: Path) -> int:
        return sum(p.stat().st_size for p in self.root.rglob("*")
                   if p.is_file() and p != besides)

    def room(self, path: Path, f) -> int | None:
        """Bytes the quota still has for `f` (the file at `path`), or None: no quota."""
        if self.quota is None:
            return None
        f.flush()
        return self.quota - self._used(path) - os.fstat(f.fileno()).st_size

    def run(self, args: list[str]) -> tuple[int, str]:
        from typer.testing import CliRunner

        from dse.cli import app

        r = CliRunner().invoke(app, args)
        return r.exit_code, r.stderr

    def fill(self, leaving: int) -> None:
        self.quota = self._used(self.root / "-") + leaving

    def free(self) -> None:
        self.quota = None


def _mount(root: Path) -> str | None:
    """Mount a tmpfs at `root`; None, or why it cannot be."""
    root.mkdir()
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(root)],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot run mount ({e})"
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["failed"])[0]


@pytest.fixture(params=["tmpfs", "injected"])
def disk(request, tmp_path: Path, monkeypatch):
    (tmp_path / "s.yaml").write_text(STUDY)
    root = tmp_path / "disk"
    if request.param == "injected":
        root.mkdir()
        yield Injected(root, tmp_path, monkeypatch)
        return
    why = _mount(root)
    if why is not None:
        pytest.skip(f"a real full disk needs a tmpfs mount, not permitted here ({why}); the "
                    "'injected' case runs the same assertions through a fault-injecting layer")
    try:
        yield Tmpfs(root, tmp_path)
    finally:
        if subprocess.run(["umount", str(root)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(root)], capture_output=True)
    shutil.rmtree(root, ignore_errors=True)


def _one_line(code: int, err: str, file: str) -> None:
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert len(lines) == 1, err
    assert file in lines[0] and "the disk is full" in lines[0], lines[0]


def test_the_journal_fills_during_the_search(disk):
    out = disk.root / "o"
    args = command(1000, str(out))
    disk.fill(leaving=150_000)  # ~130 trials of journal
    code, err = disk.run(args)
    _one_line(code, err, str(out / "study.journal"))
    done = complete(out)  # readable: whole batches, no torn record
    assert 0 < done < 1000 and done % 20 == 0
    assert not list(out.glob("study.journal.torn-*")) and leftovers(out) == []
    disk.free()
    code, err = disk.run(args)
    assert code == 0, err
    all_outputs(out, 1000)


@pytest.mark.parametrize("leaving", [48_000, 200_000])
def test_the_disk_fills_while_the_outputs_are_written(disk, leaving: int):
    """48 kB: the journal's 20 more trials fit, trials.csv (~90 kB) does not; 200 kB: the
    tables fit, the plot (~120 kB, written by Pillow through its file descriptor) not."""
    out = disk.root / "o"
    code, err = disk.run(command(200, str(out)))
    assert code == 0, err
    disk.fill(leaving=leaving)
    code, err = disk.run(command(220, str(out)))
    named = err.split(":")[0]
    assert Path(named).parent == out and Path(named).name in OUTPUTS, err
    assert (Path(named).name == "trials.csv") == (leaving < 100_000), err
    _one_line(code, err, named)
    assert "is left as it was before this run, its outputs whole" in err
    assert outputs_consistent(out) == 200  # the previous run's, whole
    assert complete(out) == 220
    assert leftovers(out) == []
    disk.free()
    code, err = disk.run(command(220, str(out)))
    assert code == 0, err
    all_outputs(out, 220)


def test_a_torn_tail_on_a_full_disk_waits_for_room_to_be_kept_aside(disk):
    """Healing keeps a torn tail aside before cutting it; with no room for that, one line
    (it used to name only the side file, and leave it empty), and nothing is cut or lost."""
    out = disk.root / "o"
    code, err = disk.run(command(40, str(out)))
    assert code == 0, err
    journal = out / "study.journal"
    whole = journal.read_bytes()
    tail = b'{"op_code": 4, "worker_id": "x", "trial_id": 7, "par'
    journal.write_bytes(whole + tail)
    disk.fill(leaving=0)
    code, err = disk.run(command(60, str(out)))
    _one_line(code, err, str(journal))
    assert journal.read_bytes() == whole + tail and not list(out.glob("*.torn-*"))
    disk.free()
    code, err = disk.run(command(60, str(out)))
    assert code == 0, err
    assert [p.read_bytes() for p in out.glob("study.journal.torn-*")] == [tail]
    all_outputs(out, 60)
