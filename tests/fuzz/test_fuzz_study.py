"""Fuzzing study files: mutations of the shipped studies through `dse check` (many) and
`dse study --trials 1-3` (few: a study writes its tables and plots, ~1-4 s); `dse study`
command lines (arguments.study_arguments), `dse dashboard` on what it must refuse before
serving, and `dse plot pareto` on every column of a study's trials (issue 23, item 7).

Properties: the promise (fuzzing.assert_promise); a study that ran wrote run.json as strict
JSON and a trials table whose feasible trials have finite, positive objectives and metrics;
the dashboard refuses (exit 2, one line) instead of serving.
"""

from __future__ import annotations

import atexit
import csv
import functools
import json
import math
import shutil
import tempfile
from pathlib import Path

from arguments import dashboard_arguments, dashboard_scratch, pareto_axes, study_arguments
from fuzzing import assert_promise, dse, dse_subprocess, examples, strict_json
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
PLOT_AXES = ("reason", "state", "feasible", "area_per_chip_mm2", "number", "memory_bound:max",
             "objective.memory_bound", "nope", "area_per_chip_mm2:up")


@examples(fast=2, long=25)
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
        assert_study_output(out, ran)
        assert_promise(dse("plot", "pareto", out, "--x", axis, "--out", Path(folder) / "p.png"))


def assert_study_output(out: Path, ran: object) -> None:
    """run.json is strict JSON; the feasible trials' objectives, times and rates positive."""
    strict_json((out / "run.json").read_text())
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


# --- round 3: command lines of dse study, dse dashboard, dse plot pareto ----------------------

@examples(fast=1, long=15)
@given(args=study_arguments())
@example(args=["study", "flops-vs-bandwidth", "--trials", "2", "--batch", "1", "--storage",
               "sqlite://", "-q", "--out", "{out}"])  # T3: NSGA-II with --batch 1; T5:
# in-memory SQLite (both fixed on the study branch; one run for both keeps the profile fast)
def test_study_arguments(args: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out"
        ran = dse(*(a.replace("{out}", str(out)) for a in args))
        assert_promise(ran, infeasible=True)  # exit 3: no feasible design, outputs written
        if ran.code in (0, 3):
            assert_study_output(out, ran)


@functools.cache
def study_output() -> Path:
    """A small study's output folder (flops-vs-bandwidth, 8 trials), made once a session."""
    folder = Path(tempfile.mkdtemp(prefix="dse-fuzz-study-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    ran = dse("study", "flops-vs-bandwidth", "--trials", "8", "--batch", "4", "-q", "--out",
              folder / "out")
    assert ran.code == 0, ran
    return folder / "out"


DASHBOARD_SECONDS = 15.0  # a refusal takes ~2 s; a dashboard that serves runs until killed


@examples(fast=2, long=15)
@given(args=dashboard_arguments())
@example(args=["dashboard", "{study}/trials.csv", "--port", "0"])  # T2 (dashboard branch)
def test_dashboard_refuses_what_it_cannot_serve(args: list[str]) -> None:
    """A target that is not a study is refused, one line and exit 2, before serving (run
    in a subprocess: one that serves is stopped at DASHBOARD_SECONDS and fails)."""
    study = study_output()
    with tempfile.TemporaryDirectory() as scratch:
        dashboard_scratch(Path(scratch))
        filled = [a.replace("{study}", str(study)).replace("{scratch}", scratch) for a in args]
        ran = dse_subprocess(*filled, seconds=DASHBOARD_SECONDS)
        assert ran.code != 124, f"served a target it should refuse\n{ran}"
        assert_promise(ran)
        assert ran.code == 2, ran


@functools.cache
def _trial_columns() -> tuple[list[str], list[str]]:
    folder = study_output()
    with (folder / "trials.csv").open() as f:
        columns = next(csv.reader(f))
    objectives = list(json.loads((folder / "run.json").read_text()).get("objectives") or {})
    return columns, objectives


@examples(fast=2, long=20)
@given(axes=st.deferred(lambda: pareto_axes(*_trial_columns())))
@example(axes=["--x", "reason", "--y", "state:min"])  # T4: text columns (plot branch)
def test_plot_pareto_axes(axes: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        ran = dse("plot", "pareto", study_output(), *axes, "--out", Path(folder) / "p.png")
        assert_promise(ran)
        if ran.code == 0:
            assert (Path(folder) / "p.png").stat().st_size > 0, ran
