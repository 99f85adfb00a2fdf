"""One pass of the evaluation pipeline for N designs, the same for every phase: the stages
from a lowered operator table to a timed step and the reasons a design cannot run it.

    plan       OpTable + Execution -> ChipOps, Collectives         (parallel.chip_ops)
    footprint  ChipOps + table facts -> bytes per chip per class     (stages.footprint)
    place      Footprint -> share of each class at each level        (placement.place)
    access     Placement -> share of each class's accesses per level (stages.access)
    time       ChipOps + Access -> time, traffic, bound per operator (stages.timed)
    collect    Collectives -> time per collective                    (parallel)
    step       operators + collectives -> step time and counts       (stages.step)

A phase's planner changes the pass through a `Plugin`, not a copy of it: training (dse.model.
training) gives the footprint its memory planner computes and the levels each class may
use, adds its data-, context- and expert-parallel collectives, and overlaps them with
compute and adds the pipeline bubble on the timed step. No I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from dse.model import reasons as codes
from dse.model.batch import DesignBatch
from dse.model.distinct_ops import same_as, timed_distinct
from dse.model.execution import Execution
from dse.model.operators import ChipOps, OpTimes
from dse.model.parallel import Collectives, chip_ops, collective_times, picked_collectives
from dse.model.placement import Footprint, Placement, place
from dse.model.reasons import Reasons
from dse.model.stages import Step, access, activation_bytes, fit_word, footprint, step
from dse.workloads.optable import OpTable


@dataclass(frozen=True)
class Plugin:
    """How a phase's planner changes the pass (each None: the stage as it is)."""

    footprint: Callable[[OpTable, ChipOps, np.ndarray],
                        tuple[Footprint, Mapping[str, tuple[str, ...]] | None]] | None = None
    """(table, ops, workspace [N, I]) -> the bytes per chip of each class and the levels a
    class is confined to (None: any level)."""
    collectives: Callable[[Collectives], Collectives] | None = None
    """The plan's collectives -> the step's (more collectives, other counts)."""
    step: Callable[[Step], Step] | None = None
    """The timed step -> the step as it runs (overlap, idle time)."""
    join: Callable[[OpTimes, np.ndarray], Step] | None = None
    """(operator times, [N, C] collective times) -> the step as it runs: the `step` stage
    and the `step` hook in one, where a planner does both faster."""


@dataclass(frozen=True)
class Pass:
    """What one pass gives for N designs."""

    table: OpTable
    ops: ChipOps
    footprint: Footprint
    placement: Placement
    step: Step
    reasons: Reasons
    """Why a design cannot run the step: it does not fit, lacks a compute rate for the
    precision, or must communicate without links (worded when read)."""


@dataclass(frozen=True)
class Plan:
    """The design-independent start of a pass (stage `plan`): the operators one chip runs,
    the step's collectives (the plug-in's included) and each operator's activation working
    set, [I] bytes. A planner that runs one table in many calls keeps it (read-only)."""

    ops: ChipOps
    coll: Collectives
    ws: np.ndarray
    same: np.ndarray | None = None
    """[I] the operator each one is timed as (distinct_ops.same_as); None: each itself."""


def plan_pass(table: OpTable, ex: Execution, *, in_sequence: bool,
              collectives: Callable[[Collectives], Collectives] | None = None,
              owned: bool = True, distinct: bool = False) -> Plan:
    """The `plan` stage of `table` split as `ex`, with the plug-in's `collectives`. `owned`:
    the table is the caller's to split in place (False: a kept table, copied first);
    `distinct`: find the operators the kernel cannot tell apart, to time them once (worth it
    where the plan is kept for many passes)."""
    ops, coll = chip_ops(table, ex, stages_in_sequence=in_sequence, own=owned)
    if collectives is not None:
        coll = collectives(coll)
    return Plan(ops=ops, coll=coll, ws=activation_bytes(ops),
                same=same_as(ops, table.facts) if distinct else None)


def run_pass(db: DesignBatch, table: OpTable, ex: Execution, *, in_sequence: bool,
             precision: str, plugin: Plugin | None = None, plan: Plan | None = None,
             tables: np.ndarray | None = None) -> Pass:
    """The pass of `table` split as `ex` over every design of `db`. `in_sequence`: one
    request crosses the pipeline stages in turn (a latency phase); `precision`: the
    scenario's, for the reason a design has no rate for it; `plan`: the table's `plan_pass`
    (the plug-in's collectives in it) where the caller kept it. `tables`: [N] where `table`
    holds the U distinct tables of designs that share a batch (lowered at each distinct
    batch once): design n runs table tables[n], so the plan and the operators' working
    sets are worked out per table and the kernel gathers them (ChipOps.rows)."""
    plug = plugin or Plugin()
    if tables is not None and (plug.footprint or plug.collectives or plug.step or plug.join):
        raise ValueError("a planner's pass runs one table for every design, not distinct "
                         "tables")
    if plan is None:
        plan = plan_pass(table, ex, in_sequence=in_sequence, collectives=plug.collectives)
    ops, coll, ws = plan.ops, plan.coll, plan.ws
    allowed: Mapping[str, tuple[str, ...]] | None = None
    if plug.footprint is not None:
        fp, allowed = plug.footprint(table, ops, ws)
    else:
        fp = footprint(table, ops, ex, ws)
    if tables is not None:  # each design's table picked; the operators keep the tables
        ops, coll = dataclasses.replace(ops, rows=tables), picked_collectives(coll, tables)
        ws = ws[tables] if ws.ndim == 2 else ws
        fp = Footprint({k: v[tables] if np.ndim(v) else v for k, v in fp.bytes.items()})
    placed = place(db, fp, dict(allowed) if allowed is not None else None)
    acc = access(db, placed, fp, ops, ws, table.facts)
    t = timed_distinct(db, ops, acc, table.facts, plan.same)
    if plug.join is not None:
        st = plug.join(t, collective_times(db, coll))
    else:
        st = step(db, ops, coll, t, collective_times(db, coll))
        if plug.step is not None:
            st = plug.step(st)
    reasons = Reasons.none(db.n).first(~placed.feasible & (placed.short > 0),
                                       fit_word(db, fp, placed.short), code=codes.MEMORY,
                                       amount=placed.short)
    reasons = reasons.first(st.missing_rate,
                            f"no compute rate for precision {precision} on {db.spec.name}",
                            code=codes.NO_RATE)
    talkers = ex.model_split if ex.model_split > 1 else ex.chips
    reasons = reasons.first(st.no_link, f"{talkers} chips must communicate but "
                                        f"{db.spec.name} has no chip-to-chip links",
                            code=codes.NO_LINK)
    return Pass(table=table, ops=ops, footprint=fp, placement=placed, step=st,
                reasons=reasons)
