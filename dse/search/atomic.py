"""Output files written whole or not at all, and a run's outputs as one set.

- **Each file whole.** A file is written to a temporary name beside it and renamed onto its
  own (a rename within a folder is atomic on POSIX and Windows), so a kill or a full disk
  while writing leaves the previous file, never a shorter one that still parses.
- **The set whole.** `staged` writes a run's outputs into a staging folder inside the output
  folder and moves them in only when all are written: a kill, Ctrl-C, SIGTERM or a full disk
  while writing leaves the previous run's outputs, consistent with one another. The moves
  are committed first (the staging folder renamed `.ready`), so a run killed among them has
  the next run finish them; what a killed run left half-written is removed by the next.

I/O only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from dse.errors import DseError

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

# A write that failed for want of room: the disk (or quota, or file size limit) is full.
FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
STAGE = ".dse-outputs"  # staging folders: .dse-outputs-<pid>.partial, then .ready
_STAGED = re.compile(rf"^{re.escape(STAGE)}-(\d+)\.(partial|ready)$")
_TEMPORARY = re.compile(r"^\..+\.(\d+)\.tmp(\.[^.]*)?$")  # replacing()'s names


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path beside `path` (same suffix, so writers that go by it still do) to
    write to; renamed onto `path` when the block ends without error, removed otherwise. A
    write that fails without naming its file (pandas, matplotlib, pyarrow on a full disk)
    is re-raised naming `path`."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as e:
        if e.filename is None or os.fsdecode(e.filename) == str(tmp):
            raise OSError(e.errno, _reason(e), str(path)) from None
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _reason(e: OSError) -> str:
    """The OS's words for `e` (pyarrow wraps them in its own: 'Error writing bytes ...')."""
    return os.strerror(e.errno) if e.errno else (e.strerror or type(e).__name__)


def write_text(path: Path, text: str) -> None:
    """`path.write_text(text)`, whole or not at all."""
    with replacing(path) as tmp:
        tmp.write_text(text)


@contextlib.contextmanager
def staged(folder: Path) -> Iterator[Path]:
    """A staging folder inside `folder` for the block to write a set of outputs to, by the
    names they will have in `folder`; moved into `folder` when the block ends without error
    (module docstring), removed otherwise. A full disk is a DseError naming the file."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder):
        recover(folder)
    stage = folder / f"{STAGE}-{os.getpid()}.partial"
    shutil.rmtree(stage, ignore_errors=True)
    try:
        try:
            stage.mkdir()
            yield stage
        except OSError as e:
            name = Path(os.fsdecode(e.filename)).name if e.filename is not None else None
            shown = folder / name if name and not _STAGED.match(name) else folder
            if e.errno not in FULL:  # named as the file it was to be (permission denied ...)
                raise OSError(e.errno, _reason(e), str(shown)) from None
            raise DseError(f"{shown}: cannot write it, the disk is full ({_reason(e)}); "
                           f"{folder}/ is left as it was before this run, its outputs whole: "
                           "free some space and run the same command again to write them"
                           ) from None
        with _held_signals(), _locked(folder):
            ready = stage.with_name(f"{STAGE}-{os.getpid()}.ready")
            os.replace(stage, ready)  # the commit: from here on the set is moved in
            _move_in(ready, folder)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def recover(folder: Path) -> list[str]:
    """Finish what a dead run left in `folder`: a committed staging folder is moved in, a
    half-written one and stray temporary files are removed. The names it acted on."""
    done: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return done
    for entry in entries:
        staged_match = _STAGED.match(entry.name)
        temp_match = None if staged_match else _TEMPORARY.match(entry.name)
        match = staged_match or temp_match
        if match is None or _alive(int(match.group(1))):
            continue
        path = Path(entry.path)
        if temp_match is not None:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                path.unlink()
        elif staged_match is not None and staged_match.group(2) == "ready":
            _move_in(path, folder)
        else:
            shutil.rmtree(path, ignore_errors=True)
        done.append(entry.name)
    return done


def _move_in(ready: Path, folder: Path) -> None:
    """Move each file of a committed staging folder onto its name in `folder` (run.json
    last: it says whose outputs the folder holds), then remove the staging folder."""
    names = sorted((p.name for p in ready.iterdir() if p.is_file()),
                   key=lambda n: (n == "run.json", n))
    for name in names:
        os.replace(ready / name, folder / name)
    shutil.rmtree(ready, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (this one's own leftovers count as dead: it is done with
    them)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    except OverflowError:
        return False
    return True


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An advisory lock on the folder itself, so two processes writing outputs into one
    folder (two commands on one database study) move their sets in one after the other;
    released by the kernel when the holder ends."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM, held while a set of outputs was moved in: the set is in place."""


@contextlib.contextmanager
def _held_signals() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM while the outputs are moved in (a few renames), then raise
    Interrupted: the set is moved in whole."""
    from dse.search import signals

    with signals.held() as caught:
        yield
    if caught:
        raise Interrupted
