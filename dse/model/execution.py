"""How a scenario is run on a system of chips: the execution plan the `plan` stage reads.

One object instead of loose keyword arguments, so the strategies still to come (micro-batches,
ZeRO stages, recomputation, offload) are fields here, not new parameters of every function.
No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from dse.errors import DseError
from dse.spec.types import MAX_WHOLE

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

    def __post_init__(self) -> None:
        for name in ("chips", "tp", "pp"):
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
