"""How far a study's answer can be trusted, in words (dse.search.robustness): the
near-optimal region of each objective and the parameters it leaves open, and the
sensitivity of each conclusion to the study's alternatives, for summary.md and the
console. No I/O."""

from __future__ import annotations

import numpy as np

from dse.report.study_facts import Facts, _fmt, _join, _table, quantity
from dse.search import robustness


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
