"""The contract every chip, workload and workload kind keeps: a file that checks clean
lowers and evaluates; a feasible result has finite, positive metrics for its phase and an
infeasible one says why; N designs in one call equal N calls of one design."""

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import dse
from dse import phases
from dse.check import check_file
from dse.report.hardware_view import vocabulary_rows
from dse.spec.load import library_dir, library_names, load_design
from dse.spec.vocabulary import canonical
from dse.spec.workload import WORKLOAD_SCHEMAS
from dse.workloads import KINDS, lower, resolve_scenario

CHIPS = library_names("hardware")
WORKLOADS = library_names("workload")
# The metric each phase must report, finite and positive, when the design is feasible.
HEADLINE = {"gemm": "achieved_flop_per_s", "prefill": "ttft_s", "decode":
            "decode_tokens_per_s", "serve": "output_tokens_per_s", "inference": "samples_per_s"}
# Designs that differ in every kind of quantity the model reads.
VARY = ("compute.units", "memory[-1].capacity", "memory[-1].bandwidth", "compute.clock")


def _design(name: str):
    return load_design(library_dir("hardware") / f"{name}.yaml")


def _scenarios(wl) -> list[str]:
    return [n for n, sc in wl.scenarios.items() if sc.phase != "training"]


def test_every_workload_kind_has_a_schema_and_a_lowering():
    assert set(KINDS) == set(WORKLOAD_SCHEMAS)
    kinds = {dse.load_workload(w).kind for w in WORKLOADS} | {"gemm"}
    assert kinds == set(KINDS)


@pytest.mark.parametrize("name", [*WORKLOADS, "gemm:512x1024x2048"])
def test_every_workload_checks_lowers_and_names_its_scenarios(name):
    wl = dse.load_workload(name)
    if not name.startswith("gemm:"):
        check_file(library_dir("workload") / f"{name}.yaml")
    for sc_name in _scenarios(wl):
        got, sc = resolve_scenario(wl, sc_name)
        assert got == sc_name
        batch = sc.batch if isinstance(sc.batch, int) else 1
        table = lower(wl, sc.model_copy(update={"batch": batch}))
        assert len(table) > 0 and table.total_flops > 0
        assert np.all(np.isfinite(table.flops)) and np.all(table.read >= 0)


@pytest.mark.parametrize("chip", CHIPS)
def test_every_chip_runs_every_workload(chip):
    spec, tech, _ = _design(chip)
    check_file(library_dir("hardware") / f"{chip}.yaml")
    for name in WORKLOADS:
        wl = dse.load_workload(name)
        for sc_name in _scenarios(wl)[:2]:
            res = dse.evaluate(spec, wl, sc_name, tech=tech)
            _assert_sane(res, f"{chip} x {name} [{sc_name}]")


def _assert_sane(res, label: str) -> None:
    phase = res.scenario.phase
    for i in range(res.n):
        if not res.feasible[i]:
            assert res.reason[i], f"{label}: infeasible without a reason"
            assert all(np.isnan(v[i]) for v in res.metrics.values()), label
            continue
        value = res.metrics[HEADLINE[phase]][i]
        assert np.isfinite(value) and value > 0, f"{label}: {HEADLINE[phase]} = {value}"
        assert np.isfinite(res.metrics["latency_s"][i]) and res.metrics["latency_s"][i] > 0
        for key, v in res.metrics.items():
            assert not np.isinf(v[i]), f"{label}: {key} is infinite"
        assert np.all(np.isfinite(res.ops_time[i])) and np.all(res.ops_time[i] >= 0), label
        assert phases.get(phase).in_sequence or res.sequences[i] >= 1


def _varied(spec) -> dict[str, list]:
    out: dict[str, list] = {}
    last = len(spec.memory) - 1
    for path in VARY:
        path = path.replace("[-1]", f"[{last}]")
        key, _ = canonical(spec, path)
        base = {"compute.units": spec.compute.units, "compute.clock": spec.compute.clock,
                f"memory.{spec.memory[last].name}.capacity": spec.memory[last].capacity,
                f"memory.{spec.memory[last].name}.bandwidth": spec.memory[last].bandwidth}[key]
        if base is None:
            continue
        if key == "compute.units":
            out[key] = [base, max(1, base // 2), base * 2]
        else:
            out[key] = [base, base * 0.5, base * 1.7]
    return out


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("workload", ["llama2-7b", "bert-large", "mixtral-8x7b"])
def test_batch_equals_loop(chip, workload):
    spec, tech, _ = _design(chip)
    wl = dse.load_workload(workload)
    over = _varied(spec)
    for sc_name in _scenarios(wl)[:3]:
        many = dse.evaluate(spec, wl, sc_name, overrides=over, tech=tech)
        _assert_sane(many, f"{chip} x {workload} [{sc_name}]")
        for i in range(many.n):
            one = dse.evaluate(spec, wl, sc_name, overrides={k: v[i] for k, v in over.items()},
                               tech=tech)
            assert bool(one.feasible[0]) == bool(many.feasible[i])
            assert one.sequences[0] == many.sequences[i]
            for key, v in many.metrics.items():
                np.testing.assert_allclose(one.metrics[key][0], v[i], rtol=1e-9,
                                           err_msg=f"{chip} {workload} {sc_name} {key} #{i}")


def _yaml_override(spec, path: str, value) -> dict:
    """The YAML a derived file writes to set `path` (memory levels by name)."""
    parts = path.split(".")
    if parts[0] == "memory":
        level = next(lv.name for lv in spec.memory if path.startswith(f"memory.{lv.name}."))
        rest = path[len(f"memory.{level}."):].split(".")
        leaf: dict = {"name": level}
        node = leaf
        for p in rest[:-1]:
            node = node.setdefault(p, {})
        node[rest[-1]] = value
        if rest[0] == "achievable":
            node["source"] = "test"
        return {"memory": [leaf]}
    out: dict = {}
    node = out
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value
    if "achievable" in parts:
        node["source"] = "test"
    return out


@pytest.mark.parametrize("path,value,text", [
    ("compute.units", 100, 100),
    ("compute.clock", 1.2e9, "1.2 GHz"),
    ("compute.op_overhead", 3e-6, "3 us"),
    ("compute.matrix.achievable.fraction", 0.5, 0.5),
    ("memory.L2.capacity", 96 * 2**20, "96 MiB"),
    ("memory.HBM3.bandwidth", 4e12, "4 TB/s"),
    ("memory.HBM3.stacks", 6, 6),
    ("memory.HBM3.achievable.fraction", 0.7, 0.7),
    ("interconnect.link_bandwidth", 50e9, "50 GB/s"),
    ("interconnect.links", 12, 12),
    ("tdp", 500.0, "500 W"),
])
def test_yaml_and_set_routes_build_the_same_design(tmp_path, path, value, text):
    """One vocabulary: a derived file and --set give the same design, coupled quantities
    included."""
    h100 = dse.load_hardware("h100-sxm")
    doc = {"base": "h100-sxm", "source": "route test", **_yaml_override(h100, path, text)}
    file = tmp_path / "derived.yaml"
    file.write_text(yaml.safe_dump(doc))
    via_yaml = dse.design_batch(dse.load_hardware(file))
    via_set = dse.design_batch(h100, {path: value})
    for field in ("units", "clock", "capacity", "peak_bandwidth", "bandwidth", "links",
                  "link_bandwidth", "op_overhead", "tdp", "stacks"):
        np.testing.assert_allclose(getattr(via_yaml, field), getattr(via_set, field),
                                   rtol=1e-12, err_msg=f"{path}: {field}")
    for p in ("bf16", "fp8"):
        np.testing.assert_allclose(via_yaml.matrix_peak[p], via_set.matrix_peak[p], rtol=1e-12)
        np.testing.assert_allclose(via_yaml.matrix_fraction[p], via_set.matrix_fraction[p])


VARIABLE = [r for r in vocabulary_rows(dse.load_hardware("h100-sxm")) if r["varies"]]


@settings(max_examples=60, deadline=None)
@given(picks=st.lists(st.tuples(st.sampled_from(VARIABLE), st.floats(0.01, 100.0)),
                      min_size=1, max_size=4, unique_by=lambda t: t[0]["path"]),
       workload=st.sampled_from(["llama2-7b", "mixtral-8x7b", "bert-base"]))
def test_any_legal_design_gives_finite_numbers_or_a_reason(picks, workload):
    """Every value the vocabulary accepts gives either a feasible design with finite,
    positive metrics or an infeasible one with its reason: never NaN, infinity or a
    feasible design with zero throughput."""
    spec, tech, _ = _design("h100-sxm")
    over = {}
    for row, factor in picks:
        v = row["value"] * factor
        if row["rule"].startswith("whole"):
            v = max(float(round(v)), 1.0 if ">" in row["rule"] and "0" in row["rule"] else 0.0)
        if "(0, 1]" in row["rule"]:
            v = min(v, 1.0)
        over[row["path"]] = v
    wl = dse.load_workload(workload)
    try:
        res = dse.evaluate(spec, wl, overrides=over, tech=tech)
    except dse.errors.DseError as e:  # a combination the vocabulary refuses, said in a line
        assert "\n" not in str(e)
        return
    _assert_sane(res, f"{over}")
