"""`dse memory`: the training memory of a model on a chip, per part and per memory level,
whether it fits, and (--suggest) the strategies that fit ranked by step time. Thin: parse,
call dse.model.memory_plan, render with dse.report.memory_view."""

from __future__ import annotations

from typing import Annotated, Any, overload

import typer

from dse.errors import DseError

FORMATS = ("table", "json")
CHOICES = {"--recompute": ("none", "selective", "full"),
           "--optimizer": ("sgd", "momentum", "adam", "adamw"),
           "--schedule": ("1f1b", "interleaved")}


@overload
def _whole(text: str, option: str, low: int = 1) -> int: ...
@overload
def _whole(text: str | None, option: str, low: int = 1) -> int | None: ...
def _whole(text: str | None, option: str, low: int = 1) -> int | None:
    """A whole number of at least `low` from an option's text (None stays None)."""
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        raise DseError(f"{option}: expected a whole number, found '{text}'") from None
    if value < low or value > 2**53:
        raise DseError(f"{option}: expected a whole number from {low} to 2^53, found {value}")
    return value


def _choice(text: str | None, option: str) -> str | None:
    if text is not None and text not in CHOICES[option]:
        raise DseError(f"{option}: expected one of: {', '.join(CHOICES[option])}, "
                       f"found '{text}'")
    return text


def _zero(text: str | None) -> int | None:
    if text is not None and text.strip() not in ("0", "1", "2", "3"):
        raise DseError(f"--zero: expected a ZeRO stage 0, 1, 2 or 3, found '{text}'")
    return None if text is None else int(text)


def _hardware_overrides(sets: list[str] | None) -> dict[str, Any]:
    """--set path=value options, one value per path (dse memory plans one design)."""
    from dse.cli_options import set_values

    out = {}
    for path, values in set_values(sets).items():
        if len(values) > 1:
            raise DseError(f"--set {path}: dse memory plans one design; give one value "
                           "(dse eval evaluates several)")
        out[path] = values[0]
    return out


def memory(
    hardware: Annotated[str, typer.Argument(help="Shipped chip name (h100-sxm) or a path.")],
    workload: Annotated[str, typer.Argument(help="Shipped workload (llama2-70b) or a path.")],
    scenario: Annotated[str | None, typer.Option(
        help="Named scenario (default: the file's first training scenario).")] = None,
    phase: Annotated[str | None, typer.Option(
        help="training (the default; another phase's scenario trains with its batch and "
             "sequence length).")] = None,
    batch: Annotated[str | None, typer.Option(help="Global batch in sequences.")] = None,
    seq_in: Annotated[str | None, typer.Option("--seq-in", help="Sequence length.")] = None,
    precision: Annotated[str | None, typer.Option(
        help="fp32, bf16, fp16 (mixed precision with fp32 master weights), fp8, mixed.")]
    = None,
    chips: Annotated[str, typer.Option(help="Chips in the system.")] = "1",
    tp: Annotated[str | None, typer.Option(help="Tensor-parallel degree (default 1).")] = None,
    pp: Annotated[str | None, typer.Option(help="Pipeline-parallel degree (default 1).")]
    = None,
    sets: Annotated[list[str] | None, typer.Option(
        "--set", help="Override a hardware field: dotted.path=value (with units).")] = None,
    micro_batch: Annotated[str | None, typer.Option(
        "--micro-batch", help="Sequences per micro-batch (default: chosen).")] = None,
    zero: Annotated[str | None, typer.Option(
        help="ZeRO stage 0-3, 3 = FSDP (default: chosen).")] = None,
    recompute: Annotated[str | None, typer.Option(
        help="none, selective or full (default: chosen).")] = None,
    sequence_parallel: Annotated[bool | None, typer.Option(
        "--sequence-parallel/--no-sequence-parallel",
        help="Megatron sequence parallelism (default: chosen).")] = None,
    optimizer: Annotated[str | None, typer.Option(
        help="sgd, momentum, adam or adamw (default adam).")] = None,
    offload: Annotated[str | None, typer.Option(
        metavar="LEVEL", help="Offload the optimizer state to this slower memory level "
                              "(host, LPDDR or CXL tier).")] = None,
    offload_params: Annotated[bool, typer.Option(
        "--offload-params", help="Offload the parameters too (ZeRO-Infinity).")] = False,
    schedule: Annotated[str | None, typer.Option(help="Pipeline schedule: 1f1b or "
                                                      "interleaved.")] = None,
    virtual_stages: Annotated[str | None, typer.Option(
        "--virtual-stages", help="Model chunks per pipeline rank (interleaved).")] = None,
    suggest: Annotated[bool, typer.Option(
        "--suggest", help="List the strategies (tp/pp/dp, micro-batch, ZeRO, "
                          "recomputation, SP, offload) that fit, ranked by step time.")]
    = False,
    top: Annotated[str, typer.Option(help="Suggestions shown in the table (JSON: all).")]
    = "20",
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
) -> None:
    """Training memory per chip: parameters, gradients, optimizer state, activations and
    temporary buffers; their placement over the memory levels; whether it fits; and the
    setup that ran (fields left open are chosen as the fastest that fits). --suggest ranks
    the strategies that fit by predicted step time.

    Exit codes: 0 it fits; 3 it does not (printed in full first); 2 bad input."""
    from dse.report import memory_view as view

    if fmt not in FORMATS:
        raise DseError(f"--format: expected table or json, found '{fmt}'")
    n_chips = _whole(chips, "--chips")
    tp_, pp_ = _whole(tp, "--tp") or 1, _whole(pp, "--pp") or 1
    n_top = _whole(top, "--top", low=0)
    given = {"micro_batch": _whole(micro_batch, "--micro-batch"), "zero": _zero(zero),
             "recompute": _choice(recompute, "--recompute"),
             "sequence_parallel": sequence_parallel,
             "optimizer": _choice(optimizer, "--optimizer"),
             "schedule": _choice(schedule, "--schedule"),
             "virtual_stages": _whole(virtual_stages, "--virtual-stages"), "offload": offload}
    scenario_fields = {"phase": phase, "batch": _whole(batch, "--batch"),
                       "seq_in": _whole(seq_in, "--seq-in"), "precision": precision}
    doc = _plan(hardware, workload, scenario, scenario_fields, _hardware_overrides(sets),
                (n_chips, tp_, pp_), given, offload_params, suggest)
    if fmt == "json":
        typer.echo(view.json_text(doc))
    else:
        from rich.console import Console

        Console(width=max(150, Console().width)).print(view.memory_tables(doc, n_top))
    if not doc["fits"]:
        raise typer.Exit(3)


def _plan(hardware: str, workload: str, scenario: str | None, fields: dict,
          overrides: dict, split: tuple[int, int, int], given: dict, offload_params: bool,
          suggest: bool) -> dict:
    """The memory document of `dse memory`: the training scenario (`fields`: its phase,
    batch, seq_in and precision as given) on `split` = (chips, tp, pp), with the setup
    `given` (fields left None are chosen), and the strategies that fit when `suggest`."""
    from dse.model import memory_plan as mp
    from dse.model import memory_suggest
    from dse.model.batch import design_batch
    from dse.report import memory_view as view
    from dse.spec.load import load_design, load_workload

    n_chips, tp_, pp_ = split
    wl = load_workload(workload)
    spec, tech, _ = load_design(hardware)
    db = design_batch(spec, overrides)
    name, sc, notes = mp.training_scenario(wl, scenario, **fields, chips=n_chips)
    if wl.kind != "transformer":
        used = ["--" + k.replace("_", "-") for k, v in given.items() if v is not None]
        used += ["--offload-params"] * offload_params + ["--suggest"] * suggest
        if used:
            raise DseError(f"{used[0]}: training setups and --suggest are for Transformers; "
                           f"{wl.name} is a {wl.kind} (its tables are sharded by its own "
                           "planner; dse memory reports its placement per level)")
        notes.append(f"{wl.name} is a {wl.kind}: its memory per level is the evaluation's "
                     "(tables, dense weights, their optimizer state); the per-part breakdown "
                     "and --suggest are for Transformers")
    else:
        sc = mp.with_training(sc, db, given, offload_params)
    ev = mp.run(db, wl, name, sc, n_chips, tp_, pp_, tech)
    for warning in ev.warnings:
        typer.echo(f"warning: {warning}", err=True)
    breakdown = mp.breakdown(ev, db)
    suggested = memory_suggest.suggest(db, wl, name, sc, n_chips, tech, offload_params) \
        if suggest else None
    return view.memory_document(breakdown, notes, suggested)
