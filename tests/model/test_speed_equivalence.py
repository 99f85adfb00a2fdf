"""The speed work of issue 26 changes no number: every case of tools/bench_speed.py (and
`batch: best` with a latency target) evaluated on a fixed set of designs gives the metrics,
feasibility, reasons, memory, operator times and training setups the code before the change
gave (saved in tests/data/speed_equivalence.npz; within 1e-12 relative).

Regenerate (only from code known to be right): python tests/model/test_speed_equivalence.py
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import dse

DATA = Path(__file__).parent.parent / "data" / "speed_equivalence.npz"
N = 40


def _designs(seed: int, stacks: tuple[int, int] = (3, 8)) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"compute.units": rng.integers(66, 265, N),
            "memory.L2.capacity": rng.uniform(10, 200, N) * 2.0**20,
            "memory.HBM3.stacks": rng.integers(*stacks, N)}


def cases() -> dict[str, Callable[[], dse.Evaluation]]:
    hw = dse.load_hardware("h100-sxm")
    llama, dlrm = dse.load_workload("llama2-70b"), dse.load_workload("dlrm-dcnv2")
    l8, bert = dse.load_workload("llama3-8b"), dse.load_workload("bert-large")
    mix = dse.load_workload("mixtral-8x7b")
    mixed, fit = _designs(0), _designs(1, (5, 8))
    dec = {"phase": "decode", "batch": 1, "seq_in": 1024, "seq_out": 128, "precision": "bf16",
           "chips": 2, "tp": 2}
    trn = {"phase": "training", "batch": 64, "seq_in": 4096, "precision": "bf16", "chips": 8,
           "tp": 2}
    return {
        "prefill": lambda: dse.evaluate(hw, llama, phase="prefill", batch=1, seq_in=1024,
                                        precision="bf16", chips=2, tp=2, overrides=mixed),
        "bert": lambda: dse.evaluate(hw, bert, "case-study-512", overrides=mixed),
        "bert_max": lambda: dse.evaluate(hw, bert, "mlperf-offline", overrides=mixed),
        "bert_best": lambda: dse.evaluate(hw, bert, "mlperf-offline", batch="best",
                                          latency_target="20 ms", overrides=mixed),
        "mixtral": lambda: dse.evaluate(hw, mix, "chat-decode", chips=2, tp=2,
                                        overrides=mixed),
        "serve_max": lambda: dse.evaluate(hw, l8, "serve-2048-128", overrides=mixed),
        "decode_fit": lambda: dse.evaluate(hw, llama, **dec, overrides=fit),
        "decode_mixed": lambda: dse.evaluate(hw, llama, **dec, overrides=mixed),
        "serve_best": lambda: dse.evaluate(hw, l8, "serve-2048-128", batch="best",
                                           overrides=mixed),
        "serve_best_target": lambda: dse.evaluate(hw, l8, "serve-2048-128", batch="best",
                                                  latency_target="15 ms", overrides=mixed),
        "dlrm_inference": lambda: dse.evaluate(hw, dlrm, "mlperf-offline", overrides=mixed),
        "llama_training": lambda: dse.evaluate(hw, l8, **trn, overrides=mixed),
        "dlrm_training": lambda: dse.evaluate(hw, dlrm, scenario="training", chips=8,
                                              overrides=mixed),
    }


def arrays(ev: dse.Evaluation) -> dict[str, np.ndarray]:
    """What must not change, as arrays (text as unicode)."""
    out = {"feasible": ev.feasible, "reason": np.asarray(ev.reason.tolist(), dtype=str),
           "sequences": ev.sequences, "memory_bytes": ev.memory_bytes,
           "ops_time": ev.ops_time, "ops_count": ev.ops_count}
    out.update({f"metric.{k}": v for k, v in ev.metrics.items()})
    for k, v in (ev.training or {}).items():
        out[f"training.{k}"] = np.asarray(v, dtype=str if v.dtype == object else v.dtype)
    return out


def _save() -> None:
    saved = {f"{case}/{k}": v for case, run in cases().items()
             for k, v in arrays(run()).items()}
    np.savez_compressed(DATA, **saved)


@pytest.fixture(scope="module")
def saved() -> dict[str, np.ndarray]:
    with np.load(DATA) as f:
        return dict(f)


@pytest.mark.parametrize("case", list(cases()))
def test_same_numbers_as_before(case: str, saved: dict[str, np.ndarray]) -> None:
    got = arrays(cases()[case]())
    want = {k.split("/", 1)[1]: v for k, v in saved.items() if k.startswith(case + "/")}
    assert want, f"no saved values for {case}"
    assert set(got) == set(want)
    for k, w in want.items():
        g = got[k]
        assert g.shape == w.shape, k
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=0, equal_nan=True, err_msg=k)
        else:
            np.testing.assert_array_equal(g, w, err_msg=k)


if __name__ == "__main__":
    sys.exit(_save())
