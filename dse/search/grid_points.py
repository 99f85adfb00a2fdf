"""The grid's points: the values of each axis and one chunk of designs evaluated, the unit of
work wherever a grid runs (dse.search.grid in this process, dse.search.cluster on a Dask
worker); below both, so neither imports the other for it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dse.search.outputs import evaluate_frame
from dse.search.space import Study


def grid_axes(study: Study) -> list[np.ndarray]:
    """The values each parameter takes on the grid (SI units)."""
    return [p.grid(study.spec.search.grid_points) for p in study.params]


def grid_chunk(study: Study, axes: list[np.ndarray], baseline: dict[str, dict[str, float]],
               lo: int, hi: int) -> pd.DataFrame:
    """Designs lo..hi-1 of the grid (at most CHUNK of them), evaluated in one vectorized
    call: the unit of work wherever the grid runs (this process or a Dask worker)."""
    shape = tuple(len(a) for a in axes)
    idx = np.unravel_index(np.arange(lo, hi), shape)
    params = {p.path: axes[j][idx[j]] for j, p in enumerate(study.params)}
    part = evaluate_frame(study, params, baseline)
    part.insert(0, "number", np.arange(lo, lo + len(part)))
    part.insert(1, "state", "COMPLETE")
    return part
