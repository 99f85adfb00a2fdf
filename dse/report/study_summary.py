"""summary.md of a study run, and the closing lines `dse study` prints: first the answer in
words (the best design, how it compares with the base and the reference chips, what bounds
it, why the other designs are infeasible), then the best designs and their parameters, what
bounds their operators, the reference chips, and which parameters matter for each objective.
Every value carries its unit; an objective over several workloads names the chip it is
relative to."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dse import units
from dse.search import robustness
from dse.search.budget import shown
from dse.spec import vocabulary

# A design within this share of a limit is held by it (the area budget, the reticle, the
# power cap); a parameter within it of its range's end (of the range's width, or of the end
# itself for a log range) sits at that end.
NEAR = 0.02
MAX_CONSOLE_BEST = 3  # best designs the console names (summary.md lists every one)


def _fmt(column: str, value: float) -> str:
    """A table value with its unit, from the column's suffix."""
    return shown(column, value)


def number(value: float) -> str:
    """A plain number: thousands separated from 1,000, else four significant digits."""
    if not np.isfinite(value):
        return "—"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def quantity(value: float, unit: str) -> str:
    """A value in `unit` as a reader reads it: `1.36x h100-sxm`, `10,110 samples/s`,
    `3.68 ms`, `754 mm2`."""
    if not np.isfinite(value):
        return "—"
    if unit.startswith("x "):
        return f"{value:.3g}x {unit[2:]}"
    kinds = {"FLOP/s": units.FLOP_RATE, "s": units.TIME, "J": units.ENERGY}
    if unit in kinds:
        return units.format_quantity(value, kinds[unit], digits=4)
    if unit in ("W", "mm2"):
        return f"{value:,.0f} {unit}"
    return f"{number(value)} {unit}".strip()


@dataclass(frozen=True)
class Facts:
    """What the summary says about a study, beside its tables."""

    name: str
    description: str
    run_line: str
    base: str  # the base chip's name
    params: list[tuple[str, str, float, float, bool]]  # (column, path, low, high, log range)
    objectives: list[str]  # objective columns
    units_of: dict[str, str]  # objective column -> unit
    directions: Sequence[str]
    workloads: list[tuple[str, str, str]]  # (workload, throughput column, unit)
    shown_by: dict[str, str]  # throughput column -> the objective column that is the same
    base_throughput: dict[str, float]  # throughput column -> the base chip's value
    limits: list[tuple[str, str, float, str]]  # (what, column, limit, unit): held when near
    infeasible: list[tuple[int, str]]  # (designs, why), most first
    budget_mm2: float | None = None
    extra: list[str] = field(default_factory=list)
    regions: dict[str, robustness.Region] = field(default_factory=dict)  # objective -> region
    sensitivity: list[robustness.Run] = field(default_factory=list)  # the study, then each
    seed: int | None = None  # alternative
    # (chip, parameter column -> its value) of each reference chip, in the study's order
    reference_params: list[tuple[str, dict[str, float]]] = field(default_factory=list)
    tdp_w: float | None = None  # the base chip's TDP, which the power model holds designs to


def best_rows(front: pd.DataFrame, objectives: list[str], directions: Sequence[str]
              ) -> list[tuple[str, pd.Series]]:
    """(why, row): the best front design for each objective, one row per design naming every
    objective it is best for, and the balanced one (the design with the largest product of
    its objectives each relative to the front's best) when it is another design."""
    if front.empty:
        return []
    best: dict[int, list[str]] = {}
    for col, d in zip(objectives, directions, strict=True):
        i = front[col].idxmax() if d == "maximize" else front[col].idxmin()
        best.setdefault(i, []).append(col.removeprefix("objective."))
    out = [(f"best {' and '.join(names)}", front.loc[i]) for i, names in best.items()]
    if len(objectives) > 1:
        score = np.zeros(len(front))
        for col, d in zip(objectives, directions, strict=True):
            v = front[col].to_numpy(float)
            top = v.max() if d == "maximize" else v.min()
            score += np.log(v / top) if d == "maximize" else np.log(top / v)
        i = front.index[int(np.argmax(score))]
        if i not in best:
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


def _power(row: pd.Series) -> float:
    vals = [float(row[c]) for c in row.index if str(c).endswith(".power_per_chip_w")
            and np.isfinite(float(row[c]))]
    return max(vals) if vals else np.nan


def _design(facts: Facts, row: pd.Series) -> str:
    """'compute.units 144, memory.L2.capacity 16.8 MB, ...'"""
    return ", ".join(f"{path} {_fmt(col, row[col])}" for col, path, *_ in facts.params)


def _objectives(facts: Facts, row: pd.Series, area_shown: bool = False) -> list[str]:
    """'memory_bound 1.36x h100-sxm', ...; without the design's area where it is shown."""
    return [f"{c.removeprefix('objective.')} {quantity(row[c], facts.units_of[c])}"
            for c in facts.objectives if not (area_shown and c in _area_objectives(facts))]


def _area_objectives(facts: Facts) -> list[str]:
    """Objective columns that are the design's area (the table's area column already)."""
    return [c for c in facts.objectives if facts.units_of[c] == "mm2"]


def _ratios(facts: Facts, row: pd.Series, theirs: dict[str, float]) -> list[tuple[str, float]]:
    """(workload, this design's throughput / theirs) where both run it."""
    out = []
    for w, col, _ in facts.workloads:
        mine, other = float(row[col]), float(theirs.get(col, np.nan))
        if np.isfinite(mine) and np.isfinite(other) and other > 0:
            out.append((w, mine / other))
    return out


def _span(ratios: list[tuple[str, float]]) -> str:
    lo, hi = min(r for _, r in ratios), max(r for _, r in ratios)
    return f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}x"


def _against(facts: Facts, row: pd.Series, references: pd.DataFrame) -> str:
    """'on the 4 workloads its throughput is 1.16-1.35x h100-sxm's, ... and 1.31-1.42x
    middle-ground's (the base)'; empty without a chip to compare with."""
    chips: list[tuple[str, dict[str, float]]] = []
    names = [str(c) for c in references["chip"]] if len(references) else []
    if facts.base not in names:
        chips.append((facts.base, facts.base_throughput))
    for _, r in references.iterrows():
        chips.append((str(r["chip"]), {col: float(r[col]) for _, col, _ in facts.workloads
                                       if col in r}))
    parts = []
    for chip, theirs in chips:
        ratios = _ratios(facts, row, theirs)
        base = " (the base)" if chip == facts.base else ""
        some = (f" (on the {len(ratios)} of them it runs)"
                if ratios and len(ratios) < len(facts.workloads) else "")
        parts.append(f"{_span(ratios)} {chip}'s{base}{some}" if ratios
                     else f"not comparable with {chip}'s{base} (it runs none of them)")
    if not parts:
        return ""
    where = (f"on {facts.workloads[0][0]}" if len(facts.workloads) == 1
             else f"on the {len(facts.workloads)} workloads")
    return f"{where} its throughput is {_join(parts)}"


def _trade(facts: Facts, row: pd.Series) -> str:
    """What the best design gives up and buys against the first reference chip other than
    the base: each parameter's value against the chip's, with the change in percent."""
    chips = [(c, v) for c, v in facts.reference_params if c != facts.base] \
        or facts.reference_params
    if not chips:
        return ""
    chip, theirs = chips[0]
    more: list[str] = []
    fewer: list[str] = []
    same: list[str] = []
    for col, path, *_ in facts.params:
        mine, other = float(row[col]), theirs.get(col, np.nan)
        if not (np.isfinite(other) and other > 0):
            continue
        change = mine / other - 1
        text = f"{path} {_fmt(col, mine)} against {_fmt(col, other)} ({change:+.0%})"
        (more if change > 0.005 else fewer if change < -0.005 else same).append(text)
    if not (more or fewer):
        return ""
    parts = []
    if fewer:
        parts.append(f"gives up {_join(fewer)}")
    if more:
        parts.append(f"buys {_join(more)}")
    if same:
        parts.append(f"keeps {_join(same)}")
    return (f"Against {chip}, trial {int(row['number'])} " + "; ".join(parts) + ".")


def _held(facts: Facts, row: pd.Series) -> list[str]:
    """The limits this design is within NEAR of, and the parameters at a range's end."""
    out = []
    for what, col, limit, unit in facts.limits:
        value = _power(row) if col == "power_per_chip_w" else float(row.get(col, np.nan))
        if np.isfinite(value) and value >= (1 - NEAR) * limit:
            out.append(f"{what} ({value:,.0f} of {limit:,.0f} {unit})")
    top, bottom = [], []
    for col, path, low, high, log in facts.params:
        v = float(row[col])
        if not (high > low) or path.endswith(".generation"):
            continue  # a generation's choices have no ends (a named choice, not a range)
        near_low = v <= low * (1 + NEAR) if log else v - low <= NEAR * (high - low)
        near_high = v >= high / (1 + NEAR) if log else high - v <= NEAR * (high - low)
        if near_high:
            top.append(f"{path} ({_fmt(col, v)})")
        elif near_low:
            bottom.append(f"{path} ({_fmt(col, v)})")
    if top:
        out.append(f"the top of the range of {_join(top)}")
    if bottom:
        out.append(f"the bottom of the range of {_join(bottom)}")
    return out


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _why_not(facts: Facts, n: int) -> str:
    reasons = "; ".join(f"{k:,} {why}" for k, why in facts.infeasible)
    several = " (a design may break several)" if len(facts.infeasible) > 1 else ""
    return f"{reasons}{several}" if reasons else f"{n:,} not feasible"


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


def _range_text(column: str, low: float, high: float) -> str:
    """'128-144', '16.8-67.1 MB', '8'."""
    a, b = _fmt(column, low), _fmt(column, high)
    if a == b:
        return a
    ua, ub = a.partition(" ")[2], b.partition(" ")[2]
    if ua and ua == ub:
        return f"{a.partition(' ')[0]}–{b.partition(' ')[0]} {ua}"
    return f"{a}–{b}"


def _span_text(s: robustness.Span) -> str:
    """A span as a range, or a memory generation's names listed ('hbm3e-8h or hbm3e-12h')."""
    if s.values:
        return " or ".join(_fmt(s.column, v) for v in s.values)
    return _range_text(s.column, s.low, s.high)


def _spans(region: robustness.Region) -> str:
    return ", ".join(f"{s.path} {_span_text(s)}"
                     + (" (nearly its whole range)" if s.open else "") for s in region.spans)


def _band_words(region: robustness.Region) -> str:
    return (f"{region.band.text()}, the median error of `dse validate` on the shipped "
            "measurements")


def _region_paragraphs(facts: Facts) -> list[str]:
    """The near-optimal region of each objective in words."""
    out = []
    for col, r in facts.regions.items():
        name = col.removeprefix("objective.")
        best = quantity(r.best, facts.units_of[col])
        if r.designs <= 1:
            out.append(f"**Within the model's error ({name}).** No other feasible design is "
                       f"within {r.band.value:.1%} of the best ({best}; {_band_words(r)}): "
                       "the model tells the best design apart from the rest.")
            continue
        shared = [s for s in r.spans if s.low == s.high]
        common = [f"{s.path} {_fmt(s.column, s.low)}" for s in shared]
        what = (f" What they share is what the model can claim: {_join(common)}."
                if shared else "")
        out.append(f"**Within the model's error ({name}).** {r.designs:,} of the "
                   f"{r.feasible:,} distinct feasible designs are within {r.band.value:.1%} "
                   f"of the best {name} ({best}, trial {r.best_number}; the band: "
                   f"{_band_words(r)}). They span {_spans(r)}: the model does not tell them "
                   f"apart.{what}")
    return out


def _verdict_cell(f: robustness.Finding, g: robustness.Finding | None) -> str:
    ok = robustness.holds(f, g)
    if g is None:
        return "— (no feasible design)"
    if ok is None:
        return f"— ({g.verdict}: {g.shown})"
    if ok and g.verdict != f.verdict:
        return f"holds within the model's error (best: {g.verdict}, {g.shown})"
    return f"holds ({g.shown})" if ok else f"**flips**: {g.verdict} ({g.shown})"


def _sensitivity_paragraph(facts: Facts) -> str:
    """Which conclusions hold under every alternative and which flip, in words."""
    alts = [r.name for r in facts.sensitivity[1:]]
    rows = robustness.verdicts(facts.sensitivity)
    held: list[tuple[str, str]] = []
    flipped: list[tuple[str, str]] = []
    open_: list[tuple[str, str]] = []
    for f, under in rows:
        name = f.key[0].removeprefix("objective.")
        claim = f.claim.removeprefix(f"{name}: ")
        if f.open:
            what = claim.split(" at the ")[0].split(" in the middle")[0] \
                if f.key[1] == "range" else claim
            open_.append((name, f"{what} ({' / '.join(f.spread)})"))
            continue
        states = [(alt, g, robustness.holds(f, g)) for alt, g in under]
        flips = [(alt, g) for alt, g, ok in states if ok is False]
        if flips:
            flipped.append((name, f"{claim} ({f.shown}) flips under " + ", ".join(
                f"{alt} ({g.verdict}, {g.shown})" for alt, g in flips if g is not None)))
        elif any(ok for _, _, ok in states) and all(ok is not False for _, _, ok in states):
            held.append((name, f"{claim} ({f.shown})"))
    text = (f"**Under other assumptions.** The study was run again under {len(alts)} "
            f"alternative assumption{'s' if len(alts) > 1 else ''} ({_join(alts)}; section "
            "Sensitivity). ")
    empty = [r.name for r in facts.sensitivity[1:] if not r.best]
    if empty:
        text += (f"{_join(empty)} {'has' if len(empty) == 1 else 'have'} no feasible design, "
                 "so no conclusion can be compared there. ")
    text += (f"These conclusions hold under all of them (where the alternative leaves the "
             f"parameter free): {_by_objective(held)}. " if held
             else "No conclusion about the best designs holds under all of them. ")
    text += (f"These flip: {_by_objective(flipped)}." if flipped else "None of them flips.")
    if open_:
        text += (" Not conclusions, since the study's own designs within the model's error "
                 f"disagree on them: {_by_objective(list(dict.fromkeys(open_)))}.")
    return text


def _by_objective(items: list[tuple[str, str]]) -> str:
    """'for memory_bound, a; b; for encoder, c' (one objective: 'a; b')."""
    groups: dict[str, list[str]] = {}
    for name, text in items:
        groups.setdefault(name, []).append(text)
    if len(groups) == 1:
        return "; ".join(next(iter(groups.values())))
    return "; ".join(f"for {name}, " + "; ".join(texts) for name, texts in groups.items())


def _sensitivity_section(facts: Facts) -> list[str]:
    runs = facts.sensitivity
    if len(runs) < 2:
        return []
    first = runs[0]
    lines = ["## Sensitivity: the answer under other assumptions", "",
             "Each alternative is this study run again as a study of its own (its own trials "
             "and journal in alternatives/<name>/, "
             + (f"seed {facts.seed}, " if facts.seed is not None else "")
             + "the trials shown), never mixed into this run's sampler; objectives are "
             f"relative to the same base chip ({facts.base}) as its file gives it. A "
             f"parameter sits at the bottom or top of its range within "
             f"{robustness.EDGE:.0%} of the range's width of that end (in log space for a "
             f"log range), else in the middle; more or less than the base's value by over "
             f"{robustness.SAME:.0%}; an objective beats or loses to the base by more than "
             "its error band, else ties."
             + _fewer_trials(runs), ""]
    head = ["run", "changes", "trials", "feasible", "best for",
            *[path for _, path, *_ in facts.params],
            *[c.removeprefix("objective.") for c in facts.objectives], "vs the study's best"]
    rows = []
    for r in runs:
        if not r.best:
            rows.append([r.name, r.changes or "—", f"{r.trials:,}", f"{r.feasible:,}",
                         "no feasible design", *["—"] * (len(head) - 5)])
            continue
        for col, row in r.best.items():
            mine = float(row[col])
            theirs = float(first.best[col][col]) if col in first.best else np.nan
            shown = {c for c, *_ in facts.params}  # an alternative's own generation choice
            extra = [f"{c} {_fmt(c, row[c])}" for c in row.index
                     if str(c).endswith(".generation") and c not in shown]
            rows.append([r.name, r.changes or "—", f"{r.trials:,}", f"{r.feasible:,}",
                         col.removeprefix("objective.")
                         + (f" ({', '.join(extra)})" if extra else "")]
                        + [_fmt(c, row[c]) if c in row else "fixed" for c, *_ in facts.params]
                        + [quantity(float(row[c]), facts.units_of[c]) for c in facts.objectives]
                        + [f"{mine / theirs:.2f}x" if np.isfinite(theirs) and theirs
                           else "—"])
    lines += [*_table(head, rows), ""]
    lines += ["Each conclusion of the study's best designs under each alternative (the value "
              "it rests on in parentheses):", ""]
    vs = robustness.verdicts(runs)
    lines += _table(["conclusion", "as stated", *[r.name for r in runs[1:]]],
                    [[f.claim, f.shown, *[_verdict_cell(f, g) for _, g in under]]
                     for f, under in vs if not f.open])
    lines += ["", _sensitivity_paragraph(facts), ""]
    return lines


def _fewer_trials(runs: list[robustness.Run]) -> str:
    """A sentence when alternatives ran fewer trials than the study (their fronts are then
    sampled more coarsely: a best design a little below the study's may be the sampling)."""
    fewer = [r for r in runs[1:] if r.trials < runs[0].trials]
    if not fewer:
        return ""
    counts = sorted({r.trials for r in fewer})
    shown = " or ".join(f"{c:,}" for c in counts)
    return (f" {len(fewer)} of the {len(runs) - 1} alternatives ran {shown} trials against "
            f"the study's {runs[0].trials:,}: their fronts are sampled more coarsely, so a "
            "best design a little below the study's may be the sampling, not the assumption.")


def _region_section(facts: Facts) -> list[str]:
    if not facts.regions:
        return []
    lines = ["## Near-optimal region: what the model cannot tell apart", "",
             "Every feasible design within the model's measured error of the best, per "
             "objective (maximized: at least (1 - band) x the best; minimized: at most "
             "(1 + band) x the best). The band is the median |relative error| of `dse "
             "validate` on the shipped measurements for each workload's phase "
             "(dse/data/model_error.csv); an objective over several workloads takes their "
             "weighted mean, the geometric mean's error when every workload errs the same "
             "way.", ""]
    head = ["objective", "band", "best", "designs within", *[p for _, p, *_ in facts.params]]
    rows = []
    for col, r in facts.regions.items():
        spans = {s.column: _span_text(s) + (" (all)" if s.open else "")
                 for s in r.spans}
        rows.append([col.removeprefix("objective."), r.band.text(),
                     quantity(r.best, facts.units_of[col]),
                     f"{r.designs:,} of {r.feasible:,}",
                     *[spans.get(c, "—") for c, *_ in facts.params]])
    return [*lines, *_table(head, rows), ""]


def robustness_console(facts: Facts) -> list[str]:
    """One line per objective's near-optimal region, and one for the sensitivity."""
    out = []
    for col, r in facts.regions.items():
        name = col.removeprefix("objective.")
        out.append(f"within the model's {r.band.value:.1%} {name} error of the best: "
                   + (f"{r.designs:,} designs, {_spans(r)}" if r.designs > 1
                      else "no other design (the model tells the best apart)"))
    if len(facts.sensitivity) > 1:
        vs = robustness.verdicts(facts.sensitivity)
        states = [[robustness.holds(f, g) for _, g in under] for f, under in vs]
        held = sum(True in s and False not in s and not f.open
                   for (f, _), s in zip(vs, states, strict=True))
        flips = [f.claim for (f, _), s in zip(vs, states, strict=True) if False in s]
        total = sum(not f.open for f, _ in vs)
        n_alt = len(facts.sensitivity) - 1
        out.append(f"sensitivity ({n_alt} alternative{'s' if n_alt > 1 else ''}): {held} of "
                   f"{total} conclusions hold under all"
                   + (f"; flip under some: {'; '.join(flips)}" if flips else ""))
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


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(r) + " |" for r in rows)]


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
