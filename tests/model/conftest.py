"""Shared test helpers of the model tests."""

import importlib
from collections.abc import Callable

import pytest

STAGES = importlib.import_module("dse.model.stages")


def op_times_calls(run: Callable[[], object]) -> list[tuple]:
    """The (batch, ops, home, act_home) of every op_times call `run()` makes through
    dse.evaluate (the pipeline calls it from dse.model.stages.timed)."""
    calls = []
    real = STAGES.op_times

    def spy(*args):
        calls.append(args)
        return real(*args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(STAGES, "op_times", spy)
        run()
    assert calls
    return calls



def without_engine_limits(wl):
    """`wl` with a first serve scenario whose engine sets no max batch and no token budget,
    so that `phase="serve"` sizes batch max on memory alone (tests of per-design batches)."""
    from dse.spec.workload import Engine, Scenario

    engine = Engine(max_batch=None, max_tokens_per_iteration=None)
    first = Scenario(phase="serve", batch="max", seq_in=1024, seq_out=128, engine=engine)
    return wl.model_copy(update={"scenarios": {"serve-no-limits": first, **wl.scenarios}})
