"""Training step time of a Transformer, per design, with the fastest setup that fits.

One optimizer step on one chip (a tensor-parallel rank of one pipeline stage of one
data-parallel replica; the busiest stage sets the pace):

    operators  m micro-batches of forward, recomputation and backward, then the optimizer's
               update (dse.workloads.training), timed by the roofline engine; the optimizer
               reads its state from wherever placement put it (an offloaded state is read
               over that level's link);
    tensor     the Megatron all-reduces of every micro-batch (forward and backward);
    data       the gradient all-reduce (ZeRO 0), or the gradients' reduce-scatter and the
               updated parameters' all-gather (ZeRO 1-2: Megatron's distributed optimizer,
               the same bytes); ZeRO-3 also gathers every stage's parameters twice per
               micro-batch (forward and backward; FSDP);
    pipeline   each micro-batch's activations sent forward and their gradients back; the
               bubble: (pp - 1) / (v x m) of the micro-batches' compute (Narayanan et al.,
               SC21, Sec. 2.2: 1F1B and its interleaved form with v chunks per rank);
    overlap    the gradient reduction runs under the last micro-batch's backward and the
               parameter all-gather under the first micro-batch's forward (Megatron's
               overlap_grad_reduce / overlap_param_gather, DDP's buckets); ZeRO-3's gathers
               under the forward or backward they serve (FSDP prefetch): only the excess
               shows;
    context    context parallelism (cp ranks per sequence): each rank runs seq / cp tokens
               and 1/cp of the attention pairs, gathering every layer's K and V (ring
               attention, under the attention's compute) and reduce-scattering their
               gradients;
    experts    expert parallelism (ep ranks share each MoE layer's experts): a rank holds
               E / ep experts and runs the tokens routed to them; tokens go to their experts'
               ranks and back (two all-to-alls per MoE layer forward, two backward);
    compress   stored activations compressed and decompressed on the vector units.
The step is the one pass of every phase (dse.model.passes) with training's plug-ins
(dse.model.training_plugins: its collectives, overlap, bubble and compression).

Setup fields the execution and scenario leave open (micro-batch, pipeline schedule, ZeRO stage,
recomputation, sequence parallelism) are chosen per design: the memory planner
(dse.model.training_memory) scores every combination at once; for each micro-batch and
schedule the cheapest combination that fits each design (least recomputation, then ZeRO 1,
2, 0, 3, sequence parallelism first) is timed, and each design keeps the fastest. No I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse import phases
from dse.errors import DseError
from dse.model.batch import DesignBatch
from dse.model.execution import Execution
from dse.model.kernel import rate_of
from dse.model.passes import Plugin, run_pass
from dse.model.placement import TRAINING, WORKSPACE, Footprint, Placement
from dse.model.reasons import Reasons
from dse.model.stages import (
    Step,
)
from dse.model.training_cache import Setup, model_flops, planned
from dse.model.training_join import joined
from dse.model.training_plugins import training_step
from dse.spec.workload import Scenario, TransformerSpec
from dse.workloads.training import TRAINING_PRECISIONS

__all__ = ["PLANNERS", "TRAINING_METRICS", "TrainingRun", "check", "model_flops",
           "planner_of", "run"]

TRAINING_METRICS = ("step_time_s", "tokens_per_s", "model_flop_per_s_per_chip",
                    "hardware_flop_per_s_per_chip", "mfu")


@dataclass(frozen=True)
class TrainingRun:
    """One design batch's training step: the step, placement, feasibility, metrics, and per
    design the setup chosen and its memory (bytes per chip)."""

    step: Step
    placement: Placement
    feasible: np.ndarray
    reason: Reasons
    metrics: dict[str, np.ndarray]
    setup: dict[str, np.ndarray]
    memory: dict[str, np.ndarray]


def check(wl: TransformerSpec, sc: Scenario, ex: Execution, db: DesignBatch) -> None:
    """Reject what the step model cannot time, each with its reason."""
    cp, ep = ex.cp, ex.ep
    if ex.dp % cp or ex.dp % ep:
        raise DseError(f"training: context_parallel ({cp}) and expert_parallel ({ep}) must "
                       f"divide the {ex.dp} data-parallel ranks (chips / (tp x pp))")
    if ep > 1 and (wl.moe is None or wl.moe.experts % ep):
        raise DseError(f"{ep}: expert parallelism must divide the experts of a MoE model; "
                       f"{wl.name} has " + (f"{wl.moe.experts}" if wl.moe else "none"),
                       field="ep", domain="execution", value=ep,
                       rule="a divisor of the experts", inline=True)
    if cp > 1 and sc.seq_in % cp:
        raise DseError(f"{cp}: context parallelism must divide the sequence "
                       f"({sc.seq_in} tokens)", field="cp", domain="execution", value=cp,
                       rule="a divisor of the sequence", inline=True)
    if ex.offload is not None and ex.offload.to not in db.level_names:
        raise DseError(f"training.offload.to: {db.spec.name} has no memory level "
                       f"'{ex.offload.to}'; expected one of {', '.join(db.level_names)}")
    if not isinstance(sc.batch, int) or sc.batch < ex.dp // cp:
        raise DseError(f"batch {sc.batch}: training takes a global batch of at least one "
                       f"sequence per data-parallel replica ({ex.dp // cp})")
    if sc.precision not in TRAINING_PRECISIONS:
        raise DseError(f"precision {sc.precision}: training runs fp32, bf16, fp16, mixed or "
                       "fp8 (mixed precision with fp32 master weights)")


def run(db: DesignBatch, wl: TransformerSpec, sc: Scenario, ex: Execution) -> TrainingRun:
    """The training step of every design with its fastest fitting setup: the execution's
    strategy where it (or the scenario's `training:` block) gives one, else the planner's
    choice per design."""
    ex = ex.with_training(sc.training)
    check(wl, sc, ex, db)
    plan = planned(wl, sc, ex)  # the candidates, their memory and tables (training_cache)
    cands, mem = plan.choices, plan.memory
    need = mem.total + mem.offloaded  # [S]
    # Fitting the fastest tier alone and spilling to slower ones are different trades (a
    # spilled optimizer state is read from the slow tier; recomputation or ZeRO may keep
    # everything fast): the cheapest setup that fits each prefix of the resident levels.
    rooms = np.cumsum(db.resident_capacity, axis=1)[:, db.resident]  # [N, R]
    fast = np.cumsum(db.resident_capacity, axis=1)[:, _fast_levels(db)[-1]]  # [N]
    # placement fills the fast tier with the weights first, then what every micro-batch
    # touches (stored activations, gradients, temporaries), which must stay there
    held = mem.parameters + mem.gradients + mem.activations + mem.temporary
    n = db.n
    own = np.zeros((len(cands), n), dtype=bool)  # [S, N] the setups each design times
    for key in sorted({(c.micro_batch, c.virtual_stages) for c in cands}):
        idx = [i for i, c in enumerate(cands) if (c.micro_batch, c.virtual_stages) == key]
        for tier in range(rooms.shape[1]):
            sub = (need[None, idx] <= rooms[:, tier, None]) \
                & (held[None, idx] <= fast[:, None])  # [N, S_b]
            fits = sub.any(axis=1)
            own[np.asarray(idx)[np.argmax(sub, axis=1)[fits]], np.flatnonzero(fits)] = True
    picked = [int(i) for i in np.flatnonzero(own.any(axis=1))]
    if not picked:  # nothing fits anywhere: report the setup that needs the least memory
        picked = [int(np.argmin(need))]
    # A design that fits no setup reports the first one picked (as it would among them all).
    own[picked[0], ~own.any(axis=0)] = True
    # Each setup is timed on the designs that picked it only (a design's candidates are
    # the cheapest setup of each micro-batch that fits each memory tier, `own`).
    runs = [(plan.setup(i), np.flatnonzero(own[i])) for i in picked]
    subsets: dict[bytes, DesignBatch] = {}  # setups of different micro-batches often share
    timed = [(c, d, _one(_subset(db, d, subsets), sc, ex, c)) for c, d in runs]
    score = np.full((len(timed), n), -np.inf)
    for k, (_, d, r) in enumerate(timed):
        score[k, d] = np.where(r.feasible, r.metrics["tokens_per_s"], -np.inf)
    best = np.argmax(score, axis=0)
    lost = np.flatnonzero(~np.isfinite(score).any(axis=0) & ~own[picked[0]])
    if lost.size:  # no setup runs: the first one picked says why, as for a design that
        # fits none
        first = plan.setup(picked[0])
        timed.append((first, lost, _one(db.take(lost), sc, ex, first)))
        best[lost] = len(timed) - 1
    return _assemble([(r, d, np.flatnonzero(best[d] == k))
                      for k, (_, d, r) in enumerate(timed)], n)


# The training planners by workload kind: a kind listed here trains with its planner
# (setup search over the one pass, with the training plug-ins); any other kind that runs
# the train work takes the plain pass of its lowered training step (a recommender).
Planner = Callable[[DesignBatch, Any, Scenario, Execution], TrainingRun]
PLANNERS: dict[str, Planner] = {}


def planner_of(kind: str) -> Planner | None:
    """The training planner of a workload kind, if it has one."""
    return PLANNERS.get(kind)


def _one(db: DesignBatch, sc: Scenario, ex: Execution,
         setup: Setup) -> TrainingRun:
    """The step of every design under `setup` (training_cache: lowered once per inputs)."""
    c, run_as, table, mem = setup.choice, setup.execution, setup.table, setup.memory
    m = float(mem.microbatches)
    fp = Footprint({"weights": mem.parameters + mem.offloaded_parameters,
                    "optimizer_state": mem.optimizer_state + mem.offloaded_optimizer_state,
                    TRAINING: mem.gradients + mem.activations + mem.temporary,
                    WORKSPACE: np.zeros(())})
    # The stored activations, gradients and temporaries are touched by every micro-batch:
    # they live in the chip's fastest memory (what a framework keeps on the device), not
    # in a slower tier (activation offload is not modelled).
    allowed = {TRAINING: tuple(db.level_names[i] for i in _fast_levels(db))}
    if ex.offload is not None:
        if ex.offload.optimizer:
            allowed["optimizer_state"] = (ex.offload.to,)
        if ex.offload.parameters:
            allowed["weights"] = (ex.offload.to,)
    row, ops, coll = setup.counts, setup.plan.ops, setup.plan.coll
    plugin = Plugin(  # the collectives are in the kept plan (setup.plan)
        footprint=lambda table, ops, ws: (fp, allowed),
        step=lambda st: training_step(st, db, run_as, m, row),
        join=None if row is None else
        lambda t, t_coll: joined(db, ops, coll, t, t_coll, run_as, m, row))
    ran = run_pass(db, table, ex, in_sequence=phases.get(sc.phase).in_sequence,
                   precision=sc.precision, plugin=plugin, plan=setup.plan)
    st, placed = ran.step, ran.placement

    counted, done = setup.counted, setup.done
    total = st.total
    chips = ex.chips
    metrics = {
        "step_time_s": total,
        "samples_per_s": sc.batch / total,
        "tokens_per_s": sc.batch * sc.seq_in / total,
        "tokens_per_s_per_chip": sc.batch * sc.seq_in / total / chips,
        "model_flop_per_s_per_chip": counted * ex.dp / total / chips,
        "hardware_flop_per_s_per_chip": done * ex.dp / total / chips,
        "latency_s": total,
        "achieved_flop_per_s": done * ex.dp / total,
    }
    # MFU against the peak of the linear layers' precision (FP8 training: the FP8 peak), of
    # the fastest engine that can run them: a GEMM runs on the vector units where they are
    # faster than the matrix units (dse.model.performance), so a matrix peak set below the
    # vector rate must not leave MFU above 1
    linear = str(table.dtype[np.flatnonzero(table.kind == "gemm")[0]])
    peak = np.fmax(rate_of(db.matrix_peak, linear, db.n), rate_of(db.vector_peak, linear, db.n))
    metrics["mfu"] = metrics["model_flop_per_s_per_chip"] / peak
    reasons = ran.reasons
    feasible = ~reasons.any & np.isfinite(total)
    n = db.n
    chosen = {"micro_batch": np.full(n, float(c.micro_batch)),
             "microbatches": np.full(n, m), "zero": np.full(n, float(c.zero)),
             "recompute": np.full(n, c.recompute, dtype=object),
             "sequence_parallel": np.full(n, c.sequence_parallel),
             "virtual_stages": np.full(n, float(c.virtual_stages))}
    memory = {k: np.full(n, float(getattr(mem, k))) for k in (
        "parameters", "gradients", "optimizer_state", "activations", "temporary", "total",
        "offloaded")}
    return TrainingRun(step=st, placement=placed, feasible=feasible, reason=reasons,
                       metrics=metrics, setup=chosen, memory=memory)


def _subset(db: DesignBatch, d: np.ndarray, kept: dict[bytes, DesignBatch]) -> DesignBatch:
    """The designs `d` of `db` (all of it, or a subset taken once per call: `kept`)."""
    if d.size == db.n:
        return db
    key = d.tobytes()
    if key not in kept:
        kept[key] = db.take(d)
    return kept[key]


def _fast_levels(db: DesignBatch) -> list[int]:
    """Indices of the levels up to the first DRAM (or host) level: where a step's working
    data lives (the resident SRAM of an SRAM-only chip, else the first DRAM tier)."""
    kinds = db.level_kinds
    dram = [i for i, k in enumerate(kinds) if k in ("dram", "host") and db.resident[i]]
    last = dram[0] if dram else (int(np.flatnonzero(db.resident)[-1])
                                 if db.resident.any() else len(kinds) - 1)
    return list(range(last + 1))


def _assemble(parts: list[tuple[TrainingRun, np.ndarray, np.ndarray]], n: int
              ) -> TrainingRun:
    """The run of each of n designs from the runs of their chosen setups: `parts` lists
    (run, the designs it timed, the rows of it chosen), every design chosen once."""
    parts = [p for p in parts if p[2].size]
    if len(parts) == 1 and parts[0][1].size == n:
        return parts[0][0]
    designs = np.concatenate([d[rows] for _, d, rows in parts])

    def pick(values: list[Any]) -> np.ndarray:
        """[n, ...] from one array per part (in the order of `parts`): each design's row
        from the part that timed it."""
        arrays = [np.asarray(v) for v in values]
        out = np.empty((n, *arrays[0].shape[1:]), dtype=np.result_type(*arrays))
        for v, (_, d, rows) in zip(arrays, parts, strict=True):
            out[d[rows]] = v[rows]
        return out

    rs = [r for r, _, _ in parts]
    s0 = rs[0].step
    fields: list[str] = ["count", "flops", "traffic", "compute", "time", "bound", "total",
                         "missing_rate", "no_link"]
    step_fields: dict[str, Any] = {f: pick([getattr(r.step, f) for r in rs]) for f in fields}
    sent = [r.step.link_bytes for r in rs]  # [J] per setup (its collectives' sizes), or [N, J]
    if any(np.ndim(x) == 2 or not np.array_equal(x, sent[0]) for x in sent):
        step_fields["link_bytes"] = pick([np.broadcast_to(x, (r.feasible.size, np.shape(x)[-1]))
                                          for x, r in zip(sent, rs, strict=True)])
    placed: dict[str, Any] = {f: pick([getattr(r.placement, f) for r in rs])
                              for f in ("fraction", "used", "short")}
    reason = Reasons.concatenate([r.reason.take(rows) for r, _, rows in parts]) \
        .take(np.argsort(designs, kind="stable"))
    return TrainingRun(
        step=dataclasses.replace(s0, **step_fields),
        placement=dataclasses.replace(rs[0].placement, **placed),
        feasible=pick([r.feasible for r in rs]), reason=reason,
        metrics={k: pick([r.metrics[k] for r in rs]) for k in rs[0].metrics},
        setup={k: pick([r.setup[k] for r in rs]) for k in rs[0].setup},
        memory={k: pick([r.memory[k] for r in rs]) for k in rs[0].memory})


PLANNERS["transformer"] = run
