"""`dse eval` through Typer's test runner: views, overrides, errors and infeasible designs."""

import csv
import io
import json
import re

import pytest
from typer.testing import CliRunner

from dse.cli import app

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


MAIN = ("eval", "h100-sxm", "llama2-70b", "--phase", "decode", "--chips", "2", "--tp", "2")


def test_done_when_command_prints_a_breakdown():
    result = run(*MAIN)
    assert result.exit_code == 0, result.output
    for text in ("decode rate per sequence", "Memory per chip", "Operators by time",
                 "Time by bound", "o_proj.all_reduce", "HBM3"):
        assert text in result.stdout


def test_main_command_names_the_scenario_that_ran():
    result = run(*MAIN)
    first = " ".join(result.stdout.split()[:30])
    assert ("llama2-70b [chat-decode-int8: decode, batch 1, seq_in 5, seq_out 200, w8a16] "
            "on h100-sxm, 2 chips (tp 2, pp 1); --phase decode") in first
    doc = json.loads(run(*MAIN, "-f", "json").stdout)
    assert doc["scenario"]["name"] == "chat-decode-int8"
    assert doc["scenario"]["description"] == "decode, batch 1, seq_in 5, seq_out 200, w8a16"
    assert doc["overrides"] == {"phase": "decode"}
    rows = list(csv.DictReader(io.StringIO(run(*MAIN, "-f", "csv").stdout)))
    assert len(rows) == 1 and rows[0]["scenario"] == "chat-decode-int8"
    assert rows[0]["precision"] == "w8a16"


def test_headers_name_every_override():
    args = ("eval", "h100-sxm", "llama2-7b", "--seq-in", "512", "--set",
            "memory.L2.capacity=96MiB", "--set", "compute.units=96")
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert ("llama2-7b [chat-decode: decode, batch 1, seq_in 512, seq_out 200, bf16] on "
            "h100-sxm, 1 chip; --seq-in 512 --set memory.L2.capacity=96MiB "
            "--set compute.units=96") in " ".join(result.stdout.split()[:30])
    doc = json.loads(run(*args, "-f", "json").stdout)
    assert doc["overrides"] == {"seq_in": 512, "memory.L2.capacity": 96 * 2**20,
                                "compute.units": 96}
    row = next(csv.DictReader(io.StringIO(run(*args, "-f", "csv").stdout)))
    assert float(row["memory.L2.capacity_bytes"]) == 96 * 2**20
    assert float(row["compute.units"]) == 96 and row["seq_in"] == "512"


def test_json_follows_the_schema():
    result = run("eval", "h100-sxm", "llama2-7b", "--phase", "decode", "--batch", "4",
                 "--seq-in", "512", "--seq-out", "64", "--precision", "bf16", "-f", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["feasible"] is True and doc["reason"] is None
    assert set(doc["metrics"]) == {"step_time_s", "latency_s", "ttft_s", "tpot_s",
                                   "decode_tokens_per_s",
                                   "output_tokens_per_s", "samples_per_s",
                                   "achieved_flop_per_s", "tokens_per_s_per_chip",
                                   "power_per_chip_w", "clock_hz", "energy_per_token_j",
                                   "energy_per_sample_j", "energy_per_step_j",
                                   "area_per_chip_mm2", "cost_per_chip_usd", "cost_usd",
                                   "memory_per_chip_bytes"}
    assert doc["metrics"]["ttft_s"] is None and doc["metrics"]["samples_per_s"] is None
    # Power and energy per token come with the spec's process node (n4).
    m = doc["metrics"]
    assert 50 < m["power_per_chip_w"] <= 700 and doc["power_limited"] is False
    assert m["energy_per_token_j"] == pytest.approx(
        m["power_per_chip_w"] / m["output_tokens_per_s"], rel=1e-9)
    assert m["energy_per_sample_j"] is None and doc["power_note"] is None
    assert doc["metrics"]["output_tokens_per_s"] == pytest.approx(
        4 * doc["metrics"]["decode_tokens_per_s"])
    op = doc["ops"][0]
    assert set(op) == {"name", "count", "flops", "bytes", "time_s", "bound"}
    assert set(op["bytes"]) == {"L1", "L2", "HBM3"}
    times = [o["time_s"] for o in doc["ops"]]
    assert times == sorted(times, reverse=True)
    # The step time (all 64 tokens: the request's latency) is the sum of the operators' times.
    assert sum(times) == pytest.approx(doc["metrics"]["step_time_s"], rel=1e-9)
    assert doc["metrics"]["latency_s"] == doc["metrics"]["step_time_s"] == pytest.approx(
        64 * doc["metrics"]["tpot_s"], rel=1e-12)


def test_csv_has_one_row_per_design_and_ops_one_per_operator():
    result = run("eval", "a100-sxm-80gb", "gemm:4096x4096x4096", "-f", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 1 and rows[0]["feasible"] == "True"
    assert float(rows[0]["achieved_flop_per_s"]) > 1e14
    result = run("eval", "a100-sxm-80gb", "gemm:4096x4096x4096", "-f", "csv", "--ops")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 1 and rows[0]["operator"] == "gemm" and rows[0]["bound"] == "compute"


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


def test_infeasible_design_is_reported_in_full_then_exits_three():
    result = run("eval", "h100-sxm", "llama2-70b", "--precision", "bf16")
    assert result.exit_code == 3, result.output
    assert "infeasible: weights" in result.stdout and "short" in result.stdout
    result = run("eval", "h100-sxm", "llama2-70b", "--precision", "bf16", "-f", "json")
    assert result.exit_code == 3
    doc = json.loads(result.stdout)
    assert doc["feasible"] is False and "short" in doc["reason"]
    assert doc["metrics"]["latency_s"] is None


def test_die_beyond_the_reticle_exits_three_unless_no_reticle():
    args = ("eval", "h100-sxm", "llama2-7b", "--set", "compute.units=264")
    result = run(*args, "-f", "json")
    assert result.exit_code == 3, result.output
    doc = json.loads(result.stdout)
    assert doc["feasible"] is False and "reticle" in doc["reason"]
    result = run(*args, "--no-reticle", "-f", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["feasible"] is True
    assert "3 a design is infeasible" in " ".join(run("eval", "--help").stdout.split())


def test_one_infeasible_design_of_several_exits_three_after_every_row():
    result = run("eval", "h100-sxm", "llama2-7b", "--set", "compute.units=66,264", "-f", "csv")
    assert result.exit_code == 3, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["feasible"] for r in rows] == ["True", "False"]
    assert "reticle" in rows[1]["reason"]


def test_grid_of_two_batches_and_two_lengths_gives_four_rows():
    result = run("eval", "h100-sxm", "llama2-7b", "--batch", "1,8", "--seq-in", "128,256",
                 "--grid", "-f", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["batch"], r["seq_in"]) for r in rows] == [
        ("1", "128"), ("1", "256"), ("8", "128"), ("8", "256")]
    cols = list(rows[0])
    for col in ("batch", "seq_in", "seq_out", "feasible", "reason", "latency_s",
                "output_tokens_per_s", "tokens_per_s_per_chip", "power_per_chip_w",
                "memory_per_chip_HBM3_bytes", "memory_per_chip_L2_bytes"):
        assert col in cols, col
    assert cols.index("seq_out") < cols.index("feasible") < cols.index("latency_s")
    tokens = [float(r["output_tokens_per_s"]) for r in rows]
    assert tokens[2] > 4 * tokens[0]  # batch 8 makes more tokens than batch 1


def test_zip_is_the_default_and_pairs_a_set_list_with_a_batch_list():
    result = run("eval", "h100-sxm", "llama2-7b", "--batch", "1,8",
                 "--set", "memory.HBM3.bandwidth=2TB/s,4TB/s", "-f", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["batch"], float(r["memory.HBM3.bandwidth_bytes_per_s"])) for r in rows] == [
        ("1", 2e12), ("8", 4e12)]
    zipped = run("eval", "h100-sxm", "llama2-7b", "--batch", "1,8",
                 "--set", "memory.HBM3.bandwidth=2TB/s,4TB/s", "--zip", "-f", "csv")
    assert zipped.stdout == result.stdout
    grid = run("eval", "h100-sxm", "llama2-7b", "--batch", "1,8",
               "--set", "memory.HBM3.bandwidth=2TB/s,4TB/s", "--grid", "-f", "csv")
    assert len(list(csv.DictReader(io.StringIO(grid.stdout)))) == 4


def test_zip_of_unequal_lengths_is_one_line_exit_two():
    result = run("eval", "h100-sxm", "llama2-7b", "--batch", "1,2", "--seq-in", "64,128,256")
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "--batch has 2" in result.output and "--seq-in has 3" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_warnings_go_to_stderr_in_every_format(fmt):
    result = run("eval", "h100-sxm", "llama2-7b", "--seq-in", "100000", "-f", fmt)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(lines) == 1 and "exceed the model's context of 4096" in lines[0]
    assert "warning:" not in result.stdout
    if fmt == "json":
        assert json.loads(result.stdout)["warnings"] == [lines[0].removeprefix("warning: ")]


def test_sweep_table_reads_at_120_columns():
    result = run("eval", "h100-sxm", "llama2-7b", "--phase", "serve", "--batch", "8,max",
                 "--set", "memory.HBM3.bandwidth=2TB/s,4TB/s",
                 "--set", "compute.matrix.achievable.fraction=0.5,0.7",
                 "--set", "memory.L2.capacity=50MiB,100MiB", "--grid")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 120
    assert "\u2026" not in result.stdout and "..." not in result.stdout
    for text in ("tokens/s", "per chip", "power", "feasible", "4 TB/s", "100 MiB", "0.7",
                 "max", "16 designs, varying --batch x --set memory.HBM3.bandwidth"):
        assert text in result.stdout, text
    body = [line for line in lines if re.match(r"\s*\d+\s+(8|max \d+)\s", line)]
    assert len(body) == 16 and all(line.rstrip().endswith("yes") for line in body)


def test_ops_gives_the_operators_of_every_design_in_long_form():
    args = ("eval", "h100-sxm", "llama2-7b", "--seq-in", "128,1024", "--ops")
    rows = list(csv.DictReader(io.StringIO(run(*args, "-f", "csv").stdout)))
    per_design = len(rows) // 2
    assert per_design > 5 and len(rows) == 2 * per_design
    assert {"design", "seq_in", "operator", "count", "time_s", "share", "bound", "flops",
            "bytes_L1", "bytes_L2", "bytes_HBM3"} <= set(rows[0])
    assert {r["seq_in"] for r in rows if r["design"] == "1"} == {"1024"}
    records = json.loads(run(*args, "-f", "json").stdout)
    assert len(records) == len(rows) and records[0]["operator"] == rows[0]["operator"]
    table = run(*args, "--top", "3")
    assert table.exit_code == 0, table.output
    assert "operators, longest 3 of each design" in table.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--set", "memory.L3.capacity=1GiB"], "has no memory level"),
    (["--set", "memory.HBM3.capacity=fast"], "--set memory.HBM3.capacity"),
    (["--set", "compute.nonsense=1"], "not a field that can be varied"),
    (["--set", "compute.units"], "expected dotted.path=value"),
    (["--chips", "3", "--tp", "2"], "not a multiple of tp x pp"),
    (["--batch", "lots"], "--batch: expected a whole number or max"),
    (["--batch", "1,x"], "--batch: expected a whole number or max"),
    (["--seq-in", "12a"], "--seq-in: expected a whole number"),
    (["--scenario", "nope"], "unknown scenario 'nope'"),
    (["--phase", "training", "--precision", "int8"], "--precision: int8: training runs"),
])
def test_bad_options_exit_two_with_one_line(args, message):
    result = run("eval", "h100-sxm", "llama2-7b", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_sixty_hbm_stacks_are_pad_limited_past_the_reticle():
    """60 stacks need ~800 mm of die edge: the die is padded to ~40,000 mm2, beyond the
    reticle, so the design is infeasible (it was reported feasible before)."""
    result = run("eval", "h100-sxm", "llama2-70b", "--chips", "2", "--tp", "2",
                 "--set", "memory.HBM3.stacks=60", "-f", "json")
    assert result.exit_code == 3
    doc = json.loads(result.stdout)
    assert doc["feasible"] is False
    assert "pad-limited" in doc["reason"] and "reticle" in doc["reason"]


def test_area_budget_makes_larger_dies_infeasible():
    result = run("eval", "h100-sxm", "llama2-70b", "--chips", "2", "--tp", "2",
                 "--area-budget", "700 mm2", "--set", "compute.units=100,132", "-f", "csv")
    assert result.exit_code == 3
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["feasible"] for r in rows] == ["True", "False"]
    assert "exceeds the area budget of 700 mm2" in rows[1]["reason"]
    bad = run("eval", "h100-sxm", "llama2-70b", "--area-budget", "700")
    assert bad.exit_code == 2 and "--area-budget" in bad.output
    no_node = run("eval", "cerebras-wse3", "llama2-7b", "--area-budget", "700 mm2")
    assert no_node.exit_code == 2 and "area budget needs the area model" in no_node.output


def test_a_power_limited_design_shows_its_clock():
    result = run("eval", "h100-sxm", "gemm:8192x8192x8192", "--set", "tdp=400W")
    assert result.exit_code == 0, result.output
    assert "core clock lowered to fit the TDP, 1.4" in result.stdout
    doc = json.loads(run("eval", "h100-sxm", "gemm:8192x8192x8192", "--set", "tdp=400W",
                         "-f", "json").stdout)
    assert doc["power_limited"] is True and 1.3e9 < doc["metrics"]["clock_hz"] < 1.83e9


def test_ops_table_names_every_option_given_and_the_stacks_engine():
    """--ops with scenario fields beyond the first ones (stack, sparsity, kv precision) once
    failed in the table's heading; the heading names the engine the stack ran, not the
    schema default."""
    table = run("eval", "mi300x", "llama3-70b", "--phase", "serve", "--batch", "max",
                "--seq-in", "128", "--seq-out", "256", "--precision", "fp8",
                "--kv-precision", "fp8", "--chips", "8", "--tp", "8", "--stack", "vllm-rocm",
                "--ops", "--top", "3")
    assert table.exit_code == 0, table.output
    assert "--stack vllm-rocm" in table.stdout and "stack: vllm-rocm" in table.stdout
    assert "16-token blocks" in table.stdout and "(default)" not in table.stdout
    rows = list(csv.DictReader(io.StringIO(run(
        "eval", "h100-sxm", "llama2-7b", "--sparsity", "2:4", "--stack", "vllm-cuda",
        "-f", "csv").stdout)))
    assert len(rows) == 1 and (rows[0]["sparsity"], rows[0]["stack"]) == ("2:4", "vllm-cuda")
