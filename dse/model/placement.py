"""Placement: which memory level holds each persistent tensor class, per design.

Weights first, then the KV cache, then the activation workspace, each filling the levels
that can hold data across steps (`MemoryLevel.holds_resident`) innermost (fastest) first:
weights that fit in a chip-wide SRAM stay there (Groq, Cerebras style); the rest go to the
fastest DRAM tier with room, spilling to slower tiers (GH200's LPDDR5X, a CXL tier). What
does not fit anywhere makes the design infeasible at that chip count.

A cache holds no data of its own, but a step that touches less than a cache's capacity
across repeated steps (decode of a small model) finds it all there on the next step: LRU
under a cyclic access pattern keeps everything when the working set fits and, in the limit,
nothing when it does not. `cached_level` picks that cache. No I/O; arrays over N designs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.model.batch import DesignBatch

# Placement order and the classes placed.
PLACED = ("weights", "kv_cache", "workspace")


@dataclass(frozen=True)
class Placement:
    """fraction[N, P, L]: share of each placed class (PLACED order) held by each level;
    used[N, L] bytes per chip; short[N] bytes that fit nowhere (0 when feasible)."""

    fraction: np.ndarray
    used: np.ndarray
    short: np.ndarray

    @property
    def feasible(self) -> np.ndarray:
        return self.short <= 0.0


def place(batch: DesignBatch, sizes: dict[str, np.ndarray | float]) -> Placement:
    """Place `sizes` (bytes per chip per class; scalars or [N]) into the resident levels."""
    n, lv = batch.n, batch.levels
    free = batch.resident_capacity.copy()
    fraction = np.zeros((n, len(PLACED), lv))
    short = np.zeros(n)
    for p, cls in enumerate(PLACED):
        need = np.broadcast_to(np.asarray(sizes.get(cls, 0.0), dtype=float), (n,))
        remaining = need.copy()
        for level in range(lv):
            take = np.minimum(remaining, free[:, level])
            free[:, level] -= take
            remaining = remaining - take
            fraction[:, p, level] = np.divide(take, need, out=np.zeros(n), where=need > 0)
        short += remaining
    used = batch.resident_capacity - free
    return Placement(fraction=fraction, used=used, short=short)


def cached_level(batch: DesignBatch, working_set: np.ndarray | float) -> np.ndarray:
    """[N] index of the innermost shared cache whose capacity holds `working_set` bytes
    (the data a repeated step touches), or -1 when none does."""
    ws = np.broadcast_to(np.asarray(working_set, dtype=float), (batch.n,))
    out = np.full(batch.n, -1)
    for level in reversed(range(batch.levels)):
        if batch.level_kinds[level] == "cache" and not batch.per_unit[level]:
            out = np.where(batch.capacity[:, level] >= ws, level, out)
    return out
