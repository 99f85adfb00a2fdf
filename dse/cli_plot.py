"""`dse plot`: charts of a chip, a scenario and the memory wall. Thin: parse, compute the
plot data (dse.report.*_plot, pure), draw it, print what was written.

Every subcommand writes one image whose format follows the --out extension (png, svg,
pdf) and prints the path; without --out the file is `<kind>-<hardware>[-<workload>].png`
in the current folder (overwritten: the command names it). Further subcommands register
on `plot_app` with `@plot_app.command()` and `@cli_errors`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from dse import phases
from dse.cli_errors import user_errors
from dse.cli_options import PRECISION_HELP
from dse.errors import DseError
from dse.spec.scenario_fields import FIELDS

plot_app = typer.Typer(
    name="plot",
    help="Draw charts: a study's Pareto front (pareto), a chip's roofline, a scenario's time "
         "breakdown, the memory-wall trends. The --out extension picks the format (png, svg, "
         "pdf).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)



class Infeasible(DseError):
    """The design cannot run the scenario: nothing to draw (exit 3, as `dse eval`)."""

    exit_code = 3


# one-line messages, exit 2 for bad input, no traceback (dse.cli_errors)
cli_errors = user_errors


Out = Annotated[Path | None, typer.Option(
    "--out", "-o", help="Image file; .png, .svg or .pdf (default: <kind>-<hardware>"
                        "[-<workload>].png here).")]
Scenario = Annotated[str | None, typer.Option(help="Named scenario (default: the first of "
                                                   "--phase, else the first).")]
# The phases `--phase` takes, from the registry (dse.phases).
PHASE_HELP = f"{phases.listed(phases.names(), 'or')}."
Phase = Annotated[str | None, typer.Option(help=PHASE_HELP)]
Batch = Annotated[str | None, typer.Option(help="Sequences per step, max or best.")]
SeqIn = Annotated[int | None, typer.Option("--seq-in", help="Prompt tokens.")]
SeqOut = Annotated[int | None, typer.Option("--seq-out", help="Generated tokens.")]
Precision = Annotated[str | None, typer.Option(help=PRECISION_HELP)]
Sparsity = Annotated[str | None, typer.Option(FIELDS["sparsity"].option,
                                              help=FIELDS["sparsity"].help)]
StackOption = Annotated[str | None, typer.Option(
    FIELDS["stack"].option, help="Software stack: a shipped name (stacks/) or a stack file; "
                                 "default: the chip vendor's.")]
KvPrecision = Annotated[str | None, typer.Option(FIELDS["kv_precision"].option,
                                                help="KV-cache data type when it differs "
                                                     "from --precision.")]
LatencyTarget = Annotated[str | None, typer.Option(
    FIELDS["latency_target"].option, help="With --batch best: the longest time per output "
                                          "token (serve) or per batch, e.g. '50 ms'.")]
Chips = Annotated[int, typer.Option(help="Chips in the system.")]
Tp = Annotated[int, typer.Option(help="Tensor-parallel degree.")]
Pp = Annotated[int, typer.Option(help="Pipeline-parallel degree.")]
Sets = Annotated[list[str] | None, typer.Option(
    "--set", help="Override a hardware field: dotted.path=value (with units), one value.")]


def _output(out: Path | None, kind: str, *names: str | None) -> Path:
    """The file to write, its format checked before any work."""
    from dse.report.figure import default_out, image_format

    path = out if out is not None else default_out(kind, *names)
    image_format(path)
    return path


def _overrides(sets: list[str] | None) -> dict[str, str]:
    """--set options, one value each (a plot draws one design)."""
    from dse.cli_options import set_values as parse

    out = {}
    for path, values in parse(sets).items():
        if len(values) != 1:
            raise DseError(f"--set {path}: a plot draws one design; give one value")
        out[path] = values[0]
    return out


def _batch(text: str | None) -> int | str | None:
    from dse.cli_options import batch_words, int_list

    if text is None:
        return None
    values = int_list(text, "--batch", batch_words())
    if len(values) != 1:
        raise DseError("--batch: a plot draws one scenario; give one value")
    return values[0]


def _evaluate(hardware: str, workload: str, scenario: str | None, phase: str | None,
              batch: str | None, seq_in: int | None, seq_out: int | None,
              precision: str | None, chips: int, tp: int, pp: int,
              sets: list[str] | None, **fields: Any) -> tuple[Any, str]:
    """Evaluate one scenario as `dse eval` does (power and the reticle check where the
    chip's node is known); the evaluation and the line that says what ran."""
    import dse
    from dse.report import eval_view
    from dse.report.figure import scenario_words
    from dse.spec.load import load_design

    spec, tech, no_power = load_design(hardware)
    ev = dse.evaluate(spec, dse.load_workload(workload), scenario, phase=phase,
                      batch=_batch(batch), seq_in=seq_in, seq_out=seq_out,
                      precision=precision, chips=chips, tp=tp, pp=pp,
                      overrides=_overrides(sets) or None, tech=tech, **fields)
    for warning in ev.warnings:
        typer.echo(f"warning: {warning}", err=True)
    if not ev.feasible[0]:
        raise Infeasible(f"{ev.hardware} cannot run {ev.workload} [{ev.scenario_name}]: "
                         f"{ev.reason[0]}")
    return ev, scenario_words(eval_view.eval_document(ev, 0, no_power))


@plot_app.command()
@cli_errors
def roofline(
    hardware: Annotated[str, typer.Argument(help="Shipped chip name or a path.")],
    workload: Annotated[str | None, typer.Argument(
        help="Shipped workload, a path, or gemm:MxNxK: its operators become points.")] = None,
    scenario: Scenario = None, phase: Phase = None, batch: Batch = None,
    seq_in: SeqIn = None, seq_out: SeqOut = None, precision: Precision = None,
    kv_precision: KvPrecision = None, sparsity: Sparsity = None,
    latency_target: LatencyTarget = None, chips: Chips = 1, tp: Tp = 1, pp: Pp = 1,
    sets: Sets = None, out: Out = None,
) -> None:
    """Roofline of a chip, with a scenario's operators as points.

    Every memory level's bandwidth roof and every matrix precision's compute roof (achieved
    fractions applied), log-log. With a workload, each operator of the scenario sits at its
    FLOPs per byte of its bounding level's traffic and its achieved FLOP/s, coloured by its
    bound."""
    import dse
    from dse.model.batch import design_batch
    from dse.report import roofline_plot as rp
    from dse.report.figure import wrap_title

    if workload is None:
        given = {"--scenario": scenario, "--phase": phase, "--batch": batch,
                 "--seq-in": seq_in, "--seq-out": seq_out, "--precision": precision,
                 "--kv-precision": kv_precision, "--sparsity": sparsity,
                 "--latency-target": latency_target}
        stray = [k for k, v in given.items() if v is not None]
        stray += [k for k, v in (("--chips", chips), ("--tp", tp), ("--pp", pp)) if v != 1]
        if stray:
            raise DseError(f"{', '.join(stray)}: scenario options need a WORKLOAD")
        spec = dse.load_hardware(hardware)
        path = _output(out, "roofline", spec.name)
        db = design_batch(spec, _overrides(sets) or None)
        data = rp.roofline_data(db, title=f"Roofline of {spec.name}")
    else:
        spec = dse.load_hardware(hardware)
        path = _output(out, "roofline", spec.name, workload)
        ev, what = _evaluate(hardware, workload, scenario, phase, batch, seq_in, seq_out,
                             precision, chips, tp, pp, sets, kv_precision=kv_precision,
                             sparsity=sparsity, latency_target=latency_target)
        data = rp.roofline_data(ev.batch, ev,
                                title=wrap_title(f"Roofline of {ev.hardware}, per chip", what))
    rp.draw(data, path)
    ridges = ", ".join(f"{lv} {r:.3g}" for lv, r in data.ridges.items())
    typer.echo(f"{data.hardware}: {len(data.memory)} memory roofs, {len(data.compute)} "
               f"compute roofs; ridge points at {data.precision}: {ridges} FLOP/byte")
    if workload is not None:
        skipped = f" ({len(data.omitted)} with no FLOPs or traffic not drawn: " \
                  f"{', '.join(data.omitted)})" if data.omitted else ""
        typer.echo(f"{len(data.ops)} operators placed{skipped}")
    typer.echo(f"plot written to {path}")


@plot_app.command()
@cli_errors
def breakdown(
    hardware: Annotated[str, typer.Argument(help="Shipped chip name or a path.")],
    workload: Annotated[str, typer.Argument(help="Shipped workload, a path, or gemm:MxNxK.")],
    scenario: Scenario = None, phase: Phase = None, batch: Batch = None,
    seq_in: SeqIn = None, seq_out: SeqOut = None, precision: Precision = None,
    kv_precision: KvPrecision = None, sparsity: Sparsity = None,
    latency_target: LatencyTarget = None, chips: Chips = 1, tp: Tp = 1, pp: Pp = 1,
    sets: Sets = None, out: Out = None,
    top: Annotated[int, typer.Option(help="Operators drawn; the rest share one bar.")] = 20,
) -> None:
    """Time per operator of a scenario, coloured by the resource that bounds it.

    Per chip, totals over each operator's count, under one bar of the step's time split by
    bound."""
    import dse
    from dse import units
    from dse.report import breakdown_plot as bp
    from dse.report.figure import wrap_title

    if top < 1:
        raise DseError(f"--top: expected a whole number >= 1, found {top}")
    path = _output(out, "breakdown", dse.load_hardware(hardware).name, workload)
    ev, what = _evaluate(hardware, workload, scenario, phase, batch, seq_in, seq_out,
                         precision, chips, tp, pp, sets, kv_precision=kv_precision,
                         sparsity=sparsity, latency_target=latency_target)
    data = bp.breakdown_data(ev, top=top, title=wrap_title("Time by operator", what))
    bp.draw(data, path)
    shares = ", ".join(f"{r.bound} {bp.share_text(r.share)}" for r in data.by_bound.itertuples())
    typer.echo(f"step time per chip {units.format_quantity(data.total_s, units.TIME)}: "
               f"{shares}")
    typer.echo(f"plot written to {path}")


@plot_app.command()
@cli_errors
def trends(
    models: Annotated[bool, typer.Option(
        "--models", help="Model size (parameters) against accelerator memory over time, "
                         "instead of Figure 1.")] = False,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Image file; .png, .svg or .pdf (default: trends.png, or "
                            "trends-models.png with --models).")] = None,
) -> None:
    """The memory wall over time: FLOPS against DRAM and interconnect bandwidth.

    Figure 1 of "AI and Memory Wall" (Gholami et al., IEEE Micro 2024): peak hardware FLOPS
    and DRAM and interconnect bandwidth by year, normalized, with least-squares exponential
    fits and their growth per two years. --models: model parameters against accelerator
    memory."""
    from dse.report import trends_plot as tp

    path = _output(out, "trends", "models" if models else None)
    data = tp.model_trends() if models else tp.hardware_trends()
    tp.draw(data, path, models=models)
    for s in data.series:
        if s.fit is not None:
            paper = f" (paper: {tp.rate_text(s.stated)})" if s.stated is not None else ""
            typer.echo(f"{s.label}: {s.fit.per_two_years:.3g}x per 2 years{paper}, "
                       f"{len(s.year)} points {s.year.min():.0f}-{s.year.max():.0f}")
    typer.echo(f"plot written to {path}")


def _axis(spec: str | None, default: str, objectives: dict[str, dict], columns: list[str],
          other: dict[str, str], option: str) -> tuple[str, str, bool | None]:
    """(column, unit, maximize?) of a --x / --y value: an objective's name, or any numeric
    column of trials.parquet with :max or :min for the better direction; `other`: the
    columns that are not numbers, and what they hold."""
    text = spec or default
    name, _, way = text.partition(":")
    if name in objectives:
        o = objectives[name]
        better = o["direction"] == "maximize" if not way else way == "max"
        return o["column"], o["unit"], better
    if name not in columns:
        from dse.errors import suggest

        raise DseError(f"{option} {text}: not an objective or a column of trials.parquet"
                       f"{suggest(name, [*objectives, *columns])}; objectives: "
                       f"{', '.join(objectives)}")
    if name in other:
        numeric = [c for c in columns if c not in other]
        raise DseError(f"{option} {text}: column '{name}' of trials.parquet holds "
                       f"{other[name]}, not numbers; numeric columns: {', '.join(numeric)}")
    if way not in ("", "max", "min"):
        raise DseError(f"{option} {text}: expected COLUMN, COLUMN:max or COLUMN:min")
    return name, "", None if not way else way == "max"


def _study_context(folder: Path, doc: dict) -> tuple[dict[str, float], str | None]:
    """The budgets a study output folder records (area from run.json; the power cap from
    study.resolved.yaml) and the name of its base design (None when not recorded)."""
    import yaml

    from dse.report.pareto_plot import power_budget

    budgets = {}
    if doc.get("area_budget_mm2") is not None:
        budgets["area"] = float(doc["area_budget_mm2"])
    base = None
    try:
        resolved = yaml.safe_load((folder / "study.resolved.yaml").read_text())
    except (OSError, yaml.YAMLError):
        resolved = None
    if isinstance(resolved, dict):
        constraints = resolved.get("constraints")
        power = power_budget(constraints.get("power")) if isinstance(constraints, dict) \
            else None
        if power is not None:
            budgets["power"] = power
        if isinstance(resolved.get("base"), str):
            base = Path(resolved["base"]).stem
    return budgets, base


@plot_app.command(help="A study's designs on two axes (export its Pareto front for a "
                  "paper): infeasible ones faded, the Pareto front of the two axes drawn, the "
                  "reference chips marked by name.")
@cli_errors
def pareto(
    folder: Annotated[Path, typer.Argument(help="A study's output folder (dse study --out).",
                                           metavar="DIR")],
    x: Annotated[str | None, typer.Option(help="Objective name or trials column (COLUMN:max "
                                               "or :min); default: the first objective.")]
    = None,
    y: Annotated[str | None, typer.Option(help="Objective name or column; default: the "
                                               "second objective.")] = None,
    out: Out = None,
) -> None:
    """A study's designs on two axes, its Pareto front and the reference chips (the help
    text is the decorator's)."""
    import json

    import pandas as pd

    from dse.report import pareto_plot as pp
    from dse.report.figure import describe_column
    from dse.search.pareto import front_mask

    needed = [folder / f for f in ("trials.parquet", "references.csv", "run.json")]
    missing = [p.name for p in needed if not p.is_file()]
    if missing:
        raise DseError(f"{folder}: not a study output folder (no {', '.join(missing)}); run "
                       "dse study first")
    path = _output(out, "pareto", folder.name)
    doc = json.loads(needed[2].read_text())
    objectives = doc.get("objectives") or {}
    trials = pd.read_parquet(needed[0])
    refs = pd.read_csv(needed[1])
    names = list(objectives)
    cols = list(trials.columns)
    other = {c: "true/false" if pd.api.types.is_bool_dtype(trials[c]) else "text"
             for c in cols if pd.api.types.is_bool_dtype(trials[c])
             or not pd.api.types.is_numeric_dtype(trials[c])}
    xc, xu, xmax = _axis(x, names[0] if names else "", objectives, cols, other, "--x")
    yc, yu, ymax = _axis(y, names[1] if len(names) > 1 else "area_per_chip_mm2:min", objectives,
                         cols, other, "--y")
    budgets, base = _study_context(folder, doc)
    ok = trials[trials["feasible"].astype(bool)]
    if xmax is None or ymax is None:
        front = ok.iloc[0:0]
    else:
        front = ok[front_mask(ok[[xc, yc]].to_numpy(float),
                              ["maximize" if xmax else "minimize",
                               "maximize" if ymax else "minimize"])]
    d = pp.pareto_data(trials, front, refs, xc, yc, describe_column(xc, xu, base),
                       describe_column(yc, yu, base), xmax, ymax,
                       f"{doc['study']}: {len(trials):,} designs", budgets)
    pp.draw_pareto(d, [path])
    if xmax is None or ymax is None:
        which = " and ".join(f for f, m in (("--x", xmax), ("--y", ymax)) if m is None)
        typer.echo(f"{len(trials):,} designs, {len(ok):,} feasible; no front drawn: {which} "
                   f"has no direction (add :max or :min to the column, e.g. "
                   f"{xc if xmax is None else yc}:min)")
    else:
        typer.echo(f"{len(trials):,} designs, {len(ok):,} feasible, {len(front)} on the front "
                   f"of {xc} and {yc}")
    typer.echo(f"plot written to {path}")
