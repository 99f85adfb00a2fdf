"""Large grids on many processes or machines: a grid's chunks evaluated by Dask workers
(dask.distributed), gathered into the frame one process would have built.

Dask rather than Ray: pure-Python wheels, a local cluster in-process with no daemon, other
machines joining with `dask scheduler` / `dask worker tcp://host:8786`, and `Client.submit` /
`as_completed` fit a list of independent chunks; Ray brings a large runtime and object store
for the same job. The study goes to the workers pickled once (~180 kB, ~3 ms for the
middle-ground study: measured), scattered to every worker, so a worker machine needs dse
installed but not the study's files. A task is a run of CHUNK-aligned chunks sized to about
TASK_SECONDS from the first chunks' time; a worker that dies has its tasks rescheduled by
Dask on the others. Dask is imported here only, and only when a grid uses it."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import time
from dataclasses import replace
from typing import Any

import pandas as pd

from dse.errors import DseError
from dse.search.outputs import CHUNK
from dse.search.space import Study

CONNECT_TIMEOUT = 10.0  # s: a --scheduler that does not answer (or has no worker) by then
TASK_SECONDS = 1.0  # s of evaluation a task aims at: Dask's overhead per task is ~1 ms
MAX_GROUP = 16  # chunks per task at most: a task's result stays below ~40 MB
INSTALL = "pip install 'dse[distributed]'"
# Dask's nannies start workers with MALLOC_TRIM_THRESHOLD_=65536, which fixes glibc's mmap
# threshold at 128 kB: every temporary array of a chunk is then mapped and unmapped, and the
# model runs 1.6x slower (a middle-ground chunk: 7.3 s of CPU against 4.5 s, measured); the
# local cluster's workers start without it
LOCAL_UNSET = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"
_ADDRESS = re.compile(r"(tcp|tls)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})")

# per worker process: the study last received (by identity) with its axes and baseline
_PREPARED: list[tuple[Study, list, dict]] = []


class GridCluster:
    """A Dask client for a study's grids (the study and its alternatives share it): a local
    cluster of `workers` processes (one thread each), or the cluster of `scheduler`."""

    def __init__(self, workers: int = 1, scheduler: str | None = None) -> None:
        self.workers = workers
        self.scheduler = scheduler
        self.client: Any = None  # a distributed.Client once started
        self.cluster: Any = None  # a distributed.LocalCluster, with no --scheduler
        self.used: set[str] = set()  # workers that evaluated the last grid's chunks
        self.trimmed: set[str] = set()  # workers (any grid) started with MALLOC_TRIM_THRESHOLD_
        self.tasks = 0  # tasks the last grid was cut into
        # chunk start -> the worker that evaluated it last: the next grid (an alternative)
        # sends the chunk there, where dse.search.memo holds those designs' results
        self.home: dict[int, str] = {}
        self.alive: set[str] = set()

    @property
    def option(self) -> str:
        return f"--scheduler {self.scheduler}" if self.scheduler else f"--workers {self.workers}"

    def __enter__(self) -> GridCluster:
        if self.scheduler is not None:
            check_address(self.scheduler)
        try:
            import distributed
        except ImportError:
            raise DseError(f"{self.option}: evaluating the grid on several processes needs "
                           f"Dask: {INSTALL}") from None
        logging.getLogger("distributed").setLevel(logging.CRITICAL)  # failures come as lines
        import dask

        try:
            if self.scheduler is None:
                with dask.config.set({LOCAL_UNSET: None}):  # read as the nannies start
                    self.cluster = self._local(distributed)
                self.client = distributed.Client(self.cluster)
            else:
                self._connect(distributed)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _local(self, distributed):
        """`workers` processes of one thread on this machine; no dashboard (its health page
        on a free loopback port, not 8787)."""
        return distributed.LocalCluster(
            n_workers=self.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=None, silence_logs=logging.CRITICAL,
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"})

    def _connect(self, distributed) -> None:
        where = f"--scheduler {self.scheduler}"
        assert self.scheduler is not None
        _reachable(self.scheduler)
        try:
            # Dask's Client waits for ever on a server that accepts and never answers: ask
            # its identity first, under the timeout
            kind = _identity(self.scheduler, CONNECT_TIMEOUT).get("type")
            if kind != "Scheduler":
                raise DseError(f"{where}: answers as a Dask {kind or 'peer'}, not a scheduler; "
                               "give the scheduler's address (`dask scheduler` prints it)")
            self.client = distributed.Client(self.scheduler, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError):
            raise DseError(f"{where}: no Dask scheduler answered within {CONNECT_TIMEOUT:.0f} "
                           "s; start one there with `dask scheduler` and workers with "
                           "`dask worker <address>`") from None
        try:
            self.client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError):
            raise DseError(f"{where}: the scheduler has no worker (none joined within "
                           f"{CONNECT_TIMEOUT:.0f} s); start some with `dask worker "
                           f"{self.scheduler}`") from None

    def __exit__(self, *exc) -> None:
        for part in (self.client, self.cluster):
            if part is not None:  # closing a broken connection: nothing to keep
                with contextlib.suppress(Exception):
                    part.close()
        self.client = self.cluster = None

    def slots(self) -> int:
        """Threads over all workers: tasks that run at once."""
        assert self.client is not None
        return max(sum(self.client.nthreads().values()), 1)

    def describe(self) -> str:
        """Who evaluated the last grid, for the run line: the local processes started, or
        the cluster's workers that evaluated at least one chunk."""
        if self.scheduler is None:
            n = self.workers
            return f"{n} Dask worker process{'es' if n != 1 else ''} on this machine"
        n = len(self.used)
        return f"{n} Dask worker{'s' if n != 1 else ''} of the cluster at {self.scheduler}"

    def warnings(self) -> list[str]:
        """What slowed the grids down that the user can change (one line each)."""
        if not self.trimmed:
            return []
        n = len(self.trimmed)
        return [f"{self.option}: {n} Dask worker{'s run' if n != 1 else ' runs'} with "
                "MALLOC_TRIM_THRESHOLD_ set (Dask's default for `dask worker`), which makes "
                "the model ~1.6x slower; start them with it unset (docs: guide/studies.md, "
                "Large grids on many processes or machines)"]

    def grid_frame(self, study: Study, total: int) -> pd.DataFrame:
        """The grid of `study` (`total` designs) evaluated by the cluster's workers: first one
        chunk per worker, then the rest in tasks of ~TASK_SECONDS by the first one's time."""
        from distributed import as_completed

        assert self.client is not None
        client = self.client
        starts = list(range(0, total, CHUNK))
        slots = self.slots()
        # the alternatives stay behind: each runs as a grid of its own
        [remote] = client.scatter([replace(study, alternatives={})], broadcast=True,
                                  hash=False)
        first, rest = starts[:slots], starts[slots:]
        self.alive = set(client.nthreads())  # every worker (scheduler_info may list 5)
        self.tasks = len(first)
        tasks = as_completed([self._submit(remote, [lo], total) for lo in first])
        parts: dict[int, list[pd.DataFrame]] = {}
        self.used = set()
        grouped = False
        for future in tasks:
            lo, frames, seconds, worker, trimmed = self._result(future)
            future.release()
            parts[lo] = frames
            self.used.add(worker)
            self.home.update({lo + i * CHUNK: worker for i in range(len(frames))})
            if trimmed:
                self.trimmed.add(worker)
            if not grouped:
                grouped = True
                group = chunks_per_task(seconds / len(frames), len(rest), slots)
                for run in self._runs(rest, group):
                    tasks.add(self._submit(remote, run, total))
                    self.tasks += 1
        remote.release()
        return pd.concat([f for lo in sorted(parts) for f in parts[lo]], ignore_index=True)

    def _runs(self, starts: list[int], group: int) -> list[list[int]]:
        """`starts` cut into runs of at most `group` consecutive chunks, a run never spanning
        two homes (so each goes whole to the worker that holds its designs)."""
        runs: list[list[int]] = []
        for lo in starts:
            if runs and len(runs[-1]) < group and \
                    self.home.get(lo) == self.home.get(runs[-1][0]):
                runs[-1].append(lo)
            else:
                runs.append([lo])
        return runs

    def _submit(self, remote, starts: list[int], total: int):
        """A task for chunks `starts`, preferably on their home worker (others may take it
        when that one is gone or busy: Dask's loose restrictions)."""
        assert self.client is not None
        home = self.home.get(starts[0])
        where = {"workers": [home], "allow_other_workers": True} if home in self.alive else {}
        return self.client.submit(evaluate_chunks, remote, starts, total, pure=False, **where)

    def _result(self, future) -> tuple[int, list[pd.DataFrame], float, str, bool]:
        from distributed import KilledWorker

        try:
            return future.result()
        except KilledWorker as e:
            raise DseError(f"{self.option}: a chunk of the grid killed Dask workers "
                           f"{_dask_allowed_failures()} times in turn (out of memory?): "
                           f"{_reason(e)}") from None
        except ImportError as e:  # a worker without dse (or without this version's modules)
            raise DseError(f"{self.option}: a Dask worker could not load dse's code "
                           f"({_reason(e)}); install the same dse on every worker "
                           "machine") from None


def chunks_per_task(chunk_seconds: float, chunks: int, slots: int) -> int:
    """Chunks per task for `chunks` chunks left on `slots` workers, one chunk having taken
    `chunk_seconds`: about TASK_SECONDS of work, at most MAX_GROUP chunks, and at least two
    tasks per worker while there are chunks enough (so a slow or lost worker is rebalanced)."""
    want = math.ceil(TASK_SECONDS / max(chunk_seconds, 1e-6))
    return max(min(want, MAX_GROUP, math.ceil(chunks / (2 * max(slots, 1)))), 1)


def evaluate_chunks(study: Study, starts: list[int], total: int
                    ) -> tuple[int, list[pd.DataFrame], float, str, bool]:
    """A task on a worker: the grid's chunks starting at `starts` (each CHUNK designs, the
    last cut at `total`), their seconds of evaluation, the worker's address and whether it
    runs with MALLOC_TRIM_THRESHOLD_ set (the model 1.6x slower: see LOCAL_UNSET)."""
    from dse.search.grid_points import grid_chunk

    began = time.perf_counter()
    axes, baseline = _prepared(study)
    frames = [grid_chunk(study, axes, baseline, lo, min(lo + CHUNK, total)) for lo in starts]
    try:
        from distributed import get_worker

        worker = get_worker().address
    except (ImportError, ValueError):  # not on a Dask worker (called directly)
        worker = "this process"
    return (starts[0], frames, time.perf_counter() - began, worker,
            "MALLOC_TRIM_THRESHOLD_" in os.environ)


def _prepared(study: Study) -> tuple[list, dict]:
    """The study's grid axes and baseline, computed once per study object in this process."""
    from dse.search.grid_points import grid_axes
    from dse.search.objective import baseline_of

    for held, axes, baseline in _PREPARED:
        if held is study:
            return axes, baseline
    axes, baseline = grid_axes(study), baseline_of(study)
    _PREPARED[:] = [(study, axes, baseline)]
    return axes, baseline


def _reachable(address: str) -> None:
    """One line, at once, for an address no TCP connection reaches: an unknown host, or a
    port where nothing listens (Dask itself retries those until its timeout)."""
    import socket

    m = _ADDRESS.fullmatch(address)
    assert m is not None
    host, port = m.group(2).strip("[]"), int(m.group(3))
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT):
            pass
    except socket.gaierror as e:
        raise DseError(f"--scheduler {address}: unknown host '{host}' ({_reason(e)})") from None
    except ConnectionRefusedError:
        raise DseError(f"--scheduler {address}: connection refused (nothing listens on port "
                       f"{port} of {host}); start the scheduler there with `dask scheduler "
                       f"--port {port}`") from None
    except OSError:
        return  # unreachable or slow: Dask's own connection says so within the timeout


def _identity(address: str, timeout: float) -> dict:
    """What the Dask server at `address` says it is (its `identity`), within `timeout` s
    (TimeoutError, or OSError when nothing listens)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from distributed.comm import connect

    async def ask() -> dict:
        comm = await connect(address, timeout=timeout)
        try:
            await comm.write({"op": "identity"})
            return await comm.read()
        finally:
            comm.abort()

    async def within() -> dict:
        return await asyncio.wait_for(ask(), timeout)

    with ThreadPoolExecutor(1) as pool:  # a loop of its own, whatever runs in this thread
        answer = pool.submit(asyncio.run, within()).result()
    return answer if isinstance(answer, dict) else {}


def check_address(address: str) -> None:
    """A Dask scheduler's address: tcp://host:port (or tls://); one line otherwise."""
    m = _ADDRESS.fullmatch(address)
    if m is None or not 1 <= int(m.group(3)) <= 65535:
        raise DseError(f"--scheduler {address}: expected a Dask scheduler's address, "
                       "tcp://host:port (e.g. tcp://10.0.0.5:8786)")


def _reason(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _dask_allowed_failures() -> int:
    import dask

    return int(dask.config.get("distributed.scheduler.allowed-failures", 3)) + 1
