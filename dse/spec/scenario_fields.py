"""Scenario fields on every route, from the one schema (`dse.spec.workload.Scenario`).

A scenario field is declared once, as a field of the pydantic model `Scenario` (its type,
default, unit and description). This module derives from it what each route calls the
field -- the YAML key, the command-line option (`--seq-out`), the keyword of `dse.evaluate`,
the field of a study's workload entry and the column of a measurements CSV -- and which
fields are simple enough (one scalar value) for an option or a column. A field that is not
is YAML-only, with the reason in YAML_ONLY; tests/spec/test_scenario_fields.py fails when a
simple field is missing from one route. No I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from dse import phases
from dse.errors import DseError
from dse.spec.workload import Scenario

# Fields a route cannot take as one value, and why: they are set in the workload file.
YAML_ONLY: dict[str, str] = {
    "engine": "a nested section (the serving engine's profile)",
    "training": "a nested section (the training setup); dse memory sets its parts with "
                "its own options (--micro-batch, --zero, ...)",
    "lengths": "a length distribution (a shipped name, a histogram or its moments)",
}

# Routes that leave out a simple field, and why (route, field) -> reason. A route is "api"
# (dse.evaluate), "study" (a study's workload entry), "csv" (a measurements CSV) or
# "cli:<command>" (`cli:eval`, `cli:plot roofline`).
NOT_ON: dict[tuple[str, str], str] = {
    ("cli:workload", "latency_target"): "the operator table does not depend on it (it "
                                        "picks a batch on a design: dse eval)",
    ("cli:memory", "seq_out"): "training generates no tokens",
    ("cli:memory", "kv_precision"): "training keeps no KV cache",
    ("cli:memory", "latency_target"): "it goes with batch best (serve, inference)",
    ("cli:memory", "sparsity"): "training updates dense weights",
    ("csv", "latency_target"): "it goes with batch best, and a measured row gives the "
                               "batch it ran (a number or max)",
    # the software stack (dse.spec.stack): dse eval, the API and a study's workloads name it
    ("csv", "stack"): "a measured row names its software (the software column), which "
                      "dse.spec.stack_files.stack_for_software maps to a stack",
    ("cli:workload", "stack"): "the operator table does not depend on it",
    ("cli:memory", "stack"): "the memory footprint does not depend on it",
    ("cli:plot roofline", "stack"): "the plots run the vendor's default stack",
    ("cli:plot breakdown", "stack"): "the plots run the vendor's default stack",
}


@dataclass(frozen=True)
class ScenarioField:
    """One field of the Scenario schema and its name on each route."""

    name: str
    annotation: Any
    """The schema's type (PrecisionName, int | Literal['max', 'best'], ...)."""
    default: Any
    description: str
    unit: str | None
    """The SI unit of a quantity (`s`; a route takes it with any unit of its kind, '50
    ms'), read from the schema's validator; None for a number or a name."""
    yaml_only: str | None
    """Why no option or column takes it; None for a simple field."""

    @property
    def simple(self) -> bool:
        """Whether a command-line option and a CSV column take it (one scalar value)."""
        return self.yaml_only is None

    @property
    def yaml_key(self) -> str:
        return self.name

    @property
    def option(self) -> str:
        """The command-line option: `--seq-out`."""
        return "--" + self.name.replace("_", "-")

    @property
    def keyword(self) -> str:
        """The keyword argument of `dse.evaluate`."""
        return self.name

    @property
    def study_field(self) -> str:
        """The field of a study's workload entry (`workloads.<name>.seq_out`)."""
        return self.name

    @property
    def column(self) -> str:
        """The column of a measurements CSV (dse validate)."""
        return self.name

    @property
    def words(self) -> tuple[str, ...]:
        """The names it takes (phase, precision), or the words beside a number (batch:
        max, best); () for a plain number. A phase is a name the registry knows
        (dse.phases), registered ones included."""
        if self.name == "phase":
            return phases.names()
        return tuple(w for a in (self.annotation, *get_args(self.annotation))
                     if get_origin(a) is Literal for w in get_args(a))

    @property
    def help(self) -> str:
        """The option's help: the schema description's first sentence."""
        text = " ".join(self.description.split())
        head = re.split(r"(?<!e\.g)\. |; ", text)[0].rstrip(".")
        return head + "."


def _unit(info: Any) -> str | None:
    """The SI unit a quantity field's validator converts to (dse.spec.types._quantity),
    also inside `Time | None`: `s`."""
    metas = list(info.metadata)
    for arg in get_args(info.annotation):
        metas += list(getattr(arg, "__metadata__", ()))
    for meta in metas:
        quantity = getattr(getattr(meta, "func", None), "quantity", None)
        if quantity is not None:
            return str(quantity[0].unit)
    return None


def _fields() -> dict[str, ScenarioField]:
    out = {}
    for name, info in Scenario.model_fields.items():
        out[name] = ScenarioField(
            name=name, annotation=info.annotation, default=info.default,
            description=info.description or "", unit=_unit(info),
            yaml_only=YAML_ONLY.get(name))
    unknown = set(YAML_ONLY) - set(out)
    if unknown:  # a rename in the schema must be renamed here too
        raise ImportError(f"dse.spec.scenario_fields.YAML_ONLY names {sorted(unknown)}, "
                          "which the Scenario schema does not have")
    return out


FIELDS: dict[str, ScenarioField] = _fields()
"""Every field of the Scenario schema, in its order, by name."""
SIMPLE: tuple[str, ...] = tuple(n for n, f in FIELDS.items() if f.simple)
"""The fields every route takes: YAML, CLI option, API keyword, study field, CSV column."""


def as_given(name: str, value: Any) -> Any:
    """`value` of scenario field `name` as a file would give it: a number for a quantity
    (`latency_target` 0.02, in SI units from the API or an already read study) as text with
    its SI unit ('0.02 s'), since a schema quantity takes no bare number; else as is."""
    f = FIELDS.get(name)
    if f is not None and f.unit is not None and isinstance(value, int | float) \
            and not isinstance(value, bool):
        return f"{value!r} {f.unit}" if isinstance(value, float) else f"{value} {f.unit}"
    return value


def option(name: str) -> str:
    """The command-line option of scenario field `name` (`--seq-out`)."""
    return FIELDS[name].option


def field_of_option(text: str) -> str | None:
    """The scenario field an option names (`--seq-out` -> seq_out), or None."""
    name = text.removeprefix("--").replace("-", "_")
    return name if text.startswith("--") and name in FIELDS else None


def cli_name(error: DseError) -> str:
    """How the command line names the field of a structured error: a scenario or
    execution field as its option (`--seq-out`, `--chips`), a design path as `--set`
    path."""
    field = error.field or ""
    if error.domain == "design":
        return f"--set {field}".rstrip()
    return "--" + field.replace("_", "-") if field else ""
