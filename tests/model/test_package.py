"""Package geometry (dse.model.package): stacks per edge from the stack's footprint, 8 HBM3
stacks beside one H100-sized die infeasible with the edge named and feasible on two dies
that pay for their link, the interposer against its packaging technology, the reticle
message naming the area compared, and a derived design priced exactly as its base."""

import json

import numpy as np
import pytest

from dse.errors import SpecError
from dse.model.area import area
from dse.model.batch import design_batch
from dse.model.package import (
    d2d_joints,
    die_edges,
    geometry,
    interposer_area_mm2,
    layout,
    stacks_per_edge,
)
from dse.search.objective import evaluate_designs
from dse.search.space import load_study
from dse.spec.load import load_design, load_hardware, load_technology

N4 = load_technology("n4")
RULES = N4.package


def test_node_rules_are_data_with_sources():
    assert RULES is not None and RULES.hbm_edges == 2
    assert RULES.footprint["hbm3"].width == pytest.approx(11.0)
    assert RULES.footprint["hbm2e"].width == pytest.approx(7.75)
    assert RULES.packaging["cowos-s"].limit == pytest.approx(3.3 * 858.0, abs=0.5)
    assert not RULES.packaging["organic"].hbm
    for group in (RULES, RULES.d2d, *RULES.packaging.values()):
        assert group.source and group.includes


def test_stacks_per_edge_from_footprint():
    # floor((edge + 2 overhang) / width): 31.0 + 3 = 34 mm holds 3 stacks of 11 mm, 4 of
    # 7.75 mm; 29.9 + 3 = 32.9 mm holds 2 of 11 mm.
    got = stacks_per_edge(np.array([31.0, 29.9, 31.0]), 11.0, 1.5)
    assert got.tolist() == [3.0, 2.0, 3.0]
    assert stacks_per_edge(np.array([31.0]), 7.75, 1.5).tolist() == [4.0]
    long, short = die_edges(np.array([800.0]), 1.25)
    assert long[0] == pytest.approx(np.sqrt(1000.0)) and short[0] == pytest.approx(np.sqrt(640))
    assert long[0] * short[0] == pytest.approx(800.0)


def test_layout_and_joints():
    rows, cols = layout(np.array([1.0, 2.0, 4.0, 8.0]))
    assert rows.tolist() == [1, 1, 2, 2] and cols.tolist() == [1, 2, 2, 4]
    assert d2d_joints(np.array([1.0, 2.0, 4.0, 8.0])).tolist() == [0, 1, 4, 10]


def test_interposer_area_by_hand():
    # One die of 31 x 24.4 mm (aspect 1.27 rounded away below: compute from the edges), 6
    # stacks of 11 x 11 mm, 3 per long edge: width max(31, 3 x 11 + 2 x 1) = 35, height
    # 24.4 + 2 x (1 + 11) = 48.4, margin 2 mm all round: 39 x 52.4.
    die = 31.0 * 24.4
    got = interposer_area_mm2(np.array([die]), np.array([1.0]), np.array([6.0]), RULES,
                              aspect=31.0 / 24.4)
    assert got[0] == pytest.approx(39.0 * 52.4)
    # No stacks: the die and the margin alone.
    bare = interposer_area_mm2(np.array([die]), np.array([1.0]), np.array([0.0]), RULES,
                               aspect=31.0 / 24.4)
    assert bare[0] == pytest.approx(35.0 * 28.4)
    # Monotone in stacks and dies' area.
    more = interposer_area_mm2(np.array([die, die, 1.2 * die]), np.ones(3),
                               np.array([6.0, 8.0, 8.0]), RULES, hbm_edges=4)
    assert more[0] < more[1] < more[2]


def _with_stacks(stacks: list[int], dies: list[int]):
    """middle-ground (an H100-sized die built as enabled: no spare HBM sites) with its HBM3
    stacks and dies varied."""
    spec = load_hardware("middle-ground")
    return area(design_batch(spec, {"memory.HBM3.stacks": stacks, "technology.dies": dies}),
                N4, reticle=False, package=True)


def test_eight_hbm3_stacks_on_one_die_infeasible_with_the_edge_named():
    r = _with_stacks([6, 8], [1, 1])
    g = r.geometry
    assert g is not None
    assert r.feasible[0] and g.per_edge_needed[0] == 3 and g.per_long_edge[0] == 3
    assert not r.feasible[1] and not g.edges_fit[1]
    why = r.reason[1]
    assert ("8 HBM3 stacks as built (with the base's spare sites) on 1 die need 4 per long "
            "edge") in why
    assert f"a {g.long_mm[1]:.1f} mm long edge holds 3 stacks of 11.00 mm" in why


def test_eight_stacks_feasible_on_two_dies_that_pay_for_their_link():
    one, two = _with_stacks([8], [1]), _with_stacks([8], [2])
    g = two.geometry
    assert g is not None
    assert two.feasible[0], two.reason[0]
    assert g.per_edge_needed[0] == 2 and g.d2d_joints[0] == 1
    # The link is paid for: a die-to-die PHY on each die (10 TB/s of 512 GB/s modules of
    # 0.39 mm2: 20 per die), in silicon (with its uncore share) and in die edge.
    d2d = two.components["die-to-die PHY"][0]
    assert d2d == pytest.approx(2 * 20 * 0.39)
    assert "die-to-die PHY" not in one.components
    assert two.total_mm2[0] > one.total_mm2[0] - one.components.get("edge padding",
                                                                      np.zeros(2))[0]
    assert two.edge_needed_mm[0] == pytest.approx(
        one.edge_needed_mm[0] + 2 * 20 * 0.389)


def test_interposer_over_its_technology_limit_infeasible(tmp_path):
    # B200's two dies and 8 stacks on CoWoS-S (3.3 reticles, 2,831 mm2) do not fit;
    # on CoWoS-L they do.
    spec = load_hardware("b200")
    r = area(design_batch(spec), N4, package=True)
    assert r.feasible[0] and r.geometry is not None
    assert r.geometry.packaging[0] == "cowos-l"
    s = tmp_path / "b200-s.yaml"
    s.write_text("base: b200\nsource: test\ntechnology:\n  package: {packaging: cowos-s}\n")
    spec_s, tech = load_design(s)[:2]
    assert tech is not None
    r = area(design_batch(spec_s), tech, package=True)
    assert not r.feasible[0] and not r.geometry.interposer_fits[0]
    assert "exceeds the 2831 mm2 limit of cowos-s" in r.reason[0]
    # Without `package` the same design is feasible (the checks are the caller's to ask).
    assert area(design_batch(spec_s), tech).feasible[0]
    # Organic substrate carries no HBM.
    o = tmp_path / "h100-organic.yaml"
    o.write_text("base: h100-sxm\nsource: test\ntechnology:\n  node: n4\n"
                 "  package: {packaging: organic}\n")
    spec_o, tech = load_design(o)[:2]
    r = area(design_batch(spec_o), tech, package=True)
    assert not r.feasible[0] and "organic packaging carries no HBM" in r.reason[0]


def test_whole_perimeter_alternative_relaxes_the_rule(tmp_path):
    p = tmp_path / "mg-perimeter.yaml"
    p.write_text("base: middle-ground\nsource: test\ntechnology:\n  as_built:\n    units: 96\n"
                 "    memory:\n      L2: {capacity: 192 MiB}\n      HBM3: {stacks: 5}\n"
                 "  package: {hbm_edges: 4}\n")
    spec, tech = load_design(p)[:2]
    r = area(design_batch(spec, {"memory.HBM3.stacks": [8]}), tech, package=True)
    g = r.geometry
    assert g is not None and g.edges_fit[0] and g.hbm_edges[0] == 4
    # ... but 8 stacks around one die need more interposer than CoWoS-S builds.
    assert not g.interposer_fits[0]


def test_reticle_message_names_the_area_compared():
    r = area(design_batch(load_hardware("middle-ground"), {"compute.units": [300]}), N4,
             reticle=True)
    assert not r.feasible[0]
    assert r.reason[0].startswith(f"a die of {r.die_mm2[0]:.0f} mm2 (modelled, with spares")
    assert "exceeds the 858 mm2 reticle" in r.reason[0]


def test_unchanged_derived_design_prices_exactly_as_its_base(tmp_path):
    p = tmp_path / "clone.yaml"
    p.write_text("base: h100-sxm\nsource: clone\n")
    base = area(design_batch(load_hardware("h100-sxm")), N4, package=True)
    spec, tech = load_design(p)[:2]
    clone = area(design_batch(spec), tech, package=True)
    assert clone.total_mm2[0] == base.total_mm2[0]
    assert clone.components.keys() == base.components.keys()
    assert clone.geometry is not None and base.geometry is not None
    assert clone.geometry.interposer_mm2[0] == base.geometry.interposer_mm2[0]


def test_geometry_is_vectorized_like_a_loop():
    die = np.array([400.0, 757.0, 900.0, 300.0])
    dies = np.array([1.0, 1.0, 2.0, 8.0])
    stacks = np.array([4.0, 8.0, 8.0, 8.0])
    batch = geometry(die, dies, stacks, RULES, interface="hbm3")
    for i in range(4):
        one = geometry(die[i:i + 1], dies[i:i + 1], stacks[i:i + 1], RULES, interface="hbm3")
        assert one.interposer_mm2[0] == pytest.approx(batch.interposer_mm2[i])
        assert one.reason[0] == batch.reason[i]


def test_study_constraints_name_the_edge():
    study = load_study("studies/middle-ground.yaml")
    out = evaluate_designs(study, {
        "memory.HBM3.stacks": np.array([5.0, 8.0]),
        "memory.LPDDR5X.channels": np.array([16.0, 8.0]),
        "interconnect.links": np.array([10.0, 6.0]),
        "compute.units": np.array([120.0, 128.0]),
        "memory.L2.capacity": np.array([64.0, 32.0]) * 2**20})
    assert "hbm_stacks_over_edges" in out.constraints and "interposer_mm2" in out.constraints
    assert out.feasible[0] and out.constraints["hbm_stacks_over_edges"][0] <= 0
    assert out.constraints["interposer_mm2"][0] <= 0
    # 8 stacks enabled build 10 sites (the H100's spare fraction, the study's policy), which
    # two long edges of any die within the reticle cannot hold.
    assert out.constraints["hbm_stacks_over_edges"][1] > 0
    assert not out.feasible[1] and (
        "10 HBM3 stacks as built (with the base's spare sites) on 1 die need 5 per long "
        "edge") in out.reason[1]


def test_in_plane_beyond_dies_refused_at_load(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("base: h100-sxm\nsource: t\ntechnology:\n  node: n4\n"
                 "  package: {in_plane: 3}\n")
    with pytest.raises(SpecError, match=r"technology.package.in_plane: 3 dies in plane "
                                        r"exceed the package's 1"):
        load_design(p)


def test_dse_area_shows_the_geometry():
    from typer.testing import CliRunner

    from dse.cli import app

    r = CliRunner().invoke(app, ["area", "h100-sxm", "b200", "--format", "json"])
    assert r.exit_code == 0, r.output
    h100, b200 = json.loads(r.output)
    pk = h100["package"]
    assert pk["hbm_stacks_per_edge_needed"] == 3 and pk["hbm_stacks_per_long_edge"] == 3
    assert pk["packaging"] == "cowos-s" and pk["interposer_limit_mm2"] == pytest.approx(2831)
    assert pk["interposer_mm2"] == pytest.approx(2044, abs=5)
    assert b200["package"]["die_to_die_joints"] == 1 and b200["package"]["feasible"]
    assert b200["components"]["die-to-die PHY"] == pytest.approx(2 * 20 * 0.39)
    r = CliRunner().invoke(app, ["area", "h100-sxm"])
    assert "HBM stacks per edge needed / held" in r.output
    assert "interposer / limit (cowos-s)" in r.output


def test_summary_counts_the_package_constraints():
    import pandas as pd

    from dse.search.outputs import infeasible_reasons

    study = load_study("studies/middle-ground.yaml")
    trials = pd.DataFrame({
        "number": [0, 1], "state": ["COMPLETE", "COMPLETE"], "feasible": [True, False],
        "area_per_chip_mm2": [700.0, 740.0], "die_mm2": [700.0, 740.0],
        "interposer_mm2": [2000.0, 2800.0], "reason": ["", "x"],
        "constraint.hbm_stacks_over_edges": [-1.0, 2.0],
        "constraint.interposer_mm2": [-700.0, 100.0]})
    got = dict((why, n) for n, why in infeasible_reasons(study, trials))
    assert got["with more HBM stacks than the die edges the package rules give them hold "
               "(dse.model.package)"] == 1
    assert got["with an interposer over its packaging technology's limit (the smallest "
               "interposer: 2,000 mm2)"] == 1


def test_package_rules_are_one_value_per_batch():
    from dse.errors import DseError

    # one value is the spec's (dse.spec.assumptions); several cannot vary across a batch
    with pytest.raises(DseError, match=r"technology\.package\.hbm_edges: the model reads "
                                       r"one value of this field for every design"):
        design_batch(load_hardware("middle-ground"), {"technology.package.hbm_edges": [2, 4]})
    one = design_batch(load_hardware("middle-ground"), {"technology.package.hbm_edges": 4})
    assert one.spec.technology.package.hbm_edges == 4
