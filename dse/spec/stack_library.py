"""Where a scenario's `stack:` name or path is looked up: the loader dse.spec.load installs
(the only YAML reader), kept here so that the scenario schema can check a name without
importing the stack schema (which imports the scenario's Engine). No I/O of its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_find: Callable[[str], Any] | None = None


def use_library(find: Callable[[str], Any]) -> None:
    """Install the function that loads a stack profile by name or path (dse.spec.load)."""
    global _find
    _find = find


def find(ref: str) -> Any:
    """The stack profile `ref` names (a dse.spec.stack.Stack); ValueError for an unknown
    name (reported at the scenario's `stack:`), SpecError for a broken file."""
    if _find is None:  # pragma: no cover - dse.spec.load is imported with dse
        raise ValueError(f"no library of stack profiles to find '{ref}' in (import "
                         "dse.spec.load)")
    return _find(ref)
