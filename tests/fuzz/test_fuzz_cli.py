"""Fuzzing the command line and the Python API with the shipped files: `dse eval`, `dse
memory`, `dse workload`, `dse show` and `dse check` with random arguments (arguments.py),
and `dse.evaluate` with random override dicts.

Properties: the promise (fuzzing.assert_promise) for every command; `dse eval`: every
feasible design with a positive, finite time and rate, every infeasible one with a reason,
exit 3 exactly when one is infeasible; `dse memory`: exit 3 exactly when it does not fit,
every number non-negative; the API: an Evaluation with those metrics, or a DseError of one
line, never another exception.
"""

from __future__ import annotations

import functools

import numpy as np
from arguments import (
    HARDWARE,
    WORKLOADS,
    api_overrides,
    eval_arguments,
    memory_arguments,
    usage_errors,
    workload_arguments,
)
from fuzzing import (
    assert_eval_doc,
    assert_promise,
    budget,
    dse,
    examples,
    line_problems,
    metric_problems,
)
from hypothesis import event, given, note
from hypothesis import strategies as st

import dse as api
from dse.errors import DseError
from dse.spec.load import hardware_with_technology, library_names


@examples(fast=60, long=700)
@given(args=eval_arguments())
def test_eval_arguments(args: list[str]) -> None:
    ran = dse(*args)
    doc = assert_promise(ran, infeasible=True, json_out=True)
    if doc is None:
        return
    if "--ops" not in args:
        assert_eval_doc(ran, doc)
        return
    assert isinstance(doc, list) and doc, ran  # one row per design and operator
    for row in doc:
        assert row["time_s"] is None or row["time_s"] >= 0, (row, ran)
        assert not negatives(row), (negatives(row), ran)


def negatives(doc: object, where: str = "") -> list[str]:
    if isinstance(doc, dict):
        return [w for k, v in doc.items() for w in negatives(v, f"{where}.{k}")]
    if isinstance(doc, list):
        return [w for i, v in enumerate(doc) for w in negatives(v, f"{where}[{i}]")]
    if isinstance(doc, int | float) and not isinstance(doc, bool) and doc < 0:
        return [f"{where} = {doc}"]
    return []


@examples(fast=25, long=250)
@given(args=memory_arguments())
def test_memory_arguments(args: list[str]) -> None:
    ran = dse(*args)
    doc = assert_promise(ran, infeasible=True, json_out=True)
    if doc is None:
        return
    assert isinstance(doc, dict) and "fits" in doc, ran
    assert (ran.code == 3) == (doc["fits"] is False), ran
    assert not negatives(doc), (negatives(doc), ran)
    if doc["fits"] and doc.get("step_time_s") is not None:
        assert doc["step_time_s"] > 0 and doc["tokens_per_s"] > 0, ran
    for s in doc.get("suggestions") or []:
        assert s["step_time_s"] > 0 and s["tokens_per_s"] > 0, (s, ran)


@examples(fast=30, long=400)
@given(args=workload_arguments())
def test_workload_arguments(args: list[str]) -> None:
    ran = dse(*args)
    assert_promise(ran, json_out=args[-1] == "json")


@examples(fast=10, long=100)
@given(hardware=st.sampled_from(HARDWARE) | st.sampled_from(
    ["nope", "", "H100-SXM", "hwspecs", "/dev/null", "/bin/ls", "x" * 300, "a\x00b",
     "workloads/gpt2.yaml", "llama2-7b"]), paths=st.booleans())
def test_show_arguments(hardware: str, paths: bool) -> None:
    args = ["show", hardware, *(["--paths"] if paths else []), "--format", "json"]
    assert_promise(dse(*args), json_out=True)


@examples(fast=10, long=100)
@given(paths=st.lists(st.sampled_from(
    ["hwspecs/h100-sxm.yaml", "workloads/gpt2.yaml", "studies/hbm-grid.yaml",
     "hwspecs/tech/n4.yaml", "workloads/lengths/squad-v1.1.yaml", "validation/measurements.csv",
     "README.md", "pyproject.toml", "hwspecs", "nope.yaml", "h100-sxm", "/dev/null", "",
     "/bin/ls", "x" * 300]), min_size=1, max_size=4))
def test_check_arguments(paths: list[str]) -> None:
    from mutate import ROOT

    args = ["check", *[p if p.startswith("/") or not p else str(ROOT / p) for p in paths]]
    assert_promise(dse(*args))


@examples(fast=10, long=100)
@given(args=usage_errors())
def test_usage_errors(args: list[str]) -> None:
    """Typer's own refusals (unknown command or option, missing argument or value, bad choice
    or integer) are one line and exit 2, like dse's."""
    ran = dse(*args)
    assert_promise(ran)
    assert ran.code == 2 and len(ran.stderr.splitlines()) == 1, ran


# --- the API ---------------------------------------------------------------------------------

API_HARDWARE = ["h100-sxm", "middle-ground", "groq-lpu", "xeon-gold-6242", "gh200", "tpu-v4"]
API_WORKLOADS = [("llama2-7b", "decode"), ("llama2-7b", "prefill"), ("gpt2", "serve"),
                 ("rm1", None), ("bert-base", None), ("llama2-7b", "training"),
                 ("gemm:4096x4096x4096", None), ("mixtral-8x7b", "decode")]


@functools.cache
def _design(name: str) -> tuple[object, object]:
    return hardware_with_technology(name)


@functools.cache
def _workload(name: str) -> object:
    return api.load_workload(name)


@examples(fast=40, long=1000)
@given(data=st.data(), hardware=st.sampled_from(API_HARDWARE),
       workload=st.sampled_from(API_WORKLOADS), with_tech=st.booleans())
def test_evaluate_with_random_overrides(data: st.DataObject, hardware: str,
                                        workload: tuple[str, str | None],
                                        with_tech: bool) -> None:
    overrides = data.draw(api_overrides(hardware), label="overrides")
    spec, tech = _design(hardware)
    name, phase = workload
    try:
        with budget():
            ev = api.evaluate(spec, _workload(name), phase=phase, overrides=overrides,
                              tech=tech if with_tech else None)
    except DseError as e:
        event("dse.evaluate: DseError")
        message = str(e)
        assert message and not line_problems(message) and "\n" not in message, message
        return
    event(f"dse.evaluate: {int(ev.feasible.sum())} of {ev.n} feasible")
    for i in range(ev.n):
        metrics = {k: float(v[i]) for k, v in ev.metrics.items()}
        note(f"design {i}: feasible={ev.feasible[i]} reason={ev.reason[i]!r} {metrics}")
        feasible = bool(ev.feasible[i])
        problems = metric_problems(metrics, feasible)
        assert not problems, problems
        assert feasible or ev.reason[i], "infeasible without a reason"
        memory = np.asarray(ev.memory_bytes[i], dtype=float)
        assert np.all(np.isfinite(memory)) and np.all(memory >= 0), memory
        if feasible:
            times = np.asarray(ev.ops_time[i], dtype=float)
            assert np.all(np.isfinite(times) & (times >= 0)), times


def test_the_argument_pools_are_the_library():
    assert set(API_HARDWARE) <= set(HARDWARE) and "llama2-7b" in WORKLOADS
    assert library_names("hardware") == HARDWARE
