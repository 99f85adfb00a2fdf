"""A grid's chunks on Dask workers (dse.search.cluster): the gathered frame is the one-process
frame row for row and bit for bit, whichever workers ran it, a worker killed mid-grid
changes nothing, and every misuse is one line (exit 2)."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from dse.cli import app
from dse.search import cluster as grid_cluster
from dse.search.grid import grid_frame
from dse.search.outputs import CHUNK
from dse.search.space import load_study

DATA = Path(__file__).resolve().parents[1] / "data" / "studies"
needs_dask = pytest.mark.skipif(importlib.util.find_spec("distributed") is None,
                                reason="dask.distributed not installed (dse[distributed])")

# 40 x 7 x 150 = 42,000 designs: 11 chunks of 4,096, ~2 s in one process
GRID = """\
name: chunks-grid
source: tests (a grid of several chunks)
base: h100-sxm
parameters:
  compute.units: {low: 66, high: 144, step: 2}
  memory.HBM3.stacks: {low: 2, high: 8}
  memory.L2.capacity: {low: 16 MiB, high: 512 MiB, log: true}
workloads:
  decode: {workload: llama2-7b, scenario: chat-decode, batch: 16}
objectives:
  throughput: {maximize: throughput}
  area: {minimize: area}
constraints:
  area: 800 mm2
search:
  sampler: grid
  grid_points: 150
"""


@pytest.fixture(scope="module")
def grid_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("grid") / "chunks-grid.yaml"
    path.write_text(GRID)
    return path


@pytest.fixture(scope="module")
def one_process(grid_file: Path) -> pd.DataFrame:
    return grid_frame(load_study(grid_file))


@pytest.fixture(scope="module")
def cluster():
    """Two local worker processes, shared by the tests that only use them."""
    if importlib.util.find_spec("distributed") is None:
        pytest.skip("dask.distributed not installed")
    with grid_cluster.GridCluster(2) as c:
        yield c


def test_chunks_per_task_by_hand() -> None:
    # 0.2 s a chunk: 5 chunks make the 1 s task; 100 chunks on 2 workers leave room for it
    assert grid_cluster.chunks_per_task(0.2, 100, 2) == 5
    # slow chunks (2.4 s, the middle-ground study's): one a task
    assert grid_cluster.chunks_per_task(2.4, 100, 2) == 1
    # fast chunks: at most MAX_GROUP (16) a task
    assert grid_cluster.chunks_per_task(0.001, 1000, 2) == 16
    # few chunks left: at least two tasks per worker (9 chunks, 2 workers: 3 a task)
    assert grid_cluster.chunks_per_task(0.01, 9, 2) == 3
    assert grid_cluster.chunks_per_task(0.01, 0, 2) == 1


@needs_dask
def test_two_workers_gather_the_one_process_frame(cluster, grid_file: Path,
                                                  one_process: pd.DataFrame) -> None:
    frame = grid_frame(load_study(grid_file), cluster=cluster)
    assert len(one_process) == 42_000 and len(one_process) > 10 * CHUNK
    pd.testing.assert_frame_equal(frame, one_process, check_exact=True)
    assert frame["number"].tolist() == list(range(42_000))
    # chunks were grouped: fewer tasks than the grid's 11 chunks
    assert 2 < cluster.tasks < 11
    assert cluster.describe() == "2 Dask worker processes on this machine"
    # started without Dask's MALLOC_TRIM_THRESHOLD_ (the model 1.6x slower with it)
    assert not any(cluster.client.run(os.environ.__contains__,
                                      "MALLOC_TRIM_THRESHOLD_").values())
    assert cluster.warnings() == []


@needs_dask
def test_an_alternative_s_chunks_go_where_the_study_s_designs_are_held(
        cluster, grid_file: Path, tmp_path: Path) -> None:
    from dse.search import memo

    path = tmp_path / "alt.yaml"
    path.write_text(GRID + "alternatives:\n  tight:\n    constraints: {area: 700 mm2}\n")
    study = load_study(path)
    cluster.client.run(memo.clear)
    grid_frame(study, cluster=cluster)
    before = sum(s["misses"] for s in cluster.client.run(memo.stats).values())
    assert 42_000 < before <= 42_002  # each design once, and the base chip on each worker
    frame = grid_frame(study.alternatives["tight"], cluster=cluster)
    after = sum(s["misses"] for s in cluster.client.run(memo.stats).values())
    # a budget alone changed: every design's model result is held by the worker that
    # evaluated it, and its chunk goes back there (at random, about half would miss)
    assert after - before < 0.1 * 42_000
    pd.testing.assert_frame_equal(frame, grid_frame(study.alternatives["tight"]),
                                  check_exact=True)


@needs_dask
def test_grid_frame_reaches_a_scheduler_by_its_address(cluster, grid_file: Path,
                                                       one_process: pd.DataFrame) -> None:
    frame = grid_frame(load_study(grid_file), scheduler=cluster.client.scheduler.address)
    pd.testing.assert_frame_equal(frame, one_process, check_exact=True)


@needs_dask
def test_a_scheduler_address_runs_the_grid_on_its_workers(cluster, grid_file: Path,
                                                          one_process: pd.DataFrame,
                                                          tmp_path: Path) -> None:
    address = cluster.client.scheduler.address
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["study", str(grid_file), "--out", str(out), "--scheduler",
                                 address, "-q"])
    assert r.exit_code == 0, r.output
    assert f"of the cluster at {address}" in r.output.splitlines()[0]
    assert f"of the cluster at {address}" in (out / "summary.md").read_text()
    pd.testing.assert_frame_equal(pd.read_parquet(out / "trials.parquet"), one_process,
                                  check_exact=True)


@needs_dask
def test_workers_started_with_dask_malloc_trim_are_warned_of(tmp_path: Path,
                                                             monkeypatch) -> None:
    import dask
    from distributed import LocalCluster

    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)  # the nanny sets it here too
    key = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"
    with dask.config.set({key: 65536}), LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=None) as trimmed:
        r = CliRunner().invoke(app, ["study", str(DATA / "tiny-grid.yaml"), "--out",
                                     str(tmp_path / "run"), "--scheduler",
                                     trimmed.scheduler_address, "-q"])
    assert r.exit_code == 0, r.output
    assert "1 Dask worker of the cluster at" in r.output
    assert "warning: --scheduler tcp://127.0.0.1:" in r.stderr
    assert "1 Dask worker runs with MALLOC_TRIM_THRESHOLD_ set" in r.stderr


@needs_dask
def test_a_worker_address_is_not_a_scheduler(cluster, tmp_path: Path) -> None:
    worker = next(iter(cluster.client.scheduler_info()["workers"]))
    r = CliRunner().invoke(app, ["study", str(DATA / "tiny-grid.yaml"), "--out",
                                 str(tmp_path / "run"), "--scheduler", worker])
    assert r.exit_code == 2, r.output
    assert f"--scheduler {worker}: answers as a Dask Worker, not a scheduler" in r.output
    assert len(r.output.strip().splitlines()) == 1


@needs_dask
def test_workers_option_runs_the_study_and_its_alternatives_on_local_processes(
        tmp_path: Path) -> None:
    study = tmp_path / "alt.yaml"
    study.write_text((DATA / "tiny-grid.yaml").read_text()
                     + "alternatives:\n  tight:\n    constraints: {area: 700 mm2}\n")
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["study", str(study), "--out", str(out), "--workers", "2"])
    assert r.exit_code == 0, r.output
    assert "by 2 Dask worker processes on this machine" in r.output.splitlines()[0]
    assert "by 2 Dask worker processes" in (out / "summary.md").read_text()
    alt = out / "alternatives" / "tight"
    assert "by 2 Dask worker processes" in (alt / "summary.md").read_text()
    one = grid_frame(load_study(study).alternatives["tight"])
    pd.testing.assert_frame_equal(pd.read_parquet(alt / "trials.parquet"), one,
                                  check_exact=True)


class _KillOnce:
    """A Dask worker plugin: the first worker to start a task SIGKILLs its own process
    (once over the cluster: the marker file is created exclusively)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.name = "dse-test-kill-once"

    def setup(self, worker) -> None:
        pass

    def teardown(self, worker) -> None:
        pass

    def transition(self, key, start, finish, **kwargs) -> None:
        if finish != "executing":
            return
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)


@needs_dask
def test_a_worker_killed_mid_grid_changes_nothing(grid_file: Path, one_process: pd.DataFrame,
                                                  tmp_path: Path) -> None:
    import cloudpickle
    from distributed.diagnostics.plugin import WorkerPlugin

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    plugin = type("KillOnce", (_KillOnce, WorkerPlugin), {})(str(tmp_path / "killed"))
    with grid_cluster.GridCluster(2) as c:
        pids = set(c.client.run(os.getpid).values())
        c.client.register_plugin(plugin)
        frame = grid_frame(load_study(grid_file), cluster=c)
        after = set(c.client.run(os.getpid).values())
    killed = int((tmp_path / "killed").read_text())
    assert killed in pids and killed not in after  # a worker died with a chunk in hand
    pd.testing.assert_frame_equal(frame, one_process, check_exact=True)


def test_missing_dask_is_one_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as if absent
    r = CliRunner().invoke(app, ["study", str(DATA / "tiny-grid.yaml"), "--out",
                                 str(tmp_path / "run"), "--workers", "2"])
    assert r.exit_code == 2
    assert "pip install 'dse[distributed]'" in r.output and "--workers 2" in r.output
    assert len(r.output.strip().splitlines()) == 1


@pytest.mark.parametrize("address", ["localhost:8786", "http://localhost:8786",
                                     "tcp://localhost", "tcp://localhost:99999",
                                     "tcp://a b:8786"])
def test_a_malformed_scheduler_address_is_one_line(tmp_path: Path, address: str) -> None:
    r = CliRunner().invoke(app, ["study", str(DATA / "tiny-grid.yaml"), "--out",
                                 str(tmp_path / "run"), "--scheduler", address])
    assert r.exit_code == 2, r.output
    assert f"--scheduler {address}: expected a Dask scheduler's address" in r.output
    assert len(r.output.strip().splitlines()) == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_dask
def test_a_refused_or_silent_scheduler_is_one_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(grid_cluster, "CONNECT_TIMEOUT", 1.0)
    refused = f"tcp://127.0.0.1:{_free_port()}"
    with socket.socket() as silent:  # accepts connections, never speaks Dask
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        mute = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        for address, words in ((refused, "connection refused (nothing listens on port"),
                               (mute, "no Dask scheduler answered within 1 s"),
                               ("tcp://no-such-host.invalid:8786", "unknown host")):
            r = CliRunner().invoke(app, ["study", str(DATA / "tiny-grid.yaml"), "--out",
                                         str(tmp_path / "run"), "--scheduler", address])
            assert r.exit_code == 2, r.output
            assert f"--scheduler {address}: {words}" in r.output
            assert len(r.output.strip().splitlines()) == 1
    assert not (tmp_path / "run" / "trials.csv").exists()


@needs_dask
def test_a_scheduler_without_workers_is_one_line(tmp_path: Path, monkeypatch) -> None:
    from distributed import LocalCluster

    monkeypatch.setattr(grid_cluster, "CONNECT_TIMEOUT", 1.0)
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=None) as empty:
        r = CliRunner().invoke(app, ["study", str(DATA / "tiny-grid.yaml"), "--out",
                                     str(tmp_path / "run"), "--scheduler",
                                     empty.scheduler_address])
    assert r.exit_code == 2, r.output
    assert "the scheduler has no worker" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_scheduler_is_for_grids_only_and_not_with_workers_or_storage(tmp_path: Path) -> None:
    cases = [
        (["--sampler", "nsga2", "--scheduler", "tcp://127.0.0.1:8786"],
         "only with --sampler grid"),
        (["--scheduler", "tcp://127.0.0.1:8786", "--workers", "2"], "drop --workers"),
        (["--storage", f"sqlite:///{tmp_path / 's.db'}"], "drop --storage"),
    ]
    for extra, words in cases:
        r = CliRunner().invoke(app, ["study", str(DATA / "tiny-grid.yaml"), "--out",
                                     str(tmp_path / "run"), *extra])
        assert r.exit_code == 2, r.output
        assert words in r.output
        assert len(r.output.strip().splitlines()) == 1
