"""What a call works out from its inputs alone (a workload's lowered table and plan, the
training planner's setups), kept for later calls with the same inputs: a bounded,
thread-safe store, least recently used dropped first. Entries are keyed by the inputs'
whole content (specs as JSON), so a spec changed between calls is a new entry, and their
arrays are read-only (`frozen`), so no caller can change what a later call reads. No I/O."""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

import numpy as np
from pydantic import BaseModel

V = TypeVar("V")


class Kept(Generic[V]):
    """At most `most` entries (given per call, so a test can lower it), by key."""

    def __init__(self) -> None:
        self.entries: OrderedDict[Hashable, V] = OrderedDict()
        self.lock = threading.Lock()  # studies may evaluate from several threads

    def get(self, key: Hashable, make: Callable[[], V], most: int) -> V:
        """The entry of `key`, made by `make` on first use."""
        with self.lock:
            if key in self.entries:  # (an entry may be None)
                self.entries.move_to_end(key)
                return self.entries[key]
        value = make()
        with self.lock:
            self.entries[key] = value
            while len(self.entries) > most:
                self.entries.popitem(last=False)
        return value

    def clear(self) -> None:
        """Forget every entry."""
        with self.lock:
            self.entries.clear()


def key_of(wl: BaseModel, sc: BaseModel, ex: object, *more: Hashable) -> tuple[Hashable, ...]:
    """The key of what a call works out from a workload, scenario and execution (and `more`):
    their whole content, so a spec changed between calls is a new key."""
    return (type(wl).__name__, wl.model_dump_json(), sc.model_dump_json(), repr(ex), *more)


def frozen(x: Any) -> Any:
    """`x` (an array, or a dataclass or dict of them) with every array read-only, nested
    dataclasses' and dicts' too; returns `x`."""
    if isinstance(x, np.ndarray):
        x.flags.writeable = False
    elif isinstance(x, dict):
        for v in x.values():
            frozen(v)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            frozen(getattr(x, f.name))
    return x
