"""Mappings and sequences that remember where each key, value and item was written (file,
line, column), so that a problem found after inheritance and validation can still name the
place the user wrote. Read by dse.spec.yamlpos; plain Python, no YAML library, so every
layer may use them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Pos:
    """A place in a file, 1-based line and column."""

    file: str
    line: int
    col: int


class LDict(dict[str, Any]):
    """A mapping read from YAML, with the position of each key and of each value."""

    def __init__(self, pos: Pos):
        super().__init__()
        self.pos = pos
        self.key_pos: dict[str, Pos] = {}
        self.val_pos: dict[str, Pos] = {}

    def put(self, key: str, value: Any, key_pos: Pos, val_pos: Pos) -> None:
        self[key] = value
        self.key_pos[key] = key_pos
        self.val_pos[key] = val_pos

    def copy_entry(self, other: LDict, key: str, value: Any = None) -> None:
        """Set `key` from `other`, keeping `other`'s positions (value may be replaced)."""
        self.put(key, other[key] if value is None else value, other.key_pos[key],
                 other.val_pos[key])


class LList(list[Any]):
    """A sequence read from YAML, with the position of each item."""

    def __init__(self, pos: Pos):
        super().__init__()
        self.pos = pos
        self.item_pos: list[Pos] = []

    def add(self, value: Any, pos: Pos) -> None:
        self.append(value)
        self.item_pos.append(pos)


def without(data: LDict, keys: tuple[str, ...]) -> LDict:
    """A new mapping: `data` less `keys`, with the same positions (`data` is unchanged)."""
    out = LDict(data.pos)
    for key in data:
        if key not in keys:
            out.copy_entry(data, key)
    return out
