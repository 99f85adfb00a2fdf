"""The parallel strategies of training that fit a chip, ranked by predicted step time
(`dse memory --suggest`). Pure: no I/O; documents are plain dicts.

Suggestions (`suggest`):
  enumerate  every (tp, pp, cp, dp) with tp x pp x cp x dp = chips, where tp divides the attention
             heads and is at most TP_MAX and the chip's chips_per_node (tensor parallelism's
             per-layer all-reduces stay inside one scale-up node), pp divides the layers (and
             the layers divide into pp x virtual_stages chunks with the interleaved
             schedule), cp (context parallelism: ranks that share each sequence) divides
             the sequence and is at most CP_MAX, ep (expert parallelism, a mixture of
             experts) divides the ranks and the experts, and dp divides the global batch; with each
             micro-batch that
             divides a replica's sequences (training_setups.micro_batches), ZeRO 0-3
             (0 alone without data parallelism), recomputation none / selective / full,
             sequence parallelism on and off (with tp > 1), and the optimizer state kept
             on the chip or offloaded to each slower level (`tiers`);
  filter     the memory planner scores all of them in one array pass; one fits when its bytes
             per chip (on the chip and offloaded) fit the chip's resident capacity, what every
             micro-batch touches (the parameters the chip keeps, gradients, activations,
             temporaries) fits the fast tier (the step model keeps its training state
             there), and the offloaded part fits the level it goes to;
  shortlist  per (tp, pp, offload) and micro-batch, the first in the step model's order of
             preference (least recomputation, then ZeRO 1, 2, 0, 3, sequence parallelism
             first) that fits the fast tier, and the first that fits each wider set of tiers:
             the setups `dse eval` would time for it; at most MAX_EVALUATED, dropping the
             smallest micro-batches of every group first;
  rank       each one shortlisted is evaluated with every field fixed (explicit chips, tp, pp
             and a complete training block); the feasible ones are ranked by step time.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from dse.errors import DseError
from dse.model.batch import DesignBatch
from dse.model.divisors import divisors
from dse.model.execution import Execution
from dse.model.memory_plan import finite_or_none, run, slower_levels, tiers
from dse.model.results import Evaluation
from dse.model.training_memory import TrainingMemory, TrainingPlan, plan_training_memory
from dse.model.training_setups import RECOMPUTE, ZERO_ORDER, Choice, micro_batches, plan_of
from dse.spec.workload import Offload, Scenario, Training, TransformerSpec, WorkloadSpec

# Tensor parallelism within one scale-up node: 8 GPUs per NVLink node (DGX/HGX H100, A100);
# Narayanan et al., SC21, Sec. 3.3 (Takeaway #1): tensor-model parallelism up to the GPUs of
# a node, pipeline parallelism across nodes.
TP_MAX = 8
# Strategies evaluated by --suggest at most (~25 ms each on one core: about 4 s).
MAX_EVALUATED = 160
# Pipeline depths tried per tensor-parallel degree at most: where more divide both the chips
# and the layers (a model of 10^12 layers on as many chips: 6,720), MAX_DEPTHS of them spread
# over the range (docs: guide/commands.md, Input limits).
MAX_DEPTHS = 24
# Context-parallel degrees tried at most: Llama 3's 128K-token stage trained with cp 16
# (Dubey et al., "The Llama 3 Herd of Models", arXiv 2407.21783, Table 4).
CP_MAX = 16


@dataclass(frozen=True)
class Strategy:
    """One complete training strategy on `chips` = tp x pp x cp x dp chips (dp: the
    data-parallel replicas, each sequence shared by cp ranks)."""

    tp: int
    pp: int
    dp: int
    micro_batch: int
    zero: int
    recompute: str
    sequence_parallel: bool
    offload: str | None
    """The slower level holding the optimizer state, or None (kept by the chip)."""
    cp: int = 1
    ep: int = 1

    def choice(self) -> Choice:
        return Choice(self.micro_batch, self.zero, self.recompute, self.sequence_parallel)


def _spread(values: tuple[int, ...], k: int) -> tuple[int, ...]:
    """At most k of the ascending `values`, evenly spaced in rank (the first and last kept):
    divisors are about evenly spaced on a log scale, so these cover every order of
    magnitude."""
    if len(values) <= k:
        return values
    return tuple(values[i] for i in sorted({round(j * (len(values) - 1) / (k - 1))
                                           for j in range(k)}))


def strategies(wl: TransformerSpec, sc: Scenario, db: DesignBatch, chips: int
               ) -> list[Strategy]:
    """Every strategy of the module docstring's enumeration, grouped by (tp, pp, offload)
    and, within a group, in the step model's order of preference."""
    t = sc.training or Training()
    node = int(np.min(db.chips_per_node)) if np.size(db.chips_per_node) else TP_MAX
    tp_max = min(TP_MAX, max(node, 1))
    batch = int(sc.batch)
    offloads: list[str | None] = [None, *slower_levels(db)]
    out = []
    for tp in (d for d in range(1, tp_max + 1) if chips % d == 0):
        if wl.heads % tp:
            continue
        # pp divides both the chips left and the layers: the divisors of their gcd, from
        # its factorization (2^53 chips take milliseconds)
        for pp in _spread(divisors(math.gcd(chips // tp, wl.layers)), MAX_DEPTHS):
            if wl.layers % (pp * (t.virtual_stages or 1)):
                continue
            ranks = chips // (tp * pp)
            for cp in (c for c in divisors(ranks) if c <= CP_MAX and sc.seq_in % c == 0):
                dp = ranks // cp
                if batch % dp:
                    continue
                mbs = micro_batches(batch // dp)
                zeros = list(ZERO_ORDER) if ranks > 1 else [0]
                sps = [True, False] if tp > 1 else [False]
                eps = divisors(math.gcd(ranks, wl.moe.experts)) if wl.moe else (1,)
                for off, ep in itertools.product(offloads, eps):
                    out += [Strategy(tp, pp, dp, b, z, r, sp, off, cp, ep) for b, r, z, sp in
                            itertools.product(mbs, RECOMPUTE, zeros, sps)]
    return out


def _scenario_of(sc: Scenario, s: Strategy, offload_params: bool) -> Scenario:
    """`sc` with strategy `s`'s training fields (the others as the scenario has them)."""
    t = sc.training or Training()
    off = None if s.offload is None else Offload(
        to=s.offload, optimizer=True, parameters=bool(offload_params))
    block = t.model_copy(update={"micro_batch": s.micro_batch, "zero": s.zero,
                                 "recompute": s.recompute, "context_parallel": s.cp,
                                 "expert_parallel": s.ep,
                                 "sequence_parallel": s.sequence_parallel, "offload": off})
    return sc.model_copy(update={"training": block})


def plan_all(wl: TransformerSpec, sc: Scenario, chips: int, cands: list[Strategy],
             offload_params: bool = False) -> TrainingMemory:
    """The memory planner over every strategy at once: the plan of each (tp, pp, offload)
    group (dse.model.training_setups.plan_of, as the step model plans it) joined into one."""
    plans, sizes = [], []
    for _, grouped in itertools.groupby(cands, key=lambda s: (s.tp, s.pp, s.cp, s.ep,
                                                             s.offload)):
        group = list(grouped)
        g = group[0]
        sc_g = _scenario_of(sc, g, offload_params)
        ex = Execution(chips=chips, tp=g.tp, pp=g.pp).with_training(sc_g.training)
        plans.append(plan_of(sc_g, ex, [s.choice() for s in group]))
        sizes.append(len(group))
    joined: dict[str, Any] = {}
    for f in fields(TrainingPlan):
        values = [getattr(p, f.name) for p in plans]
        if f.name == "activation_count" or all(v is None for v in values):
            joined[f.name] = values[0]
        else:
            joined[f.name] = np.concatenate([np.broadcast_to(np.asarray(v), (n,))
                                             for v, n in zip(values, sizes, strict=True)])
    return plan_training_memory(wl, TrainingPlan(**joined))


def fitting(db: DesignBatch, cands: list[Strategy], mem: TrainingMemory) -> np.ndarray:
    """[S, R] bool: the strategy fits the first r + 1 of the chip's R tiers (the fast tier,
    then each slower level added): its bytes per chip (on the chip and offloaded) fit their
    resident capacity, what every micro-batch touches (gradients, activations, temporaries,
    after the parameters the chip keeps, which placement serves first) fits the fast tier,
    and the offloaded part fits the level it goes to. Column -1: it fits at all."""
    need = mem.total + mem.offloaded
    fast, slow = tiers(db)
    cap = db.resident_capacity[0]
    rooms = np.cumsum([cap[fast].sum(), *cap[slow]])  # [R]
    held = mem.parameters + mem.gradients + mem.activations + mem.temporary
    ok = (need[:, None] <= rooms[None, :]) & (held <= rooms[0])[:, None]
    off = np.array([s.offload or "" for s in cands], dtype=object)
    for r, k in enumerate(slow, start=1):  # offloaded to level k: only the tiers with it
        to_k = off == db.level_names[k]
        ok[to_k, :r] = False
        ok[to_k] &= (mem.offloaded[to_k] <= cap[k])[:, None]
    return ok


def shortlist(cands: list[Strategy], fits: np.ndarray, limit: int = MAX_EVALUATED) -> list[int]:
    """Indices to evaluate: per (tp, pp, offload) group and micro-batch, the first that fits
    the fast tier and the first that fits each wider set of tiers (`fitting`'s columns;
    candidates are in the step model's order of preference, which picks the same); at most
    `limit`, taking the largest micro-batch of every group first, then the next largest."""
    fits = fits.reshape(len(cands), -1)
    groups: dict[tuple[Any, ...], dict[int, list[int]]] = {}
    for r in range(fits.shape[1]):
        firsts: dict[tuple[Any, ...], int] = {}
        for i in np.flatnonzero(fits[:, r]).tolist():
            s = cands[i]
            firsts.setdefault((s.tp, s.pp, s.cp, s.ep, s.offload, s.micro_batch), int(i))
        for (tp, pp, cp, ep, off, b), i in firsts.items():
            picked = groups.setdefault((tp, pp, cp, ep, off), {}).setdefault(b, [])
            if i not in picked:
                picked.append(i)
    ranked = [[i for b in sorted(by_mb, reverse=True) for i in by_mb[b]]
              for by_mb in groups.values()]
    out: list[int] = []
    for k in range(max((len(r) for r in ranked), default=0)):
        out += [r[k] for r in ranked if k < len(r)]
    return out[:limit]


def _row(s: Strategy, ev: Evaluation, slow: list[int]) -> dict[str, Any]:
    tr = ev.training or {}
    on_chip, off = float(tr["memory_total_bytes"][0]), float(tr["memory_offloaded_bytes"][0])
    beyond = {ev.level_names[k]: float(ev.memory_bytes[0, k]) for k in slow
              if ev.memory_bytes[0, k] > 0}
    return {"tp": s.tp, "pp": s.pp, "cp": s.cp, "ep": s.ep, "dp": s.dp,
            "micro_batch": s.micro_batch,
            "microbatches": float(tr["microbatches"][0]), "zero": s.zero,
            "recompute": s.recompute, "sequence_parallel": s.sequence_parallel,
            "virtual_stages": int(tr["virtual_stages"][0]), "offload": s.offload,
            "memory_per_chip_bytes": on_chip + off, "on_chip_bytes": on_chip,
            "offloaded_bytes": off, "beyond_fast_bytes": beyond,
            "step_time_s": finite_or_none(ev.metrics["step_time_s"][0]),
            "tokens_per_s": finite_or_none(ev.metrics["tokens_per_s"][0]),
            "mfu": finite_or_none(ev.metrics["mfu"][0])}


def suggest(db: DesignBatch, wl: WorkloadSpec, name: str, sc: Scenario, chips: int,
            tech: Any = None, offload_params: bool = False) -> dict[str, Any]:
    """{"suggestions": the strategies that fit, ranked by step time (dicts with rank), and
    "summary": how many were enumerated, fit the planner, were evaluated and are feasible,
    the rule, and the strategy needing the least memory with its bytes when none fits}."""
    if not isinstance(sc.batch, int):
        raise DseError(f"training takes a whole global batch, found {sc.batch}",
                       field="batch", value=sc.batch, rule="a whole global batch")
    if not isinstance(wl, TransformerSpec):  # dse memory refuses --suggest for other kinds
        raise DseError(f"is for Transformers; {wl.name} is a {wl.kind}", field="suggest",
                       domain="training", inline=True)
    cands = strategies(wl, sc, db, chips)
    summary: dict[str, Any] = {"enumerated": len(cands), "fit": 0, "evaluated": 0,
                               "feasible": 0, "failed": [], "least_memory": None,
                               "max_evaluated": MAX_EVALUATED, "tp_max": TP_MAX,
                               "cp_max": CP_MAX}
    if not cands:
        return {"suggestions": [], "summary": summary}
    mem = plan_all(wl, sc, chips, cands, offload_params)
    fits = fitting(db, cands, mem)
    need = mem.total + mem.offloaded
    least = int(np.argmin(need))
    summary["least_memory"] = {**_fields(cands[least]), "bytes_per_chip": float(need[least]),
                               "room_bytes": float(db.resident_capacity[0].sum())}
    summary["fit"] = int(fits[:, -1].sum())
    picked = shortlist(cands, fits)
    slow = tiers(db)[1]
    rows = []
    for i in picked:
        s = cands[i]
        try:
            ev = run(db, wl, name, _scenario_of(sc, s, offload_params), chips, s.tp, s.pp,
                     tech)
        except DseError as e:  # a strategy the step model cannot time: say so, go on
            summary["failed"].append({**_fields(s), "error": str(e)})
            continue
        summary["evaluated"] += 1
        if ev.feasible[0] and ev.training is not None:
            rows.append(_row(s, ev, slow))
    rows.sort(key=lambda r: (r["step_time_s"] if r["step_time_s"] is not None else np.inf,
                             r["memory_per_chip_bytes"]))
    summary["feasible"] = len(rows)
    return {"suggestions": [{"rank": k + 1, **r} for k, r in enumerate(rows)],
            "summary": summary}


def _fields(s: Strategy) -> dict[str, Any]:
    return {f.name: getattr(s, f.name) for f in fields(Strategy)}
