"""The schema pages of the documentation site's reference (tools/docs_reference.py): every
field of the spec schemas as a key path with its type and unit, default, allowed range and
description, walked from the pydantic models, and the shipped files of each kind."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from docs_markdown import NOTE, code, first_paragraph, table, text
from pydantic import BaseModel
from pydantic.fields import FieldInfo

# --- schema fields ----------------------------------------------------------------------

@dataclasses.dataclass
class FieldRow:
    """One key of a spec file."""

    path: str
    type: str
    default: str
    rules: str
    description: str


def _unwrap(ann: Any, meta: list[Any]) -> tuple[Any, list[Any], bool]:
    """(bare annotation, constraints, optional) through Optional and Annotated layers."""
    optional = False
    while True:
        origin = typing.get_origin(ann)
        if origin is typing.Annotated:
            base, *extra = typing.get_args(ann)
            for item in extra:
                meta = [*meta, *(getattr(item, "metadata", None) or [item])]
            ann = base
        elif origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(ann):
            args = [a for a in typing.get_args(ann) if a is not type(None)]
            optional = True
            ann = args[0] if len(args) == 1 else typing.Union[tuple(args)]  # noqa: UP007
        else:
            return ann, meta, optional


def _quantity(meta: list[Any]) -> tuple[Any, bool] | None:
    """(unit kind, positive) of a unit-checked field (dse.spec.types)."""
    for m in meta:
        q = getattr(getattr(m, "func", None), "quantity", None)
        if q is not None:
            return q  # type: ignore[no-any-return]
    return None


def _kind_text(kind: Any) -> str:
    return f"{kind.name}: {kind.unit}, e.g. '{kind.example}'"


def _type_name(ann: Any, meta: list[Any]) -> str:
    """How a value of `ann` is written, in words."""
    ann, meta, _ = _unwrap(ann, meta)
    q = _quantity(meta)
    if q is not None:
        return _kind_text(q[0])
    origin = typing.get_origin(ann)
    if origin is typing.Literal:
        return "one of: " + ", ".join(str(a) for a in typing.get_args(ann))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a, []) for a in typing.get_args(ann))
    if origin is list:
        (item,) = typing.get_args(ann) or (Any,)
        return f"list of ({_type_name(item, [])})"
    if origin is dict:
        key, value = typing.get_args(ann)
        return f"mapping of {_type_name(key, [])} to ({_type_name(value, [])})"
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return "section (keys below)"
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return "one of: " + ", ".join(str(e.value) for e in ann)
    return {bool: "true or false", int: "whole number", float: "number", str: "text",
            type(None): "null"}.get(ann, getattr(ann, "__name__", str(ann)))


def _rules(meta: list[Any]) -> str:
    """The allowed range of a field, as Markdown."""
    out = []
    q = _quantity(meta)
    if q is not None:
        out.append("&gt; 0" if q[1] else "&gt;= 0")
    for m in meta:
        for cls, sign in ((Gt, "&gt;"), (Ge, "&gt;="), (Lt, "&lt;"), (Le, "&lt;=")):
            if isinstance(m, cls):
                out.append(f"{sign} {getattr(m, cls.__name__.lower()):g}")
        if isinstance(m, MinLen) and m.min_length:
            out.append("not empty" if m.min_length == 1 else f"at least {m.min_length} items")
        if isinstance(m, MaxLen):
            out.append(f"at most {m.max_length} items")
        pattern = getattr(m, "pattern", None)
        if isinstance(pattern, str):
            out.append(f"matches {code(pattern)}")
    return ", ".join(dict.fromkeys(out))


def _default(info: FieldInfo, meta: list[Any]) -> str:
    if info.is_required():
        return "required"
    if info.default_factory is not None:
        try:
            value = info.default_factory()  # type: ignore[call-arg]
        except TypeError:
            return "computed"
    else:
        value = info.default
    if value is None:
        return "none"
    if isinstance(value, BaseModel):
        return "see below"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return code(str(value).lower())
    q = _quantity(_unwrap(info.annotation, meta)[1])
    if q is not None and isinstance(value, int | float):
        from dse import units

        return code(units.format_quantity(float(value), q[0]) if value else f"0 {q[0].unit}")
    if isinstance(value, dict | list) and len(str(value)) > 60:
        return "see description"
    return code(str(value))


def _slot(key: Any, precisions: tuple[str, ...]) -> str:
    key, _, _ = _unwrap(key, [])
    if typing.get_origin(key) is typing.Literal:
        return "<precision>" if set(typing.get_args(key)) == set(precisions) else "<key>"
    return "<name>"


def _models(ann: Any) -> list[type[BaseModel]]:
    """The schema models a field's value may be (a section, or one of a union)."""
    ann, _, _ = _unwrap(ann, [])
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return [ann]
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(ann) for m in _models(a)]
    return []


def schema_rows(model: type[BaseModel], prefix: str = "", skip: Iterable[str] = (),
                _seen: tuple[type, ...] = ()) -> list[FieldRow]:
    """Every key of `model` and the sections it nests, as dotted paths (`memory[].capacity`,
    `scenarios.<name>.batch`, `compute.matrix.peak_per_unit.<precision>`)."""
    from dse.spec.hardware import PRECISIONS

    rows: list[FieldRow] = []
    for name, info in model.model_fields.items():
        if name in skip:
            continue
        path = f"{prefix}{name}"
        ann, meta, _ = _unwrap(info.annotation, list(info.metadata))
        description = info.description or ""
        nested: list[tuple[str, type[BaseModel]]] = []
        origin = typing.get_origin(ann)
        if origin is list and _models(typing.get_args(ann)[0]):
            nested = [(f"{path}[].", m) for m in _models(typing.get_args(ann)[0])]
        elif origin is dict and _models(typing.get_args(ann)[1]):
            key, value = typing.get_args(ann)
            nested = [(f"{path}.{_slot(key, PRECISIONS)}.", m) for m in _models(value)]
        else:
            nested = [(f"{path}.", m) for m in _models(ann)]
        if not description and nested:
            description = first_paragraph(nested[0][1].__doc__)
        rows.append(FieldRow(path, _type_name(info.annotation, list(info.metadata)),
                             _default(info, list(info.metadata)), _rules(meta),
                             description))
        for sub_prefix, sub in nested:
            if sub in _seen:
                continue
            rows += schema_rows(sub, sub_prefix, (), (*_seen, model))
    return rows


def schema_table(model: type[BaseModel], prefix: str = "", skip: Iterable[str] = ()) -> str:
    rows = schema_rows(model, prefix, skip)
    return table(["key", "type and unit", "default", "allowed", "description"],
                 ([code(r.path), text(r.type), r.default, r.rules, text(r.description)]
                  for r in rows))


def shipped(kind: str, describe: Callable[[str], str]) -> str:
    """The shipped files of `kind` with one line each."""
    from dse.spec.library import LIBRARY_FOLDERS, library_names

    names = library_names(kind)
    rows = [[code(n), text(describe(n))] for n in names]
    return (f"Shipped in `{LIBRARY_FOLDERS[kind]}/` ({len(names)} files; a spec names "
            f"them by file name without `.yaml`):\n\n" + table(["name", "what it is"], rows))


def _yaml(kind: str, name: str) -> dict[str, Any]:
    """A shipped file's top-level keys, read with the project's loader (no validation)."""
    from dse.spec.library import library_dir
    from dse.spec.yamlpos import read_yaml

    data = read_yaml(library_dir(kind) / f"{name}.yaml")
    return data if isinstance(data, dict) else {}


def _describe_file(kind: str, *keys: str) -> Callable[[str], str]:
    def describe(name: str) -> str:
        data = _yaml(kind, name)
        return next((" ".join(str(data[k]).split()) for k in keys if data.get(k)), "")
    return describe


# --- the schema pages -------------------------------------------------------------------

def memory_generations() -> str:
    """The memory catalogue (dse/data/memory.yaml) a level's `generation` names, per unit."""
    from dse import units
    from dse.spec.catalogue import catalogue

    def rate(g: Any) -> str:
        return f"{g.rate * 8 / 1e9:.4g} Gb/s"

    rows = [[code(name), g.interface, g.unit, str(g.width), rate(g),
             units.format_quantity(g.bandwidth, units.BANDWIDTH),
             units.format_quantity(g.capacity, units.BYTES),
             f"{g.energy / 8 * 1e12:.3g} pJ/bit", f"{g.phy.area:g}", text(g.source)]
            for name, g in catalogue().generations.items()]
    return table(["generation", "interface", "unit", "width (bits)", "rate per pin",
                  "bandwidth", "capacity", "energy", "PHY area x node's", "source"], rows)


def hardware_page() -> str:
    from dse.spec.hardware import HardwareSpec
    from dse.spec.terms import terms

    vocab = table(["path", "rule", "description"],
                  ([code(p), text(t.short()), text(t.doc)] for p, t in terms().items()))
    return f"""# Hardware fields

{NOTE}

A hardware file (`hwspecs/*.yaml`, or any path) describes one chip. Every quantity is a
string with a unit (`"80 GiB"`, `"3.35 TB/s"`); the *type and unit* column names the kind of
quantity and the unit it is held in internally. A file with `base:` inherits every key of
another and overrides only the keys it gives. `memory` is a list, innermost level first;
`memory[].` below is a key of each level.

{schema_table(HardwareSpec)}
## Paths a design can vary

The numeric fields above, as the dotted paths `dse eval --set`, `design_batch(spec,
overrides)` and a study's `parameters:` take (`<level>`: a memory level's name,
`<precision>`: a precision). `dse show CHIP --paths` lists them with one chip's values.

{vocab}
## Memory generations

A DRAM level may name a generation of the memory catalogue (`dse/data/memory.yaml`) instead
of its figures (`generation: hbm3e-12h`, with `stacks`, `channels` or the CXL links): the
generation gives the interface and, per unit, the capacity and bandwidth the level does not
state, and its PHY, energy per bit and price follow. Per unit, as shipped in accelerators:

{memory_generations()}
## Shipped chips

{shipped("hardware", _describe_file("hardware", "description", "vendor"))}"""


def workload_page() -> str:
    from dse.spec.recommender import RecScenario
    from dse.spec.scenario import Scenario, WorkloadFile
    from dse.spec.workload import WORKLOAD_SCHEMAS

    common = set(WorkloadFile.model_fields)
    kinds = "\n".join(
        f"## `kind: {kind}`\n\n{text(first_paragraph(model.__doc__))}\n\n"
        f"{schema_table(model, skip=common | {'scenarios'})}\n"
        f"`scenarios`: {text(model.model_fields['scenarios'].description) or 'named scenarios'}"
        f" ({'recommender scenario' if kind == 'recommender' else 'scenario'} fields below).\n"
        for kind, model in WORKLOAD_SCHEMAS.items())
    # the scenario fields a recommender scenario takes as they are (those it redeclares, such
    # as seq_in, are listed with its own description)
    rec_only = set(Scenario.model_fields) - set(inspect.get_annotations(RecScenario))
    return f"""# Workload fields

{NOTE}

A workload file (`workloads/*.yaml`, or any path) describes one model (its `kind:` says
which schema applies) and its named scenarios: phase, batch, sequence lengths, precision,
and the optional sections of the phases that take them (`engine` for serve, `training`,
`lengths` for inference). `gemm:MxNxK` names a single matrix multiply without a file.

## Keys of every workload file

{schema_table(WorkloadFile)}
{kinds}
## Scenario fields

A scenario of a Transformer or GEMM workload:

{schema_table(Scenario, "scenarios.<name>.")}
## Recommender scenario fields

A recommender's scenarios take the scenario fields above and these (a field in both tables
means, for a recommender, what this one says):

{schema_table(RecScenario, "scenarios.<name>.", skip=rec_only)}
## Shipped workloads

{shipped("workload", _describe_file("workload", "description", "source"))}"""


def study_page() -> str:
    from dse.spec.study import StudySpec

    return f"""# Study fields

{NOTE}

A study file (`studies/*.yaml`, or any path) searches designs derived from one base chip:
the `parameters` to vary (design-vocabulary paths, see
[Paths a design can vary](hardware.md#paths-a-design-can-vary)), the workload scenarios they
run, the objectives, the constraints and the search. `dse study FILE` runs it.

{schema_table(StudySpec)}
## Shipped studies

{shipped("study", _describe_file("study", "description", "source"))}"""


def lengths_page() -> str:
    from dse.spec.lengths import LengthDistribution, ShippedFile

    return f"""# Length files

{NOTE}

An inference scenario's `lengths:` gives the distribution of the sequence lengths the
harness runs (padding skipped): the name of a shipped distribution, or one written inline.

## Inline distribution (`lengths:` in a scenario)

{text(first_paragraph(LengthDistribution.__doc__))}

{schema_table(LengthDistribution)}
## Distribution files (`workloads/lengths/*.yaml`)

{text(first_paragraph(ShippedFile.__doc__))}

{schema_table(ShippedFile)}
## Shipped distributions

{shipped("lengths", _describe_file("lengths", "source"))}"""


def technology_page() -> str:
    from dse.spec.technology import TechSpec

    return f"""# Process nodes

{NOTE}

A process-node file (`hwspecs/tech/*.yaml`) holds the area, energy and cost constants of a
node, each with its source; a hardware file's `technology.node` names it, and the area,
power and cost models read it.

{schema_table(TechSpec)}
## Shipped nodes

{shipped("technology", _describe_file("technology", "name"))}"""


def stack_page() -> str:
    from dse.spec.stack import Stack

    return f"""# Software stacks

{NOTE}

A stack file (`stacks/*.yaml`) describes the software a chip runs: the serving engine, the
request front-end, the GEMM library, attention kernels, collectives and what overlaps. A
scenario's `stack:` (or `dse eval --stack`) names one; left out, the chip vendor's default.

{schema_table(Stack)}
## Shipped stacks

{shipped("stack", _describe_file("stack", "description"))}"""


