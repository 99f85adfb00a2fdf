"""Every registered phase keeps the phase contract (dse.contracts.phase_problems), run on a
chip and a workload whose kind runs it; a phase that breaks a rule is reported."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dse import phases
from dse.contracts import phase_problems
from dse.phases import Phase, Rates, step_rates
from dse.spec.load import load_hardware, load_workload

# A shipped workload of a kind that runs each built-in phase.
RUNS_ON = {"gemm": "gemm:4096x4096x4096", "prefill": "llama3-8b", "decode": "llama3-8b",
           "serve": "llama3-8b", "inference": "bert-large", "training": "gpt2"}


def test_every_built_in_phase_has_a_workload_here() -> None:
    assert set(RUNS_ON) == set(phases.names())


@pytest.mark.parametrize("name", list(RUNS_ON))
def test_built_in_phase_keeps_the_contract(name: str) -> None:
    problems = phase_problems(phases.get(name), load_hardware("h100-sxm"),
                              load_workload(RUNS_ON[name]))
    assert problems == []


def _slow_is_fast(r: Rates) -> dict[str, np.ndarray]:
    m = step_rates(r)
    m["samples_per_s"] = r.time * 1e3  # wrong: more throughput the slower the step
    return m


def test_the_contract_finds_a_broken_phase() -> None:
    bad = dataclasses.replace(phases.get("inference"), name="Broken Phase", summary=" ",
                              rates=_slow_is_fast, headline=("samples_per_s", "nope_s"))
    problems = phase_problems(bad)
    assert any("name 'Broken Phase'" in p for p in problems)
    assert any(p.startswith("summary") for p in problems)
    assert any("metric nope_s: not defined" in p for p in problems)
    assert any("samples_per_s does not fall as the step gets slower" in p for p in problems)


def test_a_phase_whose_rates_fail_is_reported_not_raised() -> None:
    def boom(r: Rates) -> dict[str, np.ndarray]:
        raise ZeroDivisionError("x")

    bad: Phase = dataclasses.replace(phases.get("prefill"), rates=boom)
    assert phase_problems(bad) == ["rates: failed on a synthetic step: ZeroDivisionError: x"]
