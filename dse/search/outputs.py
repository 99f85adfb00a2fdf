"""What a study run writes to its output folder: the trials table (CSV and Parquet), the
Pareto set, the plots, the summary and the resolved study. The table is rebuilt from the
stored trials' parameters with one vectorized evaluation (the model is deterministic), so it
is the same whichever process ran each trial."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd
from optuna.trial import FrozenTrial, TrialState

from dse.search import atomic
from dse.search.chips import JOB_REASON, MEMORY_SHORT
from dse.search.objective import Outcome, evaluate_designs
from dse.search.pareto import front_mask, hypervolume, reference_point
from dse.search.referenced import referenced
from dse.search.run import SURPLUS
from dse.search.space import Study
from dse.spec.vocabulary import generation_names

CHUNK = 4096  # designs per vectorized evaluation (measured fastest per design: 4k-16k)


class StoredTrials(Protocol):
    """What the outputs read of a run's storage: an optuna.Study, or the trials read once
    after a run (dse.search.workers.Snapshot)."""

    def get_trials(self, deepcopy: bool = ..., states: tuple[TrialState, ...] | None = ...
                   ) -> list[FrozenTrial]: ...


@dataclass(frozen=True)
class Tables:
    trials: pd.DataFrame  # one row per trial
    pareto: pd.DataFrame  # the feasible front
    references: pd.DataFrame  # the reference chips on the same workloads


def objective_columns(study: Study) -> list[str]:
    return [f"objective.{g.name}" for g in study.goals]


def objective_units(study: Study) -> dict[str, str]:
    """Each objective column's unit, a multi-workload objective's naming the base chip it is
    relative to (`x h100-sxm`, not `x base`)."""
    out = {}
    for g in study.goals:
        unit = g.unit(study.jobs)
        out[f"objective.{g.name}"] = (f"x {study.hardware.name}" if unit == "x base" else unit)
    return out


def throughput_columns(study: Study) -> list[tuple[str, str, str]]:
    """(workload, its throughput column, unit) for each workload of the study."""
    return [(n, f"{n}.{j.throughput_metric}", j.throughput_unit)
            for n, j in study.jobs.items()]


def base_throughput(study: Study) -> dict[str, float]:
    """Each workload's throughput on the base chip as its file gives it (column -> value)."""
    base = evaluate_designs(study, {})
    return {col: float(base.columns[col][0]) for _, col, _ in throughput_columns(study)}


def power_of(frame: pd.DataFrame) -> pd.Series:
    """The most power per chip a design draws on any workload (W; NaN: not modelled)."""
    cols = [c for c in frame.columns if c.endswith(".power_per_chip_w")]
    if not cols or frame.empty:
        return pd.Series(np.nan, index=frame.index)
    return frame[cols].max(axis=1, skipna=True)


def infeasible_reasons(study: Study, trials: pd.DataFrame) -> list[tuple[int, str]]:
    """Why the study's designs are infeasible: (designs, why) per constraint broken, most
    first, each with the closest any design came (the smallest area, die, padding or power
    reached; the workload fit a design missed by least). A design may break several."""
    if trials.empty or "feasible" not in trials:
        return []
    bad = trials[~trials["feasible"].astype(bool)]
    if bad.empty:
        return []
    done = bad["state"] == TrialState.COMPLETE.name if "state" in bad else \
        pd.Series(True, index=bad.index)
    out: list[tuple[int, str]] = []
    if (~done).any():
        out.append((int((~done).sum()), "not completed (failed or stopped)"))
    bad = bad[done]

    def broken(name: str) -> pd.Series:
        col = f"constraint.{name}"
        return bad[col] > 0 if col in bad else pd.Series(False, index=bad.index)

    cons = study.spec.constraints
    if study.area_budget is not None and (n := int(broken("area_mm2").sum())):
        out.append((n, f"over the {study.area_budget:,.0f} mm2 area budget (the smallest "
                       f"design: {trials['area_per_chip_mm2'].min():,.0f} mm2)"))
    if study.cost_budget is not None and (n := int(broken("cost_usd").sum())):
        out.append((n, f"over the {study.cost_budget:,.0f} USD cost budget (the cheapest "
                       f"design: {trials['cost_per_chip_usd'].min():,.0f} USD)"))
    if study.system_budget is not None and (n := int(broken("system_cost_usd").sum())):
        cheapest = min(float(trials[f"{j}.system_cost_usd"].min()) for j in study.jobs
                       if f"{j}.system_cost_usd" in trials)
        budgets = ", ".join(f"{v:,.0f} USD for {j}" for j, v in study.system_budget.items())
        out.append((n, f"over the system cost budget ({budgets}; the cheapest system: "
                       f"{cheapest:,.0f} USD)"))
    if study.tech is not None and cons.reticle and (n := int(broken("reticle_mm2").sum())):
        out.append((n, f"with a die over the {study.tech.reticle:,.0f} mm2 reticle (the smallest "
                       f"die: {trials['die_mm2'].min():,.0f} mm2)"))
    if cons.shoreline and (n := int(broken("shoreline_mm2").sum())):
        pad = bad.loc[broken("shoreline_mm2"), "constraint.shoreline_mm2"].min()
        out.append((n, "with off-chip interfaces that need more die edge than their silicon gives "
                       f"(the least padding any of them needs: {pad:,.3g} mm2)"))
    if cons.shoreline and (n := int(broken("hbm_stacks_over_edges").sum())):
        out.append((n, "with more HBM stacks than the die edges the package rules give them "
                       "hold (dse.model.package)"))
    if cons.reticle and (n := int(broken("interposer_mm2").sum())):
        out.append((n, "with an interposer over its packaging technology's limit (the "
                       f"smallest interposer: {trials['interposer_mm2'].min():,.0f} mm2)"
                    if "interposer_mm2" in trials else
                    "with an interposer over its packaging technology's limit"))
    if cons.power is not None and (n := int(broken("power_w").sum())):
        power = power_of(trials[trials["state"] == TrialState.COMPLETE.name]
                         if "state" in trials else trials)
        out.append((n, f"over the {cons.power:,.0f} W power cap (the least any "
                       f"design draws: {power.min():,.0f} W)"))
    for name, col, _ in throughput_columns(study):
        if col not in bad:
            continue
        miss = bad[~np.isfinite(bad[col].to_numpy(float))]
        if miss.empty:
            continue
        # the closest: the design whose memory lacks the least (the reason's amount, kept
        # as a column by the study: dse.search.chips.MEMORY_SHORT), else the first
        col_short = f"{name}.{MEMORY_SHORT}"
        short = (miss[col_short].to_numpy(float) if col_short in miss
                 else np.full(len(miss), np.nan))
        short = np.where(np.isfinite(short), short, np.inf)
        col_reason = f"{name}.{JOB_REASON}"  # the workload's own reason (outcome_frame)
        texts = miss[col_reason] if col_reason in miss else pd.Series("", index=miss.index)
        parts = [(float(s), "" if pd.isna(r) else str(r), int(k))
                 for s, r, k in zip(short, texts, miss["number"], strict=True)]
        parts = [p for p in parts if p[1]]
        example = ""
        if parts:
            amount, text, number = min(parts, key=lambda p: p[0])
            closest = "closest" if math.isfinite(amount) else "e.g."
            example = f" ({closest}: trial {number}, {text})"
        out.append((len(miss), f"do not run {name}{example}"))
    return sorted(out, key=lambda x: -x[0])


def outcome_frame(study: Study, params: dict[str, np.ndarray], out: Outcome) -> pd.DataFrame:
    """The table rows of designs `params` evaluated as `out`: parameters (unit-suffixed
    columns), objectives, per-workload metrics, area, constraint values, feasible, reason."""
    cols = {p.column: np.asarray(params[p.path], dtype=float) for p in study.params}
    cols.update({k: v for k, v in out.columns.items() if k not in params
                 and k not in study.fixed})
    cols.update({f"constraint.{k}": v for k, v in out.constraints.items()})
    cols["feasible"] = out.feasible
    cols["reason"] = out.reason
    for name, why in out.job_reason.items():  # each workload's reason, as data
        cols[f"{name}.{JOB_REASON}"] = why
    return pd.DataFrame(cols)


def evaluate_frame(study: Study, params: dict[str, np.ndarray],
                   baseline: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Every design of `params` evaluated in chunks (`outcome_frame`'s columns)."""
    n = len(next(iter(params.values()))) if params else 0
    parts = []
    for lo in range(0, n, CHUNK):
        chunk = {k: v[lo:lo + CHUNK] for k, v in params.items()}
        parts.append(outcome_frame(study, chunk, evaluate_designs(study, study.designs(chunk),
                                                                  baseline)))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def trials_frame(study: Study, stored: StoredTrials, baseline: dict[str, dict[str, float]],
                 known: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per stored trial (number, state, then `outcome_frame`'s columns); trials a
    worker asked past the budget are left out. Rows of `known` (designs this process
    evaluated, found by their parameters: the model is deterministic) are reused; the
    other trials are evaluated."""
    trials = [t for t in stored.get_trials(deepcopy=False)
              if not t.user_attrs.get(SURPLUS) and all(p.path in t.params for p in study.params)]
    params = {p.path: np.array([p.value(t.params[p.path]) for t in trials], dtype=float)
              for p in study.params}
    if not trials:
        frame = pd.DataFrame(columns=[p.column for p in study.params])
    else:
        keys = list(zip(*(params[p.path] for p in study.params), strict=True))
        where: dict[tuple, int] = {}
        if known is not None and len(known):
            cols = [known[p.column].to_numpy(float) for p in study.params]
            where = {k: i for i, k in enumerate(zip(*cols, strict=True))}
        hit = np.array([k in where for k in keys])
        parts = []
        if hit.any() and known is not None:  # (hits are rows of `known`)
            rows = known.iloc[[where[k] for k, h in zip(keys, hit, strict=True) if h]]
            parts.append(rows.set_axis(np.flatnonzero(hit)))
        if (~hit).any():
            rest = {k: v[~hit] for k, v in params.items()}
            parts.append(evaluate_frame(study, rest, baseline).set_axis(np.flatnonzero(~hit)))
        frame = pd.concat(parts).sort_index().reset_index(drop=True)
    frame.insert(0, "number", [t.number for t in trials])
    frame.insert(1, "state", [t.state.name for t in trials])
    complete = frame["state"] == TrialState.COMPLETE.name
    if "feasible" in frame:
        frame["feasible"] = frame["feasible"].astype(bool) & complete
        frame["reason"] = np.where(complete, frame["reason"], "not completed")
    return frame


def pareto_frame(study: Study, frame: pd.DataFrame) -> pd.DataFrame:
    """The feasible designs no other feasible design dominates, best first objective first."""
    if frame.empty:
        return frame
    ok = frame[frame["feasible"]]
    cols = objective_columns(study)
    mask = front_mask(ok[cols].to_numpy(float), study.directions)
    front = ok[mask]
    first = study.goals[0]
    return front.sort_values(cols[0], ascending=first.spec.direction == "minimize")


def not_run(study: Study, out: Outcome) -> str:
    """The workloads the first design of `out` does not run, each with its reason
    ("llama2-70b-decode: weights ... exceed ...; ..."); "" when it runs them all."""
    parts = []
    for name in study.jobs:
        if np.isfinite(out.per_job[name]["throughput"][0]):
            continue
        why = str(out.job_reason[name][0]) if name in out.job_reason else ""
        parts.append(f"{name}: {why or 'does not run'}")
    return "; ".join(parts)


def outside_budget(out: Outcome) -> str:
    """The study budgets (area, cost, power) the first design of `out` exceeds, in words;
    "" when within them all."""
    return "" if out.budget_reason is None else str(out.budget_reason[0])


def reference_frame(study: Study, baseline: dict[str, dict[str, float]]) -> pd.DataFrame:
    """The reference chips, each as its file gives it, on the study's workloads."""
    from dataclasses import replace

    from dse.spec.load import load_design

    rows = []
    refs = study.spec.references or [study.spec.base]
    for ref, (name, spec, tech) in zip(refs, study.references, strict=True):
        s = replace(study, hardware=spec, tech=tech)
        out = evaluate_designs(s, {}, baseline)
        row = {"chip": name, **{k: v[0] for k, v in out.columns.items()},
               "feasible": bool(out.feasible[0]), "reason": out.reason[0], "not_modelled": "",
               "not_run": not_run(study, out), "outside_budget": outside_budget(out)}
        if tech is None:  # drawn and tabulated with what it has: its throughput
            why = load_design(referenced(ref, study.path.parent))[2]
            row["not_modelled"] = f"area and power: {why}"
        rows.append(row)
    return pd.DataFrame(rows)


def tables(study: Study, stored: StoredTrials, baseline: dict[str, dict[str, float]],
           known: pd.DataFrame | None = None) -> Tables:
    frame = trials_frame(study, stored, baseline, known)
    return Tables(frame, pareto_frame(study, frame), reference_frame(study, baseline))


def _named(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with memory generations by catalogue name (the model's frames hold their
    catalogue index)."""
    cols = [c for c in frame.columns if str(c).endswith(".generation")]
    if not cols:
        return frame
    out = frame.copy()
    for c in cols:
        out[c] = generation_names(out[c].to_numpy(float))
    return out


def write_tables(t: Tables, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "trials.csv", out / "trials.parquet", out / "pareto.csv",
               out / "references.csv"]
    trials = _named(t.trials)
    with atomic.replacing(written[0]) as tmp:  # each file whole or not at all
        trials.to_csv(tmp, index=False)
    with atomic.replacing(written[1]) as tmp:
        trials.to_parquet(tmp, index=False)
    with atomic.replacing(written[2]) as tmp:
        _named(t.pareto).to_csv(tmp, index=False)
    with atomic.replacing(written[3]) as tmp:
        t.references.to_csv(tmp, index=False)
    return written


def hypervolume_ratio(study: Study, sampled: pd.DataFrame, grid: pd.DataFrame) -> float:
    """Hypervolume of the sampled feasible front over the grid's (same reference point: the
    grid's feasible designs' worst values, 10% further out)."""
    cols = objective_columns(study)
    g = grid[grid["feasible"]][cols].to_numpy(float)
    s = sampled[sampled["feasible"]][cols].to_numpy(float)
    if not len(g):
        return math.nan
    ref = reference_point(np.vstack([g, s]) if len(s) else g, study.directions)
    hv_grid = hypervolume(g, study.directions, ref)
    return hypervolume(s, study.directions, ref) / hv_grid if hv_grid > 0 else math.nan
