"""What a study run writes to its output folder: the trials table (CSV and Parquet), the
Pareto set, the plots, the summary and the resolved study. The table is rebuilt from the
stored trials' parameters with one vectorized evaluation (the model is deterministic), so it
is the same whichever process ran each trial."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import yaml
from optuna.trial import TrialState

import dse
from dse.search.objective import evaluate_designs
from dse.search.pareto import front_mask, hypervolume, reference_point
from dse.search.run import SURPLUS
from dse.search.space import Study

CHUNK = 4096  # designs per vectorized evaluation (measured fastest per design: 4k-16k)


@dataclass(frozen=True)
class Tables:
    trials: pd.DataFrame  # one row per trial
    pareto: pd.DataFrame  # the feasible front
    references: pd.DataFrame  # the reference chips on the same workloads


def objective_columns(study: Study) -> list[str]:
    return [f"objective.{g.name}" for g in study.goals]


def evaluate_frame(study: Study, params: dict[str, np.ndarray],
                   baseline: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Every design of `params` evaluated in chunks: parameters (unit-suffixed columns),
    objectives, per-workload metrics, area, constraint values, feasible and reason."""
    n = len(next(iter(params.values()))) if params else 0
    parts = []
    for lo in range(0, n, CHUNK):
        chunk = {k: v[lo:lo + CHUNK] for k, v in params.items()}
        out = evaluate_designs(study, chunk, baseline)
        cols = {p.column: out.columns[p.path] for p in study.params}
        cols.update({k: v for k, v in out.columns.items() if k not in chunk})
        cols.update({f"constraint.{k}": v for k, v in out.constraints.items()})
        cols["feasible"] = out.feasible
        cols["reason"] = out.reason
        parts.append(pd.DataFrame(cols))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def trials_frame(study: Study, stored: optuna.Study, baseline: dict[str, dict[str, float]]
                 ) -> pd.DataFrame:
    """One row per stored trial (number, state, then `evaluate_frame`'s columns); trials a
    worker asked past the budget are left out."""
    trials = [t for t in stored.get_trials(deepcopy=False)
              if not t.user_attrs.get(SURPLUS) and all(p.path in t.params for p in study.params)]
    params = {p.path: np.array([t.params[p.path] for t in trials], dtype=float)
              for p in study.params}
    frame = evaluate_frame(study, params, baseline) if trials else pd.DataFrame(
        columns=[p.column for p in study.params])
    frame.insert(0, "number", [t.number for t in trials])
    frame.insert(1, "state", [t.state.name for t in trials])
    complete = frame["state"] == TrialState.COMPLETE.name
    if "feasible" in frame:
        frame["feasible"] = frame["feasible"] & complete
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


def reference_frame(study: Study, baseline: dict[str, dict[str, float]]) -> pd.DataFrame:
    """The reference chips, each as its file gives it, on the study's workloads."""
    rows = []
    for name, spec, tech in study.references:
        from dataclasses import replace

        s = replace(study, hardware=spec, tech=tech)
        out = evaluate_designs(s, {}, baseline)
        row = {"chip": name, **{k: v[0] for k, v in out.columns.items()},
               "feasible": bool(out.feasible[0]), "reason": out.reason[0]}
        rows.append(row)
    return pd.DataFrame(rows)


def tables(study: Study, stored: optuna.Study, baseline: dict[str, dict[str, float]]
           ) -> Tables:
    frame = trials_frame(study, stored, baseline)
    return Tables(frame, pareto_frame(study, frame), reference_frame(study, baseline))


def write_tables(t: Tables, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "trials.csv", out / "trials.parquet", out / "pareto.csv",
               out / "references.csv"]
    t.trials.to_csv(written[0], index=False)
    t.trials.to_parquet(written[1], index=False)
    t.pareto.to_csv(written[2], index=False)
    t.references.to_csv(written[3], index=False)
    return written


def resolved_document(study: Study, seed: int, trials: int, sampler: str, batch: int,
                      storage: str) -> dict:
    """The study as run: the file's content with every default filled in, the base chip
    resolved, the dse version, seed and storage, so the run can be reproduced."""
    doc = study.spec.model_dump(mode="json")
    doc["search"].update({"seed": seed, "trials": trials, "sampler": sampler, "batch": batch})
    return {"dse_version": dse.__version__, "optuna_version": optuna.__version__,
            "study_file": str(study.path), "fingerprint": study.fingerprint(),
            "storage": storage, "study": doc,
            "objectives": {g.name: {"direction": g.spec.direction, "unit": g.unit(study.jobs),
                                    "column": f"objective.{g.name}"} for g in study.goals},
            "area_budget_mm2": study.area_budget,
            "base_resolved": study.hardware.model_dump(mode="json", exclude_none=True)}


def write_resolved(doc: dict, out: Path) -> Path:
    path = out / "study.resolved.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, width=100))
    return path


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
