"""The memory catalogue (dse/data/memory.yaml, dse.spec.catalogue): every entry sourced and
consistent; a level's `generation:` in YAML; `memory.<level>.generation` by --set and in a
study, with capacity, bandwidth, PHY area, energy per bit and price following it (hand-checked
for hbm3 -> hbm3e-12h on an H100 SXM)."""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

import dse
from dse.cli import app
from dse.errors import DseError, SpecError
from dse.model.area import area
from dse.model.batch import design_batch
from dse.model.cost import cost
from dse.model.power import level_energy
from dse.spec.catalogue import Generation, catalogue
from dse.spec.load import hardware_with_technology, load_hardware

GiB = 2**30
ROOT = Path(__file__).resolve().parent.parent


def test_every_entry_is_sourced_positive_and_consistent():
    cat = catalogue()
    assert {"hbm2e", "hbm3", "hbm3e-8h", "hbm3e-12h", "hbm4-12h", "lpddr5x", "ddr5", "gddr7",
            "cxl"} <= set(cat.names)
    for name, g in cat.generations.items():
        assert g.source.strip(), name
        for figure in (g.width, g.rate, g.rate_max, g.bandwidth, g.die, g.height, g.capacity,
                       g.energy, g.phy.area, g.phy.edge):
            assert figure > 0, name
        # bandwidth per unit = width x rate (per pin, in bits) / 8, to 1%
        assert g.bandwidth == pytest.approx(g.width * (g.rate * 8) / 8, rel=0.01), name
        assert g.capacity == pytest.approx(g.die * g.height, rel=0.01), name
        assert g.rate <= g.rate_max, name


def test_catalogue_figures_by_hand():
    cat = catalogue().generations
    # H100 SXM: 1024 bits x 5.23 Gb/s / 8 = 669.4 GB/s ~ 670 GB/s (3.35 TB/s over 5 stacks)
    assert cat["hbm3"].bandwidth == 670e9 and cat["hbm3"].capacity == 16 * GiB
    # 12-high x 24 Gbit = 36 GB; HBM4 doubles the interface: 2048 x 8 Gb/s / 8 = 2,048 GB/s
    assert cat["hbm3e-12h"].capacity == 36 * GiB and cat["hbm3e-12h"].height == 12
    assert cat["hbm4-12h"].width == 2048 and cat["hbm4-12h"].bandwidth == 2048e9
    assert cat["hbm4-12h"].phy.area == 2.0
    # LPDDR5X-8533 on a 16-bit channel: 17.07 GB/s; CXL 2.0 x16: 63 GB/s
    assert cat["lpddr5x"].bandwidth == pytest.approx(16 * 8.533e9 / 8, rel=1e-3)
    assert cat["cxl"].bandwidth == 63e9 and cat["cxl"].unit == "link"


def test_an_inconsistent_entry_is_refused():
    good = {"interface": "hbm3", "unit": "stack", "width": 1024, "rate": "5.23 Gb/s",
            "rate_max": "6.4 Gb/s", "bandwidth": "670 GB/s", "die": "2 GiB", "height": 8,
            "capacity": "16 GiB", "energy": "7 pJ/bit", "phy": {"area": 1.0, "edge": 1.0},
            "source": "test"}
    assert Generation.model_validate(good).bandwidth == 670e9
    with pytest.raises(ValidationError, match="not width x rate / 8"):
        Generation.model_validate({**good, "bandwidth": "900 GB/s"})
    with pytest.raises(ValidationError, match="not die x height"):
        Generation.model_validate({**good, "height": 12})
    with pytest.raises(ValidationError, match="comes by the stack"):
        Generation.model_validate({**good, "unit": "channel"})


def _h100_designs(generations, stacks=5):
    spec, tech = hardware_with_technology("h100-sxm")
    db = design_batch(spec, {"memory.HBM3.generation": generations,
                             "memory.HBM3.stacks": stacks})
    a = area(db, tech, package=True)
    return spec, tech, db, a, cost(db, tech, a)


def test_a_generation_change_moves_capacity_bandwidth_area_power_and_cost_together():
    spec, tech, db, a, c = _h100_designs(["hbm3", "hbm3e-12h", "hbm4-12h"])
    hbm = spec.memory.index(next(m for m in spec.memory if m.name == "HBM3"))
    # capacity: 5 stacks x 16 GiB = 80 GiB -> 5 x 36 GiB = 180 GiB (HBM4 12-high: 36 GiB)
    assert db.capacity[:, hbm].tolist() == [80 * GiB, 180 * GiB, 180 * GiB]
    # peak: 5 x 670 GB/s = 3.35 TB/s -> 5 x 1,000 GB/s -> 5 x 2,048 GB/s; the H100's
    # measured achievable fraction (0.867) is kept
    assert db.peak_bandwidth[:, hbm] == pytest.approx([3.35e12, 5.0e12, 10.24e12])
    assert db.bandwidth[:, hbm] == pytest.approx([0.867 * 3.35e12, 0.867 * 5.0e12,
                                                  0.867 * 10.24e12])
    # PHY area: 6 sites as built (5 enabled, the H100's spare) x 13.5 mm2 at N4; HBM4's
    # 2048-bit PHY twice that
    assert a.components["HBM3 PHY"] == pytest.approx([81.0, 81.0, 162.0])
    # energy per byte: 7.0, 6.9, 5.3 pJ/bit x 8
    assert level_energy(db, tech)[:, hbm] == pytest.approx([56e-12, 55.2e-12, 42.4e-12])
    # price: 80 GiB x $16/GB (hbm3) = $1,374.39; 180 GiB x $17/GB (hbm3e above 24 GiB a
    # stack: the taller stack's price) = $3,285.65; 180 GiB x $21/GB (hbm4) = $4,058.74
    mem = c.components["HBM3 (hbm3)"]
    assert mem == pytest.approx([80 * GiB * 16e-9, 180 * GiB * 17e-9, 180 * GiB * 21e-9])
    assert mem[0] == pytest.approx(1374.39, abs=0.01) and mem[1] == pytest.approx(3285.65,
                                                                                 abs=0.01)
    assert c.total_usd[1] > c.total_usd[0]
    # power: a decode step moves the same bytes faster at lower energy per bit: it draws
    # more watts (more tokens a second) and less energy a token
    wl = dse.load_workload("llama3-8b")
    ev = dse.evaluate(spec, wl, "chat-decode", overrides={
        "memory.HBM3.generation": ["hbm3", "hbm3e-12h"]}, tech=tech)
    tps, watts = ev.metrics["decode_tokens_per_s"], ev.metrics["power_per_chip_w"]
    assert tps[1] / tps[0] > 1.2 and watts[1] > watts[0]
    assert watts[1] / tps[1] < watts[0] / tps[0]


def test_hbm3_generation_on_the_h100_changes_nothing():
    spec, tech, db, a, c = _h100_designs(["hbm3"])
    base = design_batch(spec)
    ab = area(base, tech, package=True)
    assert db.capacity.tolist() == base.capacity.tolist()
    assert db.bandwidth.tolist() == base.bandwidth.tolist()
    assert a.total_mm2.tolist() == ab.total_mm2.tolist()
    assert c.total_usd.tolist() == cost(base, tech, ab).total_usd.tolist()
    assert level_energy(db, tech).tolist() == level_energy(base, tech).tolist()


def test_generations_and_stacks_vary_together_vectorized():
    spec, _tech, db, a, c = _h100_designs(["hbm3", "hbm3e-8h", "hbm3e-12h", "hbm2e"],
                                         stacks=[4, 6, 3, 5])
    hbm = [m.name for m in spec.memory].index("HBM3")
    assert (db.capacity[:, hbm] / GiB).tolist() == [64, 144, 108, 80]
    assert db.peak_bandwidth[:, hbm] == pytest.approx([2.68e12, 6e12, 3e12, 2.04e12])
    # one design of a batch prices as it does alone
    alone = _h100_designs(["hbm3e-12h"], stacks=3)[4]
    assert c.total_usd[2] == alone.total_usd[0]
    # an HBM2E stack's outline is narrower (7.75 mm): its package geometry follows it
    assert a.geometry is not None
    assert a.geometry.per_long_edge[3] > a.geometry.per_long_edge[0]


def test_a_capacity_or_bandwidth_given_with_the_generation_wins():
    spec = load_hardware("h100-sxm")
    db = design_batch(spec, {"memory.HBM3.generation": "hbm3e-8h",
                             "memory.HBM3.capacity": "141 GB"})
    hbm = [m.name for m in spec.memory].index("HBM3")
    assert db.capacity[0, hbm] == 141e9 and db.peak_bandwidth[0, hbm] == 5e12
    db = design_batch(spec, {"memory.HBM3.generation": "hbm3e-8h", "memory.HBM3.stacks": 6,
                             "memory.HBM3.bandwidth": "4.8 TB/s"})
    assert db.capacity[0, hbm] == 6 * 24 * GiB and db.peak_bandwidth[0, hbm] == 4.8e12


def test_a_generation_of_another_family_or_unknown_is_refused():
    spec = load_hardware("h100-sxm")
    with pytest.raises(DseError, match="lpddr5x is a lpddr generation and level 'HBM3' is "
                                       "hbm memory; expected one of: hbm2e, hbm3"):
        design_batch(spec, {"memory.HBM3.generation": "lpddr5x"})
    with pytest.raises(DseError, match="unknown memory generation 'hbm3e-12x'; did you mean "
                                       '"hbm3e-12h"'):
        design_batch(spec, {"memory.HBM3.generation": "hbm3e-12x"})
    with pytest.raises(DseError, match="not a DRAM level"):
        design_batch(spec, {"memory.L2.generation": "hbm3"})


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_yaml_generation_implies_interface_capacity_and_bandwidth(tmp_path):
    path = _write(tmp_path, "gen.yaml", "name: gen\nbase: h100-sxm\nsource: test\nmemory:\n"
                  "  - name: HBM3\n    generation: hbm3e-12h\n")
    level = load_hardware(path).memory[-1]
    # a derived file naming a new generation re-derives what the base's figures were
    assert (level.interface, level.stacks) == ("hbm3e", 5)
    assert level.capacity == 180 * GiB and level.bandwidth == 5e12
    assert level.achievable is not None and level.achievable.fraction == 0.867
    # the file's own numbers win (a shipped chip keeps its datasheet values)
    own = _write(tmp_path, "own.yaml", "name: own\nbase: h100-sxm\nsource: test\nmemory:\n"
                 "  - name: HBM3\n    generation: hbm3e-8h\n    stacks: 6\n"
                 "    capacity: 141 GB\n    bandwidth: 4.8 TB/s\n")
    level = load_hardware(own).memory[-1]
    assert (level.capacity, level.bandwidth, level.interface) == (141e9, 4.8e12, "hbm3e")
    # a CXL level comes by the x16 link: one unless stated
    cxl = _write(tmp_path, "cxl.yaml", "name: c\nbase: middle-ground\nsource: test\n"
                 "memory:\n  - name: CXL\n    generation: cxl\n")
    level = load_hardware(cxl).memory[-1]
    assert (level.capacity, level.bandwidth) == (512 * GiB, 63e9)


def test_yaml_unknown_or_contradicting_generation_is_one_line_at_its_key(tmp_path):
    bad = _write(tmp_path, "bad.yaml", "name: bad\nbase: h100-sxm\nsource: test\nmemory:\n"
                 "  - name: HBM3\n    generation: hbm3e-12x\n")
    with pytest.raises(SpecError) as e:
        load_hardware(bad)
    text = str(e.value)
    assert len(text.splitlines()) == 1
    assert re.search(r"bad\.yaml:6:17: memory\[2\]\.generation: unknown memory generation "
                     r"'hbm3e-12x'; did you mean \"hbm3e-12h\"\?; expected one of: hbm2e, "
                     r"hbm3, .*cxl", text), text
    clash = _write(tmp_path, "clash.yaml", "name: c\nbase: h100-sxm\nsource: test\nmemory:\n"
                   "  - name: HBM3\n    generation: hbm3e-12h\n    interface: hbm3\n")
    with pytest.raises(SpecError, match=r"clash\.yaml:7:.*interface hbm3 contradicts "
                                        r"generation hbm3e-12h \(hbm3e\)"):
        load_hardware(clash)
    r = CliRunner().invoke(app, ["show", str(bad)])
    assert r.exit_code == 2 and "Traceback" not in r.output


STUDY = """name: gen-study
description: generation as a choice
source: test
base: h100-sxm
parameters:
  memory.HBM3.stacks: {{low: 4, high: 5}}
  memory.HBM3.generation: {{choices: {choices}}}
workloads:
  decode: {{workload: llama3-8b, scenario: chat-decode}}
objectives:
  throughput: {{maximize: throughput}}
  area: {{minimize: area}}
constraints:
  area: 900 mm2
search:
  sampler: grid
"""


def test_a_study_with_generation_choices_runs_and_writes_the_names(tmp_path):
    study = _write(tmp_path, "s.yaml", STUDY.format(choices="[hbm3, hbm3e-8h, hbm3e-12h]"))
    r = CliRunner().invoke(app, ["study", str(study), "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    trials = pd.read_csv(tmp_path / "out" / "trials.csv")
    assert sorted(set(trials["memory.HBM3.generation"])) == ["hbm3", "hbm3e-12h", "hbm3e-8h"]
    assert len(trials) == 6
    front = pd.read_csv(tmp_path / "out" / "pareto.csv")
    assert set(front["memory.HBM3.generation"]) <= {"hbm3", "hbm3e-8h", "hbm3e-12h"}
    # the faster stacks give more tokens a second at the same stacks and area
    ok = trials[trials["feasible"]].set_index(["memory.HBM3.stacks",
                                               "memory.HBM3.generation"])
    tps = ok["decode.output_tokens_per_s"]
    assert tps[(5.0, "hbm3e-12h")] > 1.2 * tps[(5.0, "hbm3")]
    # the near-optimal region lists generations, not a range of them
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "memory.HBM3.generation hbm3e-8h or hbm3e-12h" in summary


@pytest.mark.parametrize("choices, message", [
    ("[hbm3, hbm3e-12x]", "choices[1]: unknown memory generation 'hbm3e-12x'"),
    ("[hbm3, lpddr5x]", "choices: lpddr5x is a lpddr generation"),
])
def test_a_bad_generation_choice_is_one_line(tmp_path, choices, message):
    study = _write(tmp_path, "s.yaml", STUDY.format(choices=choices))
    r = CliRunner().invoke(app, ["study", str(study), "--out", str(tmp_path / "out")])
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_a_generation_range_is_refused(tmp_path):
    study = _write(tmp_path, "s.yaml", STUDY.replace(
        "{{choices: {choices}}}", "{{low: hbm3, high: hbm3e-12h}}").format())
    r = CliRunner().invoke(app, ["study", str(study), "--out", str(tmp_path / "out")])
    assert r.exit_code == 2 and "takes choices" in r.output


def test_the_middle_ground_study_declares_the_generation_alternative():
    text = (ROOT / "studies" / "middle-ground.yaml").read_text()
    assert re.search(r"hbm-generation-free:.*?memory\.HBM3\.generation: \{choices: \[hbm3, "
                     r"hbm3e-8h, hbm3e-12h\]\}.*?trials: 3000", text, re.S)


def test_the_docs_list_every_generation():
    page = (ROOT / "docs" / "guide" / "hardware.md").read_text()
    table = page[page.index("## Memory generations"):]
    for name, g in catalogue().generations.items():
        assert re.search(rf"\| `{re.escape(name)}` \| {g.interface} \|", table), name


def test_the_middle_ground_tiers_are_not_free():
    """The shipped middle-ground base pays for its LPDDR5X and CXL tiers: PHY silicon,
    energy per byte and the memory's price."""
    spec, tech = hardware_with_technology("middle-ground")
    db = design_batch(spec)
    a = area(db, tech)
    c = cost(db, tech, a)
    names = [m.name for m in spec.memory]
    # 32 LPDDR5X channels x 1.0 mm2; 16 PCIe Gen5 lanes (63 GB/s / 3.94 GB/s) x 0.64 mm2
    assert a.components["LPDDR5X PHY"][0] == pytest.approx(32.0)
    assert a.components["CXL PHY"][0] == pytest.approx(16 * 0.64)
    # 480 GiB x $4/GB and 1 TiB x $4/GB (dse/data/cost.yaml)
    assert c.components["LPDDR5X (lpddr5x)"][0] == pytest.approx(480 * GiB * 4e-9)
    assert c.components["CXL (cxl)"][0] == pytest.approx(1024 * GiB * 4e-9)
    # 5 pJ/bit (LPDDR) and 6.5 + 20 pJ/bit (the CXL link and DDR behind it)
    e = level_energy(db, tech)[0]
    assert e[names.index("LPDDR5X")] == pytest.approx(40e-12)
    assert e[names.index("CXL")] == pytest.approx(8 * 26.5e-12)
    assert np.all(e > 0)


def test_a_generation_set_by_a_study_is_fixed_not_a_conclusion(tmp_path):
    """`set: {memory.HBM3.generation: ...}` fixes the generation for every design: an
    alternative that sets another is an assumption, so no conclusion 'flips' on it."""
    study = _write(tmp_path, "s.yaml", STUDY.replace(
        "  memory.HBM3.generation: {{choices: {choices}}}\n", "").format().replace(
        "parameters:", "set:\n  memory.HBM3.generation: hbm3e-12h\nparameters:")
        + "alternatives:\n  hbm3:\n    set: {memory.HBM3.generation: hbm3}\n")
    r = CliRunner().invoke(app, ["study", str(study), "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    trials = pd.read_csv(tmp_path / "out" / "trials.csv")
    assert trials["decode.output_tokens_per_s"].max() > 190  # 12-high HBM3E: ~196 tokens/s
    line = next(x for x in r.output.splitlines() if x.startswith("sensitivity"))
    assert "generation" not in line


def test_a_derived_file_changing_stacks_keeps_its_bases_generation(tmp_path):
    _write(tmp_path, "base.yaml", "name: b\nbase: h100-sxm\nsource: test\nmemory:\n"
           "  - name: HBM3\n    generation: hbm3e-12h\n")
    path = _write(tmp_path, "more.yaml", "name: m\nbase: base\nsource: test\nmemory:\n"
                  "  - name: HBM3\n    stacks: 4\n")
    level = load_hardware(path).memory[-1]
    assert (level.generation, level.stacks) == ("hbm3e-12h", 4)
    assert level.capacity == 4 * 36 * GiB and level.bandwidth == 4e12


@pytest.mark.parametrize("value", [float("inf"), float("nan"), -1.0, 2.5, 1e300])
def test_a_generation_given_as_a_number_outside_the_catalogue_is_one_line(value):
    """The long fuzz profile found inf and NaN crashing the index check (round(inf))."""
    import dse
    from dse.errors import DseError

    with pytest.raises(DseError, match="unknown memory generation"):
        dse.evaluate(dse.load_hardware("h100-sxm"), dse.load_workload("llama2-7b"),
                     phase="decode", overrides={"memory.HBM3.generation": value})


def test_a_derived_file_naming_a_generation_keeps_its_bases_spares(tmp_path):
    """Found trying it as a new user: `base: h100-sxm` with its HBM3 level renamed to
    12-high HBM3E priced the die without the H100's spares (683 mm2, and 5 stacks as built
    on edges that hold 6 became infeasible) where any other derived change keeps them."""
    from dse.model.area import area
    from dse.model.batch import design_batch
    from dse.spec.load import hardware_with_technology

    f = tmp_path / "mine.yaml"
    f.write_text("base: h100-sxm\nname: h100-hbm3e\nsource: test\nmemory:\n"
                 "  - name: HBM3\n    generation: hbm3e-12h\n")
    mine, tech = hardware_with_technology(f)
    h100, _ = hardware_with_technology("h100-sxm")
    a, b = area(design_batch(mine), tech), area(design_batch(h100), tech)
    assert a.total_mm2[0] == pytest.approx(b.total_mm2[0])  # same PHYs, same spares
    assert a.feasible[0]
