"""Issue 26 item 4: one source for the scenario fields (dse.spec.scenario_fields), derived
from the Scenario schema, and every simple field reachable on every route: the command
line, dse.evaluate, a study's workload entry, a measurements CSV and a sweep."""

from __future__ import annotations

import inspect
import json
import textwrap
import typing

import pytest
import typer.main
from typer.testing import CliRunner

import dse
from dse import phases, sweep, validate
from dse.cli import app
from dse.search.space import load_study
from dse.spec import scenario_fields as sf
from dse.spec.study import StudyWorkload
from dse.spec.workload import Phase, Scenario

runner = CliRunner()
H100 = dse.load_hardware("h100-sxm")
LLAMA = dse.load_workload("llama2-7b")
# The commands that set scenario fields, by route name (scenario_fields.NOT_ON).
COMMANDS = {"cli:eval": ("eval",), "cli:workload": ("workload",),
            "cli:memory": ("memory",), "cli:plot roofline": ("plot", "roofline"),
            "cli:plot breakdown": ("plot", "breakdown")}


def _options(path: tuple[str, ...]) -> set[str]:
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    return {o for p in command.params if p.param_type_name == "option" for o in p.opts}


def test_the_fields_are_the_schemas():
    """Every field of Scenario, in its order, with its type, default and description."""
    assert list(sf.FIELDS) == list(Scenario.model_fields)
    for name, f in sf.FIELDS.items():
        info = Scenario.model_fields[name]
        assert (f.annotation, f.default, f.description) == (info.annotation, info.default,
                                                            info.description)
    # stack: the software stack (issue 27), a name or a path
    assert sf.SIMPLE == ("phase", "batch", "latency_target", "seq_in", "seq_out",
                         "precision", "kv_precision", "sparsity", "stack")
    assert set(sf.YAML_ONLY) == {"engine", "training", "lengths"}
    assert all(sf.YAML_ONLY.values())  # each with its reason
    assert sf.FIELDS["latency_target"].unit == "s" and sf.FIELDS["seq_in"].unit is None
    assert sf.FIELDS["phase"].words == phases.names()
    assert sf.FIELDS["batch"].words == ("max", "best")
    f = sf.FIELDS["seq_out"]
    assert (f.yaml_key, f.option, f.keyword, f.study_field, f.column) == (
        "seq_out", "--seq-out", "seq_out", "seq_out", "seq_out")
    assert sf.field_of_option("--kv-precision") == "kv_precision"
    assert sf.field_of_option("--chips") is None and sf.field_of_option("seq_in") is None
    assert sf.FIELDS["kv_precision"].help.startswith("KV-cache data type")


def test_the_exceptions_name_simple_fields_and_known_routes():
    routes = {*COMMANDS, "api", "study", "csv"}
    for (route, field), why in sf.NOT_ON.items():
        assert route in routes and field in sf.SIMPLE and why, (route, field)


@pytest.mark.parametrize("route", sorted(COMMANDS))
def test_every_simple_field_is_an_option_of_every_scenario_command(route):
    """Fails when a field is reachable on one route and not on this command, unless the
    field is YAML-only or the command is excused in NOT_ON with a reason."""
    options = _options(COMMANDS[route])
    for name in sf.SIMPLE:
        if (route, name) not in sf.NOT_ON:
            assert sf.option(name) in options, (route, name)
        else:
            assert sf.option(name) not in options, f"{route} takes {name}: drop NOT_ON"
    for option in options:  # no option for a YAML-only field
        field = sf.field_of_option(option)
        assert field is None or field in sf.SIMPLE, (route, option)


def test_every_simple_field_is_a_keyword_of_evaluate():
    params = inspect.signature(dse.evaluate).parameters
    for name in sf.SIMPLE:
        assert ("api", name) in sf.NOT_ON or sf.FIELDS[name].keyword in params, name
    assert not set(sf.YAML_ONLY) & set(params)


def test_every_simple_field_is_a_study_workload_field_of_the_schemas_type():
    fields = StudyWorkload.model_fields
    for name in sf.SIMPLE:
        assert sf.FIELDS[name].study_field in fields, name
        assert fields[name].default is None  # left out: the scenario's own value
    assert typing.get_args(fields["phase"].annotation)[0] is Phase or \
        fields["phase"].annotation == Phase | None
    assert set(typing.get_args(fields["kv_precision"].annotation)) == set(
        typing.get_args(Scenario.model_fields["kv_precision"].annotation))


def test_csv_columns_and_sweep_fields_come_from_the_fields():
    assert sweep.SCENARIO_FIELDS == sf.SIMPLE
    csv = [n for n in sf.SIMPLE if ("csv", n) not in sf.NOT_ON]
    assert tuple(csv) == validate.SCENARIO_COLUMNS
    assert set(csv) == set(validate.COLUMNS[6:-2]) | set(validate.OPTIONAL_COLUMNS)


def test_kv_precision_on_the_command_line():
    """--kv-precision fp8 halves the KV cache of a bf16 decode: as the API and YAML do."""
    args = ["eval", "h100-sxm", "llama2-7b", "--phase", "decode", "--batch", "32",
            "-f", "json"]
    bf16 = runner.invoke(app, args)
    fp8 = runner.invoke(app, [*args, "--kv-precision", "fp8"])
    assert bf16.exit_code == fp8.exit_code == 0, fp8.output
    a, b = json.loads(bf16.stdout), json.loads(fp8.stdout)
    assert b["scenario"]["description"].endswith("bf16 (KV fp8)")
    api = dse.evaluate(H100, LLAMA, phase="decode", batch=32, kv_precision="fp8")
    base = dse.evaluate(H100, LLAMA, phase="decode", batch=32)
    assert api.metrics["latency_s"][0] < base.metrics["latency_s"][0]  # fewer KV bytes
    assert b["metrics"]["latency_s"] < a["metrics"]["latency_s"]
    hbm = "HBM3"  # the KV cache halves: chat-decode's 5 + 200 tokens of 32 sequences, 32
    kv = 32 * (5 + 200) * 32 * 2 * 4096  # layers, K and V of 4096: one byte fewer each
    assert a["metrics"]["memory_per_chip_bytes"][hbm] - b["metrics"]["memory_per_chip_bytes"][
        hbm] == pytest.approx(kv, rel=0.05)
    bad = runner.invoke(app, [*args, "--kv-precision", "int3"])
    assert bad.exit_code == 2
    assert bad.stderr.startswith("--kv-precision: unknown value 'int3'; expected one of: "), \
        bad.stderr
    lowered = runner.invoke(app, ["workload", "llama2-7b", "--phase", "decode",
                                  "--kv-precision", "fp8", "-f", "json"])
    assert lowered.exit_code == 0 and "(KV fp8)" in lowered.stdout, lowered.output


def test_latency_target_on_the_command_line_and_the_api():
    args = ["eval", "h100-sxm", "llama2-7b", "--phase", "serve", "--batch", "best",
            "-f", "json"]
    free = json.loads(runner.invoke(app, args).stdout)
    tight = runner.invoke(app, [*args, "--latency-target", "15 ms"])
    assert tight.exit_code == 0, tight.output
    api = dse.evaluate(H100, LLAMA, phase="serve", batch="best", latency_target="15 ms")
    assert json.loads(tight.stdout)["metrics"]["tpot_s"] <= 15e-3 < free["metrics"]["tpot_s"]
    assert api.metrics["tpot_s"][0] <= 15e-3
    bare = runner.invoke(app, [*args, "--latency-target", "15"])
    assert bare.exit_code == 2 and bare.stderr.startswith("--latency-target: "), bare.stderr
    assert "unit" in bare.stderr and len(bare.stderr.splitlines()) == 1
    alone = runner.invoke(app, ["eval", "h100-sxm", "llama2-7b", "--phase", "decode",
                                "--latency-target", "15 ms"])
    assert alone.exit_code == 2
    assert alone.stderr.strip() == "--latency-target: latency_target goes with batch 'best'"


def _study(tmp_path, workload: str):
    f = tmp_path / "s.yaml"
    f.write_text(textwrap.dedent("""\
        source: test
        base: h100-sxm
        parameters:
          compute.units: {low: 66, high: 132}
        workloads:
        """) + workload + "\nobjectives:\n  t: {maximize: throughput}\n")
    return f


def test_a_study_workload_takes_kv_precision_and_latency_target(tmp_path):
    study = load_study(_study(tmp_path, "  w: {workload: llama2-7b, phase: serve, batch: "
                                        "best, kv_precision: fp8, latency_target: 20 ms}"))
    job = study.jobs["w"]
    assert job.fields["kv_precision"] == "fp8" and job.resolved.kv_precision == "fp8"
    assert job.resolved.latency_target == pytest.approx(0.02)


def test_a_measurements_row_takes_kv_precision(tmp_path):
    """kv_precision is an optional column: empty or absent, the scenario's own."""
    head = ",".join((*validate.COLUMNS[:-2], "kv_precision", *validate.COLUMNS[-2:]))
    row = "M{i},h100-sxm,1,1,1,llama2-7b,decode,bf16,32,1024,128,{kv},output_tokens_per_s,1000"
    f = tmp_path / "m.csv"
    f.write_text("\n".join([head, row.format(i=1, kv=""), row.format(i=2, kv="fp8")]) + "\n")
    rows = validate.run(f)
    assert rows[1].predicted > rows[0].predicted  # fewer KV bytes to read per token
    plain = tmp_path / "plain.csv"  # a file written before the column existed
    plain.write_text(",".join(validate.COLUMNS) + "\n" + row.format(i=1, kv="").replace(
        ",,", ",") + "\n")
    assert validate.run(plain)[0].predicted == pytest.approx(rows[0].predicted)
