"""YAML reading that remembers where every key and value came from.

`read_yaml` returns plain dict/list subclasses (`LDict`, `LList`) that carry the file, line
and column of each key and value, so a validation error deep inside a merged spec (after
`base:` inheritance) can still name the file and line the user wrote. Duplicate keys and
syntax errors are reported as `Issue`s rather than silently resolved.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from dse.errors import Issue, SpecError

_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True)
class Pos:
    """A place in a file, 1-based line and column."""

    file: str
    line: int
    col: int


class LDict(dict):
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


class LList(list):
    """A sequence read from YAML, with the position of each item."""

    def __init__(self, pos: Pos):
        super().__init__()
        self.pos = pos
        self.item_pos: list[Pos] = []

    def add(self, value: Any, pos: Pos) -> None:
        self.append(value)
        self.item_pos.append(pos)


def _pos(file: str, node: Node) -> Pos:
    return Pos(file, node.start_mark.line + 1, node.start_mark.column + 1)


def _build(node: Node, file: str, loader: yaml.SafeLoader, issues: list[Issue]) -> Any:
    if isinstance(node, MappingNode):
        out = LDict(_pos(file, node))
        explicit = [(k, v) for k, v in node.value if k.tag != _MERGE_TAG]
        explicit_keys = {k.value for k, _ in explicit if isinstance(k, ScalarNode)}
        loader.flatten_mapping(node)  # expands YAML merge keys (<<: *anchor) in front
        n_merged = len(node.value) - len(explicit)
        for i, (knode, vnode) in enumerate(node.value):
            if i < n_merged and isinstance(knode, ScalarNode) and knode.value in explicit_keys:
                continue  # an explicit key overrides the merged one: not a duplicate
            kp = _pos(file, knode)
            key = loader.construct_object(knode) if isinstance(knode, ScalarNode) else None
            if not isinstance(key, str):
                shown = key if key is not None else "a non-scalar"
                issues.append(Issue(file, kp.line, kp.col, "",
                                    f"expected a text key, found {shown!r}"))
                continue
            if key in out:
                first = out.key_pos[key]
                issues.append(Issue(file, kp.line, kp.col, key,
                                    f"duplicate key (first given at line {first.line})"))
                continue
            out.put(key, _build(vnode, file, loader, issues), kp, _pos(file, vnode))
        return out
    if isinstance(node, SequenceNode):
        seq = LList(_pos(file, node))
        for item in node.value:
            seq.add(_build(item, file, loader, issues), _pos(file, item))
        return seq
    return loader.construct_object(node)


def read_yaml(path: Path, display: str | None = None) -> LDict:
    """Read one YAML file whose top level is a mapping. Raises SpecError with every problem."""
    file = display or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError([Issue(file, None, None, "", "file not found")]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError([Issue(file, None, None, "", f"cannot read file: {e}")]) from None
    loader = yaml.SafeLoader(text)
    issues: list[Issue] = []
    try:
        node = loader.get_single_node()
        data = _build(node, file, loader, issues) if node is not None else None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else None
        col = mark.column + 1 if mark else None
        what = " ".join(str(x) for x in (e.context, e.problem) if x)
        raise SpecError([Issue(file, line, col, "", f"YAML syntax error: {what}")]) from None
    except yaml.YAMLError as e:
        raise SpecError([Issue(file, None, None, "", f"YAML error: {e}")]) from None
    finally:
        loader.dispose()
    if issues:
        raise SpecError(issues)
    if not isinstance(data, LDict):
        found = "an empty file" if data is None else f"a {type(data).__name__}"
        raise SpecError([Issue(file, 1, 1, "", f"expected a mapping of keys at the top level, "
                                                f"found {found}")])
    return data
