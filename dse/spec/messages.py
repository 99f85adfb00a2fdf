"""Turn pydantic validation errors into one-line `Issue`s: file, line, key path, expectation.

Pydantic reports a location tuple and an error type; here the location is walked through the
positioned YAML tree (`LDict`/`LList`) to find the line the user wrote, and each error type
gets a sentence that says what was expected and what was found, with a "did you mean"
suggestion for misspelt keys and choices.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from dse.errors import Issue, suggest
from dse.spec.yamlpos import LDict, LList, Pos

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


def _message(schema: type[BaseModel], err: dict[str, Any]) -> str:
    kind, loc, ctx, value = err["type"], err["loc"], err.get("ctx") or {}, err.get("input")
    if kind == "extra_forbidden":
        model = model_at(schema, loc[:-1])
        allowed = sorted(model.model_fields) if model else []
        hint = suggest(str(loc[-1]), allowed)
        return "unknown key" + (hint or (f"; expected one of: {', '.join(allowed)}"
                                         if allowed else ""))
    if kind == "missing":
        model = model_at(schema, loc[:-1])
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
    if kind == "too_short":
        return f"expected at least {ctx.get('min_length', 1)} item(s), found none"
    if kind == "string_too_short":
        return "expected non-empty text"
    if kind == "string_pattern_mismatch":
        return (f"expected lowercase letters, digits, '.', '_' or '-' "
                f"(pattern {ctx.get('pattern')}), found {found(value)}")
    if kind in _SIMPLE:
        return f"{_SIMPLE[kind]}, found {found(value)}"
    msg = str(err["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    return msg


def issues_from(error: ValidationError, schema: type[BaseModel], root: LDict) -> list[Issue]:
    """One Issue per pydantic error, positioned in the file the value came from."""
    out = []
    for err in error.errors(include_url=False):
        loc = tuple(err["loc"])
        at_key = err["type"] == "extra_forbidden" or "[key]" in loc
        pos, path = locate(root, loc, at_key=at_key)
        out.append(Issue(pos.file, pos.line, pos.col, path, _message(schema, err)))
    return out


def issue_at(root: LDict, loc: Loc, message: str) -> Issue:
    """An Issue for a check made outside pydantic (e.g. across memory levels)."""
    pos, path = locate(root, loc)
    return Issue(pos.file, pos.line, pos.col, path, message)
