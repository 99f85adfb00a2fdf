"""Training memory of a model on a chip (`dse memory`): the bytes per chip of one setup and
their placement over the memory levels, and the parallel strategies that fit, ranked by
predicted step time. Pure: no I/O, no printing; documents are plain dicts.

Breakdown: one `evaluate` of the scenario with its training block as given; fields left
open (micro-batch, ZeRO, recomputation, sequence parallelism) are the step model's choice
(dse.model.training: the fastest setup that fits). The memory planner's parts
(dse.model.training_memory) are the busiest pipeline stage's chip; the placement is the
evaluation's (dse.model.placement: fastest levels first, spilling to slower tiers).

Suggestions: dse.model.memory_suggest.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import ValidationError

from dse import phases
from dse.errors import DseError
from dse.model.batch import DesignBatch
from dse.model.evaluate import evaluate
from dse.model.execution import Execution
from dse.model.results import Evaluation
from dse.model.training_setups import (
    schedule_chosen,
    schedule_of,
)
from dse.spec.messages import describe
from dse.spec.workload import Scenario, Training, WorkloadSpec

PARTS = ("parameters", "gradients", "optimizer_state", "activations", "temporary")
# The default training scenario's global batch (the training phase's default, dse.phases);
# dse memory raises it to one sequence per chip so every data-parallel degree can be planned.
DEFAULT_BATCH = 8
# A setup's fields the step model chooses when the scenario leaves them open.
OPEN_FIELDS = ("micro_batch", "zero", "recompute", "sequence_parallel")
# Training block fields `dse memory` sets (each by an option of its name: --micro-batch);
# an error about one carries it as its field (domain training), for the route to word.
OPTIONS = ("micro_batch", "zero", "recompute", "sequence_parallel", "optimizer", "schedule",
           "virtual_stages", "offload")


def training_scenario(wl: WorkloadSpec, scenario: str | None, *, phase: str | None = None,
                      batch: int | None = None, seq_in: int | None = None,
                      precision: str | None = None, chips: int = 1
                      ) -> tuple[str, Scenario, list[str]]:
    """(name, scenario, notes): the training scenario `dse memory` plans. Without --scenario
    and --phase, the file's first training scenario, else the default one; a model without
    a training scenario trains DEFAULT_BATCH sequences, or one per chip when more."""
    from dse.workloads import kind_of, resolve_scenario

    if "train" not in kind_of(wl).works:
        raise DseError(f"{wl.name}: dse memory plans the training memory of Transformers "
                       f"(and places a recommender's); not a {wl.kind} workload")
    if scenario is None and phase is None:
        phase = "training"
    name, sc = resolve_scenario(wl, scenario, phase=phase, batch=batch, seq_in=seq_in,
                                precision=precision)
    if not phases.get(sc.phase).trains:
        raise DseError(f"dse memory plans training, found {sc.phase} (scenario "
                       f"'{name}'); add --phase training to train with its batch and "
                       "sequence length, or dse eval for the memory of other phases",
                       field="phase" if phase is not None else "scenario",
                       value=sc.phase, rule="phase training")
    notes = []
    if name == "training (default)" and batch is None and wl.kind == "transformer":
        sc = sc.model_copy(update={"batch": max(DEFAULT_BATCH, chips)})
        notes.append(f"{wl.name} has no training scenario: dse's default (global batch "
                     f"{DEFAULT_BATCH}, at least one sequence per chip: {sc.batch}; "
                     f"sequences of {sc.seq_in} tokens); --batch and --seq-in change it")
    return name, sc, notes


def tiers(db: DesignBatch) -> tuple[list[int], list[int]]:
    """(fast, slow): indices of the levels that hold data across steps, up to the first
    off-chip (dram or host) level, and after it (an LPDDR, CXL or host tier: where the
    optimizer state may be offloaded). Without an off-chip level every one is fast."""
    resident = [k for k in range(db.levels) if db.resident[k]]
    off_chip = [k for k in resident if db.level_kinds[k] in ("dram", "host")]
    if not off_chip:
        return resident, []
    return [k for k in resident if k <= off_chip[0]], [k for k in resident if k > off_chip[0]]


def slower_levels(db: DesignBatch) -> list[str]:
    """Names of the levels the optimizer state may be offloaded to (`tiers`)."""
    return [db.level_names[k] for k in tiers(db)[1]]


def with_training(sc: Scenario, db: DesignBatch, given: dict[str, Any],
                  offload_params: bool = False) -> Scenario:
    """`sc` with the training fields of `given` (None: left as the scenario has it) replacing
    its block's; `offload` names a slower level that takes the optimizer state (and the
    parameters with `offload_params`). Bad values raise DseError naming the option."""
    given = {k: v for k, v in given.items() if v is not None}
    t = sc.training or Training()
    level = given.get("offload")
    if level is not None:
        slow = slower_levels(db)
        if level not in slow:
            expected = (f"expected one of: {', '.join(slow)}" if slow else
                        f"it has no level slower than {db.level_names[tiers(db)[0][-1]]}"
                        if tiers(db)[0] else "it has no level that holds data")
            raise DseError(f"{db.spec.name} has no slower memory level '{level}' to offload "
                           f"to; {expected}", field="offload", domain="training", value=level)
        given["offload"] = {"to": level, "optimizer": True,
                            "parameters": bool(offload_params)}
    elif offload_params:
        if t.offload is None:
            raise DseError("give --offload LEVEL, the level that holds the parameters",
                           field="offload_params", domain="training")
        given["offload"] = {**t.offload.model_dump(), "parameters": True}
    if not given:
        return sc
    fields_ = {**t.model_dump(exclude_unset=True), **given}
    try:
        block = Training.model_validate(fields_)
    except ValidationError as e:
        err = e.errors(include_url=False)[0]
        msg = describe(err, Training)
        # a check of several fields (no location): the field its message names first
        named = sorted((msg.find(k), k) for k in OPTIONS if k in msg)
        field = str(err["loc"][0]) if err["loc"] else (named[0][1] if named else "")
        if field in OPTIONS:
            raise DseError(msg, field=field, domain="training",
                           value=fields_.get(field)) from None
        raise DseError(f"training: {msg}") from None
    return sc.model_copy(update={"training": block})


def run(db: DesignBatch, wl: WorkloadSpec, name: str, sc: Scenario, chips: int, tp: int,
        pp: int, tech: Any = None) -> Evaluation:
    """`evaluate` of scenario `sc` (which need not be in the file) on the one design `db`."""
    one = wl.model_copy(update={"scenarios": {name: sc}})
    return evaluate(db, one, name, chips=chips, tp=tp, pp=pp, tech=tech)


def finite_or_none(value: Any) -> float | None:
    v = float(value)
    return v if np.isfinite(v) else None


def breakdown(ev: Evaluation, db: DesignBatch) -> dict[str, Any]:
    """The document of one evaluation (design 0): fits, bytes per chip by part, placement
    per level, what sits beyond the fast tier, the setup that ran and its step."""
    sc = ev.scenario
    t = sc.training or Training()
    ran = ev.execution or Execution(chips=ev.chips, tp=ev.tp, pp=ev.pp)
    levels = list(ev.level_names)
    placement = {lv: float(ev.memory_bytes[0, k]) for k, lv in enumerate(levels)}
    fast, slow = tiers(db)
    beyond = {levels[k]: placement[levels[k]] for k in slow if placement[levels[k]] > 0}
    fits = bool(ev.feasible[0])
    tr = ev.training
    if tr is None:  # a recommender: its footprint by level only
        per_chip: dict[str, float | None] = {p: None for p in PARTS}
        per_chip["total"] = sum(placement.values())
        offloaded = 0.0
        setup = None
    else:
        per_chip = {p: float(tr[f"memory_{p}_bytes"][0]) for p in (*PARTS, "total")}
        offloaded = float(tr["memory_offloaded_bytes"][0])
        setup = {"chips": ev.chips, "tp": ev.tp, "pp": ev.pp, "cp": ran.cp, "ep": ran.ep,
                 "dp": ran.replicas,
                 "micro_batch": int(tr["micro_batch"][0]),
                 "microbatches": float(tr["microbatches"][0]), "zero": int(tr["zero"][0]),
                 "recompute": str(tr["recompute"][0]),
                 "sequence_parallel": bool(tr["sequence_parallel"][0]),
                 "optimizer": t.optimizer,
                 "schedule": schedule_of(int(tr["virtual_stages"][0])),
                 "virtual_stages": int(tr["virtual_stages"][0]),
                 "offload": t.offload.model_dump() if t.offload else None,
                 "chosen": [f for f in OPEN_FIELDS if getattr(t, f) is None]
                 + (["schedule"] if schedule_chosen(ran) else [])}
    metric = {k: finite_or_none(ev.metrics[k][0]) if k in ev.metrics else None
              for k in ("step_time_s", "tokens_per_s", "samples_per_s", "mfu",
                        "model_flop_per_s_per_chip")}
    return {
        "hardware": ev.hardware, "workload": ev.workload,
        "scenario": {"name": ev.scenario_name, "phase": sc.phase, "global_batch": sc.batch,
                     "seq_in": sc.seq_in, "precision": sc.precision},
        "chips": ev.chips,
        "fits": fits,
        "fits_without_offload": fits and not beyond,
        "reason": str(ev.reason[0]) or None,
        "per_chip_bytes": per_chip,
        "offloaded_bytes": offloaded,
        "placement": placement,
        "capacity": {lv: float(db.capacity[0, k]) for k, lv in enumerate(levels)},
        "fast_levels": [levels[k] for k in fast],
        "beyond_fast_bytes": beyond,
        "setup": setup,
        **metric,
        "warnings": list(ev.warnings),
    }
