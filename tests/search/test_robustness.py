"""Robustness in a study's output (issue 24, item 7): the near-optimal region within the
model's measured error, the error band's source (the validation data), the alternatives'
schema, and the sensitivity run."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from dse.cli import app
from dse.search import robustness
from dse.search.space import load_study

ROOT = Path(__file__).parents[2]
TINY = ROOT / "tests" / "data" / "studies" / "tiny.yaml"

ALTERNATIVES = """\
alternatives:
  four-stacks:
    params:
      memory.HBM3.stacks: {high: 4}
    trials: 40
  slow-l2:
    set:
      memory.L2.bandwidth: 3 TB/s
    trials: 40
  small-die:
    constraints:
      area: 600 mm2
    trials: 40
"""


def _with_alternatives(tmp_path: Path, text: str = ALTERNATIVES) -> Path:
    path = tmp_path / "tiny-alt.yaml"
    path.write_text(TINY.read_text() + text)
    return path


def _study(path: Path, out: Path, *extra: str) -> str:
    r = CliRunner().invoke(app, ["study", str(path), "--out", str(out), "-q", *extra])
    assert r.exit_code == 0, r.output
    return r.output


# --- the band comes from the validation data ---------------------------------------------

def test_error_table_is_regenerated_from_dse_validate() -> None:
    """dse/data/model_error.csv is what `dse validate` gives on the shipped measurements
    today: a model change that moves any phase's error makes this fail (regenerate with the
    command in the file's header)."""
    from dse import validate

    want = robustness.error_table(validate.summary(validate.run()))
    assert robustness.error_path().read_text() == want, (
        "dse/data/model_error.csv is stale: python -c 'from dse import validate; from "
        "dse.search import robustness; robustness.write_error_table(validate.summary("
        "validate.run()))'")


def test_bands_are_the_phases_median_errors_and_their_weighted_mean() -> None:
    errors = robustness.phase_errors()
    study = load_study(ROOT / "studies" / "middle-ground.yaml")
    band = robustness.bands(study)
    memory = band["objective.memory_bound"]
    assert memory is not None and memory.combined
    phases = [phase for _, phase, _ in memory.parts]
    assert phases == ["decode", "serve", "inference"]
    want = np.mean([errors[p]["median"] for p in phases])  # equal weights
    assert memory.value == pytest.approx(want)
    encoder = band["objective.encoder"]
    assert encoder is not None and encoder.value == errors["inference"]["median"]
    assert "3.3% inference" in encoder.text()
    # the area objective has no measured error: no band, no region
    assert robustness.bands(load_study(TINY))["objective.area"] is None


# --- the near-optimal region -------------------------------------------------------------

def test_region_holds_the_best_and_only_feasible_designs_within_the_band() -> None:
    study = load_study(TINY)
    band = robustness.Band(0.05, (("decode", "decode", 0.05),), False)
    frame = pd.DataFrame({
        "number": [0, 1, 2, 3, 4, 5],
        "compute.units": [100.0, 120.0, 140.0, 80.0, 130.0, 120.0],
        "memory.HBM3.stacks": [4.0, 5.0, 6.0, 8.0, 7.0, 5.0],
        "objective.throughput": [100.0, 96.0, 94.9, 99.0, 200.0, 96.0],
        "objective.area": [700.0] * 6,
        "feasible": [True, True, True, True, False, True],  # 4: best value, infeasible
    })
    regions = robustness.near_optimal(study, frame, {"objective.throughput": band,
                                                     "objective.area": None})
    assert list(regions) == ["objective.throughput"]
    r = regions["objective.throughput"]
    assert r.best == 100.0 and r.best_number == 0 and r.threshold == pytest.approx(95.0)
    # inside: 0 (best), 1 and 5 (the same design: counted once), 3; not 2 (94.9 < 95), 4
    assert r.designs == 3 and r.feasible == 4
    spans = {s.path: (s.low, s.high) for s in r.spans}
    assert spans == {"compute.units": (80.0, 120.0), "memory.HBM3.stacks": (4.0, 8.0)}
    # the best design lies inside its region's spans
    for s in r.spans:
        assert s.low <= frame.loc[0, s.column] <= s.high


def test_a_minimized_objective_takes_designs_up_to_one_band_above_the_best() -> None:
    study = load_study(TINY)
    band = robustness.Band(0.10, (("decode", "decode", 0.10),), False)
    frame = pd.DataFrame({"number": [0, 1, 2], "compute.units": [66.0, 70.0, 90.0],
                          "memory.HBM3.stacks": [2.0, 2.0, 3.0],
                          "objective.throughput": [1.0, 1.0, 1.0],
                          "objective.area": [500.0, 549.0, 551.0], "feasible": [True] * 3})
    r = robustness.near_optimal(study, frame, {"objective.area": band})["objective.area"]
    assert r.designs == 2 and r.best == 500.0
    assert {s.path: (s.low, s.high) for s in r.spans}["compute.units"] == (66.0, 70.0)


def test_summary_states_the_region_and_its_band(tmp_path: Path) -> None:
    out = tmp_path / "run"
    told = _study(TINY, out)
    summary = (out / "summary.md").read_text()
    assert "## Near-optimal region" in summary
    assert "**Within the model's error (throughput).**" in summary
    e = robustness.phase_errors()["decode"]["median"]
    assert f"{e:.1%} decode" in summary
    assert "within the model's" in told  # one line on the console


# --- the alternatives' schema ------------------------------------------------------------

def _check(path: Path) -> list[str]:
    r = CliRunner().invoke(app, ["check", str(path)])
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert all("Traceback" not in x for x in lines)
    return lines


def test_alternative_with_an_unknown_parameter_is_one_positioned_line(tmp_path: Path) -> None:
    path = _with_alternatives(tmp_path, "alternatives:\n  a:\n    params:\n"
                                        "      compute.unts: {high: 100}\n")
    (line,) = _check(path)
    n = len(TINY.read_text().splitlines())
    assert re.match(rf"{re.escape(str(path))}:{n + 4}:\d+: alternatives\.a\.params\."
                    r"compute\.unts: ", line), line
    assert "compute.units" in line


@pytest.mark.parametrize(("text", "where", "what"), [
    ("    set:\n      memory.L2.bandwidth: 3 TB\n", "alternatives.a.set.memory.L2.bandwidth",
     "bandwidth"),
    ("    constraints:\n      power: 500 Wh\n", "alternatives.a.constraints.power", "Wh"),
    ("    params:\n      memory.HBM3.stacks: {high: 6 TB}\n",
     "alternatives.a.params.memory.HBM3.stacks.high", "6 TB"),
])
def test_alternative_with_a_bad_unit_is_one_positioned_line(tmp_path: Path, text: str,
                                                            where: str, what: str) -> None:
    path = _with_alternatives(tmp_path, "alternatives:\n  a:\n" + text)
    (line,) = _check(path)
    n = len(TINY.read_text().splitlines())
    assert re.match(rf"{re.escape(str(path))}:{n + 4}:\d+: {re.escape(where)}: ", line), line
    assert what in line


def test_an_alternative_that_changes_nothing_or_names_no_folder_is_refused(
        tmp_path: Path) -> None:
    (line,) = _check(_with_alternatives(tmp_path, "alternatives:\n  a: {trials: 5}\n"))
    assert "alternatives.a: an alternative changes something" in line
    (line,) = _check(_with_alternatives(
        tmp_path, "alternatives:\n  ../x:\n    constraints: {power: 500 W}\n"))
    assert "alternatives.../x: an alternative's name is a folder" in line


def test_alternatives_resolve_as_studies_of_their_own(tmp_path: Path) -> None:
    study = load_study(_with_alternatives(tmp_path))
    assert list(study.alternatives) == ["four-stacks", "slow-l2", "small-die"]
    four = study.alternatives["four-stacks"]
    assert four.spec.name == "tiny.four-stacks" and four.spec.search.trials == 40
    assert [(p.path, p.low, p.high) for p in four.params][1] == ("memory.HBM3.stacks", 2, 4)
    assert study.alternatives["slow-l2"].fixed == {"memory.L2.bandwidth": 3e12}
    assert study.alternatives["small-die"].area_budget == pytest.approx(600.0)
    assert len({a.fingerprint() for a in study.alternatives.values()}
               | {study.fingerprint()}) == 4
    # declaring alternatives does not change the study's own digest: its run resumes
    assert study.fingerprint() == load_study(TINY).fingerprint()


def test_an_alternative_may_ask_the_cost_question(tmp_path: Path) -> None:
    """An iso-dollar alternative: `cost` is its budget, `cost_of` a chip's modelled cost;
    the study's own run has none."""
    study = load_study(_with_alternatives(tmp_path, """\
alternatives:
  iso-dollar:
    constraints:
      cost: 3000 USD
  as-h100:
    constraints:
      cost_of: h100-sxm
"""))
    assert study.cost_budget is None
    assert study.alternatives["iso-dollar"].cost_budget == pytest.approx(3000.0)
    h100 = study.alternatives["as-h100"].cost_budget
    assert h100 is not None and 2000 < h100 < 5000
    bad = _with_alternatives(tmp_path, "alternatives:\n  x:\n    constraints:\n"
                                       "      cost: 3000 USD\n      cost_of: h100-sxm\n")
    r = CliRunner().invoke(app, ["check", str(bad)])
    assert r.exit_code == 2 and "give the cost budget once" in r.output, r.output


# --- the sensitivity run -----------------------------------------------------------------

def _section(summary: str) -> str:
    start = summary.index("## Sensitivity")
    return summary[start:summary.index("\n## ", start + 1)]


def test_sensitivity_is_deterministic_and_never_touches_the_main_run(tmp_path: Path) -> None:
    path = _with_alternatives(tmp_path)
    a, b, plain = tmp_path / "a", tmp_path / "b", tmp_path / "plain"
    told = _study(path, a)
    _study(path, b)
    _study(TINY, plain)
    assert "alternative four-stacks:" in told and "sensitivity (3 alternatives)" in told
    first, second = (x / "summary.md" for x in (a, b))
    assert _section(first.read_text()) == _section(second.read_text())
    assert "| four-stacks | memory.HBM3.stacks high 4 | 40 |" in first.read_text()
    # decode is HBM-bound: its best design takes more than four stacks, so capping them at
    # four moves the answer, and the table says so
    flips = [x for x in _section(first.read_text()).splitlines()
             if x.startswith("| throughput: memory.HBM3.stacks within the study's")]
    assert len(flips) == 1 and "**flips**: below (4)" in flips[0], flips
    for name in ("four-stacks", "slow-l2", "small-die"):
        folder = a / "alternatives" / name
        assert (folder / "study.journal").is_file() and (folder / "summary.md").is_file()
        assert len(pd.read_csv(folder / "trials.csv")) == 40
    # the main run's trials are the same with and without alternatives declared
    pd.testing.assert_frame_equal(pd.read_csv(a / "trials.csv"),
                                  pd.read_csv(plain / "trials.csv"))
    # the alternative keeps its hardware value and its trials in its resolved study
    resolved = yaml.safe_load((a / "alternatives" / "slow-l2" / "study.resolved.yaml")
                              .read_text())
    assert resolved["set"] == {"memory.L2.bandwidth": "3 TB/s"}
    assert resolved["search"]["trials"] == 40 and "alternatives" not in resolved
    # a second run resumes every alternative: nothing new, the same table
    again = _study(path, a)
    assert "alternative four-stacks: 40 trials in the study (0 run now" in again
    assert _section((a / "summary.md").read_text()) == _section(second.read_text())


def test_trials_option_caps_the_alternatives_and_no_alternatives_skips_them(
        tmp_path: Path) -> None:
    path = _with_alternatives(tmp_path)
    _study(path, tmp_path / "few", "--trials", "10")
    assert len(pd.read_csv(tmp_path / "few" / "alternatives" / "slow-l2" / "trials.csv")) == 10
    told = _study(path, tmp_path / "none", "--no-alternatives")
    assert not (tmp_path / "none" / "alternatives").exists() and "alternative" not in told
    assert "## Sensitivity" not in (tmp_path / "none" / "summary.md").read_text()


def test_a_study_without_alternatives_writes_what_it_wrote_before(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _study(TINY, out)
    assert sorted(p.name for p in out.iterdir()) == sorted([
        "trials.csv", "trials.parquet", "pareto.csv", "references.csv", "pareto.png",
        "pareto.svg", "pareto.pdf", "parallel.png", "summary.md", "study.resolved.yaml",
        "run.json", "study.journal", "study.journal.run"])  # the run lock (dse.search.journal)
    assert not (out / "alternatives").exists()
    resolved = yaml.safe_load((out / "study.resolved.yaml").read_text())
    assert "alternatives" not in resolved and "set" not in resolved
    assert "## Sensitivity" not in (out / "summary.md").read_text()


def test_a_conclusion_flips_where_an_alternative_moves_the_best_out_of_it() -> None:
    f = robustness.Finding(("o", "range", "p"), "o: p at the top of its range", "top", "8",
                           ("top",))
    same = robustness.Finding(f.key, f.claim, "top", "6", ("top",))
    near = robustness.Finding(f.key, f.claim, "middle", "7", ("middle", "top"))
    moved = robustness.Finding(f.key, f.claim, "middle", "5", ("middle",))
    assert robustness.holds(f, same) is True
    assert robustness.holds(f, near) is True  # within that run's error band
    assert robustness.holds(f, moved) is False
    assert robustness.holds(f, None) is None
    wide = robustness.Finding(f.key, f.claim, "top", "8", ("middle", "top"))
    assert robustness.holds(wide, moved) is None  # not a conclusion of the study itself


def test_a_study_level_set_fixes_a_hardware_value_and_may_not_vary_it(tmp_path: Path) -> None:
    path = _with_alternatives(tmp_path, "set:\n  memory.L2.bandwidth: 9 TB/s\n")
    study = load_study(path)
    assert study.fixed == {"memory.L2.bandwidth": 9e12}
    assert study.fingerprint() != load_study(TINY).fingerprint()  # not resumed as TINY
    from dse.search.objective import evaluate_designs

    params = {"compute.units": np.array([120.0]), "memory.HBM3.stacks": np.array([7.0])}
    faster = evaluate_designs(study, study.designs(params)).values[0, 0]
    plain = evaluate_designs(study, params).values[0, 0]
    assert faster > plain  # the faster L2 reaches the designs
    (line,) = _check(_with_alternatives(tmp_path, "set:\n  compute.units: 100\n"))
    assert "set.compute.units: the study varies this path" in line
