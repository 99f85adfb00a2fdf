"""The batch a design runs when the scenario asks for one that depends on the hardware:
`size` (batch max: the most sequences whose memory fits) and `best_batch` (batch best: the
batch with the most throughput that meets the latency target, searched over whole
batches). No I/O."""

from __future__ import annotations

import numpy as np

from dse import phases
from dse.errors import DseError
from dse.model.batch import DesignBatch
from dse.model.chunks import BEST_CANDIDATES
from dse.model.execution import Execution
from dse.model.lowered import at_one_and_two
from dse.model.phase_pass import Run, meets, run_phase
from dse.model.placement import WORKSPACE, Footprint, place
from dse.model.stages import footprint
from dse.spec.workload import Scenario, WorkloadSpec
from dse.workloads.optable import CLASSES
from dse.workloads.serving import batch_limit, engine_of

# batch best (_best): candidate batches run per design at a time; linear passes around a peak
# until every whole batch next to it is tried (each narrows the window ~5x: 10^6 sequences
# take ~8 passes).
MAX_BEST_PASSES = 16
GRID_STEPS = 2  # pass 1: batches 2^(j / GRID_STEPS), rounded, up to the most that fit
BEST_BASINS = 2  # the grid's peaks refined
# A window is left once its bound is below the best batch's score by more than rounding (the
# scores and bounds are products and quotients of a few floats, each within 1e-16).
ROUNDING = 1e-12
# A call whose windows hold at most this many (design, batch) pairs runs them all in one
# pass (_Known.fill): the time of ~2 passes' fixed cost for one design (measured).
PREFETCH_PAIRS = 512
# (design, batch) pairs per pass of the pipeline: its [pairs, operators, levels] arrays
# then stay within the cores' caches (~3 MB each); 13% faster than 16,384 a pass, the same
# scores (Llama-3-8B serve, 4,096 designs, measured 2026-11-27).
PASS_PAIRS = 4096


def size(db: DesignBatch, wl: WorkloadSpec, sc: Scenario, ex: Execution) -> np.ndarray:
    """[N] the most sequences per replica whose memory fits (stage `size`): the KV cache each
    sequence holds (serve: as the engine's admission policy reserves it, over the share of
    free memory the engine gives the cache) plus the activation workspace, beside the
    weights; serve also within the engine's max batch and token budget. The workspace is
    the largest operator's, each affine in the batch (its intercept and slope from the
    lowering at 1 and 2 sequences), so the answer is exact: the next sequence does not fit.
    A workload that stores embedding tables sizes its batch beside them (`_beside_tables`)."""
    low = at_one_and_two(wl, sc.model_copy(update={"batch": 1}), ex)
    assert low.plan is not None
    ops, ws = low.plan.ops, low.plan.ws  # ws: [2, I]
    fp = footprint(low.table, ops, ex, ws)
    grows = {c.name for c in CLASSES if c.per_sequence}
    held = sum((np.broadcast_to(fp[c], (2,)) for c in grows), np.zeros(2))
    fixed = sum((np.broadcast_to(fp[c], (2,))[0] for c in fp.bytes
                 if c not in grows and c != WORKSPACE), np.zeros(()))
    slope = held[1] - held[0] + ws[1] - ws[0]  # [I] bytes per sequence with operator i
    base = ws[0] - (ws[1] - ws[0])  # [I] workspace at no sequences
    if not np.any(slope > 0):
        raise DseError(f"{wl.name}: batch {sc.batch} needs per-sequence memory to size")
    free = db.resident_capacity.sum(axis=1) - fixed
    beside = _beside_tables(db, fp, grows)
    if beside is not None:
        free = np.minimum(free, beside)
    with np.errstate(divide="ignore", invalid="ignore"):
        fits = np.where(slope > 0, (free[:, None] - base) / slope, np.inf)
    most = np.floor(np.maximum(fits.min(axis=1), 0.0))
    if phases.get(sc.phase).served:
        most = np.minimum(most, batch_limit(sc.seq_in, sc.seq_out, engine_of(sc)))
    return most


def _beside_tables(db: DesignBatch, fp: Footprint, grows: set[str]) -> np.ndarray | None:
    """[N] bytes the batch may take when the workload stores embedding tables (None when it
    stores none): the fastest level the activations use at one sample, less what every
    other class keeps there at one sample. The tables' hot rows keep the fastest tier and
    the batch takes what they leave, as recommender engines size it: TorchRec's planner
    reserves the batch's input and dense storage on the device's HBM and shards the tables
    into the rest (torchrec/distributed/planner/storage_reservations.py), HugeCTR keeps its
    embedding cache in HBM beside the batch. Growing into slower tiers instead would push
    hot rows out to them (GH200's LPDDR5X: 46k samples/s at the most that fits anywhere
    against 85k at a batch of 4,096)."""
    if not np.broadcast_to(fp["embeddings"], (2,))[0] > 0:
        return None
    at_one = Footprint({c: np.broadcast_to(v, (2,))[0] for c, v in fp.bytes.items()})
    placed = place(db, at_one)
    rows = np.arange(db.n)
    level = np.argmax(placed.share(WORKSPACE) > 0, axis=1)  # [N] the activations' fastest
    growing = sum((placed.share(c)[rows, level] * at_one[c] for c in (*grows, WORKSPACE)),
                  np.zeros(db.n))
    return db.resident_capacity[rows, level] - (placed.used[rows, level] - growing)


def best_batch(db: DesignBatch, wl: WorkloadSpec, sc: Scenario, ex: Execution,
               most: np.ndarray) -> tuple[np.ndarray, Run]:
    """batch best: for every design the batch in 1..most with the highest throughput that
    meets the scenario's latency target. Pass 1 tries a fixed grid of batches (2^(j /
    GRID_STEPS), rounded, and `most`), the same whatever the memory, so more memory only
    adds batches; then around each of the BEST_BASINS best peaks of the grid, linear passes
    between the neighbours of that peak's best batch until every whole batch between them is
    tried. Throughput rises in steps and falls off cliffs (one sequence more fills a wave of
    thread blocks, or spills a cache: BERT on an H100 peaks at 35 sequences, 9,503/s, and 94,
    9,468/s), so the answer is the best batch tried, a peak over whole batches (the best
    whole batch on ~57% of Llama-3-8B serve designs, within 2.5% of it on all:
    tests/model/test_best_search.py). Every pass tries BEST_CANDIDATES batches of every
    design (PASS_PAIRS pairs at a time); a window that cannot beat the best batch so far
    is left (_Known.bound), and a call of few pairs runs every batch of its windows at
    once (_Known.fill), so its later passes cost nothing."""
    metric = phases.get(sc.phase).best_metric
    assert metric is not None, "a phase that takes batch best names its best_metric"
    n, k, most = db.n, BEST_CANDIDATES, np.asarray(most, dtype=float)

    top_most = max(float(np.max(most)), 1.0) if most.size else 1.0
    known = _Known(db, wl, sc, ex, metric, width=int(top_most) + 1)
    scores = known.scores

    known.fill(np.ones((n, 1)), np.maximum(most, 1.0)[:, None])  # every batch, if few
    grid = np.unique(np.floor(2.0 ** (np.arange(np.floor(np.log2(top_most) * GRID_STEPS) + 1)
                                      / GRID_STEPS) + 0.5))
    cand = np.clip(np.concatenate([np.broadcast_to(grid, (n, grid.size)), most[:, None]],
                                  axis=1), 1.0, np.maximum(most, 1.0)[:, None])
    score = scores(cand)
    pick = np.argmax(score, axis=1)
    best = np.take_along_axis(cand, pick[:, None], axis=1)[:, 0]
    top = np.take_along_axis(score, pick[:, None], axis=1)[:, 0]
    # the grid's peaks (at least their neighbours' throughput), the best BEST_BASINS of them
    g = cand.shape[1]
    left_s = np.concatenate([np.full((n, 1), -np.inf), score[:, :-1]], axis=1)
    right_s = np.concatenate([score[:, 1:], np.full((n, 1), -np.inf)], axis=1)
    peak = np.where((score >= left_s) & (score >= right_s), score, -np.inf)
    basins = np.argsort(-peak, axis=1, kind="stable")[:, :BEST_BASINS]  # [N, B]
    lo = np.take_along_axis(cand, np.maximum(basins - 1, 0), axis=1)
    hi = np.take_along_axis(cand, np.minimum(basins + 1, g - 1), axis=1)
    b = lo.shape[1]
    steps = np.linspace(0.0, 1.0, k)
    for _ in range(MAX_BEST_PASSES):
        if np.all(hi <= lo):
            break
        known.fill(lo, hi)
        c = np.clip(np.floor(lo[..., None] + (hi - lo)[..., None] * steps + 0.5), 1.0,
                    np.maximum(most, 1.0)[:, None, None])  # [N, B, K]
        sc_ = scores(c.reshape(n, b * k)).reshape(n, b, k)
        flat = np.argmax(sc_.reshape(n, b * k), axis=1)
        won = np.take_along_axis(sc_.reshape(n, b * k), flat[:, None], axis=1)[:, 0]
        better = won > top  # the best batch of every pass so far (ties: the earlier)
        top = np.where(better, won, top)
        best = np.where(better, np.take_along_axis(c.reshape(n, b * k), flat[:, None],
                                                   axis=1)[:, 0], best)
        p = np.argmax(sc_, axis=2)[..., None]  # each basin's best, and its neighbours
        at = np.take_along_axis(c, p, axis=2)[..., 0]
        left = np.take_along_axis(c, np.maximum(p - 1, 0), axis=2)[..., 0]
        right = np.take_along_axis(c, np.minimum(p + 1, k - 1), axis=2)[..., 0]
        done = hi - lo <= k - 1  # this pass tried every batch in [lo, hi]
        lo, hi = np.where(done, at, left), np.where(done, at, right)
        # a window that cannot beat the best batch so far is left: a later pass of it would
        # try only batches of that window, and the best changes only to a better one
        beaten = known.bound(lo, hi) * (1.0 + ROUNDING) <= top[:, None]
        hi = np.where(beaten, lo, hi)
    return best, run_phase(db, wl, sc, ex, best, ex.dp * best, target=True)


class _Known:
    """The score of every (design, batch) pair run, by key design x width + batch, sorted (a
    design's batches in order); -1 where the batch misses the target or the design cannot
    run. A pass runs only the pairs no pass ran before, once each (the windows of later
    passes overlap earlier candidates and repeat batches once narrower than
    BEST_CANDIDATES). A design's score at a batch does not depend on the designs beside it
    in a pass."""

    def __init__(self, db: DesignBatch, wl: WorkloadSpec, sc: Scenario, ex: Execution,
                 metric: str, width: int) -> None:
        self.db, self.wl, self.sc, self.ex, self.metric = db, wl, sc, ex, metric
        self.width = width
        self.keys, self.scores_ = np.empty(0, dtype=np.int64), np.empty(0)

    def scores(self, cand: np.ndarray) -> np.ndarray:
        """[N, C] the score of every design at its candidate batches [N, C]."""
        keys = (np.arange(self.db.n, dtype=np.int64)[:, None] * self.width
                + cand.astype(np.int64))
        self._run(keys.ravel())
        return self.scores_[np.searchsorted(self.keys, keys)]

    def fill(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """Run every batch of the windows [lo, hi] ([N, B]) at once where they hold at most
        PREFETCH_PAIRS pairs: a pass of few pairs costs its fixed cost (~1.5 ms a pass for
        one design), so a call of a few designs runs its later passes from these scores."""
        size = np.maximum(hi - lo + 1, 0).astype(np.int64).ravel()
        if not 0 < size.sum() <= PREFETCH_PAIRS:
            return
        rows = np.repeat(np.repeat(np.arange(self.db.n, dtype=np.int64), lo.shape[1]), size)
        step = np.arange(size.sum()) - np.repeat(np.cumsum(size) - size, size)
        self._run(rows * self.width + np.repeat(lo.ravel().astype(np.int64), size) + step)

    def _run(self, keys: np.ndarray) -> None:
        """Run the pairs of `keys` not run before, PASS_PAIRS at a time."""
        width, step = self.width, PASS_PAIRS
        new = np.unique(keys)
        if self.keys.size:
            at = np.minimum(np.searchsorted(self.keys, new), self.keys.size - 1)
            new = new[self.keys[at] != new]
        if not new.size:
            return
        got = np.empty(new.size)
        for c in range(0, new.size, step):
            part = new[c:c + step]
            flat = (part % width).astype(float)
            run = run_phase(self.db.take(part // width), self.wl, self.sc, self.ex, flat,
                            self.ex.dp * flat)
            got[c:c + step] = np.where(run.feasible & meets(run.metrics, self.sc),
                                        run.metrics[self.metric], -1.0)
        all_keys = np.concatenate([self.keys, new])
        order = np.argsort(all_keys, kind="stable")
        self.keys, self.scores_ = all_keys[order], np.concatenate([self.scores_, got])[order]

    def bound(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """[N, B] the most any batch in [lo, hi] ([N, B], both run) can score: a step's time
        does not fall as the batch grows, so a batch between run batches a < b < a' scores
        at most score(a) / a x (a' - 1) (tests/model/test_best_search.py), and a batch
        after one that misses the target misses it too. inf where lo or hi was not run."""
        batch, s = self.keys % self.width, self.scores_
        nxt = np.append(batch[1:], 0)
        reach = np.where(s > 0, s / np.maximum(batch, 1) * (np.maximum(nxt, batch + 1) - 1),
                         s)  # [pairs] the bound from each run batch up to the next
        rows = np.arange(lo.shape[0], dtype=np.int64)[:, None] * self.width
        i_lo = np.minimum(np.searchsorted(self.keys, rows + lo.astype(np.int64)),
                          self.keys.size - 1)
        i_hi = np.minimum(np.searchsorted(self.keys, rows + hi.astype(np.int64)),
                          self.keys.size - 1)
        ran = (self.keys[i_lo] == rows + lo) & (self.keys[i_hi] == rows + hi) & (hi > lo)
        ends = np.stack([i_lo, np.where(ran, i_hi, i_lo + 1)], axis=-1).ravel()
        inside = np.maximum.reduceat(np.append(reach, -np.inf), ends)[::2].reshape(lo.shape)
        return np.where(ran, np.maximum(inside, s[i_hi]), np.inf)
