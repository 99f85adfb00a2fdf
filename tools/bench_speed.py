"""Speed of the two paths issue 26 names: Llama-2-70B decode with ~40% of designs that do not
fit (the reason text), and DLRM training (distinct_rows). Process CPU time, median of 5
interleaved rounds. Usage: python tools/bench_speed.py [rounds]."""

import statistics
import sys
import time

import numpy as np

import dse


def designs(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """SMs, L2 and HBM stacks varied; 3-4 stacks (16 GiB each) leave a 70B model short."""
    rng = np.random.default_rng(seed)
    return {"compute.units": rng.integers(66, 265, n),
            "memory.L2.capacity": rng.uniform(10, 200, n) * 2.0**20,
            "memory.HBM3.stacks": rng.integers(3, 8, n)}


def main(rounds: int = 5) -> None:
    hw = dse.load_hardware("h100-sxm")
    llama, dlrm = dse.load_workload("llama2-70b"), dse.load_workload("dlrm-dcnv2")
    dec, trn = designs(100_000), designs(16_000, 1)
    cases = {
        "decode 100k": (100_000, lambda: dse.evaluate(
            hw, llama, phase="decode", batch=1, seq_in=1024, seq_out=128, precision="bf16",
            chips=2, tp=2, overrides=dec)),
        "dlrm training 16k": (16_000, lambda: dse.evaluate(
            hw, dlrm, scenario="training", chips=8, overrides=trn)),
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    for name, (_, f) in cases.items():
        ev = f()  # warm-up
        print(f"{name}: {1 - ev.feasible.mean():.0%} infeasible")
    for _ in range(rounds):
        for name, (_, f) in cases.items():
            t = time.process_time()
            f()
            times[name].append(time.process_time() - t)
    for name, (n, _) in cases.items():
        med = statistics.median(times[name])
        print(f"{name}: {med * 1e3:.0f} ms CPU, {n / med:,.0f} designs/s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
