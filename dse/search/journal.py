"""The journal file a study's trials live in, safe against the faults a long run meets.

- **Locks the kernel releases.** Appends hold an advisory `flock` on the journal file itself
  (not Optuna's symlink lock, whose owner's death left a lock that blocked every later run
  for its 30 s grace, or for ever when the link's relative target dangled): a process that
  dies, by SIGKILL included, releases it at once, whatever the paths. A whole run holds a
  second one, `<journal>.run`, so a second command on the same journal is refused with one
  line naming the process that runs, instead of doubling the budget or failing its trials.
- **A journal that heals.** A torn or undecodable tail (a kill or a full disk in the middle
  of an append) is cut back to the last whole record on open and before every append; the
  cut bytes are kept in `<journal>.torn-<time>` and reported in one line. A corrupt record
  followed by whole ones is a one-line error naming its line and how to recover.
- **Whole appends.** A batch of records is one write and one fsync (`Journal.batch`: a
  told batch of trials is one append, not one per trial); a write that fails (a full disk)
  is cut back, so the journal stays readable, and is reported in one line.
- **Shared by workers** (`Shared`, dse.search.workers): a worker's commit reads the journal
  and appends its finished trials under one hold of the lock, within the budget.

Where `fcntl` does not exist (Windows) the locks are Optuna's own. I/O only, no model code.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.storages.journal._file import BaseJournalFileLock
from optuna.trial import FrozenTrial, TrialState

from dse.errors import DseError

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

RUN_SUFFIX = ".run"


class FlockLock(BaseJournalFileLock):
    """An exclusive advisory lock on the journal file, held while appending; the kernel
    releases it when its process ends, however it ends."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None
        self._depth = 0  # re-entrant: a commit holds it across its read and its append

    def acquire(self) -> bool:
        if self._fd is not None:
            self._depth += 1
            return True
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        if self._depth:
            self._depth -= 1
            return
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _whole_records(data: bytes) -> tuple[int, int, int | None]:
    """(bytes of the leading whole, decodable records; their count; the 1-based line of a
    bad record that whole records follow, or None when every bad byte is in the tail)."""
    good_end, count, line = 0, 0, 0
    pos = 0
    bad_at: int | None = None
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            break  # a torn last record: no newline
        line += 1
        ok = True
        try:
            json.loads(data[pos:nl])
        except ValueError:
            ok = False
        if ok and bad_at is None:
            good_end, count = nl + 1, count + 1
        elif ok:  # a whole record after a bad one: the bad one is in the middle
            return good_end, count, bad_at
        elif bad_at is None:
            bad_at = line
        pos = nl + 1
    return good_end, count, None


def heal(path: Path, full: bool = True) -> str | None:
    """Cut a torn or undecodable tail of the journal at `path` back to its last whole record
    (the cut bytes kept beside it); a line saying what was done, or None when it was whole.
    A bad record followed by whole ones: DseError naming its line and how to recover.
    `full`: decode every record (on open); else only the last, when it looks whole."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if not data or (not full and data.endswith(b"\n") and _last_line_decodes(data)):
        return None
    return _cut(path, data)


def _last_line_decodes(data: bytes) -> bool:
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    try:
        json.loads(data[start:-1])
    except ValueError:
        return False
    return True


def _cut(path: Path, data: bytes) -> str | None:
    good_end, count, bad_line = _whole_records(data)
    if bad_line is not None:
        raise DseError(
            f"{path}:{bad_line}: a corrupt journal record with whole records after it; keep "
            f"the {bad_line - 1} records before it (head -n {bad_line - 1} {path} > "
            f"{path.name}.fixed && mv {path.name}.fixed {path}) or move the file aside to "
            "start the study over")
    if good_end == len(data):
        return None
    tail = data[good_end:]
    side = path.with_name(f"{path.name}.torn-{time.strftime('%Y%m%dT%H%M%S')}")
    try:
        side.write_bytes(tail)
    except OSError as e:  # a full disk: the tail stays until it can be kept aside
        with contextlib.suppress(OSError):
            side.unlink()
        why = "the disk is full" if e.errno in (errno.ENOSPC, errno.EDQUOT) else (
            e.strerror or str(e))
        raise DseError(f"{path}: a torn tail of {len(tail):,} bytes after record {count:,} "
                       f"cannot be kept aside in {side.name} ({why}); free some space and run "
                       "again: it is cut then, and no record before it is lost") from None
    with open(path, "r+b") as f:
        f.truncate(good_end)
        f.flush()
        os.fsync(f.fileno())
    cut = tail.count(b"\n") + (0 if tail.endswith(b"\n") else 1)
    return (f"{path}: cut a torn tail of {cut} record{'s' if cut != 1 else ''} "
            f"({len(tail):,} bytes) after record {count:,}, kept in {side.name}; the "
            f"{count:,} whole records stay")


class Journal(JournalFileBackend):
    """Optuna's journal file backend with kernel-released locks, healing and whole appends
    (module docstring)."""

    def __init__(self, path: Path, full: bool = True) -> None:
        """`full`: decode every record on open (a command opening the journal); else only
        the tail is checked (a worker, whose command has just checked every record)."""
        self.path = Path(path)
        self.notices: list[str] = []
        self._pending: list[dict] | None = None  # records held by `batch()`
        lock = FlockLock(self.path) if fcntl else None
        super().__init__(str(self.path), lock_obj=lock)
        self._heal_locked(full)

    def _heal_locked(self, full: bool) -> None:
        self._lock.acquire()
        try:
            note = heal(self.path, full=full)
        finally:
            self._lock.release()
        if note:
            self.notices.append(note)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the journal's lock for a read and the append that depends on it."""
        self._lock.acquire()
        try:
            yield
        finally:
            self._lock.release()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Hold every record appended in the block and write them as one append (one
        write, one fsync) when it ends; an exception in the block writes none of them.
        Optuna's storage reads them back at its next read, so it must not need a record
        of the block before the block ends (adding finished trials does not)."""
        if self._pending is not None:  # nested: the outer block writes
            yield
            return
        self._pending = []
        try:
            yield
            logs = self._pending
        finally:
            self._pending = None
        if logs:
            self.append_logs(logs)

    def append_logs(self, logs: list[dict]) -> None:
        if self._pending is not None:
            self._pending.extend(logs)
            return
        text = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs)
        self._lock.acquire()
        try:
            if not _ends_whole(self.path):  # a process died mid-append: never write onto it
                note = heal(self.path, full=False)
                if note:
                    self.notices.append(note)
            with open(self.path, "ab") as f:
                size = f.tell()
                try:
                    f.write(text.encode("utf-8"))
                    f.flush()
                    os.fsync(f.fileno())
                except OSError as e:
                    _cut_back(self.path, size)
                    why = "the disk is full" if e.errno == errno.ENOSPC else (
                        e.strerror or str(e))
                    raise DseError(f"{self.path}: cannot append {len(logs)} trial records "
                                   f"({why}); the journal keeps every record before them"
                                   ) from None
        finally:
            self._lock.release()


def _ends_whole(path: Path) -> bool:
    """Whether the journal is empty or ends with a newline (one byte read)."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() == 0:
            return True
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def _cut_back(path: Path, size: int) -> None:
    """Truncate `path` to `size` bytes after a failed append (best effort: a disk that
    refuses even that leaves a torn tail, which the next open cuts)."""
    try:
        with open(path, "r+b") as f:
            f.truncate(size)
    except OSError:
        pass


class RunLock:
    """Held by one command for its whole run on a journal: a second command on the same
    journal is refused, naming the process that holds it. Released by the kernel when the
    holder ends, however it ends."""

    def __init__(self, journal: Path) -> None:
        self.path = journal.with_name(journal.name + RUN_SUFFIX)
        self._fd: int | None = None

    def __enter__(self) -> RunLock:
        if fcntl is None:  # pragma: no cover - Windows: no second-command check
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise DseError(f"{self.path.parent}: another dse study is running on this journal "
                           f"({holder}); wait for it to end, or give this run another --out "
                           "(several processes on one study: --workers, or a shared "
                           "--storage database)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}"
                  .encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def batch(storage: object) -> contextlib.AbstractContextManager[None]:
    """`Journal.batch` of a journal storage's backend; for any other storage, nothing."""
    backend = getattr(storage, "_backend", None)
    if not isinstance(backend, Journal):
        return contextlib.nullcontext()
    # Optuna's create_new_trial returns the id of the last trial this process created, read
    # back from the file; inside a batch none is read back yet (Study.add_trial ignores it)
    replay = getattr(storage, "_replay_result", None)
    if replay is not None and not hasattr(replay, "_last_created_trial_id_by_this_process"):
        replay._last_created_trial_id_by_this_process = -1
    return backend.batch()


class Shared:
    """A journal as workers share it (dse.search.workers): commits are appends under the
    journal's lock, reads are Optuna's incremental replay of the records appended since."""

    def __init__(self, storage: JournalStorage, study_id: int) -> None:
        if not isinstance(storage._backend, Journal):
            raise TypeError("a dse Journal backend is needed")
        self.storage, self.study_id = storage, study_id
        self.backend: Journal = storage._backend
        self._read = 0  # trials of the study seen by read_new

    def _trials(self) -> list[FrozenTrial]:
        return self.storage.get_all_trials(self.study_id, deepcopy=False)

    def read_all(self) -> list[FrozenTrial]:
        return list(self._trials())

    def read_new(self) -> list[FrozenTrial]:
        trials = self._trials()
        new, self._read = trials[self._read:], len(trials)
        return [t for t in new if t.state == TrialState.COMPLETE]

    def complete(self) -> int:
        return sum(t.state == TrialState.COMPLETE for t in self._trials())

    def commit(self, trials: list[FrozenTrial], target: int, token: str,
               retried: bool = False) -> tuple[int, int]:
        del token, retried  # an append is not retried: it is whole or cut back (append_logs)
        with self.backend.locked():
            done = self.complete()
            keep = trials[:max(target - done, 0)]
            with batch(self.storage):
                for t in keep:
                    self.storage.create_new_trial(self.study_id, template_trial=t)
        return len(keep), done + len(keep)
