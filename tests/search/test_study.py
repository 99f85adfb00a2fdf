"""dse study: the schema's errors, the runner's resume / kill / workers guarantees, the
outputs, and the grid mode."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest
from typer.testing import CliRunner

from dse.cli import app
from dse.search import run as runner
from dse.search.objective import baseline_of, evaluate_designs
from dse.search.space import load_study

DATA = Path(__file__).parents[1] / "data" / "studies"
TINY = DATA / "tiny.yaml"
ROOT = Path(__file__).parents[2]


def _complete(out: Path, name: str = "tiny") -> list[optuna.trial.FrozenTrial]:
    st = optuna.load_study(study_name=name, storage=runner.open_storage(
        str(out / runner.JOURNAL)))
    return st.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))


def _study(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


BASE = """\
name: s
source: test
base: h100-sxm
parameters:
{params}
workloads:
  decode: {{workload: llama2-7b, scenario: chat-decode}}
objectives:
{objectives}
"""


def _errors(tmp_path: Path, params: str, objectives: str = "  t: {maximize: throughput}"
            ) -> list[str]:
    path = _study(tmp_path, BASE.format(params=params, objectives=objectives))
    r = CliRunner().invoke(app, ["check", str(path)])
    assert r.exit_code == 2
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert all("Traceback" not in x for x in lines)
    return lines


def test_unknown_parameter_path_is_one_line_with_file_line_and_key(tmp_path: Path) -> None:
    lines = _errors(tmp_path, "  memory.L2.capacty: {low: 8 MiB, high: 64 MiB}")
    assert len(lines) == 1
    assert lines[0].startswith(f"{tmp_path / 's.yaml'}:5:")
    assert "parameters.memory.L2.capacty" in lines[0] and "capacity" in lines[0]


def test_range_without_units_is_refused(tmp_path: Path) -> None:
    (line,) = _errors(tmp_path, "  memory.L2.capacity: {low: 8, high: 64 MiB}")
    assert ":5:" in line and "parameters.memory.L2.capacity.low" in line
    assert "unit" in line


def test_empty_range_is_refused(tmp_path: Path) -> None:
    (line,) = _errors(tmp_path, "  compute.units: {low: 100, high: 100}")
    assert "parameters.compute.units" in line and "empty range" in line


def test_objective_on_a_workload_it_does_not_list(tmp_path: Path) -> None:
    (line,) = _errors(tmp_path, "  compute.units: {low: 66, high: 132}",
                      "  t: {maximize: throughput, workloads: [serve]}")
    assert "objectives.t.workloads[0]" in line and "'serve'" in line and "decode" in line


def test_shipped_studies_check_clean() -> None:
    r = CliRunner().invoke(app, ["check", *map(str, sorted((ROOT / "studies").glob("*.yaml")))])
    assert r.exit_code == 0, r.output


def test_objectives_by_hand() -> None:
    """Throughput is the scenario's own metric; a design equal to the base scores as the
    base; area is the area model's total."""
    study = load_study(TINY)
    base = baseline_of(study)
    out = evaluate_designs(study, {"compute.units": np.array([132.0, 66.0]),
                                   "memory.HBM3.stacks": np.array([5.0, 8.0])}, base)
    assert out.values[0, 0] == pytest.approx(base["decode"]["throughput"])
    assert out.values[0, 1] == pytest.approx(out.columns["area_per_chip_mm2"][0])
    # more stacks: more bandwidth for a bandwidth-bound decode
    assert out.values[1, 0] > out.values[0, 0]
    assert set(out.constraints) >= {"area_mm2", "reticle_mm2", "shoreline_mm2",
                                    "unfit_workloads"}


def test_infeasible_designs_are_told_as_violating_with_their_reason(tmp_path: Path) -> None:
    study = load_study(TINY)
    out = evaluate_designs(study, {"compute.units": np.array([144.0]),
                                   "memory.HBM3.stacks": np.array([8.0])}, baseline_of(study))
    assert not out.feasible[0]
    assert out.constraints["area_mm2"][0] > 0
    assert "exceeds the budget of 800 mm2" in out.reason[0]
    assert np.isfinite(out.told(study.directions)).all()


def test_run_resume_and_outputs(tmp_path: Path) -> None:
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["study", str(TINY), "--out", str(out), "--trials", "40",
                                 "-q"])
    assert r.exit_code == 0, r.output
    assert len(_complete(out)) == 40
    r = CliRunner().invoke(app, ["study", str(TINY), "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    trials = _complete(out)
    assert len(trials) == 60 and sorted(t.number for t in trials) == list(range(60))
    for f in ("trials.csv", "trials.parquet", "pareto.csv", "references.csv", "pareto.png",
              "pareto.svg", "pareto.pdf", "parallel.png", "summary.md", "study.resolved.yaml",
              "run.json"):
        assert (out / f).stat().st_size > 0, f
    table = pd.read_parquet(out / "trials.parquet")
    assert len(table) == 60
    assert {"compute.units", "memory.HBM3.stacks", "objective.throughput", "objective.area",
            "area_per_chip_mm2", "feasible", "reason"} <= set(table.columns)
    assert (table["reason"][~table["feasible"]] != "").all()
    front = pd.read_csv(out / "pareto.csv")
    assert len(front) >= 1 and front["feasible"].all()
    # stored objectives are the table's (the table is rebuilt from the parameters)
    stored = {t.number: t.values for t in trials}
    feasible = table[table["feasible"]]
    for _, row in feasible.iterrows():
        assert stored[int(row["number"])][0] == pytest.approx(row["objective.throughput"])
    assert "h100-sxm" in (out / "summary.md").read_text()


def test_same_seed_same_trials(tmp_path: Path) -> None:
    study = load_study(TINY)
    runs = []
    for k in range(2):
        runner.run(study, runner.Options(out=tmp_path / str(k), trials=40))
        runs.append([t.params for t in _complete(tmp_path / str(k))])
    assert runs[0] == runs[1]


def test_changed_study_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    runner.run(load_study(TINY), runner.Options(out=out, trials=20))
    changed = tmp_path / "tiny.yaml"
    changed.write_text(TINY.read_text().replace("high: 144", "high: 140"))
    r = CliRunner().invoke(app, ["study", str(changed), "--out", str(out), "-q"])
    assert r.exit_code == 2
    assert "different study file" in r.output and len(r.output.strip().splitlines()) == 1


def test_killed_run_resumes_without_losing_or_doubling(tmp_path: Path) -> None:
    """SIGKILL a run mid-way; the re-run completes exactly the requested trials."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "dse", "study", str(TINY), "--out", str(out), "--trials",
           "3000", "--batch", "20", "-q"]
    proc = subprocess.Popen(cmd, cwd=tmp_path)
    journal = out / runner.JOURNAL
    deadline = time.time() + 60
    while time.time() < deadline and (not journal.exists() or journal.stat().st_size < 20000):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = len(_complete(out))
    assert 0 < before < 3000
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    numbers = [t.number for t in _complete(out)]
    assert len(numbers) == 3000 and len(set(numbers)) == 3000


def test_two_workers_on_one_journal_complete_exactly(tmp_path: Path) -> None:
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "dse", "study", str(TINY), "--out", str(out),
                        "--trials", "90", "--batch", "7", "--workers", "2", "-q"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert len(_complete(out)) == 90
    assert len(pd.read_csv(out / "trials.csv").query("state == 'COMPLETE'")) == 90


def test_three_workers_on_postgres_complete_exactly(tmp_path: Path, postgres_url: str) -> None:
    r = subprocess.run([sys.executable, "-m", "dse", "study", str(TINY), "--out",
                        str(tmp_path / "run"), "--storage", postgres_url, "--trials", "75",
                        "--batch", "6", "--workers", "3", "-q"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    st = optuna.load_study(study_name="tiny", storage=postgres_url)
    assert len(st.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) == 75


def test_grid_mode_and_hypervolume_ratio(tmp_path: Path) -> None:
    out = tmp_path / "run"
    runner.run(load_study(TINY), runner.Options(out=out, trials=60))
    CliRunner().invoke(app, ["study", str(TINY), "--out", str(out), "-q"])
    r = CliRunner().invoke(app, ["study", str(TINY), "--out", str(out), "--sampler", "grid"])
    assert r.exit_code == 0, r.output
    grid = pd.read_parquet(out / "grid" / "trials.parquet")
    assert len(grid) == 40 * 7  # 66..144 step 2, 2..8 stacks
    ratio = float(r.output.split("grid's front: ")[1].split()[0])
    assert 0.0 < ratio <= 1.0 + 1e-9


def test_grid_above_its_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text((DATA / "tiny-grid.yaml").read_text() + "  max_designs: 100\n")
    r = CliRunner().invoke(app, ["study", str(path), "--out", str(tmp_path / "out")])
    assert r.exit_code == 2
    assert "280 designs" in r.output and "search.max_designs" in r.output


def test_ctrl_c_stops_cleanly_and_keeps_finished_trials(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "dse", "study", str(TINY), "--out", str(out), "--trials",
           "5000", "--batch", "20", "-q"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    journal = out / runner.JOURNAL
    deadline = time.time() + 60
    while time.time() < deadline and (not journal.exists() or journal.stat().st_size < 20000):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "Ctrl-C" in stderr
    kept = len(_complete(out))
    assert 0 < kept < 5000
    assert len(pd.read_csv(out / "trials.csv")) == kept  # outputs written for them
    assert f"{kept:,} trials in the study" in stdout


def test_grid_designs_stored_as_trials_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text((DATA / "tiny-grid.yaml").read_text() + "  grid_trials: true\n")
    for _ in range(2):  # a second run keeps the stored grid
        r = CliRunner().invoke(app, ["study", str(path), "--out", str(tmp_path / "run")])
        assert r.exit_code == 0, r.output
    trials = _complete(tmp_path / "run", "tiny-grid")
    table = pd.read_parquet(tmp_path / "run" / "trials.parquet")
    assert len(trials) == len(table) == 280
    by_number = table.set_index("number")
    for t in trials[:20]:
        row = by_number.loc[t.number]
        assert t.params["compute.units"] == row["compute.units"]
        feasible = all(v <= 0 for v in t.constraints.values())
        assert feasible == bool(row["feasible"])


def test_bad_output_folder_and_storage_are_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "f.txt"
    a_file.write_text("x")
    r = CliRunner().invoke(app, ["study", str(TINY), "--out", str(a_file), "-q"])
    assert r.exit_code == 2 and r.output.strip() == f"--out {a_file}: exists and is not a " \
                                                      "folder"
    r = CliRunner().invoke(app, ["study", str(TINY), "--out", str(tmp_path / "o"), "--storage",
                                 "postgresql://nobody@127.0.0.1:1/none", "-q"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert r.output.startswith("--storage postgresql://nobody@127.0.0.1:1/none: ")


@pytest.mark.skipif(runner.gp_available(), reason="PyTorch is installed: gp runs")
def test_gp_without_pytorch_is_refused_at_its_key(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(TINY.read_text().replace("  seed: 1", "  seed: 1\n  sampler: gp"))
    r = CliRunner().invoke(app, ["check", str(path)])
    assert r.exit_code == 2
    assert f"{path}:19:12: search.sampler: Optuna's GP sampler needs PyTorch" in r.output


def test_resolved_study_reproduces_the_run(tmp_path: Path) -> None:
    """study.resolved.yaml is a study file: run elsewhere, it gives the same trials."""
    first = tmp_path / "a"
    r = CliRunner().invoke(app, ["study", str(TINY), "--out", str(first), "--seed", "7",
                                 "--trials", "40", "-q"])
    assert r.exit_code == 0, r.output
    again = tmp_path / "b"
    r = CliRunner().invoke(app, ["study", str(first / "study.resolved.yaml"), "--out",
                                 str(again), "-q"])
    assert r.exit_code == 0, r.output
    assert [t.params for t in _complete(first)] == [t.params for t in _complete(again)]
    assert load_study(first / "study.resolved.yaml").fingerprint() == \
        load_study(TINY).fingerprint()
