"""What the training planner works out from the workload, scenario and execution alone, not
from the designs: the candidate setups and their memory plan (one array pass over them), and
per setup the lowered operator table, its FLOP counts and the pass's plan stage (the operators
one chip runs and the step's collectives). A call with the same inputs finds
them here instead of lowering again (a one-design call spent most of its time on this).

Entries are keyed by the inputs' whole content (the specs' JSON, the execution's fields), so
a spec changed between calls is a new entry; they hold deep copies of the specs, and their
arrays are read-only, so no caller can change what a later call reads. At most MAX_ENTRIES
(workload, scenario, execution) entries are kept, the least recently used dropped. No I/O.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from dse import phases
from dse.model.execution import Execution
from dse.model.kept import Kept, frozen, key_of
from dse.model.passes import Plan, plan_pass
from dse.model.training_memory import TrainingMemory, plan_training_memory
from dse.model.training_plugins import training_collectives
from dse.model.training_setups import Choice, choices, effective, plan_of
from dse.spec.workload import Scenario, Training, TransformerSpec
from dse.workloads import lower
from dse.workloads.common import attention_pairs
from dse.workloads.optable import MATRIX_KINDS, OpTable

# (workload, scenario, execution) entries kept: a study evaluates a few workloads, each at
# one scenario and execution, in many calls; a sweep of executions touches more.
MAX_ENTRIES = 64


def model_flops(table: OpTable, wl: TransformerSpec, seq: float) -> float:
    """FLOPs of one training step as published MFU figures count them (the numerator of
    MFU): three times (forward, input gradients, weight gradients) the forward pass's matrix
    multiplies, with attention over every (query, key) pair of each sequence -- a decoder's
    causal mask is not subtracted -- and nothing for recomputation or elementwise work.
    This is Megatron-LM's count (Narayanan et al., SC21, Sec. 5.1: 96 B s l h^2 (1 + s/6h +
    V/16lh) with recomputation, whose s/6h term is the whole s x s score matrix; model FLOPs
    drop the recomputed forward, 72 B s l h^2 (1 + s/6h + V/12lh), Korthikanti et al. 2022,
    App. A) and llm-foundry's (scripts/train/benchmarking/README.md: attn_flops_per_seq =
    n_layers * 2 * 2 * d_model * seq_len^2). What the chips execute (a fused causal kernel
    skips the masked half) is `hardware_flop_per_s_per_chip`."""
    matrix = (table.stage == "forward") & np.isin(table.kind, MATRIX_KINDS)
    attention = np.isin(table.kind, ("attention_score", "attention_value"))
    causal = wl.architecture == "decoder"
    full = seq * seq / attention_pairs(seq, seq, causal)
    flops = table.flops * table.count * np.where(attention, full, 1.0)
    return 3.0 * float(np.sum(flops * matrix))


@dataclass(frozen=True)
class Setup:
    """One candidate setup as it runs: the execution and scenario with its fields set, its
    operator table, its memory (0-d arrays), and the step's model FLOPs (`model_flops`) and
    executed FLOPs (the optimizer's excluded), per data-parallel replica."""

    choice: Choice
    execution: Execution
    scenario: Scenario
    table: OpTable
    memory: TrainingMemory
    counted: float
    done: float
    plan: Plan
    """The pass's `plan` stage, the training collectives included (dse.model.passes)."""
    counts: np.ndarray | None
    """[J] repeats of the step's operators and collectives, the same for every design (None
    where they differ by design)."""


@dataclass
class Planned:
    """The candidate setups of one (workload, scenario, execution), cheapest first, their
    memory plan ([S] arrays), and each setup's `Setup`, made when first asked for."""

    wl: TransformerSpec
    sc: Scenario
    ex: Execution
    choices: list[Choice]
    memory: TrainingMemory
    setups: dict[int, Setup] = field(default_factory=dict)

    def setup(self, i: int) -> Setup:
        """Candidate i as it runs (lowered once per entry)."""
        if i not in self.setups:
            self.setups[i] = _setup(self, i)
        return self.setups[i]


_KEPT: Kept[Planned] = Kept()
_ENTRIES = _KEPT.entries


def planned(wl: TransformerSpec, sc: Scenario, ex: Execution) -> Planned:
    """The entry of (wl, sc, ex), made on first use; `ex` with the scenario's training block
    applied (Execution.with_training)."""
    key = key_of(wl, sc, ex)

    def make() -> Planned:
        w, s = wl.model_copy(deep=True), sc.model_copy(deep=True)
        cands = choices(ex, int(s.batch), w.layers)
        return Planned(wl=w, sc=s, ex=ex, choices=cands,
                       memory=frozen(plan_training_memory(w, plan_of(s, ex, cands))))

    return _KEPT.get(key, make, MAX_ENTRIES)


def clear() -> None:
    """Forget every entry."""
    _KEPT.clear()


def _setup(p: Planned, i: int) -> Setup:
    """Candidate i of `p` lowered, with its row of the memory plan."""
    c, sc, ex = p.choices[i], p.sc, p.ex
    t = sc.training or Training()
    run_as = dataclasses.replace(ex, **effective(c, ex).fields())  # the execution as it runs
    # the lowering reads the strategy from the scenario's training block: the execution's
    sc_c = sc.model_copy(update={"training": t.model_copy(update=run_as.training_fields())})
    table = frozen(lower(p.wl, sc_c, chips=ex.dp))
    memory = TrainingMemory(**{f.name: getattr(p.memory, f.name)[i, ...]
                               for f in dataclasses.fields(TrainingMemory)})
    done = float(np.sum(table.flops * table.count * (table.stage != "optimizer")))
    m = float(memory.microbatches)
    plan = plan_pass(table, ex, in_sequence=phases.get(sc.phase).in_sequence, owned=False,
                     distinct=True,
                     collectives=lambda coll: training_collectives(coll, p.wl, sc_c, run_as, m))
    one = plan.ops.count.ndim == 1 and plan.coll.count.ndim == 1
    counts = np.concatenate([plan.ops.count, plan.coll.count]).astype(float) if one else None
    return Setup(choice=c, execution=run_as, scenario=sc_c, table=table, memory=memory,
                 counted=model_flops(table, p.wl, float(sc.seq_in)), done=done,
                 plan=frozen(plan), counts=frozen(counts))
