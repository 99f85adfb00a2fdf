"""Regression tests for the command-line findings of the third fuzzing round (issue 23, item
7; reproducers in ../shared/repro/round3/): H5 (validate rows that differ in length), T6 (a
full disk), T7 (wrong-typed keywords of dse.evaluate) and U2 (output cut short exits 141).

The output tests run `python -m dse` in a subprocess, as a user's shell does: standard
output there is a real file descriptor (/dev/full, a pipe), not the test runner's buffer.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from fuzzing import ROOT, assert_promise, dse

import dse as api
from dse import validate
from dse.spec.load import hardware_with_technology

FULL = Path("/dev/full")  # a device whose every write fails with ENOSPC (Linux)
needs_full = pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full (Linux)")
SECONDS = 60  # a generous ceiling for one subprocess on a loaded machine


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg", "COLUMNS": "120"}
    env.pop("DSE_DEBUG", None)
    return env


def _dse_to(stdout: object, *args: str | Path) -> subprocess.CompletedProcess:
    """`python -m dse ARGS` with standard output on `stdout` (an open file)."""
    return subprocess.run([sys.executable, "-m", "dse", *map(str, args)], cwd=ROOT,
                          stdout=stdout, stderr=subprocess.PIPE, text=True, env=_env(),
                          timeout=SECONDS)


# --- T6: standard output on a full disk ----------------------------------------------------
# `dse list > /dev/full` (and every other command, --help and --version included) ended in
# "internal error: OSError: [Errno 28] No space left on device", exit 1; --help and --version
# with a traceback. Fix: dse.cli_errors.guard_output makes standard output raise OutputError,
# reported once for every command by user_errors and DseGroup.main: one line, exit 2.

@needs_full
@pytest.mark.parametrize("args", [  # text, help (rich), version, JSON, a rich table
    ["list"], ["--help"], ["--version"], ["eval", "h100-sxm", "llama2-7b", "-f", "json"],
    ["show", "h100-sxm"],
])  # the fuzz suite's heavy kind "full" (test_fuzz_limits) tries the other commands
def test_t6_standard_output_on_a_full_disk_is_one_line_and_exit_2(args):
    with FULL.open("w") as full:
        r = _dse_to(full, *args)
    assert r.stderr == "dse: cannot write output: No space left on device\n", r.stderr
    assert r.returncode == 2


@needs_full
def test_t6_a_file_written_on_a_full_disk_is_named(tmp_path):
    """A file a command writes (here `dse area --plot`) on a full disk: one line naming it,
    exit 2 (the write itself names no file: the last file opened for writing is named)."""
    target = tmp_path / "area.png"
    target.symlink_to(FULL)
    with (tmp_path / "out.txt").open("w") as out:
        r = _dse_to(out, "area", "h100-sxm", "--plot", target)
    assert r.returncode == 2, r.stderr
    assert r.stderr == f"{target}: no space left on device\n"


# --- U2: output cut short by its reader ------------------------------------------------------
# `dse eval h100-sxm llama2-7b --set compute.units=<10,000 values> -f csv | head -c1` exited 0
# (3 with an infeasible design), where the docs promise 141: Python's stdout ended a large
# write cut short by the closed pipe without an error. Fix: dse.cli_errors._Stdout writes all
# it is given or raises BrokenPipeError, and DseGroup.main exits 141 once the pipe closed,
# whatever the command's own exit code.

def _cut_short(*args: str) -> subprocess.CompletedProcess:
    """Run `python -m dse ARGS`, read one byte of its output and close the pipe (`| head
    -c1`); its exit status and stderr."""
    p = subprocess.Popen([sys.executable, "-m", "dse", *args], cwd=ROOT, env=_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None
    first = p.stdout.read(1)
    p.stdout.close()
    _, err = p.communicate(timeout=SECONDS)
    assert first, err
    return subprocess.CompletedProcess(p.args, p.returncode, None, err.decode())


UNITS = ",".join(str(60 + i % 90) for i in range(2000))  # ~580 KB of CSV, beyond a pipe's


@pytest.mark.parametrize("extra", [[], ["--area-budget", "1 mm2"]], ids=["ok", "infeasible"])
def test_u2_output_cut_short_exits_141(extra):
    r = _cut_short("eval", "h100-sxm", "llama2-7b", "--set", f"compute.units={UNITS}",
                   "-f", "csv", *extra)
    assert (r.returncode, r.stderr) == (141, "")


def test_u2_a_list_cut_short_exits_141():
    r = _cut_short("list", "workload")
    assert r.returncode in (0, 141) and r.stderr == ""  # all of it may fit in the pipe
    p = subprocess.Popen([sys.executable, "-m", "dse", "list", "workload"], cwd=ROOT,
                         env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None
    p.stdout.close()  # the reader is gone before the first write: cut short for certain
    _, err = p.communicate(timeout=SECONDS)
    assert (p.returncode, err) == (141, b"")


# --- T7: wrong-typed keywords of dse.evaluate ---------------------------------------------
# `dse.evaluate(..., execution="chips=2")`, `tech=object()`, `area_budget="600 mm2"` raised
# AttributeError or TypeError from deep in the model. Fix: dse.model.arguments.checked checks
# every keyword first: a one-line DseError (also a TypeError) naming the keyword and what it
# takes; area_budget takes a number of mm2 or a string with its unit.

@pytest.fixture(scope="module")
def h100():
    return hardware_with_technology("h100-sxm")


@pytest.fixture(scope="module")
def llama():
    return api.load_workload("llama2-7b")


@pytest.mark.parametrize(("keywords", "message"), [
    ({"execution": "chips=2"}, r"^execution: expected a dse\.Execution .*, found str "
                               r"'chips=2'$"),
    ({"tech": object()}, r"^tech: expected the chip's process node, a TechSpec .*, found "
                         r"object <object object at 0x[0-9a-f]+>$"),
    ({"area_budget": [600]}, r"^area_budget: expected a positive area, a number of mm2 "
                             r"\(600\) or a string with its unit \('600 mm2'\), found list"),
    ({"reticle": "no"}, r"^reticle: expected True or False, found str 'no'$"),
    ({"phase": 3}, r"^phase: expected a name \(a string\) or None, found int 3$"),
    ({"precision": b"bf16"}, r"^precision: expected a name"),
    ({"fusion": None}, r"^fusion: expected a name \(a string\): flash or none, found "
                       r"NoneType None$"),
    ({"batch": {"b": 1}}, r"^batch: expected a whole number, max, best, or a list"),
    ({"batch": np.ones((2, 2), dtype=int)}, r"^batch: expected one batch per design \(a "
                                            r"list or 1-D array\), found an array of shape"),
    ({"overrides": ["compute.units"]}, r"^overrides: expected a mapping of dotted paths"),
    ({"execution": api.Execution(chips=2), "chips": 4},
     r"^execution: given together with chips; give the split once"),
    ({"chip": 2}, r"^dse\.evaluate: got an unexpected keyword argument 'chip'$"),
])
def test_t7_a_wrong_type_is_a_one_line_dse_error(h100, llama, keywords, message):
    hw, tech = h100
    keywords = {"tech": tech, **keywords} if "area_budget" in keywords else keywords
    with pytest.raises(api.DseError, match=message) as caught:
        api.evaluate(hw, llama, **{"phase": "decode", **keywords})
    assert isinstance(caught.value, TypeError)  # what Python code expects of a wrong type
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("budget", "message"), [
    ("600", r"^area_budget: expected an area with a unit, e.g. '600 mm2' or '814 mm2', "
            r"found the bare number '600' \(a unit is required\)$"),
    ("1 GB", r"^area_budget: expected a positive area like '814 mm2', found '1 GB' \(a "
            r"capacity\)$"),
    (-1.0, r"^area_budget: expected a positive area, a number of mm2 \(600\) or a string "
           r"with its unit \('600 mm2'\), found float -1.0$"),
    (float("nan"), r"^area_budget: expected a positive area.*, found float nan$"),
])
def test_t7_a_bad_area_budget_is_a_one_line_dse_error(h100, llama, budget, message):
    """A value of the right type that is not an area: a DseError (not a TypeError)."""
    hw, tech = h100
    with pytest.raises(api.DseError, match=message) as caught:
        api.evaluate(hw, llama, phase="decode", tech=tech, area_budget=budget)
    assert not isinstance(caught.value, TypeError)


@pytest.mark.parametrize(("hw", "wl", "message"), [
    ("h100-sxm", None, r"^hw: expected a hardware spec \(dse\.load_hardware\('h100-sxm'\)\) "
                       r"or a DesignBatch \(dse\.design_batch\), found str 'h100-sxm'$"),
    (None, "llama2-7b", r"^wl: expected a workload spec \(dse\.load_workload\('llama2-7b'\)\),"
                        r" found str 'llama2-7b'$"),
])
def test_t7_specs_by_name_are_refused_with_the_loader_named(h100, llama, hw, wl, message):
    with pytest.raises(api.DseError, match=message):
        api.evaluate(hw if hw is not None else h100[0], wl if wl is not None else llama)


def test_t7_the_documented_forms_are_accepted(h100, llama):
    """area_budget as mm2 or as a string with its unit; numpy integers as whole numbers; a
    numpy boolean as reticle: the same numbers as the plain forms."""
    hw, tech = h100
    plain = api.evaluate(hw, llama, phase="decode", batch=4, seq_in=128, tech=tech,
                         area_budget=600, reticle=True)
    for budget in ("600 mm2", "0.0006 m2", np.float64(600.0), 600.0):
        ev = api.evaluate(hw, llama, phase="decode", batch=np.int64(4), seq_in=np.int32(128),
                          tech=tech, area_budget=budget, reticle=np.bool_(True))
        assert ev.reason[0] == plain.reason[0] == ("a die area of 757 mm2 exceeds the area "
                                                   "budget of 600 mm2")
    split = api.evaluate(hw, llama, phase="decode", execution=api.Execution(chips=2, tp=2))
    same = api.evaluate(hw, llama, phase="decode", chips=np.int64(2), tp=2)
    assert split.metrics["latency_s"][0] == same.metrics["latency_s"][0]


def test_t7_the_reproducers_keywords(h100, llama):
    """The three calls of T7_api_wrong_types.py: each a DseError; "600 mm2" with a real
    process node is accepted."""
    hw, tech = h100
    for keywords in ({"execution": "chips=2"}, {"tech": object()},
                     {"tech": object(), "area_budget": "600 mm2"}):
        with pytest.raises(api.DseError):
            api.evaluate(hw, llama, phase="decode", **keywords)
    ev = api.evaluate(hw, llama, phase="decode", tech=tech, area_budget="600 mm2")
    assert not ev.feasible[0] and "area budget of 600 mm2" in ev.reason[0]


# --- H5: validate rows that differ in length -----------------------------------------------
# 100,000 rows (half the 200,000-row limit) that differ in seq_in/seq_out took 283 s: each is
# an evaluation of its own (the lowering's shapes follow the lengths). Fix: one run models at
# most validate.MAX_SCENARIOS distinct scenarios (MAX_TRAINING_SCENARIOS in training) and
# refuses more before modelling any, naming the first row past the limit.

def _length_rows(path: Path, n: int, *, phase_row: str = "M021",
                 vary: str = "lengths") -> Path:
    """`n` copies of a shipped measurement row, each with its own lengths (or batch)."""
    with (ROOT / "validation" / "measurements.csv").open() as f:
        rows = list(csv.DictReader(f))
    base = next(r for r in rows if r["id"] == phase_row)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for i in range(n):
            row = dict(base, id=f"S{i}")
            if vary == "lengths":
                row.update(seq_in=str(1 + i % 4000), seq_out=str(1 + i // 4000))
            else:
                row.update(batch=str(int(base["batch"]) + 8 * i))
            w.writerow(row)
    return path


def test_h5_100000_rows_that_differ_in_length_are_refused_at_once(tmp_path):
    path = _length_rows(tmp_path / "H5_100k.csv", 100_000)
    start = time.monotonic()
    with (tmp_path / "out.json").open("w") as out:
        r = _dse_to(out, "validate", "--measurements", path, "-f", "json")
    seconds = time.monotonic() - start
    limit = validate.MAX_SCENARIOS
    assert r.returncode == 2
    assert r.stderr == (f"{path}:{limit + 2}: more than {limit:,} distinct scenarios (rows "
                        "that differ in more than their batch are an evaluation each), the "
                        "limit of one dse validate run; split the measurements\n")
    assert seconds < 20  # 283 s before


def test_h5_the_limit_counts_scenarios_over_all_files(tmp_path, monkeypatch):
    monkeypatch.setattr(validate, "MAX_SCENARIOS", 3)
    two = _length_rows(tmp_path / "two.csv", 2)
    assert len(validate.run(two)) == 2
    other = _length_rows(tmp_path / "other.csv", 2, phase_row="M022")
    with (tmp_path / "other.csv").open() as f:  # ids unique across the files
        text = f.read().replace("S0,", "T0,").replace("S1,", "T1,")
    other.write_text(text)
    ran = dse("validate", "--measurements", two, "--measurements", other, "-f", "json")
    assert_promise(ran)
    assert ran.code == 2 and ran.stderr.startswith(f"{other}:3: more than 3 distinct")


def test_h5_rows_that_differ_only_in_batch_are_one_scenario(tmp_path, monkeypatch):
    monkeypatch.setattr(validate, "MAX_SCENARIOS", 1)
    path = _length_rows(tmp_path / "batches.csv", 50, vary="batch")
    rows = validate.run(path)
    assert len(rows) == 50 and all(r.predicted is not None for r in rows)


def test_h5_training_scenarios_have_their_own_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(validate, "MAX_TRAINING_SCENARIOS", 2)
    path = _length_rows(tmp_path / "training.csv", 3, phase_row="M104", vary="batch")
    ran = dse("validate", "--measurements", path)
    assert_promise(ran)
    assert ran.code == 2
    assert ran.stderr == (f"{path}:4: more than 2 distinct training scenarios (each plans "
                          "its own step), the limit of one dse validate run; split the "
                          "measurements\n")
