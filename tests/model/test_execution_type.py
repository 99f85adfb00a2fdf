"""One execution type (issue 26, item 3): chips, every parallel degree and the training
strategy travel in one `Execution`; the scenario's `training:` block fills the fields it
leaves open, and the evaluation records what ran."""

from __future__ import annotations

import pytest

import dse
from dse.model.execution import STRATEGY, Execution
from dse.spec.workload import Scenario, Training


def _wl(name: str = "llama2-7b", **training):
    wl = dse.load_workload(name)
    sc = Scenario(phase="training", batch=64, seq_in=2048, precision="bf16",
                  training=Training(**training) if training else None)
    return wl.model_copy(update={"scenarios": {"train": sc, **wl.scenarios}})


H100 = dse.load_hardware("h100-sxm")


def test_the_scenario_fills_what_the_execution_leaves_open() -> None:
    t = Training(context_parallel=2, zero=1, recompute="full")
    ex = Execution(chips=8, tp=2, recompute="none").with_training(t)
    assert (ex.cp, ex.zero, ex.recompute) == (2, 1, "none")  # the execution's own wins
    assert ex.replicas == 2  # 4 data-parallel ranks, 2 per sequence
    assert Execution(chips=8).with_training(None) == Execution(chips=8)
    fields = ex.training_fields()
    assert fields["context_parallel"] == 2 and set(STRATEGY) <= set(fields)


def test_a_strategy_given_as_execution_runs_as_the_scenario_block() -> None:
    by_block = dse.evaluate(H100, _wl(context_parallel=2, zero=1, micro_batch=1), chips=8)
    by_execution = dse.evaluate(H100, _wl(), execution=Execution(chips=8, cp=2, zero=1,
                                                                 micro_batch=1))
    assert by_block.metrics["step_time_s"][0] == pytest.approx(
        by_execution.metrics["step_time_s"][0], rel=1e-12)
    assert by_execution.execution.cp == 2 and by_execution.execution.zero == 1
    assert by_execution.training["zero"][0] == 1


def test_the_evaluation_records_the_execution() -> None:
    ev = dse.evaluate(H100, _wl(zero=2), chips=4)
    assert ev.execution == Execution(chips=4, zero=2)
    assert ev.execution.micro_batch is None  # chosen per design: ev.training says which
    inference = dse.evaluate(H100, dse.load_workload("llama2-7b"), phase="decode", chips=2,
                             tp=2)
    assert inference.execution == Execution(chips=2, tp=2)


def test_degrees_the_replicas_cannot_hold_are_refused() -> None:
    with pytest.raises(dse.DseError, match=r"context_parallel \(3\) and expert_parallel "
                                           r"\(1\) must divide the 4 data-parallel ranks"):
        dse.evaluate(H100, _wl(), execution=Execution(chips=4, cp=3))
    with pytest.raises(dse.DseError, match=r"^cp: expected a whole number"):
        Execution(cp=0)
