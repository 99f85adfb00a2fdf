"""The number of chips as a study parameter: `parameters: workloads.<name>.chips` varies the
chips that run workload <name> per design, so "fewer chips with more memory" is weighed
against "more chips" (at equal dollars with `constraints.system_cost` or `system_cost_of`).

The path names the value it replaces (`workloads: <name>: chips:` of the study file); each
workload runs on its own system, so each may vary alone. The split follows the workload's
rule: `tp: all` splits every chip of a pipeline stage (tp = chips / pp); a whole `tp` keeps
its degree and the rest are data-parallel replicas. A count the split cannot use (not a
multiple of tp x pp, or a tp the model's heads cannot take) makes the design infeasible with
its reason. Designs are evaluated in one vectorized call per distinct chip count. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.model import evaluate
from dse.model import reasons as reason_codes
from dse.model.batch import DesignBatch
from dse.model.execution import Execution
from dse.spec.technology import TechSpec
from dse.workloads import execution_issues

PREFIX = "workloads."
FIELD = "chips"


def is_workload_path(path: object) -> bool:
    """Whether `path` names a workload's field (`workloads.<name>.chips`), not hardware."""
    return isinstance(path, str) and path.startswith(PREFIX)


def path_of(name: str) -> str:
    return f"{PREFIX}{name}.{FIELD}"


def split_key(key: str) -> tuple[str, str]:
    """(workload name, field) of `workloads.<name>.<field>` (a name may hold dots)."""
    name, _, field = key[len(PREFIX):].rpartition(".")
    return name, field


def execution_for(job, chips: int) -> tuple[Execution | None, str]:
    """(the execution of `job` on `chips` chips, "") or (None, why the split cannot use
    them). `job`: a dse.search.study.Job."""
    w = job.spec
    pp = w.pp
    if w.tp == "all":
        if chips % pp:
            return None, f"{chips} chips: not a multiple of pp ({pp}), so tp: all has no " \
                         "whole degree"
        tp = chips // pp
    else:
        tp = w.tp
        if chips % (tp * pp):
            return None, f"{chips} chips: not a multiple of tp x pp ({tp * pp})"
    problems, _ = execution_issues(job.workload, job.resolved, tp, pp)
    if problems:
        return None, f"{chips} chips (tp {tp}, pp {pp}): {'; '.join(map(str, problems))}"
    return Execution(chips=chips, tp=tp, pp=pp, cp=w.cp, ep=w.ep), ""


def reference_value(study, path: str) -> float | None:
    """The value a workload parameter takes for the base chip and the references (the
    workload's own chips); None for any other path. `study`: a dse.search.space.Study."""
    if not is_workload_path(path):
        return None
    name, _ = split_key(path)
    job = study.jobs.get(name)
    return None if job is None else float(job.execution.chips)


def chips_of(job, params: dict[str, np.ndarray], n: int) -> np.ndarray:
    """[N] chips that run `job` for each design: its parameter, else the workload's own."""
    values = params.get(path_of(job.name))
    if values is None:
        return np.full(n, float(job.execution.chips))
    return np.broadcast_to(np.asarray(values, dtype=float), (n,))


def _metrics(ev) -> dict[str, np.ndarray]:
    """The evaluation's metrics, and MEMORY_SHORT: the bytes per chip each design's memory
    lacks (the reason's amount, dse.model.reasons; NaN where it fits), so the study can
    name the design that came closest without reading the reason's words."""
    return {**ev.metrics, MEMORY_SHORT: ev.reason.amount(reason_codes.MEMORY)}


MEMORY_SHORT = "memory_short_bytes"
# The table column (after the workload's name) of why a design does not run the workload.
JOB_REASON = "reason"


@dataclass(frozen=True)
class JobResult:
    """What a study reads of a workload's evaluation, per design ([N])."""

    feasible: np.ndarray
    reason: np.ndarray
    sequences: np.ndarray
    metrics: dict[str, np.ndarray]
    training: dict[str, np.ndarray] | None


def _scatter(parts: list[tuple[np.ndarray, dict[str, np.ndarray]]], n: int
             ) -> dict[str, np.ndarray]:
    """Per-group arrays put back in design order (NaN, or None for text, where a group
    lacks a key)."""
    keys = list(dict.fromkeys(k for _, d in parts for k in d))
    out = {}
    for k in keys:
        numeric = all(np.asarray(d[k]).dtype.kind in "biuf" for _, d in parts if k in d)
        a = np.full(n, np.nan) if numeric else np.full(n, None, dtype=object)
        for idx, d in parts:
            if k in d:
                a[idx] = d[k]
        out[k] = a
    return out


def evaluate_job(db: DesignBatch, job, chips: np.ndarray, tech: TechSpec | None
                 ) -> JobResult:
    """`job` evaluated for every design of `db` on its own chip count (`chips`, [N]): one
    `evaluate` per distinct count; a count the split cannot use is infeasible with why."""
    values = np.unique(chips)
    if len(values) == 1 and int(values[0]) == job.execution.chips:
        ev = evaluate(db, job.workload, job.scenario, execution=job.execution, tech=tech,
                      reticle=False, **job.fields)
        return JobResult(ev.feasible, np.asarray(ev.reason), ev.sequences, _metrics(ev),
                         ev.training)
    n = db.n
    feasible = np.zeros(n, dtype=bool)
    reason = np.full(n, "", dtype=object)
    metrics: list[tuple[np.ndarray, dict[str, np.ndarray]]] = []
    seqs: list[tuple[np.ndarray, dict[str, np.ndarray]]] = []
    training: list[tuple[np.ndarray, dict[str, np.ndarray]]] = []
    for c in values:
        idx = np.flatnonzero(chips == c)
        ex, why = execution_for(job, int(c))
        if ex is None:
            reason[idx] = why
            continue
        ev = evaluate(db.take(idx), job.workload, job.scenario, execution=ex, tech=tech,
                      reticle=False, **job.fields)
        feasible[idx], reason[idx] = ev.feasible, np.asarray(ev.reason)
        metrics.append((idx, _metrics(ev)))
        seqs.append((idx, {"sequences": ev.sequences}))
        if ev.training:
            training.append((idx, ev.training))
    merged = _scatter(metrics, n)
    merged.setdefault(job.throughput_metric, np.full(n, np.nan))  # no count could run it
    sequences = _scatter(seqs, n).get("sequences", np.full(n, np.nan))
    return JobResult(feasible, reason, sequences, merged,
                     _scatter(training, n) if training else None)
