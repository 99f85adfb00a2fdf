"""evaluate(): hardware designs x workload scenario -> metrics, memory footprint and the
bound of every operator, for N designs in one pass of array arithmetic.

Phases and what they report (T: time of one step of one data-parallel replica):
- gemm: achieved_flop_per_s = FLOPs / T;
- prefill: ttft_s = T (the whole prompt of every sequence, and the first token);
- decode: T covers seq_out tokens of `batch` sequences over a KV cache growing from seq_in;
  decode_tokens_per_s = seq_out / T (one sequence), output_tokens_per_s = batch x that
  (a batch that does not divide among the replicas counts only its own sequences);
- serve: continuous batching in steady state: `batch` sequences in flight (or, with `max`,
  the most whose KV cache at the average context seq_in + (seq_out + 1) / 2 fits beside the
  weights, as a paged KV cache allows); each is prefilled once and decoded seq_out times:
  output_tokens_per_s = batch x seq_out / T (batch max: dp x the per-replica maximum);
- inference (encoders): samples_per_s = batch / T.
No I/O; a design that cannot run the scenario gets feasible = False and a reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dse.errors import DseError
from dse.model.area import PADDING, area
from dse.model.batch import DesignBatch, design_batch
from dse.model.parallel import FUSIONS, chip_ops, collective_times, collective_volume
from dse.model.performance import A, ChipOps, G, op_times
from dse.model.placement import PLACED, cached_level, place
from dse.model.power import StepEnergy, chip_power, step_energy
from dse.spec.hardware import HardwareSpec
from dse.spec.technology import TechSpec
from dse.spec.workload import Scenario, WorkloadSpec
from dse.workloads import execution_issues, lower, resolve_scenario

METRICS = ("latency_s", "ttft_s", "decode_tokens_per_s", "output_tokens_per_s",
           "samples_per_s", "achieved_flop_per_s", "tokens_per_s_per_chip")
# With a process node (evaluate(..., tech=...)): power per chip, energy per generated token
# (decode, serve) or per prompt token (prefill), per sample (inference), per step (all), and
# the modelled die area.
POWER_METRICS = ("power_w", "energy_per_token_j", "energy_per_sample_j", "energy_per_step_j",
                 "area_mm2")
_TIME_METRICS = ("latency_s", "ttft_s")
LATENCY_PHASES = ("gemm", "prefill", "decode")


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
    reason: np.ndarray  # [N] str ("" when feasible)
    sequences: np.ndarray  # [N] sequences per data-parallel replica
    metrics: dict[str, np.ndarray]  # name -> [N] (NaN: not applicable or infeasible)
    memory_bytes: np.ndarray  # [N, L] bytes per chip held in each level
    level_names: tuple[str, ...]
    ops_name: np.ndarray  # [J]
    ops_count: np.ndarray  # [N, J] repeats
    ops_flops: np.ndarray  # [N, J] FLOPs per instance per chip
    ops_bytes: np.ndarray  # [N, J, L] bytes per instance per chip at each level
    ops_time: np.ndarray  # [N, J] s per instance
    ops_bound: np.ndarray  # [N, J] str: compute, a level name, interconnect or overhead
    power_limited: np.ndarray | None = None  # [N] bool: slowed to fit the TDP (with tech)
    energy: StepEnergy | None = None  # per chip and step, unthrottled (with tech)
    warnings: tuple[str, ...] = ()  # legal but suspect inputs (lengths beyond the context)

    @property
    def n(self) -> int:
        return len(self.feasible)

    def to_frame(self):  # -> pandas.DataFrame (pandas imported lazily: the model core is numpy)
        """One row per design: overrides, feasibility, batch, metrics, memory per level."""
        import pandas as pd

        cols: dict[str, object] = {k: v for k, v in self.batch.overrides.items()}
        cols["feasible"] = self.feasible
        cols["reason"] = self.reason
        cols["sequences_per_replica"] = self.sequences
        for name, values in self.metrics.items():
            cols[name] = values
        for level, name in enumerate(self.level_names):
            cols[f"memory_{name}_bytes"] = self.memory_bytes[:, level]
        if self.power_limited is not None:
            cols["power_limited"] = self.power_limited
        return pd.DataFrame(cols)

    def op_records(self, i: int = 0) -> list[dict]:
        """Operators of design i: name, count, flops and bytes (totals over the count, per
        chip), time (total), share of the step, bound; sorted by time, longest first."""
        total = float(np.sum(self.ops_count[i] * self.ops_time[i]))
        out = []
        for j, name in enumerate(self.ops_name):
            cnt = float(self.ops_count[i, j])
            t = cnt * float(self.ops_time[i, j])
            out.append({
                "name": str(name), "count": cnt,
                "flops": cnt * float(self.ops_flops[i, j]),
                "bytes": {lv: cnt * float(self.ops_bytes[i, j, k])
                          for k, lv in enumerate(self.level_names)},
                "time_s": t, "share": t / total if total > 0 else 0.0,
                "bound": str(self.ops_bound[i, j]),
            })
        return sorted(out, key=lambda r: -r["time_s"])


def _reject(condition: bool, message: str) -> None:
    if condition:
        raise DseError(message)


def evaluate(hw: HardwareSpec | DesignBatch, wl: WorkloadSpec, scenario: str | None = None, *,
             phase: str | None = None, batch: int | str | None = None,
             seq_in: int | None = None, seq_out: int | None = None,
             precision: str | None = None, kv_precision: str | None = None,
             chips: int = 1, tp: int = 1, pp: int = 1,
             overrides: dict[str, object] | None = None,
             fusion: str = "flash", tech: TechSpec | None = None,
             reticle: bool = True) -> Evaluation:
    """Evaluate every design of `hw` (a spec with `overrides`, or a DesignBatch) on one
    scenario of `wl`. Scenario fields given here replace the named scenario's. With `tech`
    (the spec's process node), power, energy and area come too, and a design whose power
    exceeds its TDP is slowed to fit it (see dse.model.power). With `tech`, a design whose
    off-chip interfaces need more die edge than it has, or (with `reticle`) whose dies
    exceed the reticle, is infeasible; so is one whose static power alone exceeds its TDP."""
    db = hw if isinstance(hw, DesignBatch) else design_batch(hw, overrides)
    given = {"phase": phase, "batch": batch, "seq_in": seq_in, "seq_out": seq_out,
             "precision": precision, "kv_precision": kv_precision}
    given = {k: v for k, v in given.items() if v is not None}
    sc_name, sc = resolve_scenario(wl, scenario, **given)
    for name, v in (("chips", chips), ("tp", tp), ("pp", pp)):
        _reject(not isinstance(v, int) or v < 1, f"--{name}: expected a positive whole "
                f"number, found {v}")
    _reject(chips % (tp * pp) != 0, f"--chips {chips} is not a multiple of tp x pp = "
            f"{tp * pp}; data parallelism needs whole replicas")
    _reject(fusion not in FUSIONS, f"fusion: expected one of {', '.join(FUSIONS)}")
    _reject(sc.phase == "training", "phase training is not modelled yet (it needs the "
            "training memory planner); use gemm, prefill, decode, serve or inference")
    problems, warnings = execution_issues(wl, sc, tp, pp)
    _reject(bool(problems), "; ".join(problems))
    dp = chips // (tp * pp)
    in_sequence = sc.phase in LATENCY_PHASES
    n = db.n

    # Sequences per replica, per design.
    if sc.batch == "max":
        per_seq, fixed = _per_sequence_bytes(wl, sc, tp, pp, fusion)
        _reject(per_seq <= 0, f"{wl.name}: batch max needs per-sequence memory to size")
        free = db.resident_capacity.sum(axis=1) - fixed
        seqs = np.floor(np.maximum(free, 0.0) / per_seq)
    else:
        seqs = np.full(n, float(math.ceil(sc.batch / dp)))

    # Designs that run the same per-replica batch are evaluated together. A design where not
    # even one sequence fits runs at batch 1, where its placement fails and says why.
    none_fit = seqs < 1
    run_seqs = np.maximum(seqs, 1.0)
    out: dict[str, np.ndarray] = {}
    for b in np.unique(run_seqs):
        idx = np.flatnonzero(run_seqs == b)
        total = dp * b if sc.batch == "max" else float(sc.batch)
        res = _evaluate_group(_subset(db, idx), wl, sc.model_copy(update={"batch": int(b)}),
                              tp, pp, total, chips, fusion, in_sequence)
        if not out:
            out = {key: np.empty((n, *val.shape[1:]), dtype=val.dtype)
                   for key, val in res.items() if key not in _PER_OP}
            per_op = {key: res[key] for key in _PER_OP}
        for key, val in res.items():
            if key not in _PER_OP:
                out[key][idx] = val
    reason = out["reason"].astype(object)
    reason[none_fit] = "not even one sequence fits: " + reason[none_fit]
    feasible = out["feasible"] & ~none_fit
    raw = {m: out[m] for m in METRICS}
    limited, energy = None, None
    if tech is not None:
        raw, limited, energy, reason, ok = _with_power(db, tech, sc, per_op, out, raw, chips,
                                                       pp if in_sequence else 1, reason,
                                                       reticle)
        feasible = feasible & ok
    metrics = {m: np.where(feasible, v, np.nan) for m, v in raw.items()}
    return Evaluation(
        hardware=db.spec.name, workload=wl.name, scenario=sc, scenario_name=sc_name,
        scenario_overrides=given, chips=chips, tp=tp, pp=pp, batch=db,
        feasible=feasible, reason=np.where(feasible, "", reason).astype(object),
        sequences=np.where(none_fit, 0.0, seqs), metrics=metrics,
        memory_bytes=out["memory"], level_names=db.level_names, ops_name=per_op["ops_name"],
        ops_count=out["count"], ops_flops=out["flops"], ops_bytes=out["bytes"],
        ops_time=out["time"], ops_bound=out["bound"], power_limited=limited, energy=energy,
        warnings=tuple(warnings))


_PER_OP = ("ops_name", "precision", "matrix", "link_bytes")


def _with_power(db: DesignBatch, tech: TechSpec, sc: Scenario, per_op: dict, out: dict,
                raw: dict, chips: int, stages: int, reason: np.ndarray,
                reticle: bool) -> tuple:
    """Metrics with power and energy added and a TDP applied; see dse.model.power."""
    energy = step_energy(db, tech, per_op["precision"], per_op["matrix"], out["count"],
                         out["flops"], out["bytes"], per_op["link_bytes"])
    step = np.sum(out["count"] * out["time"], axis=1)
    die = area(db, tech, reticle=reticle)
    # A latency-phase listing covers every pipeline stage; each chip runs 1/pp of it.
    chip_energy = StepEnergy(energy.compute / stages, energy.memory / stages,
                             energy.links / stages)
    # Static power leaks from the transistors: padding added for die edge holds none.
    content = die.total_mm2 - die.components.get(PADDING, 0.0)
    pw = chip_power(chip_energy.total, step, tech.energy.static.per_area * content,
                    db.tdp)
    s = np.where(np.isfinite(pw.stretch), pw.stretch, 1.0)
    m = {k: (v * s if k in _TIME_METRICS else v / s) for k, v in raw.items()}
    system_w = chips * pw.power_w
    nan = np.full(db.n, np.nan)
    m["power_w"] = pw.power_w
    m["energy_per_step_j"] = system_w * step * s
    m["area_mm2"] = die.total_mm2
    with np.errstate(divide="ignore", invalid="ignore"):
        if sc.phase in ("decode", "serve"):
            m["energy_per_token_j"] = system_w / m["output_tokens_per_s"]
        elif sc.phase == "prefill":
            m["energy_per_token_j"] = system_w / (m["tokens_per_s_per_chip"] * chips)
        else:
            m["energy_per_token_j"] = nan
        m["energy_per_sample_j"] = system_w / m["samples_per_s"] if sc.phase == "inference" \
            else nan
    reason = reason.copy()
    for i in np.flatnonzero(~(pw.feasible & die.feasible)):
        why = [str(reason[i])] if reason[i] else []
        if not die.feasible[i]:
            why.append(str(die.reason[i]))
        if not pw.feasible[i]:
            why.append(f"static power {pw.static_w[i]:.0f} W of a {die.total_mm2[i]:.0f} mm2 "
                       f"die exceeds the {db.tdp[i]:.0f} W TDP")
        reason[i] = "; ".join(why)
    return m, pw.limited, chip_energy, reason, pw.feasible & die.feasible


def _subset(db: DesignBatch, idx: np.ndarray) -> DesignBatch:
    """The designs at `idx` of a batch."""
    if len(idx) == db.n:
        return db
    fields = {}
    for name in db.__dataclass_fields__:
        v = getattr(db, name)
        if isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[0] == db.n \
                and name not in ("resident", "per_unit"):
            v = v[idx]
        elif isinstance(v, dict):
            v = {k: a[idx] for k, a in v.items()}
        fields[name] = v
    fields["n"] = len(idx)
    return DesignBatch(**fields)


def _per_sequence_bytes(wl: WorkloadSpec, sc: Scenario, tp: int, pp: int,
                        fusion: str) -> tuple[float, float]:
    """(bytes per chip each extra sequence needs, bytes per chip needed regardless) for
    sizing batch max: KV cache at the steady-state context plus activation workspace."""
    table = lower(wl, sc.model_copy(update={"batch": 1}))
    meta = table.meta
    context = meta["context_avg"] if sc.phase == "serve" else meta["context_max"]
    ops, _ = chip_ops(table, tp, pp, fusion)
    per_seq = meta["kv_bytes_per_token"] * context / (tp * pp) + _workspace(ops)
    return per_seq, meta["weight_bytes"] / (tp * pp)


def _activation_bytes(ops: ChipOps) -> np.ndarray:
    """[I] activation working set of each operator instance (inputs + outputs), bytes."""
    return ops.read[:, A] + ops.written[:, A] + ops.read[:, G] + ops.written[:, G]


def _workspace(ops: ChipOps) -> float:
    """Largest activation working set of one operator instance, bytes."""
    ws = _activation_bytes(ops)
    return float(ws.max()) if len(ws) else 0.0


def _evaluate_group(db: DesignBatch, wl: WorkloadSpec, sc: Scenario, tp: int, pp: int,
                    sequences: float, chips: int, fusion: str, in_sequence: bool) -> dict:
    """One group of designs that run the same per-replica batch. `sequences`: sequences of
    the whole system (every replica runs sc.batch of them, the last possibly fewer)."""
    table = lower(wl, sc)
    meta = table.meta
    ops, coll = chip_ops(table, tp, pp, fusion, stages_in_sequence=in_sequence)
    n, lv = db.n, db.levels
    context = meta["context_avg"] if sc.phase == "serve" else meta["context_max"]
    weights = meta["weight_bytes"] / (tp * pp)
    kv = meta["batch"] * context * meta["kv_bytes_per_token"] / (tp * pp)
    workspace = _workspace(ops)
    placed = place(db, {"weights": weights, "kv_cache": kv, "workspace": workspace})

    # Homes of the persistent classes; decode steps find a working set that fits a cache
    # in that cache (see placement.cached_level).
    w_home = placed.fraction[:, PLACED.index("weights")]
    kv_home = placed.fraction[:, PLACED.index("kv_cache")]
    cache = cached_level(db, weights + kv)
    decode = ops.stage == "decode"
    levels = np.arange(lv)

    def with_cache(share: np.ndarray) -> np.ndarray:
        moved = np.where(levels[None, :] > cache[:, None], share, 0.0).sum(axis=1)
        cached = np.where(levels[None, :] > cache[:, None], 0.0, share)
        cached[np.arange(n), np.maximum(cache, 0)] += moved
        cached = np.where((cache >= 0)[:, None], cached, share)
        return np.where(decode[None, :, None], cached[:, None, :], share[:, None, :])

    # Activations: the innermost chip-wide on-chip level that holds an operator's inputs
    # and outputs, else the first resident level (DRAM, or the SRAM of an SRAM-only chip).
    ws = _activation_bytes(ops)
    first_resident = int(np.argmax(db.resident)) if db.resident.any() else lv - 1
    dram = [i for i in range(lv) if db.resident[i] and db.level_kinds[i] in ("dram", "host")]
    fallback = dram[0] if dram else first_resident
    act_home = np.full((n, len(ws)), fallback)
    for level in reversed(range(lv)):
        if db.level_kinds[level] in ("cache", "sram") and not db.per_unit[level] \
                and level < fallback:
            fits = db.capacity[:, level][:, None] >= ws[None, :]
            act_home = np.where(fits, level, act_home)

    t = op_times(db, ops, {"weights": with_cache(w_home), "kv_cache": with_cache(kv_home)},
                 act_home)
    t_coll = collective_times(db, coll)
    count = np.concatenate([ops.count, coll.count])
    time = np.concatenate([t.time, t_coll], axis=1)
    total = time @ count
    stage = np.concatenate([ops.stage, coll.stage])
    t_decode = time[:, stage == "decode"] @ count[stage == "decode"]

    level_names = np.array(db.level_names, dtype=object)
    bound = np.where(t.bound == 0, "compute", level_names[np.maximum(t.bound - 1, 0)])
    bound = np.where(t.bound < 0, "overhead", bound)
    bound = np.concatenate([bound, np.full((n, len(coll)), "interconnect", dtype=object)],
                           axis=1)
    coll_bytes = np.zeros((n, len(coll), lv))
    traffic = np.concatenate([t.traffic, coll_bytes], axis=1)

    reasons = np.full(n, "", dtype=object)
    fit_text = _fit_text(db, weights, kv, workspace, placed.short)
    reasons = np.where(~placed.feasible, fit_text, reasons)
    reasons = np.where(t.missing_rate & (reasons == ""),
                       f"no compute rate for precision {sc.precision} on {db.spec.name}",
                       reasons)
    no_link = ~np.all(np.isfinite(t_coll), axis=1)
    reasons = np.where(no_link & (reasons == ""),
                       f"{tp * pp if tp * pp > 1 else chips} chips must communicate but "
                       f"{db.spec.name} has no chip-to-chip links", reasons)
    feasible = reasons == ""

    s_out, s_in = meta["seq_out"], meta["seq_in"]
    nan = np.full(n, np.nan)
    phase = meta["phase"]
    flops = sequences / meta["batch"] * table.total_flops
    m = {k: nan for k in METRICS}
    m["latency_s"] = total / s_out if phase == "decode" else total
    m["achieved_flop_per_s"] = flops / total
    if phase == "prefill":
        m["ttft_s"] = total
        m["tokens_per_s_per_chip"] = sequences * s_in / total / chips
    elif phase in ("decode", "serve"):
        m["decode_tokens_per_s"] = s_out / (t_decode if phase == "serve" else total)
        m["output_tokens_per_s"] = sequences * s_out / total
        m["tokens_per_s_per_chip"] = m["output_tokens_per_s"] / chips
    elif phase == "inference":
        m["samples_per_s"] = sequences / total
        m["tokens_per_s_per_chip"] = sequences * s_in / total / chips
    return {
        "ops_name": np.concatenate([ops.name, coll.name]),
        "precision": np.concatenate([ops.dtype.astype(object),
                                     np.full(len(coll), "", dtype=object)]),
        "matrix": np.concatenate([ops.is_matrix, np.zeros(len(coll), dtype=bool)]),
        "link_bytes": np.concatenate([np.zeros(len(ops.count)), collective_volume(coll)]),
        "feasible": feasible, "reason": reasons, **m,
        "memory": placed.used, "count": np.broadcast_to(count, (n, len(count))).copy(),
        "flops": np.broadcast_to(np.concatenate([ops.flops, np.zeros(len(coll))]),
                                 (n, len(count))).copy(),
        "bytes": traffic, "time": time, "bound": bound,
    }


def _fit_text(db: DesignBatch, weights: float, kv: float, workspace: float,
              short: np.ndarray) -> np.ndarray:
    """Why a placement fails, per design ("" where it does not): text only for the designs
    that need it, so a large batch of feasible designs builds no strings."""
    from dse import units

    gb = lambda v: units.format_quantity(float(v), units.BYTES)  # noqa: E731
    room = db.resident_capacity.sum(axis=1)
    out = np.full(db.n, "", dtype=object)
    for i in np.flatnonzero(short > 0):
        out[i] = (f"weights {gb(weights)} + KV cache {gb(kv)} + workspace {gb(workspace)} per "
                  f"chip exceed the {gb(room[i])} of memory that can hold them "
                  f"({gb(short[i])} short)")
    return out
