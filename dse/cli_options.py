"""Parsing of the command-line options that several commands share (dse.cli, cli_memory,
cli_plot): comma-separated whole numbers, the words a batch accepts, --set overrides, the
output formats. Below
the command modules, so that none of them imports dse.cli (the layers of pyproject.toml)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, get_args

import typer

from dse.errors import DseError
from dse.spec.scenario import DataType, PrecisionName

# Training's context- and expert-parallel degrees (dse eval; a study's cp and ep).
ContextParallel = Annotated[int, typer.Option(
    help="Training: context-parallel degree (ranks that share each sequence, ring "
         "attention).")]
ExpertParallel = Annotated[int, typer.Option(
    help="Training: expert-parallel degree (ranks that share each MoE layer's experts).")]

# The precision names and KV data types the options take, from the scenario's schema.
PRECISION_HELP = ", ".join(get_args(PrecisionName)) + " (fp4: NVFP4)."
DATA_TYPES = ", ".join(get_args(DataType))


def int_list(text: str | None, option: str, words: tuple[str, ...] = ()
             ) -> list[int | str | None]:
    """A comma-separated option (--batch 1,8,max) as its values; [None] when not given."""
    if text is None:
        return [None]
    try:
        values: list[int | str | None] = [v.strip() if v.strip() in words else int(v)
                                          for v in text.split(",") if v.strip()]
    except ValueError:
        also = f" or {' or '.join(words)}" if words else ""
        raise DseError(f"{option}: expected a whole number{also} (or several, "
                       f"comma-separated), found '{text}'") from None
    if not values:
        raise DseError(f"{option}: expected at least one value")
    for v in values:
        if isinstance(v, int):
            whole(v, option)
    return values


def whole(value: int, option: str) -> int:
    """`value` when it is a whole number a float holds exactly (docs: guide/commands.md)."""
    from dse.spec.types import MAX_WHOLE

    if abs(value) > MAX_WHOLE:
        shown = str(value) if value.bit_length() < 100 else f"a number of {len(str(value))} digits"
        raise DseError(f"{option}: expected a whole number of at most {MAX_WHOLE} (2^53), "
                       f"found {shown}")
    return value


def set_values(sets: list[str] | None) -> dict[str, list[str]]:
    """--set path=value[,value...] options: path -> its values (several make several
    designs)."""
    out: dict[str, list[str]] = {}
    for item in sets or []:
        path, sep, value = item.partition("=")
        values = [v.strip() for v in value.split(",")]
        if not sep or not path.strip() or not all(values):
            raise DseError(f"--set {item}: expected dotted.path=value[,value...], e.g. "
                           "memory.L2.capacity=96MiB")
        out[path.strip()] = values
    return out


def batch_words() -> tuple[str, ...]:
    """The words a scenario accepts as a batch besides whole numbers (max, ...)."""
    from typing import Literal, get_args, get_origin

    from dse.spec.workload import Scenario

    annotation = Scenario.model_fields["batch"].annotation
    return tuple(w for a in get_args(annotation) if get_origin(a) is Literal
                 for w in get_args(a))


class Format(StrEnum):
    """The --format of the commands that print a document: tables, YAML or JSON."""

    table = "table"
    yaml = "yaml"
    json = "json"


def flowed(doc: str) -> str:
    """A docstring as help text: the lines of each paragraph joined into one, so the help
    screen wraps it to the terminal (rich keeps a docstring's own line breaks)."""
    import inspect

    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def flow_help(group: typer.Typer) -> None:
    """Every command of `group` (and its sub-groups) with its docstring flowed (flowed)."""
    for info in group.registered_commands:
        doc = info.help or (info.callback.__doc__ if info.callback else None)
        if doc:
            info.help = flowed(doc)
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            flow_help(sub.typer_instance)
