"""Placement: which memory level holds each persistent tensor class, per design.

The classes placed, their order and the levels each may use are data (`POLICY`): weights
first, then the KV cache, then the activation workspace, each filling the levels that can
hold data across steps (`MemoryLevel.holds_resident`) innermost (fastest) first: weights that
fit in a chip-wide SRAM stay there (Groq, Cerebras style); the rest go to the fastest DRAM
tier with room, spilling to slower tiers (GH200's LPDDR5X, a CXL tier). What does not fit
anywhere makes the design infeasible at that chip count. A class still to come (optimizer
state, embedding rows) is a row of `optable.CLASSES`, one of `POLICY` and one of
`parallel.CLASS_SPLITS`.

Bytes stored per level are not the share of accesses each level serves: a cache holds no data
of its own, but a step that touches less than a cache's capacity across repeated steps
(decode of a small model) finds it all there on the next step: LRU under a cyclic access
pattern keeps everything when the working set fits and, in the limit, nothing when it does
not. `cached_level` picks that cache; the access stage (dse.model.evaluate.access) uses it.
No I/O; arrays over N designs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.model.batch import DesignBatch
from dse.workloads.optable import PLACED_CLASSES

WORKSPACE = "workspace"  # the largest activation working set of one operator instance


def _known(name: str, what: str) -> None:
    """ValueError unless `name` is a placed class (a POLICY name): a class no rule places
    would otherwise be dropped, its bytes fitting nowhere yet counted nowhere."""
    if name not in PLACED:
        raise ValueError(f"{what} '{name}' is not a placed tensor class; expected one of: "
                         f"{', '.join(PLACED)}")


@dataclass(frozen=True)
class Footprint:
    """Bytes per chip of each placed class (a POLICY name): scalars or [N] arrays. A class
    left out holds 0 bytes; a name that is not a placed class is an error."""

    bytes: dict[str, np.ndarray]

    def __post_init__(self) -> None:
        for name in self.bytes:
            _known(name, "footprint of")

    def __getitem__(self, name: str) -> np.ndarray:
        _known(name, "footprint of")
        return self.bytes.get(name, np.zeros(()))


@dataclass(frozen=True)
class Rule:
    """One placed class: its name (a Footprint field) and the level kinds it may use
    (levels must also hold data across steps, `MemoryLevel.holds_resident`)."""

    name: str
    kinds: tuple[str, ...] = ("register", "sram", "cache", "dram", "host")


# Placement order: classes earlier in the list take the fastest room first. Every placed
# tensor class (optable.PLACED_CLASSES) and the workspace has a rule. Embedding tables come
# last: they are large and read by gathers whose hot rows caches catch, while the dense
# weights and activations are read whole on every step.
# Training's footprint-only entries (the stored activations and temporaries, the gradients)
# follow the workspace; the optimizer state comes last but for the tables: it is touched once
# per step, so it is the first to leave fast memory.
TRAINING = "training_state"
POLICY: tuple[Rule, ...] = (Rule("weights"), Rule("kv_cache"), Rule(WORKSPACE),
                            Rule(TRAINING), Rule("optimizer_state"), Rule("embeddings"))
PLACED = tuple(r.name for r in POLICY)
assert set(PLACED) == {*PLACED_CLASSES, WORKSPACE, TRAINING}, "every placed class has a rule"


@dataclass(frozen=True)
class Placement:
    """fraction[N, P, L]: share of each placed class (POLICY order) held by each level;
    used[N, L] bytes per chip; short[N] bytes that fit nowhere (0 when feasible)."""

    fraction: np.ndarray
    used: np.ndarray
    short: np.ndarray

    @property
    def feasible(self) -> np.ndarray:
        return self.short <= 0.0

    def share(self, name: str) -> np.ndarray:
        """[N, L] share of class `name` stored at each level."""
        return self.fraction[:, PLACED.index(name)]


def place(batch: DesignBatch, footprint: Footprint,
          allowed: dict[str, tuple[str, ...]] | None = None) -> Placement:
    """Place each class of `footprint` into the levels its rule allows, in POLICY order;
    `allowed` confines a class to the named levels (a training scenario's offload). A class
    or level name `allowed` does not know is an error, as is a footprint class no rule places
    (`Footprint` refuses those when built)."""
    n, lv = batch.n, batch.levels
    for name in footprint.bytes:  # a Footprint whose dict was changed after it was built
        _known(name, "footprint of")
    for name, levels in (allowed or {}).items():
        _known(name, "offload of")
        unknown = [lv_ for lv_ in levels if lv_ not in batch.level_names]
        if unknown:
            raise ValueError(f"offload of '{name}': no memory level '{unknown[0]}'; expected "
                             f"one of: {', '.join(batch.level_names)}")
    free = batch.resident_capacity.copy()
    fraction = np.zeros((len(POLICY), lv, n))  # stored [P, L, N], handed on as [N, P, L]
    short = np.zeros(n)
    for p, rule in enumerate(POLICY):
        given = np.asarray(footprint[rule.name], dtype=float)
        need = np.broadcast_to(given, (n,))
        one = float(given.ravel()[0]) if given.size == 1 else None  # the same for all
        remaining = need.copy()
        only = (allowed or {}).get(rule.name)
        for level in range(lv):
            if batch.level_kinds[level] not in rule.kinds:
                continue
            if only is not None and batch.level_names[level] not in only:
                continue
            take = np.minimum(remaining, free[:, level])
            free[:, level] -= take
            remaining = remaining - take
            if one is None:
                np.divide(take, need, out=fraction[p, level], where=need > 0)
            elif one > 0:
                np.divide(take, one, out=fraction[p, level])
        short += remaining
    used = batch.resident_capacity - free
    return Placement(fraction=fraction.transpose(2, 0, 1), used=used, short=short)


def cached_level(batch: DesignBatch, working_set: np.ndarray | float) -> np.ndarray:
    """[N] index of the innermost shared cache whose capacity holds `working_set` bytes
    (the data a repeated step touches), or -1 when none does."""
    ws = np.broadcast_to(np.asarray(working_set, dtype=float), (batch.n,))
    out = np.full(batch.n, -1)
    for level in reversed(range(batch.levels)):
        if batch.level_kinds[level] == "cache" and not batch.per_unit[level]:
            out = np.where(batch.capacity[:, level] >= ws, level, out)
    return out
