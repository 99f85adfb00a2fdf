"""Technology-level assumptions a study fixes (package geometry, spares policy) and the
number of chips as a study parameter (issue 24, deliverables 6 and 7)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dse.cli import app
from dse.errors import DseError
from dse.model.area import area
from dse.model.batch import design_batch
from dse.model.cost import cost
from dse.search import chips
from dse.search.objective import evaluate_designs
from dse.search.space import load_study
from dse.spec import assumptions
from dse.spec.load import load_design

ROOT = Path(__file__).parents[1]
TINY = ROOT / "tests" / "data" / "studies" / "tiny.yaml"
CHIPS_STUDY = ROOT / "studies" / "chips-vs-memory.yaml"


def _tiny(tmp_path: Path, extra: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(TINY.read_text() + extra)
    return path


def _check(path: Path) -> list[str]:
    r = CliRunner().invoke(app, ["check", str(path)])
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert all("Traceback" not in x for x in lines)
    return lines


# --- package geometry and spares, fixed per study ----------------------------------------

def _edges_constraint(tmp_path: Path, edges: int | None) -> tuple[float, str]:
    """The HBM-edge constraint and reason of an H100-sized design (132 SMs, 8 stacks, no
    spares) in the tiny study with `hbm_edges` set (None: the node's rule)."""
    extra = "set:\n  technology.spares: none\n"
    if edges is not None:
        extra += f"  technology.package.hbm_edges: {edges}\n"
    study = load_study(_tiny(tmp_path, extra, f"e{edges}.yaml"))
    out = evaluate_designs(study, {"compute.units": np.array([132.0]),
                                   "memory.HBM3.stacks": np.array([8.0])})
    return float(out.constraints["hbm_stacks_over_edges"][0]), str(out.reason[0])


def test_hbm_edges_set_in_a_study_puts_eight_stacks_where_two_edges_refuse(
        tmp_path: Path) -> None:
    # By hand: the H100 without spares is 683.34 mm2 (below); 3 more HBM PHYs of 13.5 mm2
    # with their 22% uncore add 3 x 13.5 / 0.78: 735.27 mm2. At aspect 1.27 its long edge is
    # sqrt(735.3 x 1.27) = 30.56 mm and holds floor((30.56 + 2 x 1.5) / 11) = 3 stacks of
    # 11 mm, its short edge 24.06 mm floor(27.06 / 11) = 2. Two long edges: 6 < 8; all four
    # edges: 3 + 3 + 2 + 2 = 10 >= 8.
    spec, tech, _ = load_design("h100-sxm")
    db = design_batch(spec, {"technology.spares": "none", "memory.HBM3.stacks": 8})
    die = float(area(db, tech).die_mm2[0])
    assert die == pytest.approx(735.27, abs=0.05)
    long_edge, short_edge = math.sqrt(die * 1.27), math.sqrt(die / 1.27)
    assert math.floor((long_edge + 3) / 11) == 3 and math.floor((short_edge + 3) / 11) == 2
    default, why = _edges_constraint(tmp_path, None)
    assert default > 0 and "need 4 per long edge (2 HBM edges per die)" in why
    assert _edges_constraint(tmp_path, 2)[0] > 0
    four, why4 = _edges_constraint(tmp_path, 4)
    assert four <= 0 and "edge" not in why4.split("interposer")[0]


def test_a_set_assumption_changes_the_digest_and_the_default_keeps_it(tmp_path: Path) -> None:
    plain = load_study(TINY).fingerprint()
    stated = load_study(_tiny(tmp_path, "set:\n  technology.spares: as-built\n", "a.yaml"))
    assert stated.fingerprint() == plain
    for extra in ("set:\n  technology.spares: none\n",
                  "set:\n  technology.package.hbm_edges: 4\n"):
        assert load_study(_tiny(tmp_path, extra, "b.yaml")).fingerprint() != plain


@pytest.mark.parametrize("key", ["technology.package.hbm_edges", "technology.spares",
                                 "technology.package.aspect_ratio"])
def test_varying_an_assumption_is_one_positioned_line(tmp_path: Path, key: str) -> None:
    text = TINY.read_text().replace(
        "  memory.HBM3.stacks: {low: 2, high: 8}\n",
        f"  memory.HBM3.stacks: {{low: 2, high: 8}}\n  {key}: {{choices: [2, 4]}}\n")
    path = tmp_path / "v.yaml"
    path.write_text(text)
    (line,) = _check(path)
    assert re.match(rf"{re.escape(str(path))}:8:\d+: parameters\.{re.escape(key)}: the model "
                    "reads one value of this field for every design, so it cannot be varied "
                    "yet; fix it with set:", line), line


def test_a_bad_assumption_value_is_one_line_at_its_key(tmp_path: Path) -> None:
    lines = _check(_tiny(tmp_path, "set:\n  technology.spares: spare\n"
                                   "alternatives:\n  a:\n    set:\n"
                                   "      technology.package.hbm_edges: 5\n"))
    n = len(TINY.read_text().splitlines())
    assert len(lines) == 2
    assert f":{n + 2}:" in lines[0] and "set.technology.spares: expected one of: as-built, " \
        "none" in lines[0]
    assert f":{n + 6}:" in lines[1] and "alternatives.a.set.technology.package.hbm_edges: " \
        "expected a whole number >= 1 and <= 4, found 5" in lines[1]


def test_an_alternative_applies_its_assumptions_to_its_own_hardware() -> None:
    study = load_study("middle-ground")
    assert study.hardware.technology.spares == "as-built"  # the study's set: H100's policy
    assert study.alternatives["no-spares"].hardware.technology.spares == "none"
    pk = study.alternatives["whole-perimeter"].hardware.technology.package
    assert pk.hbm_edges == 4
    assert study.hardware.technology.package is None  # the main run keeps the node's rule
    prints = {a.fingerprint() for a in study.alternatives.values()} | {study.fingerprint()}
    assert len(prints) == len(study.alternatives) + 1


def test_cli_takes_one_value_of_an_assumption_and_refuses_several() -> None:
    runner = CliRunner()
    base = ["area", "h100-sxm", "--set", "technology.spares=none", "--set",
            "memory.HBM3.stacks=8", "--reticle", "-f", "json"]
    r = runner.invoke(app, [*base, "--set", "technology.package.hbm_edges=4"])
    four = json.loads(r.output)
    assert four["package"]["hbm_edges_per_die"] == 4.0
    assert "per long edge" not in (four["reason"] or "")
    two = json.loads(runner.invoke(app, base).output)
    assert "need 4 per long edge" in two["reason"]
    # the interposer of 8 stacks round one die (3,280 mm2) is over CoWoS-S's 2,831 mm2 and
    # within CoWoS-L's
    assert "exceeds the 2831 mm2 limit of cowos-s" in four["reason"]
    r = runner.invoke(app, [*base, "--set", "technology.package.hbm_edges=4", "--set",
                            "technology.package.packaging=cowos-l"])
    large = json.loads(r.output)
    assert large["feasible"] and large["package"]["packaging"] == "cowos-l"
    r = runner.invoke(app, [*base, "--set", "technology.package.packaging=glass"])
    assert r.exit_code == 2 and r.output.strip() == (
        "--set technology.package.packaging: expected one of: cowos-s, cowos-l, organic; "
        "found 'glass'")
    r = runner.invoke(app, ["eval", "h100-sxm", "llama2-7b", "--set",
                            "technology.package.hbm_edges=2,4"])
    assert r.exit_code == 2
    assert r.output.strip() == ("--set technology.package.hbm_edges: the model reads one value "
                                "of this field for every design, so it cannot be varied yet; "
                                "give one value")


def test_an_assumption_needs_a_technology() -> None:
    spec, _, _ = load_design("h100-sxm")
    bare = spec.model_copy(update={"technology": None})
    with pytest.raises(DseError, match="names no technology"):
        assumptions.applied(bare, {"technology.spares": "none"})


# --- spares policy -------------------------------------------------------------------------

def test_no_spares_prices_an_h100_clone_below_the_h100_and_its_yield_falls() -> None:
    spec, tech, _ = load_design("h100-sxm")
    h100 = design_batch(spec)
    bare = design_batch(spec, {"technology.spares": "none"})
    a_h, a_b = area(h100, tech), area(bare, tech)
    c = a_h.components
    # By hand: the enabled counts only, 132 of 144 SMs (with their L1), 50 of 60 MB of L2, 5
    # of 6 HBM PHYs; the uncore is 22% of the die.
    rest = ((c["compute"][0] + c["L1 (sram)"][0]) * 132 / 144 + c["L2 (cache)"][0] * 50 / 60
            + c["HBM3 PHY"][0] * 5 / 6 + c["chip-to-chip PHY"][0] + c["host PHY"][0])
    assert a_b.total_mm2[0] == pytest.approx(rest / (1 - 0.22), rel=1e-9)
    assert a_b.total_mm2[0] == pytest.approx(683.34, abs=0.01)
    assert a_h.total_mm2[0] == pytest.approx(757.28, abs=0.01)
    y_h, y_b = cost(h100, tech, a_h).die_yield[0], cost(bare, tech, a_b).die_yield[0]
    assert y_b < y_h  # a smaller die that must work whole yields less than a harvested one


def test_a_derived_design_with_no_spares_matches_the_policy_on_the_base(tmp_path: Path) -> None:
    path = tmp_path / "clone.yaml"
    path.write_text("base: h100-sxm\nsource: test\ntechnology:\n  spares: none\n")
    spec, tech, _ = load_design(path)
    h100, _, _ = load_design("h100-sxm")
    assert area(design_batch(spec), tech).total_mm2[0] == pytest.approx(
        area(design_batch(h100, {"technology.spares": "none"}), tech).total_mm2[0])


# --- chips as a study parameter ---------------------------------------------------------

def test_more_chips_cost_proportionally_more_and_tp_follows() -> None:
    study = load_study(CHIPS_STUDY)
    job = study.jobs["llama2-70b-decode"]
    assert job.execution.tp == 2  # tp: all on the workload's own 2 chips
    for n in (1, 2, 4, 8):
        ex, why = chips.execution_for(job, n)
        assert why == "" and ex is not None and (ex.chips, ex.tp, ex.pp) == (n, n, 1)
    params = {"compute.units": np.full(3, 128.0), "memory.HBM3.stacks": np.full(3, 5.0),
              chips.path_of("llama2-70b-decode"): np.array([1.0, 2.0, 4.0])}
    out = evaluate_designs(study, params)
    per_chip = out.columns["cost_per_chip_usd"]
    system = out.columns["llama2-70b-decode.system_cost_usd"]
    assert np.allclose(per_chip, per_chip[0])  # the same chip
    assert np.allclose(system, per_chip * [1, 2, 4])
    budget = study.system_budget["llama2-70b-decode"]
    one, _, _ = load_design("h100-sxm")
    assert budget == pytest.approx(2 * float(cost(design_batch(one), study.tech, area(
        design_batch(one), study.tech)).total_usd[0]))
    assert out.feasible[:2].all() and not out.feasible[2]
    assert "system cost" in out.reason[2] and "(4 chips)" in out.reason[2]
    thr = out.per_job["llama2-70b-decode"]["throughput"]
    assert thr[1] > thr[0]  # two chips split the weights' bandwidth
    # the same design at the workload's own 2 chips is what the study without the
    # parameter gives
    alone = evaluate_designs(study, {"compute.units": np.array([128.0]),
                                     "memory.HBM3.stacks": np.array([5.0])})
    assert alone.per_job["llama2-70b-decode"]["throughput"][0] == pytest.approx(thr[1])


def test_a_chip_count_the_split_cannot_use_is_infeasible_with_its_reason(
        tmp_path: Path) -> None:
    text = CHIPS_STUDY.read_text().replace("{choices: [1, 2, 4, 8]}", "{low: 1, high: 4}")
    fixed_tp = text.replace("tp: all ", "tp: 2   ")
    for body, bad, why in ((text, 3, "3 chips (tp 3, pp 1): "),
                           (fixed_tp, 3, "3 chips: not a multiple of tp x pp (2)")):
        path = tmp_path / "c.yaml"
        path.write_text(body)
        study = load_study(path)
        params = {"compute.units": np.full(2, 128.0), "memory.HBM3.stacks": np.full(2, 5.0),
                  chips.path_of("llama2-70b-decode"): np.array([2.0, float(bad)])}
        out = evaluate_designs(study, params)
        assert out.feasible[0] and not out.feasible[1]
        assert why in out.reason[1]
        assert not np.isfinite(out.per_job["llama2-70b-decode"]["throughput"][1])


@pytest.mark.parametrize(("key", "message"), [
    ("workloads.llama2-70b-decod.chips", "'llama2-70b-decod' is not a workload of this study"),
    ("workloads.llama2-70b-decode.tp", "a study varies a workload's chips only"),
])
def test_a_bad_workload_parameter_is_one_positioned_line(tmp_path: Path, key: str,
                                                         message: str) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(CHIPS_STUDY.read_text().replace("workloads.llama2-70b-decode.chips", key))
    (line,) = _check(path)
    assert f"parameters.{key}: {message}" in line


def test_tp_all_needs_whole_stages(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(CHIPS_STUDY.read_text().replace("    chips: 2 ", "    chips: 3 ")
                    .replace("    tp: all ", "    pp: 2\n    tp: all "))
    (line,) = _check(path)
    assert "workloads.llama2-70b-decode.tp: tp: all splits every chip of a pipeline stage, " \
        "and chips (3) is not a multiple of pp (2)" in line


def test_the_chips_study_runs_and_is_deterministic(tmp_path: Path) -> None:
    frames = []
    for run in ("a", "b"):
        r = CliRunner().invoke(app, ["study", str(CHIPS_STUDY), "--out",
                                     str(tmp_path / run), "-q"])
        assert r.exit_code == 0, r.output
        frames.append(pd.read_csv(tmp_path / run / "trials.csv"))
    pd.testing.assert_frame_equal(frames[0], frames[1])
    col = chips.path_of("llama2-70b-decode")
    ok = frames[0][frames[0]["feasible"]]
    assert {1.0, 2.0} <= set(ok[col])  # fewer, fuller chips and the reference's two
    summary = (tmp_path / "a" / "summary.md").read_text()
    assert "over the system cost budget" in summary
    assert col in summary  # the near-optimal region names the chip count


def test_an_optuna_sampler_varies_chips(tmp_path: Path) -> None:
    text = CHIPS_STUDY.read_text().replace("sampler: grid", "sampler: nsga2\n  trials: 40\n"
                                                             "  batch: 20")
    path = tmp_path / "n.yaml"
    path.write_text(text)
    r = CliRunner().invoke(app, ["study", str(path), "--out", str(tmp_path / "o"), "-q"])
    assert r.exit_code == 0, r.output
    trials = pd.read_csv(tmp_path / "o" / "trials.csv")
    assert len(trials) == 40
    assert set(trials[chips.path_of("llama2-70b-decode")]) <= {1.0, 2.0, 4.0, 8.0}


def test_budgets_are_weighed_before_the_run_with_a_chips_parameter(tmp_path: Path) -> None:
    from dse.search import budget

    study = load_study(CHIPS_STUDY)
    assert budget.smallest(study) is not None  # the chip count changes no chip's area
    path = tmp_path / "poor.yaml"
    path.write_text(CHIPS_STUDY.read_text().replace("system_cost_of: h100-sxm",
                                                    "system_cost: 500 USD"))
    (line,) = _check(path)
    assert "constraints.system_cost: no design can meet the 500 USD system cost budget of " \
        "llama2-70b-decode: the cheapest design the parameters' ranges allow costs" in line
    assert line.endswith("on 1 chip")


def test_alternatives_change_the_chip_count_and_the_system_budget(tmp_path: Path) -> None:
    path = tmp_path / "alt.yaml"
    path.write_text(CHIPS_STUDY.read_text() + (
        "alternatives:\n  pairs:\n    params:\n"
        "      workloads.llama2-70b-decode.chips: {choices: [2, 4]}\n"
        "  rich:\n    constraints:\n      system_cost: 12000 USD\n"))
    study = load_study(path)
    pairs, rich = study.alternatives["pairs"], study.alternatives["rich"]
    col = chips.path_of("llama2-70b-decode")
    assert next(p for p in pairs.params if p.path == col).choices == (2.0, 4.0)
    assert pairs.system_budget == study.system_budget
    assert rich.system_budget == {"llama2-70b-decode": 12000.0}
    assert len({study.fingerprint(), pairs.fingerprint(), rich.fingerprint()}) == 3


def test_eval_echoes_the_assumptions_it_applied() -> None:
    r = CliRunner().invoke(app, ["eval", "h100-sxm", "llama2-7b", "--set",
                                 "technology.spares=none", "--set",
                                 "technology.package.hbm_edges=4", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["overrides"] == {"technology.spares": "none",
                                                 "technology.package.hbm_edges": 4}
    r = CliRunner().invoke(app, ["eval", "h100-sxm", "llama2-7b", "--set",
                                 "technology.spares=none"])
    assert "--set technology.spares=none" in r.output.splitlines()[0]
