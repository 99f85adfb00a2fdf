"""The validation page's generated part (tools/docs_hooks.py): `dse validate` on the shipped
measurements as tables by phase, file and stack, the chips' hardware view, every row, and
the predicted-vs-measured plot."""

from __future__ import annotations

from typing import Any

from docs_markdown import code, table, text


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
    from dse.report.validation_view import metric_label

    def value(x: float | None, metric: str) -> str:
        """A measured or predicted value in its unit, as the validation plot labels it."""
        if x is None:
            return "-"
        unit = metric_label(metric)[1]
        if isinstance(unit, units.Kind):
            return units.format_quantity(x, unit, 4)
        return f"{x:.4g}" + (f" {unit}" if unit else "")

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


