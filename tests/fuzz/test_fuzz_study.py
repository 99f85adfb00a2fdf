"""Fuzzing study files: mutations of the shipped studies through `dse check` (many) and
`dse study --trials 1-3` (few: a study writes its tables and plots, ~1-4 s).

Properties: the promise (fuzzing.assert_promise); a study that ran wrote run.json as strict
JSON and a trials table whose feasible trials have finite, positive objectives and metrics.
"""

from __future__ import annotations

import csv
import math
import tempfile
from pathlib import Path

from fuzzing import assert_promise, dse, examples, strict_json
from hypothesis import example, given
from hypothesis import strategies as st
from mutate import MAIN, ROOT, Case, yaml_cases

# Columns of trials.csv that are a time, a rate or an objective (positive when feasible).
POSITIVE = ("_per_s", "_s", "_j", "_w")


@examples(fast=15, long=200)
@given(case=yaml_cases("study"))
def test_study_files_check(case: Case) -> None:
    with tempfile.TemporaryDirectory() as folder:
        assert_promise(dse("check", case.write(Path(folder))))


# `dse plot pareto OUT --x AXIS` after a run: any column of trials.csv (text ones too: T4),
# an objective, or a name that is neither.
PLOT_AXES = ("reason", "state", "feasible", "area_mm2", "number", "memory_bound:max",
             "objective.memory_bound", "nope", "area_mm2:up")


@examples(fast=3, long=25)
@given(case=yaml_cases("study", most=2), trials=st.sampled_from(["1", "2", "3"]),
       axis=st.sampled_from(PLOT_AXES))
@example(case=Case({MAIN: (ROOT / "studies" / "flops-vs-bandwidth.yaml").read_bytes()},
                   ["from studies/flops-vs-bandwidth.yaml"]), trials="2", axis="reason")
def test_study_files_run(case: Case, trials: str, axis: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = case.write(Path(folder))
        out = Path(folder) / "out"
        ran = dse("study", path, "--trials", trials, "--out", out, "-q")
        assert_promise(ran, infeasible=True)  # exit 3: no feasible design, outputs written
        if ran.code not in (0, 3):
            return
        strict_json((out / "run.json").read_text())
        assert_promise(dse("plot", "pareto", out, "--x", axis, "--out", Path(folder) / "p.png"))
        with (out / "trials.csv").open() as f:
            rows = list(csv.DictReader(f))
        for row in rows:
            if row.get("feasible") != "True":
                continue
            for column, text in row.items():
                positive = column.startswith("objective.") or column.endswith(POSITIVE)
                if not positive or text == "":
                    continue
                value = float(text)
                assert math.isfinite(value) and value > 0, (column, text, ran)
