"""Shared test helpers of the model tests."""

import importlib
from collections.abc import Callable

import pytest

EVALUATE = importlib.import_module("dse.model.evaluate")


def op_times_calls(run: Callable[[], object]) -> list[tuple]:
    """The (batch, ops, home, act_home) of every op_times call `run()` makes through
    dse.evaluate."""
    calls = []
    real = EVALUATE.op_times

    def spy(*args):
        calls.append(args)
        return real(*args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(EVALUATE, "op_times", spy)
        run()
    assert calls
    return calls

