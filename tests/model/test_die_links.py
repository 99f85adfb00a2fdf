"""What a split into several dies costs beyond its silicon: DRAM traffic crossing the
die-to-die joints (dse.model.die_links), in energy and as a bandwidth bound."""

from __future__ import annotations

import numpy as np
import pytest

from dse.model import die_links, evaluate
from dse.model.batch import design_batch
from dse.model.power import level_energy
from dse.spec.load import hardware_with_technology, load_workload


def test_mean_hops_by_hand():
    # one row of 2: 1 hop; a 2 x 2 square: from a die, 1, 1 and 2 hops -> 4/3; one die: 0
    assert die_links.mean_hops(np.array([1.0, 2.0, 4.0])) == pytest.approx([0.0, 1.0, 4 / 3])


def test_b200_half_the_dram_bytes_cross_the_nv_hbi():
    spec, tech = hardware_with_technology("b200")
    db = design_batch(spec)
    assert die_links.crossing_share(db)[0] == pytest.approx(0.5)
    # 0.5 crossings x 0.5 pJ/bit x 8 bit/B = 2 pJ per DRAM byte on top of the HBM's own
    assert die_links.crossing_energy(db, tech)[0] == pytest.approx(2e-12, rel=1e-6)
    one = design_batch(spec, {"technology.dies": 1})
    hbm = next(i for i, lv in enumerate(spec.memory) if lv.kind == "dram")
    split = level_energy(db, tech)[0, hbm] - level_energy(one, tech)[0, hbm]
    assert split == pytest.approx(2e-12, rel=1e-6)
    # 1 joint x 10 TB/s / 0.5 = 20 TB/s: the 8 TB/s HBM is not held back
    assert die_links.dram_bandwidth_cap(db, tech)[0] == pytest.approx(20e12)
    assert die_links.with_joint_bound(db, tech) is db


def test_mi300x_four_io_dies_in_a_square():
    spec, _tech = hardware_with_technology("mi300x")
    db = design_batch(spec)
    # 3/4 of the bytes live on another I/O die, 4/3 joints away on average: 1 crossing a byte
    assert die_links.crossing_share(db)[0] == pytest.approx(1.0)


def test_joints_bound_the_dram_bandwidth_and_a_single_die_is_free():
    spec, tech = hardware_with_technology("b200")
    hbm = next(lv for lv in spec.memory if lv.kind == "dram")
    db = design_batch(spec, {f"memory.{hbm.name}.bandwidth": ["8 TB/s", "30 TB/s"]})
    held = die_links.with_joint_bound(db, tech)
    i = [lv.name for lv in spec.memory].index(hbm.name)
    assert held.peak_bandwidth[0, i] == pytest.approx(8e12)
    assert held.peak_bandwidth[1, i] == pytest.approx(20e12)  # the joints' 20 TB/s
    assert held.bandwidth[1, i] / held.peak_bandwidth[1, i] == pytest.approx(
        db.bandwidth[1, i] / db.peak_bandwidth[1, i])  # the achieved fraction is kept
    one = design_batch(spec, {"technology.dies": 1})
    assert die_links.crossing_share(one)[0] == 0.0
    assert die_links.with_joint_bound(one, tech) is one


def test_a_split_costs_decode_time_only_where_the_joints_bind():
    spec, tech = hardware_with_technology("b200")
    wl = load_workload("llama2-70b")
    hbm = next(lv for lv in spec.memory if lv.kind == "dram")
    ev = evaluate(spec, wl, "chat-decode", batch=8, tech=tech,
                  overrides={f"memory.{hbm.name}.bandwidth": ["8 TB/s", "20 TB/s", "30 TB/s"]})
    tps = ev.metrics["output_tokens_per_s"]
    assert tps[1] > tps[0] * 1.3  # 8 -> 20 TB/s: still below the joints' bound
    assert tps[2] == pytest.approx(tps[1], rel=0.02)  # 30 TB/s: held to the joints' 20
