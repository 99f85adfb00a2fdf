"""Serve a study's Optuna storage in optuna-dashboard, the web UI Optuna users know.

A target is a `dse study` output folder (its `study.journal`), a `.journal` file, or a
database URL (postgresql://, sqlite:///, mysql://) shared by several workers. Every problem
with the target or the address is a DseError: one line, exit 2.

optuna-dashboard 0.21 reads constraints only from the system attribute `constraints` (a list;
Optuna 5's `set_constraint` stores one `constraints:<name>` per constraint) and picks its
best trials from every complete trial, feasible or not. The study is therefore served
through `FeasibleView`, which shows each trial as the study judged it, and the best trials
are the feasible front (`feasible_front`), the trials of the study's pareto.csv. Opening
and checking the target is dse.dashboard.storage's.
"""

from __future__ import annotations

import copy
import errno
import math
import re
import signal
import socketserver
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import numpy as np
from optuna.storages import BaseStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from dse.dashboard.storage import EXPECTED as EXPECTED  # re-exported: tests use it
from dse.dashboard.storage import _redact, storage_for
from dse.errors import DseError
from dse.search.objective import WORST_MINIMIZED
from dse.search.pareto import front_mask
from dse.search.trials import FEASIBLE

LEGACY_CONSTRAINTS = "constraints"  # the system attribute optuna-dashboard reads (a list)
# What a design whose objective does not exist (it does not run a workload) is told as, by
# direction (objective.told, grid.store_grid): shown to the dashboard as the infinitely bad
# value it stands for, not as a number a design reached.
PLACEHOLDER = {StudyDirection.MAXIMIZE: (0.0, -math.inf),
               StudyDirection.MINIMIZE: (WORST_MINIMIZED, math.inf)}

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def is_feasible(trial: FrozenTrial) -> bool:
    """The study's verdict: the `feasible` user attribute `dse study` stores, else (trials
    of other tools, journals of older versions) every constraint <= 0."""
    verdict = trial.user_attrs.get(FEASIBLE)
    if isinstance(verdict, bool):
        return verdict
    return all(v <= 0 for v in trial.constraints.values())


def as_dashboard_sees(trial: FrozenTrial, directions: Sequence[StudyDirection]
                      ) -> FrozenTrial:
    """`trial` with its constraints also in the list optuna-dashboard reads (in the order
    stored; one more positive entry where the study found a design infeasible that no
    constraint marks, an objective that does not exist when fit is off), and an infeasible
    design's placeholder objectives as -inf (maximized) or inf (minimized)."""
    if trial.state != TrialState.COMPLETE:
        return trial
    feasible = is_feasible(trial)
    stored = trial.system_attrs.get(LEGACY_CONSTRAINTS)
    listed = [float(v) for v in (stored if stored is not None
                                 else trial.constraints.values())]
    if not feasible and all(v <= 0 for v in listed):
        listed.append(1.0)
    values = trial.values
    if not feasible and values is not None and len(values) == len(directions):
        values = [PLACEHOLDER[d][1] if v == PLACEHOLDER[d][0] else v
                  for v, d in zip(values, directions, strict=True)]
    if stored is not None and listed == list(stored) and values == trial.values:
        return trial
    out = copy.copy(trial)
    out._system_attrs = {**trial.system_attrs, LEGACY_CONSTRAINTS: listed}
    out._values = values
    return out


def feasible_front(trials: Sequence[FrozenTrial], directions: Sequence[StudyDirection]
                   ) -> list[FrozenTrial]:
    """The complete feasible trials no other feasible trial dominates, by trial number;
    among trials of equal values the first (the study's own rule for pareto.csv)."""
    ok = sorted((t for t in trials if t.state == TrialState.COMPLETE and t.values is not None
                 and is_feasible(t)), key=lambda t: t.number)
    if not ok:
        return []
    names = [d.name.lower() for d in directions]
    mask = front_mask(np.array([t.values for t in ok], dtype=float), names)
    return [t for t, on in zip(ok, mask, strict=True) if on]


class FeasibleView(BaseStorage):
    """A read-through view of a storage for optuna-dashboard: trials as `as_dashboard_sees`
    shows them, a single objective's best trial the best feasible one, studies in id order.
    Everything else (writes from the page included) goes to the storage itself."""

    def __init__(self, storage: BaseStorage) -> None:
        self._storage = storage
        self._directions: dict[int, list[StudyDirection]] = {}

    def __getattr__(self, name: str) -> Any:  # storage-specific members (engine, ...)
        if name == "_storage":  # not set yet (a copy being made): no endless lookup
            raise AttributeError(name)
        return getattr(self._storage, name)

    def _dirs(self, study_id: int) -> list[StudyDirection]:
        if study_id not in self._directions:
            self._directions[study_id] = self._storage.get_study_directions(study_id)
        return self._directions[study_id]

    def get_all_studies(self) -> list[Any]:
        return sorted(self._storage.get_all_studies(), key=lambda s: s._study_id)

    def get_all_trials(self, study_id: int, deepcopy: bool = True,
                       states: Any = None) -> list[FrozenTrial]:
        dirs = self._dirs(study_id)
        return [as_dashboard_sees(t, dirs) for t in
                self._storage.get_all_trials(study_id, deepcopy=deepcopy, states=states)]

    def get_best_trial(self, study_id: int) -> FrozenTrial:
        """The best feasible trial; where none is feasible, the one closest to feasible
        (least total violation), as Optuna's samplers rank them."""
        dirs = self._dirs(study_id)
        trials = self.get_all_trials(study_id, deepcopy=False, states=(TrialState.COMPLETE,))
        ok = [t for t in trials if is_feasible(t)]
        if not ok:
            return min(trials, key=lambda t: sum(max(v, 0.0) for v in
                                                 t.system_attrs[LEGACY_CONSTRAINTS]))
        pick = max if dirs[0] == StudyDirection.MAXIMIZE else min
        return pick(ok, key=lambda t: t.values[0])


def _delegate(name: str) -> Callable[..., Any]:
    def method(self: FeasibleView, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._storage, name)(*args, **kwargs)

    method.__name__ = name
    return method


for _name in sorted({*BaseStorage.__abstractmethods__,
                     *(n for n in vars(BaseStorage) if not n.startswith("_"))}):
    if _name not in vars(FeasibleView) and callable(getattr(BaseStorage, _name)):
        setattr(FeasibleView, _name, _delegate(_name))
FeasibleView.__abstractmethods__ = frozenset()


def _feasible_best_trials() -> bool:
    """optuna-dashboard's best trials of a multi-objective study: the feasible front. The
    dashboard has no hook for it; its own function is replaced (False where this version
    of optuna-dashboard has none by that name)."""
    from optuna_dashboard import _app

    if not hasattr(_app, "get_pareto_front_trials"):
        return False
    _app.get_pareto_front_trials = feasible_front
    return True


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


TRIAL_TABLE = re.compile(r"^/dashboard/studies/(\d+)/trialTable/?$")


def _version(text: str) -> tuple[int, ...]:
    """(major, minor) of a version string."""
    return tuple(int(x) for x in re.findall(r"\d+", text)[:2])


def _redirect_trial_table(app: Callable) -> Callable:
    """optuna-dashboard 0.20 moved its trial table into the Smart Selection page but kept the
    old page's address, which now renders nothing: that address is sent on to the table."""

    def wrapped(environ: dict, start_response: Callable) -> Any:
        match = TRIAL_TABLE.match(environ.get("PATH_INFO", ""))
        if match is None:
            return app(environ, start_response)
        start_response("302 Found", [
            ("Location", f"/dashboard/studies/{match[1]}/smartSelection"),
            ("Content-Length", "0")])
        return [b""]

    return wrapped


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
    if not _feasible_best_trials():
        warn(f"warning: optuna-dashboard {optuna_dashboard.__version__} is not the version "
             "dse knows (0.21): its best trials may include infeasible designs")
    # optuna_dashboard.wsgi, not run_server: run_server prints its banner before it binds the
    # port and logs every request; here the port is bound first, so a port in use is one line.
    # the abstract methods are set by the loop after the class (each delegates to `storage`)
    app = optuna_dashboard.wsgi(FeasibleView(storage))  # type: ignore[abstract]
    if _version(optuna_dashboard.__version__) >= (0, 20):
        app = _redirect_trial_table(app)
    server = _listen(app, host, port)
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
