"""A design's numbers do not depend on the designs evaluated beside it: not on how many there
are, which batches they share (distinct tables), where the chunks are cut, nor on what an
earlier call kept (kept tables). Every design evaluated among many -- in chunks of 7, with
tables kept from a first call -- equals it evaluated alone, to the bit."""

from __future__ import annotations

import numpy as np
import pytest

import dse
from dse.model import chunks, lowered

CASES = [
    ("llama2-70b", {"phase": "decode", "batch": 4, "seq_in": 1024, "seq_out": 128,
                    "precision": "bf16", "chips": 2, "tp": 2}),
    ("llama2-70b", {"phase": "prefill", "batch": 1, "seq_in": 1024, "precision": "bf16",
                    "chips": 2, "tp": 2}),
    ("llama3-8b", {"scenario": "serve-2048-128"}),
    ("llama3-8b", {"scenario": "serve-2048-128", "batch": "best"}),
    ("mixtral-8x7b", {"scenario": "serve-2048-128", "chips": 2, "tp": 2}),
    ("bert-large", {"scenario": "case-study-512"}),
    ("dlrm-dcnv2", {"scenario": "mlperf-offline"}),
]


def _designs(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"compute.units": rng.integers(66, 265, n),
            "memory.L2.capacity": rng.choice([20.0, 50.0, 50.0, 120.0], n) * 2.0**20,
            "memory.HBM3.stacks": rng.choice([3, 5, 5, 7], n)}


@pytest.mark.parametrize(("workload", "kwargs"), CASES, ids=[f"{w}-{i}" for i, (w, _) in
                                                             enumerate(CASES)])
def test_a_design_among_many_is_the_design_alone(monkeypatch, workload, kwargs):
    hw, wl = dse.load_hardware("h100-sxm"), dse.load_workload(workload)
    designs = _designs(24, 11)
    lowered.clear()
    dse.evaluate(hw, wl, **kwargs, overrides=designs)  # tables kept from a first call
    monkeypatch.setattr(chunks, "CHUNK_DESIGNS", 7)
    monkeypatch.setattr(chunks, "BEST_CANDIDATES", 1)
    many = dse.evaluate(hw, wl, **kwargs, overrides=designs)
    monkeypatch.undo()
    for i in (0, 5, 13, 23):
        lowered.clear()
        one = dse.evaluate(hw, wl, **kwargs, overrides={k: v[i:i + 1] for k, v in
                                                        designs.items()})
        assert bool(one.feasible[0]) == bool(many.feasible[i])
        assert one.reason.text(0) == many.reason.text(i)
        for k, v in one.metrics.items():
            a, b = float(v[0]), float(many.metrics[k][i])
            if k == "achieved_flop_per_s":  # FLOPs / time: a known 1-ulp difference
                assert a == pytest.approx(b, rel=1e-15, nan_ok=True), (k, i)
            else:
                assert a == b or (a != a and b != b), (k, i, a, b)
        for f in ("ops_time", "op_traffic", "ops_count", "ops_bound_code"):
            np.testing.assert_array_equal(getattr(one, f)[0], getattr(many, f)[i], err_msg=f)
