"""Evaluations shared by the runs of one study file. The study and its alternatives evaluate
the same model wherever the hardware as the assumptions leave it, the node, the workload and
the parameters coincide: an alternative that changes a budget, a power cap or a range asks
designs the study (or another alternative) has evaluated, and gets those results instead of
evaluating them again. Each run keeps its own sampler and its own trials; only the model's
answer for a design is shared, and the model is deterministic, so a reused result equals a
fresh one. Per process, bounded (LIMIT designs in all); no I/O."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from dse.model.batch import DesignBatch
from dse.search import chips as chip_count
from dse.spec.technology import TechSpec

LIMIT = 200_000  # designs kept in all (their arrays, ~0.4 kB each)
# model digest -> (stored results, design key -> (result index, row))
_STORE: dict[str, tuple[list[chip_count.JobResult], dict[tuple, tuple[int, int]]]] = {}
_STATS = {"hits": 0, "misses": 0, "kept": 0}


def clear() -> None:
    """Forget every stored evaluation (tests)."""
    _STORE.clear()
    _STATS.update(hits=0, misses=0, kept=0)


def stats() -> dict[str, int]:
    """Designs taken from the store and designs evaluated, since the last clear()."""
    return {k: _STATS[k] for k in ("hits", "misses")}


def _model_key(study, job, paths: tuple[str, ...]) -> str:
    """A digest of what decides one workload's result for a design besides its parameters:
    the hardware with the run's assumptions applied, its node, the workload and its split
    rule, and which paths the parameters give."""
    tech = study.tech.model_dump(mode="json") if study.tech is not None else None
    keep = {"hardware": study.hardware.model_dump(mode="json"), "tech": tech,
            "workload": job.workload.model_dump(mode="json"), "scenario": job.scenario,
            "fields": job.fields, "execution": (job.execution.chips, job.execution.tp,
                                                job.execution.pp, job.spec.tp,
                                                *job.execution.more_degrees),
            "paths": paths}
    text = json.dumps(keep, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _keys(params: dict[str, np.ndarray], paths: tuple[str, ...], n: int) -> list[tuple]:
    """One hashable key per design: its value of every path, in `paths` order."""
    if not paths:
        return [()] * n
    cols = [np.broadcast_to(np.asarray(params[p]), (n,)).tolist() for p in paths]
    return list(zip(*cols, strict=True))


def _empty(template: np.ndarray, n: int) -> np.ndarray:
    """n unfilled values of `template`'s kind: NaN for numbers; None (in an object array)
    for flags and text, so a flag stays a flag (a float 0.0 beside a fresh result's False
    made the trials table's column unwritable)."""
    return (np.full(n, np.nan) if template.dtype.kind in "iuf"
            else np.full(n, None, dtype=object))


def _gather(parts: list[tuple[np.ndarray, chip_count.JobResult, np.ndarray]], n: int
            ) -> chip_count.JobResult:
    """One JobResult of n designs from pieces: (positions, a stored or fresh result, its
    rows for those positions)."""
    def field(get) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for pos, res, rows in parts:
            for k, v in (get(res) or {}).items():
                v = np.asarray(v)
                if k not in out:
                    out[k] = _empty(v, n)
                elif out[k].dtype.kind == "f" and v.dtype.kind not in "iuf":
                    out[k] = out[k].astype(object)
                out[k][pos] = v[rows]
        return out

    feasible = np.zeros(n, dtype=bool)
    reason = np.full(n, "", dtype=object)
    sequences = np.full(n, np.nan)
    for pos, res, rows in parts:
        feasible[pos] = np.asarray(res.feasible)[rows]
        reason[pos] = np.asarray(res.reason, dtype=object)[rows]
        sequences[pos] = np.asarray(res.sequences, dtype=float)[rows]
    training = field(lambda r: r.training)
    return chip_count.JobResult(feasible=feasible, reason=reason, sequences=sequences,
                                metrics=field(lambda r: r.metrics),
                                training=training or None)


def evaluate_job(study, job, params: dict[str, np.ndarray], db: DesignBatch,
                 chips: np.ndarray, tech: TechSpec | None) -> chip_count.JobResult:
    """`job` on every design of `db` (chips.evaluate_job), taking the designs this process
    has evaluated on the same model from the store and evaluating the rest in one pass."""
    n = db.n
    paths = tuple(sorted(params))
    results, index = _STORE.setdefault(_model_key(study, job, paths), ([], {}))
    keys = _keys(params, paths, n)
    miss = np.array([k not in index for k in keys], dtype=bool)
    _STATS["hits"] += int(n - miss.sum())
    _STATS["misses"] += int(miss.sum())
    if not miss.any() or miss.all():
        fresh = chip_count.evaluate_job(db, job, chips, tech) if miss.all() else None
    else:
        fresh = chip_count.evaluate_job(db.take(np.flatnonzero(miss)), job, chips[miss], tech)
    parts: list[tuple[np.ndarray, chip_count.JobResult, np.ndarray]] = []
    if fresh is not None:
        idx = np.flatnonzero(miss)
        if miss.all():
            return _keep(results, index, keys, fresh)
        _keep(results, index, [keys[i] for i in idx], fresh)
        parts.append((idx, fresh, np.arange(len(idx))))
    by_result: dict[int, list[tuple[int, int]]] = {}
    for i in np.flatnonzero(~miss).tolist():
        r, row = index[keys[i]]
        by_result.setdefault(r, []).append((i, row))
    for r, items in by_result.items():
        pos, rows = (np.array(x) for x in zip(*items, strict=True))
        parts.append((pos, results[r], rows))
    return _gather(parts, n)


def _keep(results: list[chip_count.JobResult], index: dict[tuple, tuple[int, int]],
          keys: list[tuple], res: chip_count.JobResult) -> chip_count.JobResult:
    """Store `res` (its designs under `keys`) while the store has room; return it."""
    if _STATS["kept"] + len(keys) <= LIMIT:
        results.append(res)
        index.update((k, (len(results) - 1, i)) for i, k in enumerate(keys))
        _STATS["kept"] += len(keys)
    return res
