"""Fixtures for tests that need an outside program: a private PostgreSQL server and Chromium.

Each one skips its test, with the reason, when the program is missing, except under CI
(`DSE_CI=1`, set by .ci/run, which installs them), where a missing program fails the test:
CI must exercise them.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_USER = "dse"  # the cluster's superuser: trust authentication on loopback only
PG_DATABASE = "dse_test"
PG_OS_USER = "postgres"  # who runs the server when the tests run as root (initdb refuses root)
PG_FALLBACK_OS_USER = "dse-postgres"  # created when root and no `postgres` user exists
START_TIMEOUT_S = 60


def unavailable(reason: str) -> None:
    """Skip the test for want of `reason`; under CI (DSE_CI=1) fail it instead."""
    if os.environ.get("DSE_CI") == "1":
        pytest.fail(f"{reason} (DSE_CI=1: .ci/run should have installed it)", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    """A TCP port free on loopback now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PG_TOOLS = ("initdb", "pg_ctl", "createdb")


def postgres_bindir() -> Path | None:
    """The folder of initdb, pg_ctl and createdb: initdb's on PATH (links followed), else
    Debian's /usr/lib/postgresql/<version>/bin, newest first."""
    found = shutil.which("initdb")
    candidates = [Path(found).resolve().parent] if found else []
    candidates += sorted((Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
                         key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0,
                         reverse=True)
    for bindir in candidates:
        if all((bindir / tool).is_file() for tool in PG_TOOLS):
            return bindir
    return None


def _server_account() -> pwd.struct_passwd | None:
    """The account that owns and runs the cluster: None for the current user, else (as root)
    the `postgres` system user, created as `dse-postgres` when there is none."""
    if os.geteuid() != 0:
        return None
    for name in (PG_OS_USER, PG_FALLBACK_OS_USER):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    PG_FALLBACK_OS_USER], check=True, capture_output=True)
    return pwd.getpwnam(PG_FALLBACK_OS_USER)


class _Cluster:
    """A throwaway PostgreSQL cluster in its own folder, listening on 127.0.0.1 only."""

    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.account = _server_account()
        # Not under pytest's tmp_path: that is private to the test user (0700), and as root the
        # server runs as another user, who must own the folder.
        self.root = Path(tempfile.mkdtemp(prefix="dse-pg-"))
        if self.account is not None:
            os.chown(self.root, self.account.pw_uid, self.account.pw_gid)
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()

    def run(self, tool: str, *args: str) -> subprocess.CompletedProcess:
        command = [str(self.bindir / tool), *args]
        if self.account is not None:
            command = ["runuser", "-u", self.account.pw_name, "--", *command]
        return subprocess.run(command, cwd=self.root, capture_output=True, text=True,
                              timeout=START_TIMEOUT_S)

    def check(self, tool: str, *args: str) -> None:
        result = self.run(tool, *args)
        if result.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{tool} failed ({result.returncode}):\n{result.stdout}"
                               f"{result.stderr}{log}")

    def start(self) -> str:
        self.check("initdb", "-D", str(self.data), "-U", PG_USER, "--auth=trust",
                   "--encoding=UTF8", "--no-sync")
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 "
                   f"-c unix_socket_directories='{self.root}' -c fsync=off")
        self.check("pg_ctl", "start", "-w", "-t", str(START_TIMEOUT_S), "-D", str(self.data),
                   "-l", str(self.log), "-o", options)
        self.check("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", PG_USER,
                   PG_DATABASE)
        return f"postgresql://{PG_USER}@127.0.0.1:{self.port}/{PG_DATABASE}"

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.run("pg_ctl", "stop", "-w", "-m", "fast", "-D", str(self.data))
        shutil.rmtree(self.root, ignore_errors=True)


def _postgres_driver_missing() -> str | None:
    """The name of the driver module SQLAlchemy takes for a plain postgresql:// URL when it is
    not installed (psycopg from SQLAlchemy 2.1, psycopg2 before), else None."""
    from sqlalchemy.engine import make_url

    dialect = make_url("postgresql://").get_dialect()
    try:
        dialect.import_dbapi()
    except ImportError:
        return dialect.driver
    return None


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """`postgresql://dse@127.0.0.1:PORT/dse_test`: a private PostgreSQL server on loopback
    (trust authentication), started once per session, stopped and deleted after."""
    bindir = postgres_bindir()
    if bindir is None:
        unavailable("PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install "
                    "postgresql")
    driver = _postgres_driver_missing()
    if driver:
        unavailable(f"{driver} (the driver SQLAlchemy uses for postgresql:// URLs) not "
                    "installed: pip install '.[postgres]'")
    cluster = _Cluster(bindir)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def chromium() -> str:
    """The path of a Chromium (or Chrome) binary for headless page tests."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    unavailable("Chromium not found: apt-get install chromium")
    raise AssertionError("unreachable")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The fault suite (`-m faults`): tests/faults, and the fault tests beside the code they
    cover (tests/search/test_*_faults.py: the journal's, the database's; test_workers.py:
    workers killed, a database restarted)."""
    for item in items:
        path = Path(str(item.fspath))
        if path.parent.name == "faults" or path.name.endswith("_faults.py") or \
                path.name == "test_workers.py":
            item.add_marker(pytest.mark.faults)


@pytest.fixture(autouse=True)
def _nothing_kept_between_tests() -> Iterator[None]:
    """Each test starts with no kept tables or training plans (dse.model.lowered,
    training_cache): a test that monkeypatches a model constant must not find a table an
    earlier test lowered with the constant as it was."""
    from dse.model import lowered, training_cache

    lowered.clear()
    training_cache.clear()
    yield
