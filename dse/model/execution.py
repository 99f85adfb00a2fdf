"""How a scenario is run on a system of chips: the execution plan every stage reads.

One object carries the chips, every parallel degree (tensor, pipeline, data, context,
expert) and the training strategy (micro-batch, pipeline schedule, ZeRO stage,
recomputation, sequence parallelism, offload, activation compression): eval, memory,
validate and studies build it once and hand it on, instead of loose keyword arguments. A
strategy field left None is chosen per design by the training planner (dse.model.training).
No I/O.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from dse import phases
from dse.errors import DseError
from dse.spec.types import MAX_WHOLE
from dse.spec.workload import Compression, Offload, Training

# Fusion of the flash-attention kernel (Dao et al. 2022), used by every production inference
# stack: scores, softmax and the weighted sum of V run as one kernel, so the score matrix never
# leaves the chip's innermost memory and the softmax and value steps launch nothing of their
# own. Every other operator is its own kernel. "none": every operator is a kernel.
FUSIONS = ("flash", "none")


@dataclass(frozen=True)
class Execution:
    """Chips in the system and how the work is split among them: tensor parallelism `tp`
    (Megatron-style splits of each layer), pipeline parallelism `pp` (layers split into
    stages), and data parallelism over the rest (chips / (tp x pp) replicas)."""

    chips: int = 1
    tp: int = 1
    pp: int = 1
    fusion: str = "flash"
    cp: int = 1
    """Context parallelism: data-parallel ranks that share each sequence (ring attention)."""
    ep: int = 1
    """Expert parallelism: data-parallel ranks that share each MoE layer's experts."""
    micro_batch: int | None = None
    """Training: sequences per micro-batch (None: chosen per design)."""
    zero: int | None = None
    """Training: ZeRO stage 0-3 (None: chosen per design)."""
    recompute: str | None = None
    """Training: recomputation none, selective or full (None: chosen per design)."""
    sequence_parallel: bool | None = None
    """Training: Megatron's sequence parallelism (None: chosen per design)."""
    schedule: str | None = None
    """Training: pipeline schedule 1f1b or interleaved (None: chosen per design)."""
    virtual_stages: int | None = None
    """Training: model chunks per pipeline rank (None: chosen with the schedule)."""
    offload: Offload | None = None
    """Training: optimizer state or parameters kept in a slower memory level."""
    compression: Compression | None = None
    """Training: stored activations compressed on the vector units."""

    def __post_init__(self) -> None:
        for name in ("chips", "tp", "pp", "cp", "ep"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_WHOLE:
                shown = repr(v) if not isinstance(v, int) or v.bit_length() < 100 \
                    else "a number of over 30 digits"  # repr of a huge int itself raises
                raise DseError(f"expected a whole number from 1 to {MAX_WHOLE} (2^53), "
                               f"found {shown}", field=name, domain="execution", value=v,
                               rule=f"a whole number from 1 to {MAX_WHOLE}")
        if self.chips % (self.tp * self.pp):
            raise DseError(f"{self.chips} is not a multiple of tp x pp = "
                           f"{self.tp * self.pp}; data parallelism needs whole replicas",
                           field="chips", domain="execution", value=self.chips,
                           rule="a multiple of tp x pp", inline=True)
        if self.fusion not in FUSIONS:
            raise DseError(f"fusion: expected one of {', '.join(FUSIONS)}, found "
                           f"{self.fusion!r}")

    @property
    def dp(self) -> int:
        """Data-parallel replicas."""
        return self.chips // (self.tp * self.pp)

    @property
    def model_split(self) -> int:
        """Chips one replica's weights are split over (tp x pp)."""
        return self.tp * self.pp

    @property
    def more_degrees(self) -> tuple[int, ...]:
        """(cp, ep) where either is not 1, else (): what a digest of (chips, tp, pp) adds,
        so a run without them keeps the digest it had."""
        return (self.cp, self.ep) if (self.cp, self.ep) != (1, 1) else ()

    @property
    def replicas(self) -> int:
        """Data-parallel replicas that split the batch: dp over the context-parallel ranks
        that share each sequence."""
        return self.dp // self.cp

    def with_training(self, t: Training | None) -> Execution:
        """This execution with the strategy a scenario's `training:` block states, in the
        fields this one leaves open (None; cp and ep at 1)."""
        if t is None:
            return self
        given = {"cp": t.context_parallel, "ep": t.expert_parallel,
                 **{f: getattr(t, f) for f in STRATEGY}}
        mine = {f: getattr(self, f) for f in given}
        fill = {f: v for f, v in given.items()
                if mine[f] is None or (f in ("cp", "ep") and mine[f] == 1)}
        return dataclasses.replace(self, **fill)

    def training_fields(self) -> dict[str, object]:
        """The strategy as a scenario's `training:` fields (what the lowering reads)."""
        return {"context_parallel": self.cp, "expert_parallel": self.ep,
                **{f: getattr(self, f) for f in STRATEGY}}


# The training strategy fields an execution shares with a scenario's `training:` block.
STRATEGY = ("micro_batch", "zero", "recompute", "sequence_parallel", "schedule",
            "virtual_stages", "offload", "compression")


def training_degree_problems(phase: str, ex: Execution) -> list[DseError]:
    """The context- and expert-parallel degrees `ex` gives outside training (phase `phase`),
    each an error naming its field: only the training step splits over them."""
    if phases.get(phase).trains:
        return []
    return [DseError("context and expert parallelism are modelled in training only (phase "
                     f"{phase} splits over tp and pp; found {v})", field=name, value=v,
                     rule="1 outside training")
            for name, v in (("cp", ex.cp), ("ep", ex.ep)) if v != 1]
