"""Everything a study run leaves in its output folder: tables, plots, summary, resolved
study. Called by `dse study` after a run (or a grid)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

import numpy as np
import optuna
import pandas as pd
from optuna.trial import FrozenTrial

from dse.model import evaluate
from dse.report import pareto_plot as pp
from dse.report.robustness_text import robustness_console
from dse.report.study_facts import Facts, best_rows, bound_shares
from dse.report.study_summary import console_lines, summary_markdown
from dse.report.verdict import verdict
from dse.search import atomic, conclusions, outputs, robustness, run_record
from dse.search.objective import baseline_of
from dse.search.run import Options, Progress, open_storage, out_dir, storage_url
from dse.search.space import Study

IMPORTANCE_TRIALS = 2000  # feasible trials the importance evaluator sees at most (seeded)


def _bounds(study: Study, row: pd.Series) -> dict[str, str]:
    from dse.search import chips

    params = study.designs({p.path: np.array([row[p.column]]) for p in study.params})
    hardware = {k: v for k, v in params.items() if not chips.is_workload_path(k)}
    out = {}
    for name, job in study.jobs.items():
        execution, _ = chips.execution_for(job, int(chips.chips_of(job, params, 1)[0]))
        if execution is None:  # the best design runs every workload: not reached
            continue
        ev = evaluate(study.hardware, job.workload, job.scenario, execution=execution,
                      tech=study.tech, reticle=False, overrides=hardware, **job.fields)
        out[name] = bound_shares(ev.op_records(0))
    return out


def _objective(g: int, sign: float) -> Callable[[FrozenTrial], float]:
    """Objective `g` of a trial times `sign` (-1 for a maximized one)."""
    return lambda t: sign * t.values[g]


def _importances(study: Study, stored: outputs.StoredTrials | None) -> dict[str, dict[str, float]]:
    """PED-ANOVA importance of each parameter per objective (Optuna's own evaluator, no
    scikit-learn: how much each parameter's distribution differs between the top 10% of
    trials and all of them) over at most IMPORTANCE_TRIALS feasible trials; empty with
    fewer than 20 feasible trials."""
    if stored is None:
        return {}
    import warnings

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    # PED-ANOVA always notes that it ranks for low targets; maximized ones are negated here.
    warnings.filterwarnings("ignore", message="PedAnovaImportanceEvaluator computes")
    trials = [t for t in stored.get_trials(deepcopy=False,
                                           states=(optuna.trial.TrialState.COMPLETE,))
              if all(v <= 0 for v in t.constraints.values())]
    if len(trials) < 20:
        return {}
    rng = np.random.default_rng(0)
    if len(trials) > IMPORTANCE_TRIALS:
        trials = [trials[i] for i in rng.choice(len(trials), IMPORTANCE_TRIALS, replace=False)]
    tmp = optuna.create_study(directions=study.directions)
    tmp.add_trials(trials)
    out = {}
    for g, goal in enumerate(study.goals):
        imp = optuna.importance.get_param_importances(
            tmp, target=_objective(g, -1.0 if goal.spec.direction == "maximize" else 1.0),
            evaluator=optuna.importance.PedAnovaImportanceEvaluator())
        out[goal.name] = {k: float(v) for k, v in imp.items()}
    return out


def _plots(study: Study, t: outputs.Tables, folder: Path, title: str) -> list[Path]:
    return pp.study_plots(study, t, folder, title)


def _current(hw, path: str) -> float:
    """A chip's value of a canonical design path (NaN where it has none: a memory level or
    field the chip does not have)."""
    from dse.spec import vocabulary

    try:
        v = vocabulary.current(hw, path)
    except (StopIteration, AttributeError, TypeError, ValueError):
        return float("nan")
    return float("nan") if v is None else float(v)


def facts(study: Study, t: outputs.Tables, run_line: str, extra: list[str]) -> Facts:
    """What the summary and the console say about the run, beside its tables."""
    cols = outputs.objective_columns(study)
    workloads = outputs.throughput_columns(study)
    column_of = {w: col for w, col, _ in workloads}
    shown_by = {column_of[g.jobs[0]]: c for g, c in zip(study.goals, cols, strict=True)
                if len(g.jobs) == 1 and g.spec.metric == "throughput"}
    baseline = outputs.base_throughput(study)
    limits = []
    if study.area_budget is not None:
        limits.append(("the area budget", "area_per_chip_mm2", study.area_budget, "mm2"))
    if study.tech is not None and study.spec.constraints.reticle:
        limits.append((f"the {study.tech.node} reticle", "die_mm2", study.tech.reticle, "mm2"))
    if study.spec.constraints.power is not None:
        limits.append(("the power cap", "power_per_chip_w", study.spec.constraints.power, "W"))
    params = []
    for p in study.params:
        lo, hi = (p.low, p.high) if p.choices is None else (min(p.choices), max(p.choices))
        # a range parameter has both bounds (dse.spec.study checks it)
        params.append((p.column, p.path, float(cast(float, lo)), float(cast(float, hi)), p.log))
    from dse.search.chips import reference_value

    refs = [(name, {p.column: (reference_value(study, p.path) or _current(hw, p.path))
                    for p in study.params})
            for name, hw, _ in study.references]
    return Facts(name=study.spec.name, description=study.spec.description or "",
                 run_line=run_line, base=study.hardware.name, params=params, objectives=cols,
                 units_of=outputs.objective_units(study), directions=study.directions,
                 workloads=workloads, shown_by=shown_by, base_throughput=baseline,
                 limits=limits, infeasible=outputs.infeasible_reasons(study, t.trials),
                 budget_mm2=study.area_budget, extra=extra, reference_params=refs,
                 tdp_w=study.hardware.tdp)


def _summary(study: Study, t: outputs.Tables, stored: outputs.StoredTrials | None, f: Facts) -> str:
    best = [r for _, r in best_rows(t.pareto, f.objectives, study.directions)]
    bounds = {int(r["number"]): _bounds(study, r) for r in best}
    return summary_markdown(f, t.trials, t.pareto, t.references, bounds,
                            _importances(study, stored),
                            opening=verdict(f, t.trials, t.pareto, t.references))


@dataclass(frozen=True)
class Report:
    """What `dse study` prints (stdout lines, stderr warnings) and whether any design is
    feasible (exit 3 when none is); the run's tables (for the sensitivity table)."""

    lines: list[str]
    warnings: list[str]
    feasible: int
    trials: int
    tables: outputs.Tables | None = None
    written: int = 0


def _base_objectives(study: Study) -> dict[str, float]:
    """Each objective's value on the base chip as its file gives it (1 for a geometric mean
    relative to it; NaN for the design's own area)."""
    baseline = baseline_of(study)
    out = {}
    for g in study.goals:
        col = f"objective.{g.name}"
        if g.relative:
            out[col] = 1.0
        elif g.jobs:
            out[col] = float(baseline[g.jobs[0]].get(g.spec.metric, np.nan))
        else:
            out[col] = np.nan
    return out


def _run_of(study: Study, name: str, changes: str, t: outputs.Tables,
            band_of: dict[str, robustness.Band | None],
            anchor: dict[str, robustness.Region] | None = None) -> robustness.Run:
    """A run's best feasible design per objective and its conclusions."""
    best = {}
    front = t.pareto
    for g in study.goals:
        col = f"objective.{g.name}"
        if len(front) and col in front and np.isfinite(front[col].to_numpy(float)).any():
            i = front[col].idxmax() if g.spec.direction == "maximize" else front[col].idxmin()
            best[col] = front.loc[i]
    regions = robustness.near_optimal(study, t.trials, band_of)
    found = conclusions.findings(study, best, band_of, _base_objectives(study), _fmt_value,
                                 regions, anchor)
    n_ok = int(t.trials["feasible"].sum()) if len(t.trials) else 0
    return robustness.Run(name, changes, len(t.trials), n_ok, best, found,
                          columns=tuple((p.column, p.path) for p in study.params))


def _fmt_value(column: str, value: float) -> str:
    from dse.search.budget import shown

    return shown(column, value)


def _sensitivity(study: Study, t: outputs.Tables, alternatives: dict[str, Report],
                 band_of: dict[str, robustness.Band | None]) -> list[robustness.Run]:
    anchor = robustness.near_optimal(study, t.trials, band_of)
    runs = [_run_of(study, "as stated", "", t, band_of, anchor)]
    for name, rep in alternatives.items():
        alt = study.alternatives[name]
        changes = robustness.describe((study.spec.alternatives or {})[name])
        if rep.tables is not None:
            run = _run_of(alt, name, changes, rep.tables, band_of, anchor)
            runs.append(replace(run, description=(study.spec.alternatives or {})[name]
                                .description or ""))
    return runs


def _finish(study: Study, t: outputs.Tables, folder: Path, stored: outputs.StoredTrials | None,
            run_line: str, extra: list[str], resolved: tuple[dict, dict],
            alternatives: dict[str, Report] | None = None) -> Report:
    # the set whole (dse.search.atomic.staged): a kill, SIGTERM or a full disk while writing
    # leaves the previous run's outputs, consistent with one another
    with atomic.staged(folder) as stage:
        written = outputs.write_tables(t, stage)
        written += _plots(study, t, stage, f"{study.spec.name}: {len(t.trials):,} designs")
        f = facts(study, t, run_line, extra)
        band_of = robustness.bands(study)
        f = replace(f, regions=robustness.near_optimal(study, t.trials, band_of),
                    sensitivity=_sensitivity(study, t, alternatives, band_of) if alternatives
                    else [], seed=resolved[0]["search"]["seed"])
        summary = stage / "summary.md"
        atomic.write_text(summary, _summary(study, t, stored, f))
        written.append(summary)
        written += run_record.write_resolved(
            resolved[0], {**resolved[1], "trials": len(t.trials)}, stage)
    written = [folder / p.name for p in written]
    told = console_lines(f, t.trials, t.pareto, t.references)
    n_ok = int(t.trials["feasible"].sum()) if len(t.trials) else 0
    warnings = [told[0]] if len(t.trials) and n_ok == 0 else []
    told += robustness_console(f) if not warnings else []
    lines = [run_line, *(told if not warnings else []), *extra,
             f"wrote {len(written)} files to {folder}/: " + ", ".join(p.name for p in written)]
    return Report(lines, warnings, n_ok, len(t.trials), t, len(written))


def evaluated_here(prog: Progress) -> bool:
    """Whether the run's batches carry the model's columns (not a benchmark's empty
    objective)."""
    return all(o.columns for _, o in prog.evaluated)


def write_all(study: Study, opts: Options, sampler: str, wall: float,
              prog: Progress | None, alternatives: dict[str, Report] | None = None) -> Report:
    """Tables, plots, summary and resolved study of the stored run; `alternatives`: the
    reports of its alternatives' runs, compared in the summary's sensitivity table."""
    logging.getLogger("optuna").setLevel(logging.WARNING)
    folder = out_dir(study, opts)
    folder.mkdir(parents=True, exist_ok=True)
    url = storage_url(study, opts)
    stored = prog.stored if prog is not None and prog.stored is not None else \
        optuna.load_study(study_name=study.spec.name, storage=open_storage(url))
    known = None
    if prog is not None and prog.evaluated and evaluated_here(prog):
        known = pd.concat([outputs.outcome_frame(study, p, o) for p, o in prog.evaluated],
                          ignore_index=True)
    t = outputs.tables(study, stored, baseline_of(study), known)
    spec = study.spec.search
    new = prog.new if prog is not None else 0
    run_line = (f"{len(t.trials):,} trials in the study ({new:,} run now in {wall:.1f} s, "
                f"{new / max(wall, 1e-9):,.0f} trials/s); "
                f"{int(t.trials['feasible'].sum()) if len(t.trials) else 0:,} feasible, "
                f"{len(t.pareto)} on the front")
    resolved = (run_record.resolved_study(
        study, spec.seed if opts.seed is None else opts.seed, opts.trials or spec.trials,
        sampler, opts.batch or spec.batch), run_record.run_record(study, url))
    extra = []
    grid_file = folder / "grid" / "trials.parquet"
    if grid_file.is_file():
        ratio = outputs.hypervolume_ratio(study, t.trials, pd.read_parquet(grid_file))
        extra.append(f"hypervolume of the sampled front / the grid's front: {ratio:.3f}")
    return _finish(study, t, folder, stored, run_line, extra, resolved, alternatives)


def write_grid(study: Study, folder: Path, quiet: bool = False,
               alternatives: dict[str, Report] | None = None, cluster=None) -> Report:
    """Evaluate the whole grid and write its outputs; with a sampled run in `folder`, to
    `folder/grid` and with the hypervolume ratio of the sampled front to the grid's. With
    `cluster` (dse.search.cluster.GridCluster) its workers evaluate the grid's chunks."""
    import time

    from dse.search.grid import grid_frame

    sampled = (folder / "trials.parquet").is_file()
    target = folder / "grid" if sampled else folder
    target.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    frame = grid_frame(study, cluster=cluster)
    wall = time.perf_counter() - started
    by = f" by {cluster.describe()}" if cluster is not None else ""
    baseline = baseline_of(study)
    t = outputs.Tables(frame, outputs.pareto_frame(study, frame),
                       outputs.reference_frame(study, baseline))
    per_workload = len(frame) * len(study.jobs) / max(wall, 1e-9)
    run_line = (f"grid of {len(frame):,} designs evaluated in {wall:.2f} s{by} "
                f"({per_workload:,.0f} designs/s per workload); "
                f"{int(frame['feasible'].sum()):,} feasible, {len(t.pareto)} on the front")
    extra = []
    if sampled:
        ratio = outputs.hypervolume_ratio(study, pd.read_parquet(folder / "trials.parquet"),
                                          frame)
        extra.append(f"hypervolume of the sampled front ({folder}) / the grid's front: "
                     f"{ratio:.3f}")
    storage = "none (grid)"
    if study.spec.search.grid_trials:
        from dse.search.grid import store_grid
        from dse.search.run import JOURNAL

        storage = str(target / JOURNAL)
        extra.append(f"{store_grid(study, frame, storage):,} designs stored as trials in "
                     f"{storage}")
    resolved = (run_record.resolved_study(study, study.spec.search.seed, len(frame), "grid",
                                          study.spec.search.batch),
                run_record.run_record(study, storage))
    del quiet
    return _finish(study, t, target, None, run_line, extra, resolved, alternatives)
