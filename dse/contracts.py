"""Contract suites: the rules every phase and every workload kind must keep, the way Optuna
ships `pytest_samplers` for samplers. `phase_problems` and `kind_problems` return the rules
a phase or a kind breaks, in words (an empty list: it passes). The test suite runs them over
every registered phase and kind (tests/phases, tests/workloads); a phase or kind of one's
own runs them in its own tests before it is used.

No I/O: the caller gives the hardware and a workload of the kind.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from dse import phases
from dse.errors import DseError
from dse.model import evaluate
from dse.model.metrics import METRICS as METRIC_DEFS
from dse.model.stages import METRICS as RATE_METRICS
from dse.phases import Phase, Rates
from dse.spec.hardware import HardwareSpec
from dse.spec.workload import Engine, WorkloadSpec
from dse.workloads import KINDS, kind_of, lower, resolve_scenario
from dse.workloads.serving import iteration

# The synthetic step the rate formulas are checked on: three designs, each twice as slow as
# the one before, 8 sequences of 128 tokens generating 16 on 2 chips.
_TIMES = np.array([1e-3, 2e-3, 4e-3])
_SEQUENCES, _CHIPS, _SEQ_IN, _SEQ_OUT = 8.0, 2, 128.0, 16.0


def _rates_of(phase: Phase) -> dict[str, np.ndarray]:
    it = iteration(_SEQUENCES, _SEQ_IN, _SEQ_OUT, Engine()) if phase.served else None
    return phase.rates(Rates(time=_TIMES, sequences=_SEQUENCES, batch=_SEQUENCES,
                             chips=_CHIPS, flops=1e12, seq_in=_SEQ_IN, seq_out=_SEQ_OUT,
                             tokens=True, iteration=it))


def phase_problems(phase: Phase, hw: HardwareSpec | None = None,
                   workload: WorkloadSpec | None = None) -> list[str]:
    """The rules `phase` breaks: a name and summary; metrics it names are defined
    (dse.model.metrics) and the ones it computes are rate metrics; its rates are finite,
    positive, one per design, and a slower step never has more throughput or less latency;
    its default scenario is valid; and, given a chip and a workload whose kind runs it, an
    evaluation whose feasible designs report its headline and throughput, finite."""
    out: list[str] = []
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", phase.name):
        out.append(f"name {phase.name!r}: expected lower-case letters, digits, - and _")
    if not phase.summary.strip():
        out.append("summary: expected one line saying what a step of the phase is")
    named = [phase.throughput, *phase.headline, *phase.compared,
             *(m for m in (phase.target, phase.best_metric, phase.sample_throughput) if m)]
    out += [f"metric {m}: not defined in dse.model.metrics" for m in named
            if m not in METRIC_DEFS]
    if not phase.headline:
        out.append("headline: expected at least one metric")
    try:
        rates = _rates_of(phase)
    except Exception as e:  # any failure of a user's formula is a finding
        return [*out, f"rates: failed on a synthetic step: {type(e).__name__}: {e}"]
    out += [f"rates: {k} is not a rate metric ({', '.join(RATE_METRICS)})" for k in rates
            if k not in RATE_METRICS]
    out += [f"rates: {k} missing" for k in ("step_time_s", "latency_s") if k not in rates]
    for k, v in rates.items():
        arr = np.broadcast_to(np.asarray(v, dtype=float), _TIMES.shape)
        if not (np.isfinite(arr).all() and (arr > 0).all()):
            out.append(f"rates: {k} = {arr.tolist()}: expected finite and positive")
            continue
        unit = METRIC_DEFS[k].unit if k in METRIC_DEFS else ""
        slower_is_less = unit in ("tokens/s", "samples/s") or k == "achieved_flop_per_s"
        if slower_is_less and not (np.diff(arr) < 0).all():
            out.append(f"rates: {k} does not fall as the step gets slower: {arr.tolist()}")
        if k.endswith("_s") and not slower_is_less and not (np.diff(arr) > 0).all():
            out.append(f"rates: {k} does not grow as the step gets slower: {arr.tolist()}")
    if phase.throughput in RATE_METRICS and phase.throughput not in rates:
        out.append(f"throughput {phase.throughput}: its rates do not compute it")
    if hw is not None and workload is not None:
        out += _evaluated(phase, hw, workload)
    return out


def _evaluated(phase: Phase, hw: HardwareSpec, workload: WorkloadSpec) -> list[str]:
    try:
        ev = evaluate(hw, workload, phase=phase.name)
    except DseError as e:
        return [f"evaluate on {hw.name} and {workload.name}: {e}"]
    out = []
    ok = ev.feasible
    tokens = kind_of(workload).tokens
    # a kind whose samples are not token sequences (a recommender) reports no token rates
    wanted = {*(m for m in phase.headline if m in RATE_METRICS
                and (tokens or "token" not in m)), phase.throughput_of(tokens)}
    for m in sorted(wanted):
        v = ev.metrics.get(m)
        if v is None or not np.isfinite(v[ok]).all():
            out.append(f"evaluate on {hw.name} and {workload.name}: {m} is not finite for a "
                       "feasible design")
    return out


def kind_problems(name: str, spec: WorkloadSpec, hw: HardwareSpec | None = None
                  ) -> list[str]:
    """The rules workload kind `name` breaks, on `spec` (a workload of the kind): it is
    registered and runs some phase; for every phase whose work it lowers, the phase's
    default scenario lowers to operators with finite, non-negative FLOPs and bytes, labelled
    with the phase, and lowering one sequence per design or two gives one row of each per
    design, the second never less work (or rows that do not depend on the batch); and, with
    a chip, an evaluation of each phase is finite where feasible."""
    out: list[str] = []
    if name not in KINDS:
        return [f"kind {name}: not registered (dse.workloads.register_kind)"]
    if spec.kind != name:
        return [f"the workload given is of kind {spec.kind}, not {name}"]
    works = KINDS[name].runs(spec)
    runs = phases.those(lambda p: p.work in works)
    if not runs:
        out.append(f"kind {name}: {spec.name} runs no registered phase (works "
                   f"{', '.join(sorted(works))})")
    for ph in runs:
        out += [f"phase {ph}: {p}" for p in _lowered(spec, ph)]
        if hw is not None and not _is_train_only(ph):
            out += [p for p in _evaluated(phases.get(ph), hw, spec)
                    if "not finite" in p]
    return out


def _is_train_only(name: str) -> bool:
    """Training steps plan their own setup per design; the kind contract lowers them but
    leaves their evaluation to the phase's contract."""
    return phases.get(name).trains


def _lowered(spec: WorkloadSpec, phase: str) -> list[str]:
    try:
        _, sc = resolve_scenario(spec, phase=phase)
        if not isinstance(sc.batch, int):
            sc = sc.model_copy(update={"batch": 1})
        table = lower(spec, sc)
        two = lower(spec, sc, batch=np.array([1.0, 2.0]))
    except DseError as e:
        return [f"lowering its default scenario: {e}"]
    out = []
    if len(table.name) == 0:
        out.append("lowered to no operators")
    checks: list[tuple[str, Callable[[np.ndarray], bool]]] = [
        ("flops", lambda a: bool(np.isfinite(a).all() and (a >= 0).all())),
        ("read", lambda a: bool(np.isfinite(a).all() and (a >= 0).all())),
        ("written", lambda a: bool(np.isfinite(a).all() and (a >= 0).all())),
        ("count", lambda a: bool(np.isfinite(a).all() and (a >= 0).all()))]
    for field, good in checks:
        if not good(np.asarray(getattr(table, field), dtype=float)):
            out.append(f"{field}: expected finite and non-negative values")
    if table.facts.phase != phase:
        out.append(f"facts.phase is {table.facts.phase!r}, expected {phase!r}")
    work = np.asarray(two.flops, dtype=float) * np.asarray(two.count, dtype=float)
    if work.ndim == 1:  # rows that do not depend on the batch (a GEMM): the same as one
        if work.shape != np.shape(table.flops):
            out.append(f"a batch per design changed the rows to shape {work.shape}")
    elif work.ndim != 2 or work.shape[0] != 2:
        out.append(f"one sequence per design for 2 designs lowered to shape {work.shape}, "
                   "expected [2, I] (or [I] where the rows do not depend on the batch)")
    elif work[1].sum() < work[0].sum():
        out.append("two sequences lowered to less work than one")
    return out
