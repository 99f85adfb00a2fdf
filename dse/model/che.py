"""Che's approximation of LRU hit rates, solved numerically (dse.model.hitrate sets up the
popularity nodes and reads the hits): the characteristic time T of a cache of given size by
a safeguarded Newton iteration in ln T, or, for many capacities over the same tables, from
a table of occupancy and hits on a grid of ln T, interpolated by monotone cubic Hermite
(< 1e-8 apart). Pure numpy; no I/O.
"""

from __future__ import annotations

import numpy as np

_NEWTON_STEPS = 60  # safeguarded Newton in log T; converges in ~6-10
_GRID_STEP = 0.05   # ... with this step in ln T
CHUNK = 1 << 22    # Che nodes evaluated at once (designs x tables x nodes), bounds memory


def che_solve(weight: np.ndarray, p: np.ndarray, share: np.ndarray, size: np.ndarray,
               c: np.ndarray, room: np.ndarray) -> np.ndarray:
    """Solve sum space (1 - e^(-q T)) = c for T by safeguarded Newton on (ln T, ln occupancy)
    (space = weight x size bytes, q = share x p per node: [M or 1, T, K]; c, room [M]), then
    each table's hit rate, sum weight p (1 - e^(-q T)), [M, T]."""
    lnq, space, q_min, per_req = _che_terms(weight, p, share, size)
    lo = np.log(c) - np.log(per_req)                   # occupancy(e^lo) <= c
    hi = np.log(-np.log1p(-c / room)) - np.log(q_min)  # occupancy(e^hi) >= c
    u, target = lo.copy(), np.log(c)
    for _ in range(_NEWTON_STEPS):
        filled, rate = _fill(lnq, u[:, None, None])
        occ = (space * filled).sum(axis=(1, 2))
        f = np.log(occ) - target
        if np.all((np.abs(f) < 1e-12) | (hi - lo < 1e-13)):
            break
        slope = (space * rate).sum(axis=(1, 2)) / occ
        lo, hi = np.where(f < 0, u, lo), np.where(f > 0, u, hi)
        newton = u - f / np.maximum(slope, 1e-300)
        u = np.where((newton > lo) & (newton < hi), newton, 0.5 * (lo + hi))
    return (weight * p * _fill(lnq, u[:, None, None])[0]).sum(axis=2)


def _che_terms(weight: np.ndarray, p: np.ndarray, share: np.ndarray, size: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """ln of each node's request probability (-inf: never requested), its bytes, and the
    bracket terms: the smallest request probability and the bytes per request."""
    q = share * p
    with np.errstate(divide="ignore"):
        lnq = np.where(weight > 0, np.log(q), -np.inf)
    space = weight * size
    q_min = np.where(np.isfinite(lnq), q, np.inf).min(axis=(-2, -1))
    return lnq, space, q_min, (space * q).sum(axis=(-2, -1))


def _fill(lnq: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """1 - exp(-q T) and its derivative in ln T, q T exp(-q T), at T = e^u, without
    overflow for any q T."""
    x = lnq + u
    tq = np.exp(np.minimum(x, 700.0))
    return -np.expm1(-tq), np.exp(x - tq)


def che_grid(weight: np.ndarray, p: np.ndarray, share: np.ndarray, size: np.ndarray,
              c: np.ndarray, room: np.ndarray) -> np.ndarray:
    """`_che_solve` for many capacities c [M] over the same tables ([1, T, K] nodes):
    occupancy and hit rates tabulated on a grid of ln T with their exact derivatives, then
    interpolated (monotone cubic Hermite) at each capacity; error < 1e-6 at the grid step.
    The table covers every capacity from one byte to the whole of the requested rows and is
    kept for the next call over the same tables (a study asks for the same tables batch
    after batch): a pure function's results, memoized."""
    u, occ, docc, hit, dhit = _che_table(weight[0], p[0], share[0], size[0], room)
    at = _hermite(np.log(occ), u, occ / np.maximum(docc, 1e-300), np.log(c))
    return _hermite(u, hit, dhit, at)


_TABLES: dict[bytes, tuple[np.ndarray, ...]] = {}
_TABLES_KEPT = 32  # distinct table sets memoized (oldest dropped first)


def _che_table(weight: np.ndarray, p: np.ndarray, share: np.ndarray, size: np.ndarray,
               room: np.ndarray) -> tuple[np.ndarray, ...]:
    key = b"".join(np.ascontiguousarray(np.broadcast_to(x, weight.shape), dtype=float).tobytes()
                   for x in (weight, p, share, size)) + np.float64(room).tobytes()
    hit_ = _TABLES.get(key)
    if hit_ is not None:
        return hit_
    lnq, space, q_min, per_req = _che_terms(weight, p, share, size)
    lo = -np.log(per_req)  # one byte of cache
    hi = np.log(-np.log1p(-(1.0 - 1e-12))) - np.log(q_min)  # all but 1e-12 of the rows
    u = np.linspace(lo, hi, int(np.clip(np.ceil((hi - lo) / _GRID_STEP), 8, 8192)) + 1)
    wp = weight * p
    occ, docc = np.empty(u.size), np.empty(u.size)
    hit, dhit = np.empty((u.size, wp.shape[0])), np.empty((u.size, wp.shape[0]))
    step = max(1, CHUNK // wp.size)
    for g in range(0, u.size, step):  # [G, T, K] a chunk of grid points at a time
        filled, rate = _fill(lnq, u[g:g + step, None, None])
        occ[g:g + step], docc[g:g + step] = (space * filled).sum((1, 2)), (space * rate).sum((1, 2))
        hit[g:g + step], dhit[g:g + step] = (wp * filled).sum(2), (wp * rate).sum(2)
    if len(_TABLES) >= _TABLES_KEPT:
        _TABLES.pop(next(iter(_TABLES)))
    _TABLES[key] = (u, occ, docc, hit, dhit)
    return _TABLES[key]


def _hermite(x: np.ndarray, y: np.ndarray, dy: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Cubic Hermite interpolation of increasing y(x) (x [G] increasing, y and dy [G] or
    [G, T]) at `at` [M]; slopes limited to 3x the neighbouring secants (Fritsch-Carlson), so
    the result is monotone. Points where x stops increasing are dropped."""
    keep = np.concatenate([[True], np.diff(x) > 0])
    x, y, dy = x[keep], y[keep], dy[keep]
    shape = (-1,) + (1,) * (y.ndim - 1)
    dx = np.diff(x).reshape(shape)
    secant = np.maximum(np.diff(y, axis=0) / dx, 0.0)
    pad = np.full((1, *y.shape[1:]), np.inf)
    bound = 3.0 * np.minimum(np.concatenate([pad, secant]), np.concatenate([secant, pad]))
    dy = np.clip(dy, 0.0, bound)
    i = np.clip(np.searchsorted(x, at) - 1, 0, x.size - 2)
    h = dx[i]
    s = (np.clip(at, x[0], x[-1]) - x[i]).reshape(shape) / h
    h00, h10 = (1 + 2 * s) * (1 - s) ** 2, s * (1 - s) ** 2
    h01, h11 = s * s * (3 - 2 * s), s * s * (s - 1)
    return h00 * y[i] + h10 * h * dy[i] + h01 * y[i + 1] + h11 * h * dy[i + 1]
