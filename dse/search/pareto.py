"""Pareto fronts and hypervolume over objective arrays with mixed directions. Pure numpy."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def as_minimized(values: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    """[N, G] values with maximized columns negated: smaller is better everywhere."""
    sign = np.array([-1.0 if d == "maximize" else 1.0 for d in directions])
    return np.asarray(values, dtype=float) * sign


def front_mask(values: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    """[N] bool: the designs no other design dominates (at least as good in every objective
    and better in one). Rows with a non-finite value are never on the front. Sorted sweep:
    O(N x front) comparisons."""
    v = as_minimized(values, directions)
    n = len(v)
    ok = np.isfinite(v).all(axis=1) if n else np.zeros(0, dtype=bool)
    mask = np.zeros(n, dtype=bool)
    idx = np.flatnonzero(ok)
    if not idx.size:
        return mask
    order = idx[np.lexsort(v[idx].T[::-1])]  # by the first objective, ties by the next
    front: list[int] = []
    for i in order:
        if front:
            f = v[front]
            dominated = np.any(np.all(f <= v[i], axis=1) & np.any(f < v[i], axis=1))
            if dominated or np.any(np.all(f == v[i], axis=1)):
                continue
        front.append(i)
    mask[front] = True
    return mask


def hypervolume(values: np.ndarray, directions: Sequence[str], reference: np.ndarray) -> float:
    """Volume of objective space the designs dominate, bounded by `reference` (a point every
    design should beat; in the objectives' own directions). Exact, by recursive slicing on
    the first objective (fine for fronts of a few thousand points in 2-4 objectives)."""
    v = as_minimized(values, directions)
    ref = as_minimized(np.asarray(reference, dtype=float)[None, :], directions)[0]
    v = v[np.isfinite(v).all(axis=1)]
    v = v[np.all(v < ref, axis=1)]
    if not len(v):
        return 0.0
    v = v[front_mask(v, ["minimize"] * v.shape[1])]
    return float(_hv(v, ref))


def _hv(v: np.ndarray, ref: np.ndarray) -> float:
    if v.shape[1] == 1:
        return float(ref[0] - v[:, 0].min())
    if v.shape[1] == 2:
        o = v[np.argsort(v[:, 0])]
        ys = np.minimum.accumulate(o[:, 1])
        xs = np.append(o[1:, 0], ref[0])
        return float(np.sum((xs - o[:, 0]) * (ref[1] - ys)))
    o = v[np.argsort(v[:, 0])]
    total = 0.0
    for i in range(len(o)):
        upper = o[i + 1, 0] if i + 1 < len(o) else ref[0]
        width = upper - o[i, 0]
        if width <= 0:
            continue
        sub = o[: i + 1, 1:]
        sub = sub[front_mask(sub, ["minimize"] * sub.shape[1])]
        total += width * _hv(sub, ref[1:])
    return total


def reference_point(values: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    """A reference point for comparing fronts of one study: the worst value of each objective
    over `values` (finite rows), pushed 10% further out, in the objectives' directions."""
    v = as_minimized(values, directions)
    v = v[np.isfinite(v).all(axis=1)]
    worst = v.max(axis=0)
    span = np.maximum(v.max(axis=0) - v.min(axis=0), np.abs(worst) * 1e-9 + 1e-300)
    return as_minimized((worst + 0.1 * span)[None, :], directions)[0]
