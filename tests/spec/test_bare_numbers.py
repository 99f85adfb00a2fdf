"""One rule for bare numbers (issue 23): text a person writes carries its unit on every route
(YAML, --set, the API's strings, study ranges); only a number object given to the API is a
value in the field's internal unit. Counts and fractions stay unitless."""

import textwrap

import numpy as np
import pytest
from typer.testing import CliRunner

import dse
from dse import units
from dse.cli import app
from dse.errors import DseError, SpecError
from dse.model.batch import design_batch
from dse.search.space import load_study
from dse.spec.load import load_hardware

runner = CliRunner()
H100 = load_hardware("h100-sxm")
EVAL = ("eval", "h100-sxm", "llama2-7b", "--phase", "decode", "--batch", "1",
        "--seq-in", "128", "--seq-out", "16", "-f", "json")


@pytest.mark.parametrize("option,expected", [
    ("compute.clock=1500", "--set compute.clock: expected a frequency with a unit, "
                           "e.g. '1500 MHz'"),
    ("memory.L2.capacity=96", "--set memory.L2.capacity: expected a capacity with a unit, "
                              "e.g. '96 MiB'"),
    ("tdp=700", "--set tdp: expected a power with a unit, e.g. '700 W'"),
    ("memory.HBM3.bandwidth=3350,3.35 TB/s", "--set memory.HBM3.bandwidth: expected a "
                                             "bandwidth with a unit, e.g. '3350 GB/s'"),
])
def test_set_refuses_a_quantity_without_a_unit(option, expected):
    """Was: compute.clock=1500 ran at 1.5 kHz (exit 0), memory.L2.capacity=96 built a
    96-byte L2."""
    result = runner.invoke(app, [*EVAL, "--set", option])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith(expected), line
    assert "(a unit is required)" in line


@pytest.mark.parametrize("option", ["compute.clock=1500 MHz", "compute.units=100",
                                    "compute.matrix.achievable.typical=0.5",
                                    "memory.HBM3.stacks=4", "interconnect.links=12"])
def test_set_takes_units_and_unitless_fields(option):
    result = runner.invoke(app, [*EVAL, "--set", option])
    assert result.exit_code == 0, result.output


def test_api_strings_need_units_and_api_numbers_are_in_the_internal_unit():
    with pytest.raises(DseError, match=r"compute.clock: expected a frequency with a unit, "
                                       r"e.g. '1500 MHz'"):
        design_batch(H100, {"compute.clock": "1500"})
    with pytest.raises(DseError, match=r"memory.L2.capacity: .*'96 MiB'"):
        design_batch(H100, {"memory.L2.capacity": ["1 GiB", " 96 "]})
    # a number object is the value in the column's unit: Hz, bytes, mm2
    as_text = design_batch(H100, {"compute.clock": "1500 MHz",
                                  "memory.L2.capacity": "96 MiB"})
    as_number = design_batch(H100, {"compute.clock": 1.5e9,
                                    "memory.L2.capacity": np.array([96 * 2**20])})
    assert as_number.clock[0] == as_text.clock[0] == 1.5e9
    assert np.array_equal(as_number.capacity, as_text.capacity)
    wl = dse.load_workload("llama2-7b")
    a = dse.evaluate(H100, wl, phase="decode", batch=1, seq_in=128, seq_out=16,
                     overrides={"compute.clock": 1.2e9})
    b = dse.evaluate(H100, wl, phase="decode", batch=1, seq_in=128, seq_out=16,
                     overrides={"compute.clock": "1.2 GHz"})
    assert a.metrics["latency_s"][0] == b.metrics["latency_s"][0]


@pytest.mark.parametrize("value,shown", [('"700"', "'700'"), ("700", "700")])
def test_yaml_refuses_a_quantity_without_a_unit(tmp_path, value, shown):
    f = tmp_path / "x.yaml"
    f.write_text(f"base: h100-sxm\nsource: test\ntdp: {value}\n")
    with pytest.raises(SpecError) as info:
        load_hardware(f)
    (issue,) = info.value.issues
    assert str(issue) == (f"{f}:3:6: tdp: expected a power with a unit, e.g. '700 W', found "
                          f"the bare number {shown} (a unit is required)")


def test_study_ranges_and_choices_refuse_bare_numbers_with_their_place(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(textwrap.dedent("""\
        source: test
        base: h100-sxm
        parameters:
          compute.clock: {low: 1000, high: "2 GHz"}
          power.matrix_energy.bf16: {choices: ["0.3 pJ/FLOP", "0.5"]}
          compute.units: {low: 66, high: 132}
        workloads:
          d: {workload: llama2-7b, phase: decode, batch: 1, seq_in: 128, seq_out: 16}
        objectives:
          t: {maximize: throughput}
        """))
    with pytest.raises(SpecError) as info:
        load_study(f)
    lines = [str(i) for i in info.value.issues]
    assert len(lines) == 2, lines  # compute.units, a count, takes plain numbers
    assert lines[0].startswith(f"{f}:4:24: parameters.compute.clock.low: expected a "
                               "frequency with a unit, e.g. '1000 MHz'"), lines[0]
    # was accepted as 0.5 J/FLOP: an energy per operation has no column suffix
    assert lines[1].startswith(f"{f}:5:55: parameters.power.matrix_energy.bf16.choices[1]: "
                               "expected an energy per operation with a unit, e.g. "
                               "'0.5 pJ/FLOP'"), lines[1]


def test_every_route_gives_the_same_sentence():
    """The YAML reader, --set / the API and study ranges all phrase it with units.bare_number."""
    text = units.bare_number("1500", units.FREQUENCY)
    with pytest.raises(units.UnitError) as a:
        units.to_kind("1500", units.FREQUENCY)
    with pytest.raises(DseError) as b:
        design_batch(H100, {"compute.clock": "1500"})
    assert str(a.value) == text
    assert str(b.value) == f"compute.clock: {text}"  # the API's words; --set on the CLI
    assert (b.value.field, b.value.domain, b.value.message) == ("compute.clock", "design", text)
    assert units.bare_number(10**400, units.BYTES).startswith(
        "expected a capacity with a unit, e.g. '1" + "0" * 400 + " MiB'")


@pytest.mark.parametrize("clock", ["1500", "fast"])
def test_a_wrong_clock_is_the_one_problem_named(tmp_path, clock):
    """A derived H100 whose compute.clock is wrong: the clock is the one line, not also its
    base's per-cycle L1 bandwidth asking for a clock (was two problems, the first at the
    `base:` line)."""
    path = tmp_path / "chip.yaml"
    path.write_text(f"base: h100-sxm\nsource: test\ncompute: {{clock: {clock}}}\n")
    with pytest.raises(SpecError) as e:
        load_hardware(path)
    assert [i.path for i in e.value.issues] == ["compute.clock"], str(e.value)
    assert e.value.issues[0].line == 3
