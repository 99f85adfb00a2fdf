"""Grid mode: every combination of the parameters' grid values, evaluated in vectorized
chunks without a sampler (no Optuna trial per design), to measure how close a sampler's
front comes to the exhaustive one."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dse.errors import DseError
from dse.search.objective import baseline_of
from dse.search.outputs import CHUNK, evaluate_frame
from dse.search.space import Study


def grid_axes(study: Study) -> list[np.ndarray]:
    """The values each parameter takes on the grid (SI units)."""
    return [p.grid(study.spec.search.grid_points) for p in study.params]


def grid_size(study: Study) -> int:
    return math.prod(len(a) for a in grid_axes(study))


def grid_frame(study: Study) -> pd.DataFrame:
    """Every design of the grid, evaluated (`evaluate_frame` columns, `number` = the design's
    index in C order over the parameters as listed). Refuses grids above search.max_designs."""
    axes = grid_axes(study)
    total = math.prod(len(a) for a in axes)
    limit = study.spec.search.max_designs
    if total > limit:
        sizes = " x ".join(str(len(a)) for a in axes)
        raise DseError(f"{study.path}: search.max_designs: the grid has {total:,} designs "
                       f"({sizes}), more than the limit of {limit:,}; lower "
                       "search.grid_points, widen steps, or raise search.max_designs")
    baseline = baseline_of(study)
    parts = []
    shape = tuple(len(a) for a in axes)
    for lo in range(0, total, CHUNK):
        idx = np.unravel_index(np.arange(lo, min(lo + CHUNK, total)), shape)
        params = {p.path: axes[j][idx[j]] for j, p in enumerate(study.params)}
        part = evaluate_frame(study, params, baseline)
        part.insert(0, "number", np.arange(lo, lo + len(part)))
        part.insert(1, "state", "COMPLETE")
        parts.append(part)
    return pd.concat(parts, ignore_index=True)
