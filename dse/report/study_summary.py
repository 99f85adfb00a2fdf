"""summary.md of a study run: the best designs and their parameters, what bounds their
operators, how they compare with the reference chips, and which parameters matter most for
each objective."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dse import units
from dse.spec import vocabulary


def _fmt(column: str, value: float) -> str:
    """A value with its unit, from the column's suffix."""
    if not np.isfinite(value):
        return "-"
    for kind in (units.BYTES, units.BANDWIDTH, units.FLOP_RATE, units.POWER, units.TIME,
                 units.FREQUENCY, units.ENERGY):
        if kind.suffix and column.endswith("_" + kind.suffix):
            return units.format_quantity(value, kind, digits=3)
    if column.endswith("_mm2"):
        return f"{value:,.0f} mm2"
    return f"{value:,.4g}"


def best_rows(front: pd.DataFrame, objectives: list[str], directions: list[str]
              ) -> list[tuple[str, pd.Series]]:
    """(why, row): the best front design for each objective, and the balanced one (the
    design with the largest product of its objectives each relative to the front's best)."""
    if front.empty:
        return []
    out = []
    for col, d in zip(objectives, directions, strict=True):
        i = front[col].idxmax() if d == "maximize" else front[col].idxmin()
        out.append((f"best {col.removeprefix('objective.')}", front.loc[i]))
    if len(objectives) > 1:
        score = np.zeros(len(front))
        for col, d in zip(objectives, directions, strict=True):
            v = front[col].to_numpy(float)
            best = v.max() if d == "maximize" else v.min()
            score += np.log(v / best) if d == "maximize" else np.log(best / v)
        i = front.index[int(np.argmax(score))]
        if all(i != r.name for _, r in out):
            out.append(("balanced (largest product of objectives relative to the best)",
                        front.loc[i]))
    return out


def bound_shares(op_records: list[dict]) -> str:
    """'HBM3 71%, compute 20%, ...' : step time by the resource bounding each operator."""
    total = sum(r["time_s"] for r in op_records) or 1.0
    by: dict[str, float] = {}
    for r in op_records:
        by[r["bound"]] = by.get(r["bound"], 0.0) + r["time_s"]
    return ", ".join(f"{b} {t / total:.0%}" for b, t in sorted(by.items(), key=lambda x: -x[1])
                     if t / total >= 0.01)


def summary_markdown(*, name: str, description: str, run_line: str, params: list[tuple[str, str]],
                     objectives: list[str], units_of: dict[str, str], directions: list[str],
                     trials: pd.DataFrame, front: pd.DataFrame, references: pd.DataFrame,
                     bounds: dict[int, dict[str, str]], importances: dict[str, dict[str, float]],
                     workloads: list[tuple[str, str]], extra: list[str]) -> str:
    """The summary as Markdown. params: (column, label); workloads: (name, throughput
    column); bounds: trial number -> workload -> bound shares."""
    lines = [f"# Study `{name}`", "", description, "", run_line, ""]
    n_ok = int(trials["feasible"].sum()) if len(trials) else 0
    lines += [f"{len(trials)} trials, {n_ok} feasible, {len(front)} on the Pareto front.", ""]
    lines += extra
    best = best_rows(front, objectives, directions)
    if best:
        lines += ["## Best designs", ""]
        head = ["design", "trial"] + [lab for _, lab in params] + \
               [f"{c.removeprefix('objective.')} ({units_of[c]})" for c in objectives] + \
               ["area"] + [f"{w} throughput" for w, _ in workloads]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for why, row in best:
            cells = [why, str(int(row["number"]))] + [_fmt(c, row[c]) for c, _ in params] + \
                    [f"{row[c]:.4g}" for c in objectives] + \
                    [_fmt("area_per_chip_mm2", row.get("area_per_chip_mm2", np.nan))] + \
                    [f"{row[c]:,.4g}" for _, c in workloads]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        lines += ["What bounds each best design's step time (share of the step by the resource "
                  "that bounds each operator):", ""]
        for why, row in best:
            b = bounds.get(int(row["number"]), {})
            lines.append(f"- {why} (trial {int(row['number'])}): " + "; ".join(
                f"{w}: {s}" for w, s in b.items()))
        lines.append("")
    if len(references):
        lines += ["## Against the reference chips", "",
                  "Each chip as its file gives it, on the same workloads (throughput; the "
                  "best designs' ratio to it).", ""]
        head = ["chip", "feasible", "area"] + [f"{w}" for w, _ in workloads] + \
               [f"best {c.removeprefix('objective.')} / chip" for c in objectives
                if units_of[c] != "x base"][:0]
        lines += ["| " + " | ".join([*head, "note"]) + " |", "|" + "---|" * (len(head) + 1)]
        for _, r in references.iterrows():
            cells = [str(r["chip"]), "yes" if r["feasible"] else "no",
                     _fmt("area_per_chip_mm2", r.get("area_per_chip_mm2", np.nan))]
            cells += [f"{r[c]:,.4g}" if np.isfinite(r[c]) else "-" for _, c in workloads]
            lines.append("| " + " | ".join([*cells, str(r["reason"])[:120]]) + " |")
        lines.append("")
        for why, row in best:
            ratios = []
            for _, r in references.iterrows():
                parts = [f"{w} {row[c] / r[c]:.2f}x" for w, c in workloads
                         if np.isfinite(r[c]) and r[c] > 0 and np.isfinite(row[c])]
                ratios.append(f"vs {r['chip']}: " + ", ".join(parts))
            lines.append(f"- {why}: " + "; ".join(ratios))
        lines.append("")
    if importances:
        lines += ["## Which parameters matter", "",
                  "Optuna's PED-ANOVA importance of each parameter for each objective over the "
                  "feasible trials: how differently the best 10% of designs set it (shares "
                  "sum to 1 per objective).", ""]
        cols = list(importances)
        names = sorted({p for d in importances.values() for p in d})
        lines += ["| parameter | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
        for p in names:
            lines.append(f"| {p} | " + " | ".join(f"{importances[c].get(p, 0.0):.2f}"
                                                   for c in cols) + " |")
        lines.append("")
    return "\n".join(lines)


def param_label(path: str) -> str:
    term = next((t for p, t in vocabulary.terms().items() if vocabulary._matches(p, path, None)),
                None)
    unit = term.kind.unit if term is not None and term.kind is not None else ""
    return f"{path} ({unit})" if unit else path
