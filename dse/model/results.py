"""What `dse.evaluate` returns: the `Evaluation` of N designs (arrays over designs, and
over the operators and collectives one chip runs), with its tables' views. No I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.model.batch import DesignBatch
from dse.model.execution import Execution
from dse.model.power import StepEnergy
from dse.model.reasons import Reasons
from dse.model.stages import PIPELINE
from dse.spec.vocabulary import generation_names
from dse.spec.workload import Scenario


@dataclass
class Evaluation:
    """Results for N designs. Arrays over designs; `ops_*` over the J operators and
    collectives one chip runs (names shared by all designs)."""

    hardware: str
    workload: str
    scenario: Scenario
    scenario_name: str  # the workload file's scenario, or "<phase> (default)"
    scenario_overrides: dict[str, object]  # scenario fields the caller replaced
    chips: int
    tp: int
    pp: int
    batch: DesignBatch
    feasible: np.ndarray  # [N] bool
    reason: Reasons  # [N] str ("" when feasible), worded when read (dse.model.reasons)
    sequences: np.ndarray  # [N] sequences per data-parallel replica
    metrics: dict[str, np.ndarray]  # name -> [N] (NaN: not applicable or infeasible)
    memory_bytes: np.ndarray  # [N, L] bytes per chip held in each level
    level_names: tuple[str, ...]
    ops_name: np.ndarray  # [J]
    ops_count: np.ndarray  # [N, J] repeats
    ops_flops: np.ndarray  # [N, J] FLOPs per instance per chip
    op_traffic: np.ndarray  # [N, I, L] bytes per instance per chip at each level, for the
    # I operators (the first I of the J; collectives move no bytes through the levels)
    ops_time: np.ndarray  # [N, J] s per instance
    ops_bound_code: np.ndarray  # [N, J] int: 0 compute, 1 + level, OVERHEAD, INTERCONNECT
    power_limited: np.ndarray | None = None  # [N] bool: slowed to fit the TDP (with tech)
    energy: StepEnergy | None = None  # per chip and step, unthrottled (with tech)
    warnings: tuple[str, ...] = ()  # legal but suspect inputs (lengths beyond the context)
    batch_values: np.ndarray | None = None
    """[N] the batch of each design, when evaluate was given one per design (else None: the
    scenario's batch)."""
    execution: Execution | None = None
    """How the chips ran it: every parallel degree and, for training, the strategy the
    execution and the scenario's training block state (fields left None were chosen per
    design: `training`)."""
    training: dict[str, np.ndarray] | None = None
    """Transformer training: per design the setup chosen (micro_batch, microbatches, zero,
    recompute, sequence_parallel) and the memory planner's bytes per chip
    (memory_<part>_bytes)."""

    @property
    def n(self) -> int:
        return len(self.feasible)

    def scenario_of(self, i: int) -> Scenario:
        """The scenario design i ran: `scenario`, with its own batch when each design had
        one."""
        if self.batch_values is None:
            return self.scenario
        return self.scenario.model_copy(update={"batch": int(self.batch_values[i])})

    def scenario_overrides_of(self, i: int) -> dict[str, object]:
        """The scenario fields the caller replaced for design i."""
        if self.batch_values is None:
            return self.scenario_overrides
        return {**self.scenario_overrides, "batch": int(self.batch_values[i])}

    @property
    def ops_bytes(self) -> np.ndarray:
        """[N, J, L] bytes per instance per chip at each level (0 for collectives)."""
        n, i, lv = self.op_traffic.shape
        out = np.zeros((n, len(self.ops_name), lv))
        out[:, :i] = self.op_traffic
        return out

    @property
    def ops_bound(self) -> np.ndarray:
        """[N, J] str: compute, a level name, overhead or interconnect."""
        labels = np.array(["pipeline", "interconnect", "overhead", "compute",
                           *self.level_names], dtype=object)
        # codes PIPELINE, INTERCONNECT, OVERHEAD, 0, 1 + level
        return labels[self.ops_bound_code - PIPELINE]

    def columns(self) -> dict[str, np.ndarray]:
        """One array per column, one row per design: overrides (paths as given, SI values),
        feasibility, sequences, metrics, memory per level (a DataFrame's worth, without
        pandas: the model core is numpy)."""
        cols: dict[str, np.ndarray] = {
            k: (np.array(generation_names(v), dtype=object) if k.endswith(".generation")
                else v) for k, v in self.batch.overrides.items()}  # generations by name
        cols["feasible"] = self.feasible
        cols["reason"] = np.asarray(self.reason)
        cols["sequences_per_replica"] = self.sequences
        cols.update(self.metrics)
        for level, name in enumerate(self.level_names):
            cols[f"memory_per_chip_{name}_bytes"] = self.memory_bytes[:, level]
        if self.power_limited is not None:
            cols["power_limited"] = self.power_limited
        for k, v in (self.training or {}).items():
            cols[f"training.{k}"] = v
        return cols

    @property
    def ops_spent(self) -> np.ndarray:
        """[N, J] time of each operator over its repeats, s: count x time, and 0 for an
        operator that does not run (count 0), whose time alone may be infinite (a rate
        of 0 on a path it never takes) and would make the product NaN."""
        with np.errstate(invalid="ignore"):
            return np.where(self.ops_count > 0, self.ops_count * self.ops_time, 0.0)

    def op_records(self, i: int = 0) -> list[dict[str, Any]]:
        """Operators of design i: name, count, flops and bytes (totals over the count, per
        chip), time (total), share of the step, bound; sorted by time, longest first."""
        spent = self.ops_spent[i]
        total = float(np.sum(spent))
        bound = self.ops_bound[i]
        n_ops = self.op_traffic.shape[1]
        out = []
        for j, name in enumerate(self.ops_name):
            cnt = float(self.ops_count[i, j])
            t = float(spent[j])
            out.append({
                "name": str(name), "count": cnt,
                "flops": cnt * float(self.ops_flops[i, j]),
                "bytes": {lv: cnt * float(self.op_traffic[i, j, k]) if j < n_ops else 0.0
                          for k, lv in enumerate(self.level_names)},
                "time_s": t, "share": t / total if total > 0 else 0.0,
                "bound": str(bound[j]),
            })
        return sorted(out, key=lambda r: -r["time_s"])
