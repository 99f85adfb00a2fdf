"""Speed of every case of issue 26's "Speed" section, next to a plain-numpy decode roofline
(the "numpy limit") measured in the same run. Designs vary SMs, L2 and HBM stacks (3-7
stacks of 16 GiB leave Llama-2-70B on 2 chips short on ~40% of them; 5-7 stacks fit it).
Process CPU time, median of interleaved rounds; the fixed cost per call is the median over
many calls with one design.

Usage: python tools/bench_speed.py [rounds] [designs] [case substring ...]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

import dse

HBM_STACK_BYTES = 16 * 2.0**30  # h100-sxm's HBM3 stack (hwspecs/h100-sxm.yaml)


def designs(n: int, seed: int = 0, stacks: tuple[int, int] = (3, 8)) -> dict[str, np.ndarray]:
    """SMs, L2 and HBM stacks varied; 3-4 stacks (16 GiB each) leave a 70B model short."""
    rng = np.random.default_rng(seed)
    return {"compute.units": rng.integers(66, 265, n),
            "memory.L2.capacity": rng.uniform(10, 200, n) * 2.0**20,
            "memory.HBM3.stacks": rng.integers(*stacks, n)}


def numpy_decode(d: dict[str, np.ndarray]) -> np.ndarray:
    """The decode roofline in plain numpy: per token, max(weights / HBM bandwidth, FLOPs /
    compute rate) on 2 chips, and whether the weights fit (Llama-2-70B bf16, batch 1, 128
    tokens). The floor a vectorized model cannot beat."""
    weights = 2 * 69e9 / 2  # bytes per chip
    flops = 2 * 69e9 / 2  # per token per chip
    bw = d["memory.HBM3.stacks"] * 0.67e12  # B/s per stack
    rate = d["compute.units"] * 1024 * 1.83e9  # FLOP/s (bf16, dense)
    t = 128 * np.maximum(weights / bw, flops / rate)
    fits = d["memory.HBM3.stacks"] * HBM_STACK_BYTES >= weights
    return np.where(fits, t, np.nan)


def cases(n: int) -> dict[str, tuple[int, Callable[[], object]]]:
    """name -> (designs, one call)."""
    hw = dse.load_hardware("h100-sxm")
    llama, dlrm = dse.load_workload("llama2-70b"), dse.load_workload("dlrm-dcnv2")
    l8, bert = dse.load_workload("llama3-8b"), dse.load_workload("bert-large")
    mix = dse.load_workload("mixtral-8x7b")
    mixed, fit = designs(n), designs(n, stacks=(5, 8))
    small = max(n // 10, 1)  # the slow paths at a tenth of the designs
    mixed_small = designs(small, 1)
    one = designs(1, stacks=(5, 8))
    dec = {"phase": "decode", "batch": 1, "seq_in": 1024, "seq_out": 128, "precision": "bf16",
           "chips": 2, "tp": 2}
    trn = {"phase": "training", "batch": 64, "seq_in": 4096, "precision": "bf16", "chips": 8,
           "tp": 2}
    return {
        "numpy limit (decode roofline)": (n, lambda: numpy_decode(mixed)),
        "prefill (Llama-2-70B, 2 chips)": (n, lambda: dse.evaluate(
            hw, llama, phase="prefill", batch=1, seq_in=1024, precision="bf16", chips=2,
            tp=2, overrides=fit)),
        "BERT-Large inference": (n, lambda: dse.evaluate(
            hw, bert, "case-study-512", overrides=mixed)),
        "Mixtral decode": (n, lambda: dse.evaluate(
            hw, mix, "chat-decode", chips=2, tp=2, overrides=mixed)),
        "serve batch max (Llama-3-8B)": (n, lambda: dse.evaluate(
            hw, l8, "serve-2048-128", overrides=mixed)),
        "decode, all fit (Llama-2-70B)": (n, lambda: dse.evaluate(
            hw, llama, **dec, overrides=fit)),
        "decode, 40% do not fit": (n, lambda: dse.evaluate(hw, llama, **dec, overrides=mixed)),
        "serve batch best (Llama-3-8B)": (small, lambda: dse.evaluate(
            hw, l8, "serve-2048-128", batch="best", overrides=mixed_small)),
        "DLRM inference": (n, lambda: dse.evaluate(
            hw, dlrm, "mlperf-offline", overrides=mixed)),
        "Llama training, planner (Llama-3-8B, 8 chips)": (small, lambda: dse.evaluate(
            hw, l8, **trn, overrides=mixed_small)),
        "DLRM training (8 chips)": (small, lambda: dse.evaluate(
            hw, dlrm, scenario="training", chips=8, overrides=mixed_small)),
        "per call, decode, 1 design": (1, lambda: dse.evaluate(hw, llama, **dec,
                                                               overrides=one)),
        "per call, serve best, 1 design": (1, lambda: dse.evaluate(
            hw, l8, "serve-2048-128", batch="best", overrides=one)),
        "per call, Llama training, 1 design": (1, lambda: dse.evaluate(
            hw, l8, **trn, overrides=one)),
    }


def cpu(f: Callable[[], object], repeat: int = 1) -> float:
    t = time.process_time()
    for _ in range(repeat):
        f()
    return (time.process_time() - t) / repeat


def main(rounds: int = 5, n: int = 100_000, only: tuple[str, ...] = ()) -> None:
    run = {k: v for k, v in cases(n).items() if not only or any(o in k for o in only)}
    times: dict[str, list[float]] = {k: [] for k in run}
    for name, (_, f) in run.items():
        ev = f()  # warm-up
        if hasattr(ev, "feasible"):
            print(f"{name}: {1 - ev.feasible.mean():.0%} do not fit", flush=True)
    for _ in range(rounds):
        for name, (m, f) in run.items():
            times[name].append(cpu(f, 20 if m == 1 else 1))
    for name, (m, _) in run.items():
        med = statistics.median(times[name])
        print(f"| {name} | {m:,} | {med * 1e3:.2f} ms | {m / med:,.0f} |")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(int(args[0]) if args else 5, int(args[1]) if len(args) > 1 else 100_000,
         tuple(args[2:]))
