"""Designs derived with `base:`: what a new user writes checks, evaluates and is priced as its
own die; coupled quantities follow their cause as on the --set route."""

import re
from pathlib import Path

import numpy as np
import pytest

import dse
from dse.check import check_file
from dse.errors import SpecError
from dse.model.area import area
from dse.model.batch import design_batch
from dse.spec.load import load_design, load_hardware

ROOT = Path(__file__).resolve().parents[2]
LLAMA70 = dse.load_workload("llama2-70b")


def _readme_whatif() -> str:
    """The what-if example of the docs (guide/hardware.md, Inheritance), verbatim."""
    text = (ROOT / "docs" / "guide" / "hardware.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    block = next(b for b in blocks if b.lstrip().startswith("base: h100-sxm"))
    return "\n".join(line[2:] if line.startswith("  ") else line
                     for line in block.splitlines()) + "\n"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_readme_whatif_checks_evaluates_and_is_its_own_die(tmp_path):
    path = _write(tmp_path, "whatif.yaml", _readme_whatif())
    assert check_file(path) == "hardware"
    spec, tech, why = load_design(path)
    assert why is None and spec.compute.units == 96
    res = dse.evaluate(spec, LLAMA70, phase="decode", chips=2, tp=2, tech=tech)
    assert res.feasible[0] and res.metrics["decode_tokens_per_s"][0] > 0
    die = area(design_batch(spec), tech)
    assert die.published_mm2 is None and die.rel_error is None  # not H100's 814 mm2
    assert spec.technology.as_built is None and spec.technology.transistors is None


def test_same_die_inherits_the_published_die(tmp_path):
    path = _write(tmp_path, "bin.yaml", "base: h100-sxm\nsource: a GH100 bin\n"
                  "compute: {units: 120}\ntechnology: {same_die: true}\n")
    spec = load_hardware(path)
    assert spec.technology.die_area == 814 and spec.technology.as_built.units == 144
    # A grandchild is a new die again unless it says so too.
    child = _write(tmp_path, "child.yaml", "base: bin.yaml\nsource: new die\n")
    assert load_hardware(child).technology.die_area is None


def test_as_built_error_points_at_the_users_own_line(tmp_path):
    path = _write(tmp_path, "big.yaml", "base: h100-sxm\nsource: too many SMs\n"
                  "compute: {units: 150}\ntechnology: {same_die: true}\n")
    with pytest.raises(SpecError) as e:
        load_hardware(path)
    (issue,) = e.value.issues
    assert issue.file == str(path) and issue.line == 3 and issue.path == "compute.units"
    assert "144" in issue.message and "same_die" in issue.message
    cache = _write(tmp_path, "l2.yaml", "base: h100-sxm\nsource: big L2\n"
                   "memory:\n  - {name: L2, capacity: 192 MiB}\ntechnology: {same_die: true}\n")
    with pytest.raises(SpecError) as e:
        load_hardware(cache)
    assert e.value.issues[0].file == str(cache) and e.value.issues[0].line == 4


def test_stacks_scale_on_the_yaml_route_as_on_set(tmp_path):
    h100 = load_hardware("h100-sxm")
    path = _write(tmp_path, "six.yaml", "base: h100-sxm\nsource: six stacks\n"
                  "memory:\n  - {name: HBM3, stacks: 6}\n")
    yaml_route = design_batch(load_hardware(path))
    set_route = design_batch(h100, {"memory.HBM3.stacks": 6})
    np.testing.assert_allclose(yaml_route.capacity, set_route.capacity, rtol=1e-12)
    np.testing.assert_allclose(yaml_route.peak_bandwidth, set_route.peak_bandwidth, rtol=1e-12)
    assert yaml_route.capacity[0, 2] == pytest.approx(h100.memory[2].capacity * 6 / 5)
    # Given explicitly, capacity stays as written.
    path = _write(tmp_path, "six80.yaml", "base: h100-sxm\nsource: six stacks, 80 GiB\n"
                  "memory:\n  - {name: HBM3, stacks: 6, capacity: 80 GiB}\n")
    assert load_hardware(path).memory[2].capacity == 80 * 2**30


def test_check_reports_what_eval_needs_with_file_and_line(tmp_path):
    path = _write(tmp_path, "lp.yaml", "base: h100-sxm\nsource: an LPDDR tier\nmemory:\n"
                  "  - {name: LPDDR, kind: dram, interface: lpddr5x, capacity: 256 GiB,"
                  " bandwidth: 400 GB/s}\n")
    with pytest.raises(SpecError) as e:
        check_file(path)
    (issue,) = e.value.issues
    assert issue.file == str(path) and issue.line == 4 and "channels" in issue.message


@pytest.mark.parametrize("name", dse.spec.load.library_names("hardware"))
def test_every_shipped_chip_that_checks_evaluates(name):
    path = dse.spec.load.library_dir("hardware") / f"{name}.yaml"
    check_file(path)
    spec, tech, _ = load_design(path)
    res = dse.evaluate(spec, dse.load_workload("gemm:4096x4096x4096"), tech=tech)
    assert res.feasible[0], res.reason[0]
    assert np.isfinite(res.metrics["achieved_flop_per_s"][0])


def test_a_derived_workloads_own_scenario_is_its_default(tmp_path):
    """A workload derived with base: lists its own scenarios first, so the first one it
    writes is the default (as in any workload file); a scenario it overrides moves with
    them, and the inherited ones follow in their order."""
    base = list(dse.load_workload("mpt-7b").scenarios)
    path = _write(tmp_path, "mine.yaml",
                  "base: mpt-7b\nsource: my scenarios\nscenarios:\n"
                  "  long: {phase: prefill, batch: 1, seq_in: 4096, precision: bf16}\n"
                  f"  {base[1]}: {{phase: decode, batch: 4, seq_in: 128, seq_out: 64}}\n")
    wl = dse.load_workload(str(path))
    assert list(wl.scenarios) == ["long", base[1], *(s for s in base if s != base[1])]
    assert wl.scenarios[base[1]].batch == 4
    ev = dse.evaluate(load_hardware("h100-sxm"), wl)
    assert ev.scenario_name == "long" and ev.scenario.seq_in == 4096
