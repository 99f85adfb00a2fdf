"""Phase decode: a batch generating seq_out tokens each, in lockstep, over a KV cache that
grows from seq_in."""

from __future__ import annotations

import numpy as np

from dse.phases.base import Array, Phase, Rates, step_rates


def rates(r: Rates) -> dict[str, Array]:
    """TPOT = step / seq_out; one sequence's rate seq_out / step; the system's batch x that
    (a batch that does not divide among the replicas counts only its own sequences)."""
    m = step_rates(r)
    m["tpot_s"] = r.time / r.seq_out
    m["decode_tokens_per_s"] = r.seq_out / r.time
    m["output_tokens_per_s"] = np.asarray(r.sequences) * r.seq_out / r.time
    m["tokens_per_s_per_chip"] = m["output_tokens_per_s"] / r.chips
    return m


# A 1,024-token prompt and 128 generated tokens, one sequence (see prefill).
DECODE = Phase(
    name="decode", summary="token generation: seq_out tokens per sequence in lockstep",
    work="decode", rates=rates, throughput="output_tokens_per_s",
    headline=("tpot_s", "output_tokens_per_s", "tokens_per_s_per_chip"),
    default={"batch": 1, "seq_in": 1024, "seq_out": 128}, needs=("seq_out",),
    in_sequence=True, compared=("decode_tokens_per_s", "output_tokens_per_s"),
    energy_per=("token",))
