"""Ctrl-C (SIGINT) and SIGTERM held while something must finish whole (a batch stored, a set
of outputs moved in): the signals that arrive are caught and handed back when the block
ends. The command takes SIGTERM as Ctrl-C (dse/cli_study.py), so both are held. I/O only."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def held() -> Iterator[list[tuple[int, Any]]]:
    """Hold SIGINT and SIGTERM for the block; the list yielded receives (signal, the handler
    it would have reached) for each one that arrived. Outside the main thread (where Python
    runs no handler), nothing is held and the list stays empty."""
    caught: list[tuple[int, Any]] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    kinds = [s for s in (signal.SIGINT, getattr(signal, "SIGTERM", None)) if s is not None]
    previous: dict[int, Any] = {}
    for s in kinds:
        previous[s] = signal.signal(s, lambda signum, frame: caught.append(
            (signum, previous[signum])))
    try:
        yield caught
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
