"""A study's workload may name training's context- and expert-parallel degrees; outside
training they are refused at the key. And a training study's setup columns keep their type
when some designs come from the run's memo (a regression: a flag read back as 0.0 beside a
fresh False made trials.parquet unwritable, an internal error)."""

from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from dse.cli import app
from dse.search.space import load_study

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def _study(tmp_path: Path, **replace: str) -> Path:
    text = (ROOT / "studies" / "training-capacity.yaml").read_text()
    text = text.replace("base: middle-ground", f"base: {ROOT / 'hwspecs' / 'middle-ground.yaml'}")
    text = text.replace("trials: 2000", "trials: 16")
    text = text.replace("  batch: 256\n  seed", "  batch: 8\n  seed")
    for old, new in replace.items():
        text = text.replace(old, new)
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def test_training_study_writes_its_setup_columns(tmp_path):
    result = runner.invoke(app, ["study", str(_study(tmp_path)), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    trials = pd.read_parquet(tmp_path / "o" / "trials.parquet")
    column = trials["llama2-13b-train.sequence_parallel"].dropna()
    assert len(column) and set(column.map(type)) <= {bool}


def test_study_runs_context_parallel_training(tmp_path):
    path = _study(tmp_path, **{"    chips: 8\n": "    chips: 8\n    cp: 2\n"})
    result = runner.invoke(app, ["study", str(path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    # each job keeps its workload's name (a loop over cp and ep once renamed it "ep", and a
    # study varying chips lost the parameter that names the job)
    study = load_study(path)
    assert {j.name for j in study.jobs.values()} == set(study.jobs) == {"llama2-13b-train"}
    assert study.jobs["llama2-13b-train"].execution.cp == 2


def test_cp_outside_training_is_refused_at_its_key(tmp_path):
    path = _study(tmp_path, **{"    chips: 8\n": "    chips: 8\n    cp: 2\n",
                               "phase: training": "phase: prefill",
                               "    batch: 256\n": "    batch: 1\n"})
    result = runner.invoke(app, ["study", str(path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    line = result.output.strip().splitlines()[-1]
    assert line.endswith("workloads.llama2-13b-train.cp: context and expert parallelism are "
                         "modelled in training only (phase prefill splits over tp and pp; "
                         "found 2)"), line
