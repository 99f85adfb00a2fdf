"""Power-limited clocks (DVFS) and the calibrated operating point of each chip."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import dse
from dse.model.batch import design_batch
from dse.model.operating_point import ACTIVE_SHARE
from dse.model.power import MIN_CLOCK, VOLTAGE_FLOOR
from dse.spec.load import hardware_with_technology, library_names, load_hardware

evaluate_module = importlib.import_module("dse.model.evaluate")
BIG = "gemm:8192x8192x8192"


def gemm(spec, tech, shape=BIG, precision="bf16", **over):
    return dse.evaluate(spec, dse.load_workload(shape), precision=precision, tech=tech,
                        overrides=over or None, reticle=False)


def test_a_chip_at_its_measured_operating_point_is_not_throttled():
    spec, tech = hardware_with_technology("h100-sxm")
    ev = gemm(spec, tech)
    assert not ev.power_limited[0]
    assert ev.metrics["clock_hz"][0] == pytest.approx(1.83e9)
    # ... and sits at its TDP: the calibration puts it there (within the YAML's rounding).
    assert ev.metrics["power_per_chip_w"][0] == pytest.approx(700.0, rel=2e-3)
    # The measured shape runs at the measured rate (794.5 TFLOP/s bf16, ml-engineering),
    # below the TDP and unthrottled.
    at = gemm(spec, tech, "gemm:2048x2048x13312")
    assert at.metrics["achieved_flop_per_s"][0] == pytest.approx(794.5e12, rel=0.02)
    assert not at.power_limited[0] and at.metrics["power_per_chip_w"][0] <= 700.0


def test_halving_the_tdp_lowers_the_clock_by_less_than_half():
    spec, tech = hardware_with_technology("h100-sxm")
    ev = gemm(spec, tech, **{"tdp": ["700 W", "350 W"]})
    full, half = ev.metrics["clock_hz"]
    assert ev.power_limited.tolist() == [False, True]
    assert ev.metrics["power_per_chip_w"][1] == pytest.approx(350.0, rel=1e-6)
    # Core power ~ f^3: half the core budget costs about 2^(1/3) of the clock, not 2x.
    assert 0.5 * full < half < full
    rate = ev.metrics["achieved_flop_per_s"]
    # Mostly compute-bound: the rate follows the clock, a little less (HBM's share of the
    # kernel's time does not shrink).
    assert half / full <= rate[1] / rate[0] <= 1.02 * half / full


def test_twice_the_units_at_equal_tdp_gain_between_1x_and_2x():
    spec, tech = hardware_with_technology("h100-sxm")
    # The L2's bandwidth is a chip figure: give the larger design twice of it too, or the
    # GEMM turns L2-bound at the lower clock and gains nothing.
    ev = gemm(spec, tech, **{"compute.units": [132, 264],
                             "memory.L2.bandwidth": ["6.65 TB/s", "13.3 TB/s"]})
    gain = ev.metrics["achieved_flop_per_s"][1] / ev.metrics["achieved_flop_per_s"][0]
    assert ev.power_limited.tolist() == [False, True]
    assert 1.2 < gain < 2.0 / 1.1
    # The power stays at the TDP: more compute costs clock, not watts.
    assert ev.metrics["power_per_chip_w"][1] == pytest.approx(700.0, rel=1e-6)


def test_the_clock_solves_the_tdp_by_hand():
    # With an HBM so fast that the GEMM's time is its compute term alone, a step at clock
    # ratio s takes T1 / s, so with v = s above the floor P(s) = static + s^3 (P1 - static
    # - off) + s off: off, the HBM and link energy over T1, does not follow the clock. P1 is
    # the unthrottled demand (a TDP that does not bind); a 500 W cap solves the cubic.
    spec, tech = hardware_with_technology("h100-sxm")
    fast = {"memory.HBM3.bandwidth": "1 EB/s", "memory.L2.bandwidth": "1 EB/s"}
    free = gemm(spec, tech, **{"tdp": "2000 W", **fast})
    ev = gemm(spec, tech, **{"tdp": "500 W", **fast})
    static = float(tech.energy.static.per_area) * float(free.metrics["area_per_chip_mm2"][0])
    off = float(free.energy.memory[0, -1] + free.energy.links[0]) / float(
        free.metrics["latency_s"][0])
    core = float(free.metrics["power_per_chip_w"][0]) - static - off
    roots = np.roots([core, 0.0, off, -(500.0 - static)])
    s = float(next(r.real for r in roots if abs(r.imag) < 1e-12 and 0 < r.real < 1))
    assert VOLTAGE_FLOOR < s < 1.0
    assert ev.metrics["clock_hz"][0] / 1.83e9 == pytest.approx(s, rel=1e-4)


def test_a_power_cap_costs_memory_bound_decode_only_when_deep():
    spec, tech = hardware_with_technology("h100-sxm")
    ev = dse.evaluate(spec, dse.load_workload("llama3-8b"), phase="decode", batch=1,
                      seq_in=512, seq_out=256, tech=tech,
                      overrides={"tdp": ["700 W", "400 W", "200 W"]})
    tps = ev.metrics["decode_tokens_per_s"]
    # The clocked SMs draw power even when HBM-bound: ~300 W for batch-1 decode on an H100
    # (ML.ENERGY v3.0); a 400 W cap costs nothing, a 200 W cap slows the cores and the
    # on-chip levels until they bound the step.
    assert ev.metrics["power_per_chip_w"][0] == pytest.approx(300.0, rel=0.05)
    assert tps[1] == pytest.approx(tps[0], rel=1e-9) and not ev.power_limited[1]
    assert ev.power_limited[2] and tps[2] < tps[1]


def test_a_tdp_no_clock_can_meet_is_infeasible_with_a_reason():
    spec, tech = hardware_with_technology("h100-sxm")
    ev = gemm(spec, tech, **{"tdp": "60 W"})  # above the static power, below HBM's share
    assert not ev.feasible[0]
    assert f"lowest clock ({MIN_CLOCK:.0%}" in ev.reason[0]


def test_a_chip_without_power_figures_is_calibrated_at_its_own_tdp():
    spec, tech = hardware_with_technology("h100-sxm")
    bare = spec.model_copy(update={"power": None})
    ev = gemm(bare, tech, **{"tdp": ["700 W", "350 W"]})
    stated = gemm(spec, tech, **{"tdp": ["700 W", "350 W"]})
    # The file's figures are this calibration, rounded: same clocks either way.
    assert ev.metrics["clock_hz"] == pytest.approx(stated.metrics["clock_hz"], rel=2e-3)
    assert ev.metrics["power_per_chip_w"][0] == pytest.approx(700.0, rel=1e-9)


def _calibrated(name):
    spec, tech = hardware_with_technology(name)
    db = design_batch(spec.model_copy(update={"power": None}))
    return spec, evaluate_module._operating_point(db, tech)


@pytest.mark.parametrize("name", [n for n in library_names("hardware")
                                  if load_hardware(n).power is not None
                                  and load_hardware(n).base is None and n != "h100-pcie"])
def test_shipped_power_figures_are_the_operating_point_formula(name):
    # A file's `power:` is what dse.model.operating_point computes for the chip; a model
    # change that moves the operating point shows here (regenerate the figures).
    spec, (energy, active) = _calibrated(name)
    for p, value in spec.power.matrix_energy.items():
        assert value == pytest.approx(float(energy[p][0]), rel=5e-3), (name, p)
    assert spec.power.active_per_unit == pytest.approx(float(active[0]), rel=5e-3)


def test_h100_pcie_figures_are_the_sxm_ones_at_its_clock():
    sxm, pcie = (hardware_with_technology(n)[0] for n in ("h100-sxm", "h100-pcie"))
    v = pcie.compute.clock / sxm.compute.clock
    for p in ("bf16", "fp8"):
        assert pcie.power.matrix_energy[p] == pytest.approx(
            sxm.power.matrix_energy[p] * v * v, rel=5e-3)
    assert pcie.power.active_per_unit == pytest.approx(
        sxm.power.active_per_unit * v ** 3, rel=5e-3)


def test_active_share_is_the_stated_fraction():
    spec, (energy, active) = _calibrated("h100-sxm")
    db = design_batch(spec)
    # The calibration GEMM's achieved rate at the rated clock (no power model).
    rate = float(dse.evaluate(spec, dse.load_workload(BIG), precision="bf16")
                 .metrics["achieved_flop_per_s"][0])
    flops_w = energy["bf16"][0] * rate
    clocked_w = active[0] * db.units[0]
    assert clocked_w / (clocked_w + flops_w) == pytest.approx(ACTIVE_SHARE, rel=0.02)
    assert np.isfinite(clocked_w)


def test_host_idle_time_by_hand():
    # One compute-bound operator of 1 ms at the rated clock, 0.5 J of core and 0.1 J of DRAM
    # energy, 100 W of clocked cores while it runs, 50 W static, and 1 ms per step in which
    # the chip waits for its host: 50 + (0.5 + 0.1 + 100 x 1e-3) / 2e-3 = 400 W.
    from dse.model.power import StepEnergy, StepTerms, chip_power

    db = design_batch(load_hardware("h100-sxm"), {"tdp": ["1000 W", "300 W"]})
    on = np.array([k in ("register", "sram", "cache") for k in db.level_kinds])
    memory = np.zeros((2, db.levels))
    memory[:, np.flatnonzero(~on)[0]] = 0.1
    energy = StepEnergy(compute=np.full(2, 0.5), memory=memory, links=np.zeros(2))
    terms = StepTerms(count=np.ones((2, 1)), scaled=np.full((2, 1), 1e-3),
                      fixed=np.zeros((2, 1)), overhead=np.zeros((2, 1)))
    pw = chip_power(db, energy, terms, np.full(2, 50.0), np.full(2, 100.0), db.tdp, 1e-3)
    assert pw.demand_w[0] == pytest.approx(400.0) and not pw.limited[0]
    s = pw.clock_ratio[1]
    assert pw.limited[1] and pw.power_w[1] == pytest.approx(300.0, rel=1e-9)
    # At clock ratio s: busy 1 ms / s, so 50 + (s^2 0.5 + 0.1 + 100 s^3 1e-3 / s) / t = 300.
    t = 1e-3 / s + 1e-3
    assert 50 + (s * s * 0.5 + 0.1 + 100 * s * s * 1e-3) / t == pytest.approx(300.0)
    assert pw.stretch[1] == pytest.approx(t / 2e-3)


def test_a_chip_without_a_tdp_uses_the_node_constants_and_is_never_throttled():
    spec, tech = hardware_with_technology("apple-m2-ultra")
    assert spec.tdp is None and spec.power is None
    ev = dse.evaluate(spec, dse.load_workload("gemm:4096x4096x4096"), precision="fp16",
                      tech=tech)
    per_op = getattr(tech.energy, spec.compute.style).per_op["fp16"]
    flops = float(np.sum(ev.ops_count[0] * ev.ops_flops[0]))
    assert ev.energy.compute[0] == pytest.approx(flops * per_op)
    assert not ev.power_limited[0] and np.isfinite(ev.metrics["power_per_chip_w"][0])
