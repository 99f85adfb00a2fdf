"""One pass of a phase's step for N designs at one batch each: lower the workload, run the
one pass (dse.model.passes), add the serving engine's limits and the latency target, and
compute the phase's metrics (its `rates`, dse.phases). `evaluate` and the batch search run
it; no I/O."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from dse import phases, units
from dse.model import reasons as reason_codes
from dse.model.batch import DesignBatch
from dse.model.execution import Execution
from dse.model.lowered import lowered, picked_facts
from dse.model.passes import run_pass
from dse.model.placement import Placement
from dse.model.reasons import Reasons
from dse.model.stages import Step, phase_metrics
from dse.spec.workload import Scenario, WorkloadSpec
from dse.workloads.serving import batch_limit, engine_of, front_end_of, iteration


@dataclass(frozen=True)
class Run:
    """What one pass of the pipeline gives for N designs at one batch (per design)."""

    step: Step
    placement: Placement
    feasible: np.ndarray
    reason: Reasons
    metrics: dict[str, np.ndarray]


def meets(metrics: dict[str, np.ndarray], sc: Scenario) -> np.ndarray:
    """Designs that meet the scenario's latency target (the metric the phase's `target`
    names: time per output token for serve, per batch for inference); all of them without
    a target."""
    target = phases.get(sc.phase).target
    if sc.latency_target is None or target is None:
        return np.ones(len(metrics["latency_s"]), dtype=bool)
    return metrics[target] <= sc.latency_target


def run_phase(db: DesignBatch, wl: WorkloadSpec, sc: Scenario, ex: Execution,
         batch: np.ndarray | None, sequences: np.ndarray | float,
         target: bool = False) -> Run:
    """One pass of the pipeline. `batch`: [N] sequences per replica (None: the scenario's
    batch, ceil(batch / dp) per replica); `sequences`: of the whole system."""
    per_replica: float | np.ndarray  # sequences per replica: one, or [N] per design
    if batch is None:
        per_replica = float(math.ceil(int(sc.batch) / ex.dp))
        low = lowered(wl, sc.model_copy(update={"batch": int(per_replica)}), ex, None)
    else:
        per_replica = batch
        low = lowered(wl, sc, ex, np.asarray(batch, dtype=float))
    table, tables = low.table, low.tables
    ph = phases.get(sc.phase)
    serve = ph.served
    it = iteration(per_replica, sc.seq_in, sc.seq_out, engine_of(sc)) if serve else None
    done = run_pass(db, table, ex, in_sequence=ph.in_sequence, precision=sc.precision,
                    plan=low.plan, tables=tables)
    if tables is not None:  # the table's facts per design
        table = dataclasses.replace(table, facts=picked_facts(table.facts, tables))
    st, placed, reasons = done.step, done.placement, done.reasons
    if serve:
        limit = batch_limit(sc.seq_in, sc.seq_out, engine_of(sc))
        reasons = reasons.first(np.broadcast_to(per_replica, (db.n,)) > limit,
                                f"{np.max(per_replica):.0f} sequences in flight per replica "
                                f"exceed the {limit:.0f} the serving engine allows (scenario "
                                f"engine: max_batch, max_tokens_per_iteration)",
                                code=reason_codes.ENGINE_LIMIT)
    flops = table.total_flops
    if tables is not None and isinstance(flops, np.ndarray):
        flops = flops[tables]
    metrics = phase_metrics(table.facts, st, sequences, ex.chips, flops, it,
                            front_end_of(sc))
    feasible = ~reasons.any
    if target and sc.latency_target is not None:
        slow = feasible & ~meets(metrics, sc)
        reasons = reasons.first(slow, f"no batch meets the latency target of "
                                      f"{units.format_quantity(sc.latency_target, units.TIME)}",
                                code=reason_codes.LATENCY_TARGET)
        feasible = ~reasons.any
    return Run(step=st, placement=placed, feasible=feasible, reason=reasons,
               metrics=metrics)
