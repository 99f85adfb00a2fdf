"""The documentation site's reference pages, generated from the code when the site is built
(tools/docs_hooks.py): every field of the spec schemas, every command and option of the
command line, the Python API's docstrings, the metric registry and `dse validate`'s tables.

Nothing here is kept by hand: a field added to a schema, an option added to a command or a
metric added to the registry appears in the reference at the next build. Each function
returns Markdown text; `pages()` maps the site paths to it.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic import BaseModel
from pydantic.fields import FieldInfo

NOTE = ("*Generated from the code when the site is built; a field added to the schema "
        "appears here without editing the documentation.*")


# --- Markdown helpers -------------------------------------------------------------------

def text(value: str | None) -> str:
    """Prose from a docstring or help text, on one line, safe inside a Markdown table cell:
    runs of whitespace collapsed; outside `code` spans, HTML and emphasis characters and
    pipes escaped."""
    if not value:
        return ""
    parts = re.split(r"(`[^`]*`)", " ".join(value.split()))
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(part.replace("|", "\\|"))
        else:
            out.append(part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                       .replace("*", "\\*").replace("|", "\\|").replace("_", "\\_")
                       .replace("[", "\\["))
    return "".join(out)


def code(value: str) -> str:
    """A `code` span (pipes escaped for tables)."""
    return f"`{value}`".replace("|", "\\|")


def table(header: list[str], rows: Iterable[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def first_paragraph(doc: str | None) -> str:
    return (inspect.cleandoc(doc or "").split("\n\n")[0]).strip()


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
    rec_only = set(Scenario.model_fields)
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

A recommender's scenarios take the scenario fields above and these:

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


# --- the command line -------------------------------------------------------------------

def _commands(cmd: Any, path: list[str]) -> list[tuple[list[str], Any]]:
    """(words after `dse`, command) for every command and group, depth first."""
    out = []
    for name, sub in getattr(cmd, "commands", {}).items():
        if getattr(sub, "hidden", False):
            continue
        out.append(([*path, name], sub))
        out += _commands(sub, [*path, name])
    return out


def _usage(words: list[str], cmd: Any) -> str:
    pieces = ["dse", *words, "[OPTIONS]"]
    for p in cmd.params:
        if p.param_type_name != "argument" or p.hidden:
            continue
        name = (p.metavar or p.name).upper()
        name += "..." if p.nargs == -1 or p.multiple else ""
        pieces.append(name if p.required else f"[{name}]")
    if getattr(cmd, "commands", None):
        pieces.append("COMMAND [ARGS]...")
    return " ".join(pieces)


_TYPE_WORDS = {"str": "text", "int": "whole number", "float": "number", "Path": "path",
               "path": "path", "bool": "flag"}


def _param_type(names: str, p: Any) -> str:
    """The value an option or argument takes, in words, from its help record's names
    (`-f, --format <table|json>`, `--set <list[str]>`, `--offload LEVEL`)."""
    m = re.search(r"<([^<>]*)>$", names)
    if m is None:
        if p.param_type_name == "option" and not getattr(p, "is_flag", False) and p.metavar:
            return p.metavar
        return "flag" if getattr(p, "is_flag", False) else ""
    kind = m.group(1)
    listed = re.fullmatch(r"list\[(\w+)\]", kind)
    if listed:
        return f"{_TYPE_WORDS.get(listed.group(1), listed.group(1))}, repeatable" \
            if p.param_type_name == "option" else \
            f"one or more {_TYPE_WORDS.get(listed.group(1), listed.group(1))}s"
    if "|" in kind:
        return "one of: " + ", ".join(kind.split("|"))
    return _TYPE_WORDS.get(kind, kind)


def _param_row(p: Any, ctx: Any) -> list[str]:
    record = p.get_help_record(ctx)
    names, helptext = record if record else (p.name, "")
    kind = _param_type(names, p)
    shown = names
    if p.param_type_name == "argument":
        shown = (p.metavar or p.name).upper()
    helptext = re.sub(r"\s*\[(default|required): [^\]]*\]|\s*\[required\]", "", helptext)
    if p.param_type_name == "option":
        shown = " / ".join(", ".join(o) for o in (p.opts, p.secondary_opts) if o)
    default = "required" if p.required else ""
    if not p.required:
        d = p.default
        if isinstance(d, enum.Enum):
            d = d.value
        if getattr(p, "is_flag", False) and p.secondary_opts:
            default = "" if d is None else code((p.opts if d else p.secondary_opts)[0])
        elif getattr(p, "is_flag", False):
            default = "off" if not d else "on"
        elif d is not None and d != []:
            default = code(str(d))
    return [code(shown), text(kind), default, text(helptext)]


def cli_page() -> str:
    import typer.main

    from dse.cli import app

    root = typer.main.get_command(app)
    ctx = root.make_context("dse", [], resilient_parsing=True)
    parts = [f"""# Commands

{NOTE.replace("a field added to the schema", "an option added to a command")}

Every command of `dse` with its options, from the command-line definitions. `dse COMMAND
--help` prints the same. Bad input exits with status 2 and a one-line message naming the
file, the key and what was expected; an internal error exits with status 1.

""", table(["command", "what it does"],
           ([code("dse " + " ".join(words)), text(first_paragraph(cmd.help or ""))]
            for words, cmd in _commands(root, [])))]
    root_opts = [p for p in root.params if not p.hidden]
    if root_opts:
        parts.append("\nOptions of `dse` itself:\n\n" + table(
            ["option", "type", "default", "description"],
            (_param_row(p, ctx) for p in root_opts)))
    contexts = {(): ctx}
    for words, cmd in _commands(root, []):
        parent = contexts[tuple(words[:-1])]
        sub_ctx = cmd.make_context(words[-1], [], parent=parent, resilient_parsing=True)
        contexts[tuple(words)] = sub_ctx
        params = [p for p in cmd.params if not p.hidden]
        section = [f"\n## dse {' '.join(words)}\n",
                   f"```text\n{_usage(words, cmd)}\n```\n",
                   "\n\n".join(text(p) for p in inspect.cleandoc(cmd.help or "")
                               .split("\n\n")) + "\n"]
        if params:
            section.append(table(["argument or option", "type", "default", "description"],
                                 (_param_row(p, sub_ctx) for p in params)))
        if getattr(cmd, "commands", None):
            section.append("Commands: " + ", ".join(
                f"[`{w[-1]}`](#dse-{'-'.join(w)})" for w, c in _commands(cmd, words)) + ".\n")
        parts.append("\n".join(section))
    return "\n".join(parts)


# --- the Python API ---------------------------------------------------------------------

def _signature(obj: Any, name: str) -> str:
    try:
        sig = str(inspect.signature(obj))
    except (TypeError, ValueError):
        sig = "(...)"
    # a sentinel default prints its address, which changes from run to run
    sig = re.sub(r"<object object at 0x[0-9a-f]+>", "<unset>", sig)
    return f"{name}{sig}"


def _doc_block(obj: Any) -> str:
    return "\n\n".join(text(p) for p in (inspect.getdoc(obj) or "").split("\n\n"))


def _field_docs(cls: type) -> dict[str, str]:
    """The documentation of a class's annotated attributes in its source: the docstring
    under the attribute, else its trailing comment (and the comment lines continuing it)."""
    import ast
    import textwrap

    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    body = ast.parse(source).body[0].body  # type: ignore[attr-defined]
    out: dict[str, str] = {}
    for node, after in zip(body, [*body[1:], None], strict=True):
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        if isinstance(after, ast.Expr) and isinstance(getattr(after, "value", None),
                                                      ast.Constant) \
                and isinstance(after.value.value, str):
            out[node.target.id] = inspect.cleandoc(after.value.value)
            continue
        line = lines[node.end_lineno - 1]  # type: ignore[operator]
        if "  # " in line:
            words = [line.split("  # ", 1)[1]]
            for nxt in lines[node.end_lineno:]:  # type: ignore[misc]
                if not nxt.strip().startswith("# "):
                    break
                words.append(nxt.strip()[2:])
            out[node.target.id] = " ".join(words)
    return out


def _members(cls: type) -> list[tuple[str, Any]]:
    """Public attributes, properties and methods a class defines (its own and its fields)."""
    out: list[tuple[str, Any]] = []
    if dataclasses.is_dataclass(cls):
        out += [(f.name, f) for f in dataclasses.fields(cls) if not f.name.startswith("_")]
    for name, value in vars(cls).items():
        if name.startswith("_") or any(n == name for n, _ in out):
            continue
        if isinstance(value, property | staticmethod | classmethod | types.FunctionType):
            out.append((name, value))
    return out


def api_page() -> str:
    import dse

    parts = [f"""# Python API

{NOTE.replace("a field added to the schema", "a function added to `dse.__all__`")}

`import dse` gives the names below (`dse.__all__`), with their signatures and docstrings.
Quantities are SI floats (seconds, bytes, B/s, FLOP/s, W, J) except areas, in mm^2.
"""]
    for name in dse.__all__:
        obj = getattr(dse, name)
        if isinstance(obj, str):
            parts.append(f"## `dse.{name}`\n\nThe installed version, a string.\n")
            continue
        kind = "class" if inspect.isclass(obj) else "function"
        parts.append(f"## `dse.{name}`\n\n*{kind}*\n\n```python\n"
                     f"{_signature(obj, name)}\n```\n\n{_doc_block(obj)}\n")
        if inspect.isclass(obj):
            rows = []
            field_docs = _field_docs(obj)
            for member, value in _members(obj):
                if isinstance(value, dataclasses.Field):
                    hint = typing.get_type_hints(obj).get(member, value.type)
                    what = f"attribute: {getattr(hint, '__name__', str(hint))}"
                    doc = field_docs.get(member, "")
                elif isinstance(value, property):
                    what, doc = "property", inspect.getdoc(value.fget) or ""
                else:
                    fn = value.__func__ if isinstance(value, staticmethod | classmethod) \
                        else value
                    what = "method " + code(_signature(fn, member).replace("(self, ", "(")
                                            .replace("(self)", "()"))
                    doc = inspect.getdoc(fn) or ""
                rows.append([code(member), what if what.startswith("method") else text(what),
                             text(doc)])
            if rows:
                parts.append(table(["member", "kind", "description"], rows))
    return "\n".join(parts)


# --- metrics ----------------------------------------------------------------------------

def metric_phases() -> dict[str, list[str]]:
    """Which registered phases report each metric: the phase's rate formulas run on a
    stand-in step, its energies per unit of output, the training metrics for a training
    phase, and the power, area and cost metrics every phase reports with a process node."""
    import numpy as np

    from dse import phases
    from dse.model.metrics import METRICS
    from dse.model.power_stage import POWER_METRICS
    from dse.model.training import TRAINING_METRICS
    from dse.phases.base import Rates

    class _Iteration:
        prefill_iterations = np.ones(1)
        lifetime = np.ones(1)
        overhead = 0.0

    out: dict[str, list[str]] = {k: [] for k in METRICS}
    for name in phases.names():
        ph = phases.get(name)
        r = Rates(time=np.ones(1), sequences=2.0, batch=2.0, chips=1, flops=1.0, seq_in=4.0,
                  seq_out=3.0, tokens=True, iteration=_Iteration())
        reported = {k for k, v in ph.rates(r).items()
                    if np.isfinite(np.asarray(v, dtype=float)).all()}
        reported |= {f"energy_per_{u}_j" for u in ph.energy_per}
        reported |= {k for k in POWER_METRICS if not k.startswith("energy_per_")
                     or k == "energy_per_step_j"}
        if ph.trains:
            reported |= set(TRAINING_METRICS)
        for key in reported & set(out):
            out[key].append(name)
    return out


def metrics_page() -> str:
    from dse import units
    from dse.model import metrics

    doc = metrics.__doc__ or ""
    words = doc[doc.index("Words used throughout:"):].split("No I/O.")[0]
    words = words.replace("Words used throughout:", "").strip()
    items = "\n".join(f"- {text(item)}" for item in re.split(r"\n- ", "\n" + words) if item)
    items = re.sub(r"\\\*\\\*([^*\\]+)\\\*\\\*", r"**\1**", items)
    seen = metric_phases()
    rows = ([code(m.key), text(m.label),
             text(m.unit.unit if isinstance(m.unit, units.Kind) else m.unit), text(m.scope),
             text(m.meaning), ", ".join(seen[m.key]) or "-"]
            for m in metrics.METRICS.values())
    return f"""# Metrics

{NOTE.replace("a field added to the schema", "a metric added to the registry")}

What each number `dse eval`, `dse study` and the Python API report means. The key is the
JSON key and CSV column (its unit as a suffix); the label is how tables name it. *Phases*:
the phases that report it (power, energy, area and cost need the chip's process node).

Words used throughout:

{items}

{table(["key", "label", "unit", "scope", "meaning", "phases"], rows)}"""


# --- validation -------------------------------------------------------------------------

def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _stats_table(first: str, stats: dict[str, Any]) -> str:
    rows = [[("**overall**" if k == "overall" else code(k)), str(v["n"]), _pct(v["median"]),
             _pct(v["p90"]), _pct(v["max"])]
            for k, v in stats.items() if isinstance(v, dict)]
    return table([first, "rows", "median abs. error", "p90", "max"], rows)


def validation_result() -> tuple[dict[str, Any], bytes]:
    """`dse validate`'s document on the shipped measurements, and its plot as PNG bytes."""
    import tempfile
    from pathlib import Path

    from dse import validate as val
    from dse.report import validation_view as view

    rows, invalid = view.screen(val.run(None))
    doc = view.validation_document(rows, val.summary(rows), invalid, val.hardware_facts(rows),
                                   by={k: val.summary_by(rows, k) for k in ("file", "stack")})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "validation.png"
        view.draw(view.plot_data(rows), path)
        png = path.read_bytes()
    return doc, png


def validation_tables(doc: dict[str, Any]) -> str:
    from dse import units
    from dse.model.metrics import METRICS

    def value(x: float | None, metric: str) -> str:
        if x is None:
            return "-"
        m = METRICS.get(metric)
        if m is not None and isinstance(m.unit, units.Kind):
            return units.format_quantity(x, m.unit, 4)
        return f"{x:.4g}" + (f" {m.unit}" if m is not None else "")

    summary = dict(doc["summary"])
    skipped, invalid = summary.pop("skipped", 0), summary.pop("invalid", 0)
    rows = [[r["id"], code(r["hardware"]), code(r["workload"]), r["phase"], code(r["metric"]),
             value(r["measured"], r["metric"]), value(r["predicted"], r["metric"]),
             (f"{100 * r['rel_error']:+.1f}%" if r.get("rel_error") is not None else "-"),
             r.get("bound") or "-", code(r["file"]),
             text(r.get("skipped") or "")]
            for r in doc["rows"]]
    hw = [[code(h["hardware"]), h["node"] or "-", f"{h['area_mm2']:.0f}" if h["area_mm2"]
           else "-", f"{h['published_mm2']:.0f}" if h.get("published_mm2") else "-",
           f"{h['cost_per_chip_usd']:,.0f}" if h.get("cost_per_chip_usd") else "-",
           text(h.get("note") or "")] for h in doc["hardware"]]
    return f"""### By phase

{_stats_table("phase", summary)}
Rows that ran: {summary.get("overall", {}).get("n", 0)}; skipped (pending rows the model
cannot express yet, each with its reason below): {skipped}; invalid: {invalid}.

### By measurement file

{_stats_table("file", doc["by_file"])}
### By software stack

{_stats_table("stack", doc["by_stack"])}
### The chips, as the area and cost models give them

{table(["hardware", "node", "modelled area, mm2", "published die, mm2",
        "cost to make, USD", "note"], hw)}
### Every row

Error: predicted / measured - 1. Bound: the resource that bounds the step's longest
operator (its count x time).

{table(["row", "hardware", "workload", "phase", "metric", "measured", "predicted", "error",
        "bound", "file", "skipped because"], rows)}"""


# --- all pages --------------------------------------------------------------------------

PAGES: dict[str, Callable[[], str]] = {
    "reference/hardware.md": hardware_page,
    "reference/workload.md": workload_page,
    "reference/study.md": study_page,
    "reference/lengths.md": lengths_page,
    "reference/technology.md": technology_page,
    "reference/stack.md": stack_page,
    "reference/cli.md": cli_page,
    "reference/api.md": api_page,
    "reference/metrics.md": metrics_page,
}


def pages() -> dict[str, str]:
    """Site path -> Markdown of every generated reference page."""
    return {path: make() for path, make in PAGES.items()}
