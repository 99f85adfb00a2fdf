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
from dse.search.objective import Outcome, evaluate_designs
from dse.search.pareto import front_mask, hypervolume, reference_point
from dse.search.run import SURPLUS
from dse.search.space import Study, referenced

CHUNK = 4096  # designs per vectorized evaluation (measured fastest per design: 4k-16k)


@dataclass(frozen=True)
class Tables:
    trials: pd.DataFrame  # one row per trial
    pareto: pd.DataFrame  # the feasible front
    references: pd.DataFrame  # the reference chips on the same workloads


def objective_columns(study: Study) -> list[str]:
    return [f"objective.{g.name}" for g in study.goals]


def outcome_frame(study: Study, params: dict[str, np.ndarray], out: Outcome) -> pd.DataFrame:
    """The table rows of designs `params` evaluated as `out`: parameters (unit-suffixed
    columns), objectives, per-workload metrics, area, constraint values, feasible, reason."""
    cols = {p.column: np.asarray(params[p.path], dtype=float) for p in study.params}
    cols.update({k: v for k, v in out.columns.items() if k not in params})
    cols.update({f"constraint.{k}": v for k, v in out.constraints.items()})
    cols["feasible"] = out.feasible
    cols["reason"] = out.reason
    return pd.DataFrame(cols)


def evaluate_frame(study: Study, params: dict[str, np.ndarray],
                   baseline: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Every design of `params` evaluated in chunks (`outcome_frame`'s columns)."""
    n = len(next(iter(params.values()))) if params else 0
    parts = []
    for lo in range(0, n, CHUNK):
        chunk = {k: v[lo:lo + CHUNK] for k, v in params.items()}
        parts.append(outcome_frame(study, chunk, evaluate_designs(study, chunk, baseline)))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def trials_frame(study: Study, stored: optuna.Study, baseline: dict[str, dict[str, float]],
                 known: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per stored trial (number, state, then `outcome_frame`'s columns); trials a
    worker asked past the budget are left out. Rows of `known` (designs this process
    evaluated, found by their parameters: the model is deterministic) are reused; the
    other trials are evaluated."""
    trials = [t for t in stored.get_trials(deepcopy=False)
              if not t.user_attrs.get(SURPLUS) and all(p.path in t.params for p in study.params)]
    params = {p.path: np.array([t.params[p.path] for t in trials], dtype=float)
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
        if hit.any():
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


def tables(study: Study, stored: optuna.Study, baseline: dict[str, dict[str, float]],
           known: pd.DataFrame | None = None) -> Tables:
    frame = trials_frame(study, stored, baseline, known)
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


def _absolute(ref: str, near: Path) -> str:
    """A chip or workload reference as a study file anywhere can use it: paths absolute,
    shipped names as they are."""
    target = referenced(ref, near)
    return str(target.resolve()) if isinstance(target, Path) else target


def resolved_study(study: Study, seed: int, trials: int, sampler: str, batch: int) -> dict:
    """The study as run, as a study file: every default filled in, the run's seed, trials,
    sampler and batch, paths made absolute, so that `dse study study.resolved.yaml --out
    DIR` reproduces the run."""
    near = study.path.parent
    doc = study.spec.model_dump(mode="json", exclude_none=True)
    doc["base"] = _absolute(doc["base"], near)
    for w in doc["workloads"].values():
        w["workload"] = _absolute(w["workload"], near)
    doc["references"] = [_absolute(r, near) for r in doc.get("references") or []]
    c, cons = doc["constraints"], study.spec.constraints
    if cons.area is not None:
        c["area"] = f"{cons.area:.12g} mm2"  # 12 digits: the unit's own rounding removed
    if cons.power is not None:
        c["power"] = f"{cons.power:.12g} W"
    if cons.area_of is not None:
        c["area_of"] = _absolute(cons.area_of, near)
    doc["search"].update({"seed": seed, "trials": trials, "sampler": sampler, "batch": batch})
    return doc


def run_record(study: Study, storage: str) -> dict:
    """What a run's output folder holds, for tools that read it (dse plot pareto): versions,
    the study's fingerprint and storage, each objective's direction, unit and column."""
    return {"dse_version": dse.__version__, "optuna_version": optuna.__version__,
            "study": study.spec.name, "study_file": str(study.path.resolve()),
            "fingerprint": study.fingerprint(), "storage": storage,
            "objectives": {g.name: {"direction": g.spec.direction, "unit": g.unit(study.jobs),
                                    "column": f"objective.{g.name}"} for g in study.goals},
            "area_budget_mm2": study.area_budget}


def write_resolved(study_doc: dict, record: dict, out: Path) -> list[Path]:
    """study.resolved.yaml (a study file, its provenance in the header) and run.json."""
    import json

    path = out / "study.resolved.yaml"
    head = (f"# The study as run by dse {record['dse_version']} (Optuna "
            f"{record['optuna_version']}) from {record['study_file']}; fingerprint "
            f"{record['fingerprint']}.\n# Reproduce: dse study {path.name} --out NEW_FOLDER\n")
    path.write_text(head + yaml.safe_dump(study_doc, sort_keys=False, width=100))
    run = out / "run.json"
    # strict JSON like every command's (dse.report.jsonout, a layer above): the record holds
    # only text and the study's validated, finite numbers
    run.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n")
    return [path, run]


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
