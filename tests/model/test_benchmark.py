"""Speed of the vectorized model: 10,000 designs of a 70B decode in one evaluate() call.

Skipped by default (the project's addopts has --benchmark-skip); run with
`python -m pytest tests/model/test_benchmark.py --benchmark-only` (--benchmark-enable
alone does not override --benchmark-skip)."""

import numpy as np

import dse

N = 10_000


def designs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "compute.units": rng.integers(66, 265, N),
        "memory.L2.capacity": rng.uniform(10, 200, N) * 2.0**20,
        "memory.HBM3.bandwidth": rng.uniform(1.5e12, 8e12, N),
    }


def test_ten_thousand_designs(benchmark):
    hw = dse.load_hardware("h100-sxm")
    wl = dse.load_workload("llama2-70b")
    overrides = designs()

    def run():
        return dse.evaluate(hw, wl, phase="decode", batch=1, seq_in=1024, seq_out=128,
                            precision="bf16", chips=2, tp=2, overrides=overrides)

    ev = benchmark(run)
    assert ev.n == N
    assert ev.feasible.all()
    assert np.all(np.isfinite(ev.metrics["latency_s"]))
    assert benchmark.stats.stats.mean <= 0.5
