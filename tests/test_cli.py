"""The command line through Typer's test runner: exit codes, formats, no tracebacks."""

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import dse
from dse.cli import app

runner = CliRunner()
DATA = Path(__file__).resolve().parent / "data"


def run(*args: str):
    return runner.invoke(app, list(args))


def test_version_and_help():
    result = run("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"dse {dse.__version__}"
    result = run("--help")
    assert result.exit_code == 0
    for command in ("check", "show", "list"):
        assert command in result.stdout


def test_check_good_files_exit_zero():
    result = run("check", str(DATA / "good" / "minimal.yaml"), str(DATA / "good" / "derived.yaml"))
    assert result.exit_code == 0, result.output
    assert result.stdout.count(": ok (hardware)") == 2


def test_check_reports_every_bad_file_and_exits_two():
    result = run("check", str(DATA / "bad" / "unknown_key.yaml"),
                 str(DATA / "bad" / "zero_capacity.yaml"), str(DATA / "good" / "minimal.yaml"))
    assert result.exit_code == 2
    assert "unknown_key.yaml:5:5: memory[1].bandwith: unknown key" in result.stderr
    assert "zero_capacity.yaml:5:15: memory[0].capacity" in result.stderr
    assert "Traceback" not in result.output
    assert "minimal.yaml: ok" in result.stdout


def test_check_missing_file():
    result = run("check", "nowhere.yaml")
    assert result.exit_code == 2
    assert "nowhere.yaml: file not found" in result.stderr


def test_check_validates_study_files(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("objectives: [latency]\nsource: t\n")
    result = run("check", str(path))
    assert result.exit_code == 2
    assert f"{path}:1:13: objectives: expected a mapping of keys" in result.stderr, result.stderr


def test_show_table():
    result = run("show", "h100-sxm")
    assert result.exit_code == 0, result.output
    for text in ("h100-sxm", "989.4 TFLOP/s", "HBM3", "3.35 TB/s", "80 GiB", "Ridge points",
                 "NVLink", "814 mm2"):
        assert text in result.stdout, text


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_show_machine_formats_are_si(fmt):
    result = run("show", "h100-sxm", "--format", fmt)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout) if fmt == "json" else yaml.safe_load(result.stdout)
    assert doc["spec"]["memory"][-1]["bandwidth"] == 3.35e12
    assert doc["derived"]["peak_flop_per_s"]["bf16"] == pytest.approx(989.4e12, rel=1e-3)
    assert doc["derived"]["levels"][-1]["ridge_flop_per_byte"]["bf16"] == pytest.approx(
        295.3, rel=1e-3)


def test_show_by_path():
    result = run("show", str(DATA / "good" / "derived.yaml"), "-f", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["spec"]["base"] == "minimal"


def test_show_unknown_name_exits_two_with_suggestion():
    result = run("show", "h100-sxn")
    assert result.exit_code == 2
    assert "unknown hardware 'h100-sxn' (did you mean h100-sxm" in result.stderr


def test_bad_option_exits_two():
    assert run("show", "h100-sxm", "--format", "xml").exit_code == 2


def test_internal_error_exits_one_without_traceback(monkeypatch):
    def boom(_name):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(dse, "load_hardware", boom)
    result = run("show", "h100-sxm")
    assert result.exit_code == 1
    assert "internal error: RuntimeError: kaboom" in result.stderr
    assert "Traceback" not in result.output


def test_list():
    result = run("list", "hardware")
    assert result.exit_code == 0
    assert "h100-sxm" in result.stdout.split()
    assert all(not line.startswith(" ") for line in result.stdout.splitlines())
    assert run("list", "gizmos").exit_code == 2


def test_list_workload_shows_every_scenario_beneath_its_model():
    result = run("list", "workload")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = lines.index("llama2-7b")
    block = []
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        block.append(line.split())
    names = [words[0] for words in block]
    assert names == list(dse.load_workload("llama2-7b").scenarios)
    assert " ".join(block[0]) == "chat-decode decode, batch 1, seq_in 5, seq_out 200, bf16 " \
        "(default)"
    assert "(default)" not in " ".join(" ".join(w) for w in block[1:])
    assert "bert-large" in lines and "  mlperf-offline" in " ".join(lines)


def test_workload_json_has_the_published_parameter_count():
    result = run("workload", "llama2-70b", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["params"] == pytest.approx(6.90e10, rel=0.01)
    assert set(doc) >= {"name", "params", "flops", "bytes", "arithmetic_intensity", "ops"}
    assert set(doc["bytes"]) >= {"weights", "activations", "kv_cache", "total"}
    assert doc["flops"] == pytest.approx(sum(op["flops"] for op in doc["ops"]))
    assert {"name", "kind", "count", "flops", "bytes"} <= set(doc["ops"][0])


def test_workload_table_and_sweep():
    result = run("workload", "gpt2", "--seq-in", "0", "--seq-out", "128,4096",
                 "--convention", "paper", "--format", "csv")
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 3 and lines[0].startswith("name,phase,batch,seq_in,seq_out")
    result = run("workload", "bert-base", "--scenario", "case-study-512")
    assert result.exit_code == 0, result.output
    assert "attn_score" in result.stdout and "arithmetic intensity" in result.stdout


def test_workload_gemm_and_errors():
    result = run("workload", "gemm:1024x1024x1024", "-f", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["flops"] == 2 * 1024**3
    for args, message in [
        (["gemm:1x2"], "expected gemm:MxNxK"),
        (["llama2-7b", "--seq-in", "12a"], "--seq-in: expected a whole number"),
        (["llama2-7b", "--convention", "nope"], "--convention: expected one of"),
        (["llama2-7b", "--phase", "decoding"], "phase"),
        (["no-such-model"], "unknown workload 'no-such-model'"),
    ]:
        result = run("workload", *args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.output


def test_workload_lists_its_scenarios_and_marks_the_one_that_ran():
    result = run("workload", "llama2-70b", "--phase", "prefill")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    marked = {line.split()[0]: line for line in lines if line.startswith("  ")}
    assert set(marked) >= set(dse.load_workload("llama2-70b").scenarios)
    assert marked["chat-decode-int8"].endswith("(default)")
    assert marked["ttft-128-fp16"].endswith("prefill, batch 1, seq_in 128, fp16 (ran)")
    assert "llama2-70b [ttft-128-fp16: prefill, batch 1, seq_in 128, fp16]" in result.stdout
    assert result.stdout.index("ttft-128-fp16") < result.stdout.index("Operators")
    doc = json.loads(run("workload", "llama2-70b", "--phase", "prefill", "-f", "json").stdout)
    assert doc["scenario"]["name"] == "ttft-128-fp16"
    assert [s["name"] for s in doc["scenarios"]] == list(
        dse.load_workload("llama2-70b").scenarios)
    assert [s["name"] for s in doc["scenarios"] if s["ran"]] == ["ttft-128-fp16"]
    assert [s["name"] for s in doc["scenarios"] if s["default"]] == ["chat-decode-int8"]


def test_workload_with_batch_max_is_shown_per_sequence():
    result = run("workload", "bert-large", "--phase", "inference", "--seq-in", "512")
    assert result.exit_code == 0, result.output
    assert "batch max depends on the hardware; shown per sequence (batch 1)" in result.stdout
    # an explicit --seq-in replaces the scenario's length distribution (issue 23)
    assert "[mlperf-offline: inference, batch 1, seq_in 512, int8]" in result.stdout
    one = json.loads(run("workload", "bert-large", "--scenario", "case-study-512",
                         "-f", "json").stdout)
    doc = json.loads(run("workload", "bert-large", "--phase", "inference", "--seq-in", "512",
                         "-f", "json").stdout)
    assert doc["scenario"]["batch"] == 1 and "batch max" in doc["note"]
    assert doc["flops"] == one["flops"]  # same model, lengths and batch: same count
    result = run("workload", "llama3-8b", "--scenario", "serve-128-2048", "-f", "csv")
    assert result.exit_code == 0, result.output


def test_show_paths_lists_the_design_vocabulary():
    result = run("show", "h100-sxm", "--paths")
    assert result.exit_code == 0, result.output
    assert "memory.HBM3.stacks" in result.output and "capacity > 0" in result.output
    doc = json.loads(run("show", "h100-sxm", "--paths", "--format", "json").output)
    rows = {r["path"]: r for r in doc["paths"]}
    assert rows["memory.HBM3.capacity"]["value"] == 80 * 2**30 and rows[
        "memory.HBM3.capacity"]["varies"]
    assert not rows["memory.HBM3.latency"]["varies"]  # no model reads it
    assert rows["compute.matrix.tile.m"]["varies"] and not rows["technology.as_built.units"][
        "varies"]
    assert rows["tdp"]["value"] == 700.0 and rows["tdp"]["unit"] == "W"


def test_workload_accepts_max_and_best_per_sequence():
    for word in ("max", "best"):
        result = run("workload", "llama2-7b", "--phase", "serve", "--batch", word)
        assert result.exit_code == 0, result.output
        assert f"batch {word} depends on the hardware" in result.output
    bad = run("workload", "llama2-7b", "--batch", "many")
    assert bad.exit_code == 2 and "expected a whole number or max or best" in bad.output


def test_check_knows_a_length_distribution_file(tmp_path):
    from dse.spec.load import library_dir

    shipped = library_dir("lengths") / "squad-v1.1.yaml"
    ok = runner.invoke(app, ["check", str(shipped)])
    assert ok.exit_code == 0 and "ok (lengths)" in ok.output, ok.output
    bad = tmp_path / "bad.yaml"
    bad.write_text(shipped.read_text().replace("features: 10833", "features: 10832"))
    result = runner.invoke(app, ["check", str(bad)])
    assert result.exit_code == 2 and "counts: the counts sum to 10833, but features says 10832" in \
        result.output, result.output


def test_help_screens_flow_docstrings_and_list_pareto_export():
    """A command's docstring is one paragraph on the help screen, wrapped to the terminal
    (its own line breaks once split `--batch, --seq-in,` over lines), and `dse plot --help`
    names the Pareto export."""
    import re

    from typer.testing import CliRunner

    from dse.cli import app

    def flat(args: list[str]) -> str:  # the screen's words, without its box and wrapping
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        return re.sub(r"[\s\u2502]+", " ", result.stdout)

    from dse.cli import plot_app

    for group in (app, plot_app):  # no line break inside a paragraph of any command's help
        for info in group.registered_commands:
            assert info.help and "\n" not in info.help.replace("\n\n", ""), info.name
    assert "Comma lists (--batch, --seq-in, --seq-out, --set) evaluate several designs" \
        in flat(["--help"])
    assert "a study's Pareto front (pareto)" in flat(["plot", "--help"])
