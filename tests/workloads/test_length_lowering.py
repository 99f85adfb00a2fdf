"""Lowering with a length distribution: token work follows the sum of the lengths, attention
the sum of their squares; a distribution of one length at seq_in changes nothing."""

import numpy as np
import pytest

import dse
from dse.spec.load import load_design
from dse.spec.workload import Scenario, TransformerSpec
from dse.workloads import lower, scenario_for
from dse.workloads.optable import OpTable

FIELDS = ("count", "flops", "read", "written", "shape")


def encoder() -> TransformerSpec:
    # d=8, 2 heads of 4, d_ff=16 gelu, no biases, no position table: small numbers by hand.
    return TransformerSpec.model_validate({
        "name": "enc", "kind": "transformer", "source": "test", "architecture": "encoder",
        "layers": 1, "d_model": 8, "heads": 2, "d_ff": 16, "vocab": 10, "bias": False,
        "position": "none", "scenarios": {"s": {"phase": "inference", "seq_in": 8}}})


def rows(table: OpTable) -> dict[str, int]:
    return {str(n): i for i, n in enumerate(table.name)}


def test_tokens_follow_the_sum_of_lengths_and_attention_the_sum_of_squares():
    # Two sequences (batch 2) of 2 and 6 tokens, padded to seq_in 8 without the histogram:
    # sum of lengths 8 tokens (not 16), sum of squares 4 + 36 = 40 pairs per head (not 128).
    m = encoder()
    hist = [{"length": 2, "share": 0.5}, {"length": 6, "share": 0.5}]
    t = lower(m, Scenario(phase="inference", batch=2, seq_in=8, precision="int8",
                          lengths=hist))
    r = rows(t)
    tokens, pairs = 2 + 6, 2 * 2 + 6 * 6
    assert t.flops[r["q_proj"]] == 2 * tokens * 8 * 8  # 2*M*N*K, M = the real tokens
    assert t.read[r["q_proj"], 1] == tokens * 8  # activations in, 1 B each
    assert t.flops[r["up_proj"]] == 2 * tokens * 16 * 8
    assert t.flops[r["activation"]] == 10 * tokens * 16  # GELU, 10 FLOP per element
    assert t.flops[r["attn_norm"]] == 8 * tokens * 8  # LayerNorm, 8 FLOP per element
    assert t.read[r["embedding"], 0] == tokens * 8  # one embedding row per real token
    s = r["attn_score"]
    assert t.flops[s] == 2 * 2 * pairs * 4  # 2 FLOP x heads x pairs x head_dim
    assert t.written[s, 1] == 2 * pairs  # scores: heads x pairs x 1 B
    assert t.read[s, 1] == 2 * 2 * tokens * 4  # Q and K of every real token, 2 heads x 4
    assert t.flops[r["softmax"]] == 4 * 2 * pairs
    assert t.flops[r["attn_value"]] == 2 * 2 * pairs * 4
    assert t.shape[s, 0] == t.shape[s, 1] == tokens / 2  # the mean length
    assert t.facts.seq_in == tokens / 2  # tokens per sequence, E[L]
    # the same table from the moments alone
    mo = lower(m, Scenario(phase="inference", batch=2, seq_in=8, precision="int8",
                           lengths={"mean": 4, "second_moment": 20}))
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(mo, f), getattr(t, f))


def test_one_length_at_seq_in_reproduces_the_padded_run_exactly():
    wl = dse.load_workload("bert-large")
    padded = scenario_for(wl, "case-study-512", seq_in=384, batch=8)
    one = padded.model_copy(update={"lengths": None})
    full = Scenario.model_validate({**one.model_dump(),
                                    "lengths": [{"length": 384, "share": 1.0}]})
    a, b = lower(wl, one), lower(wl, full)
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert a.facts == b.facts
    # and per design (a batch array), as the model lowers batch max
    batches = np.array([1.0, 5.0, 300.0])
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(lower(wl, one, batch=batches), f),
                                      getattr(lower(wl, full, batch=batches), f))


def test_squad_mlperf_offline_runs_the_mean_length():
    spec = load_design("a100-sxm-80gb")[0]
    wl = dse.load_workload("bert-large")
    sc = scenario_for(wl, "mlperf-offline")
    padded = wl.model_copy(update={"scenarios": {"p": sc.model_copy(update={"lengths": None})}})
    run = dse.evaluate(spec, wl, "mlperf-offline", batch=64)
    full = dse.evaluate(spec, padded, "p", batch=64)
    mean = 1_933_625 / 10_833
    # tokens per second count the real tokens of each sample
    assert run.metrics["tokens_per_s_per_chip"][0] == pytest.approx(
        run.metrics["samples_per_s"][0] * mean, rel=1e-12)
    # about 384 / 178.5 = 2.15x the samples of the padded run; attention gains more
    # (E[L^2] = 36,554 of 147,456), tile effects of the mean shape a little less
    gain = run.metrics["samples_per_s"][0] / full.metrics["samples_per_s"][0]
    assert 1.9 < gain < 2.5
