"""What a run's output folder records of it: the study as run (study.resolved.yaml, a study
file that reproduces the run) and run.json (versions, fingerprint, storage, objectives)."""

from __future__ import annotations

from pathlib import Path

import optuna
import yaml

import dse
from dse.search import atomic
from dse.search.outputs import objective_units
from dse.search.referenced import referenced
from dse.search.space import Study
from dse.search.urls import redact


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
    if cons.cost is not None:
        c["cost"] = f"{cons.cost:.12g} USD"
    if cons.cost_of is not None:
        c["cost_of"] = _absolute(cons.cost_of, near)
    if cons.area_of is not None:
        c["area_of"] = _absolute(cons.area_of, near)
    doc["search"].update({"seed": seed, "trials": trials, "sampler": sampler, "batch": batch})
    return doc


def run_record(study: Study, storage: str) -> dict:
    """What a run's output folder holds, for tools that read it (dse plot pareto): versions,
    the study's fingerprint and storage, each objective's direction, unit and column."""
    return {"dse_version": dse.__version__, "optuna_version": optuna.__version__,
            "study": study.spec.name, "study_file": str(study.path.resolve()),
            "fingerprint": study.fingerprint(), "storage": redact(storage),
            "objectives": {g.name: {"direction": g.spec.direction,
                                    "unit": objective_units(study)[f"objective.{g.name}"],
                                    "column": f"objective.{g.name}"} for g in study.goals},
            "area_budget_mm2": study.area_budget}


def write_resolved(study_doc: dict, record: dict, out: Path) -> list[Path]:
    """study.resolved.yaml (a study file, its provenance in the header) and run.json."""
    import json

    path = out / "study.resolved.yaml"
    head = (f"# The study as run by dse {record['dse_version']} (Optuna "
            f"{record['optuna_version']}) from {record['study_file']}; fingerprint "
            f"{record['fingerprint']}.\n# Reproduce: dse study {path.name} --out NEW_FOLDER\n")
    atomic.write_text(path, head + yaml.safe_dump(study_doc, sort_keys=False, width=100))
    run = out / "run.json"
    # strict JSON like every command's (dse.report.jsonout, a layer above): the record holds
    # only text and the study's validated, finite numbers
    atomic.write_text(run, json.dumps(record, indent=2, allow_nan=False) + "\n")
    return [path, run]
