"""`dse dashboard`: a study written by Optuna into a journal file is served by optuna-dashboard;
its JSON API lists the study and its trials, and the React page, rendered by headless Chromium,
shows the study's name and its trials. Errors are one line, exit 2; Ctrl-C exits 0."""

from __future__ import annotations

import contextlib
import json
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import optuna
import pytest
from typer.testing import CliRunner

from dse.cli import app

STUDY = "dse-dashboard-test-7f3a"  # distinctive: found in the page only if the page rendered
N_TRIALS = 20
START_TIMEOUT_S = 30
PAGE_BUDGET_MS = 8000  # Chromium's virtual time for the app to fetch and render
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")


def _journal_study(folder: Path) -> None:
    """A two-objective study with user attributes in folder/study.journal, as `dse study`
    writes it."""
    from optuna.storages.journal import JournalFileBackend

    folder.mkdir()
    storage = optuna.storages.JournalStorage(JournalFileBackend(str(folder / "study.journal")))
    study = optuna.create_study(study_name=STUDY, storage=storage,
                                directions=["minimize", "maximize"],
                                sampler=optuna.samplers.RandomSampler(seed=1))

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        sms = trial.suggest_int("compute.units", 64, 160)
        l2 = trial.suggest_float("memory.L2.capacity", 16e6, 128e6, log=True)
        area = 3.0 * sms + 4e-6 * l2
        trial.set_user_attr("area_mm2", area)
        trial.set_user_attr("feasible", area < 800)
        return area, sms * (1.0 + l2 / 1e8)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study.optimize(objective, n_trials=N_TRIALS)


def _readline(process: subprocess.Popen, pattern: str, timeout: float) -> re.Match:
    """The first line of the process's stdout that matches `pattern`, within `timeout` s (a
    thread reads the lines: the pipe's buffered reader hides them from select)."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout],
                     daemon=True).start()
    seen = []
    deadline = time.monotonic() + timeout
    with contextlib.suppress(queue.Empty):
        while (left := deadline - time.monotonic()) > 0:
            seen.append(lines.get(timeout=left))
            if match := re.search(pattern, seen[-1]):
                return match
    process.kill()
    raise AssertionError(f"no line matching {pattern!r}; stdout: {''.join(seen)!r}; "
                         f"stderr: {process.stderr.read()!r}")


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def _page_text(chromium: str, url: str) -> str:
    """The text of the page after its scripts ran (headless Chromium's DOM dump)."""
    with tempfile.TemporaryDirectory(prefix="dse-chromium-") as profile:
        result = subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                                 f"--virtual-time-budget={PAGE_BUDGET_MS}", "--dump-dom", url],
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    dom = re.sub(r"<(script|style)\b.*?</\1>", " ", result.stdout, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom))


@pytest.fixture
def server(tmp_path):
    """`dse dashboard OUT --port 0` running on a study output folder: (process, base URL,
    study page URL)."""
    out = tmp_path / "out"
    _journal_study(out)
    process = subprocess.Popen(
        [sys.executable, "-m", "dse", "dashboard", str(out), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # Ctrl-C's signal reaches the server even where the test runner ignores it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        match = _readline(process, r"open (http://127\.0\.0\.1:(\d+)/dashboard/studies/(\d+))",
                          START_TIMEOUT_S)
        base = f"http://127.0.0.1:{match[2]}"
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:  # answers HTTP
            try:
                _get_json(f"{base}/api/meta")
                break
            except OSError:
                assert time.monotonic() < deadline, "the dashboard never answered"
                time.sleep(0.1)
        yield process, base, match[1]
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
        process.stderr.close()


def test_dashboard_serves_the_study(server, chromium):
    process, base, study_page = server
    # The JSON API: the study, its directions, its trials and their user attributes.
    summaries = _get_json(f"{base}/api/studies")["study_summaries"]
    assert [(s["study_name"], s["directions"]) for s in summaries] == \
        [(STUDY, ["minimize", "maximize"])]
    detail = _get_json(f"{base}/api/studies/{summaries[0]['study_id']}")
    assert detail["name"] == STUDY
    assert len(detail["trials"]) == N_TRIALS
    assert all(t["state"] == "Complete" for t in detail["trials"])
    assert {a["key"] for a in detail["trials"][0]["user_attrs"]} == {"area_mm2", "feasible"}
    assert detail["best_trials"]  # the Pareto front

    # The page, after React rendered it: the study list, then the study's trials.
    home = _page_text(chromium, f"{base}/dashboard/")
    assert STUDY in home, home[:2000]
    trials = _page_text(chromium, f"{study_page}/trials")
    assert STUDY in trials, trials[:2000]
    assert f"{N_TRIALS} Trials" in trials, trials[:2000]
    assert f"Trial {N_TRIALS - 1} " in trials or "Trial 0 " in trials, trials[:2000]
    assert "area_mm2" in trials, trials[:2000]  # the selected trial's user attributes

    # Ctrl-C stops it cleanly.
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=10) == 0
    assert "Traceback" not in process.stderr.read()


def test_port_in_use_is_one_line(server, tmp_path):
    _, base, _ = server
    port = base.rsplit(":", 1)[1]
    result = subprocess.run([sys.executable, "-m", "dse", "dashboard", str(tmp_path / "out"),
                             "--port", port], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == \
        f"port {port} on 127.0.0.1 is already in use; choose another with --port"
    assert result.stdout == ""


@pytest.mark.parametrize(("make", "expected"), [
    (lambda d: d, "{d}: no study.journal in this folder; expected a `dse study` output folder, "
                  "a .journal file or a database URL"),
    (lambda d: d / "missing", "{d}/missing: no such folder or file; expected a `dse study` "
                              "output folder, a .journal file or a database URL"),
    (lambda d: "sqlite:///" + str(d / "none.db"), "sqlite:///{d}/none.db: no such database "
                                                  "file: {d}/none.db"),
    (lambda d: "redis://localhost", "redis://localhost: unsupported storage URL; expected "
                                    "sqlite://, postgresql://, mysql://, a study folder or a "
                                    ".journal file"),
], ids=["folder-without-journal", "missing-path", "missing-sqlite-file", "unsupported-url"])
def test_bad_target_is_one_line(tmp_path, make, expected):
    result = CliRunner().invoke(app, ["dashboard", str(make(tmp_path))])
    assert result.exit_code == 2
    assert result.output.strip() == expected.format(d=tmp_path)


def test_storage_for_reads_folder_file_and_url(tmp_path):
    from dse.dashboard import storage_for

    out = tmp_path / "out"
    _journal_study(out)
    for target in (out, out / "study.journal"):
        assert [s.study_name for s in storage_for(target).get_all_studies()] == [STUDY]
    url = f"sqlite:///{tmp_path / 'study.db'}"
    optuna.create_study(study_name="in-sqlite", storage=url)
    assert [s.study_name for s in storage_for(url).get_all_studies()] == ["in-sqlite"]


def test_storage_for_postgres(postgres_url):
    from dse.dashboard import storage_for

    optuna.create_study(study_name="dashboard-in-postgres", storage=postgres_url)
    names = {s.study_name for s in storage_for(postgres_url).get_all_studies()}
    assert "dashboard-in-postgres" in names


def test_dashboard_url():
    from dse.dashboard import dashboard_url

    assert dashboard_url("0.0.0.0", 8080) == "http://127.0.0.1:8080/dashboard/"
    assert dashboard_url("::1", 80) == "http://[::1]:80/dashboard/"
    assert dashboard_url("localhost", 1) == "http://localhost:1/dashboard/"
