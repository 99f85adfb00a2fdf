"""Grid mode: every combination of the parameters' grid values, evaluated in vectorized
chunks without a sampler (no Optuna trial per design), to measure how close a sampler's
front comes to the exhaustive one."""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from dse.errors import DseError
from dse.search.grid_points import grid_axes, grid_chunk
from dse.search.objective import baseline_of
from dse.search.outputs import CHUNK
from dse.search.space import Study
from dse.search.urls import redact

if TYPE_CHECKING:
    from dse.search.cluster import GridCluster


def grid_size(study: Study) -> int:
    return math.prod(len(a) for a in grid_axes(study))


def grid_frame(study: Study, workers: int = 1, scheduler: str | None = None,
               cluster: GridCluster | None = None) -> pd.DataFrame:
    """Every design of the grid, evaluated (`evaluate_frame` columns, `number` = the design's
    index in C order over the parameters as listed). Refuses grids above search.max_designs.

    With `workers` > 1 the grid's chunks are evaluated by that many local Dask worker
    processes, with `scheduler` (tcp://host:port) by that Dask cluster's workers, with
    `cluster` by an open GridCluster (reused across a study's alternatives). The frame is the
    same, row for row and bit for bit, however many processes evaluated it: every chunk spans
    the same designs (CHUNK-aligned) wherever it runs."""
    total = check_grid_size(study)
    if cluster is None and (workers > 1 or scheduler is not None):
        with grid_cluster(workers, scheduler) as opened:
            return grid_frame(study, cluster=opened)
    if cluster is not None:
        return cluster.grid_frame(study, total)
    axes = grid_axes(study)
    baseline = baseline_of(study)
    return pd.concat([grid_chunk(study, axes, baseline, lo, min(lo + CHUNK, total))
                      for lo in range(0, total, CHUNK)], ignore_index=True)


def grid_cluster(workers: int = 1, scheduler: str | None = None
                 ) -> contextlib.AbstractContextManager[GridCluster | None]:
    """The Dask cluster a command's grids run on (its study's and its alternatives'): None
    for one process, else an open GridCluster of `workers` local processes or of the
    cluster at `scheduler`."""
    if workers <= 1 and scheduler is None:
        return contextlib.nullcontext()
    from dse.search.cluster import GridCluster

    return GridCluster(workers, scheduler)


def check_grid_size(study: Study) -> int:
    """The grid's number of designs; one line naming search.max_designs above it."""
    axes = grid_axes(study)
    total = math.prod(len(a) for a in axes)
    limit = study.spec.search.max_designs
    if total > limit:
        sizes = " x ".join(str(len(a)) for a in axes)
        raise DseError(f"{study.path}: search.max_designs: the grid has {total:,} designs "
                       f"({sizes}), more than the limit of {limit:,}; lower "
                       "search.grid_points, widen steps, or raise search.max_designs")
    return total


def store_grid(study: Study, frame: pd.DataFrame, url: str) -> int:
    """The grid's designs as finished trials of the study in storage `url` (created with
    Optuna's create_trial and added in batches: no sampler is asked); an earlier run's
    identical grid is kept as it is."""
    import optuna

    from dse.search.run import open_study
    from dse.search.trials import attr_columns, open_storage, trial_attrs

    stored = open_study(study, open_storage(url), url)
    held = len(stored.get_trials(deepcopy=False))
    if held == len(frame):  # the same grid, stored by an earlier run (same fingerprint)
        return held
    if held:
        raise DseError(f"{redact(url)}: the study already holds {held:,} trials, not this grid's "
                       f"{len(frame):,}; use another --out")
    dists = study.distributions()
    goals = [f"objective.{g.name}" for g in study.goals]
    cons = [c for c in frame.columns if c.startswith("constraint.")]
    attrs = attr_columns(frame.columns)
    worst = {"maximize": 0.0, "minimize": 1e30}
    batch = []
    records = frame.to_dict("records")
    for rec in records:
        values = [float(rec[g]) if np.isfinite(rec[g]) else worst[d]
                  for g, d in zip(goals, study.directions, strict=True)]
        batch.append(optuna.trial.create_trial(
            params={p.path: _native(p, rec[p.column]) for p in study.params},
            distributions=dists, values=values,
            constraints={c.removeprefix("constraint."): float(rec[c]) for c in cons},
            user_attrs=trial_attrs({c: rec[c] for c in attrs}, rec["feasible"],
                                   rec["reason"])))
        if len(batch) >= 4096:
            stored.add_trials(batch)
            batch = []
    stored.add_trials(batch)
    return len(records)


def _native(param, value: float) -> float | int | str:
    """A grid value as its distribution holds it (whole numbers as int, names by name)."""
    return param.stored(value)
