"""dse.sweep: zip and grid expansion, one evaluate call per scenario, one row per design."""

import numpy as np
import pytest

import dse
from dse.errors import DseError
from dse.spec.load import load_design
from dse.sweep import expand, sweep


@pytest.fixture(scope="module")
def h100():
    return dse.load_hardware("h100-sxm")


@pytest.fixture(scope="module")
def llama():
    return dse.load_workload("llama2-7b")


def test_zip_pairs_values_and_broadcasts_single_values():
    points = expand({"batch": [1, 8], "seq_in": [128], "compute.units": ["66", "132"]})
    assert points == [{"batch": 1, "seq_in": 128, "compute.units": "66"},
                      {"batch": 8, "seq_in": 128, "compute.units": "132"}]
    assert expand({}) == [{}]
    assert expand({"seq_out": 64}) == [{"seq_out": 64}]


def test_grid_is_the_cartesian_product_last_key_fastest():
    points = expand({"batch": [1, 8], "seq_in": [128, 256, 512]}, "grid")
    assert [(p["batch"], p["seq_in"]) for p in points] == [
        (1, 128), (1, 256), (1, 512), (8, 128), (8, 256), (8, 512)]


def test_zip_of_unequal_lengths_names_the_options_and_lengths():
    with pytest.raises(DseError) as e:
        expand({"batch": [1, 8], "seq_in": [1, 2, 3], "memory.L2.capacity": ["1MiB"] * 2})
    text = str(e.value)
    assert "--batch has 2" in text and "--seq-in has 3" in text
    assert "--set memory.L2.capacity has 2" in text and "--grid" in text
    assert "\n" not in text
    with pytest.raises(DseError, match="sweep mode"):
        expand({"batch": [1]}, "cross")
    with pytest.raises(DseError, match="--seq-out: expected at least one value"):
        expand({"seq_out": []})


def test_one_evaluate_call_per_scenario_with_override_arrays(h100, llama, monkeypatch):
    import dse.sweep as mod

    calls = []
    real = mod.evaluate

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(mod, "evaluate", spy)
    sw = sweep(h100, llama, "chat-decode",
               values={"seq_in": [64, 128],
                       "memory.HBM3.bandwidth": ["2TB/s", "4TB/s", "3TB/s"]}, mode="grid")
    assert len(calls) == 2 and [c["seq_in"] for c in calls] == [64, 128]
    assert calls[0]["overrides"] == {"memory.HBM3.bandwidth": ["2TB/s", "4TB/s", "3TB/s"]}
    assert sw.n == 6 and len(sw.evaluations) == 2 and sw.evaluations[0].n == 3
    assert list(sw.frame["seq_in"]) == [64, 64, 64, 128, 128, 128]
    # whole-number batches are a batch per design: one call for the whole grid
    calls.clear()
    sw = sweep(h100, llama, "chat-decode",
               values={"batch": [1, 8], "memory.HBM3.bandwidth": ["2TB/s", "4TB/s", "3TB/s"]},
               mode="grid")
    assert len(calls) == 1 and calls[0]["batch"] == [1, 1, 1, 8, 8, 8]
    assert sw.n == 6 and len(sw.evaluations) == 1 and sw.evaluations[0].n == 6
    assert sw.varied == ("batch", "memory.HBM3.bandwidth")
    assert list(sw.frame["batch"]) == [1, 1, 1, 8, 8, 8]
    assert list(sw.frame["memory.HBM3.bandwidth_bytes_per_s"]) == [2e12, 4e12, 3e12] * 2


def test_rows_equal_separate_evaluations(h100, llama):
    sw = sweep(h100, llama, "chat-decode",
               values={"seq_in": [128, 512], "compute.units": ["66", "132"]})
    for r, (seq_in, units_) in enumerate([(128, 66), (512, 132)]):
        one = dse.evaluate(h100, llama, "chat-decode", seq_in=seq_in,
                           overrides={"compute.units": units_})
        row = sw.frame.iloc[r]
        assert row["seq_in"] == seq_in and row["compute.units"] == units_
        assert row["latency_s"] == pytest.approx(one.metrics["latency_s"][0], rel=1e-12)
        assert row["memory_per_chip_HBM3_bytes"] == pytest.approx(one.memory_bytes[0, -1],
                                                                  rel=1e-12)


def test_frame_columns_carry_units_and_scenario_fields(h100, llama):
    sw = sweep(h100, llama, values={"memory.L2.capacity": ["50MiB", "100MiB"]})
    cols = list(sw.frame.columns)
    assert cols[0] == "memory.L2.capacity_bytes"
    assert list(sw.frame["memory.L2.capacity_bytes"]) == [50 * 2**20, 100 * 2**20]
    for col in ("scenario", "batch", "seq_in", "seq_out", "feasible", "reason", "latency_s",
                "output_tokens_per_s", "memory_per_chip_HBM3_bytes"):
        assert col in cols, col
    assert cols.index("seq_out") < cols.index("feasible") < cols.index("latency_s")
    assert set(sw.frame["scenario"]) == {"chat-decode"}


def test_duplicate_points_without_hardware_values_share_one_design(h100, llama):
    sw = sweep(h100, llama, values={"seq_in": [128, 128, 256]})
    assert sw.n == 3 and len(sw.evaluations) == 2
    assert sw.rows == [(0, 0), (0, 0), (1, 0)]


def test_op_frame_is_long_form(h100, llama):
    sw = sweep(h100, llama, values={"batch": [1, 4]})
    ops = sw.op_frame()
    per_design = len(sw.evaluations[0].ops_name)
    assert len(ops) == 2 * per_design
    assert {"design", "batch", "operator", "count", "time_s", "share", "bound", "flops",
            "bytes_L1", "bytes_L2", "bytes_HBM3"} <= set(ops.columns)
    for d in (0, 1):
        assert ops[ops["design"] == d]["share"].sum() == pytest.approx(1.0)
    assert list(ops[ops["design"] == 1]["batch"].unique()) == [4]


def test_infeasible_points_are_rows_and_warnings_are_collected(h100, llama):
    sw = sweep(h100, llama, values={"compute.units": ["66", "264"], "seq_in": [100000]},
               tech=load_design("h100-sxm")[1])
    assert list(sw.frame["feasible"]) == [True, False] and not sw.feasible
    assert "reticle" in sw.frame["reason"][1]
    assert len(sw.warnings) == 1 and "context of 4096" in sw.warnings[0]
    assert np.isnan(sw.frame["latency_s"][1])
