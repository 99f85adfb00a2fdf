"""A phase of one's own is one module and one registration: a toy phase, registered here,
runs through `dse eval` (CLI and API), `dse validate` and `dse study` with no other change
to the tool (issue 26, item 1)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import dse
from dse import phases
from dse.cli import app
from dse.phases import Phase, Rates, step_rates
from dse.spec.load import load_hardware, load_workload


def _rates(r: Rates) -> dict[str, np.ndarray]:
    """Prompt tokens per second of the system, per chip, and the step as the first token."""
    m = step_rates(r)
    m["ttft_s"] = r.time
    m["tokens_per_s_per_chip"] = np.asarray(r.sequences) * r.seq_in / r.time / r.chips
    return m


# A long-context prompt pass ("chunked prefill of a 32k document"), its own defaults.
TOY = Phase(name="longprompt", summary="a 32k-token prompt pass, four documents",
            work="prefill", rates=_rates, throughput="tokens_per_s_per_chip",
            throughput_per_chip=True, headline=("ttft_s", "tokens_per_s_per_chip"),
            default={"batch": 4, "seq_in": 32768}, needs=("seq_in",), in_sequence=True,
            compared=("ttft_s",), energy_per=("token",))


@pytest.fixture
def toy() -> Iterator[Phase]:
    phases.register(TOY)
    yield TOY
    phases.unregister(TOY.name)


def test_registered_phase_is_known_everywhere(toy: Phase) -> None:
    assert toy.name in phases.names()
    assert phases.get(toy.name) is toy
    with pytest.raises(dse.DseError, match=r"phase: expected one of: .*longprompt"):
        phases.get("longprompts")  # and a misspelling is refused naming it


def test_unregistered_phase_is_refused() -> None:
    r = CliRunner().invoke(app, ["eval", "h100-sxm", "llama3-8b", "--phase", "longprompt"])
    assert r.exit_code == 2
    assert "expected one of: gemm, prefill, decode, serve, inference, training" in r.output


def test_eval_api_runs_the_toy_phase_with_its_defaults(toy: Phase) -> None:
    hw, wl = load_hardware("h100-sxm"), load_workload("llama3-8b")
    ev = dse.evaluate(hw, wl, phase=toy.name)
    assert ev.scenario.batch == 4 and ev.scenario.seq_in == 8192  # capped at the context
    assert ev.scenario_name == "longprompt (default)"
    # the same step as prefill with the same fields: the toy reuses prefill's work
    pre = dse.evaluate(hw, wl, phase="prefill", batch=4, seq_in=8192)
    assert ev.feasible[0] and pre.feasible[0]
    assert ev.metrics["ttft_s"][0] == pytest.approx(pre.metrics["ttft_s"][0], rel=1e-12)
    # its own metrics only: no output tokens
    assert np.isnan(ev.metrics["output_tokens_per_s"][0])


def test_eval_cli_shows_the_toy_headline(toy: Phase) -> None:
    r = CliRunner().invoke(app, ["eval", "h100-sxm", "llama3-8b", "--phase", toy.name,
                                 "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["scenario"]["phase"] == toy.name
    assert doc["metrics"]["ttft_s"] > 0


def test_validate_compares_the_toy_phase(toy: Phase, tmp_path: Path) -> None:
    hw, wl = load_hardware("h100-sxm"), load_workload("llama3-8b")
    predicted = float(dse.evaluate(hw, wl, phase=toy.name, batch=4,
                                   seq_in=4096).metrics["ttft_s"][0])
    csv = tmp_path / "mine.csv"
    csv.write_text("id,hardware,chips,tp,pp,workload,phase,precision,batch,seq_in,seq_out,"
                   "metric,value,confidence,source\n"
                   f"T1,h100-sxm,1,1,1,llama3-8b,{toy.name},bf16,4,4096,,ttft_s,"
                   f"{predicted * 1.25!r},high,a toy\n")
    r = CliRunner().invoke(app, ["validate", "--measurements", str(csv), "--format", "json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["rows"]
    assert rows[0]["phase"] == toy.name
    assert rows[0]["rel_error"] == pytest.approx(-0.2, rel=1e-9)


def test_validate_refuses_a_metric_the_phase_does_not_compare(toy: Phase,
                                                              tmp_path: Path) -> None:
    csv = tmp_path / "mine.csv"
    csv.write_text("id,hardware,chips,tp,pp,workload,phase,precision,batch,seq_in,seq_out,"
                   "metric,value,confidence,source\n"
                   f"T1,h100-sxm,1,1,1,llama3-8b,{toy.name},bf16,4,4096,,tpot_s,1,high,x\n")
    r = CliRunner().invoke(app, ["validate", "--measurements", str(csv)])
    assert r.exit_code == 2
    assert f"metric: expected one of ttft_s for phase {toy.name}, found 'tpot_s'" in r.output


def test_study_maximizes_the_toy_phase_throughput(toy: Phase, tmp_path: Path) -> None:
    study = tmp_path / "toy.yaml"
    study.write_text(f"""
name: toy-study
description: a registered phase in a study
source: tests/phases/test_toy_phase.py
base: h100-sxm
parameters:
  memory.L2.capacity: {{low: 16 MiB, high: 256 MiB, log: true}}
workloads:
  long: {{workload: llama3-8b, phase: {toy.name}, seq_in: 4096}}
objectives:
  throughput: {{maximize: throughput}}
  area: {{minimize: area}}
constraints:
  area: 900 mm2
  reticle: false
search:
  sampler: grid
  grid_points: 4
""")
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["study", str(study), "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    import pandas as pd

    trials = pd.read_csv(out / "trials.csv")
    thr = trials["long.tokens_per_s_per_chip"]
    assert (thr > 0).all()
    # the objective is the system's prompt tokens per second: per chip x chips (1 here)
    assert np.allclose(trials["objective.throughput"], thr)
