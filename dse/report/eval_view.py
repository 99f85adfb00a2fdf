"""What `dse eval` prints: the JSON document of one evaluated design and its tables, and
the one-row-per-design table of a sweep."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from dse import phases, units
from dse.model import METRICS, Evaluation
from dse.model.metrics import METRICS as METRIC_DEFS
from dse.model.power_stage import POWER_METRICS
from dse.model.training import TRAINING_METRICS
from dse.spec.vocabulary import column_name, generation_names
from dse.spec.workload import Engine
from dse.sweep import SCENARIO_FIELDS, column_of, option_name
from dse.workloads import describe_scenario
from dse.workloads.serving import describe_engine, engine_of

if TYPE_CHECKING:
    from dse.sweep import Sweep

# The headline rows of `dse eval`'s table: every metric of dse.model.metrics (labels and
# units from there), but the clock (shown when the TDP lowers it) and, by `_shown`, one of
# the step time and the latency where they are equal or the step is serve's TPOT.
_METRIC_UNITS = {k: (m.label, m.unit) for k, m in METRIC_DEFS.items() if k != "clock_hz"}


def _num(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def eval_document(res: Evaluation, i: int = 0, no_power: str | None = None) -> dict[str, Any]:
    """The issue's JSON schema for design i: feasible, reason, metrics, ops; power and
    energy where the spec's process node is known (else `power_note` says why not)."""
    sc = res.scenario_of(i)
    doc: dict[str, Any] = {
        "hardware": res.hardware, "workload": res.workload,
        "scenario": {"name": res.scenario_name, "description": describe_scenario(sc),
                     "phase": sc.phase, "batch": sc.batch, "seq_in": sc.seq_in,
                     "seq_out": sc.seq_out, "precision": sc.precision,
                     "pairs": getattr(sc, "pairs", None),
                     "chips": res.chips, "tp": res.tp, "pp": res.pp,
                     "cp": res.execution.cp if res.execution else 1,
                     "ep": res.execution.ep if res.execution else 1,
                     "sequences_per_replica": _num(res.sequences[i]),
                     # serve: the engine profile that ran (the scenario's or the default)
                     "engine": engine_of(sc).model_dump() if phases.get(sc.phase).served
                     else None,
                     # the software stack that ran (the scenario's or the vendor's default)
                     "stack": sc.stack},
        # Every override applied: scenario fields the caller replaced, hardware paths (SI).
        "overrides": {**res.scenario_overrides_of(i),
                      **{k: hardware_value(k, float(v[i])) if k.endswith(".generation")
                         else float(v[i]) for k, v in res.batch.overrides.items()},
                      **dict(res.batch.assumed)},  # package, spares: one value for all
        "warnings": list(res.warnings),
        "feasible": bool(res.feasible[i]),
        "reason": str(res.reason[i]) or None,
        "metrics": {m: _num(res.metrics[m][i]) if m in res.metrics else None
                    for m in (*METRICS, *POWER_METRICS,
                              *(TRAINING_METRICS if res.training is not None else ()))},
        "power_limited": None if res.power_limited is None else bool(res.power_limited[i]),
        "power_note": no_power,
    }
    if res.training is not None:  # the setup chosen and the planner's bytes per chip
        t = {k: v[i] for k, v in res.training.items()}
        doc["training"] = {
            "micro_batch": int(t["micro_batch"]), "microbatches": int(t["microbatches"]),
            "zero": int(t["zero"]), "recompute": str(t["recompute"]),
            "sequence_parallel": bool(t["sequence_parallel"]),
            "virtual_stages": int(t["virtual_stages"]),
            "per_chip_bytes": {k[len("memory_"):-len("_bytes")]: float(v)
                               for k, v in t.items() if k.startswith("memory_")}}
    doc["metrics"]["memory_per_chip_bytes"] = {lv: float(res.memory_bytes[i, k])
                                      for k, lv in enumerate(res.level_names)}
    doc["ops"] = [{k: r[k] for k in ("name", "count", "flops", "bytes", "time_s", "bound")}
                  for r in res.op_records(i)] if res.feasible[i] else []
    return doc


def _shown(key: str, phase: str) -> bool:
    """Whether the eval table shows metric `key` for `phase`: a phase without requests (a
    GEMM, a training step) shows the step time, the others a request's latency (JSON and
    CSV carry both, equal where a step has no requests)."""
    per_request = phases.get(phase).per_request
    if key == "step_time_s":
        return not per_request
    return not (key == "latency_s" and not per_request)


def _serve_label(key: str, label: str, doc: dict[str, Any]) -> str:
    """Serve's step is one engine iteration and its TTFT the iterations a prompt rides in
    (no queueing is modelled): the labels say so, since TTFT equals TPOT when a prompt fits
    one iteration."""
    m = doc["metrics"]
    if key == "ttft_s" and m.get("tpot_s"):
        k = round(m["ttft_s"] / m["tpot_s"])
        return f"{label}: {k} iteration{'s' if k != 1 else ''}, no queueing"
    if key == "tpot_s":
        return f"{label}: one iteration"
    if key == "energy_per_step_j":
        return f"{label}: one iteration"
    return label


def _fmt(value: float | None, kind: Any) -> str:
    if value is None:
        return "-"
    if kind == "fraction":
        return f"{value:.1%}"
    if isinstance(kind, str):
        return f"{value:,.4g} {kind}"
    return units.format_quantity(value, kind)


def hardware_value(path: str, value: float | str) -> str:
    """An override value in SI for people, with the unit its path carries ("96 MiB")."""
    if path.endswith(".generation"):  # a memory-catalogue name (or its index)
        return value if isinstance(value, str) else generation_names([value])[0]
    if isinstance(value, str):  # a word (technology.spares=none)
        return value
    col = column_name(path)
    suffix = col[len(path) + 1:] if col != path else ""
    kind = next((k for k in units.KINDS if suffix and k.suffix == suffix), None)
    if kind is None:
        return f"{value:.6g}"
    return units.format_quantity(float(value), kind)


def option_text(key: str, value: Any) -> str:
    """One override as the option that gives it: `--seq-in 512`, `--set compute.units=96`."""
    if key in SCENARIO_FIELDS:
        return f"{option_name(key)} {value}"
    return f"{option_name(key)}={hardware_value(key, value).replace(' ', '')}"


def _chips(chips: int, tp: int, pp: int, cp: int = 1, ep: int = 1) -> str:
    if chips == 1:
        return "1 chip"
    extra = "".join(f", {name} {v}" for name, v in (("cp", cp), ("ep", ep)) if v != 1)
    return f"{chips} chips (tp {tp}, pp {pp}{extra})"


def title(doc: dict[str, Any]) -> str:
    """What ran: `llama2-70b [chat-decode-int8: decode, batch 1, seq_in 5, seq_out 200,
    w8a16] on h100-sxm, 2 chips (tp 2, pp 1); --phase decode --set compute.units=96`."""
    sc = doc["scenario"]
    text = (f"{doc['workload']} [{sc['name']}: {sc['description']}] on {doc['hardware']}, "
            f"{_chips(sc['chips'], sc['tp'], sc['pp'], sc.get('cp', 1), sc.get('ep', 1))}")
    given = " ".join(option_text(k, v) for k, v in doc["overrides"].items())
    return f"{text}; {given}" if given else text


def eval_tables(doc: dict[str, Any], capacity: dict[str, float], top: int = 15) -> Any:
    """What ran, headline metrics, memory per level, and the operators ranked by time."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    sc = doc["scenario"]
    heading = Text(title(doc), style="bold")
    engine = Engine.model_construct(**sc["engine"]) if sc.get("engine") is not None else None
    heading.append(setup_lines(engine, sc.get("stack")), style="none")
    head = Table(show_header=False)
    head.add_column("metric")
    head.add_column("value", justify="right")
    if not doc["feasible"]:
        return Group(heading, Text(f"infeasible: {doc['reason']}"))
    if sc["sequences_per_replica"] is not None and sc["batch"] in ("max", "best"):
        unit = "samples" if sc.get("pairs") else "sequences"  # a recommender's are samples
        head.add_row(f"{unit} per replica (batch {sc['batch']})",
                     f"{sc['sequences_per_replica']:,.0f}")
    if doc.get("training"):
        t = doc["training"]
        heading.append(
            f"\ntraining setup: micro-batch {t['micro_batch']} x {t['microbatches']} per step "
            f"per replica, ZeRO {t['zero']}, recomputation {t['recompute']}"
            + (", sequence parallel" if t["sequence_parallel"] else "")
            + (f", interleaved schedule ({t['virtual_stages']} virtual stages)"
               if t["virtual_stages"] > 1 else "")
            + "; per chip " + ", ".join(f"{k.replace('_', ' ')} "
                                        f"{units.format_quantity(v, units.BYTES)}"
                                        for k, v in t["per_chip_bytes"].items() if v),
            style="none")
    for key, (label, kind) in _METRIC_UNITS.items():
        value = doc["metrics"].get(key)
        if value is not None and _shown(key, sc["phase"]):
            head.add_row(_serve_label(key, label, doc) if phases.get(sc["phase"]).served
                         else label,
                         _fmt(value, kind))
    if doc.get("power_limited"):
        clock = doc["metrics"].get("clock_hz")
        at = f", {_fmt(clock, units.FREQUENCY)}" if clock is not None else ""
        head.add_row("power-limited", f"yes: core clock lowered to fit the TDP{at} (metrics "
                     "include it)")
    if doc.get("power_note"):
        head.add_row("power", f"not modelled: {doc['power_note']}")

    mem = Table(title="Memory per chip", title_justify="left")
    for col in ("level", "used", "capacity", "share"):
        mem.add_column(col, justify="left" if col == "level" else "right")
    for level, used in doc["metrics"]["memory_per_chip_bytes"].items():
        cap = capacity[level]
        mem.add_row(level, units.format_quantity(used, units.BYTES),
                    units.format_quantity(cap, units.BYTES), f"{used / cap:.1%}" if cap else "-")

    ops = Table(title=f"Operators by time (top {min(top, len(doc['ops']))} of "
                      f"{len(doc['ops'])}; per chip, totals over the count)",
                title_justify="left")
    levels = list(doc["metrics"]["memory_per_chip_bytes"])
    for col in ("operator", "count", "time", "share", "bound", "FLOPs", *levels):
        ops.add_column(col, justify="left" if col in ("operator", "bound") else "right")
    total = sum(r["time_s"] for r in doc["ops"]) or 1.0
    for r in doc["ops"][:top]:
        ops.add_row(r["name"], f"{r['count']:,.0f}", units.format_quantity(r["time_s"], units.TIME),
                    f"{r['time_s'] / total:.1%}", r["bound"],
                    f"{r['flops']:.3g}",
                    *(units.format_quantity(r["bytes"][lv], units.TRAFFIC) for lv in levels))
    bound_share: dict[str, float] = {}
    for r in doc["ops"]:
        bound_share[r["bound"]] = bound_share.get(r["bound"], 0.0) + r["time_s"] / total
    summary = Table(title="Time by bound", title_justify="left")
    summary.add_column("bound")
    summary.add_column("share", justify="right")
    for b, s in sorted(bound_share.items(), key=lambda kv: -kv[1]):
        summary.add_row(b, f"{s:.1%}")
    return Group(heading, head, mem, summary, ops)


# How a sweep table heads each headline metric of a phase (dse.phases: Phase.headline):
# header, and a Kind, or None for a rate shown with SI prefixes, its unit in the header.
_SWEEP_HEADER: dict[str, tuple[str, Any]] = {
    "step_time_s": ("step time", units.TIME),
    "latency_s": ("latency", units.TIME),
    "ttft_s": ("TTFT", units.TIME),
    "tpot_s": ("TPOT", units.TIME),
    "achieved_flop_per_s": ("achieved\n(system)", units.FLOP_RATE),
    "output_tokens_per_s": ("tokens/s\n(system)", None),
    "tokens_per_s": ("tokens/s\n(system)", None),
    "tokens_per_s_per_chip": ("tokens/s\nper chip", None),
    "samples_per_s": ("samples/s\n(system)", None),
    "decode_tokens_per_s": ("tokens/s\nper sequence", None),
    "mfu": ("MFU", "fraction"),
}
_POWER = (("power_per_chip_w", "power\nper chip", units.POWER),)
_COUNT = dataclasses.replace(units.FLOP_RATE, unit="")


def _header(key: str, width: int = 10) -> str:
    """A column header for a sweep key, broken at dots into lines of about `width`."""
    lines = [""]
    for part in key.replace(".", ". ").split(" "):
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append("")
        lines[-1] += part
    return "\n".join(lines)


def _cell(value: Any, kind: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if kind is None:  # a rate without a Kind: SI prefixes, the unit is in the header
        return units.format_quantity(float(value), _COUNT).strip()
    if kind == "fraction":
        return f"{float(value):.1%}"
    return units.format_quantity(float(value), kind)


def _value_cell(key: str, value: Any) -> str:
    return str(value) if key in SCENARIO_FIELDS else hardware_value(key, value)


def setup_lines(engine: Engine | None, stack: str | None) -> str:
    """The lines under a heading that say how the design ran: the serving engine (served
    phases) and the software stack; "" when neither applies."""
    return (("\n" + describe_engine(engine) if engine is not None else "")
            + (f"\nstack: {stack}" if stack else ""))


def sweep_heading(sw: Sweep) -> str:
    """What a sweep ran: workload, scenario(s), hardware, chips, the options every design
    shares, and what varies."""
    ev = sw.evaluations[0]
    names = ", ".join(dict.fromkeys(e.scenario_name for e in sw.evaluations))
    first = sw.frame.iloc[0]
    fixed = [option_text(k, first[column_of(k)]) for k in sw.points[0] if k not in sw.varied]
    ex = ev.execution
    text = (f"{ev.workload} [{names}] on {ev.hardware}, "
            f"{_chips(ev.chips, ev.tp, ev.pp, ex.cp if ex else 1, ex.ep if ex else 1)}")
    if fixed:
        text += "; " + " ".join(fixed)
    joiner = " x " if sw.mode == "grid" else ", "
    varied = joiner.join(option_name(k) for k in sw.varied) or "nothing"
    sc = ev.scenario_of(0)
    # the engine that ran (served phases): the stack's, with the scenario's fields
    text += setup_lines(engine_of(sc) if phases.get(sc.phase).served else None, sc.stack)
    return f"{text}\n{sw.n} design{'s' if sw.n > 1 else ''}, varying {varied} ({sw.mode})"


def _table() -> Any:
    """A compact table: a rule under the header, one space between columns."""
    from rich import box
    from rich.table import Table

    return Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1),
                 collapse_padding=True)


def sweep_tables(sw: Sweep) -> Any:
    """One row per design: its varied values and the headline metrics of its phase;
    infeasible designs listed below with the reason."""
    from rich.console import Group
    from rich.text import Text

    frame = sw.frame
    phases_run = list(dict.fromkeys(frame["phase"]))
    columns = [(key, *_SWEEP_HEADER[key]) for p in phases_run
               for key in phases.get(p).headline]
    columns = list({c[0]: c for c in columns}.values())
    columns += [c for c in _POWER if c[0] in frame and frame[c[0]].notna().any()]
    table = _table()
    table.add_column("#", justify="right", no_wrap=True)
    for key in sw.varied:
        table.add_column(_header(key), justify="right", no_wrap=True)
    for _, header, _kind in columns:
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("feasible", no_wrap=True)
    notes = []
    for r, row in enumerate(frame.to_dict("records")):
        cells = [str(r)]
        cells += [_value_cell(k, row[column_of(k)]) for k in sw.varied]
        if "batch" in sw.varied and not isinstance(row["batch"], int):  # max: what it came to
            cells[sw.varied.index("batch") + 1] += f" {row['sequences_per_replica']:,.0f}"
        cells += [_cell(row.get(col), kind) for col, _, kind in columns]
        cells.append("yes" if row["feasible"] else "no")
        if not row["feasible"]:
            notes.append(f"#{r}: {row['reason']}")
        table.add_row(*cells)
    parts: list[Any] = [Text(sweep_heading(sw), style="bold"), table]
    if notes:
        parts.append(Text("infeasible:\n" + "\n".join(notes)))
    return Group(*parts)


def ops_table(sw: Sweep, top: int = 15) -> Any:
    """The operators of every design (the longest `top` of each), one row each."""
    from rich.console import Group
    from rich.text import Text

    ops = sw.op_frame()
    table = _table()
    table.add_column("#", justify="right", no_wrap=True)
    for key in sw.varied:
        table.add_column(_header(key), justify="right", no_wrap=True)
    for col in ("operator", "count", "time", "share", "bound", "FLOPs"):
        table.add_column(col, justify="left" if col in ("operator", "bound") else "right",
                         no_wrap=True)
    for _, design in ops.groupby("design", sort=True):
        for row in design.head(top).to_dict("records"):
            table.add_row(str(row["design"]),
                          *(_value_cell(k, row[column_of(k)]) for k in sw.varied),
                          row["operator"], f"{row['count']:,.0f}",
                          units.format_quantity(row["time_s"], units.TIME),
                          f"{row['share']:.1%}", row["bound"], f"{row['flops']:.3g}")
    return Group(Text(sweep_heading(sw) + f"; operators, longest {top} of each design",
                      style="bold"), table)
