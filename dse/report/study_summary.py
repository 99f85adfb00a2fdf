"""summary.md of a study run, and the closing lines `dse study` prints: first the answer in
words (the best design, how it compares with the base and the reference chips, what bounds
it, why the other designs are infeasible), then the best designs and their parameters, what
bounds their operators, the reference chips, and which parameters matter for each objective.
Every value carries its unit; an objective over several workloads names the chip it is
relative to. The facts it rests on and the wording of a design are in
dse.report.study_facts, the robustness sections in dse.report.robustness_text."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dse.report.robustness_text import (
    _region_paragraphs,
    _region_section,
    _sensitivity_paragraph,
    _sensitivity_section,
)
from dse.report.study_facts import (
    MAX_CONSOLE_BEST,
    Facts,
    _against,
    _area_objectives,
    _design,
    _fmt,
    _held,
    _join,
    _objectives,
    _power,
    _ratios,
    _table,
    _trade,
    _why_not,
    best_rows,
    number,
    quantity,
)
from dse.spec import vocabulary


def answer(facts: Facts, trials: pd.DataFrame, front: pd.DataFrame,
           references: pd.DataFrame) -> list[str]:
    """The answer in words: one paragraph per point, Markdown."""
    n = len(trials)
    n_ok = int(trials["feasible"].sum()) if n else 0
    if n == 0:
        return ["**No trials yet.** Run the study (or more trials) for an answer."]
    if n_ok == 0:
        return [f"**No feasible design.** None of the {n:,} designs meets every constraint: "
                f"{_why_not(facts, n)}. Until one does there is no front and no best design: "
                "relax the constraint that binds, or move the parameters' ranges toward what "
                "the closest designs reached."]
    best = best_rows(front, facts.objectives, facts.directions)
    out = []
    first_why, first = best[0]
    objectives = [c.removeprefix("objective.") for c in facts.objectives]
    if len(objectives) == 1:
        lead = (f"**Answer.** The best design for {objectives[0]} is trial "
                f"{int(first['number'])}, with {_design(facts, first)}")
    elif len(front) == 1:
        lead = (f"**Answer.** One design is best on every objective ({_join(objectives)}): "
                f"trial {int(first['number'])}, with {_design(facts, first)}")
    else:
        lead = (f"**Answer.** The Pareto front holds {len(front)} designs trading "
                f"{_join(objectives)} against each other. The {first_why.removeprefix('best ')}"
                f" optimum is trial {int(first['number'])}, with {_design(facts, first)}")
    area = float(first.get("area_per_chip_mm2", np.nan))
    if np.isfinite(area):
        lead += f", in {area:,.0f} mm2" + (f" of the {facts.budget_mm2:,.0f} mm2 budget"
                                           if facts.budget_mm2 is not None else "")
    reached = _objectives(facts, first, area_shown=np.isfinite(area))
    vs = _against(facts, first, references)
    if reached or vs:
        lead += ". It reaches " + _join(reached) if reached else ". "
        lead += (f"; {vs}." if reached else vs[0].upper() + vs[1:] + ".") if vs else "."
    else:
        lead += "."
    out.append(lead)
    trade = _trade(facts, first)
    if trade:
        out.append(trade)
    if len(best) > 1:
        out.append("The other ends of the front: " + "; ".join(
            f"{why}: trial {int(r['number'])} ({_design(facts, r)}): "
            f"{', '.join(_objectives(facts, r))}" for why, r in best[1:]) + ".")
    held = _held(facts, first)
    out.append(f"What bounds trial {int(first['number'])}: " + (
        "; ".join(held) + "." if held else "no constraint or range end: its objectives are "
        "set by the model's trade-offs within the ranges.")
        + (" A range end that binds may be cutting the search short." if any(
            h.startswith("the top") or h.startswith("the bottom") for h in held) else ""))
    out += _region_paragraphs(facts)
    if len(facts.sensitivity) > 1:
        out.append(_sensitivity_paragraph(facts))
    if n_ok < n:
        few = "Few designs are feasible: " if n_ok < max(10, n // 10) else ""
        out.append(f"{few}{n_ok:,} of {n:,} designs are feasible; the {n - n_ok:,} others: "
                   f"{_why_not(facts, n - n_ok)}.")
    else:
        out.append(f"All {n:,} designs are feasible.")
    return out


def console_lines(facts: Facts, trials: pd.DataFrame, front: pd.DataFrame,
                  references: pd.DataFrame) -> list[str]:
    """The closing lines `dse study` prints after its run line: the best designs, how the
    first compares, and why the others are infeasible."""
    n = len(trials)
    n_ok = int(trials["feasible"].sum()) if n else 0
    if n == 0:
        return []
    if n_ok == 0:
        return [f"no feasible design among {n:,}: {_why_not(facts, n)}"]
    out = []
    best = best_rows(front, facts.objectives, facts.directions)
    for why, r in best[:MAX_CONSOLE_BEST]:
        area = float(r.get("area_per_chip_mm2", np.nan))
        where = f"; {area:,.0f} mm2" if np.isfinite(area) and not _area_objectives(facts) \
            else ""
        out.append(f"{why}: trial {int(r['number'])} ({_design(facts, r)}): "
                   f"{', '.join(_objectives(facts, r))}{where}")
    vs = _against(facts, best[0][1], references)
    if vs:
        out.append(f"trial {int(best[0][1]['number'])}: {vs}")
    held = _held(facts, best[0][1])
    if held:
        out.append(f"held by: {'; '.join(held)}")
    if n_ok < n:
        out.append(f"infeasible: {n - n_ok:,} of {n:,}: {_why_not(facts, n - n_ok)}")
    return out


def _objective_head(column: str, workload: str | None, unit: str) -> str:
    """'encoder: bert-large throughput (samples/s)' for an objective that is one workload's
    throughput (that workload's column is then left out), else 'memory_bound (x h100-sxm)'."""
    name = column.removeprefix("objective.")
    if workload is None:
        return f"{name} ({unit})"
    what = f"{workload} throughput"
    return f"{what} ({unit})" if name in ("throughput", workload) else f"{name}: {what} ({unit})"


def _cell(value: float, unit: str) -> str:
    """A table cell of a column whose header gives the unit."""
    if unit in ("mm2", "W") and np.isfinite(value):
        return f"{value:,.0f}"
    return number(value)


def summary_markdown(facts: Facts, trials: pd.DataFrame, front: pd.DataFrame,
                     references: pd.DataFrame, bounds: dict[int, dict[str, str]],
                     importances: dict[str, dict[str, float]],
                     opening: list[str] | None = None) -> str:
    """The summary as Markdown. bounds: trial number -> workload -> bound shares; opening:
    the verdict section (dse.report.verdict), which replaces the answer paragraphs."""
    lines = [f"# Study `{facts.name}`", ""]
    if facts.description:
        lines += [facts.description, ""]
    run = [f"Run: {facts.run_line}.", "", *(x for e in facts.extra for x in (e, ""))]
    if opening:  # the run's own lines first: its timings are not part of the verdict
        lines += [*run, *opening]
    else:
        lines += [p for para in answer(facts, trials, front, references) for p in (para, "")]
        lines += run
    best = best_rows(front, facts.objectives, facts.directions)
    columns = [(w, col, unit) for w, col, unit in facts.workloads if col not in facts.shown_by]
    if best:
        lines += ["## Best designs", ""]
        same = {o: w for w, col, _ in facts.workloads for c, o in facts.shown_by.items()
                if c == col}
        area_head = [] if _area_objectives(facts) else ["area"]
        head = ["design", "trial"] + [path for _, path, *_ in facts.params] + \
               [_objective_head(c, same.get(c), facts.units_of[c]) for c in facts.objectives] \
               + area_head + [f"{w} ({unit})" for w, _, unit in columns]
        rows = [[why, str(int(row["number"]))] + [_fmt(c, row[c]) for c, *_ in facts.params]
                + [_cell(row[c], facts.units_of[c]) for c in facts.objectives]
                + [_fmt("area_per_chip_mm2", row.get("area_per_chip_mm2", np.nan))
                   for _ in area_head]
                + [number(row[c]) for _, c, _ in columns] for why, row in best]
        lines += [*_table(head, rows), ""]
        lines += ["What bounds each best design's step time (share of the step by the resource "
                  "that bounds each operator):", ""]
        for why, row in best:
            b = bounds.get(int(row["number"]), {})
            lines.append(f"- {why} (trial {int(row['number'])}): " + "; ".join(
                f"{w}: {s}" for w, s in b.items()))
        lines.append("")
    lines += _region_section(facts)
    lines += _sensitivity_section(facts)
    if facts.infeasible:
        lines += ["## Why designs are infeasible", "",
                  "Designs that break each constraint, with the closest any design came (a "
                  "design may break several):", ""]
        lines += _table(["designs", "why"], [[f"{k:,}", why] for k, why in facts.infeasible])
        lines.append("")
    if len(references):
        lines += _references(facts, references, best)
    if importances:
        lines += ["## Which parameters matter", "",
                  "Optuna's PED-ANOVA importance of each parameter for each objective over the "
                  "feasible trials: how differently the best 10% of designs set it (shares "
                  "sum to 1 per objective).", ""]
        cols = list(importances)
        names = sorted({p for d in importances.values() for p in d})
        lines += _table(["parameter", *cols], [
            [p, *(f"{importances[c].get(p, 0.0):.2f}" for c in cols)] for p in names])
        lines.append("")
    return "\n".join(lines)


def _references(facts: Facts, references: pd.DataFrame, best: list[tuple[str, pd.Series]]
                ) -> list[str]:
    lines = ["## Against the reference chips", "",
             "Each chip as its file gives it, on the same workloads (throughput; — where it does "
             "not run a workload; area and power where its file names a process node the area "
             f"model prices). The base is {facts.base}.", ""]
    head = ["chip", "feasible", "area", "power"] + \
           [f"{w} ({unit})" for w, _, unit in facts.workloads] + ["note"]
    rows = []
    for _, r in references.iterrows():
        missing = str(r.get("not_modelled", "") or "")
        area = float(r.get("area_per_chip_mm2", np.nan))
        power = _power(r)
        notes = [x for x in (str(r.get("reason", "") or "")[:160], missing) if x]
        rows.append([str(r["chip"]) + (" (base)" if r["chip"] == facts.base else ""),
                     "yes" if r["feasible"] else "no",
                     "not modelled" if missing and not np.isfinite(area)
                     else _fmt("area_per_chip_mm2", area),
                     "not modelled" if missing and not np.isfinite(power)
                     else quantity(power, "W")]
                    + [number(float(r[c])) if c in r else "—" for _, c, _ in facts.workloads]
                    + ["; ".join(notes)])
    lines += [*_table(head, rows), ""]
    lines += _plotted_references(facts, references)
    if best:
        lines += ["Each best design's throughput relative to each chip's:", ""]
        for why, row in best:
            parts = []
            for _, r in references.iterrows():
                ratios = _ratios(facts, row, {c: float(r[c]) for _, c, _ in facts.workloads
                                              if c in r})
                shown_r = ", ".join(f"{w} {x:.2f}x" for w, x in ratios) or "runs none of them"
                parts.append(f"vs {r['chip']}: {shown_r}")
            lines.append(f"- {why} (trial {int(row['number'])}): " + "; ".join(parts))
        lines.append("")
    return lines


def _cell_text(value: object) -> str:
    """A text cell of the references table ("" for an empty one, NaN once read back)."""
    return "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def _plotted_references(facts: Facts, references: pd.DataFrame) -> list[str]:
    """Which chips the Pareto plot leaves out (a workload of its axes does not run: each
    in one line with the reason) and which it marks as outside the study's budget."""
    axes = facts.objectives[:2]
    if len(axes) < 2:
        return []
    gone, outside = [], []
    for _, r in references.iterrows():
        name = str(r["chip"])
        if not all(np.isfinite(float(r.get(c, np.nan))) for c in axes):
            why = _cell_text(r.get("not_run")) or _cell_text(r.get("reason")) or \
                "no value on these objectives"
            gone.append(f"- {name}: does not run {why}")
        elif over := _cell_text(r.get("outside_budget")):
            outside.append(f"{name} ({over})")
    lines = []
    if gone:
        lines += ["Not on the Pareto plot (a workload of its objectives does not run):", "",
                  *gone, ""]
    if outside:
        lines += ["On the Pareto plot but outside the study's budget (dashed outline): "
                  + "; ".join(outside) + ".", ""]
    return lines


def param_label(path: str) -> str:
    term = next((t for p, t in vocabulary.terms().items() if vocabulary._matches(p, path, None)),
                None)
    unit = term.kind.unit if term is not None and term.kind is not None else ""
    return f"{path} ({unit})" if unit else path
