"""The study runner's speed against Optuna's own cost (pytest-benchmark; skipped by default:
python -m pytest tests/search/test_benchmark_study.py --benchmark-only -s). The same run
with an empty objective (constant values, the same constraints, sampler, batches and
journal) is Optuna's cost; the difference is the model's and the tables'."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from dse.search import run as runner
from dse.search.objective import Outcome
from dse.search.space import load_study

ROOT = Path(__file__).parents[2]
TRIALS = 10_000
_count = itertools.count()


def empty(study, params, baseline) -> Outcome:
    n = len(next(iter(params.values())))
    rng = np.random.default_rng(0)
    values = rng.random((n, len(study.goals)))
    cons = {k: np.full(n, -1.0) for k in ("area_mm2", "reticle_mm2", "shoreline_mm2",
                                           "unfit_workloads")}
    return Outcome(values, cons, np.ones(n, dtype=bool), np.full(n, "", dtype=object), {},
                   {})


@pytest.mark.parametrize("objective", ["model", "empty"])
def test_middle_ground_10000_trials(benchmark, tmp_path: Path, objective: str) -> None:
    study = load_study(ROOT / "studies" / "middle-ground.yaml")

    def once() -> runner.Progress:
        out = tmp_path / f"run{next(_count)}"
        if objective == "model":
            return runner.run(study, runner.Options(out=out, trials=TRIALS))
        return runner.run(study, runner.Options(out=out, trials=TRIALS), evaluator=empty)

    prog = benchmark.pedantic(once, rounds=1, iterations=1)
    assert prog.done == TRIALS
    print(f"\n{objective}: {TRIALS} trials, {prog.rate:,.0f} trials/s")
