"""`dse dashboard` shows a study as the study sees it: on a real `dse study` output (the shipped
middle-ground study, 384 trials, most of them infeasible) the dashboard's best trials are the
trials of pareto.csv, every trial carries its constraints in the list optuna-dashboard reads
and its area, power, verdict and reason as user attributes, and the trial table renders in
headless Chromium. Unit tests of the view; targets that are not a study: one line, exit 2."""

from __future__ import annotations

import math
import re
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from optuna.distributions import FloatDistribution
from optuna.study import StudyDirection
from optuna.trial import TrialState, create_trial
from optuna_dashboard._pareto_front import get_pareto_front_trials
from typer.testing import CliRunner

from dse.cli import app
from dse.dashboard import (
    EXPECTED,
    FeasibleView,
    as_dashboard_sees,
    feasible_front,
    storage_for,
)
from dse.errors import DseError
from dse.search.objective import WORST_MINIMIZED
from tests.fuzz.fuzzing import examples
from tests.test_dashboard import _get_json, _page_text, _readline

TRIALS = 384  # ~10 s; about a third feasible, a front of a few trials
START_TIMEOUT_S = 30
MAX, MIN = StudyDirection.MAXIMIZE, StudyDirection.MINIMIZE


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The middle-ground study run with `dse study --trials 384`, served by `dse dashboard
    --port 0`: (output folder, base URL, study id)."""
    out = tmp_path_factory.mktemp("middle-ground") / "out"
    subprocess.run([sys.executable, "-m", "dse", "study", "middle-ground", "--trials",
                    str(TRIALS), "--out", str(out), "-q"], check=True, timeout=300)
    process = subprocess.Popen([sys.executable, "-m", "dse", "dashboard", str(out), "--port",
                                "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        match = _readline(process, r"open http://127\.0\.0\.1:(\d+)/dashboard/studies/(\d+)",
                          START_TIMEOUT_S)
        yield out, f"http://127.0.0.1:{match[1]}", int(match[2])
    finally:
        process.kill()
        process.wait(timeout=10)
        process.stdout.close()
        process.stderr.close()


@pytest.fixture(scope="module")
def detail(served):
    _, base, study_id = served
    return _get_json(f"{base}/api/studies/{study_id}")


def test_best_trials_are_the_pareto_csv_trials(served, detail):
    out, _, _ = served
    trials = pd.read_csv(out / "trials.csv")
    pareto = pd.read_csv(out / "pareto.csv")
    assert len(detail["trials"]) == TRIALS
    assert 0 < trials["feasible"].sum() < TRIALS  # the budget rules designs out
    best = sorted(t["number"] for t in detail["best_trials"])
    assert best and best == sorted(pareto["number"])
    # Without the view, optuna-dashboard's front is made of designs over the area budget.
    unfiltered = get_pareto_front_trials(storage_for(out).get_all_trials(0), [MAX, MAX])
    assert {t.number for t in unfiltered} - set(best)


def test_every_trial_shows_its_verdict_and_constraints(served, detail):
    out, _, _ = served
    rows = pd.read_csv(out / "trials.csv", keep_default_na=False).set_index("number")
    constraints = [c for c in rows.columns if c.startswith("constraint.")]
    for t in detail["trials"]:
        row = rows.loc[t["number"]]
        attrs = {a["key"]: a["value"] for a in t["user_attrs"]}
        # the list optuna-dashboard marks feasibility by, in the study's order
        assert t["constraints"] == pytest.approx([float(row[c]) for c in constraints])
        assert all(v <= 0 for v in t["constraints"]) == bool(row["feasible"])
        assert attrs["feasible"] == str(bool(row["feasible"]))
        assert attrs.get("reason", "") == row["reason"]
        assert float(attrs["area_per_chip_mm2"]) == pytest.approx(float(row["area_per_chip_mm2"]))
        for job in ("llama2-70b-decode", "llama3-8b-serve", "bert-large", "dlrm-dcnv2"):
            assert float(attrs[f"{job}.power_per_chip_w"]) == pytest.approx(
                float(row[f"{job}.power_per_chip_w"]))


def test_trial_table_renders(served, detail, chromium):
    _, base, study_id = served
    # optuna-dashboard 0.20 moved the table into Smart Selection; its old address is sent on.
    old = f"{base}/dashboard/studies/{study_id}/trialTable"
    with pytest.raises(urllib.error.HTTPError) as redirect:
        urllib.request.build_opener(_NoRedirect).open(old, timeout=10)
    assert redirect.value.code == 302
    assert redirect.value.headers["Location"] == f"/dashboard/studies/{study_id}/smartSelection"

    text = _page_text(chromium, old)
    assert "middle-ground" in text, text[:2000]
    for header in ("Number", "memory_bound", "encoder", "Param compute.units",
                   "UserAttribute area_per_chip_mm2", "UserAttribute feasible",
                   "UserAttribute reason"):
        assert header in text, text[:3000]
    assert "exceeds the budget of 757 mm2" in text, text[:3000]  # infeasible rows, reasons
    assert f"of {TRIALS}" in text, text[-2000:]  # the table's pager: 1–10 of 384
    assert "Pareto Front" in text


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


# The view, trial by trial -------------------------------------------------------------------

def _trial(number: int, values: list[float], constraints: dict[str, float],
           user_attrs: dict | None = None, system_attrs: dict | None = None):
    now = datetime.now()
    t = create_trial(params={"x": 0.5}, distributions={"x": FloatDistribution(0, 1)},
                     values=values, constraints=constraints, user_attrs=user_attrs,
                     system_attrs=system_attrs)
    t.number, t._trial_id, t.datetime_start, t.datetime_complete = number, number, now, now
    return t


def test_constraints_listed_in_stored_order():
    t = _trial(0, [1.0, 2.0], {"area_mm2": 3.0, "unfit_workloads": -1.0},
               {"feasible": False})
    seen = as_dashboard_sees(t, [MAX, MIN])
    assert seen.system_attrs["constraints"] == [3.0, -1.0]
    assert seen.values == [1.0, 2.0]  # an infeasible design's real values stay
    assert t.system_attrs.get("constraints") is None  # the stored trial is not changed


def test_placeholders_of_an_unfit_design_are_infinitely_bad():
    t = _trial(0, [0.0, WORST_MINIMIZED], {"unfit_workloads": 1.0}, {"feasible": False})
    assert as_dashboard_sees(t, [MAX, MIN]).values == [-math.inf, math.inf]
    # a feasible design's values are never placeholders
    ok = _trial(1, [0.0, WORST_MINIMIZED], {"unfit_workloads": -1.0}, {"feasible": True})
    assert as_dashboard_sees(ok, [MAX, MIN]).values == [0.0, WORST_MINIMIZED]


def test_infeasible_without_a_violated_constraint_is_marked():
    """fit: false and an objective that does not exist: the study calls it infeasible though
    no constraint is violated; the dashboard's list gets a violated entry."""
    t = _trial(0, [0.0, 5.0], {"area_mm2": -2.0}, {"feasible": False})
    assert as_dashboard_sees(t, [MAX, MIN]).system_attrs["constraints"] == [-2.0, 1.0]


def test_older_journals_and_other_tools():
    """No `feasible` attribute: the constraints decide; a stored list is kept as it is."""
    t = _trial(0, [1.0, 2.0], {"area_mm2": 3.0})
    assert as_dashboard_sees(t, [MAX, MIN]).values == [1.0, 2.0]
    listed = _trial(1, [1.0, 2.0], {}, system_attrs={"constraints": [-1.0, -2.0]})
    assert as_dashboard_sees(listed, [MAX, MIN]) is listed


def test_feasible_front():
    trials = [
        _trial(0, [10.0, 10.0], {"area_mm2": 5.0}, {"feasible": False}),  # dominates all
        _trial(1, [5.0, 1.0], {"area_mm2": -1.0}, {"feasible": True}),
        _trial(2, [1.0, 5.0], {"area_mm2": -1.0}, {"feasible": True}),
        _trial(3, [1.0, 1.0], {"area_mm2": -1.0}, {"feasible": True}),  # dominated
        _trial(4, [5.0, 1.0], {"area_mm2": -1.0}, {"feasible": True}),  # equal to 1
    ]
    assert [t.number for t in feasible_front(trials, [MAX, MAX])] == [1, 2]
    assert feasible_front(trials[:1], [MAX, MAX]) == []


def test_single_objective_best_is_feasible(tmp_path):
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "s.journal")))
    study = optuna.create_study(storage=storage, direction="maximize")
    study.add_trials([_trial(0, [9.0], {"area_mm2": 1.0}, {"feasible": False}),
                      _trial(1, [2.0], {"area_mm2": -1.0}, {"feasible": True}),
                      _trial(2, [3.0], {"area_mm2": -1.0}, {"feasible": True})])
    view = FeasibleView(storage)
    assert view.get_best_trial(study._study_id).number == 2
    assert view.get_n_trials(study._study_id) == 3  # everything else: the storage's own
    none = optuna.create_study(storage=storage, direction="maximize")
    none.add_trials([_trial(0, [9.0], {"area_mm2": 4.0}, {"feasible": False}),
                     _trial(1, [2.0], {"area_mm2": 1.0}, {"feasible": False})])
    assert view.get_best_trial(none._study_id).number == 1  # the least violation


def test_grid_trials_carry_the_same_user_attributes(tmp_path):
    text = (Path(__file__).parent / "data/studies/tiny-grid.yaml").read_text()
    assert "  sampler: grid\n" in text
    study = tmp_path / "tiny-grid.yaml"  # the grid stored as trials, as a dashboard reads it
    study.write_text(text.replace("  sampler: grid\n", "  sampler: grid\n  grid_trials: true\n"))
    out = tmp_path / "grid"
    result = CliRunner().invoke(app, ["study", str(study), "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(out / "trials.csv", keep_default_na=False).set_index("number")
    trials = storage_for(out).get_all_trials(0)
    assert len(trials) == len(rows)
    for t in trials:
        row = rows.loc[t.number]
        assert t.user_attrs["feasible"] == bool(row["feasible"])
        assert t.user_attrs["area_per_chip_mm2"] == pytest.approx(float(row["area_per_chip_mm2"]))
        assert t.user_attrs["decode.power_per_chip_w"] == pytest.approx(
            float(row["decode.power_per_chip_w"]))
        assert t.user_attrs.get("reason", "") == row["reason"]


# Targets that are not a study (fuzzing round 3, T2) ------------------------------------------

def _optuna_free_sqlite(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("create table t (x)")


@pytest.mark.parametrize(("name", "make", "message"), [
    ("not-a-journal.csv", lambda p: p.write_text("a,b\n1,2\n"),
     "not an Optuna journal (its first line is not an Optuna log entry)"),
    ("trials.csv", lambda p: p.write_text("number,state\n0,COMPLETE\n"),
     "not an Optuna journal (its first line is not an Optuna log entry)"),
    ("list.json", lambda p: p.write_text("[1, 2]\n"),
     "not an Optuna journal (its first line is not an Optuna log entry)"),
    ("pareto.png", lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00"),
     "not an Optuna journal (its first line is not an Optuna log entry)"),
    ("empty.journal", lambda p: p.write_text(""), "empty file, not an Optuna journal"),
    ("blank.journal", lambda p: p.write_text("\n\n"), "empty file, not an Optuna journal"),
    ("broken.journal", lambda p: p.write_text('{"op_code": 0, "worker_id": "w"}\n'),
     "not a readable Optuna journal (KeyError: 'study_name')"),
    ("other.db", _optuna_free_sqlite,
     "an SQLite database but not an Optuna one (no such table: version_info)"),
], ids=["csv", "trials-csv", "json-list", "png", "empty", "blank", "broken-journal",
        "other-sqlite"])
def test_target_that_is_not_a_study_is_one_line(tmp_path, name, make, message):
    path = tmp_path / name
    make(path)
    result = CliRunner().invoke(app, ["dashboard", str(path), "--port", "0"])
    assert result.exit_code == 2, result.output
    assert result.output == f"{path}: {message}; {EXPECTED}\n"


def test_folder_without_journal_is_one_line(tmp_path):
    (tmp_path / "trials.csv").write_text("number\n0\n")
    result = CliRunner().invoke(app, ["dashboard", str(tmp_path), "--port", "0"])
    assert result.exit_code == 2
    assert result.output == f"{tmp_path}: no study.journal in this folder; {EXPECTED}\n"


def test_sqlite_file_of_a_study_is_served(tmp_path):
    db = tmp_path / "study.db"
    study = optuna.create_study(study_name="in-a-file", storage=f"sqlite:///{db}")
    study.add_trial(_trial(0, [1.0], {}))
    assert [s.study_name for s in storage_for(db).get_all_studies()] == ["in-a-file"]
    assert storage_for(db).get_all_trials(study._study_id)[0].state == TrialState.COMPLETE


def _small_journal(folder: Path) -> bytes:
    """A `dse study`-like journal: two objectives, constraints, user attributes."""
    path = folder / "seed.journal"
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(path)))
    study = optuna.create_study(study_name="seed", storage=storage,
                                directions=["maximize", "minimize"])
    study.add_trials([_trial(i, [float(i), 10.0 - i], {"area_mm2": i - 2.0},
                             {"feasible": i > 2, "area_mm2": 700.0 + i}) for i in range(4)])
    return path.read_bytes()


@examples(fast=60, long=600)
@given(data=st.data())
def test_any_file_is_a_study_or_one_line(tmp_path_factory, data):
    """A journal cut, with bytes changed, lines dropped or junk added, or any bytes at all:
    `storage_for` gives a storage the dashboard's view reads, or a DseError; nothing else."""
    folder = tmp_path_factory.mktemp("fuzz")
    seed = _small_journal(folder)
    kind = data.draw(st.sampled_from(["cut", "flip", "drop", "junk", "bytes"]))
    if kind == "cut":
        content = seed[:data.draw(st.integers(0, len(seed)))]
    elif kind == "flip":
        at = data.draw(st.integers(0, len(seed) - 1))
        content = seed[:at] + bytes([data.draw(st.integers(0, 255))]) + seed[at + 1:]
    elif kind == "drop":
        lines = seed.splitlines(keepends=True)
        content = b"".join(np.delete(np.array(lines, dtype=object),
                                     data.draw(st.integers(0, len(lines) - 1))))
    elif kind == "junk":
        lines = seed.splitlines(keepends=True)
        lines.insert(data.draw(st.integers(0, len(lines))),
                     data.draw(st.sampled_from([b"{}\n", b"[]\n", b'{"op_code": 99}\n',
                                                b'{"op_code": "0"}\n', b"null\n", b"\xff\n"])))
        content = b"".join(lines)
    else:
        content = data.draw(st.binary(max_size=200))
    path = folder / "target.journal"
    path.write_bytes(content)
    try:
        storage = storage_for(path)
    except DseError as e:
        # one line at the file, or at its line (a corrupt record: dse.search.journal)
        assert "\n" not in str(e) and re.match(rf"{re.escape(str(path))}:(\d+:)? ", str(e))
        return
    view = FeasibleView(storage)
    for s in view.get_all_studies():
        view.get_all_trials(s._study_id)
