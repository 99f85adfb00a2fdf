"""Recommender (DLRM-style) lowering: a scenario becomes an operator table.

For B samples of P user-item pairs each (M = B x P pairs):
- one gather per table (kind `embedding`): M x lookups rows read from the embedding tables
  (each row rounded up to the DRAM access granularity), their indices read, the pooled sum
  (M x dim) written; pooling is M x lookups x dim additions on the vector units;
- the bottom MLP on the dense features and the top MLP: one GEMM per layer (M x width x
  previous width; bias and activation fused into the GEMM's epilogue, as library kernels
  do);
- the interaction: `dot`, a batched GEMM of the F feature vectors with themselves (M
  products of F x d by d x F; the F(F-1)/2 distinct dot products are kept), or `cross`,
  DCNv2 layers x_{l+1} = x0 * (U (V x_l) + b) + x_l: two GEMMs per layer when low-rank
  (M x rank x D, M x D x rank), one when full (M x D x D), and the elementwise update.
The tables are the `embeddings` tensor class: placed in memory like weights, but read by
gathers whose accesses are skewed (dse.model.hitrate), so the share of lookups each level
serves differs from the share of the tables it stores.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse import phases
from dse.errors import DseError
from dse.spec.workload import (
    RECOMMENDER_WORKS,
    RecommenderSpec,
    RecOptimizer,
    RecScenario,
    Skew,
)
from dse.workloads.common import DEFAULT, PRECISIONS, Counting
from dse.workloads.optable import DTYPE_BYTES, Facts, Gather, Num, OpRow, OpTable

# The planner's cost of one lookup rounds the row to 64 B, a DDR4/DDR5 burst (JEDEC
# JESD79-4/-5) and two 32-byte GPU sectors: it ranks tables without knowing the chip. The
# model itself rounds each row to the access granularity of the level that serves it
# (MemoryLevel.gather_granularity, applied in dse.model.stages.gather_home).
WORKS = RECOMMENDER_WORKS  # the shapes of work (dse.phases.WORKS) it lowers
PLANNER_GRANULARITY = 64.0
INDEX_BYTES = 4.0  # int32 row indices (MLPerf DLRM-v2 harnesses; TorchRec's int64: 8)
# The backward sorts the (row index, position) pairs of a batch by row before it reduces the
# gradients of repeated rows (FBGEMM's TBE backward, a CUB radix sort): one pass per 8 bits
# of the row index (CUB's onesweep digit), each reading and writing both 4-byte keys.
SORT_DIGIT_BITS = 8.0
SORT_PAIR_BYTES = 2 * INDEX_BYTES
# Optimizer state per embedding row of `dim` elements, fp32 (FBGEMM's TBE optimizers): SGD
# none; Adagrad one accumulator per element; row-wise Adagrad one per row; Adam two moments
# per element.
STATE_BYTES: dict[str, Callable[[int], float]] = {
    "sgd": lambda dim: 0.0, "adagrad": lambda dim: 4.0 * dim,
    "adagrad_rowwise": lambda dim: 4.0, "adam": lambda dim: 8.0 * dim}
# FLOPs per element of an optimizer update beyond the gradient's add (Adagrad: square,
# accumulate, sqrt, divide, multiply-add ~5; Adam ~10; SGD: the multiply-add 1).
UPDATE_FLOPS = {"sgd": 1.0, "adagrad": 5.0, "adagrad_rowwise": 3.0, "adam": 10.0}


def zipf_exponent(skew: Skew) -> float:
    """The Zipf exponent of a table's skew; a measured curve's best fit: the exponent whose
    hottest-rows share (H(k, a) / H(R, a), taken for a large table, where it tends to the
    fraction f^(1-a)) matches the curve's points in least squares, over a in [0, 2]."""
    if skew.alpha is not None:
        return float(skew.alpha)
    assert skew.curve is not None
    f = np.array([p.rows for p in skew.curve])
    h = np.array([p.hits for p in skew.curve])
    grid = np.linspace(0.0, 2.0, 401)
    # share of the hottest fraction f of a very large table: f^(1-a) (a < 1), 1 + ln f / ln R
    # (a = 1) and ~1 (a > 1) -- evaluated at R = 1e7 rows through the finite sums' limit
    rows = 1e7
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        k = np.maximum(f[None, :] * rows, 1.0)
        a = grid[:, None]
        num = np.where(np.abs(a - 1) < 1e-9, np.log(k) + 0.5772,
                       (k ** (1 - a) - 1) / (1 - a) + 1)
        den = np.where(np.abs(a - 1) < 1e-9, np.log(rows) + 0.5772,
                       (rows ** (1 - a) - 1) / (1 - a) + 1)
        share = np.clip(num / den, 0.0, 1.0)
    err = ((share - h[None, :]) ** 2).sum(axis=1)
    return float(grid[int(np.argmin(err))])


def row_bytes(dim: int, element_bytes: float) -> float:
    """The planner's cost of one lookup, bytes: the row rounded up to PLANNER_GRANULARITY."""
    return math.ceil(dim * element_bytes / PLANNER_GRANULARITY) * PLANNER_GRANULARITY


def _gemm(name: str, group: str, m: Num, n: int, k: int, ab: float, wb: float, dtype: str,
          wdtype: str, bias: bool = True) -> OpRow:
    weights = (k * n + (n if bias else 0)) * wb
    return OpRow(name, "gemm", group, 1.0, 2.0 * m * n * k,
                 read={"activations": m * k * ab, "weights": weights},
                 written={"activations": m * n * ab}, m=m, n=n, k=k, batch=1.0,
                 stage="forward", dtype=dtype, wdtype=wdtype)


def dense_parameters(spec: RecommenderSpec) -> int:
    """Parameters of the MLPs and the interaction (weights and biases)."""
    total, prev = 0, spec.dense_features
    for w in spec.bottom_mlp:
        total += prev * w + w
        prev = w
    it, d = spec.interaction, _cross_width(spec)
    if it.kind == "cross":
        total += it.layers * ((2 * d * it.rank + d) if it.rank else (d * d + d))
    prev = _top_input(spec)
    for w in spec.top_mlp:
        total += prev * w + w
        prev = w
    return total


def _cross_width(spec: RecommenderSpec) -> int:
    """D: the concatenated feature vector (bottom MLP output and every pooled embedding)."""
    dense = spec.bottom_mlp[-1] if spec.bottom_mlp else spec.dense_features
    return dense + sum(t.count * t.dim for t in spec.tables)


def _features(spec: RecommenderSpec) -> int:
    """F: feature vectors meeting in a dot interaction (the tables and the dense one)."""
    return spec.n_tables + (1 if spec.bottom_mlp or spec.dense_features else 0)


def _top_input(spec: RecommenderSpec) -> int:
    if spec.interaction.kind in ("cross", "cat"):
        return _cross_width(spec)
    # DLRM: the dense vector concatenated with the F(F-1)/2 distinct dot products
    f = _features(spec)
    dense = spec.bottom_mlp[-1] if spec.bottom_mlp else spec.dense_features
    return dense + f * (f - 1) // 2


@dataclass(frozen=True)
class Shard:
    """A piece of an embedding table one chip holds: the whole table (`parts` 1), or one of
    `parts` pieces cut row-wise (`cut` "row": rows hashed over the pieces, so each serves
    1/parts of the table's lookups with whole rows and makes a partial pooled sum for every
    pair) or column-wise (`cut` "column": dim/parts columns of every row, so each serves
    every lookup with a slice of the row and makes that slice of every pooled row)."""

    table: int  # index in spec.tables
    parts: int
    cut: str = "row"

    def lookups(self, spec: RecommenderSpec) -> float:
        """Lookups per pair this piece serves."""
        t = spec.tables[self.table]
        return t.lookups / self.parts if self.cut == "row" else t.lookups

    def dim(self, spec: RecommenderSpec) -> int:
        """Columns of each row this piece holds."""
        t = spec.tables[self.table]
        return t.dim // self.parts if self.cut == "column" else t.dim

    def rows(self, spec: RecommenderSpec) -> float:
        """Rows this piece holds."""
        t = spec.tables[self.table]
        return t.rows / self.parts if self.cut == "row" else float(t.rows)

    def load(self, spec: RecommenderSpec, element_bytes: float) -> float:
        """The planner's cost: lookups per pair x the bytes each moves."""
        return self.lookups(spec) * row_bytes(self.dim(spec), element_bytes)


def _cut(dim: int, parts: int, element_bytes: float, sharding: str) -> str:
    """How a table split in `parts` is cut: column-wise where every piece keeps whole
    PLANNER_GRANULARITY accesses per row (dim divisible by parts and dim / parts x element
    bytes >= 64 B), which pools each column slice on one chip and so moves the pooled rows
    once; else row-wise, whose pieces send partial sums of whole pooled rows. `sharding`
    "row" or "column" forces the cut (column only where dim divides)."""
    columns = dim % parts == 0
    if sharding == "column" and columns:
        return "column"
    if sharding == "row":
        return "row"
    whole = dim // parts * element_bytes >= PLANNER_GRANULARITY
    return "column" if columns and whole and sharding == "auto" else "row"


@dataclass
class ChipGroup:
    """Chips the planner left in the same state: `chips` of them, each with the gather
    `load` (lookups x row bytes per pair), the `stored` bytes and the pieces `shards`
    (piece: how many of it)."""

    chips: int
    load: float
    stored: float
    shards: dict[Shard, int]
    order: int = 0
    """The first chip's index (chips numbered as the groups split, each group's chips
    consecutive): ties between equal chips go to the lower index, as one by one."""

    def key(self) -> tuple[float, float, int]:
        return (self.load, self.stored, self.order)


def _pieces(spec: RecommenderSpec, chips: int, element_bytes: float, sharding: str
            ) -> list[tuple[float, float, Shard, int]]:
    """The pieces to place, one entry per table group: (load, bytes, shard, how many). A
    table heavier than a chip's fair share is split into just enough equal pieces to fit
    under it (at most one per chip), cut column-wise or row-wise (`_cut`); a row-wise piece
    holds at least one row, so a table of R rows is cut row-wise in at most R pieces (a
    3-row table on 1,024 chips: 3), which may then stay above the fair share."""
    out = []
    loads = [t.lookups * row_bytes(t.dim, element_bytes) for t in spec.tables]
    fair = sum(w * t.count for w, t in zip(loads, spec.tables, strict=True)) / chips
    for i, (t, w) in enumerate(zip(spec.tables, loads, strict=True)):
        parts = max(1, min(chips, math.ceil(w / fair - 1e-9))) if chips > 1 and fair > 0 \
            else 1
        cut = _cut(t.dim, parts, element_bytes, sharding) if parts > 1 else "row"
        if cut == "row" and parts > t.rows:
            parts = int(t.rows)
            cut = _cut(t.dim, parts, element_bytes, sharding) if parts > 1 else "row"
        shard = Shard(i, parts, cut)
        out.append((shard.load(spec, element_bytes), t.rows * t.dim * element_bytes / parts,
                    shard, t.count * parts))
    out.sort(key=lambda x: (-x[0], -x[1]))
    return out


def _rounds_until(m: ChipGroup, o: ChipGroup, w: float, b: float) -> int | None:
    """The fewest rounds t >= 1 of one piece (w, b) per chip after which group m's state
    (load, stored) reaches o's; None: never (w = 0 and m's load below o's, or pieces too
    small to change a float this large)."""
    def reached(t: int) -> bool:
        return (m.load + t * w, m.stored + t * b) >= (o.load, o.stored)

    lo, hi = 1, 2**62
    if not reached(hi):
        return None
    while lo < hi:  # reached is monotone in t
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reached(mid) else (mid + 1, hi)
    return lo


def _place(groups: list[ChipGroup], w: float, b: float, shard: Shard, k: int) -> None:
    """Place k equal pieces (load w, bytes b) as the greedy rule would one by one (each on
    the chip with the least (load, stored) so far), a whole round of the lightest chips at a
    time: the chips within one piece of the lightest take one piece each per round, until
    the next chip joins them."""
    def add(g: ChipGroup, rounds: int) -> None:
        g.load += rounds * w
        g.stored += rounds * b
        g.shards[shard] = g.shards.get(shard, 0) + rounds

    def split(g: ChipGroup, n: int) -> ChipGroup:
        """g's first n chips as a group of their own."""
        part = ChipGroup(n, g.load, g.stored, dict(g.shards), g.order)
        g.chips -= n
        g.order += n
        groups.append(part)
        return part

    while k > 0:
        groups.sort(key=ChipGroup.key)
        lo = groups[0]
        if w <= 0 and b <= 0:  # weightless pieces all go to the lightest chip
            add(split(lo, 1) if lo.chips > 1 else lo, k)
            return
        step = (lo.load + w, lo.stored + b)
        window = [g for g in groups if (g.load, g.stored) < step] or \
            [g for g in groups if (g.load, g.stored) == (lo.load, lo.stored)]  # absorbed
        outside = [g for g in groups if g not in window]
        n_w = sum(g.chips for g in window)
        t_max = _rounds_until(window[-1], outside[0], w, b) if outside else None
        rounds = k // n_w if t_max is None else min(t_max, k // n_w)
        if rounds > 0:
            for g in window:
                add(g, rounds)
            k -= rounds * n_w
            continue
        for g in window:  # fewer pieces than chips: the lightest ones take one each
            take = g if g.chips <= k else split(g, k)
            add(take, 1)
            k -= take.chips
            if k == 0:
                break


def plan_groups(spec: RecommenderSpec, chips: int, element_bytes: float,
                sharding: str = "auto") -> list[ChipGroup]:
    """The default sharding planner, as groups of chips in the same state: every table is
    one load of lookups x row bytes (the gather traffic it causes); a table heavier than a
    chip's fair share (the total / chips) is split (`_pieces`); then the pieces go,
    heaviest first, each to the chip with the least load so far (ties: the fewest bytes
    stored). Balances the lookups' traffic first and the bytes second, as TorchRec's planner
    does by default (its cost: the pooled lookups' bytes). Equal pieces are placed a round
    of chips at a time and equal chips kept as one group, so the cost grows with the table
    groups, not with their counts or the chips (2^20 chips or count 10^7: milliseconds)."""
    groups = [ChipGroup(chips, 0.0, 0.0, {}, 0)]
    for w, b, shard, k in _pieces(spec, chips, element_bytes, sharding):
        _place(groups, w, b, shard, k)
        merged: dict[tuple[Any, ...], ChipGroup] = {}
        for g in sorted(groups, key=ChipGroup.key):
            key = (g.load, g.stored, tuple(sorted(g.shards.items(), key=lambda x: (
                x[0].table, x[0].parts, x[0].cut, x[1]))))
            if key in merged:
                merged[key].chips += g.chips
                merged[key].order = min(merged[key].order, g.order)
            elif g.chips > 0:
                merged[key] = g
        groups = list(merged.values())
    return sorted(groups, key=ChipGroup.key)


def plan_shards(spec: RecommenderSpec, chips: int, element_bytes: float,
                sharding: str = "auto") -> list[list[Shard]]:
    """`plan_groups` as one list of shards per chip (for a few chips: tests, reports)."""
    out: list[list[Shard]] = []
    for g in plan_groups(spec, chips, element_bytes, sharding):
        pieces = [s for s, n in g.shards.items() for _ in range(n)]
        out += [list(pieces) for _ in range(g.chips)]
    return out


def critical_chip(groups: list[ChipGroup]) -> ChipGroup:
    """The chips with the most gather traffic (they set the step's pace; ties: the lowest
    chip index)."""
    best = max(g.load for g in groups)
    return min((g for g in groups if g.load == best), key=lambda g: g.order)


def lower(spec: RecommenderSpec, scenario: RecScenario, counting: Counting = DEFAULT,
          batch: object = None, chips: int = 1) -> OpTable:
    """The operator table of `scenario` on one of `chips` chips (`batch`: [N] samples per
    chip per design, else the scenario's per chip). With several chips the dense layers are
    data-parallel (each chip its own samples) and the tables are sharded over the chips
    (`plan_shards`): a chip gathers from its shards for every chip's samples, and an
    all-to-all returns the pooled rows to the chips whose samples they belong to (the chip
    with the most gather traffic is modelled)."""
    training = phases.get(scenario.phase).trains
    w, a, _, dtype = PRECISIONS[scenario.precision]
    wb = counting.element_bytes or DTYPE_BYTES[w]
    ab = counting.element_bytes or DTYPE_BYTES[a]
    eb = counting.element_bytes or DTYPE_BYTES[scenario.embedding_precision or w]
    samples = np.asarray(batch, dtype=float) if batch is not None else float(scenario.batch)
    m = samples * (scenario.pairs or spec.sample.pairs)
    rows: list[OpRow] = []
    gathers: dict[str, Gather] = {}
    if chips > 1:
        held = dict(critical_chip(plan_groups(spec, chips, eb, scenario.sharding)).shards)
    else:
        held = {Shard(i, 1): t.count for i, t in enumerate(spec.tables)}
    m_all = m * chips  # every chip's pairs come through this chip's shards
    stored = 0.0
    pooled: Num = 0.0  # bytes of pooled rows this chip makes for the other chips' pairs
    opt = scenario.optimizer or RecOptimizer()
    for sh, count in held.items():
        t = spec.tables[sh.table]
        name = f"gather.{t.name}" + (f".{'part' if sh.cut == 'row' else 'cols'}{sh.parts}"
                                     if sh.parts > 1 else "")
        dim, n_rows = sh.dim(spec), sh.rows(spec)
        looked = m_all * sh.lookups(spec)
        state = STATE_BYTES[opt.embeddings](dim) if training else 0.0
        if training and opt.embeddings == "adagrad_rowwise" and sh.cut == "column":
            state = 4.0  # each column piece keeps its own row-wise accumulator (TorchRec)
        alpha = zipf_exponent(spec.skew_of(t))
        row = dim * eb
        gathers[name] = Gather(n_rows, alpha, row + state, sh.lookups(spec), pieces=(row,))
        rows.append(OpRow(
            name, "embedding", "embedding", float(count), looked * dim,
            read={"embeddings": looked * row, "activations": looked * INDEX_BYTES},
            written={"activations": m_all * dim * ab}, stage="forward", dtype=dtype))
        if training:
            # The backward: the lookups sorted by row, the pooled gradients summed per
            # distinct row, and the optimizer's read-modify-write of each distinct row and
            # its state once. The table's bytes are stated per lookup here; the model keeps
            # the distinct rows' share of them (dse.model.distinct, via Gather.distinct: a
            # row looked up many times is updated once). The optimizer's arithmetic is
            # counted per lookup, an upper bound (it runs on the vector units, far from
            # bounding the update).
            rmw = looked * (row + state)
            passes = math.ceil(math.log2(max(n_rows, 2.0)) / SORT_DIGIT_BITS)
            sort = looked * passes * SORT_PAIR_BYTES
            gathers[f"{name}.update"] = Gather(n_rows, alpha, row + state, sh.lookups(spec),
                                               pieces=(row, state) if state else (row,),
                                               table=name, distinct=looked)
            rows.append(OpRow(
                f"{name}.update", "embedding", "embedding", float(count),
                looked * dim * (1 + UPDATE_FLOPS[opt.embeddings]),
                read={"embeddings": rmw, "activations": m_all * dim * ab
                      + looked * INDEX_BYTES + sort},
                written={"embeddings": rmw, "activations": sort}, stage="backward",
                dtype="fp32"))
        stored += count * n_rows * (row + state)
        pooled += count * m_all * dim * ab
    prev = spec.dense_features
    for i, width in enumerate(spec.bottom_mlp):
        rows.append(_gemm(f"bottom_mlp.{i}", "bottom_mlp", m, width, prev, ab, wb, dtype, w))
        prev = width
    it = spec.interaction
    if it.kind == "cat":
        pass  # the concatenation is the pooled outputs side by side: no work of its own
    elif it.kind == "dot":
        f, d = _features(spec), spec.tables[0].dim
        rows.append(OpRow("interaction.dot", "gemm", "interaction", 1.0, 2.0 * m * f * f * d,
                          read={"activations": m * f * d * ab},
                          written={"activations": m * f * (f - 1) / 2 * ab},
                          m=f, n=f, k=d, batch=m, stage="forward", dtype=dtype))
    else:
        d = _cross_width(spec)
        if it.rank:
            rows.append(_gemm("cross.v", "interaction", m, it.rank, d, ab, wb, dtype, w,
                              bias=False))
            rows.append(_gemm("cross.u", "interaction", m, d, it.rank, ab, wb, dtype, w))
            for r in rows[-2:]:
                r.count = float(it.layers)
        else:
            rows.append(_gemm("cross.w", "interaction", m, d, d, ab, wb, dtype, w))
            rows[-1].count = float(it.layers)
        rows.append(OpRow("cross.update", "residual", "interaction", float(it.layers),
                          3.0 * m * d, read={"activations": 3 * m * d * ab},
                          written={"activations": m * d * ab}, stage="forward", dtype=dtype))
    prev = _top_input(spec)
    for i, width in enumerate(spec.top_mlp):
        rows.append(_gemm(f"top_mlp.{i}", "top_mlp", m, width, prev, ab, wb, dtype, w))
        prev = width
    dense = dense_parameters(spec)
    weights = dense * wb
    evals = 0.0  # forward-only pairs evaluated per pair trained
    if training:
        rows.extend(_backward([r for r in rows if r.kind != "embedding"], ab))
        if scenario.evaluation is not None:
            evals = scenario.evaluation.pairs / scenario.evaluation.every
            for r in rows:  # the evaluation passes run the forward operators again
                if r.stage == "forward":
                    r.count *= 1.0 + evals
        # the dense optimizer: fp32 master weights and state beside the compute copy
        master = 4.0 if wb < 4 else 0.0
        st = STATE_BYTES[opt.dense](1) + master
        rows.append(OpRow("optimizer.dense", "residual", "optimizer", 1.0,
                          dense * (1 + UPDATE_FLOPS[opt.dense]),
                          read={"weights": dense * (wb + st), "gradients": dense * 4.0},
                          written={"weights": dense * (wb + st)}, stage="backward",
                          dtype="fp32"))
        weights = dense * (wb + st)
    facts = Facts(phase=scenario.phase, batch=samples, seq_in=1.0,
                  resident={"weights": weights, "embeddings": stored},
                  gathers=gathers,
                  exchange=((2.0 + evals) if training else 1.0) * pooled if chips > 1
                  else 0.0,
                  reduce=dense * 4.0 if training and chips > 1 else 0.0)
    return OpTable.from_rows(rows, facts)


def _backward(forward: list[OpRow], ab: float) -> list[OpRow]:
    """The backward of the dense operators: each GEMM's input gradient and weight gradient
    (twice its forward FLOPs, one row of the same shape), each elementwise operator once
    more; gradients of the weights written in fp32."""
    out = []
    for r in forward:
        if r.kind == "gemm":
            wgrad = r.read.get("weights", 0.0) / max(DTYPE_BYTES.get(r.wdtype, 2.0), 0.5) * 4.0
            out.append(OpRow(
                f"{r.name}.backward", r.kind, r.group, r.count, 2.0 * r.flops,
                read={"activations": r.written.get("activations", 0.0)
                      + r.read.get("activations", 0.0), "weights": r.read.get("weights", 0.0)},
                written={"activations": r.read.get("activations", 0.0), "gradients": wgrad},
                m=r.m, n=r.n, k=r.k, batch=r.batch, stage="backward", dtype=r.dtype,
                wdtype=r.wdtype))
        else:
            out.append(OpRow(f"{r.name}.backward", r.kind, r.group, r.count, r.flops,
                             read=dict(r.written) | {"activations": r.read.get(
                                 "activations", 0.0) + r.written.get("activations", 0.0)},
                             written={"activations": r.read.get("activations", 0.0)},
                             stage="backward", dtype=r.dtype))
    del ab
    return out


def check(spec: RecommenderSpec, sc: RecScenario, tp: int, pp: int
          ) -> tuple[list[DseError], list[str]]:
    """Recommenders shard their tables over every chip and run their dense layers
    data-parallel (`lower`): no tensor or pipeline split."""
    return [DseError(f"{v}: a recommender is not split tensor- or pipeline-parallel: its "
                     "tables are sharded over all the chips (--chips) and its MLPs run "
                     "data-parallel", field=name, domain="execution", value=v, inline=True)
            for name, v in (("tp", tp), ("pp", pp)) if v > 1], []
