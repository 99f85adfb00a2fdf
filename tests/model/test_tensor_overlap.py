"""Tensor-parallel communication overlap as a stack does it (stack `overlap.tensor`:
Transformer Engine's userbuffers under NeMo / Megatron-Bridge): the all-gathers and
reduce-scatters pipelined with the GEMMs, one chunk in tp exposed, and what the GEMMs
cannot cover. Only with tp > 1 and sequence parallelism; other stacks are unchanged."""

from pathlib import Path

import numpy as np
import pytest

import dse
from dse import Execution
from dse.model.operators import ChipOps
from dse.model.training_plugins import hide_tensor


def _ops(kinds: list[str]) -> ChipOps:
    i = len(kinds)
    z = np.zeros(i)
    return ChipOps(name=np.array([f"op{k}" for k in range(i)], dtype=object),
                   kind=np.array(kinds, dtype=object),
                   stage=np.array(["forward"] * i, dtype=object),
                   dtype=np.array(["bf16"] * i, dtype=object),
                   wdtype=np.array([""] * i, dtype=object), count=np.ones(i), flops=z,
                   read=np.zeros((i, 6)), written=np.zeros((i, 6)), onchip=z,
                   shape=np.zeros((i, 4)), launches=np.ones(i))


@pytest.mark.parametrize("gemm_s, comm_s, tp, exposed_s", [
    (100.0, 10.0, 4, 2.5),  # the GEMMs cover it: one chunk in four shows
    (5.0, 10.0, 4, 5.0),  # they cannot: the rest shows
    (100.0, 10.0, 8, 1.25),
])
def test_exposed_part_by_hand(gemm_s, comm_s, tp, exposed_s):
    ops = _ops(["gemm", "norm"])
    # columns: the two operators, then two tensor collectives of 4 and 6 instances... of
    # 1 s each: comm_s split 40/60 over them
    time = np.array([[gemm_s / 2, 3.0, 1.0, 1.0]])
    count = np.array([2.0, 1.0, 0.4 * comm_s, 0.6 * comm_s])
    role = np.array(["", "", "tensor", "tensor"], dtype=object)
    assert hide_tensor(time, count, ops, role, tp)
    assert (time[0, 2:] * count[2:]).sum() == pytest.approx(exposed_s)
    assert time[0, 0] == gemm_s / 2 and time[0, 1] == 3.0  # the operators keep their time


ROOT = Path(__file__).resolve().parents[2]


def _step(stack: str, sequence_parallel: bool, tp: int = 8) -> float:
    ex = Execution(chips=64, tp=tp, pp=1, micro_batch=1, zero=1, recompute="full",
                   sequence_parallel=sequence_parallel)
    ev = dse.evaluate(dse.load_hardware("h100-sxm"), dse.load_workload("llama3-70b"),
                      phase="training", batch=64, seq_in=8192, precision="bf16",
                      execution=ex, stack=stack)
    assert ev.feasible[0], ev.reason[0]
    return float(ev.metrics["step_time_s"][0])


@pytest.fixture
def no_overlap(tmp_path: Path) -> str:
    """megatron-te as shipped but for its tensor overlap."""
    text = (ROOT / "stacks" / "megatron-te.yaml").read_text()
    assert "  tensor: true" in text
    path = tmp_path / "te-no-overlap.yaml"
    path.write_text(text.replace("name: megatron-te", "name: te-no-overlap")
                    .replace("  tensor: true", "  tensor: false"))
    return str(path)


def test_megatron_te_hides_tensor_collectives_with_sequence_parallelism(no_overlap):
    assert _step("megatron-te", True) < _step(no_overlap, True)


def test_no_overlap_without_sequence_parallelism(no_overlap):
    assert _step("megatron-te", False) == _step(no_overlap, False)
