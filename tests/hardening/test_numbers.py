"""Finite numbers only (issue 15, item 3).

Every reproducer of shared/repro about numbers (copied to data/) through the CLI: a
one-line error with exit code 2 naming the file, line, column and key path (or the flag),
or a correct answer. Then the mechanisms at their boundaries: unit exponents, the magnitude
window of quantities and plain numbers, whole numbers up to 2^53 on every route (YAML,
--set, the API, CLI flags), and the one JSON writer, which never writes Infinity or NaN.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import dse
from dse import units
from dse.cli import app
from dse.errors import DseError, SpecError
from dse.report import jsonout
from dse.spec.load import load_design
from dse.spec.types import MAX_WHOLE

DATA = Path(__file__).resolve().parent / "data"
runner = CliRunner()
BIG = "1" + "0" * 320  # an integer beyond the float range (T2)


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str


def run(*args: str | Path) -> Ran:
    """`dse ARGS` in this process, through Typer's test runner."""
    r = runner.invoke(app, [str(a) for a in args])
    return Ran(r.exit_code, r.stdout, r.stderr)


def one_line_error(ran: Ran, start: str) -> str:
    """The single stderr line of a run that failed with exit 2, which starts with `start`."""
    assert "Traceback" not in ran.stdout + ran.stderr, ran.stderr
    assert ran.code == 2, (ran.code, ran.stdout, ran.stderr)
    lines = ran.stderr.splitlines()
    assert len(lines) == 1, ran.stderr
    assert lines[0].startswith(start), lines[0]
    return lines[0]


def strict_json(text: str) -> object:
    """JSON as a strict parser reads it: Infinity, -Infinity and NaN are errors."""
    def refuse(word: str) -> None:
        raise AssertionError(f"JSON holds {word}")
    return json.loads(text, parse_constant=refuse)


def derived(tmp_path: Path, text: str, base: str = "h100-sxm", name: str = "d.yaml") -> Path:
    path = tmp_path / name
    path.write_text(f"base: {base}\nsource: test\n{text}\n")
    return path


# --- the reproducers, through the CLI -----------------------------------------------------

def test_unit_exponent_is_refused_at_its_line():
    """T1: '1 TB^30' raised OverflowError (exit 1)."""
    for command in (("check",), ("eval",)):
        args = [*command, DATA / "T1_unit_exponent_overflow.yaml"]
        if command == ("eval",):
            args += ["llama2-7b", "--phase", "decode"]
        line = one_line_error(run(*args), f"{DATA / 'T1_unit_exponent_overflow.yaml'}:4:26: "
                                          "memory[1].capacity: ")
        assert "exponent 30 is out of range" in line


def test_integer_beyond_float_range_is_refused_at_check():
    """T2: a 310-digit `links` passed check and crashed eval with OverflowError."""
    where = f"{DATA / 'T2_int_beyond_float.yaml'}:3:23: interconnect.links: "
    line = one_line_error(run("check", DATA / "T2_int_beyond_float.yaml"), where)
    assert "expected a whole number of at most 9007199254740992" in line
    assert "a number of 310 digits" in line
    one_line_error(run("eval", DATA / "T2_int_beyond_float.yaml", "llama2-7b"), where)


@pytest.mark.parametrize("flag", ["--seq-in", "--seq-out", "--batch", "--chips", "--tp",
                                  "--pp"])
def test_flags_beyond_float_range_name_the_flag(flag):
    """T2 on the CLI: --seq-in/--batch/... with 321 digits raised OverflowError."""
    line = one_line_error(run("eval", "h100-sxm", "llama2-7b", "--phase", "decode", flag,
                              BIG), f"{flag}: ")
    assert "at most 9007199254740992 (2^53)" in line
    if flag in ("--seq-in", "--seq-out", "--batch"):
        one_line_error(run("workload", "llama2-7b", flag, f"1,{BIG}"), f"{flag}: ")


def test_gemm_sizes_beyond_float_range_are_one_line_errors():
    """T2 for gemm:MxNxK names: the schema refuses them; gemm_from_name must say so."""
    one_line_error(run("workload", f"gemm:{BIG}x4x4"), f"gemm:{BIG}x4x4: ")


def test_denormal_fraction_is_refused_on_every_route():
    """S1/S1b: a fraction of 1e-320 gave a feasible design with 0 tokens/s."""
    line = one_line_error(run("eval", DATA / "S1_denormal_fraction.yaml", "llama2-7b"),
                          f"{DATA / 'S1_denormal_fraction.yaml'}:4:41: "
                          "memory[2].achievable.fraction: ")
    assert "below the smallest normal float" in line
    hw, wl = dse.load_hardware("h100-sxm"), dse.load_workload("llama2-7b")
    with pytest.raises(DseError, match=r"^memory\.HBM3\.achievable\.fraction: .*smallest "
                                       r"normal float"):
        dse.evaluate(hw, wl, phase="decode", overrides={
            "memory.HBM3.achievable.fraction": np.array([0.867, 1e-320])})


def test_peak_overflow_is_refused_before_show_and_eval():
    """S3: `show` printed Infinity; eval said 'static power inf W of a inf mm2 die'."""
    where = f"{DATA / 'S3_peak_overflow.yaml'}:5:26: compute.matrix.peak_per_unit.fp8: "
    for args in (("check",), ("show", "--format", "json"), ("eval",)):
        extra = ("llama2-7b",) if args == ("eval",) else ()
        line = one_line_error(run(*args, DATA / "S3_peak_overflow.yaml", *extra), where)
        assert "above 1e+30 FLOP/cycle" in line


def test_boolean_is_not_a_count():
    """S5: `layers: true` was evaluated as one layer."""
    line = one_line_error(run("eval", "h100-sxm", DATA / "S5_bool_as_int.yaml"),
                          f"{DATA / 'S5_bool_as_int.yaml'}:3:9: layers: ")
    assert line.endswith("expected a whole number, found True")


def test_moe_expert_count_beyond_2_53_is_refused():
    """T6: 1e17 experts passed check, then a probability underflowed (ZeroDivisionError)."""
    where = f"{DATA / 'T6_moe_experts_1e17.yaml'}:3:16: moe.experts: "
    one_line_error(run("check", DATA / "T6_moe_experts_1e17.yaml"), where)
    one_line_error(run("eval", "h100-sxm", DATA / "T6_moe_experts_1e17.yaml"), where)


def test_moe_expert_count_at_the_limit_evaluates(tmp_path):
    """The most experts the schema allows (2^53) still give a finite answer."""
    path = derived(tmp_path, f"moe: {{experts: {MAX_WHOLE}, top_k: 1}}", base="mixtral-8x7b")
    ran = run("eval", "h100-sxm", path, "--phase", "decode", "--chips", "8", "--tp", "8",
              "--format", "json")
    assert "Traceback" not in ran.stdout + ran.stderr and ran.code in (0, 3), ran.stderr
    strict_json(ran.stdout)


def test_yaml_and_set_give_the_same_design():
    """S2: the A100 at 0.2 GHz differed by 74% between `compute: {clock: 0.2 GHz}` in a
    derived file and `--set compute.clock=0.2GHz`: the file's per-cycle quantities (L1 and
    L2 bandwidth in B/cycle) were converted at 0.2 GHz while --set kept them at the base's
    1.41 GHz. The vocabulary now scales per-cycle quantities with the clock on both routes.
    Performance is the same to the last bits; power and area too when the derived file says
    it is the same die (a derived file is otherwise a new die without the base's spares)."""
    def doc(*args: str | Path) -> dict:
        ran = run("eval", *args, "llama2-7b", "--phase", "decode", "--format", "json")
        assert ran.code == 0, ran.stderr
        return strict_json(ran.stdout)["metrics"]  # type: ignore[index]

    via_set = doc("a100-sxm-80gb", "--set", "compute.clock=0.2GHz")
    via_yaml = doc(DATA / "S2_a100_0.2GHz.yaml")
    for key in ("latency_s", "decode_tokens_per_s", "achieved_flop_per_s"):
        assert via_yaml[key] == pytest.approx(via_set[key], rel=1e-12), key
    same_die = DATA.parent / "same_die.yaml"
    try:
        same_die.write_text((DATA / "S2_a100_0.2GHz.yaml").read_text()
                            + "technology: {same_die: true}\n")
        via_same_die = doc(same_die)
    finally:
        same_die.unlink()
    for key in ("latency_s", "power_per_chip_w", "energy_per_token_j", "area_per_chip_mm2"):
        assert via_same_die[key] == pytest.approx(via_set[key], rel=1e-12), key


def test_unusable_measured_value_is_an_invalid_row():
    """S4: a measured value of 1e-320 put Infinity and NaN into `dse validate`'s JSON."""
    ran = run("validate", "--measurements", DATA / "S4_tiny_measured_value.csv",
              "--format", "json")
    assert ran.code == 0, ran.stderr
    doc = strict_json(ran.stdout)
    (row,) = doc["rows"]  # type: ignore[index]
    assert row["rel_error"] is None and row["predicted"] > 0
    assert "measured value 1e-320 is too small to compare with" in row["invalid"]
    assert doc["summary"] == {"skipped": 0, "invalid": 1}  # type: ignore[index]
    table = run("validate", "--measurements", DATA / "S4_tiny_measured_value.csv")
    assert table.code == 0 and "invalid: the measured value" in table.stdout
    assert "inf" not in table.stdout and "nan" not in table.stdout


@pytest.mark.parametrize("overrides,start", [
    ({None: 1}, "override None: "),
    ({5: 1}, "override 5: "),
    ("compute.units=1", "overrides: "),
    ({"compute.units": [10**400]}, "compute.units: "),
    ({"compute.units": 10**17}, "compute.units: "),
    ({"memory.HBM3.bandwidth": 1e-300}, "memory.HBM3.bandwidth: "),
    ({"memory.HBM3.bandwidth": "1e-300 B/s"}, "memory.HBM3.bandwidth: "),
    ({"compute.clock": [1e9, 1e31]}, "compute.clock: "),
    ({"memory.L2.capacity": "1 TB^30"}, "memory.L2.capacity: "),
    ({"compute.matrix.achievable.fraction": np.array([0.5, 1e-40])},
     "compute.matrix.achievable.fraction: "),
])
def test_api_overrides_raise_one_line_dse_errors(overrides, start):
    """T9: the API raised TypeError, ValueError or OverflowError for bad override keys and
    values; every one is a DseError naming the override, on one line."""
    hw, wl = dse.load_hardware("h100-sxm"), dse.load_workload("llama2-7b")
    with pytest.raises(DseError) as e:
        dse.evaluate(hw, wl, phase="decode", overrides=overrides)
    assert str(e.value).startswith(start), str(e.value)
    assert "\n" not in str(e.value)


# --- the mechanisms -----------------------------------------------------------------------

@pytest.mark.parametrize("text", ["1 TB^4", "1 B^0", "1 s^-4", "1 B^999999999999"])
def test_unit_exponents_beyond_3_are_refused(text):
    with pytest.raises(units.UnitError, match=r"exponent .* is out of range"):
        units.parse_quantity(text)


@pytest.mark.parametrize("text,value", [("814 mm^2", 8.14e-4), ("1 mm\u00b3", 1e-9),
                                        ("2 s^-1", 2.0)])
def test_small_unit_exponents_still_work(text, value):
    assert units.parse_quantity(text)[0] == pytest.approx(value)


@pytest.mark.parametrize("text,why", [
    ("1e31 B", "above 1e+30 B"), ("1e-31 B/s", "below 1e-30 B/s"),
    ("1e400 B", "not finite"), ("1e-400 B", "must be > 0"),
    ("1e-320 W", "smallest normal float"),
    ("1e49 mm2/TFLOPS", "above 1e+30 m2/(FLOP/s)"),
])
def test_quantities_outside_the_window_are_refused(text, why):
    kind = units.KINDS[[k.dim for k in units.KINDS].index(units.parse_quantity(text)[1])] \
        if "e400" not in text else units.BYTES
    with pytest.raises(units.UnitError) as e:
        units.to_kind(text, kind)
    assert why in str(e.value)


def test_window_edges_are_accepted():
    assert units.to_kind("1e30 B", units.BYTES) == 1e30
    assert units.to_kind("1e-30 B/s", units.BANDWIDTH) == 1e-30
    assert units.to_kind("0 s", units.TIME, positive=False) == 0.0


@pytest.mark.parametrize("text,start", [
    (f"interconnect: {{links: {MAX_WHOLE + 1}}}", "interconnect.links: expected a whole "
                                                  "number of at most 9007199254740992"),
    ("memory: [{name: HBM3, achievable: {fraction: 1.0e-31, source: x}}]",
     "memory[2].achievable.fraction: expected 0 or a number of magnitude 1e-30 to 1e+30"),
    ("memory: [{name: HBM3, bandwidth: 1e-300 B/s}]", "memory[2].bandwidth: expected a "
                                                      "positive bandwidth"),
    ("compute: {clock: 1e-300 Hz}", "compute.clock: "),
    ("interconnect: {link_bandwidth: 1e300 B/s}", "interconnect.link_bandwidth: "),
    ("technology: {die_area: 1e40 mm2}", "technology.die_area: "),
])
def test_spec_numbers_are_refused_with_their_path(tmp_path, text, start):
    """Before, these evaluated to a feasible design with null latency, or to 'a die of inf
    mm2': the window keeps every product of inputs inside the float range."""
    path = derived(tmp_path, text)
    with pytest.raises(SpecError) as e:
        dse.load_hardware(str(path))
    lines = [f"{i.path}: {i.message}" for i in e.value.issues]
    assert any(line.startswith(start) for line in lines), lines
    assert all(i.line is not None for i in e.value.issues)


def test_workload_counts_are_bounded_too(tmp_path):
    path = derived(tmp_path, f"layers: {MAX_WHOLE + 1}", base="llama2-7b", name="w.yaml")
    with pytest.raises(SpecError, match=r"w.yaml:3:\d+: layers: expected a whole number of "
                                        "at most"):
        dse.load_workload(str(path))


def test_every_shipped_spec_is_inside_the_limits():
    ran = run("check", *sorted(str(p) for d in ("hwspecs", "hwspecs/tech", "workloads",
                                                  "studies")
                               for p in (Path(__file__).parents[2] / d).glob("*.yaml")))
    assert ran.code == 0, ran.stderr


def test_corner_designs_inside_the_window_give_finite_metrics():
    """Every corner of the window on nine paths at once (512 designs): a feasible design has
    finite, positive latency and throughput, and no float warning is raised."""
    hw, tech, _ = load_design("h100-sxm")
    corners = {"memory.HBM3.bandwidth": (1e-30, 1e30), "compute.clock": (1e-30, 1e30),
               "memory.HBM3.achievable.fraction": (1e-30, 1.0),
               "compute.matrix.achievable.fraction": (1e-30, 1.0),
               "memory.L2.capacity": (1e-30, 1e30), "compute.units": (1, MAX_WHOLE),
               "interconnect.link_bandwidth": (1e-30, 1e30), "tdp": (1e-30, 1e30),
               "compute.op_overhead": (1e-30, 1e30)}
    grid = np.array(np.meshgrid(*corners.values(), indexing="ij")).reshape(len(corners), -1)
    overrides = dict(zip(corners, grid, strict=True))
    with np.errstate(all="raise"):
        for t in (None, tech):
            ev = dse.evaluate(hw, dse.load_workload("llama2-7b"), phase="decode", tech=t,
                              overrides=overrides)
            for m in ("latency_s", "decode_tokens_per_s"):
                v = ev.metrics[m][ev.feasible]
                assert np.all(np.isfinite(v) & (v > 0)), m


# --- the JSON writer ----------------------------------------------------------------------

def test_json_writer_maps_non_finite_to_null_with_a_reason():
    doc = {"a": math.inf, "b": math.nan, "c": [1.0, -math.inf], "d": np.float64("-inf"),
           "e": np.array([1, 2]), "f": np.int64(3), "g": np.bool_(True), "h": (1, 2)}
    out = strict_json(jsonout.dumps(doc))
    assert out == {"a": None, "a_reason": "not finite (+inf): beyond the range of a float",
                   "b": None, "c": [1.0, None], "d": None,
                   "d_reason": "not finite (-inf): beyond the range of a float",
                   "e": [1, 2], "f": 3, "g": True, "h": [1, 2]}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5)
    | st.floats(allow_nan=True, allow_infinity=True),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=4),
    max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_json_writer_never_writes_infinity_or_nan(doc):
    strict_json(jsonout.dumps(doc))


@pytest.mark.parametrize("args", [
    ("show", "h100-sxm", "--format", "json"),
    ("show", "h100-sxm", "--format", "json", "--paths"),
    ("eval", "h100-sxm", "llama2-7b", "--phase", "decode", "--format", "json"),
    ("eval", "h100-sxm", "llama2-70b", "--phase", "decode", "--format", "json"),  # infeasible
    ("eval", "h100-sxm", "llama2-7b", "--phase", "decode", "--format", "json", "--ops"),
    ("eval", "h100-sxm", "llama2-7b", "--format", "json", "--set", "compute.units=1,132"),
    ("workload", "llama2-7b", "--format", "json"),
    ("workload", "llama2-7b", "--format", "json", "--seq-in", "1,2"),
    ("area", "h100-sxm", "--format", "json"),
    ("validate", "--measurements", str(DATA / "S4_tiny_measured_value.csv"), "--format",
     "json"),
])
def test_json_of_every_command_is_strict(args):
    ran = run(*args)
    assert ran.code in (0, 3), ran.stderr
    strict_json(ran.stdout)


def test_chip_counts_beyond_2_53_are_refused_by_the_api():
    """chips=10**400 raised ZeroDivisionError through the API (the CLI flags were bounded)."""
    hw, wl = dse.load_hardware("h100-sxm"), dse.load_workload("llama2-7b")
    for bad in (10**400, 2**53 + 1, 0):
        with pytest.raises(DseError, match=r"^chips: expected a whole number from 1 to "):
            dse.evaluate(hw, wl, chips=bad)


def test_moe_expert_coverage_is_exact_for_huge_expert_counts():
    """The share of experts a batch touches, E (1 - (1 - k/E)^T), lost every digit for E
    near 2^53 (1 - k/E rounds to 1); the expm1/log1p form keeps it."""
    from dse.spec.workload import MoE, Scenario
    from dse.workloads import lower

    base = dse.load_workload("mixtral-8x7b")
    big = base.model_copy(update={"moe": MoE(experts=2**50, top_k=2)})
    t = lower(big, Scenario(phase="decode", batch=4, seq_in=16, seq_out=1))
    up = list(t.name).index("expert_up_proj")
    assert t.count[up] == pytest.approx(big.layers * 4 * 2, rel=1e-6)  # every token its own
