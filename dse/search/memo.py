"""Evaluations shared by the runs of one study file. The study and its alternatives evaluate
the same model wherever the hardware as the assumptions leave it, the node, the workload and
the parameters coincide: an alternative that changes a budget, a power cap or a range asks
designs the study (or another alternative) has evaluated, and gets those results instead of
evaluating them again. Each run keeps its own sampler and its own trials; only the model's
answer for a design is shared, and the model is deterministic, so a reused result equals a
fresh one. Per process, bounded (LIMIT designs per model); no I/O."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from dse.model.batch import DesignBatch
from dse.search import chips as chip_count
from dse.spec.technology import TechSpec

LIMIT = 200_000  # designs kept per model (a few hundred bytes each)
_STORE: dict[str, dict[tuple, dict[str, Any]]] = {}
_STATS = {"hits": 0, "misses": 0}


def clear() -> None:
    """Forget every stored evaluation (tests)."""
    _STORE.clear()
    _STATS.update(hits=0, misses=0)


def stats() -> dict[str, int]:
    """Designs taken from the store and designs evaluated, since the last clear()."""
    return dict(_STATS)


def _model_key(study, job, paths: tuple[str, ...]) -> str:
    """A digest of what decides one workload's result for a design besides its parameters:
    the hardware with the run's assumptions applied, its node, the workload and its split
    rule, and which paths the parameters give."""
    tech = study.tech.model_dump(mode="json") if study.tech is not None else None
    keep = {"hardware": study.hardware.model_dump(mode="json"), "tech": tech,
            "workload": job.workload.model_dump(mode="json"), "scenario": job.scenario,
            "fields": job.fields, "execution": (job.execution.chips, job.execution.tp,
                                                job.execution.pp, job.spec.tp),
            "paths": paths}
    text = json.dumps(keep, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _keys(params: dict[str, np.ndarray], paths: tuple[str, ...], n: int) -> list[tuple]:
    """One hashable key per design: its value of every path, in `paths` order."""
    if not paths:
        return [()] * n
    cols = [np.broadcast_to(np.asarray(params[p]), (n,)).tolist() for p in paths]
    return list(zip(*cols, strict=True))


def _rows(res: chip_count.JobResult, n: int) -> list[dict[str, Any]]:
    """Per-design rows of a JobResult (what the store keeps)."""
    out = []
    for i in range(n):
        out.append({"feasible": bool(res.feasible[i]), "reason": res.reason[i],
                    "sequences": res.sequences[i],
                    "metrics": {k: v[i] for k, v in res.metrics.items()},
                    "training": ({k: v[i] for k, v in res.training.items()}
                                 if res.training else None)})
    return out


def _column(values: list[Any]) -> np.ndarray:
    """An [N] array of one metric's values (NaN where a design lacks it; text as objects)."""
    if all(v is None or isinstance(v, int | float | np.number | bool | np.bool_)
           for v in values):
        return np.array([np.nan if v is None else v for v in values], dtype=float)
    return np.array(values, dtype=object)


def _assemble(rows: list[dict[str, Any]]) -> chip_count.JobResult:
    n = len(rows)
    metric_keys = list(dict.fromkeys(k for r in rows for k in r["metrics"]))
    metrics = {k: _column([r["metrics"].get(k) for r in rows]) for k in metric_keys}
    training_keys = list(dict.fromkeys(k for r in rows if r["training"] for k in r["training"]))
    training = ({k: _column([(r["training"] or {}).get(k) for r in rows])
                 for k in training_keys} if training_keys else None)
    return chip_count.JobResult(
        feasible=np.array([r["feasible"] for r in rows], dtype=bool),
        reason=np.array([r["reason"] for r in rows], dtype=object),
        sequences=np.array([r["sequences"] for r in rows], dtype=float).reshape(n),
        metrics=metrics, training=training)


def evaluate_job(study, job, params: dict[str, np.ndarray], db: DesignBatch,
                 chips: np.ndarray, tech: TechSpec | None) -> chip_count.JobResult:
    """`job` on every design of `db` (chips.evaluate_job), taking the designs this process
    has evaluated on the same model from the store and evaluating the rest in one pass."""
    n = db.n
    paths = tuple(sorted(params))
    store = _STORE.setdefault(_model_key(study, job, paths), {})
    keys = _keys(params, paths, n)
    miss = np.array([k not in store for k in keys], dtype=bool)
    _STATS["hits"] += int(n - miss.sum())
    _STATS["misses"] += int(miss.sum())
    if miss.all():
        res = chip_count.evaluate_job(db, job, chips, tech)
        if len(store) + n <= LIMIT:
            store.update(zip(keys, _rows(res, n), strict=True))
        return res
    idx = np.flatnonzero(miss)
    if len(idx):
        fresh = chip_count.evaluate_job(db.take(idx), job, chips[idx], tech)
        if len(store) + len(idx) <= LIMIT:
            store.update(zip([keys[i] for i in idx], _rows(fresh, len(idx)), strict=True))
        else:  # full: keep this batch's results for the assembly only
            store = {**store, **dict(zip([keys[i] for i in idx], _rows(fresh, len(idx)),
                                         strict=True))}
    return _assemble([store[k] for k in keys])
