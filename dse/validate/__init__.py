"""Model against measurement: run every row of a measurements CSV (the format of
shared/validation/README.md) and report predicted vs measured per row and summarised.
The CSV's columns and its bounded reading are dse.validate.measurements'.

rel_error = (predicted - measured) / measured. Rows whose phase or workload the model does
not cover yet are listed as skipped with the reason. Rows whose measurement is dominated
by a software effect outside the hardware keep their error, with a note saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dse import phases
from dse.errors import DseError
from dse.model import design_batch, evaluate
from dse.spec import scenario_fields
from dse.spec.library import library_dir, library_names, looks_like_path
from dse.spec.load import load_design, load_workload
from dse.spec.stack_files import stack_for_software
from dse.spec.workload import WorkloadSpec, is_gemm_name
from dse.validate.measurements import COLUMNS as COLUMNS  # re-exported: tests, tools
from dse.validate.measurements import MAX_CSV_LINE as MAX_CSV_LINE  # re-exported: tests
from dse.validate.measurements import OPTIONAL_COLUMNS as OPTIONAL_COLUMNS  # re-exported
from dse.validate.measurements import SCENARIO_COLUMNS as SCENARIO_COLUMNS  # re-exported
from dse.validate.measurements import compared_phases as compared_phases  # re-exported
from dse.validate.measurements import read_measurements as read_measurements  # re-exported
from dse.validate.rows import Row as Row  # re-exported
from dse.validate.rows import hardware_facts as hardware_facts  # re-exported
from dse.validate.rows import summary as summary  # re-exported
from dse.validate.rows import summary_by as summary_by  # re-exported
from dse.workloads import KINDS, resolve_scenario

# Known effects outside the hardware, by (workload prefix, phase): reported beside the row.
# (MLPerf BERT's padding skipping is modelled now: its scenarios give SQuAD's lengths.)
NOTES: dict[tuple[str, str], str] = {}


# The shipped copies of shared/validation: published measurements of whole workloads, the
# GEMM rows that calibrate (and check) each chip's achievable rate, and the rows measured on
# 2024-2026 software stacks (Megatron-Bridge/NeMo, MLPerf Training v4.1/v5.0, torchtitan,
# TensorRT-LLM, vLLM on ROCm, HugeCTR). The older files stay as the record of their stacks.
MEASUREMENT_FILES = ("measurements.csv", "gemm-calibration.csv", "current-stacks.csv")
# Measured rows that need what the model may not express yet (4-bit floating point, the
# MLPerf data sets' length distributions): validated by default, and a row that cannot run
# is reported as pending, with the reason, instead of stopping the run.
PENDING_FILES = ("current-stacks-pending.csv",)


def default_measurements() -> tuple[Path, ...]:
    """The project's copies of shared/validation's measurement files, validated by default."""
    return tuple(library_dir("validation") / name for name in MEASUREMENT_FILES)


def default_pending() -> tuple[Path, ...]:
    """The project's copies of shared/validation's pending rows, reported by default."""
    return tuple(library_dir("validation") / name for name in PENDING_FILES)


Progress = Callable[[int, int], None]
"""progress(rows done, rows in all): called as groups of rows finish."""


def run(paths: Path | Sequence[Path] | None = None,
        progress: Progress | None = None,
        pending: Path | Sequence[Path] | None = None) -> list[Row]:
    """Predict every row of the measurement files (the shipped ones by default), in order,
    then of the `pending` files (by default the shipped ones when `paths` is None too), whose
    rows that cannot run are reported as skipped with the reason; an id given twice across
    them is an error (found before any row is modelled). Rows that differ only in their
    batch run as one vectorized evaluation (`_run_file`); each spec is read once. More
    distinct scenarios than MAX_SCENARIOS (MAX_TRAINING_SCENARIOS in phase training) in all
    are refused before any is modelled."""
    if paths is None and pending is None:
        paths, pending = default_measurements(), default_pending()
    given = [Path(p) for p in _paths(paths)]
    waiting = [Path(p) for p in _paths(pending)]
    everything = given + waiting
    for i, path in enumerate(everything):
        if any(path.resolve() == other.resolve() for other in everything[:i]):
            raise DseError(f"--measurements: {path} is given twice; give each file once")
    files = [(path, read_measurements(path)) for path in everything]
    seen: dict[str, str] = {}
    for path, records in files:
        for r in records:
            if r["id"] in seen:
                raise DseError(f"{path}:{r['line']}: id: {r['id']} is also at {seen[r['id']]}; "
                               "ids must be unique across the files validated together")
            seen[r["id"]] = f"{path}:{r['line']}"
    plans = [_plan(path, records, pending=i >= len(given))
             for i, (path, records) in enumerate(files)]
    _within_limits(plans)  # before any row is modelled
    total = sum(len(records) for _, records in files)
    out: list[Row] = []
    loaded: dict = {}
    for plan in plans:
        done = len(out)
        out.extend(_run_plan(plan, progress and _offset(progress, done, total), loaded))
    return out


def _paths(paths: Path | str | Sequence[Path] | None) -> Sequence[Path | str]:
    """A path, several, or none as a sequence."""
    if paths is None:
        return ()
    return (paths,) if isinstance(paths, Path | str) else paths


# Rows whose key (all of a row's model inputs but its batch) is equal are one group: one
# evaluation with a batch per design. Training takes one global batch per evaluation and
# `max` depends on the hardware, so there the batch is part of the key.
_KEY = ("hardware", "workload", "phase", "precision", "kv_precision", "sparsity", "seq_in",
        "seq_out", "chips", "tp", "pp", "cp", "ep", "software")


# Most distinct scenarios (rows that differ in more than their batch) one run models, in all
# its files (docs: guide/commands.md, Input limits). Rows that differ only in their batch share one
# vectorized evaluation, but each scenario is an evaluation of its own, since the lowering's
# shapes follow the lengths: ~2.5 ms each (decode, prefill, serve, gemm; 1.5-4 ms measured
# on the shipped rows, one core), so 1,000 take ~2.5 s; a training scenario plans its step
# (micro-batches, ZeRO, recomputation, schedule) and takes 20-220 ms (gpt3-175b on 1,024
# A100s: 220 ms), so 32 of them take at most ~7 s. 100,000 rows that all differ in their
# lengths took 283 s before the limit. The shipped files hold 31 scenarios.
MAX_SCENARIOS = 1_000
MAX_TRAINING_SCENARIOS = 32


@dataclass
class _Plan:
    """One measurement file ready to model: its records, a Row per record (skipped ones
    already marked) and the groups of rows that share an evaluation, by key, in the order of
    their first rows."""

    path: Path
    records: list[dict]
    rows: list[Row]
    groups: dict[tuple, list[int]]


def _plan(path: Path, records: list[dict], pending: bool = False) -> _Plan:
    """Rows of one file grouped by everything but their batch (see _KEY); rows whose hardware
    or workload cannot be found are skipped with the reason. `pending`: a row that cannot
    run is reported as skipped (`_run_plan`)."""
    hw_known = set(library_names("hardware"))
    wl_known = set(library_names("workload"))
    rows: list[Row] = []
    groups: dict[tuple, list[int]] = {}
    for r in records:
        row = Row(id=r["id"], phase=r["phase"], metric=r["metric"], measured=r["value"],
                  hardware=r["hardware"], workload=r["workload"], file=path.name,
                  software=r["software"], pending=pending)
        rows.append(row)
        hw, hw_skip = _reference(r["hardware"], "hardware", hw_known, path.parent)
        wl, wl_skip = _reference(r["workload"], "workload", wl_known, path.parent)
        if hw_skip or wl_skip:
            row.skipped = hw_skip or wl_skip
        else:
            r.update(hardware=hw, workload=wl)  # as loaded: a path relative to the CSV's
            row.loaded_as = hw
            # a training step takes one global batch; max is resolved per design
            alone = phases.get(r["phase"]).trains or r["batch"] == "max"
            key = (*(r[k] for k in _KEY), r["batch"] if alone else None)
            groups.setdefault(key, []).append(len(rows) - 1)
    return _Plan(path, records, rows, groups)


def _within_limits(plans: Sequence[_Plan]) -> None:
    """DseError naming the first row of the scenario past MAX_SCENARIOS (or past
    MAX_TRAINING_SCENARIOS in phase training), counted over all the files of a run."""
    count = training = 0
    phase = _KEY.index("phase")
    for plan in plans:
        for key, members in plan.groups.items():
            count += 1
            training += phases.get(key[phase]).trains
            where = f"{plan.path}:{plan.records[members[0]]['line']}"
            if count > MAX_SCENARIOS:
                raise DseError(
                    f"{where}: more than {MAX_SCENARIOS:,} distinct scenarios (rows that "
                    "differ in more than their batch are an evaluation each), the limit of "
                    "one dse validate run; split the measurements")
            if training > MAX_TRAINING_SCENARIOS:
                raise DseError(
                    f"{where}: more than {MAX_TRAINING_SCENARIOS} distinct training "
                    "scenarios (each plans its own step), the limit of one dse validate "
                    "run; split the measurements")


def _run_file(path: Path, records: list[dict], progress: Progress | None = None,
              loaded: dict | None = None) -> list[Row]:
    """Predict every row of one measurement file (its records, as read_measurements gives
    them): rows grouped by everything but their batch, each group one `evaluate` call over
    its distinct batches, so N rows cost about as many evaluations as distinct scenarios
    (at most MAX_SCENARIOS). `loaded`: the specs read so far (by name or resolved path),
    shared by the files of one run."""
    plan = _plan(path, records)
    _within_limits([plan])
    return _run_plan(plan, progress, loaded)


def _offset(progress: Progress, done: int, total: int) -> Progress:
    """`progress` of one file's rows as of all files' (`done` rows before this file's)."""
    return lambda n, _t: progress(done + n, total)


def _run_plan(plan: _Plan, progress: Progress | None = None,
              loaded: dict | None = None) -> list[Row]:
    """Model the groups of one planned file. A row whose evaluation raises is found by
    evaluating its group's rows one at a time; the error of the first such row in the file
    is raised, naming its line."""
    path, records, rows, groups = plan.path, plan.records, plan.rows, plan.groups
    loaded = {} if loaded is None else loaded
    first_error: tuple[int, str] | None = None
    done = len(records) - sum(len(m) for m in groups.values())  # the skipped ones
    for members in groups.values():  # in the order of their first rows
        if first_error is not None and records[members[0]]["line"] > first_error[0]:
            break  # a later row's error cannot be the first
        try:
            _run_group([records[i] for i in members], [rows[i] for i in members], loaded)
        except DseError:  # which row: the group's first that fails on its own
            for i in members:
                try:
                    _run_group([records[i]], [rows[i]], loaded)
                except DseError as e:
                    if rows[i].pending:  # reported with its reason; the others still run
                        rows[i].skipped = f"pending: {_in_columns(e)}"
                        continue
                    line = records[i]["line"]
                    if first_error is None or line < first_error[0]:
                        first_error = (line, _in_columns(e))
                    break
        done += len(members)
        if progress is not None:
            progress(done, len(records))
    if first_error is not None:
        raise DseError(f"{path}:{first_error[0]}: {first_error[1]}")
    return rows


def _reference(ref: str, kind: str, known: set[str], folder: Path) -> tuple[str, str | None]:
    """(what to load, why the row is skipped or None) for a hardware or workload cell: a
    shipped name, a `gemm:MxNxK` workload, or the path of a spec file (`./my-chip.yaml`, as
    everywhere a name is taken), relative to the CSV's folder as `base:` is to its file."""
    if ref in known or (kind == "workload" and is_gemm_name(ref)):
        return ref, None
    if looks_like_path(ref):
        file = Path(ref).expanduser()
        file = file if file.is_absolute() else folder / file
        if file.is_file():
            return str(file), None
        return ref, f"{kind} file '{ref}' not found (a path is relative to the CSV's folder)"
    return ref, f"{kind} '{ref}' is not in the library"


def _in_columns(error: DseError) -> str:
    """A row's error with each field named as the CSV does: a scenario or execution field
    by its column (seq_in), a design path as the option that sets it."""
    if error.field is None and not error.also:  # unstructured (a subclass words itself)
        return str(error)
    return error.worded(lambda p: p.field if p.field in (*COLUMNS, *OPTIONAL_COLUMNS)
                        else scenario_fields.cli_name(p), flags=False)


def _load(kind: str, name: str, loaded: dict[tuple[str, str], Any]) -> Any:
    """A library hardware design (spec, tech) or workload by name, read once per run."""
    if (kind, name) not in loaded:
        if kind == "hardware":  # its one design built once, not by every evaluation
            spec, tech, _ = load_design(name)
            loaded[kind, name] = (design_batch(spec), tech)
        else:
            loaded[kind, name] = load_workload(name)
    return loaded[kind, name]


def _seq_in(wl: WorkloadSpec, r: dict) -> int | None:
    """The seq_in a row asks of the model. The measurement files' convention (shared/
    validation/README.md): a data set's row gives its sequence limit ("MLPerf BERT-99 runs
    SQuAD with sequences up to 384 tokens; harnesses skip padding"), so a row whose seq_in is
    the limit of its scenario's length distribution runs that distribution (None keeps it);
    any other seq_in is the length run, as everywhere else."""
    if not r["seq_in"] and KINDS[wl.kind].context(wl) is None:
        return None  # not a sequence model
    _, sc = resolve_scenario(wl, phase=r["phase"])
    if not r["seq_in"]:
        # blank: the scenario's data set (its length distribution); a fixed default length
        # is not what the measurement ran
        if getattr(sc, "lengths", None) is None:
            raise DseError(f"blank, but {wl.name} is a sequence model whose {r['phase']} "
                           "scenario names no length distribution: give the prompt (or "
                           "sequence) length the measurement ran",
                           field="seq_in", rule="the length the measurement ran")
        return None
    seq_in = int(r["seq_in"])
    if getattr(sc, "lengths", None) is not None and sc.seq_in == seq_in:
        return None
    return seq_in


def _run_group(records: list[dict], rows: list[Row], loaded: dict) -> None:
    """Predict `rows` (with their `records`), which share every model input but the batch,
    in one evaluation: a batch per design when they are whole numbers."""
    r = records[0]
    designs, tech = _load("hardware", r["hardware"], loaded)
    wl = _load("workload", r["workload"], loaded)
    batches = [rec["batch"] for rec in records]
    distinct = list(dict.fromkeys(batches))
    res = evaluate(
        designs, wl, tech=tech, phase=r["phase"],
        batch=distinct if len(distinct) > 1 else distinct[0],
        precision=r["precision"] or None, kv_precision=r["kv_precision"] or None,
        sparsity=r["sparsity"] or None, stack=stack_for_software(r["software"]),
        seq_in=_seq_in(wl, r),
        seq_out=int(r["seq_out"]) if r["seq_out"] else None,
        chips=r["chips"], tp=r["tp"], pp=r["pp"], cp=r["cp"], ep=r["ep"])
    design = {b: i for i, b in enumerate(distinct)} if res.n > 1 else dict.fromkeys(distinct, 0)
    # the bound of each design's longest operator (count x time), as op_records(i)[0] has it
    spent = res.ops_spent
    longest = np.argmax(spent, axis=1) if spent.shape[1] else None
    bounds = res.ops_bound[np.arange(res.n), longest] if longest is not None else None
    for rec, row in zip(records, rows, strict=True):
        i = design[rec["batch"]]
        if not res.feasible[i]:
            row.skipped = f"infeasible on the model: {res.reason[i]}"
            continue
        row.stack = str(res.scenario.stack or "")
        row.predicted = float(res.metrics[rec["metric"]][i])
        row.rel_error = (row.predicted - row.measured) / row.measured
        row.bound = str(bounds[i]) if bounds is not None else None
        for (prefix, phase), note in NOTES.items():
            if rec["workload"].startswith(prefix) and rec["phase"] == phase:
                row.note = note
