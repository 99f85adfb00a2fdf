"""The loader: shipped specs load, inheritance merges, and every rejection class gives one
line with file, line, key path and expectation."""

from pathlib import Path

import pytest

from dse.check import check_file
from dse.errors import SpecError
from dse.spec import load
from dse.spec.hardware import HardwareSpec, derived_figures

DATA = Path(__file__).resolve().parent.parent / "data"
BAD = DATA / "bad"
GOOD = DATA / "good"


def test_library_is_found():
    names = load.library_names("hardware")
    assert "h100-sxm" in names
    assert load.library_dir("hardware").name == "hwspecs"


@pytest.mark.parametrize("name", load.library_names("hardware"))
def test_every_shipped_spec_loads(name):
    spec = load.load_hardware(name)
    assert spec.name == name
    assert spec.source.strip()
    figures = derived_figures(spec)
    assert figures["peak_flop_per_s"], "a chip needs at least one peak rate"
    assert all(v > 0 for v in figures["peak_flop_per_s"].values())


def test_h100_derived_figures_match_datasheet():
    spec = load.load_hardware("h100-sxm")
    figures = derived_figures(spec)
    # NVIDIA datasheet: 989 TFLOPS dense bf16, 1979 TFLOPS fp8, 3.35 TB/s HBM3, 80 GB.
    assert figures["matrix_peak_flop_per_s"]["bf16"] == pytest.approx(989.4e12, rel=1e-3)
    assert figures["matrix_peak_flop_per_s"]["fp8"] == pytest.approx(1978.9e12, rel=1e-3)
    hbm = figures["levels"][-1]
    assert hbm["capacity_bytes"] == 80 * 2**30
    assert hbm["bandwidth_bytes_per_s"] == 3.35e12
    # ridge point of HBM at bf16: 989.4e12 / 3.35e12 = 295 FLOP/byte
    assert hbm["ridge_flop_per_byte"]["bf16"] == pytest.approx(295.3, rel=1e-3)
    assert spec.interconnect.chip_bandwidth == 18 * 25e9


def test_minimal_spec_values_in_si():
    spec = load.load_hardware(GOOD / "minimal.yaml")
    assert spec.compute.clock == 1e9
    sram = spec.memory[0]
    assert sram.chip_capacity(spec.compute.units) == 4 * 2**20
    # 64 B/cycle at 1 GHz, per unit, 4 units
    assert sram.chip_bandwidth(spec.compute.units) == pytest.approx(4 * 64e9)
    assert spec.compute.matrix_peak()["bf16"] == pytest.approx(4 * 1024 * 1e9)


def test_name_defaults_to_file_stem(tmp_path):
    text = (GOOD / "minimal.yaml").read_text().replace("name: minimal\n", "")
    (tmp_path / "my-chip.yaml").write_text(text)
    assert load.load_hardware(tmp_path / "my-chip.yaml").name == "my-chip"


def test_inheritance_overrides_merges_and_inserts_by_name():
    spec = load.load_hardware(GOOD / "derived.yaml")
    assert spec.name == "derived"  # never inherited
    assert spec.base == "minimal"
    assert spec.source == "test derivation of minimal"
    assert spec.compute.units == 8
    assert spec.compute.matrix_peak()["bf16"] == pytest.approx(8 * 1024 * 1e9)
    assert [m.name for m in spec.memory] == ["SRAM", "L2", "DRAM", "CXL"]
    dram = spec.memory[2]
    assert dram.bandwidth == 200e9  # overridden
    assert dram.capacity == 16e9  # inherited
    # per-unit SRAM scales with the new unit count
    assert spec.memory[0].chip_capacity(spec.compute.units) == 8 * 2**20


def test_inheritance_can_remove_a_level_and_chains():
    spec = load.load_hardware(GOOD / "derived_remove.yaml")
    assert [m.name for m in spec.memory] == ["SRAM", "L2", "DRAM"]
    assert spec.compute.units == 8


def test_base_by_shipped_name(tmp_path):
    (tmp_path / "half.yaml").write_text(
        "base: h100-sxm\nsource: what-if\ncompute:\n  units: 66\n")
    spec = load.load_hardware(tmp_path / "half.yaml")
    full = load.load_hardware("h100-sxm")
    assert spec.compute.matrix_peak()["bf16"] == pytest.approx(
        full.compute.matrix_peak()["bf16"] / 2)
    assert spec.memory[-1].capacity == full.memory[-1].capacity


def test_remove_unknown_item_is_reported(tmp_path):
    (tmp_path / "x.yaml").write_text(
        f"base: {GOOD / 'minimal.yaml'}\nsource: t\nmemory:\n  - name: L9\n    remove: true\n")
    expected = r"x.yaml:5:13: memory\[0\].remove: no inherited item named 'L9'"
    with pytest.raises(SpecError, match=expected):
        load.load_hardware(tmp_path / "x.yaml")


# file -> the parts its one-line message must contain (line:col, key path, expectation)
REJECTIONS = {
    "duplicate_key.yaml": [":5:3: units: duplicate key (first given at line 4)"],
    "unknown_key.yaml": [":5:5: memory[1].bandwith: unknown key", 'did you mean "bandwidth"?'],
    "missing_unit.yaml": [":5:16: memory[1].bandwidth:", "bandwidth with a unit, e.g. '3350 GB/s'",
                          "a unit is required"],
    "wrong_dimension.yaml": [":5:15: memory[1].capacity:", "capacity like '80 GiB'",
                             "found '3 TB/s' (a bandwidth)"],
    "zero_capacity.yaml": [":5:15: memory[0].capacity:", "found '0 MiB' (must be > 0)"],
    "unknown_base.yaml": [":1:7: base: unknown hardware 'h100-sxn'", "did you mean h100-sxm"],
    "syntax_error.yaml": [":5:7: YAML syntax error"],
    "dram_inside_cache.yaml": [":9:22: memory[1].kind:",
                               "a cache level cannot sit outside a dram level"],
    "missing_source.yaml": [":1:1: source: required key missing"],
    "unknown_kind.yaml": [":5:11: memory[1].kind: unknown value 'dramm'",
                          "register, sram, cache, dram, host", 'did you mean "dram"?'],
    "per_cycle_without_clock.yaml": [":8:58: memory[0].bandwidth:", "give compute.clock"],
    "wrong_type.yaml": [":4:10: compute.units: expected a whole number, found 'many'"],
    "unknown_precision.yaml": [":5:21: compute.matrix.peak_per_unit.bf61: unknown key 'bf61'",
                               'did you mean "bf16"?'],
    "cycle_a.yaml": [":1:7: base: inheritance cycle: cycle_a.yaml -> cycle_b.yaml"],
    "empty.yaml": [":1:1: expected a mapping of keys at the top level, found an empty file"],
}


@pytest.mark.parametrize("name,parts", REJECTIONS.items())
def test_each_rejection_class_gives_one_precise_line(name, parts):
    with pytest.raises(SpecError) as info:
        check_file(BAD / name)
    issues = info.value.issues
    assert len(issues) == 1, str(info.value)
    line = str(issues[0])
    assert line.startswith(str(BAD / name)) or line.startswith(str(BAD / "cycle_a.yaml"))
    assert "\n" not in line
    for part in parts:
        assert part in line, line


def test_all_problems_reported_at_once():
    with pytest.raises(SpecError) as info:
        check_file(BAD / "several_problems.yaml")
    text = str(info.value)
    lines = text.splitlines()
    assert len(lines) == 5
    assert [line.split(": ")[1] for line in lines] == [
        "compute.units", "compute.clock", "compute.matrix.peak.bf16", "memory[0].capacity",
        "memory[0].colour"]
    assert "unknown unit 'KB'" in text


def test_unknown_name_and_missing_path():
    with pytest.raises(SpecError, match=r"unknown hardware 'h100' \(did you mean"):
        load.load_hardware("h100")
    with pytest.raises(SpecError, match="file not found"):
        load.load_hardware("no/such/file.yaml")


def test_spec_is_frozen():
    spec = load.load_hardware("h100-sxm")
    with pytest.raises(Exception):  # noqa: B017 - pydantic raises ValidationError
        spec.compute.units = 1  # type: ignore[misc]
    assert isinstance(spec, HardwareSpec)


def test_yaml_anchors_and_merge_keys(tmp_path):
    (tmp_path / "anchors.yaml").write_text(
        "source: t\ncompute:\n  units: 2\n  clock: 1 GHz\n  matrix:\n"
        "    peak_per_unit: {bf16: 8 FLOP/cycle}\n"
        "memory:\n  - &lvl {name: A, kind: sram, capacity: 1 MiB, bandwidth: 1 TB/s}\n"
        "  - {<<: *lvl, name: B, kind: dram, capacity: 1 GB}\n")
    spec = load.load_hardware(tmp_path / "anchors.yaml")
    assert spec.memory[1].bandwidth == 1e12 and spec.memory[1].capacity == 1e9


def test_middle_ground_puts_new_tiers_outermost():
    spec = load.load_hardware("middle-ground")
    assert [m.name for m in spec.memory] == ["L1", "L2", "HBM3", "LPDDR5X", "CXL"]
    assert spec.compute.units == 96
    assert spec.memory[1].capacity == 192 * 2**20
