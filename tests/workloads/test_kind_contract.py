"""Every registered workload kind keeps the kind contract (dse.contracts.kind_problems) on a
shipped workload of it."""

from __future__ import annotations

import pytest

from dse.contracts import kind_problems
from dse.spec.load import load_hardware, load_workload
from dse.workloads import KINDS

SAMPLES = {"transformer": ["llama3-8b", "bert-base"], "gemm": ["gemm:1024x2048x512"],
           "recommender": ["rm1"]}


def test_every_kind_has_a_sample_here() -> None:
    assert set(SAMPLES) == set(KINDS)


@pytest.mark.parametrize("kind,workload", [(k, w) for k, ws in SAMPLES.items() for w in ws])
def test_kind_keeps_the_contract(kind: str, workload: str) -> None:
    assert kind_problems(kind, load_workload(workload), load_hardware("h100-sxm")) == []


def test_the_contract_names_a_kind_that_is_not_registered() -> None:
    assert kind_problems("cnn", load_workload("rm1")) == [
        "kind cnn: not registered (dse.workloads.register_kind)"]
