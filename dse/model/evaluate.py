"""evaluate(): hardware designs x workload scenario -> metrics, memory footprint and the
bound of every operator, for N designs in one pass of array arithmetic.

The pipeline is a row of named stages, each a function with a typed input and output:

    size      batch max / best: sequences per replica per design        -> [N]
    lower     workload + scenario (+ [N] batch) -> OpTable                 (dse.workloads)
    plan      OpTable + Execution -> ChipOps, Collectives                  (parallel.chip_ops)
    footprint ChipOps + table facts -> bytes per chip per placed class     -> Footprint
    place     Footprint -> share of each class stored at each level        (placement.place)
    access    Placement -> share of each class's accesses served per level -> Access
    time      ChipOps + Access -> time, traffic and bound per operator     (performance)
    collect   Collectives -> time per collective                           (parallel)
    step      operators + collectives -> step time and counts              -> Step
    metrics   Step + phase -> latency, throughput                          -> metrics
    power     Step + node constants -> power, energy, area, feasibility    (power_stage)

Phases and what they report (T: time of one step of one data-parallel replica,
step_time_s; every metric is defined once in dse.model.metrics):
- gemm: achieved_flop_per_s = FLOPs / T;
- prefill: ttft_s = latency_s = T (the whole prompt of every sequence, and the first token);
- decode: T covers seq_out tokens of `batch` sequences over a KV cache growing from seq_in;
  latency_s = T (a request's seq_out tokens), tpot_s = T / seq_out,
  decode_tokens_per_s = seq_out / T (one sequence), output_tokens_per_s = batch x that
  (a batch that does not divide among the replicas counts only its own sequences);
- serve: continuous batching as servers run it, one steady-state iteration
  (dse.workloads.serving): `batch` sequences in flight (or, with `max`, the most whose KV
  reservations fit in the engine's share of the memory beside the weights and workspace,
  within its max batch and token budget; with `best`, the batch among those with the most
  output tokens/s whose time per output token meets the latency target); one forward per
  iteration carries the decode tokens and the new prompts' tokens; the iteration takes the
  operators' time plus the engine's host overhead: tpot_s = that, ttft_s = the iterations
  a prompt takes, latency_s = the lifetime of iterations a request stays,
  output_tokens_per_s = batch x seq_out / lifetime / tpot;
- inference (encoders): samples_per_s = batch / T.
No I/O; a design that cannot run the scenario gets feasible = False and a reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from dse import phases
from dse.errors import DseError
from dse.model import die_links, training
from dse.model import reasons as codes
from dse.model.area import area
from dse.model.arguments import checked
from dse.model.attention import on_stack
from dse.model.batch import DesignBatch, design_batch
from dse.model.batch_search import best_batch, size
from dse.model.chunks import chunked  # issue 15: chunked evaluation
from dse.model.execution import Execution, training_degree_problems
from dse.model.operating_point import CALIBRATION_GEMMS, calibrate
from dse.model.phase_pass import Run, run_phase
from dse.model.power import step_energy
from dse.model.power_stage import static_power, with_power
from dse.model.reasons import Reasons
from dse.model.results import Evaluation
from dse.model.stages import (
    METRICS,
    Step,
    row_major,
)
from dse.spec.hardware import HardwareSpec
from dse.spec.technology import TechSpec
from dse.spec.types import MAX_WHOLE
from dse.spec.workload import Scenario, WorkloadSpec, gemm_from_name
from dse.workloads import check_runs, execution_issues, resolve_scenario

F = TypeVar("F", bound=Callable[..., Any])


def _reject(condition: bool, message: str, **structured: Any) -> None:
    """DseError(message, **structured: field, value, rule) when `condition` holds."""
    if condition:
        raise DseError(message, **structured)
@checked  # the types of the arguments, before anything else
@chunked  # issue 15: any number of designs in bounded memory (dse.model.chunks)
def evaluate(hw: HardwareSpec | DesignBatch, wl: WorkloadSpec, scenario: str | None = None, *,
             phase: str | None = None,
             batch: int | str | Sequence[int] | np.ndarray | None = None,
             seq_in: int | None = None, seq_out: int | None = None,
             precision: str | None = None, kv_precision: str | None = None,
             sparsity: str | None = None, latency_target: float | str | None = None,
             stack: str | None = None,
             chips: int = 1, tp: int = 1, pp: int = 1, cp: int = 1, ep: int = 1,
             execution: Execution | None = None, overrides: Mapping[str, object] | None = None,
             fusion: str = "flash", tech: TechSpec | None = None,
             reticle: bool = True, area_budget: float | None = None) -> Evaluation:
    """Evaluate every design of `hw` (a spec with `overrides`, or a DesignBatch) on one
    scenario of `wl`. Scenario fields given here replace the named scenario's (a seq_in
    replaces its length distribution too: the length named is the length run); `overrides`
    take strings with units or numbers in the internal unit (docs: guide/hardware.md, "One rule for
    bare numbers"); metrics are as dse.model.metrics defines them; `execution`
    (or chips, tp, pp, cp, ep, fusion) says how the chips split the work (cp and ep:
    training's context- and expert-parallel degrees). With `tech` (the spec's
    process node), power, energy and area come too, and a design whose power exceeds its
    TDP is slowed to fit it (see dse.model.power); a design whose dies exceed the reticle
    (with `reticle`), whose die area exceeds `area_budget` (mm2, all dies) or whose static
    power alone exceeds its TDP is infeasible.

    `batch` may also be a list of whole numbers, one per design (a batch sweep in one pass):
    the designs of `hw` are then that many (one design is repeated), and
    `Evaluation.batch_values` holds them. Not for phase training."""
    db = hw if isinstance(hw, DesignBatch) else design_batch(hw, overrides)
    if tech is not None:  # a package of several dies: DRAM traffic crosses their joints
        db = die_links.with_joint_bound(db, tech)
    per_design = None
    if isinstance(batch, list | tuple | np.ndarray):
        per_design, batch = _batch_values(batch, db.n), None
        if db.n == 1:
            db = db.take(np.zeros(len(per_design), dtype=int))
    given: dict[str, Any] = {"phase": phase, "batch": batch, "seq_in": seq_in,
                             "seq_out": seq_out, "precision": precision,
                             "kv_precision": kv_precision, "sparsity": sparsity,
                             "latency_target": latency_target, "stack": stack}
    given = {k: v for k, v in given.items() if v is not None}
    if per_design is not None:
        # each distinct value checked as the scenario's batch, so a bad one reads as usual
        for value in dict.fromkeys(per_design.tolist()):
            resolve_scenario(wl, scenario, **{**given, "batch": int(value)})
        given["batch"] = int(per_design[0])
    sc_name, sc = resolve_scenario(wl, scenario, **given)
    db, sc = on_stack(db, sc)  # the software stack (the vendor's default): dse.spec.stack
    ph = phases.get(sc.phase)
    _reject(per_design is not None and ph.trains,
            f"phase {sc.phase} takes one global batch per evaluation, not one per design",
            field="batch")
    ex = execution or Execution(chips=chips, tp=tp, pp=pp, cp=cp, ep=ep, fusion=fusion)
    if phases.get(sc.phase).trains:  # the strategy the scenario's training block states
        ex = ex.with_training(sc.training)
    warnings = _checked_run(wl, sc, ex, tech, area_budget)
    ran = _stepped(db, wl, sc, ex, per_design)
    run, seqs, none_fit, setup = ran.run, ran.sequences, ran.none_fit, ran.setup
    step = run.step
    reason, feasible = _sparse_units(db, sc, run.reason.prefixed(
        none_fit, "not even one sequence fits: "), run.feasible & ~none_fit)
    raw = dict(run.metrics)
    limited, energy = None, None
    if tech is not None:
        powered = with_power(db, tech, sc, step, raw, chips=ex.chips,
                             stages=ex.pp if ph.in_sequence else 1, reason=reason,
                             reticle=reticle, area_budget=area_budget,
                             operating_point=_operating_point)
        raw, limited, energy = powered.metrics, powered.limited, powered.energy
        reason, feasible = powered.reason, feasible & powered.feasible
    metrics = {m: np.where(feasible, v, np.nan) for m, v in raw.items()}
    return Evaluation(
        hardware=db.spec.name, workload=wl.name, scenario=sc, scenario_name=sc_name,
        scenario_overrides=given, chips=ex.chips, tp=ex.tp, pp=ex.pp, batch=db,
        feasible=feasible, reason=reason.only(~feasible),
        sequences=np.where(none_fit, 0.0, seqs), metrics=metrics,
        memory_bytes=run.placement.used, level_names=db.level_names, ops_name=step.names,
        ops_count=step.count, ops_flops=step.flops, op_traffic=step.traffic,
        ops_time=step.time, ops_bound_code=step.bound, power_limited=limited, energy=energy,
        warnings=tuple(warnings), training=setup, batch_values=per_design, execution=ex)


def _sparse_units(db: DesignBatch, sc: Scenario, reason: Reasons, feasible: np.ndarray
                  ) -> tuple[Reasons, np.ndarray]:
    """(reason, feasible) with every design infeasible when the scenario's weight sparsity
    is a pattern the chip's matrix units do not skip (they would compute every zero)."""
    if sc.sparsity is None or sc.sparsity in db.spec.compute.matrix.sparsity:
        return reason, feasible
    dense = np.ones(db.n, dtype=bool)
    return (reason.first(dense, f"{db.spec.name} has no {sc.sparsity} sparse matrix units "
                                "(compute.matrix.sparsity)", code=codes.NO_RATE),
            feasible & ~dense)


def _checked_run(wl: WorkloadSpec, sc: Scenario, ex: Execution, tech: TechSpec | None,
                 area_budget: float | None) -> list[str]:
    """The warnings of running `sc` as `ex`; DseError where it cannot run at all (a split
    the model does not divide, an area budget without the area model, a phase the
    workload's kind does not run)."""
    problems, warnings = execution_issues(wl, sc, ex.tp, ex.pp)
    problems += training_degree_problems(sc.phase, ex)
    if problems:  # one error, each part naming its field (tp, pp)
        raise DseError.together(problems)
    _reject(area_budget is not None and tech is None, "an area budget needs the area model: "
            "the chip's technology.node, a node file and compute.style")
    _reject(area_budget is not None and not (area_budget > 0),
            f"area budget: expected a positive area, found {area_budget}")
    check_runs(wl, sc.phase)
    return warnings


@dataclass(frozen=True)
class Stepped:
    """The step of N designs at the batch the scenario asks for."""

    run: Run
    sequences: np.ndarray  # [N] sequences per data-parallel replica
    none_fit: np.ndarray  # [N] bool: not even one sequence fits (batch max, best)
    setup: dict[str, np.ndarray] | None  # training: the setup chosen and its memory


def _stepped(db: DesignBatch, wl: WorkloadSpec, sc: Scenario, ex: Execution,
             per_design: np.ndarray | None) -> Stepped:
    """The step at the scenario's batch: the kind's training planner; one batch per design;
    a whole batch; the most that fit (max); or the best that meets the target (best)."""
    ph = phases.get(sc.phase)
    setup: dict[str, np.ndarray] | None = None
    planner = training.planner_of(wl.kind) if ph.trains else None
    if planner is not None:  # the kind's training planner (dse.model.training.PLANNERS)
        tr = planner(db, wl, sc, ex)
        run = Run(step=tr.step, placement=tr.placement, feasible=tr.feasible,
                  reason=tr.reason,
                  metrics={**{k: np.full(db.n, np.nan) for k in METRICS}, **tr.metrics})
        seqs = np.full(db.n, float(sc.batch) / ex.dp)
        none_fit = np.zeros(db.n, dtype=bool)
        setup = {**tr.setup, **{f"memory_{k}_bytes": v for k, v in tr.memory.items()}}
    elif per_design is not None:  # the int branch below, one batch per design
        seqs = np.ceil(per_design / ex.dp)
        none_fit = np.zeros(db.n, dtype=bool)
        run = run_phase(db, wl, sc, ex, seqs, per_design)
    elif isinstance(sc.batch, int):
        seqs = np.full(db.n, float(math.ceil(sc.batch / ex.dp)))
        none_fit = np.zeros(db.n, dtype=bool)
        run = run_phase(db, wl, sc, ex, None, float(sc.batch))
    else:
        most = size(db, wl, sc, ex)
        none_fit = most < 1
        if sc.batch == "max":
            seqs = np.maximum(most, 1.0)
            run = run_phase(db, wl, sc, ex, seqs, ex.dp * seqs)
        else:
            seqs, run = best_batch(db, wl, sc, ex, np.maximum(most, 1.0))
    return Stepped(run=run, sequences=seqs, none_fit=none_fit, setup=setup)


def _batch_values(values: Sequence[int] | np.ndarray, designs: int) -> np.ndarray:
    """[N] a batch per design as floats: whole numbers >= 1, as many as the designs (or any
    number for one design); DseError otherwise."""
    arr = np.asarray(values, dtype=object).ravel()
    _reject(arr.size == 0, "expected at least one batch", field="batch", value=[])
    for v in arr:
        _reject(isinstance(v, bool) or not isinstance(v, int | np.integer)
                or not 1 <= v <= MAX_WHOLE,
                f"expected positive whole numbers, found {v!r}", field="batch", value=v,
                rule="positive whole numbers")
    _reject(designs > 1 and arr.size != designs,
            f"{arr.size} batches for {designs} designs; give one batch per design "
            "(or one design)", field="batch", value=arr.size)
    return arr.astype(float)


def _operating_point(db: DesignBatch,
                     tech: TechSpec) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Energy per matrix FLOP and clocked power per unit of a chip whose file gives none,
    calibrated on a large GEMM at its TDP (dse.model.operating_point)."""
    static_w = static_power(tech, area(db, tech, reticle=False))
    ex = Execution()

    def run(p: str) -> Step:
        # The largest calibration GEMM that fits (an SRAM-only chip holds a smaller one).
        for side in CALIBRATION_GEMMS:
            wl = gemm_from_name(f"gemm:{side}x{side}x{side}")
            sc = wl.scenarios["gemm"].model_copy(update={"precision": p})
            out = run_phase(db, wl, sc, ex, None, 1.0)
            if out.feasible.all():
                break
        return out.step

    def moved(st: Step) -> tuple[np.ndarray, np.ndarray]:
        st = row_major(st)
        e = step_energy(db, tech, st.precision, st.matrix, st.count, st.flops, st.traffic,
                        st.link_bytes)
        return e.memory.sum(axis=1) + e.links, np.einsum("nj,nj->n", st.count, st.flops)

    return calibrate(db, static_w, run, moved)
