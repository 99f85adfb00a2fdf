"""The training setups the planner tries: micro-batches, pipeline schedules, ZeRO stages,
recomputation and sequence parallelism, each a `Choice`, cheapest first, and the memory
planner's plan of them (dse.model.training_memory). A setup the execution states is the only
one of its kind; what it leaves open is enumerated. No I/O.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.model.divisors import divisors
from dse.model.execution import Execution
from dse.model.training_memory import TrainingPlan
from dse.spec.workload import Scenario, Training
from dse.workloads.training import TRAINING_PRECISIONS

# Micro-batch sizes tried when the scenario gives none: every divisor of a replica's share
# of the global batch up to this many sequences (frameworks take any divisor: llm-foundry
# ran MPT-7B on 8 H100s at 6 sequences per micro-batch, 48 in the step). Larger ones only
# add activation memory: at 2,048 tokens, 256 sequences are 524,288 rows per GEMM.
MAX_MICRO_BATCH = 256
# Model chunks per pipeline rank the planner tries at most: interleaving divides the bubble
# by v and multiplies the stage-to-stage sends by v, so past a few dozen chunks it only adds
# sends (Megatron-LM runs use 2-8; Narayanan et al., SC21, Fig. 12-13 go to 4 and 8 layers
# per chunk). It bounds the setups timed for a model of very many layers (docs: guide/commands.md,
# Input limits).
MAX_VIRTUAL_STAGES = 64


def micro_batches(per_replica: int) -> list[int]:
    """The micro-batch sizes a replica of `per_replica` sequences may run: the divisors of
    it up to MAX_MICRO_BATCH (1 at least), smallest first."""
    return [b for b in range(1, min(per_replica, MAX_MICRO_BATCH) + 1)
            if per_replica % b == 0] or [1]


RECOMPUTE = ("none", "selective", "full")  # cheapest first
ZERO_ORDER = (1, 2, 0, 3)  # ZeRO 1 and 2 cost no more bytes than 0 and update 1/dp of it


def schedule_of(virtual_stages: int) -> str:
    """The pipeline schedule that runs `virtual_stages` model chunks per rank."""
    return "interleaved" if virtual_stages > 1 else "1f1b"


def schedule_chosen(ex: Execution) -> bool:
    """Whether the planner picks the number of virtual stages (`schedules`): with pipeline
    parallelism, unless the execution names 1F1B or the virtual stages."""
    return ex.pp > 1 and ex.schedule != "1f1b" and ex.virtual_stages is None


@dataclass(frozen=True)
class Choice:
    """One training setup: the fields a scenario may leave open."""

    micro_batch: int
    zero: int
    recompute: str
    sequence_parallel: bool
    virtual_stages: int = 1
    """Model chunks per pipeline rank: 1 runs 1F1B, more the interleaved schedule."""

    def fields(self) -> dict[str, Any]:
        """The `training:` fields this setup sets (the schedule follows virtual_stages)."""
        return {**dataclasses.asdict(self),
                "schedule": schedule_of(self.virtual_stages)}


def schedules(ex: Execution, layers: int, microbatches: int) -> list[int]:
    """Virtual stages (model chunks per pipeline rank) a setup may run: the execution's when
    it gives them (1 for 1F1B); else, with pipeline parallelism, 1F1B and every interleaved
    split of the longest stage's layers into whole-layer chunks. The planner interleaves
    only when the micro-batches are a multiple of the pipeline depth, as Megatron-LM's
    schedule requires (Narayanan et al., SC21, Sec. 2.2.2); interleaving divides the
    bubble by v and multiplies the stage-to-stage sends by v. At most MAX_VIRTUAL_STAGES
    chunks per rank; the divisors come from the stage's factorization (a stage of 2^52
    layers is as quick as one of 8)."""
    if ex.schedule == "1f1b" or ex.pp == 1:
        return [1]
    if ex.virtual_stages is not None:
        return [ex.virtual_stages]
    stage = math.ceil(layers / ex.pp)
    split = [v for v in divisors(stage) if 1 < v <= MAX_VIRTUAL_STAGES]
    if ex.schedule == "interleaved":  # asked for: every split (1F1B if a stage is one layer)
        return split or [1]
    return [1] + (split if microbatches % ex.pp == 0 else [])


def choices(ex: Execution, global_batch: int, layers: int) -> list[Choice]:
    """Every setup the execution allows, cheapest first (see the module docstring)."""
    per_replica = global_batch // ex.replicas
    mbs = [ex.micro_batch] if ex.micro_batch else micro_batches(per_replica)
    zeros = [ex.zero] if ex.zero is not None else (list(ZERO_ORDER) if ex.dp > 1 else [0])
    recs = [ex.recompute] if ex.recompute else list(RECOMPUTE)
    sps = [ex.sequence_parallel] if ex.sequence_parallel is not None else \
        ([True, False] if ex.tp > 1 else [False])
    return [Choice(b, z, r, sp, v) for b in mbs
            for v in schedules(ex, layers, max(per_replica // b, 1))
            for r, z, sp in itertools.product(recs, zeros, sps)]


def effective(c: Choice, ex: Execution) -> Choice:
    """The setup as it runs: with fused (flash) attention the score matrix is never stored
    and the backward recomputes it (Dao, FlashAttention-2, 2023, Sec. 3.1.2), so no
    recomputation costs and saves what `selective` does (Korthikanti et al.'s selective
    recomputation is the attention core)."""
    if c.recompute == "none" and ex.fusion == "flash":
        return dataclasses.replace(c, recompute="selective")
    return c


def plan_of(sc: Scenario, ex: Execution, c: Choice | list[Choice]) -> TrainingPlan:
    """The memory planner's plan of setup(s) `c` (a list: arrays over them), as they run
    (`effective`)."""
    c = [effective(x, ex) for x in c] if isinstance(c, list) else effective(c, ex)
    cs = c if isinstance(c, list) else [c]
    t = sc.training or Training()
    off = ex.offload
    arr = (lambda f: np.array([getattr(x, f) for x in cs])) if isinstance(c, list) else \
        (lambda f: getattr(c, f))
    return TrainingPlan(
        seq=sc.seq_in, micro_batch=arr("micro_batch"), global_batch=sc.batch,
        precision=TRAINING_PRECISIONS[sc.precision], optimizer=t.optimizer,
        optimizer_state_multiplier=t.optimizer_state, tp=ex.tp, pp=ex.pp,
        dp=ex.replicas, cp=ex.cp, ep=ex.ep,
        sequence_parallel=arr("sequence_parallel"), zero=arr("zero"),
        recompute=arr("recompute"),
        schedule=np.vectorize(schedule_of, otypes=[object])(arr("virtual_stages")),
        virtual_stages=arr("virtual_stages"),
        compression=ex.compression.factor if ex.compression else 1.0,
        offload_optimizer=float(off.optimizer) if off else 0.0,
        offload_params=float(off.parameters) if off else 0.0, dropout=t.dropout)
