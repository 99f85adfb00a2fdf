"""The stages of the evaluation pipeline between the plan and the power model, each a
function with a typed input and output (see dse.model.evaluate for the whole row):

    footprint  ChipOps + table facts -> bytes per chip of each placed class     Footprint
    access     Placement -> share of each class's accesses served per level     Access
    step       operator and collective times -> step time, counts and bounds    Step
    metrics    Step + phase (+ serving iteration) -> latency and throughput     dict
No I/O; arrays over N designs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dse import phases, units
from dse.model.batch import DesignBatch
from dse.model.distinct import distinct_rows
from dse.model.execution import Execution
from dse.model.hitrate import Table, shared_lru_hit_rates, tiered_shares
from dse.model.kernel import best_shape_rates
from dse.model.nonfinite import NonFiniteError, check_step_time
from dse.model.operators import A, ChipOps, G, OpTimes, per_design, take_rows
from dse.model.parallel import Collectives, collective_volume, resident_split
from dse.model.performance import op_times
from dse.model.placement import WORKSPACE, Footprint, Placement, cached_level
from dse.phases import Rates
from dse.workloads.optable import PLACED_CLASSES, Facts, OpTable
from dse.workloads.serving import Iteration

EMBEDDINGS = "embeddings"
# The time and rate metrics of every phase; each is defined in dse.model.metrics.
METRICS = ("step_time_s", "latency_s", "ttft_s", "tpot_s", "decode_tokens_per_s",
           "output_tokens_per_s", "samples_per_s", "achieved_flop_per_s",
           "tokens_per_s_per_chip")
# Bound codes of an operator: 0 compute, 1 + l memory level l, and these three (PIPELINE:
# a training step's pipeline bubble, idle time the stages' dependencies leave).
OVERHEAD, INTERCONNECT, PIPELINE = -1, -2, -3

@dataclass(frozen=True)
class Access:
    """Where each class's accesses are served: `home[c]` [N, L] or [N, I, L] (share of class
    c read at each level; differs from the bytes stored when a cache holds a decode working
    set), `act_home` [N, I] the level each operator's activations live in."""

    home: dict[str, np.ndarray]
    act_home: np.ndarray


@dataclass(frozen=True)
class Step:
    """One step of one replica: per-operator and per-collective arrays over [N, J]."""

    ops: ChipOps
    names: np.ndarray  # [J]
    precision: np.ndarray  # [J] compute precision ("" for collectives)
    matrix: np.ndarray  # [J] bool: runs on the matrix engines
    link_bytes: np.ndarray  # [J] or [N, J] bytes each chip sends per instance
    count: np.ndarray  # [N, J]
    flops: np.ndarray  # [N, J]
    traffic: np.ndarray  # [N, I, L] of the operators (collectives move none through levels)
    compute: np.ndarray  # [N, I] s per instance of the operators' compute term
    time: np.ndarray  # [N, J] s per instance
    bound: np.ndarray  # [N, J] int codes
    total: np.ndarray  # [N] s
    missing_rate: np.ndarray  # [N] bool
    no_link: np.ndarray  # [N] bool: chips must talk but cannot
    role: np.ndarray | None = None  # [J] a collective's role (parallel.ROLES), "" otherwise

    def of_role(self, role: str) -> np.ndarray:
        """[J] bool: the step's collectives of `role` (parallel.ROLES)."""
        if self.role is None:
            return np.zeros(len(self.names), dtype=bool)
        return self.role == role


def footprint(table: OpTable, ops: ChipOps, ex: Execution,
              ws: np.ndarray | None = None) -> Footprint:
    """Bytes per chip of each placed class (stage `footprint`): the lowering's resident
    bytes of each class over the chips that split it (parallel.resident_split: weights over
    tp x pp, the KV cache over min(tp, KV heads) x pp), and the workspace, the largest
    activation working set of one operator instance."""
    f = table.facts
    ws = activation_bytes(ops) if ws is None else ws
    out = {name: np.asarray(value / resident_split(name, ex, f), dtype=float)
           for name, value in f.resident.items()}
    out[WORKSPACE] = ws.max(axis=-1) if ws.shape[-1] else np.zeros(ws.shape[:-1])
    return Footprint(out)


def activation_bytes(ops: ChipOps) -> np.ndarray:
    """[I] or [N, I] activation working set of each operator instance (inputs + outputs)."""
    return ops.read[..., (A, G)].sum(axis=-1) + ops.written[..., (A, G)].sum(axis=-1)


def access(db: DesignBatch, placed: Placement, fp: Footprint, ops: ChipOps,
           ws: np.ndarray | None = None, facts: Facts | None = None) -> Access:
    """Where each operator finds its data (stage `access`). Weights and the KV cache are
    read where they are stored, except that a decode step whose whole working set (weights
    + KV) fits a shared cache finds it there (placement.cached_level). Activations live in
    the innermost chip-wide on-chip level that holds an operator's inputs and outputs, else
    in the first resident level (DRAM, or the SRAM of an SRAM-only chip)."""
    n, lv = db.n, db.levels
    cache = cached_level(db, sum((fp[c] for c in PLACED_CLASSES), np.zeros(())))
    decode = ops.stage == "decode"
    levels = np.arange(lv)

    def with_cache(share: np.ndarray) -> np.ndarray:
        if not decode.any() or np.all(cache < 0):
            return share
        moved = np.where(levels[None, :] > cache[:, None], share, 0.0).sum(axis=1)
        cached = np.where(levels[None, :] > cache[:, None], 0.0, share)
        cached[np.arange(n), np.maximum(cache, 0)] += moved
        cached = np.where((cache >= 0)[:, None], cached, share)
        if decode.all():
            return cached[:, None, :]
        return np.where(decode[None, :, None], cached[:, None, :], share[:, None, :])

    ws = np.broadcast_to(activation_bytes(ops) if ws is None else ws, (n, len(ops.name)))
    first_resident = int(np.argmax(db.resident)) if db.resident.any() else lv - 1
    dram = [i for i in range(lv) if db.resident[i] and db.level_kinds[i] in ("dram", "host")]
    fallback = dram[0] if dram else first_resident
    act_home = np.full((n, len(ops.name)), fallback)
    for level in reversed(range(lv)):
        if db.level_kinds[level] in ("cache", "sram") and not db.per_unit[level] \
                and level < fallback:
            act_home = np.where(db.capacity[:, level][:, None] >= ws, level, act_home)
    home = {c: with_cache(placed.share(c)) for c in PLACED_CLASSES}
    if facts is not None and facts.gathers:
        home[EMBEDDINGS] = gather_home(db, placed, fp, ops, facts)
    return Access(home=home, act_home=act_home)


def gather_home(db: DesignBatch, placed: Placement, fp: Footprint, ops: ChipOps,
                facts: Facts) -> np.ndarray:
    """[N, I, L] bytes each gather operator moves at each level, per byte it states.

    The tables are placed across the levels that hold them hottest bytes first
    (hitrate.tiered_shares: stored bytes and served lookups differ; a group of `count`
    identical tables is one table of count x the bytes and lookups per row), and the
    innermost shared cache in front of them catches the rows an LRU cache of its capacity
    keeps (hitrate.shared_lru_hit_rates, Che's approximation over all tables at once). Its
    hits are the hottest rows, which sit in the fastest tiers: they are taken off the tiers'
    shares from the fastest down. An operator that touches each distinct row once (the
    sparse optimizer update) finds them spread over the tiers as the distinct rows are
    (dse.model.distinct), moves distinct / lookups of the bytes it states, and is credited
    no cache hits (its rows are far flatter than the lookups). Every share is then scaled
    by the level's access granularity: each row's arrays rounded up to whole accesses of
    the level that serves them (`granularity_factor`). Operators that gather nothing get
    zeros."""
    n, lv = db.n, db.levels
    names = ops.name.tolist()
    at = [i for i, name in enumerate(names) if name in facts.gathers]
    out = np.zeros((n, len(names), lv))
    if not at:
        return out
    count = ops.count if ops.count.ndim == 1 else ops.count[0]
    own = [i for i in at if not facts.gathers[names[i]].table]
    index = {names[i]: k for k, i in enumerate(own)}
    copies = [float(count[i]) for i in own]
    tables = [Table(rows=g.rows, alpha=g.alpha, bytes_per_row=g.row_bytes * c,
                    rate=g.lookups * c)
              for g, c in zip((facts.gathers[names[i]] for i in own), copies, strict=True)]
    fraction = placed.share(EMBEDDINGS)
    stored = fraction * np.broadcast_to(fp[EMBEDDINGS], (n,))[:, None]
    whole = np.flatnonzero((fraction >= 1.0 - 1e-12).all(axis=0))
    if whole.size:  # every design keeps all the tables in one level: it serves every lookup
        share = np.zeros((n, len(tables), lv))
        share[:, :, whole[0]] = 1.0
        kept = share * np.array([float(np.asarray(t.bytes)) for t in tables])[None, :, None]
    else:
        kept, share = tiered_shares(tables, stored)  # [N, T, L] each
    looked_up = share.copy()
    caches = [lvl for lvl in range(lv) if db.level_kinds[lvl] == "cache"
              and not db.per_unit[lvl] and not stored[:, lvl].any()]
    if caches:
        hits = shared_lru_hit_rates(tables, db.capacity[:, caches[0]]).per_table  # [N, T]
        left = hits.copy()
        for lvl in range(lv):  # the hits come off the fastest tiers first
            take = np.minimum(left, looked_up[:, :, lvl])
            looked_up[:, :, lvl] -= take
            left -= take
        looked_up[:, :, caches[0]] += hits - left
    factors: dict[tuple[float, ...], np.ndarray] = {}  # granularity_factor per pieces
    plain: dict[tuple[float, ...], tuple[list[int], list[int]]] = {}  # operators, tables
    for i in at:
        g = facts.gathers[names[i]]
        pieces = tuple(g.pieces or (g.row_bytes,))
        if pieces not in factors:
            factors[pieces] = granularity_factor(db.gather_granularity, pieces)
        if g.distinct is None:  # all of a kind of row at once, below
            rows, ks = plain.setdefault(pieces, ([], []))
            rows.append(i)
            ks.append(index[g.table or names[i]])
    for pieces, (rows, ks) in plain.items():
        out[:, rows, :] = looked_up[:, ks, :] * factors[pieces][:, None, :]
    for i in at:  # the distinct rows, spread over the tiers by the hottest rows each holds
        g = facts.gathers[names[i]]
        if g.distinct is None:
            continue
        k = index[g.table or names[i]]
        hottest = np.cumsum(kept[:, k, :], axis=1) / (g.row_bytes * copies[k])
        spread = distinct_rows(g.rows, g.alpha, g.distinct, np.minimum(hottest, g.rows))
        touched = distinct_rows(g.rows, g.alpha, g.distinct)
        home = np.diff(spread, axis=1, prepend=0.0) / np.maximum(
            np.reshape(np.asarray(g.distinct, dtype=float), (-1, 1)), 1e-300)
        home = np.where(np.reshape(touched, (-1, 1)) > 0, home, 0.0)
        out[:, i, :] = home * factors[tuple(g.pieces or (g.row_bytes,))]
    return out


def granularity_factor(granularity: np.ndarray, pieces: tuple[float, ...]) -> np.ndarray:
    """[N, L] bytes a row access moves at each level per byte of the row: each separately
    stored array (`pieces`, bytes) rounded up to whole accesses of the level's
    `granularity` ([N, L] bytes)."""
    raw = float(sum(pieces))
    if raw <= 0:
        return np.ones_like(granularity)
    moved = sum(np.ceil(p / granularity) * granularity for p in pieces if p > 0)
    return moved / raw


def timed(db: DesignBatch, ops: ChipOps, acc: Access, facts: Facts) -> OpTimes:
    """Operator times (performance.op_times), the gathers at the levels' gather bandwidth
    (random row reads reach less of a DRAM tier's bandwidth than streams do:
    MemoryLevel.gather_fraction): the gather operators are timed as a batch of their own
    against those bandwidths and put back in place."""
    if phases.get(facts.phase).work == "gemm":  # a microbenchmark, not a model's layer
        # (kernel.TYPICAL)
        db = best_shape_rates(db)
    rows = np.array([name in facts.gathers for name in ops.name.tolist()], dtype=bool)
    if not rows.any() or np.array_equal(db.gather_bandwidth, db.bandwidth):
        return op_times(db, ops, acc.home, acc.act_home)
    parts = [(np.flatnonzero(rows), dataclasses.replace(db, bandwidth=db.gather_bandwidth)),
             (np.flatnonzero(~rows), db)]
    n, i, lv = db.n, len(ops.name), db.levels
    out = OpTimes(time=np.empty((n, i)), compute=np.empty((n, i)),
                  traffic=np.empty((n, i, lv)), bound=np.empty((n, i), dtype=np.int8),
                  missing_rate=np.zeros(n, dtype=bool))
    for idx, batch in parts:
        if not idx.size:
            continue
        # a run of adjacent operators (the gathers come first) as a slice: views, not copies
        at: slice | np.ndarray = slice(int(idx[0]), int(idx[-1]) + 1) \
            if idx[-1] - idx[0] + 1 == idx.size else idx
        part = op_times(batch, take_rows(ops, at),
                        {c: h[:, at] if h.ndim == 3 else h for c, h in acc.home.items()},
                        acc.act_home[:, at])
        for f in ("time", "compute", "traffic", "bound"):
            getattr(out, f)[:, at] = getattr(part, f)
        out.missing_rate[:] |= part.missing_rate
    return out


def spent(time: np.ndarray, count: np.ndarray, row: np.ndarray | None = None) -> np.ndarray:
    """Time x count, 0 where an operator or collective runs no times (a collective a chip
    without links cannot run takes infinite time, but none of it when it never runs).
    `row`: [J] the counts where every design's are that row (a broadcast count is read as
    its row too): the columns that never run are zeroed, no [N, J] mask is made."""
    with np.errstate(invalid="ignore"):
        if row is None and np.ndim(count) == 2 and np.shape(count)[0] > 1 \
                and count.strides[0] == 0:
            row = count[0]
        if row is not None:
            per = time * row
            never = ~(row > 0)
            if never.any():
                per[:, never] = 0.0
            return per
        return np.where(count > 0, time * count, 0.0)


def row_sums(a: np.ndarray) -> np.ndarray:
    """[N] the sums over the last axis of [N, J], each added in the order of one design's
    contiguous row: numpy sums a strided axis in another order, and the operator-major
    arrays the kernel hands on are strided over operators for N > 1 designs but not for
    one, so a design's total would depend on the designs evaluated beside it."""
    return np.ascontiguousarray(a).sum(axis=-1)


def row_major(st: Step) -> Step:
    """`st` with its per-design operator arrays in row-major order (see `row_sums`): for a
    stage that reduces them over operators (power, energy)."""
    c = np.ascontiguousarray
    return dataclasses.replace(st, count=c(st.count), flops=c(st.flops), traffic=c(st.traffic),
                               compute=c(st.compute), time=c(st.time))


def _joined(per_op: np.ndarray, per_coll: np.ndarray, n: int) -> np.ndarray:
    """[N, I + C] the operators' then the collectives' values: a read-only broadcast of one
    row where both are the same for every design (no [N, I + C] copy)."""
    if np.ndim(per_op) == 1 and np.ndim(per_coll) == 1:
        return np.broadcast_to(np.concatenate([per_op, per_coll]),
                               (n, len(per_op) + len(per_coll)))
    return np.concatenate([np.broadcast_to(per_op, (n, np.shape(per_op)[-1])),
                           np.broadcast_to(per_coll, (n, np.shape(per_coll)[-1]))], axis=1)


def step(db: DesignBatch, ops: ChipOps, coll: Collectives, t: OpTimes, t_coll: np.ndarray) -> Step:
    """Operators and collectives of one step joined (stage `step`): counts, times, bounds
    and the step's total time per design."""
    n = db.n
    nc = len(coll)
    op_count, op_flops = per_design(ops.count, ops.rows, 1), per_design(ops.flops, ops.rows, 1)
    count = _joined(op_count, coll.count, n)
    # operator-major, as the kernel stores its times (performance._op_times)
    time = np.concatenate([t.time.T, np.transpose(t_coll)], axis=0).T
    per = spent(time, count)
    total = row_sums(per)
    no_link = ~np.all(np.isfinite(t_coll), axis=1)
    names = np.concatenate([ops.name, coll.name])
    check_step_time(names, per, total, t.missing_rate | no_link)
    link_bytes = np.zeros(np.shape(op_count))  # operators send nothing over the links
    if nc:
        volume = collective_volume(coll)
        if np.ndim(link_bytes) != np.ndim(volume):  # one side per design: both [N, .]
            link_bytes, volume = (np.broadcast_to(a, (n, np.shape(a)[-1]))
                                  for a in (link_bytes, volume))
        link_bytes = np.concatenate([link_bytes, volume], axis=-1)
    return Step(
        ops=ops, names=names,
        precision=np.concatenate([ops.dtype.astype(object), np.full(nc, "", dtype=object)]),
        matrix=np.concatenate([ops.is_matrix, np.zeros(nc, dtype=bool)]),
        link_bytes=link_bytes,
        count=count,
        flops=_joined(op_flops, np.zeros(nc), n),
        traffic=t.traffic,
        compute=t.compute,
        time=time,
        bound=np.concatenate([t.bound.T, np.full((nc, n), INTERCONNECT, dtype=t.bound.dtype)],
                             axis=0).T,
        total=total,
        missing_rate=t.missing_rate, no_link=no_link,
        role=np.concatenate([np.full(len(ops.name), "", dtype=object),
                             coll.role.astype(object)]))


def phase_metrics(f: Facts, st: Step, sequences: np.ndarray | float, chips: int,
                  total_flops: np.ndarray | float,
                  it: Iteration | None = None, front_end: float = 0.0
                  ) -> dict[str, np.ndarray]:
    """Latency and throughput of the phase (stage `metrics`): its `rates` (dse.phases), as
    dse.model.metrics defines them; NaN for the rate metrics it does not report.
    `sequences`: sequences of the whole system (every replica runs f.batch of them, the
    last possibly fewer); `it`: the serving engine's iteration, for a served phase;
    `front_end`: s the stack's serving front-end adds to a request's first token."""
    n, phase = len(st.total), f.phase
    rates = phases.get(phase).rates(Rates(
        time=st.total, sequences=sequences, batch=f.batch, chips=chips, flops=total_flops,
        seq_in=f.seq_in, seq_out=f.seq_out, tokens=not f.gathers, iteration=it,
        front_end=front_end))
    unknown = set(rates) - set(METRICS)
    if unknown:
        raise ValueError(f"phase {phase} reports {', '.join(sorted(unknown))}, which are not "
                         f"among the rate metrics ({', '.join(METRICS)})")
    nan = np.full(n, np.nan)
    m = {k: rates.get(k, nan) for k in METRICS}
    out = {k: np.broadcast_to(v, (n,)).astype(float) for k, v in m.items()}
    timed_ = np.isfinite(st.total)  # the rest lack a rate or a link: infeasible by design
    for k, v in out.items():
        if m[k] is not nan and not np.isfinite(v[timed_]).all():
            i = int(np.argmax(timed_ & ~np.isfinite(v)))
            raise NonFiniteError("metrics", k, i, float(v[i]),
                                 f"phase {phase}, step time {st.total[i]} s")
    return out


def fit_word(db: DesignBatch, fp: Footprint, short: np.ndarray) -> Callable[[int], str]:
    """Why the placement of design i fails (for a design with short > 0), worded when
    called: dse.model.reasons words only the designs someone reads."""
    def gb(v: float) -> str:
        return units.format_quantity(float(v), units.BYTES)

    room = db.resident_capacity.sum(axis=1)
    parts = {name.replace("_", " ").replace("kv", "KV"): np.broadcast_to(v, (db.n,))
             for name, v in fp.bytes.items()}

    def word(i: int) -> str:
        need = " + ".join(f"{name} {gb(v[i])}" for name, v in parts.items())
        return (f"{need} per chip exceed the {gb(room[i])} of memory that can hold them "
                f"({gb(short[i])} short)")
    return word


def fit_text(db: DesignBatch, fp: Footprint, short: np.ndarray) -> np.ndarray:
    """Why a placement fails, per design ("" where it does not): text only for the designs
    that need it, so a large batch of feasible designs builds no strings."""
    word = fit_word(db, fp, short)
    out = np.full(db.n, "", dtype=object)
    for i in np.flatnonzero(short > 0):
        out[i] = word(int(i))
    return out
