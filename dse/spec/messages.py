"""Turn pydantic validation errors into one-line `Issue`s: file, line, key path, expectation.

Pydantic reports a location tuple and an error type; here the location is walked through the
positioned YAML tree (`LDict`/`LList`) to find the line the user wrote, and each error type
gets a sentence that says what was expected and what was found, with a "did you mean"
suggestion for misspelt keys and choices. No error type is left in pydantic's own words
("Input should be ...", "Field required"): `describe` gives each one a sentence, and the
same sentences serve values that come from flags and the Python API (`problems`).

A value inherited through `base:` that is wrong only in the derived design is reported in
the file the user gave, at the nearest key that file writes (or its `base:`), with the
inherited value's own place as context: the user's file is what they can change.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from dse.errors import Issue, SpecError, suggest
from dse.spec.positions import LDict, LList, Pos

Loc = tuple[str | int, ...]


def _is_internal(part: str | int) -> bool:
    """Pydantic inserts validator names ('function-after[...]') and '[key]' into locations."""
    return isinstance(part, str) and (part == "[key]" or "[" in part or "(" in part)


def locate(root: LDict, loc: Loc, *, at_key: bool = False) -> tuple[Pos, str]:
    """Position and dotted display path (`memory[1].bandwidth`) of a location in `root`."""
    node: Any = root
    pos = root.pos
    path = ""
    for i, part in enumerate(loc):
        last = i == len(loc) - 1 or all(_is_internal(p) for p in loc[i + 1:])
        if _is_internal(part):
            continue
        if isinstance(node, LDict) and isinstance(part, str) and part in node:
            pos = node.key_pos[part] if (last and at_key) else node.val_pos[part]
            node = node[part]
        elif isinstance(node, LList) and isinstance(part, int) and 0 <= part < len(node):
            pos = node.item_pos[part]
            node = node[part]
        else:
            node = None
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return pos, path


def _unwrap(t: Any) -> Any:
    while True:
        origin = get_origin(t)
        if origin is typing.Annotated:
            t = get_args(t)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in get_args(t) if a is not type(None)]
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            t = models[0] if models else args[0]
        else:
            return t


def model_at(cls: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The schema class that validates the value at `loc` (None if not a model)."""
    t: Any = cls
    for part in loc:
        if _is_internal(part):
            continue
        t = _unwrap(t)
        if isinstance(t, type) and issubclass(t, BaseModel):
            if not isinstance(part, str) or part not in t.model_fields:
                return None
            t = t.model_fields[part].annotation
        elif get_origin(t) is list:
            t = get_args(t)[0]
        elif get_origin(t) is dict:
            t = get_args(t)[1]
        else:
            return None
    t = _unwrap(t)
    return t if isinstance(t, type) and issubclass(t, BaseModel) else None


def found(value: Any) -> str:
    """How a found value is shown in a message."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _first_sentence(text: str | None) -> str:
    if not text:
        return ""
    return re.split(r"(?<=[.;])\s", text.strip().replace("\n", " "), maxsplit=1)[0].rstrip(".;")


_SIMPLE = {
    "int_parsing_size": "expected a whole number of at most 2^53",
    "finite_number": "expected a finite number",
    "string_sub_type": "expected text",
    "string_unicode": "expected text",
    "string_not_ascii": "expected ASCII text",
    "mapping_type": "expected a mapping of keys",
    "dataclass_type": "expected a mapping of keys",
    "tuple_type": "expected a list",
    "set_type": "expected a list",
    "frozen_set_type": "expected a list",
    "iterable_type": "expected a list",
    "none_required": "expected nothing (null)",
    "set_item_not_hashable": "expected a list of plain values",
    "bytes_type": "expected text",
    "callable_type": "expected a function (Python API)",
    "recursion_loop": "expected a value that does not contain itself",
    "invalid_key": "expected text keys",

    "int_parsing": "expected a whole number",
    "int_type": "expected a whole number",
    "int_from_float": "expected a whole number",
    "float_parsing": "expected a number",
    "float_type": "expected a number",
    "string_type": "expected text",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "dict_type": "expected a mapping of keys",
    "model_type": "expected a mapping of keys",
    "model_attributes_type": "expected a mapping of keys",
    "list_type": "expected a list",
}


def describe(err: Mapping[str, Any], schema: type[BaseModel] | None = None) -> str:
    """One pydantic error (an item of `ValidationError.errors()`) in the project's words:
    what was expected and what was found. `schema` (the model validated) lets unknown and
    missing keys list the keys allowed and describe the one missing."""
    kind, loc, ctx, value = err["type"], err["loc"], err.get("ctx") or {}, err.get("input")
    if kind == "extra_forbidden":
        model = model_at(schema, loc[:-1]) if schema is not None else None
        allowed = sorted(model.model_fields) if model else []
        hint = suggest(str(loc[-1]), allowed)
        return "unknown key" + (hint or (f"; expected one of: {', '.join(allowed)}"
                                         if allowed else ""))
    if kind in ("missing", "missing_argument", "missing_keyword_only_argument",
                "missing_positional_only_argument"):
        model = model_at(schema, loc[:-1]) if schema is not None else None
        field = model.model_fields.get(str(loc[-1])) if model else None
        what = _first_sentence(field.description) if field else ""
        return "required key missing" + (f" (expected {what[0].lower()}{what[1:]})"
                                         if what else "")
    if kind in ("literal_error", "enum"):
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        what = "key" if "[key]" in loc else "value"
        return (f"unknown {what} {found(value)}; expected one of: {', '.join(choices)}"
                + suggest(str(value), choices))
    if kind == "quantity":
        return str(ctx.get("msg", err["msg"]))
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        op = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<",
              "less_than_equal": "<="}[kind]
        bound = next(iter(ctx.values()), "?")
        return f"expected a number {op} {bound}, found {found(value)}"
    if kind == "multiple_of":
        return f"expected a multiple of {ctx.get('multiple_of', '?')}, found {found(value)}"
    if kind in ("too_short", "too_long"):
        most = kind == "too_long"
        bound = ctx.get("max_length" if most else "min_length", 1)
        actual = ctx.get("actual_length")
        return (f"expected at {'most' if most else 'least'} {bound} item(s), found "
                f"{actual or 'none'}")
    if kind == "string_too_short":
        least = ctx.get("min_length", 1)
        return ("expected non-empty text" if least <= 1 else
                f"expected text of at least {least} characters, found {found(value)}")
    if kind == "string_too_long":
        return (f"expected text of at most {ctx.get('max_length', '?')} characters, found "
                f"{len(value) if isinstance(value, str) else '?'} characters")
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern"))
        if pattern in _PATTERNS:
            return f"expected {_PATTERNS[pattern]}, found {found(value)}"
        return f"expected text matching {pattern}, found {found(value)}"
    if kind == "union_tag_invalid":
        tags = re.findall(r"'([^']*)'", str(ctx.get("expected_tags", "")))
        tag = str(ctx.get("tag", ""))
        return (f"unknown {ctx.get('discriminator', 'kind')} {tag!r}; expected one of: "
                f"{', '.join(tags)}{suggest(tag, tags)}")
    if kind == "union_tag_not_found":
        return f"required key missing ({ctx.get('discriminator', 'kind')})"
    if kind in ("is_instance_of", "dataclass_exact_type", "is_subclass_of"):
        return f"expected {ctx.get('class', ctx.get('class_name', 'another type'))}, " \
               f"found {found(value)}"
    if kind in ("unexpected_keyword_argument", "unexpected_positional_argument"):
        return "unknown key"
    if kind in _SIMPLE:
        return f"{_SIMPLE[kind]}, found {found(value)}"
    return _reworded(str(err["msg"]), value)


# The patterns of the schemas (dse.spec.types) and what they mean, for their messages.
_PATTERNS = {r"^[a-z0-9][a-z0-9._-]*$": "lowercase letters, digits, '.', '_' or '-' (a "
                                        "letter or digit first)",
             r"^[A-Za-z0-9][A-Za-z0-9._-]*$": "letters, digits, '.', '_' or '-' (a letter or "
                                              "digit first)"}


def _reworded(msg: str, value: Any) -> str:
    """A message of a validator of ours (its prefix dropped) or of a custom error type (as it
    is), or pydantic's wording of a rarer error type turned into the project's "expected
    ..., found ..."."""
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            return msg.removeprefix(prefix)
    if msg == "Field required":
        return "required key missing"
    if msg == "Extra inputs are not permitted":
        return "unknown key"
    # "Input should be a valid X", "Data should have at most N bytes", "URL should ..."
    should = re.match(r"^(?:\w+ )?(?:input )?should (not )?(?:be |have )?(.*)$", msg,
                      re.IGNORECASE)
    if should:
        rest = re.split(r", (?:unable to|got |error:)", should.group(2))[0].rstrip(", ")
        rest = rest.replace("a valid ", "a ").removeprefix("valid ")
        return f"expected {'no ' if should.group(1) else ''}{rest}, found {found(value)}"
    return msg  # our own wording (a custom error type: number_range ...)


def _message(schema: type[BaseModel], err: dict[str, Any]) -> str:
    return describe(err, schema)


def problems(error: ValidationError, schema: type[BaseModel] | None = None
             ) -> list[tuple[str, str]]:
    """(dotted key path, message) of each error of a validation that read no file (flags,
    the Python API); the path is '' for a check across fields."""
    out = []
    for err in error.errors(include_url=False):
        path = ""
        for part in err["loc"]:
            if _is_internal(part):
                continue
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else
                                                                str(part))
        out.append((path, describe(err, schema)))
    return out


def blamed(error: ValidationError, schema: type[BaseModel], given: typing.Sequence[str]
           ) -> list[tuple[str, str]]:
    """(field, message) of each error of a validation of replaced fields (`given`: the
    top-level fields a caller replaced, e.g. from flags): the given field the error's path
    starts with, or for a check across fields the given field its message names first;
    '' when the error is in none of them (then the message starts with its path)."""
    out = []
    for path, message in problems(error, schema):
        top = re.split(r"[.\[]", path, maxsplit=1)[0] if path else ""
        if top in given:
            out.append((top, message if path == top else f"{path}: {message}"))
            continue
        if not path:
            named = sorted((m.start(), f) for f in given
                           if (m := re.search(rf"\b{re.escape(f)}\b", message)))
            if named:
                out.append((named[0][1], message))
                continue
        out.append(("", f"{path}: {message}" if path else message))
    return out


def issues_from(error: ValidationError, schema: type[BaseModel], root: LDict) -> list[Issue]:
    """One Issue per pydantic error, positioned in the file the value came from (the user's
    file for inherited values, see `_issue`)."""
    out = []
    for err in error.errors(include_url=False):
        loc = tuple(err["loc"])
        at_key = err["type"] == "extra_forbidden" or "[key]" in loc
        out.append(_issue(root, loc, describe(err, schema), at_key=at_key))
    return out


def issue_at(root: LDict, loc: Loc, message: str) -> Issue:
    """An Issue for a check made outside pydantic (e.g. across memory levels)."""
    return _issue(root, loc, message)


def _issue(root: LDict, loc: Loc, message: str, *, at_key: bool = False) -> Issue:
    """An Issue at `loc` of `root`. A place in another file than `root`'s (a value inherited
    through `base:`) moves to the nearest key on the way that `root`'s file writes, else to
    its `base:`, and the inherited place is named in the message as context."""
    pos, path = locate(root, loc, at_key=at_key)
    if pos.file != root.pos.file:
        own = _own_place(root, loc)
        message = f"{message} (inherited from {_shown_place(pos)})"
        pos = own
    return Issue(pos.file, pos.line, pos.col, path, message)


def _own_place(root: LDict, loc: Loc) -> Pos:
    """The position, in `root`'s own file, of the deepest key on the way to `loc` that this
    file writes; its `base:` when it writes none (the value is all inherited)."""
    mine = root.pos.file
    best = root.val_pos.get("base", root.pos)
    node: Any = root
    for part in loc:
        if _is_internal(part):
            continue
        if isinstance(node, LDict) and isinstance(part, str) and part in node:
            pos = node.val_pos[part]
            node = node[part]
        elif isinstance(node, LList) and isinstance(part, int) and 0 <= part < len(node):
            pos = node.item_pos[part]
            node = node[part]
        else:
            break
        if pos.file == mine:
            best = pos
    if best.file != mine:  # `base:` itself inherited cannot be: it is never inherited
        best = root.pos
    return best


_PACKAGE = Path(__file__).resolve().parents[1]
# Where shipped specs live: inside the installed package (`_data/`), or at the root of a
# source checkout (dse.spec.load.library_dir).
_LIBRARY_ROOTS = (_PACKAGE / "_data", _PACKAGE.parent)
_LIBRARY_TOP = ("hwspecs", "workloads", "studies", "validation")


def _shown_place(pos: Pos) -> str:
    """`file:line:col` of an inherited value; a shipped spec as `shipped hwspecs/x.yaml`."""
    file = pos.file
    try:
        resolved = Path(file).resolve()
        for root in _LIBRARY_ROOTS:
            if resolved.is_relative_to(root):
                rel = resolved.relative_to(root)
                if rel.parts and rel.parts[0] in _LIBRARY_TOP:
                    file = f"shipped {rel.as_posix()}"
                    break
    except (OSError, ValueError):
        pass
    return f"{file}:{pos.line}:{pos.col}"


def validate(schema: type[BaseModel], data: LDict, context: dict[str, Any] | None = None
             ) -> BaseModel:
    """Validate positioned data against a schema; every error becomes one Issue."""
    try:
        return schema.model_validate(data, context=context or {})
    except ValidationError as e:
        raise SpecError(issues_from(e, schema, data)) from None
