"""The last-level cache as slices (issue 24, item 5): capacity and bandwidth follow the slice
count, a capacity change changes the slices at the spec's slice size, slices can follow the
HBM stacks, and energy per byte grows with capacity by the documented rule."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dse
from dse.errors import DseError, SpecError
from dse.model.batch import design_batch
from dse.model.power import level_energy, sliced_cache_energy
from dse.spec.load import load_design, load_hardware

MiB = 2**20
H100_L2 = 6.65e12  # B/s, h100-sxm.yaml: 100 slices of 512 KiB


def l2(db, name="L2"):
    i = db.level_names.index(name)
    return db.slices[:, i], db.capacity[:, i], db.peak_bandwidth[:, i]


def unsliced(spec):
    """`spec` with its L2 described the old way (no slices)."""
    memory = [lv.model_copy(update={"slices": None, "slices_per": None}) for lv in spec.memory]
    return spec.model_copy(update={"memory": memory})


def test_h100_states_its_slices():
    lv = next(m for m in load_hardware("h100-sxm").memory if m.name == "L2")
    assert lv.slices == 100
    assert lv.slice_capacity() == 512 * 1024
    assert lv.slice_bandwidth() == pytest.approx(6.65e10)


def test_bandwidth_follows_slices():
    db = design_batch(load_hardware("h100-sxm"), {"memory.L2.slices": [50, 100, 200]})
    slices, cap, bw = l2(db)
    assert list(slices) == [50, 100, 200]
    assert cap == pytest.approx([25 * MiB, 50 * MiB, 100 * MiB])
    assert bw == pytest.approx([3.325e12, 6.65e12, 13.3e12])  # 6.65 TB/s x 0.5, 1, 2


def test_capacity_change_changes_slices_at_slice_size():
    """--set / a study's memory.L2.capacity: slices = round(capacity / 512 KiB), at least
    one; the capacity is as given and the bandwidth is 66.5 GB/s per slice."""
    db = design_batch(load_hardware("h100-sxm"), {"memory.L2.capacity":
                                                  ["80 MiB", "80.3 MiB", "16 MiB", "1 KiB"]})
    slices, cap, bw = l2(db)
    assert list(slices) == [160, 161, 32, 1]  # 80.3 / 0.5 = 160.6 -> 161
    assert cap == pytest.approx([80 * MiB, 80.3 * MiB, 16 * MiB, 1024])
    assert bw == pytest.approx([10.64e12, 161 * 6.65e10, 2.128e12, 6.65e10])


def test_given_bandwidth_and_slices_win():
    db = design_batch(load_hardware("h100-sxm"), {"memory.L2.capacity": "100 MiB",
                                                  "memory.L2.bandwidth": "7 TB/s"})
    assert l2(db)[2] == pytest.approx([7e12])
    db = design_batch(load_hardware("h100-sxm"), {"memory.L2.capacity": "100 MiB",
                                                  "memory.L2.slices": 100})
    slices, cap, bw = l2(db)
    assert (slices[0], cap[0], bw[0]) == (100, 100 * MiB, pytest.approx(6.65e12))


def test_unsliced_level_keeps_its_bandwidth():
    """A spec that gives no slices (b200; h100-sxm stripped of them) means what it meant:
    the bandwidth is fixed whatever the capacity."""
    for spec in (load_hardware("b200"), unsliced(load_hardware("h100-sxm"))):
        bw0 = next(m for m in spec.memory if m.name == "L2").bandwidth
        db = design_batch(spec, {"memory.L2.capacity": ["16 MiB", "1 GiB"]})
        assert list(l2(db)[0]) == [0, 0]
        assert l2(db)[2] == pytest.approx([bw0, bw0])


def test_h100_numbers_unchanged_by_slices():
    """Stating slices changes nothing about h100-sxm itself: performance, power and energy
    equal those of the same spec without slices."""
    spec, tech = load_design("h100-sxm")[:2]
    wl = dse.load_workload("llama3-8b")
    kw = dict(phase="decode", batch=8, seq_in=1024, seq_out=128, precision="bf16", tech=tech)
    a = dse.evaluate(spec, wl, **kw).metrics
    b = dse.evaluate(unsliced(spec), wl, **kw).metrics
    for k in ("output_tokens_per_s", "step_time_s", "power_per_chip_w", "energy_per_token_j"):
        assert a[k] == pytest.approx(b[k], rel=1e-12), k


def test_yaml_derivation_follows_the_same_rule(tmp_path):
    """base: h100-sxm with a new capacity gets whole slices of 512 KiB and their bandwidth;
    a file that gives its bandwidth keeps it."""
    grown = load_hardware("middle-ground")  # capacity: 192 MiB over h100-sxm
    lv = next(m for m in grown.memory if m.name == "L2")
    assert (lv.slices, lv.capacity) == (384, 192 * MiB)
    assert lv.bandwidth == pytest.approx(6.65e12 * 3.84)
    f = tmp_path / "fixed.yaml"
    f.write_text("base: h100-sxm\nsource: test\nmemory:\n  - name: L2\n    capacity: 100 MiB\n"
                 "    bandwidth: 6.65 TB/s\n")
    lv = next(m for m in load_hardware(f).memory if m.name == "L2")
    assert (lv.slices, lv.bandwidth) == (100, pytest.approx(6.65e12))  # slices: bigger ones
    f.write_text("base: h100-sxm\nsource: test\nmemory:\n  - name: L2\n    slices: 25\n")
    lv = next(m for m in load_hardware(f).memory if m.name == "L2")
    assert (lv.capacity, lv.bandwidth) == (12.5 * MiB, pytest.approx(6.65e12 / 4))


def test_slices_per_stack_follow_the_hbm_stacks():
    """MI300X's Infinity Cache: 128 channels, 16 beside each of 8 HBM3 stacks."""
    spec = load_hardware("mi300x")
    db = design_batch(spec, {"memory.HBM3.stacks": [4, 8, 12]})
    slices, cap, bw = l2(db, "Infinity Cache")
    assert list(slices) == [64, 128, 192]
    assert cap == pytest.approx([128 * MiB, 256 * MiB, 384 * MiB])
    assert bw == pytest.approx([8.6e12, 17.2e12, 25.8e12])
    # A capacity given as well sets the slices (at 2 MiB each) whatever the stacks.
    db = design_batch(spec, {"memory.HBM3.stacks": [4, 12],
                             "memory.Infinity Cache.capacity": "64 MiB"})
    assert list(l2(db, "Infinity Cache")[0]) == [32, 32]


def test_slices_null_turns_the_rule_off(tmp_path):
    f = tmp_path / "fixed.yaml"
    f.write_text("base: middle-ground\nsource: test\nmemory:\n"
                 "  - {name: L2, slices: null, bandwidth: 6.65 TB/s}\n")
    db = design_batch(load_hardware(f), {"memory.L2.capacity": ["16 MiB", "1 GiB"]})
    assert list(l2(db)[0]) == [0, 0]
    assert l2(db)[2] == pytest.approx([6.65e12, 6.65e12])


def test_slices_per_stack_on_the_yaml_route(tmp_path):
    f = tmp_path / "four.yaml"
    f.write_text("base: mi300x\nsource: test\nmemory:\n  - {name: HBM3, stacks: 4}\n")
    lv = next(m for m in load_hardware(f).memory if m.name == "Infinity Cache")
    assert (lv.slices, lv.capacity, lv.bandwidth) == (64, 128 * MiB, pytest.approx(8.6e12))
    lv = next(m for m in load_hardware("mi300x").memory if m.name == "Infinity Cache")
    assert lv.slices == 128  # the base is untouched


def test_study_route_numbers_in_bytes():
    """A study hands capacities as numbers in bytes; the same rule applies."""
    db = design_batch(load_hardware("h100-sxm"),
                      {"memory.L2.capacity": np.array([16, 105]) * float(MiB),
                       "compute.units": np.array([120, 144])})
    slices, _, bw = l2(db)
    assert list(slices) == [32, 210]
    assert bw == pytest.approx([32 * 6.65e10, 210 * 6.65e10])


def test_bad_slices_are_refused(tmp_path):
    with pytest.raises(DseError, match="not a shared on-chip level"):
        design_batch(load_hardware("h100-sxm"), {"memory.HBM3.slices": 4})
    with pytest.raises(DseError, match="gives no slices"):
        design_batch(load_hardware("b200"), {"memory.L2.slices": 4})
    f = tmp_path / "bad.yaml"
    f.write_text("base: h100-sxm\nsource: test\nmemory:\n  - name: L1\n    slices: 4\n")
    with pytest.raises(SpecError, match="slices is for a shared on-chip level"):
        load_hardware(f)
    f.write_text("base: b200\nsource: test\nmemory:\n  - name: L2\n    slices_per: stack\n")
    with pytest.raises(SpecError, match="slices_per needs slices"):
        load_hardware(f)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 400), st.integers(1, 400))
def test_more_slices_never_slower(a, b):
    """At a fixed capacity, more slices (more bandwidth) never make a step slower (TDP lifted
    so DVFS does not enter)."""
    lo, hi = sorted((a, b))
    ev = dse.evaluate(load_hardware("h100-sxm"), dse.load_workload("llama3-8b"), phase="decode",
                      batch=16, seq_in=512, seq_out=64, precision="bf16",
                      overrides={"memory.L2.slices": [lo, hi], "memory.L2.capacity": "50 MiB",
                                 "tdp": "100 kW"})
    t = ev.metrics["step_time_s"]
    assert t[1] <= t[0] * (1 + 1e-12)


def test_energy_per_byte_grows_with_sqrt_capacity():
    """N4 (hwspecs/tech/n4.yaml): cache 2.9 pJ/B, sram 0.7 pJ/B. Array share 1.75 x 0.7 =
    1.225 pJ/B; wire 1.675 pJ/B at 50 MiB, x sqrt(C / 50 MiB)."""
    e = sliced_cache_energy(2.9e-12, 0.7e-12, np.array([50, 200, 12.5]) * MiB)
    assert e == pytest.approx([2.9e-12, 1.225e-12 + 1.675e-12 * 2,
                               1.225e-12 + 1.675e-12 * 0.5])
    spec, tech = load_design("h100-sxm")[:2]
    db = design_batch(spec, {"memory.L2.capacity": ["50 MiB", "200 MiB"]})
    i = db.level_names.index("L2")
    assert level_energy(db, tech)[:, i] == pytest.approx([2.9e-12, 4.575e-12])
    # An unsliced cache keeps the node's figure whatever its capacity.
    db = design_batch(unsliced(spec), {"memory.L2.capacity": "200 MiB"})
    assert level_energy(db, tech)[0, i] == pytest.approx(2.9e-12)
    assert math.isclose(1.225 + 1.675 * 2, 4.575)
