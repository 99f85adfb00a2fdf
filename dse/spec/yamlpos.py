"""YAML reading that remembers where every key and value came from, within bounds.

`read_yaml` returns plain dict/list subclasses (`LDict`, `LList`) that carry the file, line
and column of each key and value, so a validation error deep inside a merged spec (after
`base:` inheritance) can still name the file and line the user wrote. Duplicate keys and
syntax errors are reported as `Issue`s rather than silently resolved.

Reading is bounded (docs: guide/commands.md, Input limits): only regular files of at most
`MAX_SPEC_BYTES` are read, and they must be UTF-8 text without control characters (a leading
UTF-8 byte-order mark is accepted, as YAML allows). An aliased node is built once and shared
(`*a` twice gives the same object twice), the values repeated through aliases are counted
and capped at `MAX_ALIAS_NODES` (an "alias bomb" of 617 bytes would otherwise expand to 10^8
values), nesting is capped at `MAX_DEPTH` levels, recursive aliases are refused, and only
YAML's standard tags are accepted. Shared values must not be mutated: code that derives a
spec from another builds new mappings (see `dse.spec.load`).

The bounded reading of a file's bytes and text is dse.spec.textfile's (measurement CSVs
use it too).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, MappingStartEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from dse.errors import Issue, SpecError
from dse.spec.positions import LDict, LList, Pos
from dse.spec.textfile import read_bytes, yaml_text

# Largest spec file read (hardware, workload, study, process node, lengths): the shipped
# ones are at most 12 KiB. Parsing costs ~20 us a value on a slow 2-core machine, so a spec
# at the limit (~90,000 values) still reads in about 2 s; one of 1 MiB took 7 s.
MAX_SPEC_BYTES = 256 << 10
# Deepest nesting of mappings and lists, counted after aliases are expanded (the shipped
# specs nest at most 6 levels); keeps every recursive walk far from Python's stack limit.
MAX_DEPTH = 64
# Most values a file may repeat through aliases (`*name`), summed over every alias use, each
# counting the expanded size of what it refers to; what a file writes out is bounded by
# MAX_SPEC_BYTES, what it repeats by this.
MAX_ALIAS_NODES = 100_000

_STD = "tag:yaml.org,2002:"
_MERGE_TAG = _STD + "merge"
_VALUE_TAG = _STD + "value"  # the implicit tag of a plain `=`: read as the text "="
# The standard tags a dse file may carry, by kind of node; any other (`!!python/...`,
# `!!binary`, `!!set`, local `!tags`) is refused.
_ALLOWED_TAGS: dict[type[Node], frozenset[str]] = {
    ScalarNode: frozenset(_STD + t for t in ("str", "int", "float", "bool", "null",
                                             "timestamp", "merge", "value")),
    SequenceNode: frozenset({_STD + "seq"}),
    MappingNode: frozenset({_STD + "map"}),
}
_PATH_SHOWN = 8  # key path elements an error shows at most


# --- bounded reading of bytes and text -------------------------------------------------


# --- composing nodes within bounds ------------------------------------------------------

class _Refused(Exception):
    """A limit or rule of this module broken while composing; carries its Issue."""

    def __init__(self, issue: Issue):
        super().__init__(str(issue))
        self.issue = issue


def _show_tag(tag: str) -> str:
    return "!!" + tag.removeprefix(_STD) if tag.startswith(_STD) else tag


class _BoundedComposer(Composer):
    """PyYAML's composer with the limits of this module: nesting depth, values repeated
    through aliases, recursive aliases and tags, each refused at its place with the key
    path that leads there."""

    def __init__(self, file: str) -> None:
        Composer.__init__(self)
        self._file = file
        self._keys: list[str | int] = []
        self._depth = 0
        self._open: set[str] = set()  # anchors of collections still being composed
        self._size: dict[int, int] = {}  # id(node) -> values in it, aliases expanded
        self._height: dict[int, int] = {}  # id(node) -> nesting levels in it
        self._aliased = 0

    if TYPE_CHECKING:  # the parser's, mixed in beside this class by each loader below
        def check_event(self, *choices: type[Any]) -> bool: ...

        def peek_event(self) -> Any: ...

    def _refuse(self, mark: Any, message: str) -> _Refused:
        keys = self._keys
        if len(keys) > _PATH_SHOWN:  # a path dozens of levels deep: its ends are enough
            keys = [*keys[:_PATH_SHOWN - 2], "…", *keys[-2:]]
        path = ""
        for key in keys:
            if key == "…":
                path += key
            else:
                path += f"[{key}]" if isinstance(key, int) else (f".{key}" if path else key)
        return _Refused(Issue(self._file, mark.line + 1, mark.column + 1, path, message))

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if isinstance(parent, SequenceNode):
            self._keys.append(index)
        elif isinstance(parent, MappingNode) and isinstance(index, ScalarNode):
            self._keys.append(str(index.value))
        else:
            return self._compose(parent, index)  # the root or a key
        try:
            return self._compose(parent, index)
        finally:
            self._keys.pop()

    def _compose(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(AliasEvent):
            return self._alias()
        event = self.peek_event()
        collection = isinstance(event, SequenceStartEvent | MappingStartEvent)
        if collection:
            if self._depth >= MAX_DEPTH:
                raise self._refuse(event.start_mark, f"nested deeper than {MAX_DEPTH} levels "
                                                     "(the limit for a dse file)")
            self._depth += 1
            if event.anchor is not None:
                self._open.add(event.anchor)
        try:
            node = cast(Node, super().compose_node(parent, index))  # None only at stream end
        finally:
            if collection:
                self._depth -= 1
                self._open.discard(event.anchor)
        if node.tag not in _ALLOWED_TAGS[type(node)]:
            kind = {ScalarNode: "value", SequenceNode: "list"}.get(type(node), "mapping")
            raise self._refuse(node.start_mark, f"tag {_show_tag(node.tag)} is not allowed on "
                                                f"a {kind}; dse files take plain YAML "
                                                "(standard tags only: !!str, !!int, !!float, "
                                                "!!bool, !!null, !!map, !!seq)")
        if isinstance(node, ScalarNode):
            self._size[id(node)], self._height[id(node)] = 1, 0
        else:
            children = ([n for pair in node.value for n in pair]
                        if isinstance(node, MappingNode) else node.value)
            self._size[id(node)] = 1 + sum(self._size[id(c)] for c in children)
            self._height[id(node)] = 1 + max((self._height[id(c)] for c in children),
                                             default=0)
        return node

    def _alias(self) -> Node:
        event = self.peek_event()
        anchor = event.anchor
        if anchor in self._open:
            raise self._refuse(event.start_mark, f"alias *{anchor} refers to a value that "
                                                 "contains it (a recursive structure)")
        # the anchored node, or undefined alias (PyYAML passes no index for an alias)
        node = cast(Node, super().compose_node(None, cast(int, None)))
        self._aliased += self._size[id(node)]
        if self._aliased > MAX_ALIAS_NODES:
            raise self._refuse(event.start_mark, f"aliases repeat more than "
                                                 f"{MAX_ALIAS_NODES:,} values (*{anchor} "
                                                 "here); a dse file may repeat at most that "
                                                 "many through aliases")
        if self._depth + self._height[id(node)] > MAX_DEPTH:
            raise self._refuse(event.start_mark, f"nested deeper than {MAX_DEPTH} levels "
                                                 f"with *{anchor} expanded (the limit for a "
                                                 "dse file)")
        return node


class _PyLoader(Reader, Scanner, Parser, _BoundedComposer, SafeConstructor, Resolver):
    """The bounded composer on PyYAML's pure-Python parser."""

    def __init__(self, text: str, file: str) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        _BoundedComposer.__init__(self, file)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


_Loader: type = _PyLoader
if yaml.__with_libyaml__:  # pragma: no branch - libyaml ships with PyYAML's wheels
    from yaml._yaml import CParser  # as yaml.cyaml imports it

    class _CLoader(_BoundedComposer, CParser, SafeConstructor, Resolver):
        """The bounded composer on libyaml's parser (several times faster)."""

        def __init__(self, text: str, file: str) -> None:
            CParser.__init__(self, text)
            _BoundedComposer.__init__(self, file)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    _Loader = _CLoader


# --- building positioned data -----------------------------------------------------------

def _pos(file: str, node: Node) -> Pos:
    return Pos(file, node.start_mark.line + 1, node.start_mark.column + 1)


class _Builder:
    """Positioned data from composed nodes; a node reached twice (through an alias) is
    built once and the same object returned each time."""

    def __init__(self, file: str, loader: Any) -> None:
        self.file = file
        self.loader = loader
        self.issues: list[Issue] = []
        self._built: dict[int, Any] = {}

    def build(self, node: Node) -> Any:
        key = id(node)
        if key not in self._built:
            self._built[key] = self._make(node)
        return self._built[key]

    def _make(self, node: Node) -> Any:
        file = self.file
        if isinstance(node, MappingNode):
            out = LDict(_pos(file, node))
            explicit = [(k, v) for k, v in node.value if k.tag != _MERGE_TAG]
            explicit_keys = {k.value for k, _ in explicit if isinstance(k, ScalarNode)}
            self.loader.flatten_mapping(node)  # expands YAML merge keys (<<: *anchor) in front
            n_merged = len(node.value) - len(explicit)
            for i, (knode, vnode) in enumerate(node.value):
                if i < n_merged and isinstance(knode, ScalarNode) \
                        and knode.value in explicit_keys:
                    continue  # an explicit key overrides the merged one: not a duplicate
                kp = _pos(file, knode)
                key = self._scalar(knode) if isinstance(knode, ScalarNode) else None
                if not isinstance(key, str):
                    shown = key if key is not None else "a non-scalar"
                    self.issues.append(Issue(file, kp.line, kp.col, "",
                                             f"expected a text key, found {shown!r}"))
                    continue
                if key in out:
                    first = out.key_pos[key]
                    self.issues.append(Issue(file, kp.line, kp.col, key,
                                             f"duplicate key (first given at line "
                                             f"{first.line})"))
                    continue
                out.put(key, self.build(vnode), kp, _pos(file, vnode))
            return out
        if isinstance(node, SequenceNode):
            seq = LList(_pos(file, node))
            for item in node.value:
                seq.add(self.build(item), _pos(file, item))
            return seq
        return self._scalar(node)

    def _scalar(self, node: Node) -> Any:
        if node.tag in (_MERGE_TAG, _VALUE_TAG):  # `<<` or `=` where no merge is meant
            return node.value
        return self.loader.construct_object(node)


def parse_yaml(text: str, file: str, loader: type | None = None) -> Any:
    """The positioned data of one YAML document (None when empty); SpecError with every
    problem. `loader` picks the parser (tests run both)."""
    ldr = (loader or _Loader)(text, file)
    builder = _Builder(file, ldr)
    try:
        node = ldr.get_single_node()
        data = builder.build(node) if node is not None else None
    except _Refused as e:
        raise SpecError([e.issue]) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else None
        col = mark.column + 1 if mark else None
        what = " ".join(str(x) for x in (e.context, e.problem) if x)
        raise SpecError([Issue(file, line, col, "", f"YAML syntax error: {what}")]) from None
    except yaml.YAMLError as e:
        raise SpecError([Issue(file, None, None, "", "YAML error: "
                               + " ".join(str(e).split()))]) from None
    except RecursionError:  # a safety net: MAX_DEPTH keeps every walk far from the limit
        raise SpecError([Issue(file, None, None, "", "nested too deeply")]) from None
    finally:
        ldr.dispose()
    if builder.issues:
        raise SpecError(builder.issues)
    return data


def read_yaml(path: Path, display: str | None = None) -> LDict:
    """Read one YAML file whose top level is a mapping. Raises SpecError with every problem
    (ReadError when the file cannot be read as YAML text at all)."""
    file = display or str(path)
    text = yaml_text(read_bytes(path, file, MAX_SPEC_BYTES, "a YAML spec"), file)
    data = parse_yaml(text, file)
    if not isinstance(data, LDict):
        found = "an empty file" if data is None else f"a {type(data).__name__}"
        raise SpecError([Issue(file, 1, 1, "", f"expected a mapping of keys at the top level, "
                                                f"found {found}")])
    return data
