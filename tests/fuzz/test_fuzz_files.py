"""Fuzzing the spec files: mutations of every shipped hardware, workload, study, process-node
and lengths YAML, and of the measurement CSVs, through the commands that read them.

Each case is written to a fresh folder and run in this process (Typer's runner) under the
case budget (fuzzing.budget: 1 GiB more address space, a time limit). Properties:
- the promise (fuzzing.assert_promise): exit 0 with strict JSON and, from `dse eval`, finite
  positive metrics for every feasible design; or one line per problem with exit 2; or exit 3
  (an infeasible design, with its reason); never a traceback or an internal error;
- `dse check` agrees with the commands: a hardware or workload file that checks clean is not
  refused by `dse eval` (which the shipped source file is not).
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

from fuzzing import assert_eval_doc, assert_promise, dse, examples
from hypothesis import example, given
from hypothesis import strategies as st
from mutate import MAIN, ROOT, SHIPPED, Case, csv_cases, yaml_cases

# (workload, extra eval arguments): small scenarios of each kind and phase.
SCENARIOS = [("llama2-7b", ["--phase", "decode"]), ("llama2-7b", ["--phase", "prefill"]),
             ("gpt2", ["--phase", "serve"]), ("rm1", []), ("bert-base", []),
             ("llama2-7b", ["--phase", "training"]), ("gemm:1024x1024x1024", []),
             ("mixtral-8x7b", ["--phase", "decode", "--chips", "2", "--tp", "2"])]
HARDWARE = ["h100-sxm", "gpu-like", "groq-lpu", "xeon-gold-6242"]


@functools.cache
def shipped_exit(hardware: str, workload: str, extra: tuple[str, ...]) -> int:
    """The exit code of `dse eval` on the shipped files (a refusal of the pair itself, like
    a recommender split tensor-parallel, is not the mutated file's)."""
    return dse("eval", hardware, workload, *extra, "--format", "json").code


def _source(case: Case) -> str:
    return case.steps[0].split()[-1]


def passed_as(checked, kind: str) -> int:
    """0 where `dse check` passed the file as `kind` (a mutation can turn a workload file
    into a valid file of another kind, `base: h100-sxm`, which eval then rightly refuses
    in the workload's place), else 1."""
    return 0 if checked.code == 0 and f"ok ({kind})" in checked.stdout else 1


def eval_and_check(hardware: str, workload: str, extra: list[str], checked: int,
                   source: tuple[str, str]) -> None:
    ran = dse("eval", hardware, workload, *extra, "--format", "json")
    doc = assert_promise(ran, infeasible=True, json_out=True)
    if doc is not None:
        assert_eval_doc(ran, doc)
    if checked == 0 and ran.code == 2 and shipped_exit(*source, tuple(extra)) != 2:
        raise AssertionError(f"dse check passed the file, dse eval refused it\n{ran}")


@examples(fast=40, long=300)
@given(case=yaml_cases("hardware"), scenario=st.sampled_from(SCENARIOS),
       show=st.booleans())
def test_hardware_files(case: Case, scenario: tuple[str, list[str]], show: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = case.write(Path(folder))
        checked = dse("check", path)
        assert_promise(checked)
        workload, extra = scenario
        source = Path(_source(case)).stem
        eval_and_check(str(path), workload, extra, passed_as(checked, "hardware"),
                       (source, workload))
        if show:
            assert_promise(dse("show", path, "--format", "json"), json_out=True)
            assert_promise(dse("area", path, "--format", "json", "--cost"), json_out=True)


# U1 of round 3 (model branch): a training scenario at a weight-only inference precision,
# which dse check passed and dse eval refused.
U1 = Case({MAIN: b"base: mpt-7b\nsource: fuzz - a training scenario with a weight-only "
                 b"inference precision\nscenarios:\n  q-training: {phase: training, batch: 8, "
                 b"seq_in: 2048, precision: w4a16}\n"}, ["from workloads/mpt-7b.yaml", "U1"])


@examples(fast=40, long=300)
@given(case=yaml_cases("workload"), hardware=st.sampled_from(HARDWARE),
       phase=st.sampled_from([None, "decode", "prefill", "serve", "inference", "training"]))
@example(case=U1, hardware="h100-sxm", phase="training")  # U1
def test_workload_files(case: Case, hardware: str, phase: str | None) -> None:
    extra = ["--phase", phase] if phase else []
    with tempfile.TemporaryDirectory() as folder:
        path = case.write(Path(folder))
        checked = dse("check", path)
        assert_promise(checked)
        assert_promise(dse("workload", path, *extra, "--format", "json"), json_out=True)
        eval_and_check(hardware, str(path), extra, passed_as(checked, "workload"),
                       (hardware, Path(_source(case)).stem))


@examples(fast=15, long=120)
@given(case=yaml_cases("tech") | yaml_cases("lengths"))
def test_process_node_and_lengths_files(case: Case) -> None:
    with tempfile.TemporaryDirectory() as folder:
        assert_promise(dse("check", case.write(Path(folder))))


@examples(fast=25, long=250)
@given(case=csv_cases())
def test_measurement_files(case: Case) -> None:
    with tempfile.TemporaryDirectory() as folder:
        ran = dse("validate", "--measurements", case.write(Path(folder)), "--format", "json")
        doc = assert_promise(ran, json_out=True)
        if doc is None:
            return
        for row in doc["rows"]:
            if row.get("skipped") or row.get("invalid"):
                continue
            assert isinstance(row["predicted"], float) and row["predicted"] > 0, (row, ran)
            assert isinstance(row["rel_error"], float), (row, ran)


def test_the_shipped_files_are_the_starting_points():
    """Every kind has shipped files to mutate (the globs are right)."""
    assert all(SHIPPED.values()), SHIPPED
    assert all(p.is_relative_to(ROOT) for ps in SHIPPED.values() for p in ps)
