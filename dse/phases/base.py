"""What a phase is: one object that declares everything the tool does differently for it.

A phase (gemm, prefill, decode, serve, inference, training, or one a user registers) is a
`Phase`: the scenario fields it uses and their defaults, the shape of work its step lowers
to (`work`, which each workload kind lowers), whether one request crosses the pipeline
stages in turn, the metrics it reports (computed by `rates` from the step's time) with its
headline, the metric a study maximizes, what `dse validate` compares, and which energies it
reports. The rest of the tool asks the phase (`dse.phases.get(name)`) and never compares a
phase's name. Adding a phase is one module with one `register(Phase(...))` call.

No I/O; the `rates` functions are numpy over N designs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from dse.errors import DseError, suggest

# The shapes of work a step lowers to; each workload kind says which it lowers
# (dse.workloads.WorkloadKind.works). A new phase reuses one of these with its own
# scenario defaults and metrics; a new shape of work is taught to the kinds that run it.
Work = Literal["gemm", "prefill", "decode", "serve", "encode", "train"]
WORKS: tuple[str, ...] = ("gemm", "prefill", "decode", "serve", "encode", "train")

Array = np.ndarray


class ServingIteration(Protocol):
    """The steady-state iteration of a serving engine (dse.workloads.serving.Iteration)."""

    @property
    def prefill_iterations(self) -> Array | float: ...
    @property
    def lifetime(self) -> Array | float: ...
    @property
    def overhead(self) -> float: ...


@dataclass(frozen=True)
class Rates:
    """What a phase's metrics are computed from, for N designs (one data-parallel replica's
    step; `sequences` and `chips` are the whole system's)."""

    time: Array  # [N] s: the step's operators, collectives and pipeline bubble
    sequences: Array | float  # sequences (samples) of the whole system per step
    batch: Array | float  # sequences per replica per step
    chips: int
    flops: Array | float  # FLOPs of one replica's step
    seq_in: float  # tokens per sequence in (0 for kinds without sequences)
    seq_out: float  # tokens generated per sequence (generating phases)
    tokens: bool  # a sample is a sequence of tokens (False: a recommender's pairs)
    iteration: ServingIteration | None = None  # the serving engine's iteration, if any
    front_end: float = 0.0  # s the stack's serving front-end adds to a request's first
    # token (dse.spec.stack.FrontEnd): host time, beside the step


def step_rates(r: Rates, total: Array | None = None) -> dict[str, Array]:
    """The metrics every phase reports: step_time_s, latency_s (the step: one request's
    whole time when the batch runs in lockstep) and achieved_flop_per_s, from `total`
    (default r.time) seconds per step."""
    t = r.time if total is None else total
    return {"step_time_s": t, "latency_s": t,
            "achieved_flop_per_s": np.asarray(r.sequences) / r.batch * r.flops / t}


@dataclass(frozen=True)
class Phase:
    """One phase, as data plus its rate formulas (dse.model.metrics defines every metric)."""

    name: str
    summary: str
    """One line: what a step of the phase is (help texts, docs)."""
    work: Work
    """The shape of work its step lowers to (see WORKS)."""
    rates: Callable[[Rates], dict[str, Array]]
    """Latency and throughput metrics from the step's time (others are NaN)."""
    throughput: str
    """The metric a study maximizes for a workload run in this phase."""
    headline: tuple[str, ...]
    """The metrics `dse eval` shows first, in order."""
    default: Mapping[str, Any] = field(default_factory=dict)
    """The scenario run when a workload names none of this phase (phase excluded)."""
    needs: tuple[str, ...] = ()
    """Scenario lengths that must be at least 1 (seq_in, seq_out), each with its why."""
    batch_modes: tuple[str, ...] = ()
    """Batches beyond a whole number the phase takes: max, best."""
    takes: frozenset[str] = frozenset()
    """Optional scenario sections it takes: engine, training, lengths."""
    in_sequence: bool = False
    """One request crosses the pipeline stages in turn (a latency phase): the step lists
    every stage and each chip runs 1/pp of it."""
    compared: tuple[str, ...] = ()
    """Metrics `dse validate` compares with measurements (empty: not validated)."""
    energy_per: tuple[Literal["token", "sample"], ...] = ()
    """Energies reported per unit of output: token (system power / tokens per second),
    sample (system power / samples per second)."""
    target: str | None = None
    """The metric a scenario's latency_target bounds (with batch best)."""
    per_request: bool = True
    """latency_s is a request's time (False: a step has no requests, e.g. training)."""
    best_metric: str | None = None
    """The throughput batch best maximizes (with batch best)."""
    throughput_per_chip: bool = False
    """`throughput` is per chip: a study multiplies it by the chips for the system's."""
    sample_throughput: str | None = None
    """The throughput of a kind whose samples are not token sequences (a recommender's
    pairs), where `throughput` counts tokens."""

    def __post_init__(self) -> None:
        if self.work not in WORKS:
            raise ValueError(f"phase {self.name}: work {self.work!r}; expected one of: "
                             f"{', '.join(WORKS)}")
        if self.batch_modes and "best" in self.batch_modes and self.best_metric is None:
            raise ValueError(f"phase {self.name}: batch best needs best_metric")

    def throughput_of(self, tokens: bool = True) -> str:
        """The metric a study maximizes, for a kind whose samples are token sequences
        (`tokens`) or not."""
        return self.throughput if tokens or self.sample_throughput is None \
            else self.sample_throughput

    @property
    def generates(self) -> bool:
        """Each sequence generates seq_out tokens."""
        return "seq_out" in self.needs

    @property
    def served(self) -> bool:
        """Runs as a serving engine's steady-state iteration (takes an engine)."""
        return "engine" in self.takes

    @property
    def trains(self) -> bool:
        """A training step: forward, backward and the optimizer's update."""
        return self.work == "train"


REGISTRY: dict[str, Phase] = {}


def register(phase: Phase, *, replace: bool = False) -> Phase:
    """Add a phase to the registry (every route knows it from then on); `replace` lets a
    test or plug-in swap one it registered."""
    if phase.name in REGISTRY and not replace:
        raise ValueError(f"phase {phase.name} is registered already")
    REGISTRY[phase.name] = phase
    return phase


def unregister(name: str) -> None:
    """Remove a phase (a test's toy phase)."""
    REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    """The registered phases, in registration order."""
    return tuple(REGISTRY)


def get(name: str, field: str = "phase") -> Phase:
    """The phase called `name`; a DseError about scenario field `field` (each route words
    it: `--phase`, `phase`) listing the known phases otherwise."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        known = ", ".join(REGISTRY)
        raise DseError(f"expected one of: {known}, found {name!r}"
                       f"{suggest(str(name), list(REGISTRY))}", field=field, value=name,
                       rule=f"one of: {known}") from None


def those(predicate: Callable[[Phase], bool]) -> tuple[str, ...]:
    """Names of the phases for which `predicate` holds (for messages: 'the serve and
    inference phases')."""
    return tuple(p.name for p in REGISTRY.values() if predicate(p))


def listed(items: tuple[str, ...] | list[str], last: str = "and") -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = list(items)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {last} {items[-1]}"
