"""Hit-rate model of embedding accesses: harmonic numbers and top shares against exact sums,
Che's approximation against an exact LRU simulated on Zipf streams (one table, and two
tables of unequal row sizes sharing a cache), the bucketed sums against sums over every
row, huge tables fast and monotone, monotonicity properties, shared and tiered placement
(reduction to one table, greedy hottest-bytes-first, conservation), and measured curves."""

import math
import time
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq

import dse.model.hitrate as hr
from dse.model.hitrate import (
    DEFAULT_ZIPF_ALPHA,
    Table,
    curve_hit_rate,
    harmonic,
    lru_hit_rate,
    shared_lru_hit_rates,
    shared_top_share,
    tiered_shares,
    top_share,
    zipf_popularity,
)


def zipf(rows: int, alpha: float) -> np.ndarray:
    p = np.arange(1, rows + 1, dtype=float) ** -alpha
    return p / p.sum()


def simulate_lru(stream: list[int], size: list[float] | None, capacity: float,
                 warm: int) -> np.ndarray:
    """Exact LRU over `stream` (item ids; `size` per item, None = 1): hit flags after
    `warm` accesses."""
    cache: OrderedDict[int, None] = OrderedDict()
    used, hits = 0.0, np.zeros(len(stream) - warm, dtype=bool)
    for n, x in enumerate(stream):
        if x in cache:
            cache.move_to_end(x)
            if n >= warm:
                hits[n - warm] = True
            continue
        cache[x] = None
        used += 1.0 if size is None else size[x]
        while used > capacity:
            old, _ = cache.popitem(last=False)
            used -= 1.0 if size is None else size[old]
    return hits


def exact_che(p: np.ndarray, capacity: float) -> float:
    """Che's approximation summed over every row (no buckets)."""
    occupancy = lambda lt: -np.expm1(-p * np.exp(lt)).sum() - capacity  # noqa: E731
    lt = brentq(occupancy, -10.0, 100.0, xtol=1e-13)
    return float((p * -np.expm1(-p * np.exp(lt))).sum())


# --- Zipf sums -----------------------------------------------------------------------------

@pytest.mark.parametrize("alpha", [0.0, 0.5, 0.999999, 1.0, 1.000001, 1.5, 2.0, 3.0])
def test_harmonic_matches_exact_sum(alpha):
    n = np.array([0, 1, 2, 100, 4095, 4096, 4097, 50_000, 1_000_000])
    terms = np.arange(1, 1_000_001.0) ** -alpha
    exact = [math.fsum(terms[:k]) for k in n]  # correctly rounded, unlike a running sum
    assert np.allclose(harmonic(n, alpha), exact, rtol=1e-12, atol=0)


def test_harmonic_alpha_zero_and_one_in_closed_form():
    assert harmonic(4e10, 0.0) == pytest.approx(4e10, rel=1e-14)
    # H(n, 1) = ln n + Euler's gamma + 1/(2n) - ...
    assert harmonic(1e12, 1.0) == pytest.approx(np.log(1e12) + 0.5772156649015329, rel=1e-13)
    # alpha -> 1 is continuous (no 1 / (1 - alpha) blow-up)
    near = harmonic(1e9, [1 - 1e-10, 1.0, 1 + 1e-10])
    assert np.ptp(near) < 1e-7


@pytest.mark.parametrize("rows", [1, 7, 1000, 5000, 12_345])
@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0, 1.3, 2.0])
def test_top_share_matches_exact_sum(rows, alpha):
    p = zipf(rows, alpha)
    cum = np.concatenate([[0.0], np.cumsum(p)])
    k = np.array([0, 1, 2.5, rows / 3, rows - 0.5, rows, rows + 10, -3])
    kc = np.clip(k, 0, rows)
    whole = np.floor(kc).astype(int)
    frac_next = np.where(whole < rows, p[np.minimum(whole, rows - 1)], 0.0)
    exact = cum[whole] + (kc - whole) * frac_next
    assert np.allclose(top_share(rows, alpha, k), exact, atol=1e-12)


def test_zipf_popularity():
    p = zipf(5000, 1.1)
    got = zipf_popularity([0, 1, 17, 5000, 5001], 5000, 1.1)
    assert np.allclose(got, [0, p[0], p[16], p[-1], 0], rtol=1e-12)


def test_invalid_parameters_raise():
    with pytest.raises(ValueError):
        harmonic(10, -0.1)
    with pytest.raises(ValueError):
        top_share(0, 1.0, 1)
    with pytest.raises(ValueError):
        lru_hit_rate(100, np.nan, 10)


# --- Che's approximation against an exact LRU --------------------------------------------

@pytest.mark.parametrize(("rows", "alpha"), [(2000, 0.6), (5000, 0.9), (10_000, 1.1),
                                            (20_000, 1.3)])
def test_che_matches_simulated_lru(rows, alpha):
    rng = np.random.default_rng(rows)
    warm, n = 100_000, 250_000
    stream = rng.choice(rows, size=warm + n, p=zipf(rows, alpha)).tolist()
    fractions = np.array([0.01, 0.05, 0.2, 0.5])
    simulated = np.array([simulate_lru(stream, None, f * rows, warm).mean() for f in fractions])
    modelled = lru_hit_rate(rows, alpha, fractions * rows)
    assert np.all(np.abs(modelled - simulated) < 0.02), (modelled, simulated)


def test_shared_che_matches_simulated_lru_with_unequal_row_sizes():
    a = Table(rows=3000, alpha=0.9, bytes_per_row=64, rate=1.0)
    b = Table(rows=2000, alpha=1.2, bytes_per_row=256, rate=2.0)
    rng = np.random.default_rng(7)
    warm, n = 100_000, 200_000
    pick_b = rng.random(warm + n) < 2 / 3
    ids = np.where(pick_b, 3000 + rng.choice(2000, warm + n, p=zipf(2000, 1.2)),
                   rng.choice(3000, warm + n, p=zipf(3000, 0.9)))
    size = [64.0] * 3000 + [256.0] * 2000
    capacity = 0.2 * (3000 * 64 + 2000 * 256)
    hit = simulate_lru(ids.tolist(), size, capacity, warm)
    tail = pick_b[warm:]
    got = shared_lru_hit_rates([a, b], capacity)
    assert got.per_table[0] == pytest.approx([hit[~tail].mean(), hit[tail].mean()], abs=0.02)
    assert got.overall[0] == pytest.approx(hit.mean(), abs=0.02)


@pytest.mark.parametrize("rows", [10_000, 200_000])
@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0, 1.3, 2.0])
def test_bucketed_sums_match_every_row(rows, alpha):
    """The bucket scheme's error (documented in dse.model.hitrate; 2.4e-5 at most up to
    10^7 rows, checked once by hand): < 1e-4 absolute."""
    p = zipf(rows, alpha)
    capacity = np.array([0.001, 0.01, 0.1, 0.5, 0.9]) * rows
    exact = np.array([exact_che(p, c) for c in capacity])
    assert np.all(np.abs(lru_hit_rate(rows, alpha, capacity) - exact) < 1e-4)


def test_grid_and_newton_solutions_agree(monkeypatch):
    capacity = np.geomspace(1, 4e10, 300)
    grid = lru_hit_rate(4e10, 1.05, capacity)
    monkeypatch.setattr(hr, "_GRID_MIN_DESIGNS", 10**9)
    newton = lru_hit_rate(4e10, 1.05, capacity)
    assert np.max(np.abs(grid - newton)) < 1e-6


def test_lru_edges():
    assert np.allclose(lru_hit_rate(1000, 1.0, [-5, 0, 1000, 5000]), [0, 0, 1, 1])
    assert lru_hit_rate(1000, 0.0, 250) == pytest.approx(0.25, abs=1e-6)  # uniform: C / R
    assert lru_hit_rate(1, 1.0, 0.5) == pytest.approx(0.5, abs=1e-6)
    assert lru_hit_rate(np.full((2, 3), 1e5), 1.0, 1e3).shape == (2, 3)


@pytest.mark.parametrize("rows", [1e9, 4e10])
@pytest.mark.parametrize("alpha", [0.0, 0.6, DEFAULT_ZIPF_ALPHA, 2.0])
def test_huge_tables_fast_finite_monotone(rows, alpha):
    capacity = np.geomspace(1.0, rows, 1000)
    for f in (top_share, lru_hit_rate):
        best = np.inf
        for _ in range(3):
            start = time.perf_counter()
            out = f(rows, alpha, capacity)
            best = min(best, time.perf_counter() - start)
        assert best < 0.05, f"{f.__name__}: {best * 1e3:.1f} ms"
        assert np.all(np.isfinite(out)) and np.all((out >= 0) & (out <= 1))
        assert np.all(np.diff(out) >= -1e-12)


# --- properties ----------------------------------------------------------------------------

alphas = st.floats(0.0, 2.5)
fractions = st.floats(0.0, 1.0)


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 10**11), alpha=alphas,
       f=st.lists(fractions, min_size=2, max_size=20))
def test_more_capacity_never_lowers_the_hit_rate(rows, alpha, f):
    capacity = np.sort(np.array(f)) * rows
    for out in (lru_hit_rate(rows, alpha, capacity), top_share(rows, alpha, capacity)):
        assert np.all(np.isfinite(out)) and np.all((out >= 0) & (out <= 1))
        assert np.all(np.diff(out) >= -1e-12)


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(2, 10**11), a=st.lists(alphas, min_size=2, max_size=8),
       f=fractions)
def test_flatter_skew_never_raises_the_hit_rate(rows, a, f):
    alpha = np.sort(np.array(a))
    for out in (lru_hit_rate(rows, alpha, f * rows), top_share(rows, alpha, f * rows)):
        assert np.all(np.diff(out) >= -1e-9)


@settings(max_examples=40, deadline=None)
@given(tables=st.lists(st.tuples(st.integers(1, 10**9), alphas, st.sampled_from([4, 64, 512]),
                                 st.floats(0.0, 10.0)), min_size=1, max_size=5),
       f=st.lists(fractions, min_size=2, max_size=10))
def test_shared_results_bounded_and_monotone(tables, f):
    tabs = [Table(*t) for t in tables]
    if sum(t.rate for t in tabs) == 0:
        tabs[0] = Table(tables[0][0], tables[0][1], tables[0][2], 1.0)
    total = sum(float(t.bytes) for t in tabs)
    capacity = np.sort(np.array(f)) * total
    lru = shared_lru_hit_rates(tabs, capacity)
    stored, share = shared_top_share(tabs, capacity)
    for out in (lru.per_table, lru.overall, share):
        assert np.all(np.isfinite(out)) and np.all((out >= 0) & (out <= 1 + 1e-12))
        assert np.all(np.diff(out, axis=0) >= -1e-9)
    assert np.allclose(stored.sum(axis=1), capacity, rtol=1e-9)


# --- several tables ------------------------------------------------------------------------

def test_shared_reduces_to_one_table():
    capacity_rows = np.geomspace(10, 1e7, 50)
    single = lru_hit_rate(1e7, 0.95, capacity_rows)
    shared = shared_lru_hit_rates([Table(1e7, 0.95, 128, 3.0)], capacity_rows * 128)
    assert np.allclose(shared.per_table[:, 0], single, atol=1e-9)
    assert np.allclose(shared.overall, single, atol=1e-9)
    stored, share = shared_top_share([Table(1e7, 0.95, 128, 3.0)], capacity_rows * 128)
    assert np.allclose(stored[:, 0], capacity_rows * 128)
    assert np.allclose(share[:, 0], top_share(1e7, 0.95, capacity_rows), atol=1e-9)


def test_two_identical_tables_share_a_cache_evenly():
    capacity_rows = np.array([1e3, 1e5, 5e6])
    two = shared_lru_hit_rates([Table(1e7, 1.1, 64), Table(1e7, 1.1, 64)],
                               2 * 64 * capacity_rows)
    assert np.allclose(two.per_table, lru_hit_rate(1e7, 1.1, capacity_rows)[:, None],
                       atol=1e-9)


def test_per_design_table_parameters_match_a_loop():
    alpha = np.array([0.7, 1.0, 1.4])
    tables = [Table(5e6, alpha, 128, 1.0), Table(2e5, 1.2, np.array([64, 128, 256]), 4.0)]
    capacity = np.array([1e8, 5e7, 2e7])
    batch = shared_lru_hit_rates(tables, capacity)
    placed = shared_top_share(tables, capacity)
    for i in range(3):
        one = [Table(5e6, alpha[i], 128, 1.0), Table(2e5, 1.2, [64, 128, 256][i], 4.0)]
        assert np.allclose(shared_lru_hit_rates(one, capacity[i]).per_table[0],
                           batch.per_table[i], atol=1e-9)
        assert np.allclose(shared_top_share(one, capacity[i])[1][0], placed[1][i], atol=1e-9)


def test_static_placement_is_greedy_hottest_bytes_first():
    tables = [Table(300, 0.8, 64, 2.0), Table(500, 1.3, 256, 1.0), Table(200, 0.0, 32, 0.5)]
    density, owner, share = [], [], []
    total_rate = sum(t.rate for t in tables)
    for i, t in enumerate(tables):
        p = zipf(int(t.rows), t.alpha)
        density.append(t.rate / total_rate * p / t.bytes_per_row)
        owner.append(np.full(p.size, i))
        share.append(p)
    order = np.argsort(-np.concatenate(density), kind="stable")
    size = np.concatenate([np.full(int(t.rows), t.bytes_per_row) for t in tables])[order]
    who, p = np.concatenate(owner)[order], np.concatenate(share)[order]
    for capacity in [0.0, 5_000.0, 40_000.0, 100_000.0, 160_000.0]:
        placed = np.cumsum(size) <= capacity
        stored, got = shared_top_share(tables, capacity)
        assert stored.sum() == pytest.approx(min(capacity, size.sum()))
        for i in range(3):  # exact greedy up to one row (fluid placement splits a row)
            exact = p[placed & (who == i)].sum()
            assert got[0, i] == pytest.approx(exact, abs=p[who == i].max() + 1e-9)


def test_tiered_shares_conserve_bytes_and_accesses():
    tables = [Table(4e7, 1.05, 128, 1.0), Table(1e6, 0.5, 512, 3.0), Table(1e3, 0.0, 64, 1.0),
              Table(1e5, 1.2, 64, 0.0)]  # the last is never looked up
    total = sum(float(t.bytes) for t in tables)
    caps = np.array([[16e6, 0.2 * total, total], [0, 0, total], [total, 0, 0],
                     [1e6, 1e6, 1e6]])
    stored, share = tiered_shares(tables, caps)
    assert stored.shape == share.shape == (4, 4, 3)
    table_bytes = np.array([float(t.bytes) for t in tables])
    assert np.allclose(stored[:3].sum(axis=2), table_bytes, rtol=1e-12)
    assert np.allclose(share[:3].sum(axis=2), 1.0, atol=1e-12)
    assert np.allclose(stored[:, :, :].sum(axis=1), np.minimum(np.cumsum(caps, 1), total)
                       - np.concatenate([np.zeros((4, 1)),
                                         np.minimum(np.cumsum(caps, 1), total)[:, :-1]], 1))
    assert stored[3].sum() == pytest.approx(3e6)  # too small: only 3 MB of it placed
    # the first tier gets the hottest bytes: its accesses per byte beat the second tier's
    rates = np.array([t.rate for t in tables]) / 5.0
    per_byte = (share[0] * rates[:, None]).sum(0) / stored[0].sum(0)
    assert per_byte[0] > per_byte[1] > per_byte[2]
    # a table without lookups is placed last, after every looked-up byte
    assert stored[0, 3, :2].sum() == 0 and stored[0, 3, 2] == pytest.approx(table_bytes[3])


# --- measured curves -----------------------------------------------------------------------

def test_curve_hit_rate():
    points = [(0.01, 0.4), (0.1, 0.7), (0.5, 0.9)]
    x = np.array([0.0, 0.005, 0.01, np.sqrt(0.01 * 0.1), 0.1, 0.5, np.sqrt(0.5), 1.0, 2.0])
    got = curve_hit_rate(points, x)
    assert np.allclose(got, [0.0, 0.2, 0.4, 0.55, 0.7, 0.9, 0.95, 1.0, 1.0])
    held = curve_hit_rate(points, x, at_full=None)
    assert np.allclose(held[-3:], 0.9)
    # unsorted points and a dip are made monotone (running maximum)
    assert np.allclose(curve_hit_rate([(0.5, 0.9), (0.01, 0.4), (0.1, 0.3)], [0.1]), 0.4)
    # a point at 0 with 0 hits is allowed; a curve reaching 1.0 keeps its last hit rate
    assert np.allclose(curve_hit_rate([(0, 0), (1.0, 0.97)], [1.0, 3.0]), 0.97)


@pytest.mark.parametrize("points", [[(0.0, 0.1)], [(0.1, 1.5)], [(-0.1, 0.5)], []])
def test_curve_rejects_bad_points(points):
    with pytest.raises(ValueError):
        curve_hit_rate(points, [0.5])


def test_a_table_with_a_vanishing_share_is_still_placed():
    """Found by hypothesis: a table whose lookup rate is a denormal (5e-324) had its row
    density underflow to 0 and was never placed, though the capacity held everything."""
    tabs = [Table(1, 0.0, 4, 1.0), Table(1, 0.0, 4, 5e-324)]
    stored, share = shared_top_share(tabs, np.array([0.0, 8.0]))
    assert np.allclose(stored.sum(axis=1), [0.0, 8.0])
    assert np.allclose(share[1], [1.0, 1.0])
