"""How a recommender's embedding tables are sharded over the chips (TorchRec's planner, as
the MLPerf DLRM-v2 harnesses run it): tables whole, column-wise or row-wise, balanced by
their gather load; the chip with the most load is the one the model times. No I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dse.spec.workload import RecommenderSpec

# The planner's cost of one lookup rounds the row to 64 B, a DDR4/DDR5 burst (JEDEC
# JESD79-4/-5) and two 32-byte GPU sectors: it ranks tables without knowing the chip. The
# model itself rounds each row to the access granularity of the level that serves it
# (MemoryLevel.gather_granularity, applied in dse.model.stages.gather_home).
PLANNER_GRANULARITY = 64.0


def row_bytes(dim: int, element_bytes: float) -> float:
    """The planner's cost of one lookup, bytes: the row rounded up to PLANNER_GRANULARITY."""
    return math.ceil(dim * element_bytes / PLANNER_GRANULARITY) * PLANNER_GRANULARITY


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
