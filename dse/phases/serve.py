"""Phase serve: continuous batching as servers run it, one steady-state iteration
(dse.workloads.serving)."""

from __future__ import annotations

import numpy as np

from dse.phases.base import Array, Phase, Rates, step_rates


def rates(r: Rates) -> dict[str, Array]:
    """The iteration takes the operators' time plus the engine's host overhead: TPOT = one
    iteration, TTFT = the stack's front-end (request path, first sampling step) + the k
    iterations that carry a prompt, a request's latency = the front-end + its
    L = k + s_out - 1 iterations, output tokens per second = B s_out / L per iteration."""
    it = r.iteration
    if it is None:
        raise ValueError("phase serve needs the serving engine's iteration")
    total = r.time + it.overhead
    m = step_rates(r, total)
    m["latency_s"] = it.lifetime * total + r.front_end
    m["ttft_s"] = it.prefill_iterations * total + r.front_end
    m["tpot_s"] = total
    m["decode_tokens_per_s"] = 1.0 / total
    m["output_tokens_per_s"] = np.asarray(r.sequences) * (r.seq_out / it.lifetime) / total
    m["tokens_per_s_per_chip"] = m["output_tokens_per_s"] / r.chips
    return m


# A 1,024-token prompt and 128 generated tokens (see prefill); the largest batch that fits.
SERVE = Phase(
    name="serve", summary="continuous batching: one steady-state iteration of a server",
    work="serve", rates=rates, throughput="output_tokens_per_s",
    headline=("output_tokens_per_s", "tokens_per_s_per_chip", "tpot_s", "ttft_s"),
    default={"batch": "max", "seq_in": 1024, "seq_out": 128}, needs=("seq_in", "seq_out"),
    batch_modes=("max", "best"), takes=frozenset({"engine"}),
    compared=("output_tokens_per_s",), energy_per=("token",), target="tpot_s",
    best_metric="output_tokens_per_s")
