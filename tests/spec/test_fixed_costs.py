"""Fixed costs on every chip (issue 11, mechanism 4): per operator (kernel), per collective
call, per step of a collective. Every shipped chip states each one with its source; a user's
chip that omits one is charged the documented default of its compute style, never an
implicit zero, and `dse show` says so; an explicit 0 is kept."""

import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

import dse
from dse.cli import app
from dse.model.batch import design_batch
from dse.spec.fixed_costs import FIXED_COST_DEFAULTS, fixed_cost_default
from dse.spec.hardware_costs import fixed_cost
from dse.spec.load import library_dir, library_names

us = 1e-6
CHIP = """\
name: {name}
source: hand-written test chip
compute:
  units: 4
{style}  clock: 1 GHz
{op}  matrix:
    peak: {{bf16: 100 TFLOPS}}
memory:
  - name: DRAM
    kind: dram
    capacity: 16 GiB
    bandwidth: 1 TB/s
{interconnect}"""
LINKS = """\
interconnect:
  links: 4
  link_bandwidth: 50 GB/s
  topology: ring
  chips_per_node: 4
  scale_out_bandwidth: 10 GB/s
{extra}"""


def chip(tmp_path, name="mine", *, style=None, op=None, interconnect=LINKS, extra=""):
    text = CHIP.format(name=name,
                       style=f"  style: {style}\n" if style else "",
                       op=f"  op_overhead: {op}\n" if op is not None else "",
                       interconnect=interconnect.format(extra=extra) if interconnect else "")
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def talks(spec) -> bool:
    ic = spec.interconnect
    return ic is not None and bool(ic.links or ic.scale_out_bandwidth or ic.host_link)


@pytest.mark.parametrize("name", library_names("hardware"))
def test_every_shipped_chip_states_its_fixed_costs(name):
    """Each chip's own file (or its base's) gives the per-operator cost, and, for a chip
    that can take part in a collective, the per-call and per-step costs (per scale-out step
    too where it has a scale-out network): none is left to the default."""
    spec = dse.load_hardware(name)
    needed = {"compute.op_overhead"}
    if talks(spec):
        needed |= {"interconnect.latency", "interconnect.collective_overhead"}
    if spec.interconnect is not None and spec.interconnect.scale_out_bandwidth:
        needed.add("interconnect.scale_out_latency")
    assert not needed & spec.estimated, sorted(needed & spec.estimated)


KEYS = ("op_overhead", "latency", "collective_overhead", "scale_out_latency")


@pytest.mark.parametrize("name", library_names("hardware"))
def test_every_stated_fixed_cost_has_its_source_beside_it(name):
    """In the YAML, the comment block right above a fixed cost (other fixed-cost keys may
    sit between) says where the figure comes from."""
    lines = (library_dir("hardware") / f"{name}.yaml").read_text().splitlines()
    key = re.compile(rf"^  ({'|'.join(KEYS)}):")
    for i, line in enumerate(lines):
        if not key.match(line):
            continue
        j = i - 1
        while j >= 0 and key.match(lines[j]):
            j -= 1
        assert j >= 0 and lines[j].strip().startswith("#"), (name, line)


def test_a_chip_without_fixed_costs_is_charged_its_style_defaults(tmp_path):
    """By hand, from the table's sources: GPU style 2.0 us per kernel (the shortest
    stream-launched kernel measured, MI210), array style 1.0 us (MTIA v2's launch bound),
    style unstated the GPU figure; every style 0.6 us per step (NCCL over NVLink), 6.6 us
    per call (NCCL's base latency) and 2.7 us per scale-out step (NCCL over IB/RoCE)."""
    for style, op in (("gpu", 2.0), ("array", 1.0), (None, 2.0)):
        spec = dse.load_hardware(str(chip(tmp_path, f"c{style}", style=style)))
        assert spec.compute.op_overhead == pytest.approx(op * us)
        ic = spec.interconnect
        assert (ic.latency, ic.collective_overhead, ic.scale_out_latency) == pytest.approx(
            (0.6 * us, 6.6 * us, 2.7 * us))
        assert spec.estimated == set(FIXED_COST_DEFAULTS)
        db = design_batch(spec)
        assert db.op_overhead[0] == pytest.approx(op * us)
        assert (db.link_latency[0], db.collective_overhead[0], db.scale_out_latency[0]) == \
            pytest.approx((0.6 * us, 6.6 * us, 2.7 * us))


def test_every_default_names_its_source():
    for path, row in FIXED_COST_DEFAULTS.items():
        assert None in row, path
        for default in row.values():
            assert default.seconds > 0 and len(default.source) > 20, path


def test_an_explicit_zero_is_the_users_statement(tmp_path):
    spec = dse.load_hardware(str(chip(
        tmp_path, style="array", op="0 us",
        extra="  latency: 0 us\n  collective_overhead: 0 us\n  scale_out_latency: 0 s\n")))
    assert spec.estimated == frozenset()
    db = design_batch(spec)
    assert (db.op_overhead[0], db.link_latency[0], db.collective_overhead[0],
            db.scale_out_latency[0]) == (0.0, 0.0, 0.0, 0.0)


def test_only_the_omitted_ones_are_estimated(tmp_path):
    spec = dse.load_hardware(str(chip(tmp_path, style="gpu", op="3 us",
                                      extra="  latency: 1.5 us\n")))
    assert spec.compute.op_overhead == pytest.approx(3 * us)
    assert spec.interconnect.latency == pytest.approx(1.5 * us)
    assert spec.estimated == {"interconnect.collective_overhead",
                              "interconnect.scale_out_latency"}


def test_a_derived_design_inherits_its_bases_figures_not_its_estimates(tmp_path):
    """`base:` merges the files before validation: the base's stated figures carry over as
    statements; a base that omits them gives the derived design its own style's default."""
    derived = tmp_path / "more.yaml"
    derived.write_text("name: more\nsource: test\nbase: gaudi2\ncompute:\n  units: 4\n")
    spec = dse.load_hardware(str(derived))
    assert spec.compute.op_overhead == pytest.approx(1.3 * us)
    assert spec.interconnect.latency == pytest.approx(2.7 * us)
    assert spec.estimated == frozenset()
    chip(tmp_path, "plain", style="array")
    path = tmp_path / "child.yaml"
    path.write_text("name: child\nsource: test\nbase: plain\ncompute:\n  style: gpu\n")
    child = dse.load_hardware(str(path))
    assert child.compute.op_overhead == pytest.approx(2.0 * us)  # gpu, not plain's array
    assert "compute.op_overhead" in child.estimated


def test_a_chip_without_an_interconnect_block_still_has_collective_costs(tmp_path):
    spec = dse.load_hardware(str(chip(tmp_path, style="gpu", interconnect="")))
    assert spec.interconnect is None
    assert fixed_cost(spec, "interconnect.collective_overhead") == pytest.approx(6.6 * us)
    db = design_batch(spec, {"interconnect.links": 2, "interconnect.link_bandwidth": 1e9})
    assert db.collective_overhead[0] == pytest.approx(6.6 * us)
    assert db.link_latency[0] == pytest.approx(0.6 * us)


def test_the_fixed_costs_stay_design_variables(tmp_path):
    spec = dse.load_hardware(str(chip(tmp_path, style="array")))
    db = design_batch(spec, {"compute.op_overhead": np.array([0.0, 5e-6]),
                             "interconnect.collective_overhead": ["1 us", "0 us"],
                             "interconnect.latency": "0 us"})
    np.testing.assert_array_equal(db.op_overhead, [0.0, 5e-6])
    np.testing.assert_allclose(db.collective_overhead, [1e-6, 0.0])
    np.testing.assert_array_equal(db.link_latency, [0.0, 0.0])


def test_160_all_reduces_on_8_gaudi2s_cost_the_documented_amount():
    """Llama 2 70B decodes one token with 160 all-reduces (2 per layer, 80 layers) over 8
    Gaudi 2s. Each costs HCCL's call (6.6 us) + 2 (8 - 1) = 14 RoCE steps of 2.7 us + its
    bytes: the 8192 bf16 activations, 2 x 7/8 of 16 KiB sent over 21 links x 12.5 GB/s
    (fully connected: all 7 peers at once) = 0.109 us; 44.51 us each, 7.12 ms per token,
    against 17.5 us with the fixed costs at zero (the collective row then is bytes alone)."""
    hw, wl = dse.load_hardware("gaudi2"), dse.load_workload("llama2-70b")
    each = 6.6 * us + 14 * 2.7 * us + 2 * 7 / 8 * 8192 * 2 / (21 * 12.5e9)
    zero = {"interconnect.latency": 0.0, "interconnect.collective_overhead": 0.0}
    for overrides, expected in (({}, each), (zero, 2 * 7 / 8 * 8192 * 2 / (21 * 12.5e9))):
        ev = dse.evaluate(hw, wl, phase="decode", batch=1, seq_in=128, seq_out=1, chips=8,
                          tp=8, overrides=overrides)
        rows = [i for i, n in enumerate(ev.ops_name) if str(n).endswith(".all_reduce")]
        assert ev.ops_count[0][rows].sum() == 160
        total = float(np.sum(ev.ops_count[0][rows] * ev.ops_time[0][rows]))
        assert total == pytest.approx(160 * expected, rel=1e-9)
    assert 160 * each == pytest.approx(7.1216e-3, rel=1e-4)


def test_show_marks_the_estimates_and_names_their_sources(tmp_path):
    runner = CliRunner()
    out = runner.invoke(app, ["show", str(chip(tmp_path, style="array"))], env={
        "COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    assert "per operator (kernel): 1 us (estimate)" in out.stdout
    assert "per collective call: 6.6 us (estimate), plus 600 ns (estimate) per step" \
        in out.stdout
    assert "MTIA v2's job launch" in out.stdout  # the array default's source
    assert fixed_cost_default("interconnect.latency", "array").source[:40] in out.stdout
    shipped = runner.invoke(app, ["show", "gaudi2"], env={"COLUMNS": "300"})
    assert "per operator (kernel): 1.3 us\n" in shipped.stdout
    assert "per collective call: 6.6 us, plus 2.7 us per step" in shipped.stdout
    assert "(estimate)" not in shipped.stdout
    doc = runner.invoke(app, ["show", str(chip(tmp_path, "j", style="gpu", op="2 us")),
                              "--format", "json"])
    estimated = json.loads(doc.stdout)["estimated"]
    assert set(estimated) == set(FIXED_COST_DEFAULTS) - {"compute.op_overhead"}
    assert estimated["interconnect.collective_overhead"]["seconds"] == pytest.approx(6.6 * us)
