"""Command-line interface. Thin: parse arguments, call one API function, render.

Errors (dse.cli_errors): bad input (any DseError, a usage error of the parser) prints one
line per problem to stderr and exits with 2; an unexpected exception is an internal error:
a short message and exit 1 (set DSE_DEBUG=1 for the traceback).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

import dse
from dse.cli_area import area
from dse.cli_dashboard import dashboard
from dse.cli_errors import DseGroup, err, user_errors
from dse.cli_memory import memory
from dse.cli_options import (
    DATA_TYPES,
    PRECISION_HELP,
    ContextParallel,
    ExpertParallel,
    Format,
    flow_help,
)
from dse.cli_options import batch_words as _batch_words
from dse.cli_options import int_list as _int_list
from dse.cli_options import set_values as _overrides
from dse.cli_options import whole as _whole
from dse.cli_plot import PHASE_HELP, Sparsity, StackOption, plot_app
from dse.cli_study import study
from dse.cli_validate import validate
from dse.errors import DseError, one_line
from dse.spec.scenario_fields import FIELDS

__all__ = ["app", "main", "user_errors"]

app = typer.Typer(
    name="dse",
    help="Design-space exploration for AI accelerators: hardware x workload -> performance.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    cls=DseGroup,
)


# Help of the scenario options every evaluating command shares (names: dse.spec.scenario_fields).
KV_HELP = f"KV-cache data type when it differs from --precision: {DATA_TYPES}."
LATENCY_HELP = ("With --batch best: the longest time per output token (serve) or per batch "
                "(inference), e.g. '50 ms'.")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dse {dse.__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Design-space exploration for AI accelerators."""


@app.command()
@user_errors
def check(
    paths: Annotated[list[Path], typer.Argument(help="Hardware, workload or study YAML files.")],
) -> None:
    """Validate spec files; print every problem as file:line:col: key.path: message."""
    from dse.check import check_file
    from dse.errors import SpecError

    issues = []
    for path in paths:
        try:
            warnings: list[str] = []
            kind = check_file(path, warnings)
            typer.echo(one_line(f"{path}: ok ({kind})"))
            for w in warnings:
                typer.echo(one_line(f"warning: {w}"), err=True)
        except SpecError as e:
            issues.extend(e.issues)
    if issues:
        raise SpecError(issues)


def _dump(doc: dict[str, Any], fmt: Format) -> str:
    """`doc` as JSON or YAML, non-finite numbers as null (dse.report.jsonout)."""
    from dse.report import jsonout

    if fmt is Format.json:
        return jsonout.dumps(doc)
    return yaml.safe_dump(jsonout.finite(doc), sort_keys=False, width=100)


@app.command()
@user_errors
def show(
    hardware: Annotated[str, typer.Argument(help="Shipped chip name (h100-sxm) or a path.")],
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.table,
    paths: Annotated[bool, typer.Option("--paths", help="List the paths a design can vary "
                                                        "(--set, the API, studies) with their "
                                                        "values and rules.")] = False,
) -> None:
    """Print a resolved hardware spec in SI units with derived figures (peaks, ridge points)."""
    from dse.report.hardware_view import hardware_document, hardware_tables

    spec = dse.load_hardware(hardware)
    if paths:
        from dse.report.hardware_view import vocabulary_rows, vocabulary_table

        rows = vocabulary_rows(spec, every=fmt is not Format.table)
        if fmt is Format.table:
            from rich.console import Console

            Console(width=max(120, Console().width)).print(vocabulary_table(spec, rows))
        else:
            typer.echo(_dump({"hardware": spec.name, "paths": [
                {k: r[k] for k in ("path", "value", "unit", "rule", "varies", "note")}
                for r in rows]},
                fmt))
        return
    if fmt is Format.table:
        from rich.console import Console

        Console(width=max(100, Console().width)).print(hardware_tables(spec))
    else:
        typer.echo(_dump(hardware_document(spec), fmt))


class TableFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


@app.command()
@user_errors
def workload(
    name: Annotated[str, typer.Argument(help="Shipped workload (llama2-7b), a path, or "
                                             "gemm:MxNxK / gemm:BxMxNxK.")],
    scenario: Annotated[str | None, typer.Option(help="Named scenario (default: the first).")]
    = None,
    phase: Annotated[str | None, typer.Option(help=PHASE_HELP)] = None,
    batch: Annotated[str | None, typer.Option(help="Batch size(s), comma-separated.")] = None,
    seq_in: Annotated[str | None, typer.Option("--seq-in", help="Prompt or sequence "
                                               "length(s), comma-separated.")] = None,
    seq_out: Annotated[str | None, typer.Option("--seq-out", help="Generated tokens, "
                                                "comma-separated.")] = None,
    precision: Annotated[str | None, typer.Option(help=PRECISION_HELP)] = None,
    kv_precision: Annotated[str | None, typer.Option(
        FIELDS["kv_precision"].option, help=KV_HELP)] = None,
    sparsity: Sparsity = None,
    convention: Annotated[str, typer.Option(help="Byte counting: default (by data type) or "
                                                 "paper (Kim et al. 2023).")] = "default",
    fmt: Annotated[TableFormat, typer.Option("--format", "-f")] = TableFormat.table,
) -> None:
    """Lower a workload scenario to its operator table: FLOPs, bytes by tensor class and
    arithmetic intensity. Comma-separated values sweep (one row per value)."""
    import itertools

    from dse.report import workload_view as view
    from dse.spec.load import load_workload
    from dse.sweep import check_points
    from dse.workloads import lower, resolve_scenario
    from dse.workloads.common import CONVENTIONS

    if convention not in CONVENTIONS:
        raise DseError(f"--convention: expected one of: {', '.join(CONVENTIONS)}, "
                       f"found '{convention}'")
    lists = {"batch": _int_list(batch, "--batch", _batch_words()),
             "seq_in": _int_list(seq_in, "--seq-in"), "seq_out": _int_list(seq_out, "--seq-out")}
    check_points({k: len(v) for k, v in lists.items()})
    spec = load_workload(name)
    docs = []
    for b, si, so in itertools.product(*lists.values()):
        sc_name, sc = resolve_scenario(spec, scenario, phase=phase, batch=b, seq_in=si,
                                       seq_out=so, precision=precision,
                                       kv_precision=kv_precision, sparsity=sparsity)
        notes = []
        if not isinstance(sc.batch, int):  # max (or best): sized by the hardware
            notes.append(f"batch {sc.batch} depends on the hardware; shown per sequence "
                         "(batch 1); dse eval sizes it")
            sc = sc.model_copy(update={"batch": 1})
        named = spec.scenarios.get(sc_name)
        if si is not None and named is not None and named.lengths is not None:
            notes.append(f"--seq-in {si} runs every sequence at {si} tokens, in place of the "
                         f"scenario's lengths {named.lengths.describe()}")
        note = "; ".join(notes) or None
        docs.append(view.workload_document(spec, sc, lower(spec, sc, CONVENTIONS[convention]),
                                           convention, sc_name, note))
    if len(docs) == 1:  # one scenario: its operator table
        doc = docs[0]
        _render(fmt, doc, lambda: view.op_rows(doc), lambda: view.workload_tables(doc))
    else:  # a sweep: one row of totals per value
        rows = [view.sweep_row(d) for d in docs]
        _render(fmt, docs, lambda: rows, lambda: view.sweep_table(rows))


def _render(fmt: TableFormat, document: Any, csv_rows: Callable[[], Any],
            table: Callable[[], Any]) -> None:
    """Print JSON of `document` (or of what it returns, when callable), CSV of `csv_rows()`
    (records or a DataFrame), or the rich renderable `table()`."""
    if fmt is TableFormat.json:
        from dse.report import jsonout

        typer.echo(jsonout.dumps(document() if callable(document) else document))
    elif fmt is TableFormat.csv:
        import pandas as pd

        rows = csv_rows()
        frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)
        typer.echo(frame.to_csv(index=False), nl=False)
    else:
        from rich.console import Console

        Console(width=max(120, Console().width)).print(table())


def _sweep_values(phase: str | None, batch: str | None, seq_in: str | None,
                  seq_out: str | None, precision: str | None,
                  sets: list[str] | None, **names: str | None) -> dict[str, list[Any]]:
    """The options of `dse eval` as sweep values: scenario fields, then hardware paths.
    `names`: the other scenario fields by name (kv_precision, latency_target), one value
    each."""
    values: dict[str, list[Any]] = {}
    if phase is not None:
        values["phase"] = [phase]
    if batch is not None:
        values["batch"] = _int_list(batch, FIELDS["batch"].option, _batch_words())
    for key, text in (("seq_in", seq_in), ("seq_out", seq_out)):
        if text is not None:
            values[key] = _int_list(text, FIELDS[key].option)
    if precision is not None:
        values["precision"] = [precision]
    for key, text in names.items():
        if text is not None:
            values[FIELDS[key].name] = [text]
    values.update(_overrides(sets))
    return values


def _area(text: str | None) -> float | None:
    """--area-budget as mm2."""
    if text is None:
        return None
    from dse import units

    try:
        return units.to_kind(text, units.AREA)
    except units.UnitError as e:
        raise DseError(f"--area-budget: {e}") from None


def _records(frame: Any) -> list[dict[str, Any]]:
    """A frame as JSON-ready records (NaN as null)."""
    return json.loads(frame.to_json(orient="records", double_precision=15))


@app.command(name="eval")
@user_errors
def eval_(
    hardware: Annotated[str, typer.Argument(help="Shipped chip name or a path.")],
    workload: Annotated[str, typer.Argument(help="Shipped workload, a path, or gemm:MxNxK.")],
    scenario: Annotated[str | None, typer.Option(help="Named scenario (default: the first of "
                                                      "--phase, else the first).")] = None,
    phase: Annotated[str | None, typer.Option(help=PHASE_HELP)] = None,
    batch: Annotated[str | None, typer.Option(
        help="Sequences per step, or max; comma-separated values sweep.")] = None,
    seq_in: Annotated[str | None, typer.Option(
        "--seq-in", help="Prompt tokens; comma-separated values sweep.")] = None,
    seq_out: Annotated[str | None, typer.Option(
        "--seq-out", help="Generated tokens; comma-separated values sweep.")] = None,
    precision: Annotated[str | None, typer.Option(help=PRECISION_HELP)] = None,
    kv_precision: Annotated[str | None, typer.Option(
        FIELDS["kv_precision"].option, help=KV_HELP)] = None,
    sparsity: Sparsity = None,
    latency_target: Annotated[str | None, typer.Option(
        FIELDS["latency_target"].option, help=LATENCY_HELP)] = None,
    stack: StackOption = None,
    chips: Annotated[int, typer.Option(help="Chips in the system.")] = 1,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree.")] = 1,
    pp: Annotated[int, typer.Option(help="Pipeline-parallel degree.")] = 1,
    cp: ContextParallel = 1, ep: ExpertParallel = 1,
    sets: Annotated[list[str] | None, typer.Option(
        "--set", help="Override a hardware field: dotted.path=value (with units); "
                      "comma-separated values evaluate several designs.")] = None,
    grid: Annotated[bool, typer.Option(
        "--grid/--zip", help="How several comma lists combine: --zip (default) pairs the "
                             "i-th values (lists of equal length; one value applies to "
                             "all), --grid evaluates every combination.")] = False,
    reticle: Annotated[bool, typer.Option(
        help="A die beyond the reticle (858 mm2) is infeasible.")] = True,
    area_budget: Annotated[str | None, typer.Option(
        "--area-budget", help="A design whose modelled die area (all dies) exceeds this, "
                              "e.g. '600 mm2', is infeasible.")] = None,
    ops: Annotated[bool, typer.Option(
        "--ops", help="Print the operators of every design (CSV, JSON: one row per design "
                      "and operator).")] = False,
    fmt: Annotated[TableFormat, typer.Option("--format", "-f")] = TableFormat.table,
    top: Annotated[int, typer.Option(help="Operators shown per design in tables.")] = 15,
) -> None:
    """Evaluate a workload scenario on a design: latency, throughput, memory per level, and
    every operator with the resource that bounds it. Comma lists (--batch, --seq-in,
    --seq-out, --set) evaluate several designs, one row each. Warnings go to stderr.

    Exit codes: 0 all feasible; 3 a design is infeasible (printed in full first); 2 bad input."""
    from dse.report import eval_view as view
    from dse.spec.load import load_design
    from dse.sweep import sweep

    for option, count in (("--chips", chips), ("--tp", tp), ("--pp", pp), ("--cp", cp),
                          ("--ep", ep)):
        _whole(count, option)
    values = _sweep_values(phase, batch, seq_in, seq_out, precision, sets,
                           kv_precision=kv_precision, sparsity=sparsity,
                           latency_target=latency_target, stack=stack)
    spec, tech, no_power = load_design(hardware)
    sw = sweep(spec, dse.load_workload(workload), scenario, values=values,
               mode="grid" if grid else "zip", chips=chips, tp=tp, pp=pp, cp=cp, ep=ep,
               tech=tech,
               reticle=reticle, area_budget=_area(area_budget))
    for warning in sw.warnings:
        err(f"warning: {warning}")
    def doc(r: int) -> dict[str, Any]:
        e, i = sw.rows[r]
        return view.eval_document(sw.evaluations[e], i, no_power)

    if ops:
        frame = sw.op_frame()
        _render(fmt, lambda: _records(frame), lambda: frame, lambda: view.ops_table(sw, top))
    elif sw.n == 1:
        ev, i = sw.evaluations[sw.rows[0][0]], sw.rows[0][1]
        capacity = dict(zip(ev.level_names, ev.batch.capacity[i], strict=True))
        _render(fmt, lambda: doc(0), lambda: sw.frame,
                lambda: view.eval_tables(doc(0), capacity, top))
    else:
        _render(fmt, lambda: [doc(r) for r in range(sw.n)], lambda: sw.frame,
                lambda: view.sweep_tables(sw))
    if not sw.feasible:
        raise typer.Exit(3)


app.command(name="validate")(user_errors(validate))
app.command(name="area")(user_errors(area))


@app.command(name="list")
@user_errors
def list_specs(
    kind: Annotated[str, typer.Argument(help="hardware, workload or study")] = "hardware",
) -> None:
    """List the shipped specs of a kind; workloads with their scenarios, one a line."""
    from dse.spec.load import LIBRARY_FOLDERS, library_names

    kinds = [k for k in LIBRARY_FOLDERS if k != "validation"]
    if kind not in kinds:
        raise DseError(f"unknown kind '{kind}'; expected one of: {', '.join(kinds)}")
    for name in library_names(kind):
        typer.echo(name)
        if kind == "workload":  # its scenarios, one a line; the first is the default
            from dse.report.workload_view import scenario_lines, scenarios

            for line in scenario_lines(scenarios(dse.load_workload(name))):
                typer.echo(line)


app.command(name="dashboard")(dashboard)
app.command(name="study")(user_errors(study))
app.command(name="memory")(user_errors(memory))

app.add_typer(plot_app, name="plot")


flow_help(app)


def main() -> None:
    """Console-script entry point (and `python -m dse`): standard output that reports a
    closed pipe or a full disk (dse.cli_errors.guard_output), then the command."""
    from dse.cli_errors import guard_output

    guard_output()
    app(prog_name="dse")
