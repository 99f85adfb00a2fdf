"""The runs of one study file share the model's evaluations where the model coincides
(dse.search.memo): a reused result equals a fresh one, an alternative that changes only a
budget reuses the study's designs, and one that changes the hardware does not."""

from __future__ import annotations

import numpy as np
import pytest

from dse.search import memo
from dse.search.objective import evaluate_designs
from dse.search.space import load_study


@pytest.fixture()
def study():
    memo.clear()
    yield load_study("studies/middle-ground.yaml")
    memo.clear()


def _designs(study, n: int = 40, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return study.designs({
        "compute.units": rng.choice(np.arange(96, 149, 4), n).astype(float),
        "memory.L2.capacity": np.exp(rng.uniform(np.log(32 * 2**20), np.log(256 * 2**20), n)),
        "memory.HBM3.stacks": rng.integers(4, 7, n).astype(float),
        "memory.LPDDR5X.channels": rng.choice(np.arange(8, 33, 8), n).astype(float),
        "interconnect.links": rng.choice(np.arange(6, 19, 2), n).astype(float)})


def _same(a, b) -> None:
    assert np.array_equal(a.values, b.values, equal_nan=True)
    assert (a.feasible == b.feasible).all() and (a.reason == b.reason).all()
    assert a.columns.keys() == b.columns.keys()
    for k in a.columns:
        x, y = np.asarray(a.columns[k]), np.asarray(b.columns[k])
        assert (np.array_equal(x, y, equal_nan=True) if x.dtype.kind == "f"
                else (x == y).all()), k


def test_a_reused_result_equals_a_fresh_one(study):
    d = _designs(study)
    evaluate_designs(study, {k: v[:20] for k, v in d.items()})  # half stored
    mixed = evaluate_designs(study, d)  # 20 from the store, 20 evaluated
    assert memo.stats() == {"hits": 20 * len(study.jobs), "misses": 40 * len(study.jobs)}
    memo.clear()
    _same(mixed, evaluate_designs(study, d))


def test_a_budget_alternative_reuses_a_hardware_alternative_does_not(study):
    d = _designs(study)
    evaluate_designs(study, d)
    before = memo.stats()["hits"]
    power = study.alternatives["iso-power-500w"]  # a power cap: the same model
    evaluate_designs(power, power.designs({k: v for k, v in d.items()
                                           if any(p.path == k for p in power.params)}))
    assert memo.stats()["hits"] - before == len(d["compute.units"]) * len(study.jobs)
    before = memo.stats()["hits"]
    fixed = study.alternatives["l2-bandwidth-fixed"]  # another L2: another model
    evaluate_designs(fixed, fixed.designs({k: v for k, v in d.items()
                                           if any(p.path == k for p in fixed.params)}))
    assert memo.stats()["hits"] == before
