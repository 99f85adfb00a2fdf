"""`dse eval` through Typer's test runner: views, overrides, errors and infeasible designs."""

import csv
import io
import json

import pytest
from typer.testing import CliRunner

from dse.cli import app

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def test_done_when_command_prints_a_breakdown():
    result = run("eval", "h100-sxm", "llama2-70b", "--phase", "decode", "--chips", "2",
                 "--tp", "2")
    assert result.exit_code == 0, result.output
    for text in ("decode rate per sequence", "Memory per chip", "Operators by time",
                 "Time by bound", "o_proj.all_reduce", "HBM3"):
        assert text in result.stdout


def test_json_follows_the_schema():
    result = run("eval", "h100-sxm", "llama2-7b", "--phase", "decode", "--batch", "4",
                 "--seq-in", "512", "--seq-out", "64", "--precision", "bf16", "-f", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["feasible"] is True and doc["reason"] is None
    assert set(doc["metrics"]) == {"latency_s", "ttft_s", "decode_tokens_per_s",
                                   "output_tokens_per_s", "samples_per_s",
                                   "achieved_flop_per_s", "tokens_per_s_per_chip",
                                   "power_w", "energy_per_token_j", "energy_per_sample_j",
                                   "energy_per_step_j", "area_mm2", "memory_bytes"}
    assert doc["metrics"]["ttft_s"] is None and doc["metrics"]["samples_per_s"] is None
    # Power and energy per token come with the spec's process node (n4).
    m = doc["metrics"]
    assert 50 < m["power_w"] <= 700 and doc["power_limited"] is False
    assert m["energy_per_token_j"] == pytest.approx(
        m["power_w"] / m["output_tokens_per_s"], rel=1e-9)
    assert m["energy_per_sample_j"] is None and doc["power_note"] is None
    assert doc["metrics"]["output_tokens_per_s"] == pytest.approx(
        4 * doc["metrics"]["decode_tokens_per_s"])
    op = doc["ops"][0]
    assert set(op) == {"name", "count", "flops", "bytes", "time_s", "bound"}
    assert set(op["bytes"]) == {"L1", "L2", "HBM3"}
    times = [o["time_s"] for o in doc["ops"]]
    assert times == sorted(times, reverse=True)
    # The step time is the sum of the operators' times.
    assert sum(times) == pytest.approx(doc["metrics"]["latency_s"] * 64, rel=1e-9)


def test_csv_has_one_row_per_operator():
    result = run("eval", "a100-sxm-80gb", "gemm:4096x4096x4096", "-f", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 1 and rows[0]["name"] == "gemm" and rows[0]["bound"] == "compute"


def test_set_with_several_values_evaluates_several_designs():
    result = run("eval", "h100-sxm", "llama2-7b", "--scenario", "chat-decode",
                 "--set", "memory.HBM3.bandwidth=2TB/s,4TB/s", "-f", "json")
    assert result.exit_code == 0, result.output
    docs = json.loads(result.stdout)
    assert [d["overrides"]["memory.HBM3.bandwidth"] for d in docs] == [2e12, 4e12]
    slow, fast = (d["metrics"]["decode_tokens_per_s"] for d in docs)
    assert fast > slow


def test_serve_batch_max_reports_the_batch():
    result = run("eval", "h100-sxm", "llama3-8b", "--scenario", "serve-128-2048", "-f", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["scenario"]["batch"] == "max"
    assert doc["scenario"]["sequences_per_replica"] > 100
    assert doc["metrics"]["output_tokens_per_s"] > 0


def test_infeasible_design_is_reported_not_raised():
    result = run("eval", "h100-sxm", "llama2-70b", "--precision", "bf16")
    assert result.exit_code == 0, result.output
    assert "feasible" in result.stdout and "weights" in result.stdout
    doc = json.loads(run("eval", "h100-sxm", "llama2-70b", "--precision", "bf16",
                         "-f", "json").stdout)
    assert doc["feasible"] is False and "short" in doc["reason"]
    assert doc["metrics"]["latency_s"] is None


@pytest.mark.parametrize(("args", "message"), [
    (["--set", "memory.L3.capacity=1GiB"], "has no memory level 'L3'"),
    (["--set", "memory.HBM3.capacity=fast"], "--set memory.HBM3.capacity"),
    (["--set", "compute.nonsense=1"], "not a field that can be varied"),
    (["--set", "compute.units"], "expected dotted.path=value"),
    (["--chips", "3", "--tp", "2"], "not a multiple of tp x pp"),
    (["--batch", "lots"], "--batch: expected a whole number or max"),
    (["--scenario", "nope"], "unknown scenario 'nope'"),
    (["--phase", "training"], "training is not modelled yet"),
])
def test_bad_options_exit_two_with_one_line(args, message):
    result = run("eval", "h100-sxm", "llama2-7b", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
