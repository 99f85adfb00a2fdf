"""Studies that explain themselves (issue 23): summary.md and the console open with the
answer in words, without repeats, with units and the base named; infeasible designs are
explained with counts and the closest any design came; budgets no design can meet are
refused before the first trial; references without a power or area model are tabulated with
what they have; and the fuzzing round's study findings (T3, T5, M1) are fixed."""

from __future__ import annotations

import re
import time
import warnings
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest
from typer.testing import CliRunner

from dse.cli import app
from dse.model.area import area
from dse.model.batch import design_batch
from dse.report.study_summary import best_rows, quantity
from dse.search import budget
from dse.search.outputs import infeasible_reasons
from dse.search.space import load_study

HWSPECS = Path(__file__).resolve().parents[2] / "hwspecs"

STUDY = """\
name: {name}
source: test
base: h100-sxm
parameters:
  compute.units: {{low: 66, high: 160, step: 2}}
  memory.HBM3.stacks: {{low: 2, high: 8}}
workloads:
{workloads}
objectives:
{objectives}
constraints:
{constraints}
search: {{trials: 40, batch: 20, seed: 0}}
references: {references}
"""
DECODE = "  decode: {workload: llama2-7b, scenario: chat-decode, batch: 16}"
BERT = "  bert: {workload: bert-large, scenario: mlperf-offline}"


def _write(tmp_path: Path, name: str = "s", workloads: str = f"{DECODE}\n{BERT}",
           objectives: str = "  both: {maximize: throughput}\n"
                             "  encoder: {maximize: throughput, workloads: [bert]}",
           constraints: str = "  area: 814 mm2", references: str = "[h100-sxm, gpu-like]"
           ) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(STUDY.format(name=name, workloads=workloads, objectives=objectives,
                                 constraints=constraints, references=references))
    return path


def _run(path: Path, out: Path, *args: str):
    return CliRunner().invoke(app, ["study", str(path), "--out", str(out), "-q", *args])


def test_summary_answers_in_words_without_repeats_with_units_and_the_base(tmp_path: Path
                                                                         ) -> None:
    out = tmp_path / "out"
    r = _run(_write(tmp_path), out)
    assert r.exit_code == 0, r.output
    text = (out / "summary.md").read_text()
    # the run line, then the verdict in words, then the ratios to each chip
    paragraphs = text.split("\n\n")
    assert paragraphs[1].startswith("Run: ") and paragraphs[2] == "## Verdict"
    assert paragraphs[3].startswith("**The best ") and "trial" in paragraphs[3]
    assert paragraphs[4].startswith("Against gpu-like, it ")  # the first chip not the base
    assert "| x h100-sxm (base) | x gpu-like |" in text
    # the run line once (it was there twice, once as '40 trials, 32 feasible ...')
    assert text.count("trials in the study") == 1
    assert not re.search(r"^\d+ trials, \d+ feasible", text, re.M)
    # the base named, never 'x base'
    assert "x base" not in text and "(x h100-sxm)" in text
    # one row per design in the best table
    table = text.split("## Best designs")[1].split("\n\n")[1].splitlines()
    head, rows = table[0], table[2:]
    trials = [row.split("|")[2].strip() for row in rows]
    assert len(trials) == len(set(trials)) >= 1
    # throughputs with their units; the objective that is bert's throughput not repeated
    assert "encoder: bert throughput (samples/s)" in head
    assert "decode (tokens/s)" in head and "| bert (samples/s)" not in head
    # the console's closing lines: the best design and how it compares
    assert re.search(r"^best .*: trial \d+ \(compute\.units \d+, memory\.HBM3\.stacks \d+\)",
                     r.stdout, re.M)
    assert "x h100-sxm" in r.stdout and "h100-sxm's (the base)" in r.stdout


def test_best_rows_name_every_objective_a_design_is_best_for() -> None:
    front = pd.DataFrame({"number": [7, 9], "objective.a": [3.0, 1.0],
                          "objective.b": [5.0, 4.0]})
    rows = best_rows(front, ["objective.a", "objective.b"], ["maximize", "maximize"])
    assert [(why, int(r["number"])) for why, r in rows] == [("best a and b", 7)]
    rows = best_rows(front, ["objective.a", "objective.b"], ["maximize", "minimize"])
    assert [(why, int(r["number"])) for why, r in rows] == [("best a", 7), ("best b", 9)]


def test_quantities_carry_their_units() -> None:
    assert quantity(1.3571, "x h100-sxm") == "1.36x h100-sxm"
    assert quantity(10106.2, "samples/s") == "10,106 samples/s"
    assert quantity(362.31, "tokens/s") == "362.3 tokens/s"
    assert quantity(0.0036771, "s") == "3.677 ms"
    assert quantity(float("nan"), "W") == "—"


def test_no_feasible_design_exits_3_with_the_reasons_and_the_closest(tmp_path: Path) -> None:
    """Llama-2-70B at batch 64 on one chip fits no design of the ranges (8 HBM3 stacks hold
    128 GiB): every design is unfit, and the summary says by how little the closest missed."""
    path = _write(tmp_path, workloads="  big: {workload: llama2-70b, scenario: chat-decode, "
                  f"batch: 64}}\n{DECODE}", objectives="  t: {maximize: throughput, "
                  "workloads: [decode]}", references="[h100-sxm]")
    out = tmp_path / "out"
    r = _run(path, out)
    assert r.exit_code == 3, r.output
    assert "Traceback" not in r.output
    assert re.search(r"^warning: no feasible design among 40: 40 do not run big \(closest: "
                     r"trial \d+, .*GB short\)", r.stderr, re.M), r.stderr
    for f in ("trials.csv", "summary.md", "references.csv", "run.json"):
        assert (out / f).is_file(), f
    text = (out / "summary.md").read_text()
    assert "**No feasible design.** None of the 40 designs" in text
    assert "| 40 | do not run big (closest: trial" in text


def test_infeasible_designs_are_counted_by_constraint_with_the_closest(tmp_path: Path
                                                                       ) -> None:
    path = _write(tmp_path, constraints="  area: 600 mm2\n  power: 300 W")
    out = tmp_path / "out"
    r = _run(path, out)
    assert r.exit_code in (0, 3), r.output
    trials = pd.read_parquet(out / "trials.parquet")
    reasons = dict((why.split(" (")[0], n)
                   for n, why in infeasible_reasons(load_study(path), trials))
    assert reasons["over the 600 mm2 area budget"] == int((trials["constraint.area_mm2"] > 0)
                                                          .sum())
    assert reasons["over the 300 W power cap"] == int((trials["constraint.power_w"] > 0).sum())
    text = (out / "summary.md").read_text()
    assert f"(the smallest design: {trials['area_per_chip_mm2'].min():,.0f} mm2)" in text
    assert "## Why designs are infeasible" in text
    # the base breaks the area budget: said up front, on stderr
    assert "warning:" in r.stderr and "the base h100-sxm needs 757 mm2" in r.stderr


def test_a_budget_no_design_can_meet_is_refused_before_any_trial(tmp_path: Path) -> None:
    path = _write(tmp_path, constraints="  area: 10 mm2")
    r = CliRunner().invoke(app, ["check", str(path)])
    assert r.exit_code == 2
    line = r.output.strip()
    assert len(line.splitlines()) == 1
    assert re.match(rf"{re.escape(str(path))}:\d+:\d+: constraints\.area: no design can meet "
                    r"the 10 mm2 area budget: the smallest design the parameters' ranges "
                    r"allow \(compute\.units 66, memory\.HBM3\.stacks 2\) needs 4\d\d mm2", line)
    out = tmp_path / "out"
    r = _run(path, out)
    assert r.exit_code == 2 and "constraints.area: no design can meet" in r.output
    assert not (out / "trials.csv").exists()


def test_a_budget_only_the_base_breaks_is_a_warning(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["check", str(_write(tmp_path, constraints="  area: 600 mm2\n"
                                                                          "  power: 300 W"))])
    assert r.exit_code == 0, r.output
    assert "constraints.area: the base h100-sxm needs 757 mm2, over the 600 mm2 area " \
           "budget; designs from the parameters' ranges reach down to" in r.stderr
    assert "constraints.power: the base h100-sxm draws" in r.stderr


def test_interfaces_alone_over_the_budget_are_named(tmp_path: Path) -> None:
    """The docs' from-scratch chip (guide/hardware.md) with six HBM stacks: its interfaces alone
    need a 776 mm2 die; with no parameter that removes them, no design meets 600 mm2."""
    chip = tmp_path / "chip.yaml"
    chip.write_text("base: h100-sxm\nsource: test\nmemory:\n  - {name: HBM3, stacks: 8}\n")
    path = _write(tmp_path, constraints="  area: 600 mm2").read_text()
    path = path.replace("base: h100-sxm", "base: chip.yaml").replace(
        "  memory.HBM3.stacks: {low: 2, high: 8}\n", "")
    (tmp_path / "s.yaml").write_text(path)
    study = load_study(tmp_path / "s.yaml")
    fatal = [f for f in budget.findings(study, power=False) if f.fatal]
    # the area budget, and (eight stacks' edge asking a 902 mm2 die) the reticle too
    assert [f.key for f in fatal] == [("constraints", "area"), ("constraints", "reticle")]
    assert "its off-chip interfaces alone need a die of" in fatal[0].message


def test_the_smallest_design_is_the_smallest_of_the_whole_range(tmp_path: Path) -> None:
    """The corner search against every design of the ranges: the area model is monotonic in
    each parameter, so no design is smaller than the corner found."""
    study = load_study(_write(tmp_path))
    s = budget.smallest(study)
    assert s is not None
    units, stacks = np.meshgrid(np.arange(66, 161, 2.0), np.arange(2, 9.0))
    every = area(design_batch(study.hardware, {"compute.units": units.ravel(),
                                               "memory.HBM3.stacks": stacks.ravel()}),
                 study.tech)
    assert s.area_mm2 == pytest.approx(every.total_mm2.min())
    assert s.die_mm2 == pytest.approx(every.die_mm2.min())
    assert s.values == {"compute.units": 66.0, "memory.HBM3.stacks": 2.0}
    assert s.base_area_mm2 == pytest.approx(757.28, abs=0.01)


def test_references_without_a_power_or_area_model_are_tabulated(tmp_path: Path) -> None:
    """A chip file that names no process node (tpu-v5e's did): it crashed the study
    (KeyError: 'power_w')."""
    text = (HWSPECS / "tpu-v5e.yaml").read_text()
    (tmp_path / "v5e.yaml").write_text(text[:text.index("\ntechnology:")] + "\n")
    path = _write(tmp_path, objectives="  both: {maximize: throughput_per_watt}\n"
                  "  area: {minimize: area}", references="[h100-sxm, v5e.yaml]")
    out = tmp_path / "out"
    r = _run(path, out, "--trials", "20")
    assert r.exit_code == 0, r.output
    refs = pd.read_csv(out / "references.csv").set_index("chip")
    assert np.isnan(refs.loc["tpu-v5e", "area_per_chip_mm2"])
    assert refs.loc["tpu-v5e", "decode.output_tokens_per_s"] > 0
    assert "technology.node" in refs.loc["tpu-v5e", "not_modelled"]
    row = next(x for x in (out / "summary.md").read_text().splitlines()
               if x.startswith("| tpu-v5e |"))
    assert "| not modelled | not modelled |" in row


def test_check_warns_about_a_hardware_file_it_cannot_price(tmp_path: Path) -> None:
    chip = tmp_path / "chip.yaml"
    chip.write_text("name: chip\nsource: test\ncompute: {units: 4, clock: 1 GHz, matrix: "
                    "{peak: {bf16: 100 TFLOPS}}}\nmemory:\n  - {name: HBM, kind: dram, "
                    "capacity: 16 GB, bandwidth: 1 TB/s}\ntechnology: {node: n5}\n")
    r = CliRunner().invoke(app, ["check", str(chip)])
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == f"{chip}: ok (hardware)"
    assert r.stderr.strip() == (f"warning: {chip}: not priced (no area or power): the spec "
                                "gives no compute.style (gpu or array); dse area, the area "
                                "and power columns and the area constraints of a study need it")


# --- fuzzing round 3 -----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["flag", "file"])
def test_t3_batch_1_runs_with_nsga2(tmp_path: Path, how: str) -> None:
    """T3: --batch 1 (or search.batch: 1) made NSGA-II's population 1: internal error."""
    path = _write(tmp_path)
    args = ["--trials", "4"]
    if how == "flag":
        args += ["--batch", "1"]
    else:
        path.write_text(path.read_text().replace("batch: 20", "batch: 1"))
    r = _run(path, tmp_path / "out", *args)
    assert r.exit_code == 0, r.output
    assert len(pd.read_csv(tmp_path / "out" / "trials.csv")) == 4


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite+pysqlite://",
                                 "sqlite:///file:x?mode=memory&uri=true"])
def test_t5_in_memory_sqlite_is_refused(tmp_path: Path, url: str) -> None:
    """T5: --storage sqlite:// gave KeyError: 'Record does not exist.' (each connection its
    own empty database)."""
    r = _run(_write(tmp_path), tmp_path / "out", "--storage", url)
    assert r.exit_code == 2
    assert r.output.strip().startswith(f"--storage {url}: an in-memory SQLite database lasts "
                                       "one connection")
    assert len(r.output.strip().splitlines()) == 1
    path = _write(tmp_path)
    path.write_text(path.read_text() + f"storage: '{url}'\n")
    r = CliRunner().invoke(app, ["check", str(path)])
    assert r.exit_code == 2 and "storage: an in-memory SQLite database" in r.output


def test_t5_a_sqlite_file_is_a_storage(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        r = _run(_write(tmp_path), tmp_path / "out", "--storage", url, "--trials", "4",
                 "--batch", "2")
    assert r.exit_code == 0, r.output
    # no warning of Optuna's reaches the user (its heartbeat warning once did)
    assert not [w for w in seen if "Heartbeat" in str(w.message)], [str(w.message) for w in seen]
    st = optuna.load_study(study_name="s", storage=url)
    assert len(st.trials) == 4 and all(t.state.name == "COMPLETE" for t in st.trials)


@pytest.mark.parametrize("workers", ["1099511627776", "257", str(10**40)])
def test_m1_workers_are_bounded(tmp_path: Path, workers: str) -> None:
    """M1: --workers 2^40 built 2^40 process objects (1.8 GB, 38 s, MemoryError)."""
    started = time.monotonic()
    r = _run(_write(tmp_path), tmp_path / "out", "--workers", workers)
    assert time.monotonic() - started < 10
    assert r.exit_code == 2
    assert r.output.strip().startswith("--workers: expected at most 256 worker processes on "
                                       "one machine")
    assert len(r.output.strip().splitlines()) == 1
