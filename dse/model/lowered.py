"""The operator table a pass runs and its `plan` stage, for N designs at the scenario's batch
or at a batch each: lowered once per distinct batch (designs that share a batch run one
table, `ChipOps.rows`), and kept for later calls with the same workload, scenario,
execution and batches (dse.model.kept: a study evaluates one workload at one scenario in
many calls, and one design's call spent a third of its time lowering). No I/O."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse import phases
from dse.model.execution import Execution
from dse.model.kept import Kept, frozen, key_of
from dse.model.passes import Plan, plan_pass
from dse.spec.workload import Scenario, WorkloadSpec
from dse.workloads import lower
from dse.workloads.optable import Facts, OpTable

# (workload, scenario, execution, batches) entries kept: a study evaluates a few workloads,
# each at one scenario, in many calls; `batch best` adds one entry per set of candidate
# batches, so more are kept than for training (dse.model.training_cache).
MAX_ENTRIES = 256
# Distinct batches an entry may hold: a table and its plan take about 1 KB per batch
# (Llama-3-8B and Mixtral serve, measured), so an entry stays under ~100 KB and the store
# under ~25 MB; a larger set (`batch best` over a wide range of batches) is lowered as
# distinct tables but not kept.
KEEP_DISTINCT = 64
_KEPT: Kept[Lowered | None] = Kept()


@dataclass(frozen=True)
class Lowered:
    """A table and its plan stage (read-only); `tables`: [N] the table each design runs
    where the table holds distinct tables ([U] batches), else None."""

    table: OpTable
    plan: Plan | None
    tables: np.ndarray | None = None


def lowered(wl: WorkloadSpec, sc: Scenario, ex: Execution, batch: np.ndarray | None
            ) -> Lowered:
    """The table of N designs at `batch` ([N] sequences per replica; None: the scenario's
    batch, which `sc` then holds per replica). A batch each is lowered once per distinct
    batch where at most half the designs have one of their own (a study's designs share a
    few batch sizes; `batch best` runs a grid of them), else per design, not kept; so is a
    recommender's (its gathers are lowered per design)."""
    if batch is None:
        entry = _kept(wl, sc, ex, None)
        assert entry is not None  # (one table: never per design)
        return entry
    distinct, tables = np.unique(batch, return_inverse=True)
    if 2 * len(distinct) <= len(batch):
        entry = _kept(wl, sc, ex, distinct)
        if entry is not None:
            return dataclasses.replace(entry, tables=tables.ravel())
    return Lowered(table=lower(wl, sc, batch=batch, chips=ex.dp), plan=None)


def _kept(wl: WorkloadSpec, sc: Scenario, ex: Execution, distinct: np.ndarray | None
          ) -> Lowered | None:
    """The kept entry (None: the kind lowers a batch each per design)."""
    key = key_of(wl, sc, ex, None if distinct is None else distinct.tobytes())

    def make() -> Lowered | None:
        table = lower(wl, sc, batch=distinct, chips=ex.dp)
        if distinct is not None and table.facts.gathers:
            return None
        plan = plan_pass(table, ex, in_sequence=phases.get(sc.phase).in_sequence)
        return frozen(Lowered(table=table, plan=plan))

    if distinct is not None and len(distinct) > KEEP_DISTINCT:
        return make()
    return _KEPT.get(key, make, MAX_ENTRIES)


def at_one_and_two(wl: WorkloadSpec, sc: Scenario, ex: Execution) -> Lowered:
    """The table at 1 and 2 sequences per replica ([2] tables) and its plan stage, kept: what
    `batch max` sizes the batch from (batch_search.size)."""
    key = key_of(wl, sc, ex, "1, 2")

    def make() -> Lowered:
        table = lower(wl, sc, batch=np.array([1.0, 2.0]), chips=ex.dp)
        return frozen(Lowered(table=table, plan=plan_pass(table, ex, in_sequence=True)))

    entry = _KEPT.get(key, make, MAX_ENTRIES)
    assert entry is not None
    return entry


def clear() -> None:
    """Forget every kept table."""
    _KEPT.clear()


def picked_facts(facts: Facts, tables: np.ndarray) -> Facts:
    """Facts of U distinct tables ([U] values) as the N designs that run them see them."""
    def pick(v: Any) -> Any:
        return v[tables] if isinstance(v, np.ndarray) and v.ndim else v

    picked: dict[str, Any] = {
        f.name: ({k: pick(x) for k, x in v.items()} if isinstance(v, dict) and
                 f.name == "resident" else pick(v))
        for f in dataclasses.fields(facts) for v in (getattr(facts, f.name),)}
    return dataclasses.replace(facts, **picked)
