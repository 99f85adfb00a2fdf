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

from dse import phases, units
from dse.errors import DseError
from dse.model import die_links, training
from dse.model import reasons as reason_codes
from dse.model.area import area
from dse.model.arguments import checked
from dse.model.batch import DesignBatch, design_batch
from dse.model.chunks import BEST_CANDIDATES, chunked  # issue 15: chunked evaluation
from dse.model.execution import Execution
from dse.model.operating_point import CALIBRATION_GEMMS, calibrate
from dse.model.parallel import chip_ops
from dse.model.passes import run_pass
from dse.model.placement import WORKSPACE, Placement
from dse.model.power import step_energy
from dse.model.power_stage import static_power, with_power
from dse.model.reasons import Reasons
from dse.model.results import Evaluation
from dse.model.stages import (
    METRICS,
    Step,
    activation_bytes,
    footprint,
    phase_metrics,
)
from dse.spec.hardware import HardwareSpec
from dse.spec.technology import TechSpec
from dse.spec.types import MAX_WHOLE
from dse.spec.workload import Scenario, WorkloadSpec, gemm_from_name
from dse.workloads import execution_issues, kind_of, lower, resolve_scenario, runs
from dse.workloads.optable import CLASSES
from dse.workloads.serving import batch_limit, engine_of, iteration

# batch best (_best): candidate batches run per design at a time; linear passes around a peak
# until every whole batch next to it is tried (each narrows the window ~5x: 10^6 sequences
# take ~8 passes).
MAX_BEST_PASSES = 16
GRID_STEPS = 2  # pass 1: batches 2^(j / GRID_STEPS), rounded, up to the most that fit
BEST_BASINS = 2  # the grid's peaks refined

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Run:
    """What one pass of the pipeline gives for N designs at one batch (per design)."""

    step: Step
    placement: Placement
    feasible: np.ndarray
    reason: Reasons
    metrics: dict[str, np.ndarray]


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
             latency_target: float | str | None = None,
             chips: int = 1, tp: int = 1, pp: int = 1, execution: Execution | None = None,
             overrides: Mapping[str, object] | None = None,
             fusion: str = "flash", tech: TechSpec | None = None,
             reticle: bool = True, area_budget: float | None = None) -> Evaluation:
    """Evaluate every design of `hw` (a spec with `overrides`, or a DesignBatch) on one
    scenario of `wl`. Scenario fields given here replace the named scenario's (a seq_in
    replaces its length distribution too: the length named is the length run); `overrides`
    take strings with units or numbers in the internal unit (README, "One rule for bare
    numbers"); metrics are as dse.model.metrics defines them; `execution`
    (or chips, tp, pp, fusion) says how the chips split the work. With `tech` (the spec's
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
                             "kv_precision": kv_precision, "latency_target": latency_target}
    given = {k: v for k, v in given.items() if v is not None}
    if per_design is not None:
        # each distinct value checked as the scenario's batch, so a bad one reads as usual
        for value in dict.fromkeys(per_design.tolist()):
            resolve_scenario(wl, scenario, **{**given, "batch": int(value)})
        given["batch"] = int(per_design[0])
    sc_name, sc = resolve_scenario(wl, scenario, **given)
    ph = phases.get(sc.phase)
    _reject(per_design is not None and ph.trains,
            f"phase {sc.phase} takes one global batch per evaluation, not one per design",
            field="batch")
    ex = execution or Execution(chips=chips, tp=tp, pp=pp, fusion=fusion)
    if phases.get(sc.phase).trains:  # the strategy the scenario's training block states
        ex = ex.with_training(sc.training)
    problems, warnings = execution_issues(wl, sc, ex.tp, ex.pp)
    if problems:  # one error, each part naming its field (tp, pp)
        raise DseError.together(problems)
    _reject(area_budget is not None and tech is None, "an area budget needs the area model: "
            "the chip's technology.node, a node file and compute.style")
    _reject(area_budget is not None and not (area_budget > 0),
            f"area budget: expected a positive area, found {area_budget}")
    able = phases.those(lambda p: p.work in kind_of(wl).works)
    _reject(not runs(wl, sc.phase), f"{wl.name}: a {wl.kind} workload runs phase "
                                    f"{phases.listed(able, 'or')}, not {sc.phase}")

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
        run = _run(db, wl, sc, ex, seqs, per_design)
    elif isinstance(sc.batch, int):
        seqs = np.full(db.n, float(math.ceil(sc.batch / ex.dp)))
        none_fit = np.zeros(db.n, dtype=bool)
        run = _run(db, wl, sc, ex, None, float(sc.batch))
    else:
        most = size(db, wl, sc, ex)
        none_fit = most < 1
        if sc.batch == "max":
            seqs = np.maximum(most, 1.0)
            run = _run(db, wl, sc, ex, seqs, ex.dp * seqs)
        else:
            seqs, run = _best(db, wl, sc, ex, np.maximum(most, 1.0))
    step = run.step
    reason = run.reason.prefixed(none_fit, "not even one sequence fits: ")
    feasible = run.feasible & ~none_fit
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


def size(db: DesignBatch, wl: WorkloadSpec, sc: Scenario, ex: Execution) -> np.ndarray:
    """[N] the most sequences per replica whose memory fits (stage `size`): the KV cache each
    sequence holds (serve: as the engine's admission policy reserves it, over the share of
    free memory the engine gives the cache) plus the activation workspace, beside the
    weights; serve also within the engine's max batch and token budget. The workspace is
    the largest operator's, each affine in the batch (its intercept and slope from the
    lowering at 1 and 2 sequences), so the answer is exact: the next sequence does not fit."""
    table = lower(wl, sc.model_copy(update={"batch": 1}), batch=np.array([1.0, 2.0]),
                  chips=ex.dp)
    ops, _ = chip_ops(table, ex)
    ws = activation_bytes(ops)  # [2, I]
    fp = footprint(table, ops, ex, ws)
    grows = {c.name for c in CLASSES if c.per_sequence}
    held = sum((np.broadcast_to(fp[c], (2,)) for c in grows), np.zeros(2))
    fixed = sum((np.broadcast_to(fp[c], (2,))[0] for c in fp.bytes
                 if c not in grows and c != WORKSPACE), np.zeros(()))
    slope = held[1] - held[0] + ws[1] - ws[0]  # [I] bytes per sequence with operator i
    base = ws[0] - (ws[1] - ws[0])  # [I] workspace at no sequences
    _reject(not np.any(slope > 0),
            f"{wl.name}: batch {sc.batch} needs per-sequence memory to size")
    free = db.resident_capacity.sum(axis=1) - fixed
    with np.errstate(divide="ignore", invalid="ignore"):
        fits = np.where(slope > 0, (free[:, None] - base) / slope, np.inf)
    most = np.floor(np.maximum(fits.min(axis=1), 0.0))
    if phases.get(sc.phase).served:
        most = np.minimum(most, batch_limit(sc.seq_in, sc.seq_out, engine_of(sc)))
    return most


def _best(db: DesignBatch, wl: WorkloadSpec, sc: Scenario, ex: Execution,
          most: np.ndarray) -> tuple[np.ndarray, Run]:
    """batch best: for every design the batch in 1..most with the highest throughput that
    meets the scenario's latency target. Pass 1 tries a fixed grid of batches (2^(j /
    GRID_STEPS), rounded, and `most`), the same whatever the memory, so more memory only
    adds batches; then around each of the BEST_BASINS best peaks of the grid, linear passes
    between the neighbours of that peak's best batch until every whole batch between them is
    tried. Throughput rises in steps and falls off cliffs (one sequence more fills a wave of
    thread blocks, or spills a cache: BERT on an H100 peaks at 35 sequences, 9,503/s, and 94,
    9,468/s), so the answer is the best batch tried, a peak over whole batches. Every pass
    runs BEST_CANDIDATES batches of every design at a time."""
    metric = phases.get(sc.phase).best_metric
    assert metric is not None, "a phase that takes batch best names its best_metric"
    n, k = db.n, BEST_CANDIDATES
    most = np.asarray(most, dtype=float)

    top_most = max(float(np.max(most)), 1.0) if most.size else 1.0
    # The score of (design, batch) pairs already run, by key design x width + batch, sorted:
    # a pass runs only the pairs no pass ran before, once each (the windows of later passes
    # overlap earlier candidates and repeat batches once narrower than BEST_CANDIDATES). A
    # design's score at a batch does not depend on the designs beside it in a pass.
    width = int(top_most) + 1
    known_keys, known_scores = np.empty(0, dtype=np.int64), np.empty(0)

    def scores(cand: np.ndarray) -> np.ndarray:
        nonlocal known_keys, known_scores
        keys = np.arange(n, dtype=np.int64)[:, None] * width + cand.astype(np.int64)
        new = np.unique(keys)
        if known_keys.size:
            at = np.minimum(np.searchsorted(known_keys, new), known_keys.size - 1)
            new = new[known_keys[at] != new]
        got = np.empty(new.size)
        for c in range(0, new.size, n * k):
            part = new[c:c + n * k]
            flat = (part % width).astype(float)
            run = _run(db.take(part // width), wl, sc, ex, flat, ex.dp * flat)
            got[c:c + n * k] = np.where(run.feasible & _meets(run.metrics, sc),
                                        run.metrics[metric], -1.0)
        known_keys = np.concatenate([known_keys, new])
        known_scores = np.concatenate([known_scores, got])
        order = np.argsort(known_keys, kind="stable")
        known_keys, known_scores = known_keys[order], known_scores[order]
        return known_scores[np.searchsorted(known_keys, keys)]

    grid = np.unique(np.floor(2.0 ** (np.arange(np.floor(np.log2(top_most) * GRID_STEPS) + 1)
                                      / GRID_STEPS) + 0.5))
    cand = np.clip(np.concatenate([np.broadcast_to(grid, (n, grid.size)), most[:, None]],
                                  axis=1), 1.0, np.maximum(most, 1.0)[:, None])
    score = scores(cand)
    pick = np.argmax(score, axis=1)
    best = np.take_along_axis(cand, pick[:, None], axis=1)[:, 0]
    top = np.take_along_axis(score, pick[:, None], axis=1)[:, 0]
    # the grid's peaks (at least their neighbours' throughput), the best BEST_BASINS of them
    g = cand.shape[1]
    left_s = np.concatenate([np.full((n, 1), -np.inf), score[:, :-1]], axis=1)
    right_s = np.concatenate([score[:, 1:], np.full((n, 1), -np.inf)], axis=1)
    peak = np.where((score >= left_s) & (score >= right_s), score, -np.inf)
    basins = np.argsort(-peak, axis=1, kind="stable")[:, :BEST_BASINS]  # [N, B]
    lo = np.take_along_axis(cand, np.maximum(basins - 1, 0), axis=1)
    hi = np.take_along_axis(cand, np.minimum(basins + 1, g - 1), axis=1)
    b = lo.shape[1]
    steps = np.linspace(0.0, 1.0, k)
    for _ in range(MAX_BEST_PASSES):
        if np.all(hi <= lo):
            break
        c = np.clip(np.floor(lo[..., None] + (hi - lo)[..., None] * steps + 0.5), 1.0,
                    np.maximum(most, 1.0)[:, None, None])  # [N, B, K]
        sc_ = scores(c.reshape(n, b * k)).reshape(n, b, k)
        flat = np.argmax(sc_.reshape(n, b * k), axis=1)
        won = np.take_along_axis(sc_.reshape(n, b * k), flat[:, None], axis=1)[:, 0]
        better = won > top  # the best batch of every pass so far (ties: the earlier)
        top = np.where(better, won, top)
        best = np.where(better, np.take_along_axis(c.reshape(n, b * k), flat[:, None],
                                                   axis=1)[:, 0], best)
        p = np.argmax(sc_, axis=2)[..., None]  # each basin's best, and its neighbours
        at = np.take_along_axis(c, p, axis=2)[..., 0]
        left = np.take_along_axis(c, np.maximum(p - 1, 0), axis=2)[..., 0]
        right = np.take_along_axis(c, np.minimum(p + 1, k - 1), axis=2)[..., 0]
        done = hi - lo <= k - 1  # this pass tried every batch in [lo, hi]
        lo, hi = np.where(done, at, left), np.where(done, at, right)
    return best, _run(db, wl, sc, ex, best, ex.dp * best, target=True)


def _meets(metrics: dict[str, np.ndarray], sc: Scenario) -> np.ndarray:
    """Designs that meet the scenario's latency target (the metric the phase's `target`
    names: time per output token for serve, per batch for inference); all of them without
    a target."""
    target = phases.get(sc.phase).target
    if sc.latency_target is None or target is None:
        return np.ones(len(metrics["latency_s"]), dtype=bool)
    return metrics[target] <= sc.latency_target


def _run(db: DesignBatch, wl: WorkloadSpec, sc: Scenario, ex: Execution,
         batch: np.ndarray | None, sequences: np.ndarray | float,
         target: bool = False) -> Run:
    """One pass of the pipeline. `batch`: [N] sequences per replica (None: the scenario's
    batch, ceil(batch / dp) per replica); `sequences`: of the whole system."""
    per_replica: float | np.ndarray  # sequences per replica: one, or [N] per design
    if batch is None:
        per_replica = float(math.ceil(int(sc.batch) / ex.dp))
        table = lower(wl, sc.model_copy(update={"batch": int(per_replica)}), chips=ex.dp)
    else:
        per_replica = batch
        table = lower(wl, sc, batch=batch, chips=ex.dp)
    ph = phases.get(sc.phase)
    serve = ph.served
    it = iteration(per_replica, sc.seq_in, sc.seq_out, engine_of(sc)) if serve else None
    done = run_pass(db, table, ex, in_sequence=ph.in_sequence, precision=sc.precision)
    st, placed, reasons = done.step, done.placement, done.reasons
    if serve:
        limit = batch_limit(sc.seq_in, sc.seq_out, engine_of(sc))
        reasons = reasons.first(np.broadcast_to(per_replica, (db.n,)) > limit,
                                f"{np.max(per_replica):.0f} sequences in flight per replica "
                                f"exceed the {limit:.0f} the serving engine allows (scenario "
                                f"engine: max_batch, max_tokens_per_iteration)",
                                code=reason_codes.ENGINE_LIMIT)
    metrics = phase_metrics(table.facts, st, sequences, ex.chips, table.total_flops, it)
    feasible = ~reasons.any
    if target and sc.latency_target is not None:
        slow = feasible & ~_meets(metrics, sc)
        reasons = reasons.first(slow, f"no batch meets the latency target of "
                                      f"{units.format_quantity(sc.latency_target, units.TIME)}",
                                code=reason_codes.LATENCY_TARGET)
        feasible = ~reasons.any
    return Run(step=st, placement=placed, feasible=feasible, reason=reasons,
               metrics=metrics)


def _operating_point(db: DesignBatch,
                     tech: TechSpec) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Energy per matrix FLOP and clocked power per unit of a chip whose file gives none,
    calibrated on a large GEMM at its TDP (dse.model.operating_point)."""
    static_w = static_power(tech, area(db, tech, reticle=False))
    ex = Execution()

    def run(p: str) -> Step:
        # The largest calibration GEMM that fits (an SRAM-only chip holds a smaller one).
        for size in CALIBRATION_GEMMS:
            wl = gemm_from_name(f"gemm:{size}x{size}x{size}")
            sc = wl.scenarios["gemm"].model_copy(update={"precision": p})
            out = _run(db, wl, sc, ex, None, 1.0)
            if out.feasible.all():
                break
        return out.step

    def moved(st: Step) -> tuple[np.ndarray, np.ndarray]:
        e = step_energy(db, tech, st.precision, st.matrix, st.count, st.flops, st.traffic,
                        st.link_bytes)
        return e.memory.sum(axis=1) + e.links, np.einsum("nj,nj->n", st.count, st.flops)

    return calibrate(db, static_w, run, moved)
