"""Serve a study's Optuna storage in optuna-dashboard, the web UI Optuna users know.

A target is a `dse study` output folder (its `study.journal`), a `.journal` file, or a
database URL (postgresql://, sqlite:///, mysql://) shared by several workers. Every problem
with the target or the address is a DseError: one line, exit 2.
"""

from __future__ import annotations

import errno
import signal
import socketserver
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from dse.errors import DseError

JOURNAL = "study.journal"  # the journal file `dse study` writes into its output folder
RDB_SCHEMES = ("sqlite", "postgresql", "mysql")
SQLITE_HEADER = b"SQLite format 3\x00"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


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
            raise DseError(f"{path}: no {JOURNAL} in this folder; expected a `dse study` output "
                           "folder, a .journal file or a database URL")
        return journal
    if path.is_file():
        return path
    raise DseError(f"{target}: no such folder or file; expected a `dse study` output folder, "
                   "a .journal file or a database URL")


def _is_sqlite(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(len(SQLITE_HEADER)) == SQLITE_HEADER


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
        if _is_sqlite(path):
            storage = _rdb_storage(f"sqlite:///{path}")
        else:
            from optuna.storages.journal import JournalFileBackend

            storage = optuna.storages.JournalStorage(JournalFileBackend(str(path)))
    try:
        storage.get_all_studies()
    except Exception as e:
        raise DseError(f"{label}: cannot read Optuna studies: {_first_line(e)}") from None
    return storage


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    """The page loads its scripts and polls the API at once: one thread per request."""

    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    """No line on stderr for every request (the page polls every few seconds)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _listen(app: Callable, host: str, port: int) -> WSGIServer:
    try:
        return make_server(host, port, app, server_class=_ThreadingServer,
                           handler_class=_QuietHandler)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise DseError(f"port {port} on {host} is already in use; choose another with "
                           "--port") from None
        raise DseError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None


def dashboard_url(host: str, port: int) -> str:
    """The address to open in a browser for a server bound to host:port."""
    shown = "127.0.0.1" if host in ("", "0.0.0.0") else "[::1]" if host == "::" else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/dashboard/"


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def serve(target: str | Path, host: str = "127.0.0.1", port: int = 8080,
          echo: Callable[[str], None] = print, warn: Callable[[str], None] = _stderr) -> None:
    """Serve `target` in optuna-dashboard on host:port until Ctrl-C (which returns normally).
    Port 0 picks a free port; the URL printed has the real one."""
    try:
        import optuna_dashboard
    except ImportError:
        raise DseError("optuna-dashboard is not installed: pip install optuna-dashboard"
                       ) from None

    storage = storage_for(target)
    names = [s.study_name for s in storage.get_all_studies()]
    # optuna_dashboard.wsgi, not run_server: run_server prints its banner before it binds the
    # port and logs every request; here the port is bound first, so a port in use is one line.
    server = _listen(optuna_dashboard.wsgi(storage), host, port)
    url = dashboard_url(host, server.server_port)
    label = _redact(str(target)) if "://" in str(target) else str(target)
    studies = ", ".join(names) if names else "none yet (the page shows them as they appear)"
    echo(f"serving {label}: {len(names)} {'study' if len(names) == 1 else 'studies'}: "
         f"{studies}")
    if len(names) == 1:
        study_id = storage.get_study_id_from_name(names[0])
        echo(f"open {url}studies/{study_id}  (all studies: {url})")
    else:
        echo(f"open {url}")
    if host not in LOOPBACK:
        warn(f"warning: listening on {host}: anyone who can reach it can rename, delete and "
             "edit studies (optuna-dashboard has no login)")
    echo("press Ctrl-C to stop")
    previous = _stop_on_sigterm()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _stop_on_sigterm() -> Any:
    """`kill PID` stops the server as Ctrl-C does (cleanly, exit 0); the previous handler, or
    None outside the main thread (where Python allows no handler)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _interrupt)
