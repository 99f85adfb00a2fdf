"""The verdict of a study in words with its numbers: what the best design gives up and buys
against the reference chips (peak FLOPS first), what it gains on each workload, what the
model can resolve (the near-optimal region) and which assumptions the answer rests on (the
alternatives' runs). summary.md opens with it, and the README's answer section is this text
for the shipped middle-ground study (tools/readme-answer copies it; a test compares them).
No I/O."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dse.report.robustness_text import _region_paragraphs
from dse.report.study_facts import (
    Facts,
    _design,
    _fmt,
    _held,
    _join,
    _objectives,
    _ratios,
    _table,
    _why_not,
    best_rows,
    quantity,
)
from dse.search import robustness

HEADING = "## Verdict"
PEAK = "peak_bf16_flop_per_s"  # the column of the designs' dense bf16 peak


def _is_number(value: object) -> bool:
    try:
        return bool(np.isfinite(float(value)))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def _budgets(facts: Facts) -> str:
    """'within 757 mm2 of silicon per chip, the 858 mm2 reticle and a 700 W power cap'."""
    words = {"the area budget": "{v:,.0f} mm2 of silicon per chip (the area budget)",
             "the power cap": "a {v:,.0f} W power cap"}
    parts = [words.get(what, f"{what} ({{v:,.0f}} {unit})").format(v=limit)
             for what, _, limit, unit in facts.limits]
    if facts.tdp_w is not None and not any(w == "the power cap" for w, *_ in facts.limits):
        parts.append(f"the base's {facts.tdp_w:,.0f} W TDP (the clock drops to hold it)")
    return _join(parts) if parts else ""


def _first_reference(facts: Facts, references: pd.DataFrame) -> pd.Series | None:
    """The first reference chip other than the base (the chip the design is set against)."""
    for _, r in references.iterrows():
        if str(r["chip"]) != facts.base:
            return r
    return references.iloc[0] if len(references) else None


def _peak_sentence(row: pd.Series, ref: pd.Series) -> str:
    """'It keeps 100% of h100-sxm's peak FLOPS (989 against 989 TFLOPS dense bf16)'."""
    mine, theirs = float(row.get(PEAK, np.nan)), float(ref.get(PEAK, np.nan))
    if not (np.isfinite(mine) and np.isfinite(theirs) and theirs > 0):
        return ""
    share = mine / theirs
    shown = (f"{_fmt(PEAK, mine).replace(' FLOP/s', '')} against "
             f"{_fmt(PEAK, theirs)} dense bf16")
    if share < 0.995:
        head = f"gives up {1 - share:.0%} of {ref['chip']}'s peak FLOPS"
    elif share > 1.005:
        head = f"has {share - 1:.0%} more peak FLOPS than {ref['chip']}"
    else:
        head = f"keeps {ref['chip']}'s peak FLOPS"
    return f"{head} ({shown})"


def _changes(facts: Facts, row: pd.Series, chip: str) -> tuple[list[str], list[str]]:
    """(what the design buys, what it gives up) against `chip`'s own parameter values."""
    theirs = dict(facts.reference_params).get(chip, {})
    more, fewer = [], []
    for col, path, *_ in facts.params:
        mine, other = row.get(col), theirs.get(col, np.nan)
        if not (_is_number(mine) and _is_number(other) and float(other) > 0):
            continue
        change = float(mine) / float(other) - 1
        text = f"{path} {_fmt(col, float(mine))} against {_fmt(col, float(other))}"
        if change > 0.005:
            more.append(f"{text} ({change:+.0%})")
        elif change < -0.005:
            fewer.append(f"{text} ({change:+.0%})")
    return more, fewer


def _gains_table(facts: Facts, row: pd.Series, references: pd.DataFrame) -> list[str]:
    """Each workload: the design's throughput and its ratio to each reference that runs it."""
    chips = [(str(r["chip"]), {c: float(r[c]) for _, c, _ in facts.workloads if c in r})
             for _, r in references.iterrows()]
    chips = [(c, t) for c, t in chips if _ratios(facts, row, t)]
    head = ["workload", f"trial {int(row['number'])}",
            *[f"x {c}" + (" (base)" if c == facts.base else "") for c, _ in chips]]
    rows = []
    for w, col, unit in facts.workloads:
        mine = float(row.get(col, np.nan))
        cells = [w, quantity(mine, unit)]
        for _, theirs in chips:
            other = theirs.get(col, np.nan)
            cells.append(f"{mine / other:.2f}x" if np.isfinite(mine) and np.isfinite(other)
                         and other > 0 else "—")
        rows.append(cells)
    return _table(head, rows)


def _not_running(facts: Facts, references: pd.DataFrame) -> str:
    """The references that run none of the workloads, with why (one line)."""
    out = []
    for _, r in references.iterrows():
        if not any(np.isfinite(float(r[c])) for _, c, _ in facts.workloads if c in r):
            why = next((str(r[k]) for k in ("not_run", "reason", "not_modelled")
                        if isinstance(r.get(k), str) and r.get(k)), "")
            out.append(f"{r['chip']}" + (f" ({why.split(';')[0]})" if why else ""))
    return (f"Not compared (they run none of the workloads): {_join(out)}." if out else "")


def _assumption_rows(facts: Facts, column: str) -> list[list[str]]:
    """One row per run: its assumption, its best design for `column`, the objective, and the
    ratio to the study's best."""
    runs = facts.sensitivity
    first = runs[0].best.get(column) if runs else None
    rows = []
    for r in runs:
        what = r.description or r.changes or "the study file's own"
        row = r.best.get(column)
        if row is None:
            rows.append([r.name, what, "no feasible design", "—", "—"])
            continue
        mine = float(row[column])
        theirs = float(first[column]) if first is not None else np.nan
        columns = r.columns or tuple((col, path) for col, path, *_ in facts.params)
        design = ", ".join(f"{path} {_fmt(col, row[col]) if _is_number(row[col]) else row[col]}"
                           for col, path in columns if col in row)
        rows.append([r.name, what, design, quantity(mine, facts.units_of[column]),
                     f"{mine / theirs:.2f}x" if np.isfinite(theirs) and theirs else "—"])
    return rows


def _holds_sentence(facts: Facts, column: str) -> str:
    """Which of the study's conclusions for `column` (its best design within the study's
    near-optimal region, and its verdict against the base) hold under every alternative."""
    held, flipped = [], []
    for f, under in robustness.verdicts(facts.sensitivity):
        if f.key[0] != column or f.key[1] not in ("span", "objective") or f.open:
            continue
        claim = f.claim.split(": ", 1)[1]
        states = [(alt, g, robustness.holds(f, g)) for alt, g in under]
        flips = [f"{alt} ({g.shown})" for alt, g, ok in states if ok is False and g]
        if flips:
            flipped.append(f"{claim} flips under {_join(flips)}")
        elif any(ok for _, _, ok in states):
            held.append(claim)
    name = column.removeprefix("objective.")
    text = []
    if held:
        text.append(f"Holds under every alternative ({name}): {'; '.join(held)}.")
    if flipped:
        text.append(f"Flips ({name}): {'; '.join(flipped)}.")
    return " ".join(text)


def verdict(facts: Facts, trials: pd.DataFrame, front: pd.DataFrame,
            references: pd.DataFrame) -> list[str]:
    """The verdict section, Markdown lines (empty without a feasible design)."""
    best = best_rows(front, facts.objectives, facts.directions)
    if not len(trials) or not best:
        return []
    why, row = best[0]
    obj = why.removeprefix("best ")
    budgets = _budgets(facts)
    lead = (f"**The best {obj} design is trial {int(row['number'])}**"
            + (f", within {budgets}" if budgets else "") + f": {_design(facts, row)}")
    area = float(row.get("area_per_chip_mm2", np.nan))
    lead += (f", in {area:,.0f} mm2." if np.isfinite(area) else ".")
    reached = _objectives(facts, row, area_shown=True)
    if reached:
        lead += f" It reaches {_join(reached)}."
    out = [HEADING, "", lead, ""]
    ref = _first_reference(facts, references)
    if ref is not None:
        parts = [p for p in (_peak_sentence(row, ref),) if p]
        more, fewer = _changes(facts, row, str(ref["chip"]))
        if fewer:
            parts.append(f"gives up {_join(fewer)}")
        if more:
            parts.append(f"buys {_join(more)}")
        if parts:
            out += [f"Against {ref['chip']}, it " + "; ".join(parts) + ".", ""]
        out += ["Its throughput on each workload, and its ratio to each reference chip's "
                "(each chip as its file gives it, at its own silicon, memory and power, "
                "not the study's budget; the same chips per workload):", "",
                *_gains_table(facts, row, references), ""]
        missing = _not_running(facts, references)
        if missing:
            out += [missing, ""]
    for other_why, other in best[1:]:
        what = (f"The {other_why.removeprefix('best ')} end of the front"
                if other_why.startswith("best ") else
                f"The {other_why.replace(' (', ' design (', 1)}")
        out += [f"{what} is trial {int(other['number'])}: {_design(facts, other)}; "
                f"{_join(_objectives(facts, other))}.", ""]
    for para in _region_paragraphs(facts):
        out += [para, ""]
    if len(facts.sensitivity) > 1:
        column = facts.objectives[0]  # best_rows puts the first objective's best first
        name = column.removeprefix("objective.")
        out += [f"**Which assumptions it rests on.** The study run again under each "
                f"alternative assumption of its file (its own search; section Sensitivity), "
                f"best {name} design of each:", ""]
        out += _table(["run", "assumption", f"best {name} design", name, "vs the study's best"],
                      _assumption_rows(facts, column))
        out.append("")
        sentence = _holds_sentence(facts, column)
        if sentence:
            out += [sentence, ""]
    held = _held(facts, row)
    if held:
        out += [f"What holds trial {int(row['number'])} back: " + "; ".join(held) + "."
                + (" A range end that binds may be cutting the search short." if any(
                    h.startswith(("the top", "the bottom")) for h in held) else ""), ""]
    n, n_ok = len(trials), int(trials["feasible"].sum())
    out += [(f"{n_ok:,} of {n:,} designs are feasible; the {n - n_ok:,} others: "
             f"{_why_not(facts, n - n_ok)}." if n_ok < n else f"All {n:,} designs are "
             "feasible."), ""]
    return out


def readme_block(summary_md: str) -> str:
    """The verdict section of a summary.md without its heading (the whole verdict)."""
    lines = summary_md.splitlines()
    if HEADING not in lines:
        return ""
    start = lines.index(HEADING) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "\n".join(lines[start:end]).strip() + "\n"


# The lines around each copy of the answer, by file (tools/readme_answer.py writes them,
# tests/test_readme_answer.py checks them).
ANSWER_MARKERS = {"README.md": ("<!-- verdict:begin -->", "<!-- verdict:end -->"),
                  "docs/answer.md": ("<!-- summary:begin -->", "<!-- summary:end -->")}


def short_block(summary_md: str) -> str:
    """The verdict's first paragraph (the best design, its budget and what it reaches): the
    README's answer in a few lines."""
    verdict = readme_block(summary_md)
    return verdict.split("\n\n", 1)[0].strip() + "\n" if verdict else ""


def page_block(summary_md: str) -> str:
    """A summary.md from its verdict to its end, each heading one level down (the answer
    page's sections under its own title); the run's timing before the verdict is left out,
    so the block is the same on every machine."""
    lines = summary_md.splitlines()
    if HEADING not in lines:
        return ""
    body = lines[lines.index(HEADING):]
    return "\n".join("#" + line if line.startswith("#") else line
                     for line in body).strip() + "\n"


