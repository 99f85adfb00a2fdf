"""Phase training: one optimizer step of the global batch (forward, backward, update)."""

from __future__ import annotations

from dse.phases.base import Phase
from dse.phases.inference import rates as sample_rates

# A global batch of 8 sequences of 2,048 tokens.
TRAINING = Phase(
    name="training", summary="one optimizer step of the global batch", work="train",
    rates=sample_rates, throughput="tokens_per_s", sample_throughput="samples_per_s",
    headline=("step_time_s", "tokens_per_s", "samples_per_s", "mfu"),
    default={"batch": 8, "seq_in": 2048}, needs=("seq_in",),
    takes=frozenset({"training"}),
    compared=("model_flop_per_s_per_chip", "hardware_flop_per_s_per_chip", "mfu",
              "samples_per_s"), per_request=False)
