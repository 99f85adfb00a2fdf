"""What `dse eval` prints: the JSON document of one evaluated design and its tables."""

from __future__ import annotations

import math
from typing import Any

from dse import units
from dse.model import METRICS, Evaluation
from dse.model.evaluate import POWER_METRICS

_METRIC_UNITS = {
    "latency_s": ("latency", units.TIME), "ttft_s": ("time to first token", units.TIME),
    "decode_tokens_per_s": ("decode rate per sequence", "tokens/s"),
    "output_tokens_per_s": ("output tokens per second (system)", "tokens/s"),
    "samples_per_s": ("samples per second (system)", "samples/s"),
    "achieved_flop_per_s": ("achieved FLOP/s (system)", units.FLOP_RATE),
    "tokens_per_s_per_chip": ("tokens per second per chip", "tokens/s"),
    "power_w": ("power per chip", units.POWER),
    "energy_per_token_j": ("energy per token (system)", units.ENERGY),
    "energy_per_sample_j": ("energy per sample (system)", units.ENERGY),
    "energy_per_step_j": ("energy per step (system)", units.ENERGY),
    "area_mm2": ("die area (modelled)", "mm2"),
}


def _num(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def eval_document(res: Evaluation, i: int = 0, no_power: str | None = None) -> dict[str, Any]:
    """The issue's JSON schema for design i: feasible, reason, metrics, ops; power and
    energy where the spec's process node is known (else `power_note` says why not)."""
    sc = res.scenario
    doc: dict[str, Any] = {
        "hardware": res.hardware, "workload": res.workload,
        "scenario": {"phase": sc.phase, "batch": sc.batch, "seq_in": sc.seq_in,
                     "seq_out": sc.seq_out, "precision": sc.precision,
                     "chips": res.chips, "tp": res.tp, "pp": res.pp,
                     "sequences_per_replica": _num(res.sequences[i])},
        "overrides": {k: float(v[i]) for k, v in res.batch.overrides.items()},
        "feasible": bool(res.feasible[i]),
        "reason": str(res.reason[i]) or None,
        "metrics": {m: _num(res.metrics[m][i]) if m in res.metrics else None
                    for m in (*METRICS, *POWER_METRICS)},
        "power_limited": None if res.power_limited is None else bool(res.power_limited[i]),
        "power_note": no_power,
    }
    doc["metrics"]["memory_bytes"] = {lv: float(res.memory_bytes[i, k])
                                      for k, lv in enumerate(res.level_names)}
    doc["ops"] = [{k: r[k] for k in ("name", "count", "flops", "bytes", "time_s", "bound")}
                  for r in res.op_records(i)] if res.feasible[i] else []
    return doc


def _fmt(value: float | None, kind: Any) -> str:
    if value is None:
        return "-"
    if isinstance(kind, str):
        return f"{value:,.4g} {kind}"
    return units.format_quantity(value, kind)


def eval_tables(doc: dict[str, Any], capacity: dict[str, float], top: int = 15) -> Any:
    """Headline metrics, memory per level, and the operators ranked by time."""
    from rich.console import Group
    from rich.table import Table

    sc = doc["scenario"]
    title = (f"{doc['workload']} on {doc['hardware']}: {sc['phase']}, batch {sc['batch']}, "
             f"seq_in {sc['seq_in']}, seq_out {sc['seq_out']}, {sc['precision']}, "
             f"{sc['chips']} chip(s), tp {sc['tp']}, pp {sc['pp']}")
    head = Table(title=title, show_header=False, title_justify="left")
    head.add_column("metric")
    head.add_column("value", justify="right")
    if not doc["feasible"]:
        head.add_row("feasible", "no")
        head.add_row("reason", doc["reason"])
        return head
    if sc["sequences_per_replica"] is not None and sc["batch"] == "max":
        head.add_row("sequences per replica (batch max)", f"{sc['sequences_per_replica']:,.0f}")
    for key, (label, kind) in _METRIC_UNITS.items():
        value = doc["metrics"][key]
        if value is not None:
            head.add_row(label, _fmt(value, kind))
    if doc.get("power_limited"):
        head.add_row("power-limited", "yes: slowed to fit the TDP (metrics include it)")
    if doc.get("power_note"):
        head.add_row("power", f"not modelled: {doc['power_note']}")

    mem = Table(title="Memory per chip", title_justify="left")
    for col in ("level", "used", "capacity", "share"):
        mem.add_column(col, justify="left" if col == "level" else "right")
    for level, used in doc["metrics"]["memory_bytes"].items():
        cap = capacity[level]
        mem.add_row(level, units.format_quantity(used, units.BYTES),
                    units.format_quantity(cap, units.BYTES), f"{used / cap:.1%}" if cap else "-")

    ops = Table(title=f"Operators by time (top {min(top, len(doc['ops']))} of "
                      f"{len(doc['ops'])}; per chip, totals over the count)",
                title_justify="left")
    levels = list(doc["metrics"]["memory_bytes"])
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
    return Group(head, mem, summary, ops)
