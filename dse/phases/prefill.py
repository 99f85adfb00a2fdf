"""Phase prefill: the prompts of a batch in one pass, to the first token (TTFT)."""

from __future__ import annotations

import numpy as np

from dse.phases.base import Array, Phase, Rates, step_rates


def rates(r: Rates) -> dict[str, Array]:
    """TTFT = latency = the stack's front-end (request path and first sampling step) + the
    step; prompt tokens per second per chip (the step's)."""
    m = step_rates(r)
    m["ttft_s"] = r.time + r.front_end
    m["latency_s"] = m["ttft_s"]
    m["tokens_per_s_per_chip"] = np.asarray(r.sequences) * r.seq_in / r.time / r.chips
    return m


# Lengths follow common benchmark settings: a 1,024-token prompt (TensorRT-LLM's and vLLM's
# throughput tables use 128 to 2,048), one sequence.
PREFILL = Phase(
    name="prefill", summary="the prompt of each sequence, to its first token (TTFT)",
    work="prefill", rates=rates, throughput="tokens_per_s_per_chip", throughput_per_chip=True,
    headline=("ttft_s", "tokens_per_s_per_chip"), default={"batch": 1, "seq_in": 1024},
    needs=("seq_in",), in_sequence=True, compared=("ttft_s",), energy_per=("token",))
