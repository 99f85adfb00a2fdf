"""Distinct rows of a table touched by a batch of lookups, and where they live. Pure numpy;
no I/O.

A batch of n independent lookups from a table of R rows with Zipf popularity p_i touches
row i at least once with probability 1 - (1 - p_i)^n ~ 1 - exp(-n p_i) (p_i << 1), so the
expected number of distinct rows is D(R) = sum_i (1 - exp(-n p_i)): the occupancy sum of
Che's approximation (dse.model.hitrate) with the characteristic time replaced by n. A
training step's sparse optimizer update reads and writes each distinct row once (FBGEMM's
TBE backward sorts the lookups by row and applies one update per unique row), so it moves
D(R) rows, not n. Those rows are flatter than the lookups (a hot row looked up 1,000 times
is updated once): the share of them stored among the k hottest rows is D(k) / D(R). The
sums run over the same nodes as Che's approximation (single ranks, then log-spaced buckets
whose rows share their mean popularity), so tables of 10^10 rows cost what small ones do.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from dse.model.hitrate import popularity_nodes


def distinct_rows(rows: ArrayLike, alpha: ArrayLike, draws: ArrayLike,
                  hottest: ArrayLike | None = None) -> np.ndarray:
    """Expected distinct rows touched by `draws` Zipf(`alpha`) lookups into a table of
    `rows` rows; with `hottest`, only those among the `hottest` hottest rows (a fractional
    count takes that share of its bucket). Broadcasts over all arguments."""
    shape = np.broadcast_shapes(*(np.shape(x) for x in (rows, alpha, draws)),
                                np.shape(hottest) if hottest is not None else ())
    rows, alpha, draws = (_one_value(x) for x in (rows, alpha, draws))
    if np.any(draws < 0) or not np.all(np.isfinite(draws)):
        raise ValueError("lookups per batch must be finite and >= 0")
    # The nodes at the arguments' own shape (one table: once, not once per design), then
    # broadcast: the same numbers as nodes computed per element.
    weight, p = popularity_nodes(*np.broadcast_arrays(rows, alpha))  # [..., K]
    touched = -np.expm1(-draws[..., None] * p)
    if hottest is None:
        return np.broadcast_to((weight * touched).sum(axis=-1), shape).copy()
    lo = np.cumsum(weight, axis=-1) - weight  # rows before each node
    k = np.broadcast_to(np.asarray(hottest, dtype=float), shape)
    if weight.ndim == 1 and touched.ndim == 1 and k.size > 1:
        # one table: each element depends on its own count of hottest rows only, and the
        # designs share a few (a tier that holds every table): each distinct count once
        once, at = np.unique(k, return_inverse=True)
        inside = np.clip(once[:, None] - lo, 0.0, weight)
        return (inside * touched).sum(axis=-1)[at.reshape(shape)]
    inside = np.clip(k[..., None] - lo, 0.0, weight)
    return (inside * touched).sum(axis=-1)


def _one_value(x: ArrayLike) -> np.ndarray:
    """x as a float array, 0-d where it holds one value repeated by broadcasting (every
    stride 0), so a table's rows, Zipf exponent and batch broadcast to the per-design shape
    still compute their popularity nodes once."""
    arr = np.asarray(x, dtype=float)
    if arr.ndim and arr.size and not any(arr.strides):
        return np.asarray(arr[(0,) * arr.ndim])
    return arr


def distinct_share(rows: ArrayLike, alpha: ArrayLike, draws: ArrayLike,
                   hottest: ArrayLike) -> np.ndarray:
    """Share of the distinct rows a batch of `draws` lookups touches that lie among the
    `hottest` hottest rows: what a tier holding those rows serves of the update."""
    whole = distinct_rows(rows, alpha, draws)
    part = distinct_rows(rows, alpha, draws, hottest)
    return np.divide(part, whole, out=np.zeros(np.shape(part)), where=whole > 0).clip(0, 1)
