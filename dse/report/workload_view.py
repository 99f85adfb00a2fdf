"""How a lowered workload is shown (`dse workload`): documents and rows first, then tables."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from rich.console import Group
from rich.table import Table
from rich.text import Text

from dse import units
from dse.spec.workload import (
    GemmSpec,
    RecommenderSpec,
    Scenario,
    WorkloadSpec,
    parameter_counts,
)
from dse.workloads import describe_scenario
from dse.workloads.optable import OpTable, class_bytes

_BYTE_KEYS = ("weights", "activations", "kv_cache", "total")


def params(spec: WorkloadSpec) -> int:
    """Parameter count (for a GEMM: the elements of its weight operand)."""
    if isinstance(spec, GemmSpec):
        return spec.batch * spec.k * spec.n
    if isinstance(spec, RecommenderSpec):
        from dse.workloads.recommender import dense_parameters

        return spec.embedding_parameters() + dense_parameters(spec)
    return parameter_counts(spec)["total"]


def _bytes(per_class: np.ndarray) -> dict[str, float]:
    """Bytes by class: the three inference classes always, others only where nonzero."""
    return {c: v for c, v in class_bytes(per_class).items() if c in _BYTE_KEYS or v}


def scenarios(spec: WorkloadSpec, ran: str | None = None) -> list[dict[str, Any]]:
    """The workload's scenarios in file order (the first is the default), each with its
    one-line description; `ran` marks the one that ran (a phase's documented default, named
    "<phase> (default)", is not in the file and is not listed)."""
    return [{"name": name, "description": describe_scenario(sc), "default": k == 0,
             "ran": name == ran, **sc.model_dump()}
            for k, (name, sc) in enumerate(spec.scenarios.items())]


def scenario_lines(entries: list[dict[str, Any]], indent: str = "  ") -> list[str]:
    """One line per scenario: name, description, (default) and (ran) marks."""
    width = max((len(e["name"]) for e in entries), default=0)
    out = []
    for e in entries:
        marks = [m for m, on in (("default", e["default"]), ("ran", e.get("ran"))) if on]
        tail = f" ({', '.join(marks)})" if marks else ""
        out.append(f"{indent}{e['name']:<{width}}  {e['description']}{tail}")
    return out


def lengths_document(sc: Scenario) -> dict[str, Any] | None:
    """The scenario's length distribution (None without one): its name (None inline), E[L]
    in tokens, E[L^2] in tokens^2, the share of a padded seq_in run it skips, its source."""
    if sc.lengths is None:
        return None
    mean, square = sc.lengths.moments()
    return {"name": sc.lengths.name, "mean_tokens": mean, "mean_square_tokens2": square,
            "padding_skipped_share": 1.0 - mean / sc.seq_in, "source": sc.lengths.source}


def workload_document(spec: WorkloadSpec, scenario: Scenario, table: OpTable,
                      convention: str, name: str | None = None,
                      note: str | None = None) -> dict[str, Any]:
    """Totals and per-operator rows in SI units. Operator `flops` and `bytes` are totals over
    the operator's `count` repeats. `name`: the scenario that ran; `note`: how the shown
    scenario differs from it (batch max lowered per sequence)."""
    ops = []
    for i in range(len(table)):
        ops.append({
            "name": str(table.name[i]), "kind": str(table.kind[i]),
            "stage": str(table.stage[i]), "count": float(table.count[i]),
            "flops": float(table.count[i] * table.flops[i]),
            "bytes": _bytes(table.count[i] * table.bytes[i]),
        })
    return {
        "name": spec.name,
        "scenario": {"name": name, "description": describe_scenario(scenario),
                     **scenario.model_dump()},
        "lengths": lengths_document(scenario),
        "note": note, "scenarios": scenarios(spec, name), "convention": convention,
        "params": params(spec), "flops": table.total_flops,
        "bytes": _bytes(table.count @ table.bytes),
        "arithmetic_intensity": table.arithmetic_intensity, "ops": ops,
    }


def sweep_row(doc: dict[str, Any]) -> dict[str, Any]:
    """One flat row of totals for a sweep table or CSV."""
    sc = doc["scenario"]
    return {"name": doc["name"], "phase": sc["phase"], "batch": sc["batch"],
            "seq_in": sc["seq_in"], "seq_out": sc["seq_out"], "precision": sc["precision"],
            "flops": doc["flops"], **{f"bytes_{k}": v for k, v in doc["bytes"].items()},
            "arithmetic_intensity_flop_per_byte": doc["arithmetic_intensity"]}


def op_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Flat per-operator rows for CSV output."""
    return [{"name": op["name"], "kind": op["kind"], "stage": op["stage"],
             "count": op["count"], "flops": op["flops"],
             **{f"bytes_{k}": v for k, v in op["bytes"].items()}} for op in doc["ops"]]


def _fmt_intensity(v: float | None) -> str:
    """FLOP per byte, or "-" where there is none (no bytes moved; JSON: null)."""
    return f"{v:.3g}" if v is not None and math.isfinite(v) else "-"


def _fmt_bytes(v: float) -> str:
    return units.format_quantity(v, units.TRAFFIC) if v else "-"


def _fmt_flops(v: float) -> str:
    return units.format_quantity(v, units.FLOP_RATE).replace("FLOP/s", "FLOP")


def workload_tables(doc: dict[str, Any]) -> Group:
    """The scenarios of the workload, headline totals and the operator table, largest FLOPs
    first."""
    sc = doc["scenario"]
    head = Text()
    if doc["scenarios"]:
        head.append(f"Scenarios of {doc['name']} (--scenario NAME; --phase P picks the first "
                    "of that phase)\n")
        head.append("\n".join(scenario_lines(doc["scenarios"])) + "\n\n")
    head.append(doc["name"], style="bold")
    head.append(f" [{sc['name']}: {sc['description']}]" if sc.get("name")
                else f"  {sc['description']}")
    if doc["convention"] != "default":
        head.append(f", convention {doc['convention']}")
    if doc.get("note"):
        head.append(f"\nnote: {doc['note']}")
    if doc.get("lengths"):
        ln = doc["lengths"]
        head.append(f"\nlengths {ln['name'] or '(inline)'}: mean {ln['mean_tokens']:.4g} tokens, "
                    f"mean square {ln['mean_square_tokens2']:.5g} (the padding of seq_in "
                    f"{sc['seq_in']} skipped: {ln['padding_skipped_share']:.1%} of its tokens)")
    b = doc["bytes"]
    # the classes a workload moves: weights, activations and the KV cache always (a
    # Transformer's three), others (embedding rows, gradients) where it has them
    shown = [(c, c.replace("kv_cache", "KV cache").replace("_", " "))
             for c in b if c != "total" and (c in _BYTE_KEYS or b[c])]
    head.append(f"\nparameters {doc['params']:.4g}   FLOPs {_fmt_flops(doc['flops'])}   "
                f"bytes {_fmt_bytes(b['total'])} ("
                + ", ".join(f"{label} {_fmt_bytes(b[c])}" for c, label in shown) + ")   "
                f"arithmetic intensity {_fmt_intensity(doc['arithmetic_intensity'])} FLOP/B")
    ops = Table(title="Operators (totals over their repeats)", title_justify="left")
    for col in ("operator", "kind", "stage", "count", "FLOPs", *(label for _, label in shown),
                "FLOP/B"):
        ops.add_column(col, justify="left" if col in ("operator", "kind", "stage")
                       else "right")
    for op in sorted(doc["ops"], key=lambda o: -o["flops"]):
        ob = op["bytes"]
        # an operator that moves no bytes (count 0: recomputation the setup does not run)
        # has no intensity: "-" like its other empty cells, as the JSON leaves it out
        ai = _fmt_intensity(op["flops"] / ob["total"] if ob["total"] else None)
        ops.add_row(op["name"], op["kind"], op["stage"], f"{op['count']:.4g}",
                    _fmt_flops(op["flops"]), *(_fmt_bytes(ob.get(c, 0.0)) for c, _ in shown),
                    ai)
    return Group(head, ops)


def sweep_table(rows: list[dict[str, Any]]) -> Table:
    """One row per swept value."""
    table = Table(title="Sweep", title_justify="left")
    for col in ("seq_in", "seq_out", "batch", "FLOPs", "bytes", "FLOP/B"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(str(r["seq_in"]), str(r["seq_out"]), str(r["batch"]),
                      _fmt_flops(r["flops"]), _fmt_bytes(r["bytes_total"]),
                      _fmt_intensity(r["arithmetic_intensity_flop_per_byte"]))
    return table
