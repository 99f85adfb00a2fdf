"""The design vocabulary: derived from the hardware schema, one set of rules for --set, the
API and YAML derivation, coupled quantities that follow their cause."""

from pathlib import Path

import numpy as np
import pytest

import dse
from dse.errors import DseError, SpecError
from dse.model.batch import design_batch
from dse.spec import hardware
from dse.spec.load import load_hardware
from dse.spec.vocabulary import canonical, column_name, terms, variable_paths

# copies of shared/repro's reproducers
REPRO = Path(__file__).resolve().parents[1] / "hardening" / "data"
H100 = load_hardware("h100-sxm")
LLAMA7 = dse.load_workload("llama2-7b")


def test_terms_come_from_the_schema():
    t = terms()
    # Every numeric field of a memory level is a term, with the field's unit and rule.
    for name, info in hardware.MemoryLevel.model_fields.items():
        ann = str(info.annotation)
        numeric = any(k in ann for k in ("float", "int")) and "bool" not in ann
        # the generation is the one named term: a key of the memory catalogue
        assert (f"memory.<level>.{name}" in t) == (numeric or name == "generation"), name
    assert t["memory.<level>.capacity"].kind.name == "capacity"
    assert t["memory.<level>.stacks"].integer and t["memory.<level>.stacks"].gt == 0
    assert t["compute.matrix.achievable.fraction"].le == 1.0
    assert t["interconnect.links"].ge == 0 and t["interconnect.links"].integer
    for path in ("tdp", "compute.matrix.tile.m", "compute.matrix.peak_per_unit.<precision>",
                 "interconnect.host_link.bandwidth", "technology.dies"):
        assert path in t
    # Strings, literals and booleans are not quantities.
    assert not any(p.endswith((".name", ".kind", ".scope", ".resident", ".style"))
                   for p in t)


def test_a_field_added_to_the_schema_is_a_term():
    class Cooling(hardware.Spec):
        flow: hardware.Power | None = None
        fans: int = 1

    class Extended(hardware.HardwareSpec):
        cooling: Cooling | None = None

    t = terms(Extended)
    assert t["cooling.flow"].kind.name == "power" and t["cooling.fans"].integer
    assert set(terms()) < set(t)


def test_paths_by_name_and_by_index_are_the_same():
    assert canonical(H100, "memory[2].capacity")[0] == "memory.HBM3.capacity"
    a = design_batch(H100, {"memory[1].capacity": "96 MiB"})
    b = design_batch(H100, {"memory.L2.capacity": "96 MiB"})
    assert a.capacity[0, 1] == b.capacity[0, 1] == 96 * 2**20
    assert "memory.HBM3.stacks" in variable_paths(H100)


@pytest.mark.parametrize(("overrides", "message"), [
    ({None: 1}, "expected a dotted path"),
    ({5: 1}, "expected a dotted path"),
    ({"compute.units": [10**400]}, "beyond the range of a float"),
    ({"compute.units": 96.5}, "whole number"),
    ({"compute.units": True}, "found True"),
    ({"compute.units": 0}, "> 0"),
    ({"memory.HBM3.achievable.fraction": 1.5}, "<= 1"),
    ({"memory.HBM3.achievable.fraction": 1e-320}, "smallest normal"),
    ({"memory.HBM3.capacity": float("nan")}, "not finite"),
    ({"memory.HBM3.capacity": "80 Gib"}, "in bits"),
    ({"memory.L3.capacity": "1 GiB"}, "no memory level 'L3'"),
    ({"memory.HBM3.bandwith": "1 TB/s"}, 'did you mean "bandwidth"'),
    ({"compute.matrix.peak.fp9": "1 PFLOPS"}, "unknown precision 'fp9'"),
    ({"memory.HBM3.latency": "100 ns"}, "no model reads this field"),
    ({"technology.as_built.units": 150}, "cannot be varied yet"),
    ({"memory.L2.stacks": 2}, "not an HBM level"),
    ({"memory.HBM3.capacity": "80 GiB", "memory[2].capacity": "90 GiB"}, "given twice"),
    ({"compute.matrix.peak_per_unit.fp8": 1e308}, "largest quantity dse accepts"),
    ({"compute.units": [1, 2], "compute.clock": [1e9, 2e9, 3e9]}, "different lengths"),
])
def test_bad_overrides_are_one_line_errors(overrides, message):
    with pytest.raises(DseError, match=message) as e:
        design_batch(H100, overrides)
    assert "\n" not in str(e.value)


def test_api_rejects_a_string_of_overrides():
    with pytest.raises(DseError, match="expected a mapping"):
        dse.evaluate(H100, LLAMA7, phase="decode", overrides="compute.units=1")


def test_stacks_scale_capacity_and_bandwidth_unless_given():
    hbm = H100.memory[2]
    b = design_batch(H100, {"memory.HBM3.stacks": [5, 6, 6]})
    assert b.capacity[:, 2] == pytest.approx([hbm.capacity, hbm.capacity * 6 / 5,
                                              hbm.capacity * 6 / 5])
    assert b.peak_bandwidth[:, 2] == pytest.approx(hbm.bandwidth * np.array([1, 1.2, 1.2]))
    given = design_batch(H100, {"memory.HBM3.stacks": 6, "memory.HBM3.capacity": "80 GiB"})
    assert given.capacity[0, 2] == 80 * 2**30
    assert given.peak_bandwidth[0, 2] == pytest.approx(hbm.bandwidth * 1.2)


def test_channels_scale_a_dram_tier():
    gh = load_hardware("middle-ground")
    level = next(lv for lv in gh.memory if lv.channels)
    i = gh.memory.index(level)
    b = design_batch(gh, {f"memory.{level.name}.channels": level.channels * 2})
    assert b.capacity[0, i] == pytest.approx(2 * level.capacity)
    assert b.peak_bandwidth[0, i] == pytest.approx(2 * level.bandwidth)


def test_per_cycle_bandwidths_follow_the_clock_on_every_route(tmp_path):
    """S2: an A100 at 0.2 GHz through YAML and through --set is one design."""
    a100 = load_hardware("a100-sxm-80gb")
    assert "memory.L1.bandwidth" in a100.per_cycle
    yaml_route = tmp_path / "slow.yaml"
    yaml_route.write_text("base: a100-sxm-80gb\nsource: slow clock\ncompute: {clock: 0.2 GHz}\n")
    slow = load_hardware(yaml_route)
    via_yaml = design_batch(slow)
    via_set = design_batch(a100, {"compute.clock": "0.2 GHz"})
    np.testing.assert_allclose(via_set.peak_bandwidth, via_yaml.peak_bandwidth, rtol=1e-12)
    np.testing.assert_allclose(via_set.matrix_peak["bf16"], via_yaml.matrix_peak["bf16"])
    e1 = dse.evaluate(a100, LLAMA7, phase="prefill", overrides={"compute.clock": "0.2 GHz"})
    e2 = dse.evaluate(slow, LLAMA7, phase="prefill")
    assert e1.metrics["ttft_s"][0] == pytest.approx(e2.metrics["ttft_s"][0], rel=1e-9)


def test_per_cycle_override_uses_each_designs_clock():
    a100 = load_hardware("a100-sxm-80gb")
    b = design_batch(a100, {"compute.clock": ["1 GHz", "2 GHz"],
                            "memory.L2.bandwidth": "100 B/cycle"})
    assert b.peak_bandwidth[:, 1] == pytest.approx([100e9, 200e9])


def test_column_names_carry_si_units():
    assert column_name("memory.L2.capacity") == "memory.L2.capacity_bytes"
    assert column_name("compute.clock") == "compute.clock_hz"
    assert column_name("tdp") == "tdp_w"
    assert column_name("compute.units") == "compute.units"


def test_tdp_override_reaches_the_power_model():
    tech = dse.spec.load.load_design("h100-sxm")[1]
    res = dse.evaluate(H100, LLAMA7, phase="prefill", tech=tech,
                       overrides={"tdp": ["700 W", "200 W"]})
    assert not res.power_limited[0] and res.power_limited[1]
    assert res.metrics["ttft_s"][1] > res.metrics["ttft_s"][0]


def test_repro_files_are_rejected_at_load(tmp_path):
    for name, message in (("S1_denormal_fraction.yaml", "smallest normal"),
                          ("S3_peak_overflow.yaml", "the largest quantity dse accepts")):
        path = tmp_path / name
        path.write_text((REPRO / name).read_text())
        with pytest.raises(SpecError, match=message) as e:
            load_hardware(path)
        assert e.value.issues[0].line is not None


def test_boolean_is_not_a_layer_count(tmp_path):
    path = tmp_path / "s5.yaml"
    path.write_text((REPRO / "S5_bool_as_int.yaml").read_text())
    with pytest.raises(SpecError, match="layers: expected a whole number, found True"):
        dse.load_workload(path)


def test_tile_register_file_and_node_size_vary_per_design():
    """The matrix tile, the register file and the chips per node are design variables too:
    N designs in one call equal N calls of one design."""
    llama = dse.load_workload("llama2-70b")
    over = {"compute.matrix.tile.m": [64, 128, 64, 256], "compute.matrix.tile.n": 8,
            "compute.matrix.tile.k": 16,
            "compute.matrix.register_file": ["256 KiB", "256 KiB", "64 KiB", "1 MiB"],
            "interconnect.chips_per_node": [8, 8, 2, 4]}
    kw = dict(phase="prefill", batch=1, seq_in=300, precision="bf16", chips=4, tp=4)
    many = dse.evaluate(H100, llama, overrides=over, **kw)
    for i in range(4):
        one = dse.evaluate(H100, llama, overrides={k: (v[i] if isinstance(v, list) else v)
                                                   for k, v in over.items()}, **kw)
        np.testing.assert_allclose(many.metrics["ttft_s"][i], one.metrics["ttft_s"][0],
                                   rtol=1e-12)
        np.testing.assert_array_equal(many.ops_bound_code[i], one.ops_bound_code[0])
    ttft = many.metrics["ttft_s"]
    assert len(set(np.round(ttft, 12))) == 4  # each variable changes the answer
    assert ttft[2] > ttft[0]  # 2 chips per node: the 4-way all-reduces leave the node
    with pytest.raises(DseError, match="no native tile; give m, n and k"):
        design_batch(dse.load_hardware("xeon-gold-6242"), {"compute.matrix.tile.m": 128})
