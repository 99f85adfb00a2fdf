"""Nothing silent (issue 26, item 5): unknown tensor classes, footprint keys, data types and
operand roles are errors; an overlap window or pipeline send that cannot be found is an
error; a non-finite value produced by the step or metrics stage is an error naming both."""

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import STAGES

import dse
from dse.model import training_plugins
from dse.model.batch import design_batch
from dse.model.execution import Execution
from dse.model.parallel import collectives_of
from dse.model.placement import Footprint, place
from dse.model.stages import NonFiniteError
from dse.model.training_memory import TrainingPlan, plan_training_memory
from dse.workloads.optable import DTYPE_BYTES, Facts, OpRow, OpTable, TensorClass

H100 = dse.load_hardware("h100-sxm")
LLAMA3_8B = dse.load_workload("llama3-8b")
PB = 1e15


def test_footprint_refuses_a_class_no_rule_places():
    with pytest.raises(ValueError, match=r"'weightz' is not a placed tensor class; "
                                         r"expected one of: weights, kv_cache"):
        Footprint({"weightz": np.array(PB)})
    with pytest.raises(ValueError, match="'activations' is not a placed tensor class"):
        Footprint({"weights": np.array(1.0)})["activations"]
    assert Footprint({"weights": np.array(1.0)})["kv_cache"] == 0.0  # left out: 0 bytes


def test_place_refuses_an_unknown_class_instead_of_dropping_it():
    """1 PB of a class named "weightz" on an H100 was feasible with 0 bytes used."""
    db = design_batch(H100)
    fp = Footprint({"weights": np.array(PB)})
    assert not place(db, fp).feasible[0]
    fp.bytes["weightz"] = fp.bytes.pop("weights")  # a dict changed after the check
    with pytest.raises(ValueError, match="'weightz' is not a placed tensor class"):
        place(db, fp)


def test_place_refuses_an_unknown_offload_class_or_level():
    db = design_batch(H100)
    fp = Footprint({"weights": np.array(1e9)})
    with pytest.raises(ValueError, match="offload of 'optimiser_state' is not a placed"):
        place(db, fp, {"optimiser_state": (db.level_names[-1],)})
    with pytest.raises(ValueError, match=r"offload of 'weights': no memory level 'HBM9'; "
                                         r"expected one of: .*HBM3"):
        place(db, fp, {"weights": ("HBM9",)})


def _facts() -> Facts:
    return Facts(phase="gemm", batch=1.0, seq_in=0.0, seq_out=0.0, resident={})


@pytest.mark.parametrize(("field", "value", "what"), [("dtype", "bf17", "data type"),
                                                      ("wdtype", "int3", "weight data type")])
def test_an_unknown_data_type_is_an_error_not_2_bytes(field, value, what):
    row = OpRow("mm", "gemm", "other", 1.0, 2.0, m=1, n=1, k=1, **{field: value})
    with pytest.raises(ValueError, match=f"operator mm: unknown {what} '{value}'; expected "
                                         f"one of: {', '.join(DTYPE_BYTES)}"):
        OpTable.from_rows([row], _facts())
    ok = OpTable.from_rows([OpRow("mm", "gemm", "other", 1.0, 2.0, wdtype="")], _facts())
    assert list(ok.wdtype) == [""]  # "" (no weights read) stays allowed


def test_an_unknown_operand_role_is_an_error():
    with pytest.raises(ValueError, match="tensor class scratch: unknown GEMM-operand role "
                                         "'c'; expected one of: 'a', 'b', ''"):
        TensorClass("scratch", placed=False, operand="c")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("compression", math.inf, "compression: expected a finite number, found inf"),
    ("compression", math.nan, "compression: expected a finite number, found nan"),
    ("compression", np.array([2.0, np.inf]), "compression: expected a finite number"),
    ("micro_batch", math.nan, "micro_batch: expected a finite number, found nan"),
    ("offload_optimizer", math.nan, r"offload_optimizer: expected a share in \[0, 1\]"),
])
def test_training_plan_refuses_non_finite_values(field, value, message):
    """An infinite compression divided the stored activations down to 0 bytes."""
    with pytest.raises(ValueError, match=message):
        plan_training_memory(LLAMA3_8B, TrainingPlan(seq=2048, **{field: value}))


@dataclasses.dataclass(frozen=True)
class _Step:  # the fields of stages.Step that training_plugins.overlapped reads
    ops: SimpleNamespace
    names: np.ndarray
    time: np.ndarray
    count: np.ndarray
    total: np.ndarray
    role: np.ndarray

    def of_role(self, role: str) -> np.ndarray:
        return self.role == role


def _step(kinds: list[str], roles: list[str]) -> _Step:
    """Operators of these kinds (forward), then collectives of these roles."""
    k = len(kinds) + len(roles)
    ops = SimpleNamespace(name=np.array(kinds, dtype=object),
                          kind=np.array(kinds, dtype=object),
                          stage=np.array(["forward"] * len(kinds), dtype=object))
    return _Step(ops=ops, names=np.array(kinds + roles, dtype=object), time=np.ones((1, k)),
                 count=np.ones((1, k)), total=np.full(1, float(k)),
                 role=np.array([""] * len(kinds) + roles, dtype=object))


def test_context_exchange_without_attention_operators_is_an_error():
    """The window of ring attention's K/V exchange was 0 s when no operator was found; the
    operators are found by kind and the exchange by its role, not by name."""
    full = _step(["attention_score", "softmax", "attention_value"], ["context_kv_gather"])
    assert training_plugins.overlapped(full, 1.0).time[0, -1] == 0.0  # hidden under attention
    with pytest.raises(ValueError, match="overlap window of the context-parallel exchange: "
                                         "no forward operator of kind attention_score, "
                                         "attention_value"):
        training_plugins.overlapped(_step(["softmax"], ["context_kv_gather"]), 1.0)
    # no exchange, no window needed: a step without attention rows is fine (the parameter
    # all-gather's window is the forward these rows are; a gradient reduce without backward
    # rows is an error now, tests/model/test_hierarchical_collectives.py)
    assert training_plugins.overlapped(_step(["gemm"], ["parameter_all_gather"]),
                                       1.0).total[0] > 0


def test_pipeline_training_without_its_stage_send_is_an_error():
    none = collectives_of([], [], [], [], [], [], [])
    with pytest.raises(ValueError, match=r"training with pp = 2: the table's collectives have "
                                         r"no pipeline_send.*found: none"):
        training_plugins.training_collectives(none, LLAMA3_8B, None,
                                              Execution(chips=2, pp=2), 1.0)


def _patched_times(mp: pytest.MonkeyPatch, value: float) -> None:
    """Every operator of the first design takes `value` seconds (op_times otherwise)."""
    real = STAGES.op_times

    def fake(*args):
        out = real(*args)
        out.time[0] = value
        return out

    mp.setattr(STAGES, "op_times", fake)


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_non_finite_step_time_is_an_error_naming_stage_and_metric(value):
    with pytest.MonkeyPatch.context() as mp:
        _patched_times(mp, value)
        with pytest.raises(NonFiniteError, match=r"stage step: step_time_s of design 0 is "
                                                 rf"{value} \(first non-finite: "):
            dse.evaluate(H100, LLAMA3_8B, phase="decode", batch=1, seq_in=128, seq_out=16)


def test_a_non_finite_metric_is_an_error_naming_stage_and_metric():
    with pytest.MonkeyPatch.context() as mp, np.errstate(divide="ignore"):
        _patched_times(mp, 0.0)  # a step of 0 s: an infinite throughput
        with pytest.raises(NonFiniteError, match="stage metrics: decode_tokens_per_s of "
                                                 "design 0 is inf"):
            dse.evaluate(H100, LLAMA3_8B, phase="decode", batch=1, seq_in=128, seq_out=16)


def test_infinite_time_of_a_design_without_links_stays_an_infeasible_design():
    """Two M2 Ultras share no links: their collectives take infinite time by design."""
    ev = dse.evaluate(dse.load_hardware("apple-m2-ultra"), LLAMA3_8B, phase="decode",
                      batch=1, seq_in=128, seq_out=16, chips=2, tp=2)
    assert not ev.feasible[0] and "no chip-to-chip links" in ev.reason[0]
    assert np.isinf(ev.ops_time).any() and np.isnan(ev.metrics["tpot_s"][0])
