"""The documentation site's reference pages, generated from the code when the site is built
(tools/docs_hooks.py): every field of the spec schemas, every command and option of the
command line, the Python API's docstrings, the metric registry and `dse validate`'s tables.

Nothing here is kept by hand: a field added to a schema, an option added to a command or a
metric added to the registry appears in the reference at the next build. Each function
returns Markdown text; `pages()` maps the site paths to it. The schema pages are built
in docs_schema, the validation tables in docs_validation, shared helpers in docs_markdown.
"""


from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Any

from docs_markdown import NOTE, code, first_paragraph, table, text
from docs_schema import (
    hardware_page,
    lengths_page,
    stack_page,
    study_page,
    technology_page,
    workload_page,
)

__all__ = ["NOTE", "PAGES", "code", "pages", "table", "text"]


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

def _signature(obj: Any, name: str, bound: bool = False, one_line: bool = False) -> str:
    """`name(params) -> return` as code, one parameter a line when long (unless
    `one_line`); annotations unquoted, a sentinel default's address (which changes each
    run) dropped, and with `bound` the first parameter (self, cls) left out."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return f"{name}(...)"
    params = []
    values = list(sig.parameters.values())[1 if bound else 0:]
    for p in values:
        shown = str(p)
        if isinstance(p.annotation, str):
            shown = shown.replace(repr(p.annotation), p.annotation, 1)
        params.append(re.sub(r"<object object at 0x[0-9a-f]+>", "<unset>", shown))
    starred = [i for i, p in enumerate(values) if p.kind is inspect.Parameter.KEYWORD_ONLY]
    if starred and not any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in values):
        params.insert(starred[0], "*")
    ret = sig.return_annotation
    tail = "" if ret is inspect.Signature.empty else \
        f" -> {ret if isinstance(ret, str) else getattr(ret, '__name__', ret)}"
    flat = f"{name}({', '.join(params)}){tail}"
    if one_line or len(flat) <= 88:
        return flat
    return f"{name}(\n" + "".join(f"    {p},\n" for p in params) + f"){tail}"


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
                    bound = not isinstance(value, staticmethod)
                    what = "method " + code(_signature(fn, member, bound, one_line=True))
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
