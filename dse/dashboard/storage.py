"""The storage a dashboard serves: a `dse study` output folder (its study.journal), a
.journal file or a database URL (postgresql://, sqlite:///, mysql://), each checked so that
every problem with it is one DseError line (exit 2); passwords never shown."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from dse.errors import DseError

JOURNAL = "study.journal"  # the journal file `dse study` writes into its output folder
RDB_SCHEMES = ("sqlite", "postgresql", "mysql")
SQLITE_HEADER = b"SQLite format 3\x00"
EXPECTED = "expected a `dse study` output folder, a .journal file or a database URL"


def _redact(url: str) -> str:
    """The URL with its password, if any, hidden."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def _journal_path(target: str) -> Path:
    """The journal file a folder or file target names."""
    path = Path(target)
    if path.is_dir():
        journal = path / JOURNAL
        if not journal.is_file():
            raise DseError(f"{path}: no {JOURNAL} in this folder; {EXPECTED}")
        return journal
    if path.is_file():
        return path
    raise DseError(f"{target}: no such folder or file; {EXPECTED}")


def _first_bytes(path: Path) -> bytes:
    """The file's first line (at most 1 MiB): enough to tell an Optuna journal, whose every
    line is one JSON log entry, and an SQLite database (its header) from anything else."""
    try:
        with path.open("rb") as f:
            return f.readline(1 << 20)
    except OSError as e:
        raise DseError(f"{path}: cannot read the file ({e.strerror or e})") from None


def _check_journal(path: Path, first: bytes) -> None:
    """An Optuna journal's first line is a JSON object with an integer `op_code`."""
    if not first.strip():
        raise DseError(f"{path}: empty file, not an Optuna journal; {EXPECTED}")
    try:
        entry = json.loads(first)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError both are
        entry = None
    if not isinstance(entry, dict) or type(entry.get("op_code")) is not int:
        raise DseError(f"{path}: not an Optuna journal (its first line is not an Optuna log "
                       f"entry); {EXPECTED}")


def _rdb_storage(url: str) -> Any:
    """An RDB storage that reads an existing Optuna database (creates no tables)."""
    import optuna

    scheme = url.split("://", 1)[0].split("+", 1)[0]
    if scheme not in RDB_SCHEMES:
        raise DseError(f"{_redact(url)}: unsupported storage URL; expected "
                       f"{', '.join(s + '://' for s in RDB_SCHEMES)}, a study folder or a "
                       ".journal file")
    if scheme == "sqlite":  # SQLAlchemy would create an empty database file
        from sqlalchemy.engine import make_url

        file = make_url(url).database
        if file and file != ":memory:" and not Path(file).is_file():
            raise DseError(f"{url}: no such database file: {file}")
    try:
        return optuna.storages.RDBStorage(url, skip_compatibility_check=True,
                                          skip_table_creation=True)
    except ImportError as e:
        raise DseError(f"{_redact(url)}: the database driver is not installed ({e}); for "
                       "PostgreSQL: pip install 'dse[postgres]'") from None
    except Exception as e:
        raise DseError(f"{_redact(url)}: cannot open the database: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    """The first line of the innermost cause (the driver's own words, not Optuna's wrapper)."""
    while (e.__cause__ or e.__context__) is not None:
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def storage_for(target: str | Path) -> Any:
    """The Optuna storage a target names: a study output folder (its study.journal), a
    journal file (or an SQLite file), or a database URL. Checks that it can be read."""
    import optuna

    text = str(target)
    if "://" in text:
        storage, label = _rdb_storage(text), _redact(text)
    else:
        path = _journal_path(text)
        label = str(path)
        first = _first_bytes(path)
        if first.startswith(SQLITE_HEADER):
            try:
                storage = optuna.storages.RDBStorage(
                    f"sqlite:///{path}", skip_compatibility_check=True,
                    skip_table_creation=True)
                storage.get_all_studies()
            except Exception as e:
                raise DseError(f"{path}: an SQLite database but not an Optuna one "
                               f"({_first_line(e)}); {EXPECTED}") from None
        else:
            from dse.search.journal import Journal

            _check_journal(path, first)
            try:  # the journal is read (replayed) here; a torn tail is cut back first
                backend = Journal(path)
                for note in backend.notices:
                    print(f"warning: {note}", file=sys.stderr)
                storage = optuna.storages.JournalStorage(backend)
            except DseError:
                raise
            except Exception as e:
                raise DseError(f"{path}: not a readable Optuna journal ({type(e).__name__}: "
                               f"{_first_line(e)}); {EXPECTED}") from None
    try:
        storage.get_all_studies()
    except Exception as e:
        raise DseError(f"{label}: cannot read Optuna studies: {_first_line(e)}") from None
    return storage
