"""Scenario resolution: --phase picks that phase's own scenario or its documented default,
never another phase's lengths."""

import pytest

import dse
from dse import phases
from dse.errors import DseError
from dse.workloads import describe_scenario, resolve_scenario


def test_phase_picks_the_first_scenario_of_that_phase():
    llama70 = dse.load_workload("llama2-70b")
    name, sc = resolve_scenario(llama70, phase="prefill")
    assert name == "ttft-128-fp16" and sc.seq_in == 128  # not the decode scenario's 5 tokens
    llama3 = dse.load_workload("llama3-70b")  # its first scenario serves with batch max
    name, sc = resolve_scenario(llama3, phase="decode")
    assert name == "chat-decode" and sc.batch == 1


def test_a_phase_the_file_lacks_runs_its_documented_default():
    gpt2 = dse.load_workload("gpt2")  # no serve scenario; context 1024
    name, sc = resolve_scenario(gpt2, phase="serve")
    assert name == "serve (default)"
    assert sc.batch == phases.get("serve").default["batch"] == "max"
    assert sc.seq_in + sc.seq_out <= 1024  # capped at the model's context
    assert sc.seq_out == phases.get("serve").default["seq_out"]


def test_fields_given_replace_the_scenarios():
    bert = dse.load_workload("bert-large")
    name, sc = resolve_scenario(bert, phase="inference", seq_in=512)
    assert name == "mlperf-offline" and sc.seq_in == 512 and sc.batch == "max"
    assert sc.lengths is None  # a named length replaces the distribution (issue 23)
    assert resolve_scenario(bert, phase="inference", batch=1)[1].lengths.name == "squad-v1.1"
    with pytest.raises(DseError, match="unknown scenario 'nope'"):
        resolve_scenario(bert, "nope")
    with pytest.raises(DseError, match=r"^phase: expected one of"):
        resolve_scenario(bert, phase="sleep")


def test_scenarios_describe_themselves_in_one_line():
    llama7 = dse.load_workload("llama2-7b")
    assert describe_scenario(llama7.scenarios["chat-decode"]) == \
        "decode, batch 1, seq_in 5, seq_out 200, bf16"
    assert describe_scenario(llama7.scenarios["ttft-128-fp8"]) == \
        "prefill, batch 1, seq_in 128, fp8"
    bert = dse.load_workload("bert-large")
    assert describe_scenario(bert.scenarios["mlperf-offline"]) == \
        "inference, batch max, seq_in 384, lengths squad-v1.1 (mean 178.5), int8"


def test_a_scenario_replaced_by_options_keeps_naming_only_its_engine_fields():
    from dse.spec.workload import Scenario

    wl = dse.load_workload("llama3-8b")
    sc = Scenario(phase="serve", batch="max", seq_in=512, seq_out=256,
                  engine={"iteration_overhead": "2 ms"})
    wl = wl.model_copy(update={"scenarios": {"chat": sc}})
    _, replaced = resolve_scenario(wl, "chat", seq_in=256)
    assert describe_scenario(replaced).endswith("engine iteration_overhead=2 ms")
    assert replaced.engine.iteration_overhead == pytest.approx(2e-3)
