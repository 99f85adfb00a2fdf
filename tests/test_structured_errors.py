"""Issue 26 item 5: errors carry structured fields (field, value, rule) and each route words
them -- the command line as its option, the API as its keyword, a study at its key, a
measurements CSV as its column -- with no caller parsing the text back; infeasibility
reasons carry a code and an amount that callers read instead of the words."""

from __future__ import annotations

import pickle
import re
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import dse
from dse import validate
from dse.cli import app
from dse.errors import DseError, SpecError
from dse.model import reasons as R
from dse.model.reasons import Reasons
from dse.search import outputs
from dse.search.chips import MEMORY_SHORT
from dse.search.space import load_study

runner = CliRunner()
H100 = dse.load_hardware("h100-sxm")
LLAMA = dse.load_workload("llama2-7b")
ROOT = Path(__file__).resolve().parents[1]
NEEDS = "phase decode needs seq_out >= 1 (tokens to generate)"


def _cli(*args: str) -> tuple[int, str]:
    r = runner.invoke(app, list(args))
    assert "Traceback" not in r.output
    return r.exit_code, r.stderr


def _study(tmp_path: Path, workload: str, parameters: str = "compute.units: {low: 66, "
           "high: 132}") -> Path:
    f = tmp_path / "s.yaml"
    f.write_text(textwrap.dedent(f"""\
        source: test
        base: h100-sxm
        parameters:
          {parameters}
        workloads:
          w: {workload}
        objectives:
          t: {{maximize: throughput}}
        """))
    return f


def _study_error(path: Path) -> str:
    with pytest.raises(SpecError) as e:
        load_study(path)
    (line,) = e.value.lines()
    return line


def test_a_dse_error_carries_its_field_value_and_rule():
    e = DseError("expected a whole number, found 2.5", field="seq_in", value=2.5,
                 rule="a whole number")
    assert (e.field, e.domain, e.value, e.has_value, e.rule) == ("seq_in", "scenario", 2.5,
                                                                 True, "a whole number")
    assert e.message == "expected a whole number, found 2.5"
    assert str(e) == "seq_in: expected a whole number, found 2.5"  # the API's words
    assert e.worded(lambda p: "--seq-in") == "--seq-in: expected a whole number, found 2.5"
    both = DseError.together([e, DseError("3: ...", field="tp", domain="execution",
                                          value=3, inline=True)])
    assert str(both) == "seq_in: expected a whole number, found 2.5; tp 3: ..."
    odd = DseError("4 is not a multiple", field="chips", domain="execution", inline=True)
    assert (str(odd), odd.worded(lambda p: "--chips")) == ("chips: 4 is not a multiple",
                                                           "--chips 4 is not a multiple")
    assert [p.field for p in both.parts] == ["seq_in", "tp"]
    back = pickle.loads(pickle.dumps(both))  # across a worker's process boundary
    assert (str(back), back.field, back.value, [p.field for p in back.parts]) == (
        str(both), "seq_in", 2.5, ["seq_in", "tp"])
    plain = DseError("--format: expected table or json")
    assert plain.field is None and not plain.has_value and str(plain) == plain.message
    assert str(pickle.loads(pickle.dumps(plain))) == str(plain)
    with pytest.raises(ValueError, match="domain"):
        DseError("x", field="a", domain="hardware")


def test_each_route_words_a_scenario_field_its_own_way(tmp_path):
    """One problem (a decode scenario asked for no tokens), raised once in the spec layer
    with field seq_out: the option on the CLI, the keyword in the API, the key in a study."""
    with pytest.raises(DseError) as e:
        dse.evaluate(H100, LLAMA, "chat-decode", seq_out=0)
    assert (e.value.field, e.value.value, str(e.value)) == ("seq_out", 0, f"seq_out: {NEEDS}")
    code, err = _cli("eval", "h100-sxm", "llama2-7b", "--scenario", "chat-decode",
                     "--seq-out", "0")
    assert (code, err) == (2, f"--seq-out: {NEEDS}\n")
    path = _study(tmp_path, "{workload: llama2-7b, scenario: chat-decode, seq_out: 0}")
    assert _study_error(path) == f"{path}:6:60: workloads.w.seq_out: {NEEDS}"


def test_a_study_places_each_simple_field_at_its_key(tmp_path):
    """latency_target, new to studies, is placed at its own key like the others."""
    path = _study(tmp_path, "{workload: llama2-7b, phase: serve, latency_target: 20 ms}")
    assert _study_error(path) == (f"{path}:6:58: workloads.w.latency_target: latency_target "
                                  "goes with batch 'best'")


def test_a_measurements_row_names_the_column(tmp_path):
    head = ",".join(validate.COLUMNS)
    f = tmp_path / "m.csv"
    f.write_text(f"{head}\nM1,h100-sxm,1,1,1,llama2-7b,decode,fp13,1,128,16,"
                 "output_tokens_per_s,100\n")
    with pytest.raises(DseError) as e:
        validate.run(f)
    assert str(e.value).startswith(f"{f}:2: precision: unknown value 'fp13'; expected one "
                                   "of: "), str(e.value)


def test_a_design_path_error_is_worded_per_route():
    with pytest.raises(DseError) as e:
        dse.evaluate(H100, LLAMA, overrides={"compute.units": "lots"})
    assert (e.value.field, e.value.domain) == ("compute.units", "design")
    assert str(e.value).startswith("compute.units: expected ")
    code, err = _cli("eval", "h100-sxm", "llama2-7b", "--set", "compute.units=lots")
    assert code == 2 and err == f"--set {e.value}\n"


def test_an_execution_error_is_worded_per_route(tmp_path):
    """tp that does not divide the heads: `--tp 3: ...` on the CLI (as before), `tp 3:
    ...` from the API and in a study (the study gave `--tp 3` before)."""
    says = ("3: tensor parallelism splits the 32 attention heads of llama2-7b; expected a "
            "divisor of 32")
    with pytest.raises(DseError) as e:
        dse.evaluate(H100, LLAMA, chips=3, tp=3)
    assert (e.value.field, e.value.domain, e.value.value) == ("tp", "execution", 3)
    assert str(e.value) == f"tp {says}"
    assert _cli("eval", "h100-sxm", "llama2-7b", "--chips", "3", "--tp", "3") == (
        2, f"--tp {says}\n")
    path = _study(tmp_path, "{workload: llama2-7b, chips: 3, tp: 3}")
    assert _study_error(path) == f"{path}:6:6: workloads.w: tp {says}"
    with pytest.raises(DseError) as e:
        dse.evaluate(H100, LLAMA, chips=4, tp=3)  # Execution: the value reads on
    assert str(e.value).startswith("chips: 4 is not a multiple of tp x pp = 3; ")
    assert _cli("eval", "h100-sxm", "llama2-7b", "--chips", "4", "--tp", "3")[1].startswith(
        "--chips 4 is not a multiple of tp x pp = 3; ")


def test_model_and_spec_messages_are_not_worded_in_flags():
    """The flag wording lives in the routes (dse.cli*): a model or spec error names its
    field structured (an overflow of a derived quantity is a design error: --set on the
    command line)."""
    raised = re.compile(r'DseError\(\s*f?"--')
    found = []
    for folder in ("model", "spec", "workloads"):
        for path in sorted((ROOT / "dse" / folder).rglob("*.py")):
            text = path.read_text()
            found += [f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}"
                      for m in raised.finditer(text)]
    assert found == [], found


def test_reasons_carry_a_code_and_an_amount():
    caps = ["40 GiB", "80 GiB", "800 GiB"]
    ev = dse.evaluate(H100, dse.load_workload("llama2-70b"), phase="decode", batch=64,
                      overrides={"memory.HBM3.capacity": caps})
    short = ev.reason.amount(R.MEMORY)
    assert ev.reason.codes(R.MEMORY).tolist() == [True, False, False]
    assert short[0] > 0 and np.isnan(short[1:]).all()
    # 68.98 GB of weights + 4.299 GB of KV cache + 10.5 MiB of workspace (its reason's
    # words) against the 40 GiB that hold them
    assert short[0] == pytest.approx(68.98e9 + 4.299e9 + 10.5 * 2**20 - 40 * 2**30, rel=1e-3)
    assert ev.reason.codes(R.NO_LINK).tolist() == [False] * 3
    # the structure survives selection, joining and a pickle
    picked = ev.reason.take(np.array([2, 0]))
    assert picked.amount(R.MEMORY)[1] == short[0] and np.isnan(picked.amount(R.MEMORY)[0])
    joined = Reasons.concatenate([ev.reason, picked])
    assert joined.codes(R.MEMORY).tolist() == [True, False, False, False, True]
    assert np.isnan(ev.reason.only(np.array([False, True, True])).amount(R.MEMORY)).all()
    back = pickle.loads(pickle.dumps(ev.reason))
    assert back.tolist() == ev.reason.tolist()
    assert np.array_equal(back.amount(R.MEMORY), short, equal_nan=True)
    links = dse.evaluate(H100, LLAMA, phase="decode", chips=2, tp=2,
                         overrides={"interconnect.links": 0})
    assert links.reason.codes(R.NO_LINK).tolist() == [True]
    with pytest.raises(ValueError, match="unknown reason code"):
        Reasons.none(1).first(True, "x", code="memroy")


def test_training_memory_reasons_carry_their_amount():
    ev = dse.evaluate(H100, dse.load_workload("llama2-70b"), phase="training", batch=64,
                      seq_in=2048)
    assert ev.reason.codes(R.MEMORY).tolist() == [True]
    assert ev.reason.amount(R.MEMORY)[0] > 1e12  # ~1 TB of model states over 80 GiB


def test_the_closest_design_is_found_by_its_amount_not_its_words(tmp_path):
    """The study's "closest" trial is the one whose memory lacks the least, read from the
    amount column; the words of the reasons are not parsed (a reason that only says
    "short" in its text is not taken for the closest)."""
    study = load_study(_study(tmp_path, "{workload: llama2-7b, scenario: chat-decode}"))
    (name, col, _), = outputs.throughput_columns(study)
    trials = pd.DataFrame({
        "number": [0, 1, 2], "state": ["COMPLETE"] * 3, "feasible": [False] * 3,
        "reason": [f"{name}: weights exceed the memory (1 B short)",
                   f"{name}: weights exceed the memory", f"{name}: no words"],
        f"{name}.reason": ["weights exceed the memory (1 B short)",
                           "weights exceed the memory", "no words"],
        col: [np.nan] * 3, f"{name}.{MEMORY_SHORT}": [5e9, 2e9, np.nan]})
    ((count, why),) = outputs.infeasible_reasons(study, trials)
    assert count == 3 and why == (f"do not run {name} (closest: trial 1, weights exceed "
                                  "the memory)"), why
    trials[f"{name}.{MEMORY_SHORT}"] = np.nan  # no amounts: an example, not the closest
    ((_, why),) = outputs.infeasible_reasons(study, trials)
    assert why.startswith(f"do not run {name} (e.g.: trial 0, "), why
