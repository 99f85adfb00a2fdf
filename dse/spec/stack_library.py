"""Where a scenario's `stack:` name or path is looked up: the loader dse.spec.load installs
(the only YAML reader), kept here so that the scenario schema can check a name without
importing the stack schema (which imports the scenario's Engine). No I/O of its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_find: Callable[[str], Any] | None = None
_default: Callable[[str | None], Any] | None = None


def use_library(find: Callable[[str], Any], default: Callable[[str | None], Any]) -> None:
    """Install the functions that load a stack profile by name or path, and the default
    stack of a hardware vendor (dse.spec.stack_files)."""
    global _find, _default
    _find, _default = find, default


def find(ref: str) -> Any:
    """The stack profile `ref` names (a dse.spec.stack.Stack); ValueError for an unknown
    name (reported at the scenario's `stack:`), SpecError for a broken file."""
    if _find is None:  # pragma: no cover - dse.spec.load is imported with dse
        raise ValueError(f"no library of stack profiles to find '{ref}' in (import "
                         "dse.spec.load)")
    return _find(ref)


def default_for(vendor: str | None) -> Any:
    """The stack a chip of hardware vendor `vendor` runs when a scenario names none."""
    if _default is None:  # pragma: no cover - dse.spec.load is imported with dse
        raise ValueError("no library of stack profiles (import dse.spec.load)")
    return _default(vendor)


def of(name: str | None, vendor: str | None) -> Any:
    """The stack a scenario's `stack:` names, else the vendor's default."""
    return find(name) if name is not None else default_for(vendor)
