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
import re

import numpy as np
from arguments import (
    HARDWARE,
    WORKLOADS,
    api_keywords,
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
from hypothesis import event, example, given, note
from hypothesis import strategies as st

import dse as api
from dse.errors import DseError
from dse.spec.load import hardware_with_technology, library_names


@examples(fast=60, long=700)
@given(args=eval_arguments())
@example(args=["eval", "h100-sxm", "mpt-7b", "--chips", "8", "--set",  # S4 (model branch)
               "compute.matrix.peak_per_unit.bf16=100", "--format", "json"])
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
        # a Transformer's throughput is tokens, a recommender's samples (the other is None)
        rate = doc["tokens_per_s"] if doc.get("tokens_per_s") is not None \
            else doc.get("samples_per_s")
        assert doc["step_time_s"] > 0 and rate is not None and rate > 0, ran
    for s in doc.get("suggestions") or []:
        assert s["step_time_s"] > 0 and s["tokens_per_s"] > 0, (s, ran)


@examples(fast=30, long=400)
@given(args=workload_arguments())
@example(args=["workload", "mpt-7b", "--format", "table"])  # S1 (model branch)
def test_workload_arguments(args: list[str]) -> None:
    ran = dse(*args)
    assert_promise(ran, json_out=args[-1] == "json")
    if args[-1] == "table" and ran.code == 0:  # S1: no number shown as inf or nan
        words = set(re.findall(r"[\w.+-]+", ran.stdout.lower()))
        assert not words & {"inf", "-inf", "nan"}, ran


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


@examples(fast=15, long=300)
@given(keywords=api_keywords(), with_tech=st.booleans(),
       workload=st.sampled_from(API_WORKLOADS))
@example(keywords={"execution": "chips=2"}, with_tech=False,  # T7
         workload=("llama2-7b", "decode"))
@example(keywords={"area_budget": "600 mm2"}, with_tech=True,  # T7
         workload=("llama2-7b", "decode"))
def test_evaluate_with_random_keywords(keywords: dict[str, object], with_tech: bool,
                                       workload: tuple[str, str | None]) -> None:
    """T7: any keyword of any type gives an Evaluation or a one-line DseError naming what
    is wrong, never another exception."""
    spec, tech = _design("h100-sxm")
    name, phase = workload
    given_ = dict(keywords)
    if isinstance(given_.get("execution"), tuple):  # ("Execution", chips, tp)
        _, chips, tp = given_["execution"]
        given_["execution"] = api.Execution(chips=chips, tp=tp)
    given_.setdefault("phase", phase)
    if with_tech:
        given_.setdefault("tech", tech)
    note(f"dse.evaluate(h100-sxm, {name}, {given_!r})")
    try:
        with budget():
            ev = api.evaluate(spec, _workload(name), **given_)
    except DseError as e:
        event("dse.evaluate keywords: DseError")
        message = str(e)
        assert message and not line_problems(message) and "\n" not in message, message
        return
    event(f"dse.evaluate keywords: {int(ev.feasible.sum())} of {ev.n} feasible")
    for i in range(ev.n):
        metrics = {k: float(v[i]) for k, v in ev.metrics.items()}
        assert not metric_problems(metrics, bool(ev.feasible[i])), metrics
        assert ev.feasible[i] or ev.reason[i], "infeasible without a reason"


# --- S2, S3: the same design or batch reached two ways gives the same numbers ---------------

@examples(fast=2, long=30)
@given(path=st.sampled_from(["compute.units", "compute.clock"]),
       scale=st.sampled_from([0.5, 0.75, 1.0, 1.1, 1.25, 2.0]),
       workload=st.sampled_from(["gemm:8192x8192x8192", "llama2-7b"]))
@example(path="compute.units", scale=160 / 132, workload="gemm:8192x8192x8192")  # S2
def test_set_and_base_describe_one_design(tmp_path_factory, path: str, scale: float,
                                          workload: str) -> None:
    """S2 (model branch): a change made with --set and the same change written as a
    derived file (base: h100-sxm) give the same area, power, feasibility and metrics."""
    from dse.spec import vocabulary

    spec = api.load_hardware("h100-sxm")
    current = vocabulary.current(spec, path)
    value = str(max(1, round(current * scale))) if path == "compute.units" else \
        f"{current * scale / 1e6:.6g} MHz"
    folder = tmp_path_factory.mktemp("s2")
    derived = folder / "derived.yaml"
    key = path.split(".")[1]
    derived.write_text(f"base: h100-sxm\nsource: fuzz - --set {path}={value}\n"
                       f"compute: {{{key}: {value}}}\n")
    by_set = dse("eval", "h100-sxm", workload, "--set", f"{path}={value}", "--format", "json")
    by_base = dse("eval", derived, workload, "--format", "json")
    a = assert_promise(by_set, infeasible=True, json_out=True)
    b = assert_promise(by_base, infeasible=True, json_out=True)
    assert a is not None and b is not None, (by_set, by_base)
    assert (a["feasible"], a.get("reason")) == (b["feasible"], b.get("reason")), (a, b)
    for k, v in a["metrics"].items():
        w = b["metrics"].get(k)
        if isinstance(v, float) and isinstance(w, float):
            assert abs(v - w) <= 1e-9 * max(abs(v), abs(w)), (k, v, w)


def _no_target(workload: str) -> bool:
    wl = _workload(workload)
    return next(iter(wl.scenarios.values())).latency_target is None


@examples(fast=2, long=20)
@given(workload=st.sampled_from(["bert-large", "bert-base"]),
       capacity=st.sampled_from(["2.6GB", "3.5GB", "8GB", "40GB"]),
       batches=st.lists(st.integers(1, 400), min_size=1, max_size=4, unique=True))
@example(workload="bert-large", capacity="3.5GB", batches=[35, 34])  # S3 (model branch)
def test_batch_best_is_within_one_percent_of_every_batch(workload: str, capacity: str,
                                                         batches: list[int]) -> None:
    """S3 (model branch): `--batch best` gives at least 99% of the throughput of any other
    batch that fits the same design (docs: model/index.md, within 1% of a fine grid)."""
    assert _no_target(workload)
    ran = dse("eval", "h100-sxm", workload, "--batch", ",".join(["best", *map(str, batches)]),
              "--set", f"memory.HBM3.capacity={capacity}", "--format", "json")
    doc = assert_promise(ran, infeasible=True, json_out=True)
    if doc is None:
        return
    best, *others = doc
    rates = [d["metrics"]["samples_per_s"] for d in others if d["feasible"]]
    if best["feasible"] and rates:
        assert best["metrics"]["samples_per_s"] >= 0.99 * max(rates), (best, others)


def test_the_argument_pools_are_the_library():
    assert set(API_HARDWARE) <= set(HARDWARE) and "llama2-7b" in WORKLOADS
    assert library_names("hardware") == HARDWARE
