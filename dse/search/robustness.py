"""How far a study's answer can be trusted: the near-optimal region (every feasible design
within the model's measured error of the best, per objective) and the conclusions that hold
or flip under the study's named alternative assumptions.

The error band comes from the validation data: the median |relative error| of `dse validate`
per phase on the shipped measurements, kept in dse/data/model_error.csv (regenerated from
`dse validate` by `write_error_table`; tests/search/test_robustness.py fails when it is
stale). The median is what "within the model's error" means here: half of the measured rows
of that phase are predicted closer than it; the file also keeps p90 and max for a reader.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dse.spec.study import DESIGN_METRICS

ERROR_FILE = "model_error.csv"  # in the package's data folder (dse/data)
STATISTIC = "median"  # the column of ERROR_FILE a band takes
# A parameter within this share of its range's width (in log space for a log range) of an
# end sits at that end; a region spanning more than 1 - 2 x EDGE of it leaves it open.
EDGE = 0.10
# Two values of a parameter within this relative difference are the same (more/fewer than
# the base); an objective within its band of the base ties with it.
SAME = 0.02

HEAD = ("# The performance model's error per phase: |rel_error| of `dse validate` on the\n"
        "# shipped measurements (validation/measurements.csv, gemm-calibration.csv,\n"
        "# current-stacks.csv and the pending rows that run).\n"
        "# A study's near-optimal band is the median of its workloads' phases (docs:\n"
        "# guide/studies.md). Regenerate: python -c 'from dse import validate; from\n"
        "# dse.search import robustness;\n"
        "# robustness.write_error_table(validate.summary(validate.run()))'\n")


def error_table(summary: dict) -> str:
    """The text of ERROR_FILE from `dse.validate.summary`'s result (3 significant digits)."""
    lines = [HEAD + "phase,rows,median,p90,max"]
    for phase, s in summary.items():
        if isinstance(s, dict):
            lines.append(f"{phase},{s['n']},{s['median']:.3g},{s['p90']:.3g},{s['max']:.3g}")
    return "\n".join(lines) + "\n"


def error_path() -> Path:
    return Path(__file__).parents[1] / "data" / ERROR_FILE


def write_error_table(summary: dict, path: Path | None = None) -> Path:
    path = path or error_path()
    path.write_text(error_table(summary))
    return path


@functools.cache
def phase_errors() -> dict[str, dict[str, float]]:
    """phase (and 'overall') -> {rows, median, p90, max}, read once per process."""
    out: dict[str, dict[str, float]] = {}
    path = error_path()
    if not path.is_file():
        return out
    lines = [x for x in path.read_text().splitlines() if x and not x.startswith("#")]
    head = lines[0].split(",")
    for line in lines[1:]:
        cells = line.split(",")
        out[cells[0]] = {k: float(v) for k, v in zip(head[1:], cells[1:], strict=True)}
    return out


@dataclass(frozen=True)
class Band:
    """An objective's error band: a fraction, and how it was made."""

    value: float
    parts: tuple[tuple[str, str, float], ...]  # (workload, phase, its error)
    combined: bool  # a weighted mean over several workloads

    def text(self) -> str:
        """'3.3% decode' or '4.9% (the weighted mean of 3.3% decode, 8.2% serve, ...)'."""
        if not self.combined:
            _, phase, e = self.parts[0]
            return f"{e:.1%} {phase}"
        inner = ", ".join(f"{e:.1%} {phase} ({w})" for w, phase, e in self.parts)
        return f"{self.value:.1%} (the weighted mean of {inner})"


def bands(study) -> dict[str, Band | None]:
    """Each objective column's band (None: the objective is the design's own, area, which
    the model does not measure against anything). One workload's objective takes its phase's
    median error; a weighted geometric mean over several takes the weighted mean of theirs:
    the geomean's error when every workload errs the same way, the most it can be when each
    errs by at most its phase's median (independent errors would give less)."""
    errors = phase_errors()
    out: dict[str, Band | None] = {}
    for g in study.goals:
        col = f"objective.{g.name}"
        if g.spec.metric in DESIGN_METRICS or not g.jobs or not errors:
            out[col] = None
            continue
        parts = []
        for j in g.jobs:
            phase = study.jobs[j].phase
            row = errors[phase if phase in errors else "overall"]
            parts.append((j, phase if phase in errors else "overall", row[STATISTIC]))
        value = float(sum(w * e for w, (_, _, e) in zip(g.weights, parts, strict=True)))
        out[col] = Band(value, tuple(parts), len(parts) > 1)
    return out


@dataclass(frozen=True)
class Span:
    """One parameter over a region's designs."""

    column: str
    path: str
    low: float
    high: float
    open: bool  # the region spans nearly all of the parameter's range
    values: tuple[float, ...] = ()  # a memory generation's distinct values (catalogue
    # indices): choices without an order, listed rather than given as a range


@dataclass(frozen=True)
class Region:
    """The feasible designs within an objective's band of its best."""

    objective: str  # column
    band: Band
    best: float  # the best value
    threshold: float  # the worst value inside
    designs: int  # distinct designs inside
    feasible: int  # distinct feasible designs
    spans: tuple[Span, ...]
    best_number: int  # the best design's trial


def _distinct(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return frame.drop_duplicates(subset=columns) if columns else frame


def _share(low: float, high: float, lo: float, hi: float, log: bool) -> float:
    """How much of the range [lo, hi] the span [low, high] covers (log-scaled for log)."""
    if not hi > lo:
        return 1.0
    if log and lo > 0:
        return math.log(high / low) / math.log(hi / lo) if low > 0 else 1.0
    return (high - low) / (hi - lo)


def near_optimal(study, trials: pd.DataFrame, band_of: dict[str, Band | None]
                 ) -> dict[str, Region]:
    """Per objective with a band: the feasible designs whose value is within the band of
    the best (maximized: at least (1 - band) x best; minimized: at most (1 + band) x best),
    counted once each, and each parameter's range over them."""
    if trials.empty or "feasible" not in trials:
        return {}
    ok = trials[trials["feasible"].astype(bool)]
    if ok.empty:
        return {}
    pcols = [p.column for p in study.params]
    out = {}
    for g in study.goals:
        col = f"objective.{g.name}"
        band = band_of.get(col)
        v = ok[col].to_numpy(float)
        if band is None or not np.isfinite(v).any():
            continue
        maximize = g.spec.direction == "maximize"
        i = int(np.nanargmax(v) if maximize else np.nanargmin(v))
        best = float(v[i])
        threshold = best * (1 - band.value) if maximize else best * (1 + band.value)
        inside = ok[(v >= threshold) if maximize else (v <= threshold)]
        spans = []
        for p in study.params:
            lo, hi = (p.low, p.high) if p.choices is None else (min(p.choices), max(p.choices))
            a, b = float(inside[p.column].min()), float(inside[p.column].max())
            named = tuple(sorted(set(inside[p.column].astype(float)))) \
                if p.path.endswith(".generation") else ()
            spans.append(Span(p.column, p.path, a, b,
                              _share(a, b, float(lo), float(hi), p.log) >= 1 - 2 * EDGE
                              if not named else len(named) == len(p.choices or ()), named))
        out[col] = Region(col, band, best, threshold, len(_distinct(inside, pcols)),
                          len(_distinct(ok, pcols)), tuple(spans),
                          int(ok.iloc[i]["number"]) if "number" in ok else i)
    return out


def position(value: float, low: float, high: float, log: bool) -> str:
    """'bottom', 'top' or 'middle' of a range (EDGE of its width from an end)."""
    if not high > low:
        return "middle"
    share = _share(low, value, low, high, log) if value > low else 0.0
    return "bottom" if share <= EDGE else "top" if share >= 1 - EDGE else "middle"


@dataclass(frozen=True)
class Finding:
    """One conclusion of a run's best design for one objective."""

    key: tuple[str, str, str]  # (objective column, kind, path or '')
    claim: str  # as words: 'compute.units at the top of its range'
    verdict: str  # the category compared across runs
    shown: str  # the value it rests on
    spread: tuple[str, ...] = ()  # the categories of the run's near-optimal designs

    @property
    def open(self) -> bool:
        """The run's designs within the model's error disagree: not a conclusion."""
        return len(self.spread) > 1


@dataclass(frozen=True)
class Run:
    """One run compared in the sensitivity table: the study as stated, or an alternative."""

    name: str
    changes: str  # the alternative's changes in words ('' for the study)
    trials: int
    feasible: int
    best: dict[str, pd.Series]  # objective column -> the best feasible design
    findings: list[Finding]
    description: str = ""  # the alternative's own words for its assumption (study file)
    columns: tuple[tuple[str, str], ...] = ()  # (column, path) of the run's own parameters


def verdicts(runs: list[Run]) -> list[tuple[Finding, list[tuple[str, Finding | None]]]]:
    """Each conclusion of the first run (the study) with the same conclusion under every
    other run (None: that run has no feasible design, or does not vary the parameter)."""
    first, *others = runs
    out = []
    for f in first.findings:
        row = []
        for r in others:
            got = next((g for g in r.findings if g.key == f.key), None)
            row.append((r.name, got))
        out.append((f, row))
    return out


def holds(f: Finding, g: Finding | None) -> bool | None:
    """Whether conclusion `f` (of the study) holds under another run as `g`: its best design
    agrees, or some design within that run's error band does (the run's model cannot say
    otherwise); None where there is nothing to compare (no feasible design, a parameter
    fixed, or `f` itself not a conclusion: its own near-optimal designs disagree)."""
    if g is None or f.open or "fixed" in (f.verdict, g.verdict):
        return None
    return f.verdict in (g.spread or (g.verdict,))


def describe(alt) -> str:
    """An alternative's changes in words: 'memory.HBM3.stacks high 6; power 500 W'."""
    parts = []
    for key, change in alt.params.items():
        given = change.model_dump(exclude_unset=True)
        parts.append(f"{key} " + ", ".join(
            f"{k} {', '.join(str(x) for x in v) if isinstance(v, list) else v}"
            for k, v in given.items()))
    parts += [f"{k} = {v}" for k, v in alt.set.items()]
    for k, v in alt.constraints.model_dump(exclude_unset=True).items():
        unit = {"power": " W", "area": " mm2", "cost": " USD", "system_cost": " USD"}.get(k, "")
        dollars = unit == " USD" and isinstance(v, float)
        shown = f"{v:,.0f}{unit}" if dollars else f"{v:,.4g}{unit}" if isinstance(v, float) \
            else str(v).lower()
        parts.append(f"{k} {shown}")
    return "; ".join(parts)
