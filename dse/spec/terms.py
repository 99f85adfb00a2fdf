"""The terms of the design vocabulary (dse.spec.vocabulary): every numeric field of a schema
(the hardware schema by default) as a dotted path pattern with its unit, whether it is a
whole number, and the range it can physically take, derived from the schema itself. No I/O."""

from __future__ import annotations

import functools
import types
import typing
from dataclasses import dataclass

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel

from dse import units
from dse.spec import catalogue
from dse.spec.hardware import PRECISIONS, HardwareSpec

PRECISION_SLOT = "<precision>"


LEVEL_SLOT = "<level>"


# Cause -> fields of the same memory level that scale with it unless also given.
COUPLED = {"stacks": ("capacity", "bandwidth"), "channels": ("capacity", "bandwidth"),
           "slices": ("capacity", "bandwidth")}


@dataclass(frozen=True)
class Term:
    """One variable quantity of a design."""

    pattern: str  # dotted path with <precision> / <level> slots
    kind: units.Kind | None  # unit kind of string values; None: a plain number
    integer: bool
    gt: float | None
    ge: float | None
    le: float | None
    lt: float | None
    doc: str
    categorical: bool = False  # a name of the memory catalogue (a generation); its value
    # in a batch or a study is the name's position in the catalogue

    def short(self) -> str:
        """The rule in a few words: 'whole > 0', 'capacity > 0', 'number in (0, 1]'."""
        if self.categorical:
            return "catalogue name"
        what = "whole" if self.integer else (self.kind.name if self.kind else "number")
        if self.gt is not None and self.le is not None:
            return f"{what} in ({self.gt:g}, {self.le:g}]"
        for sign, bound in (("> ", self.gt), (">= ", self.ge), ("< ", self.lt),
                            ("<= ", self.le)):
            if bound is not None:
                return f"{what} {sign}{bound:g}"
        return what

    def describe_range(self) -> str:
        if self.categorical:
            return ("a memory generation of the catalogue (one of: "
                    f"{', '.join(catalogue.catalogue().names)})")
        parts = []
        if self.gt is not None:
            parts.append(f"> {self.gt:g}")
        if self.ge is not None:
            parts.append(f">= {self.ge:g}")
        if self.lt is not None:
            parts.append(f"< {self.lt:g}")
        if self.le is not None:
            parts.append(f"<= {self.le:g}")
        what = "a whole number" if self.integer else (
            f"{units.article(self.kind.name)} {self.kind.name} like '{self.kind.example}'"
            if self.kind else "a number")
        return what + (f" {' and '.join(parts)}" if parts else "")


def _unwrap_optional(ann: typing.Any) -> typing.Any:
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return ann


def _leaf(ann: typing.Any, metadata: list[typing.Any]) -> tuple[typing.Any, list[typing.Any]]:
    """The bare type of an annotation and every constraint on it (Annotated layers)."""
    ann = _unwrap_optional(ann)
    meta = list(metadata)
    while typing.get_origin(ann) is typing.Annotated:
        base, *extra = typing.get_args(ann)
        for item in extra:
            meta.extend(getattr(item, "metadata", []) or [item])
        ann = _unwrap_optional(base)
    return ann, meta


def _term(pattern: str, ann: typing.Any, meta: list[typing.Any], doc: str) -> Term | None:
    bounds: dict[str, float | None] = {"gt": None, "ge": None, "le": None, "lt": None}
    kind = None
    for m in meta:
        for cls, key in ((Gt, "gt"), (Ge, "ge"), (Le, "le"), (Lt, "lt")):
            if isinstance(m, cls):
                bounds[key] = float(getattr(m, key))
        q = getattr(getattr(m, "func", None), "quantity", None)
        if q is not None:
            kind, positive = q
            bounds["gt" if positive else "ge"] = 0.0
    if ann is bool or (ann not in (int, float) and kind is None):
        return None
    return Term(pattern, kind, ann is int, bounds["gt"], bounds["ge"], bounds["le"],
                bounds["lt"], doc)


def _walk(model: type[BaseModel], prefix: str, out: dict[str, Term]) -> None:
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        doc = (info.description or "").split("\n")[0]
        ann, meta = _leaf(info.annotation, info.metadata)
        origin = typing.get_origin(ann)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            _walk(ann, f"{path}.", out)
        elif origin is list:
            (item,) = typing.get_args(ann)
            item, _ = _leaf(item, [])
            if isinstance(item, type) and issubclass(item, BaseModel):
                _walk(item, f"{path}.{LEVEL_SLOT}.", out)
        elif origin is dict:
            key, value = typing.get_args(ann)
            slot = PRECISION_SLOT if set(typing.get_args(key)) == set(PRECISIONS) \
                else LEVEL_SLOT
            value, vmeta = _leaf(value, [])
            if isinstance(value, type) and issubclass(value, BaseModel):
                _walk(value, f"{path}.{slot}.", out)
            elif (t := _term(f"{path}.{slot}", value, vmeta, doc)) is not None:
                out[t.pattern] = t
        elif (t := _term(path, ann, meta, doc)) is not None:
            out[t.pattern] = t


@functools.cache
def terms(schema: type[BaseModel] = HardwareSpec) -> dict[str, Term]:
    """Every numeric field of a schema (the hardware schema by default), by path pattern."""
    out: dict[str, Term] = {}
    _walk(schema, "", out)
    if isinstance(schema, type) and issubclass(schema, HardwareSpec):
        out[GENERATION] = Term(GENERATION, None, True, None, 0.0, None, None,
                               "DRAM generation of the memory catalogue (hbm3, hbm3e-12h ...)",
                               categorical=True)
    return out


GENERATION = "memory.<level>.generation"
