"""Hit rates of embedding-table accesses: static placement of the hottest rows, LRU caches
(Che's approximation) and measured hit-rate curves. Pure numpy; no I/O; vectorized over
designs ([N] capacities, table parameters scalars or [N]).

A table of R rows is accessed row i (1 = hottest) with Zipf probability p_i = i^-a / H(R, a),
H(R, a) = sum_{i<=R} i^-a (a = 0 is uniform). Nothing is ever materialized per row, so tables
of 10^10 rows cost what tables of 10^3 do:

- `harmonic` sums the first HEAD_EXACT terms exactly and the rest by Euler-Maclaurin
  (integral + three correction terms; the first neglected one, a..(a+4) 64^(-a-5) / 30240, is
  below 1e-13 relative for a <= 3, and the tests hold it to 1e-12 against correctly rounded
  sums of up to 10^6 terms); the integral goes through expm1, so a = 1 (ln) and a near 1 are
  exact, and a = 0 gives n. A fractional n adds that fraction of the next row's term.
- `top_share(R, a, k) = H(k, a) / H(R, a)`: the share of accesses that go to the k hottest
  rows, i.e. what a scratchpad or fast memory tier that statically holds them serves. Stored
  bytes (k rows) and served accesses (this share) are different quantities.
- `lru_hit_rate`: Che's approximation (Che, Tung, Wang, IEEE JSAC 20(7) 2002; Fricker,
  Robert, Roberts, ITC 24, 2012, "A versatile and accurate approximation for LRU cache
  performance"): under independent references an LRU cache of C rows behaves as if each row
  stayed a characteristic time T_C after its last access, sum_i (1 - exp(-p_i T_C)) = C, and
  hit = sum_i p_i (1 - exp(-p_i T_C)). Against an exact LRU simulated on Zipf streams it is
  within 0.006 absolute (tests/model/test_hitrate.py). The sums take CHE_HEAD ranks one by
  one, then CHE_BUCKETS log-spaced buckets up to R, each as (its rows) x f(their exact mean
  popularity, from `harmonic`), so total rows and total probability stay exact. f(p) = 1 -
  exp(-p T) is concave: a bucket over-counts by about its rows x 0.27 var(p) / mean(p)^2, i.e.
  O((a ln r)^2) for a bucket spanning a rank ratio r, falling as 1 / CHE_BUCKETS^2. Measured:
  within 2.4e-5 of sums over every row (R = 10^4..10^7, a = 0..2, C = 0.01%..90% of R) and
  7e-5 of a 2048-bucket sum at R = 4e10. T_C comes from a safeguarded Newton iteration on
  (ln T, ln occupancy); many capacities over the same tables instead tabulate occupancy and
  hit rates on a grid of ln T once and interpolate (monotone cubic Hermite; < 1e-8 apart);
  the solver is dse.model.che.
- Several tables sharing one cache: one characteristic time for the union of their rows,
  each row requested with probability rate_t p_i / sum(rate) and sized bytes_per_row_t
  (Che's approximation with unequal sizes: occupancy is counted in bytes).
- Static placement across tables and tiers: the globally hottest bytes first (access rate
  per byte, rate_t p_i / bytes_per_row_t), filled up to a capacity by a water level; a tier
  hierarchy applies it to the cumulative capacities (HBM gets the hottest bytes, LPDDR the
  next, ...). Placement is fluid: a tier boundary may split a row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from dse.model.che import CHUNK, che_grid, che_solve

# Default Zipf exponent of embedding-row popularity, for tables that give none. A convention,
# not a measured fit (no published exponent for Criteo or production tables was found):
# embedding-cache work uses 1.1-1.4 -- UGache (Song et al., SOSP 2023) synthesizes its DLRM
# sets with a = 1.2 and 1.4 (github.com/SJTU-IPADS/ugache, datagen/dlr/syn.py, syn-b.py);
# TorchRec's skewed test inputs propose 1.1-1.2 (meta-pytorch/torchrec PR #3708). 1.1 is the
# less skewed end, so caches are not flattered. It matters: the hottest 1% of a 4e7-row table
# serve 56% of lookups at a = 0.9, 89% at 1.1, 96% at 1.2. Set alpha per table where known.
DEFAULT_ZIPF_ALPHA = 1.1

HEAD_EXACT = 64     # harmonic numbers: ranks summed term by term before Euler-Maclaurin
CHE_HEAD = 64       # Che's approximation: ranks kept as single rows
CHE_BUCKETS = 192   # ... and log-spaced buckets from CHE_HEAD to R
_WATER_STEPS = 48   # bisection of the placement water level in log(rate per byte)
_GRID_MIN_DESIGNS = 16  # more designs than this over the same tables: tabulate in ln T


def _expm1_over(b: np.ndarray) -> np.ndarray:
    """expm1(b) / b, 1 at b = 0 (the integral of x^-a near a = 1 without cancellation)."""
    small = np.abs(b) < 1e-8
    safe = np.where(small, 1.0, b)
    return np.where(small, 1.0 + 0.5 * b, np.expm1(safe) / safe)


def _em_tail(lo: np.ndarray, hi: np.ndarray, a: np.ndarray) -> np.ndarray:
    """sum_{i=lo+1}^{hi} i^-a for integers HEAD_EXACT <= lo <= hi, by Euler-Maclaurin: the
    integral, then the corrections in f, f' and f''' (Bernoulli numbers B2 and B4)."""
    span = np.log(hi / lo)
    integral = lo ** (1.0 - a) * span * _expm1_over((1.0 - a) * span)
    b2 = a * (lo ** (-a - 1.0) - hi ** (-a - 1.0)) / 12.0
    b4 = a * (a + 1.0) * (a + 2.0) * (lo ** (-a - 3.0) - hi ** (-a - 3.0)) / 720.0
    return integral + 0.5 * (hi**-a - lo**-a) + b2 - b4


class _Harmonic:
    """Partial sums H(n) = sum_{i<=n} i^-a for the exponents `alpha` (any shape): the first
    HEAD_EXACT terms summed exactly (one small table per distinct exponent, so batches of
    distinct exponents stay cheap), Euler-Maclaurin between whole numbers beyond, linear
    between whole numbers (a fractional n adds that fraction of the next row's term)."""

    def __init__(self, alpha: ArrayLike):
        a = np.asarray(alpha, dtype=float)
        if not np.all(np.isfinite(a)) or np.any(a < 0):
            raise ValueError("Zipf exponents must be finite and >= 0")
        self.alpha = a
        uniq, inverse = np.unique(a, return_inverse=True)
        self._row = inverse.reshape(a.shape)
        terms = np.arange(1.0, HEAD_EXACT + 1.0)[None, :] ** -uniq[:, None]
        self._cum = np.concatenate([np.zeros((uniq.size, 1)), np.cumsum(terms, axis=1)], 1)

    def between(self, lo: ArrayLike, hi: ArrayLike) -> np.ndarray:
        """H(hi) - H(lo) for 0 <= lo <= hi (broadcast against alpha), without cancelling two
        large sums."""
        lo, hi = (np.maximum(np.asarray(x, dtype=float), 0.0) for x in (lo, hi))
        lo, hi, a, row = np.broadcast_arrays(lo, hi, self.alpha, self._row)
        m_lo, m_hi = np.floor(lo), np.floor(hi)
        head = (self._cum[row, np.minimum(m_hi, HEAD_EXACT).astype(np.int64)]
                - self._cum[row, np.minimum(m_lo, HEAD_EXACT).astype(np.int64)])
        tail = _em_tail(np.maximum(m_lo, HEAD_EXACT), np.maximum(m_hi, HEAD_EXACT), a)
        return (head + tail + (hi - m_hi) * (m_hi + 1.0) ** -a
                - (lo - m_lo) * (m_lo + 1.0) ** -a)

    def __call__(self, n: ArrayLike) -> np.ndarray:
        return self.between(0.0, n)


def harmonic(n: ArrayLike, alpha: ArrayLike) -> np.ndarray:
    """Generalized harmonic number H(n, alpha) = sum_{i=1}^{n} i^-alpha (fractional n adds
    that fraction of the next term); n up to ~1e15, alpha >= 0."""
    return _Harmonic(alpha)(n)


def zipf_popularity(rank: ArrayLike, rows: ArrayLike, alpha: ArrayLike) -> np.ndarray:
    """Access probability of the row of 1-based `rank` in a table of `rows` rows, Zipf
    exponent `alpha`; 0 outside 1..rows."""
    rank, rows = np.asarray(rank, dtype=float), _rows(rows)
    p = np.maximum(rank, 1.0) ** -np.asarray(alpha, dtype=float) / harmonic(rows, alpha)
    return np.where((rank >= 1) & (rank <= rows), p, 0.0)


def top_share(rows: ArrayLike, alpha: ArrayLike, k: ArrayLike) -> np.ndarray:
    """Share of a table's accesses that go to its k hottest rows (k clipped to [0, rows],
    fractional allowed): what a memory holding exactly those rows serves."""
    rows = _rows(rows)
    h = _Harmonic(alpha)
    return np.clip(h(np.clip(k, 0.0, rows)) / h(rows), 0.0, 1.0)


def _rows(rows: ArrayLike) -> np.ndarray:
    r = np.asarray(rows, dtype=float)
    if not np.all(np.isfinite(r)) or np.any(r < 1):
        raise ValueError("a table has at least one row")
    return r


@dataclass(frozen=True)
class Table:
    """One embedding table: rows, Zipf exponent, bytes per row and access rate (lookups per
    sample; only ratios between tables matter). Each field a scalar or an [N] array."""

    rows: ArrayLike
    alpha: ArrayLike = DEFAULT_ZIPF_ALPHA
    bytes_per_row: ArrayLike = 1.0
    rate: ArrayLike = 1.0

    @property
    def bytes(self) -> np.ndarray:
        return np.asarray(self.rows, dtype=float) * np.asarray(self.bytes_per_row, dtype=float)


class _Tables(NamedTuple):
    """Tables stacked [N or 1, T] (rows, alpha, bytes per row, share of all lookups)."""

    rows: np.ndarray
    alpha: np.ndarray
    size: np.ndarray
    share: np.ndarray


def _stack(tables: Sequence[Table], n: int) -> _Tables:
    if not tables:
        raise ValueError("no tables")
    cols = [np.stack(np.broadcast_arrays(*[np.asarray(getattr(t, f), dtype=float)
                                           for t in tables]), axis=-1)
            for f in ("rows", "alpha", "bytes_per_row", "rate")]
    if any(c.ndim > 1 for c in cols):  # some field per design: [N, T]
        cols = [np.broadcast_to(c, (n, c.shape[-1])) for c in cols]
    rows, alpha, size, rate = (np.atleast_2d(c) for c in cols)  # [N or 1, T]
    _rows(rows)
    if np.any(size <= 0) or np.any(rate < 0) or not np.all(np.isfinite(size * rate)):
        raise ValueError("bytes per row must be > 0 and rates >= 0, finite")
    total = rate.sum(axis=1, keepdims=True)
    return _Tables(rows, alpha, size, np.divide(rate, total, out=np.zeros_like(rate),
                                                where=total > 0))


# --- LRU: Che's approximation ------------------------------------------------------------

def popularity_nodes(rows: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows per node and the mean popularity of their rows, [..., CHE_HEAD + CHE_BUCKETS]:
    ranks 1..CHE_HEAD one by one, then log-spaced buckets from CHE_HEAD to rows."""
    r = rows[..., None]
    ranks = np.arange(CHE_HEAD, dtype=float)
    edges = CHE_HEAD * (np.maximum(r, CHE_HEAD) / CHE_HEAD) ** (
        np.arange(CHE_BUCKETS + 1) / CHE_BUCKETS)
    edges[..., -1] = np.maximum(rows, CHE_HEAD)  # exactly R, no rounding drift
    head = np.broadcast_to(ranks, (*r.shape[:-1], CHE_HEAD))
    lo = np.concatenate([head, edges[..., :-1]], -1)
    hi = np.concatenate([head + 1.0, edges[..., 1:]], -1)
    hi = np.minimum(hi, r)
    lo = np.minimum(lo, hi)
    h = _Harmonic(alpha[..., None])
    weight = hi - lo
    mass = h.between(lo, hi) / h(r)
    p = np.divide(mass, weight, out=np.zeros_like(mass), where=weight > 0)
    return weight, p


def _che(t: _Tables, capacity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-table hit rates [N, T] and the overall hit rate [N] of one LRU cache of
    `capacity` bytes [N] shared by tables `t` (fields [N, T] or [1, T])."""
    c = np.asarray(capacity, dtype=float)
    n, nt = c.size, t.rows.shape[1]
    room = np.where(t.share > 0, t.rows * t.size, 0.0).sum(axis=1)  # bytes of requested rows
    room = np.broadcast_to(room, (n,))
    full = c >= room * (1 - 1e-12)
    solve = ~full & (c > 0)
    share = np.broadcast_to(t.share, (n, nt))
    hits = np.where(full[:, None], (share > 0).astype(float), 0.0)
    idx = np.flatnonzero(solve)
    nodes = popularity_nodes(t.rows, t.alpha) if t.rows.shape[0] == 1 else None
    if nodes is not None and idx.size > _GRID_MIN_DESIGNS:  # same tables: tabulate once
        hits[idx] = che_grid(*nodes, t.share[..., None], t.size[..., None], c[idx], room[0])
    else:
        step = max(1, CHUNK // (nt * (CHE_HEAD + CHE_BUCKETS)))
        for s in range(0, idx.size, step):
            i = idx[s:s + step]
            sub = t if nodes is not None else _Tables(*(f[i] if len(f) > 1 else f for f in t))
            weight, p = nodes if nodes is not None else popularity_nodes(sub.rows, sub.alpha)
            hits[i] = che_solve(weight, p, sub.share[..., None], sub.size[..., None], c[i],
                                 room[i])
    np.clip(hits, 0.0, 1.0, out=hits)
    return hits, np.clip((hits * share).sum(axis=1), 0.0, 1.0)


def lru_hit_rate(rows: ArrayLike, alpha: ArrayLike, capacity_rows: ArrayLike) -> np.ndarray:
    """Hit rate of an LRU cache of `capacity_rows` rows over one table of `rows` rows with
    Zipf exponent `alpha` (independent references; Che's approximation). Broadcasts."""
    shape = np.broadcast_shapes(np.shape(rows), np.shape(alpha), np.shape(capacity_rows))
    r, a, c = (np.broadcast_to(np.asarray(x, dtype=float), shape).ravel()
               for x in (rows, alpha, capacity_rows))
    _rows(r)
    same = r.size > 0 and np.all(r == r[0]) and np.all(a == a[0])
    one = np.ones((1, 1))
    t = _Tables((r[:1] if same else r)[:, None], (a[:1] if same else a)[:, None], one, one)
    return _che(t, np.minimum(c, r))[0][:, 0].reshape(shape)


class SharedHits(NamedTuple):
    per_table: np.ndarray  # [N, T] hit rate of each table's lookups
    overall: np.ndarray    # [N] hit rate of all lookups (weighted by rate)


def shared_lru_hit_rates(tables: Sequence[Table], capacity_bytes: ArrayLike) -> SharedHits:
    """Hit rates of one LRU cache of `capacity_bytes` ([N]) shared by `tables`: Che's
    approximation over the union of their rows with one characteristic time."""
    c = np.atleast_1d(np.asarray(capacity_bytes, dtype=float))
    t = _stack(tables, c.size)
    return SharedHits(*_che(t, c))


# --- Static placement: hottest bytes first -----------------------------------------------

def shared_top_share(tables: Sequence[Table],
                     capacity_bytes: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Place the globally hottest rows (highest access rate per byte) of `tables` into
    `capacity_bytes` ([N]): (bytes placed [N, T], share of each table's accesses placed
    there [N, T]). Tables without accesses are placed last, in proportion to their bytes."""
    c = np.atleast_1d(np.asarray(capacity_bytes, dtype=float))
    t = _stack(tables, c.size)
    h = _Harmonic(t.alpha)
    rows = _hot_rows(t, h, np.maximum(c, 0.0))
    return rows * t.size, np.clip(h(rows) / h(t.rows), 0.0, 1.0)


def _hot_rows(t: _Tables, h: _Harmonic, c: np.ndarray) -> np.ndarray:
    """Rows [N, T] of each table among the hottest `c` bytes, by a water level theta on the
    access rate per byte: a table holds the rows i with share p_i / size >= theta."""
    live = t.share > 0
    # ln density of row 1, summed in logs: a tiny share over a large H(R) x size must not
    # underflow to 0 (a live table that would then never be placed)
    with np.errstate(divide="ignore"):
        top = np.where(live, np.log(np.where(live, t.share, 1.0)) - np.log(h(t.rows))
                       - np.log(t.size), 0.0)
    a = t.alpha
    live_bytes = np.where(live, t.rows * t.size, 0.0).sum(axis=1)

    def rows_at(level: np.ndarray) -> np.ndarray:  # rows with density >= e^level, [N, T]
        gap = top - level[:, None]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            k = np.where(a > 0, np.exp(np.minimum(gap / np.where(a > 0, a, 1.0), 60.0)),
                         np.where(gap >= 0, np.inf, 0.0))
        k = np.where(gap >= 0, np.minimum(k, t.rows), 0.0)
        return np.where(live, k, 0.0)

    bottom = np.where(live, top - a * np.log(t.rows), np.inf).min(axis=1)  # coldest row
    lo = bottom - 1.0                                     # everything live placed
    hi = np.where(live, top, -np.inf).max(axis=1) + 1.0   # nothing placed
    cap = np.minimum(c, live_bytes)
    for _ in range(_WATER_STEPS):
        mid = 0.5 * (lo + hi)
        over = (rows_at(mid) * t.size).sum(axis=1) > cap
        lo, hi = np.where(over, mid, lo), np.where(over, hi, mid)
    # rows between the two levels have (almost) equal density: split the rest of the
    # capacity among them in proportion, so the placed bytes are exactly the capacity
    k_hi, k_lo = rows_at(hi), rows_at(lo)
    b_hi, b_lo = (k_hi * t.size).sum(axis=1), (k_lo * t.size).sum(axis=1)
    frac = np.divide(cap - b_hi, b_lo - b_hi, out=np.zeros_like(cap), where=b_lo > b_hi)
    k = k_hi + np.clip(frac, 0.0, 1.0)[:, None] * (k_lo - k_hi)
    dead_bytes = np.where(live, 0.0, t.rows * t.size).sum(axis=1)
    spare = np.divide(c - live_bytes, dead_bytes, out=np.zeros_like(c), where=dead_bytes > 0)
    return np.where(live, k, np.clip(spare, 0.0, 1.0)[:, None] * t.rows)


def tiered_shares(tables: Sequence[Table],
                  capacities_bytes: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Static placement over an ordered tier list (fastest first), capacities [N, L]: the
    first tier holds the hottest bytes, the next the next hottest, ... Returns (stored bytes
    [N, T, L], share of each table's accesses served by each tier [N, T, L]). Where the tiers
    are too small, table bytes minus the stored sum is what does not fit."""
    cap = np.atleast_2d(np.asarray(capacities_bytes, dtype=float))
    cum = np.cumsum(np.maximum(cap, 0.0), axis=1)
    placed = [shared_top_share(tables, cum[:, level]) for level in range(cap.shape[1])]
    zero = np.zeros_like(placed[0][0])[..., None]
    stored = np.concatenate([zero, np.stack([b for b, _ in placed], -1)], -1)
    share = np.concatenate([zero, np.stack([s for _, s in placed], -1)], -1)
    return np.diff(stored, axis=-1).clip(0.0), np.diff(share, axis=-1).clip(0.0)


# --- Measured curves ---------------------------------------------------------------------

def curve_hit_rate(points: ArrayLike, capacity_fraction: ArrayLike,
                   at_full: float | None = 1.0) -> np.ndarray:
    """Hit rate from a measured curve of (fraction of the table's rows cached, hit rate)
    points, at `capacity_fraction` ([N]). Between points: linear in log capacity (hit-rate
    curves of skewed streams are near-linear in log size); from 0 to the first point: linear
    in capacity (0 at 0). Past the last point: toward `at_full` at fraction 1 (linear in log
    capacity; 1.0 = the whole table cached hits every time), or the last hit rate held when
    `at_full` is None. Hit rates are made non-decreasing (running maximum) first."""
    pts = np.asarray(points, dtype=float).reshape(-1, 2)
    pts = pts[np.argsort(pts[:, 0], kind="stable")]
    if (np.any(pts[:, 0] < 0) or np.any((pts[:, 0] == 0) & (pts[:, 1] != 0))
            or np.any((pts[:, 1] < 0) | (pts[:, 1] > 1)) or not np.all(np.isfinite(pts))):
        raise ValueError("curve points are (fraction >= 0, hit rate in [0, 1]); 0 hits at 0")
    pts = pts[pts[:, 0] > 0]
    if pts.size == 0:
        raise ValueError("a hit-rate curve needs a point with a capacity fraction > 0")
    frac, hit = pts[:, 0], np.maximum.accumulate(pts[:, 1])
    if at_full is not None and frac[-1] < 1.0:
        frac, hit = np.append(frac, 1.0), np.append(hit, max(float(at_full), hit[-1]))
    x = np.clip(np.asarray(capacity_fraction, dtype=float), 0.0, None)
    logged = np.interp(np.log(np.maximum(x, frac[0])), np.log(frac), hit)
    return np.where(x < frac[0], hit[0] * x / frac[0], logged)
