"""Phase inference: a forward of a batch of samples (encoders, recommenders)."""

from __future__ import annotations

import numpy as np

from dse.phases.base import Array, Phase, Rates, step_rates


def rates(r: Rates) -> dict[str, Array]:
    """Samples per second; tokens per second per chip where samples are token sequences."""
    m = step_rates(r)
    m["samples_per_s"] = np.asarray(r.sequences) / r.time
    if r.tokens:
        m["tokens_per_s_per_chip"] = np.asarray(r.sequences) * r.seq_in / r.time / r.chips
    return m


# 384 tokens: MLPerf BERT's max_seq_length; one sample.
INFERENCE = Phase(
    name="inference", summary="a forward of a batch of samples (encoders, recommenders)",
    work="encode", rates=rates, throughput="samples_per_s",
    headline=("samples_per_s", "tokens_per_s_per_chip", "latency_s"),
    default={"batch": 1, "seq_in": 384}, needs=("seq_in",), batch_modes=("max", "best"),
    takes=frozenset({"lengths"}), compared=("samples_per_s",), energy_per=("sample",),
    target="step_time_s", best_metric="samples_per_s")
