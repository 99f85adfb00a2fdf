"""One error format everywhere (issue 15, item 4).

Every problem is one line, naming what is wrong first: `file:line:col: key.path: message` for
files, `--option: message` for flags, `dse CMD: ...` for a command line that does not parse;
in the project's words (never pydantic's "Input should be ..."), with the documented exit
code (2 bad input, 3 infeasible, 1 only for a bug) and no traceback. The reproducers U1-U4
of shared/repro (copied to data/), the usage errors of every command, values and file names
with line breaks, and the translation of every pydantic error type.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from pydantic import BaseModel, ValidationError
from running import Ran, checkout_env
from typer.testing import CliRunner

import dse
from dse.check import check_file
from dse.cli import app
from dse.errors import DseError, Issue, SpecError, one_line
from dse.spec.messages import describe

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
PYDANTIC_WORDS = ("Input should", "Field required", "Extra inputs", "Value error",
                  "should have at", "String should", "valid integer", "[type=")
runner = CliRunner()


def dse_cli(*args: str | Path, env: dict[str, str] | None = None) -> Ran:
    """`dse ARGS` in this process, through Typer's test runner."""
    r = runner.invoke(app, [str(a) for a in args], env=env)
    return Ran(r.exit_code, r.stdout, r.stderr)


def dse_subprocess(*args: str, cwd: Path = DATA, **kwargs) -> subprocess.CompletedProcess:
    """`python -m dse ARGS` from this checkout (the real entry point, not the test runner)."""
    return subprocess.run([sys.executable, "-m", "dse", *args], cwd=cwd, env=checkout_env(),
                          capture_output=True, text=True, timeout=120, **kwargs)


def one_error(ran: Ran, first: str, code: int = 2) -> str:
    """The single line a failed run printed: exit `code`, exactly one line on stderr (and
    nothing that looks like a traceback or pydantic's words), starting with `first`."""
    text = ran.stdout + ran.stderr
    assert "Traceback" not in text, text
    assert not any(w in text for w in PYDANTIC_WORDS), text
    assert ran.code == code, (ran.code, text)
    lines = ran.stderr.splitlines()
    assert len(lines) == 1, ran.stderr
    assert lines[0].startswith(first), lines[0]
    return lines[0]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- the reproducers ----------------------------------------------------------------------

def test_readme_what_if_is_accepted():
    """U1: the docs' what-if (guide/hardware.md) (96 SMs, 192 MiB L2) was rejected at a line of the
    shipped h100-sxm.yaml; it checks and evaluates."""
    path = DATA / "U1_readme_whatif.yaml"
    ran = dse_cli("check", path)
    assert ran.code == 0 and ran.stdout.strip() == f"{path}: ok (hardware)", ran
    ran = dse_cli("eval", path, "llama2-7b", "--format", "json")
    assert ran.code == 0, ran.stderr


@pytest.mark.parametrize("command", ["check", "eval", "show"])
def test_nan_where_a_whole_number_belongs(command):
    """U2: `.nan` for a count read pydantic's 'Input should be a finite number'."""
    path = DATA / "U2_nan_int.yaml"
    args = [command, path] + (["llama2-7b"] if command == "eval" else [])
    line = one_error(dse_cli(*args), f"{path}:3:32: interconnect.chips_per_node: ")
    assert line.endswith("expected a whole number, found nan"), line


@pytest.mark.parametrize("command", ["check", "eval"])
def test_a_value_with_a_newline_stays_on_one_line(command):
    """U3: the value "line1\\nline2" printed the problem over two lines."""
    path = DATA / "U3_newline_value.yaml"
    args = [command, path] + (["llama2-7b"] if command == "eval" else [])
    line = one_error(dse_cli(*args), f"{path}:4:27: compute.matrix.register_file: ")
    assert "'line1\\nline2'" in line, line


def test_check_catches_what_eval_rejects():
    """U4: `dse check` said ok and `dse eval` failed without a file:line; both now report the
    same line, in the user's file."""
    path = DATA / "U4_check_ok_eval_fails.yaml"
    expected = (f"{path}:25:5: memory[3]: the area model needs the number of lpddr5x "
                "channels of this level")
    checked = one_error(dse_cli("check", path), expected)
    evaluated = one_error(dse_cli("eval", path, "llama2-7b"), expected)
    assert checked == evaluated


def test_an_inherited_value_is_reported_in_the_users_file(tmp_path):
    """A derived design that breaks a value it inherits (a per-cycle bandwidth of h100-sxm
    once the clock is gone) is reported in the user's file, at the nearest key it writes
    (else at its base:), with the shipped file's line as context only."""
    no_level = write(tmp_path / "noclock.yaml", "base: h100-sxm\nsource: x\n"
                                                "compute: {clock: null}\n")
    with pytest.raises(SpecError) as e:
        check_file(no_level)
    inherited = [i for i in e.value.issues if i.path == "memory[0].bandwidth"]
    assert len(inherited) == 1
    line = str(inherited[0])
    assert line.startswith(f"{no_level}:1:7: memory[0].bandwidth: '128 B/cycle' is per cycle")
    shipped = (ROOT / "hwspecs" / "h100-sxm.yaml").read_text().splitlines()
    at = next(i for i, x in enumerate(shipped, 1) if "bandwidth: 128 B/cycle" in x)
    assert line.endswith(f"(inherited from shipped hwspecs/h100-sxm.yaml:{at}:16)"), line
    assert all(i.file == str(no_level) for i in e.value.issues)

    level = write(tmp_path / "level.yaml", "base: h100-sxm\nsource: x\nmemory:\n"
                                           "  - {name: L2, capacity: 96 MiB}\n"
                                           "compute: {clock: null}\n")
    with pytest.raises(SpecError) as e:
        check_file(level)
    line = next(str(i) for i in e.value.issues if i.path == "memory[0].bandwidth")
    assert line.startswith(f"{level}:4:3: memory[0].bandwidth: "), line  # at its memory:


def test_file_names_with_line_breaks_stay_on_one_line(tmp_path):
    bad = write(tmp_path / "bad\nname.yaml", "base: h100-sxm\nsource: x\nbogus: 1\n")
    line = one_error(dse_cli("check", bad), f"{tmp_path}/bad\\nname.yaml:3:1: bogus: ")
    assert "bogus: unknown key; expected one of: base, compute" in line, line
    ok = write(tmp_path / "ok\tname.yaml", "base: h100-sxm\nsource: x\n")
    ran = dse_cli("check", ok)
    assert ran.code == 0 and ran.stdout.strip() == f"{tmp_path}/ok\\tname.yaml: ok (hardware)"


def test_control_characters_in_flags_are_escaped():
    line = one_error(dse_cli("eval", "h100-sxm", "llama2-7b", "--set",
                             "compute.units=\x1b[31m\n2"), "--set compute.units: ")
    assert "\x1b" not in line and "\\x1b[31m\\n2" in line, line
    line = one_error(dse_cli("eval", "h100-sxm", "llama2-7b", "--precision", "a\u2028b"),
                     "--precision: unknown value 'a\\u2028b'")


def test_one_line_escapes_what_breaks_a_line_or_drives_the_terminal():
    assert one_line("plain, with spaces and é ü 中文") == "plain, with spaces and é ü 中文"
    assert one_line("a\nb\rc\td") == "a\\nb\\rc\\td"
    assert one_line("\x1b[2J\x00\x7f\x85") == "\\x1b[2J\\x00\\x7f\\x85"
    assert one_line("x\u2028y\u2029z\u202ew") == "x\\u2028y\\u2029z\\u202ew"
    assert one_line("file\udcff.yaml") == "file\\udcff.yaml"  # an undecodable byte
    assert str(Issue("a\nb.yaml", 1, 2, "k", "found 'x\ny'")) == "a\\nb.yaml:1:2: k: found 'x\\ny'"
    assert str(DseError("--set a: found 'x\ny'")) == "--set a: found 'x\\ny'"
    two = SpecError([Issue("f.yaml", 2, 1, "b", "m\n2"), Issue("f.yaml", 1, 1, "a", "m1")])
    assert str(two).splitlines() == two.lines() == ["f.yaml:1:1: a: m1", "f.yaml:2:1: b: m\\n2"]


# --- usage errors of the parser -----------------------------------------------------------

COMMANDS = [["check"], ["show"], ["workload"], ["eval"], ["validate"], ["area"], ["list"],
            ["dashboard"], ["study"], ["memory"], ["plot", "roofline"], ["plot", "breakdown"],
            ["plot", "trends"], ["plot", "pareto"]]
# (command, its required arguments' metavars) for commands with required arguments
MISSING = [(["check"], "PATHS"), (["show"], "HARDWARE"), (["workload"], "NAME"),
           (["eval", "h100-sxm"], "WORKLOAD"), (["area"], "HARDWARE"),
           (["dashboard"], "TARGET"), (["study"], "FILE"), (["memory", "h100-sxm"], "WORKLOAD"),
           (["plot", "roofline"], "HARDWARE"), (["plot", "breakdown", "h100-sxm"], "WORKLOAD"),
           (["plot", "pareto"], "DIR")]
# (arguments, the flag given a value of the wrong type, what the line says)
BAD_VALUES = [
    (["eval", "h100-sxm", "llama2-7b", "--chips", "x"], "--chips",
     "expected a whole number, found 'x'"),
    (["eval", "h100-sxm", "llama2-7b", "--tp", "1.5"], "--tp",
     "expected a whole number, found '1.5'"),
    (["eval", "h100-sxm", "llama2-7b", "--top", "1e3"], "--top",
     "expected a whole number, found '1e3'"),
    (["eval", "h100-sxm", "llama2-7b", "--format", "xml"], "--format",
     "expected one of: table, json, csv, found 'xml'"),
    (["show", "h100-sxm", "-f", "jsn"], "--format",
     "expected one of: table, yaml, json, found 'jsn'; did you mean json?"),
    (["workload", "llama2-7b", "--format", "x"], "--format", "expected one of: "),
    (["validate", "--format", "csv"], "--format", "expected one of: table, yaml, json"),
    (["area", "h100-sxm", "--format", "x"], "--format", "expected one of: "),
    (["dashboard", "runs/x", "--port", "http"], "--port",
     "expected a whole number, found 'http'"),
    (["dashboard", "runs/x", "--port", "70000"], "--port",
     "expected a whole number from 0 to 65535, found 70000"),  # OverflowError, exit 1 before
    (["study", "middle-ground", "--seed", "9" * 40], "--seed",
     "expected a whole number from 0 to 4294967295"),  # numpy's ValueError, exit 1 before
    (["study", "middle-ground", "--trials", "many"], "--trials",
     "expected a whole number, found 'many'"),
    (["memory", "h100-sxm", "llama2-7b", "--format", "x"], "--format", ""),
    (["plot", "roofline", "h100-sxm", "--chips", "two"], "--chips",
     "expected a whole number, found 'two'"),
    (["plot", "breakdown", "h100-sxm", "llama2-7b", "--top", "-"], "--top", "expected"),
    (["eval", "h100-sxm", "llama2-7b", "--chips"], "--chips", "expected a value after it"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_unknown_option(command):
    name = " ".join(command)
    line = one_error(dse_cli(*command, "--bogus-option", "1"),
                     f"--bogus-option: no such option of dse {name}")
    assert "--help" in line or "did you mean" in line


def test_unknown_option_suggests_the_closest():
    one_error(dse_cli("eval", "--chipz", "2", "h100-sxm", "llama2-7b"),
              "--chipz: no such option of dse eval; did you mean --chips?")
    one_error(dse_cli("--verison"), "--verison: no such option of dse; did you mean --version?")


@pytest.mark.parametrize(("command", "metavar"), MISSING, ids=lambda x: " ".join(x)
                         if isinstance(x, list) else x)
def test_missing_argument(command, metavar):
    name = "dse " + " ".join(c for c in command if c != "h100-sxm")
    line = one_error(dse_cli(*command), f"{name}: missing argument {metavar}")
    assert line.endswith(f"(see {name} --help)"), line


@pytest.mark.parametrize(("args", "flag", "says"), BAD_VALUES, ids=lambda x: x
                         if isinstance(x, str) else None)
def test_bad_value_type(args, flag, says):
    line = one_error(dse_cli(*args), f"{flag}: ")
    assert says in line, line


@pytest.mark.parametrize(("args", "expected"), [
    (["evl", "h100-sxm"], "dse evl: no such command; did you mean eval?"),
    (["frobnicate"], "dse frobnicate: no such command; expected one of: check, show, "),
    (["plot", "rooflin", "h100-sxm"], "dse plot rooflin: no such command; did you mean "
                                      "roofline?"),
    (["eval", "h100-sxm", "llama2-7b", "extra"], "dse eval: unexpected extra argument(s) "
                                                 "extra (see dse eval --help)"),
])
def test_unknown_command_and_extra_arguments(args, expected):
    one_error(dse_cli(*args), expected)


def test_every_command_is_covered():
    """The tables above name every command (a new command gets its usage errors tested)."""
    root = typer.main.get_command(app)

    def walk(cmd, path):
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, [*path, name]) if hasattr(sub, "commands") else [[*path, name]]

    assert sorted(walk(root, [])) == sorted(COMMANDS)


def test_usage_errors_through_the_real_entry_point():
    """`python -m dse` (and the console script, the same `main`) prints the same one line;
    help is unchanged, and `dse` or `dse plot` alone print it with exit 0."""
    r = dse_subprocess("eval", "h100-sxm")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == "dse eval: missing argument WORKLOAD (see dse eval --help)\n"
    r = dse_subprocess("eval", "--help")
    assert r.returncode == 0 and "Usage: dse eval [OPTIONS]" in r.stdout and r.stderr == ""
    for group in ((), ("plot",)):  # no command: the help, which was asked for
        r = dse_subprocess(*group)
        assert r.returncode == 0 and r.stderr == "", r
        assert f"Usage: dse {' '.join(group)}".rstrip() + " [OPTIONS] COMMAND" in r.stdout
    r = dse_subprocess("--version")
    assert r.returncode == 0 and r.stdout == f"dse {dse.__version__}\n"


# --- exit codes ---------------------------------------------------------------------------

def test_infeasible_is_3_and_bad_input_is_2():
    ran = dse_cli("eval", "h100-sxm", "llama3-405b", "--format", "json")
    assert ran.code == 3 and "Traceback" not in ran.stderr
    one_error(dse_cli("eval", "h100-sxm", "llama2-7b", "--chips", "0"), "--chips: ")


def test_an_unwritable_output_is_bad_input_not_a_bug(tmp_path):
    """`dse area --plot` into a missing folder or with another extension was an internal
    error (exit 1: FileNotFoundError, matplotlib's ValueError)."""
    missing = tmp_path / "missing" / "x.png"
    one_error(dse_cli("area", "h100-sxm", "--plot", missing),
              f"--plot {missing}: folder '{missing.parent}' does not exist")
    one_error(dse_cli("area", "h100-sxm", "--plot", tmp_path / "x.bmp"),
              f"--plot {tmp_path / 'x.bmp'}: expected a .png, .svg or .pdf file")


def test_os_errors_naming_a_file_are_bad_input(monkeypatch):
    """Permission denied, a full disk: the file and the reason, exit 2."""
    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/data/out.csv")

    monkeypatch.setattr("dse.spec.load.library_names", denied)
    one_error(dse_cli("list"), "/data/out.csv: permission denied")


def test_a_bug_is_exit_1_with_the_traceback_only_under_dse_debug(monkeypatch):
    def bug(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("dse.spec.load.library_names", bug)
    one_error(dse_cli("list"), "internal error: ZeroDivisionError: division by zero (set "
                               "DSE_DEBUG=1 for details)", code=1)
    r = runner.invoke(app, ["list"], env={"DSE_DEBUG": "1"})
    assert r.exit_code == 1 and isinstance(r.exception, ZeroDivisionError)


def test_a_closed_pipe_ends_quietly():
    """`dse list workload | head -1` printed 'internal error: BrokenPipeError' (exit 1)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DSE_DEBUG", None)
    p = subprocess.Popen([sys.executable, "-m", "dse", "show", "h100-sxm", "--paths",
                          "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) in (0, 141) and err == "", err


# --- pydantic's errors in the project's words ----------------------------------------------

def _all_error_types() -> list[dict]:
    from pydantic_core._pydantic_core import list_all_errors

    return list_all_errors()


@pytest.mark.parametrize("error", _all_error_types(), ids=lambda e: e["type"])
def test_every_pydantic_error_type_is_reworded(error):
    """No error type reaches the user in pydantic's words, whatever its context."""
    ctx = {"expected": "'a' or 'b'", "gt": 0, "ge": 0, "lt": 1, "le": 1, "multiple_of": 2,
           "min_length": 1, "max_length": 2, "actual_length": 3, "pattern": "^x$",
           "class_name": "Spec", "class": "Spec", "error": "bad", "tag": "t",
           "discriminator": "kind", "expected_tags": "'a', 'b'", "field_type": "List",
           "expected_plural": "s", "attribute": "a", "method_name": "m", "encoding": "utf-8",
           "encoding_error": "e", "max_digits": 1, "decimal_places": 1, "whole_digits": 1,
           "expected_schemes": "'http'", "expected_version": 4, "tz_expected": 0,
           "tz_actual": 1}
    try:
        msg = error["message_template_python"].format(**ctx)
    except (KeyError, IndexError):
        msg = error["message_template_python"]
    text = describe({"type": error["type"], "loc": ("k",), "msg": msg, "input": "v",
                     "ctx": ctx})
    assert text and not any(w in text for w in PYDANTIC_WORDS), (error["type"], text)
    assert "\n" not in text


def test_a_real_validation_error_is_reworded():
    class M(BaseModel):
        n: int
        x: float
        s: list[int]

    with pytest.raises(ValidationError) as e:
        M.model_validate({"n": "many", "x": "q", "s": "no"})
    texts = [describe(err, M) for err in e.value.errors()]
    assert texts == ["expected a whole number, found 'many'", "expected a number, found 'q'",
                     "expected a list, found 'no'"]
    # our own error types (dse.spec.types) and validators keep their words
    for kind, msg in (("number_range", "expected a normal number, found 1e-320"),
                      ("quantity", "expected a capacity like '80 GiB'"),
                      ("value_error", "Value error, a cache level cannot sit outside")):
        ctx = {"msg": msg} if kind == "quantity" else {}
        assert describe({"type": kind, "loc": ("k",), "msg": msg, "input": 1, "ctx": ctx}) \
            == msg.removeprefix("Value error, ")


def test_scenario_overrides_name_the_option():
    """Through the API and the CLI alike: the option that set the field, in our words
    ('Input should be ...' and 'scenario:' before)."""
    hw, wl = dse.load_hardware("h100-sxm"), dse.load_workload("llama2-7b")
    with pytest.raises(DseError) as e:
        dse.evaluate(hw, wl, precision="fp13")
    # the API names the field as its keyword, the CLI as its option
    assert str(e.value).startswith("precision: unknown value 'fp13'; expected one of: fp32, ")
    assert e.value.field == "precision" and e.value.value == "fp13"
    one_error(dse_cli("eval", "h100-sxm", "llama2-7b", "--batch", "0"),
              "--batch: batch must be a positive whole number")
    one_error(dse_cli("workload", "llama2-7b", "--precision", "fp13"), "--precision: unknown "
                                                                      "value 'fp13'")


def test_study_problems_are_positioned(tmp_path):
    """A step of 0 (ZeroDivisionError before) and chips that tp x pp do not divide (an
    unpositioned '--chips' before) are errors at their keys in the study file."""
    import yaml

    study = yaml.safe_load((ROOT / "studies" / "middle-ground.yaml").read_text())
    study["parameters"]["interconnect.links"]["step"] = 0
    first = next(iter(study["workloads"].values()))
    first.update({"chips": 3, "tp": 2})
    path = write(tmp_path / "s.yaml", yaml.safe_dump(study, sort_keys=False))
    with pytest.raises(SpecError) as e:
        check_file(path)
    lines = e.value.lines()
    assert any(".step: expected a step > 0, found 0" in line for line in lines), lines
    assert any("chips (3) must be a multiple of tp x pp (2)" in line for line in lines), lines
    assert all(line.startswith(f"{path}:") for line in lines), lines


def test_a_study_scenario_field_is_reported_at_its_key(tmp_path):
    """A study workload's field that its scenario rejects is reported at that key, in the
    file's words (seq_out), not at its scenario with the flag's name (--seq-out)."""
    import yaml

    study = yaml.safe_load((ROOT / "studies" / "middle-ground.yaml").read_text())
    name = next(iter(study["workloads"]))
    study["workloads"][name]["seq_out"] = 0
    path = write(tmp_path / "s.yaml", yaml.safe_dump(study, sort_keys=False))
    with pytest.raises(SpecError) as e:
        check_file(path)
    [line] = e.value.lines()
    assert line.startswith(f"{path}:"), line
    assert line.split(": ", 1)[1] == (f"workloads.{name}.seq_out: phase decode needs "
                                      "seq_out >= 1 (tokens to generate)")
