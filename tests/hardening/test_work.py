"""Bounded work (issue 15, item 2): sweeps have a size limit, and the API evaluates any
number of designs in chunks.

H3 (a 200 x 200 x 200 `dse workload` sweep: 116 s and 5.8 GB before it ran out of memory)
runs in a subprocess under a timeout and a 500 MiB address-space limit and gets a one-line
error at once. Chunked evaluation gives the same numbers as one pass, and its memory stays
near the result's own size: measured with tracemalloc here, and in a subprocess with a
memory limit that one pass over the same designs exceeds.
"""

from __future__ import annotations

import dataclasses
import subprocess
import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from running import limited_python
from typer.testing import CliRunner

import dse
from dse.cli import app
from dse.errors import DseError
from dse.model import chunks
from dse.model.reasons import Reasons
from dse.spec.load import load_design
from dse.sweep import MAX_POINTS, check_points, expand, sweep

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60  # the promise for a reproducer is 5 s; the margin is for a loaded machine
runner = CliRunner()


def _subprocess(args: list[str], memory_bytes: int) -> tuple[subprocess.CompletedProcess,
                                                             float]:
    """`python ARGS` from this checkout under TIMEOUT_S and an address-space limit."""
    return limited_python(args, ROOT, TIMEOUT_S, memory_bytes)


def _values(n: int, start: int = 1) -> str:
    return ",".join(str(i) for i in range(start, start + n))


# --- sweep limits -------------------------------------------------------------------------

def test_h3_workload_grid_is_refused_at_once():
    """H3: 200 x 200 x 200 = 8,000,000 points (116 s, 5.8 GB, MemoryError before)."""
    values = _values(200)
    r, seconds = _subprocess(["-m", "dse", "workload", "llama2-7b", "--format", "csv",
                              "--seq-in", values, "--seq-out", values, "--batch", values],
                             500 << 20)
    assert "Traceback" not in r.stderr and r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [
        "--batch x --seq-in x --seq-out: 200 x 200 x 200 = 8,000,000 points, above the limit "
        "of 10,000 a sweep may have; narrow the lists or split the sweep (docs: "
        "guide/commands.md, Input limits)"]
    assert r.stdout == ""
    assert seconds < 20


@pytest.mark.parametrize("args,start", [
    (["--grid", "--set", f"memory.L2.capacity={_values(101)}",
      "--set", f"compute.units={_values(100)}"],
     "--set memory.L2.capacity x --set compute.units: 101 x 100 = 10,100 points"),
    (["--set", f"compute.units={_values(MAX_POINTS + 1)}"],
     "--set compute.units: 10,001 points"),
    (["--set", f"compute.units={_values(MAX_POINTS + 1)}",
      "--set", f"compute.clock={_values(MAX_POINTS + 1, 10**9)}"],
     "--set compute.units, --set compute.clock: 10,001 zipped points"),
    (["--grid", "--seq-in", _values(100), "--seq-out", _values(101)],
     "--seq-in x --seq-out: 100 x 101 = 10,100 points"),
    (["--seq-in", _values(257)], "--seq-in: 257 scenarios, above the limit of 256"),
    (["--grid", "--seq-in", _values(20), "--seq-out", _values(13), "--batch", _values(30)],
     "--seq-in x --seq-out: 260 scenarios"),
])
def test_eval_sweeps_above_the_limit_are_one_line_errors(args, start):
    r = runner.invoke(app, ["eval", "h100-sxm", "llama2-7b", "--phase", "decode", *args])
    assert r.exit_code == 2, r.output
    (line,) = r.stderr.splitlines()
    assert line.startswith(start), line
    assert line.endswith("above the limit of 10,000 a sweep may have; narrow the lists or "
                         "split the sweep (docs: guide/commands.md, Input limits)") or \
        line.endswith("a sweep evaluates one by one; narrow these lists (whole-number batches "
                      "and --set lists are evaluated together, up to 10,000 points; docs: "
                      "guide/commands.md, Input limits)"), line


def test_the_limit_counts_points_not_values():
    assert check_points({"batch": 100, "seq_in": 100}) == MAX_POINTS
    assert check_points({"batch": MAX_POINTS, "seq_in": 1}) == MAX_POINTS
    assert check_points({"a": MAX_POINTS, "b": MAX_POINTS}, "zip") == MAX_POINTS
    assert check_points({}) == 1
    with pytest.raises(DseError, match=r"^--batch x --seq-in: 101 x 100 = 10,100 points"):
        check_points({"batch": 101, "seq_in": 100, "seq_out": 1})
    # The API's sweep() obeys it too, before building a single point.
    with pytest.raises(DseError, match="10,000 a sweep may have"):
        expand({"batch": list(range(1, 10**3)), "seq_in": list(range(1, 10**3)),
                "seq_out": list(range(1, 10**3))}, "grid")


def test_a_sweep_at_the_limit_runs():
    """10,000 hardware designs in one sweep (one vectorized evaluation)."""
    hw, tech, _ = load_design("h100-sxm")
    sw = sweep(hw, dse.load_workload("llama2-7b"), values={
        "phase": "decode", "memory.L2.capacity": [f"{i} MiB" for i in range(1, 101)],
        "compute.units": list(range(33, 133))}, mode="grid", tech=tech)
    assert sw.n == MAX_POINTS
    assert len(sw.evaluations) == 1



# --- chunked evaluation -------------------------------------------------------------------

def _same(a: object, b: object, where: str = "", rtol: float = 0.0) -> None:
    """Two Evaluations (or parts of them) hold the same values (floats within `rtol`)."""
    if isinstance(a, Reasons):  # worded when read: compare the texts
        a, b = np.asarray(a), np.asarray(b)
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.shape == b.shape, where
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(a, b, rtol=rtol, atol=0, err_msg=where)
        else:
            assert (a == b).all(), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where  # type: ignore[attr-defined]
        for k in a:
            _same(a[k], b[k], f"{where}.{k}", rtol)  # type: ignore[index]
    elif hasattr(a, "__dataclass_fields__") and not isinstance(a, type):
        for k in a.__dataclass_fields__:
            if k not in ("batch", "spec"):
                _same(getattr(a, k), getattr(b, k), f"{where}.{k}", rtol)
    else:
        assert a == b, where


def test_a_batch_sweep_is_one_evaluation_with_the_same_numbers():
    """Points that differ only in batch run as one evaluation (a batch per design), with the
    frame a point-by-point sweep gives."""
    hw, tech, _ = load_design("h100-sxm")
    wl = dse.load_workload("llama2-7b")
    values = {"phase": "decode", "batch": [1, 3, 8, 64, 3],
              "compute.units": [132, 100, 66, 132, 66]}
    together = sweep(hw, wl, values=values, tech=tech)
    assert len(together.evaluations) == 1 and together.n == 5
    for r in range(5):
        alone = sweep(hw, wl, values={k: v[r] if isinstance(v, list) else v
                                      for k, v in values.items()}, tech=tech)
        row, one = together.frame.iloc[r], alone.frame.iloc[0]
        assert row["batch"] == values["batch"][r]
        for col in one.index:
            assert row[col] == one[col] or (row[col] != row[col] and one[col] != one[col]), col


# --- a batch per design ---------------------------------------------------------------------

@pytest.mark.parametrize("workload,phase,kwargs", [
    ("llama2-7b", "decode", {}), ("llama2-7b", "prefill", {"chips": 2}),
    ("llama2-70b", "serve", {"chips": 8, "tp": 4, "pp": 2}),
    ("mixtral-8x7b", "decode", {"chips": 8, "tp": 8}), ("bert-large", "inference", {}),
    ("dlrm-dcnv2", "inference", {}), ("gemm:1024x1024x1024", "gemm", {}),
])
def test_a_batch_per_design_equals_one_evaluation_per_batch(workload, phase, kwargs):
    """evaluate(batch=[...]) is the evaluations of each batch on its own, field by field
    (batch 3 on 2 chips: a batch the replicas do not share evenly), to rounding: numpy
    sums an [N, J] row in another order than a [1, J] one (1 ulp seen)."""
    hw, tech, _ = load_design("h100-sxm")
    wl = dse.load_workload(workload)
    batches = [1, 3, 64, 1000]
    ev = dse.evaluate(hw, wl, phase=phase, batch=batches, tech=tech, **kwargs)
    assert ev.n == 4 and ev.batch_values.tolist() == batches
    for i, b in enumerate(batches):
        one = dse.evaluate(hw, wl, phase=phase, batch=b, tech=tech, **kwargs)
        assert ev.scenario_of(i).batch == b and ev.scenario_overrides_of(i)["batch"] == b
        for field in ("feasible", "reason", "sequences", "ops_time", "ops_count",
                      "ops_bound_code", "memory_bytes"):
            _same(getattr(ev, field)[i:i + 1], getattr(one, field), field, 1e-12)
        _same({k: v[i:i + 1] for k, v in ev.metrics.items()}, one.metrics, "metrics", 1e-12)


@pytest.mark.parametrize("batch,kwargs,says", [
    ([1, 2], {"overrides": {"compute.units": [1, 2, 3]}}, "batch: 2 batches for 3 designs"),
    ([1, True], {}, "batch: expected positive whole numbers, found True"),
    ([1, 2.5], {}, "batch: expected positive whole numbers, found 2.5"),
    ([1, 0], {}, "batch: expected positive whole numbers, found 0"),
    ([], {}, "batch: expected at least one batch"),
    ([8, 16], {"phase": "training"}, "batch: phase training takes one global batch"),
])
def test_a_bad_batch_per_design_is_a_one_line_error(batch, kwargs, says):
    hw = dse.load_hardware("h100-sxm")
    with pytest.raises(DseError) as e:
        dse.evaluate(hw, dse.load_workload("llama2-7b"), **{"phase": "decode", **kwargs},
                     batch=batch)
    assert str(e.value).startswith(says) and "\n" not in str(e.value), str(e.value)


def test_a_batch_per_design_is_chunked_with_its_designs(monkeypatch):
    hw = dse.load_hardware("h100-sxm")
    wl = dse.load_workload("llama2-7b")
    batches = list(range(1, 26))
    whole = dse.evaluate(hw, wl, phase="decode", batch=batches)
    monkeypatch.setattr(chunks, "CHUNK_DESIGNS", 7)
    parts = dse.evaluate(hw, wl, phase="decode", batch=batches)
    assert parts.n == 25 and parts.batch.n == 25
    _same(parts, whole)


@pytest.mark.parametrize("phase,batch,with_tech", [
    ("decode", None, True), ("decode", None, False), ("prefill", 4, True),
    ("serve", "max", True), ("serve", "best", False),
])
def test_chunked_evaluation_gives_the_same_numbers(monkeypatch, phase, batch, with_tech):
    """25 designs (some infeasible: too little memory) in chunks of 7 (or 7 // 12 -> 1 with
    batch best) equal one pass over all of them, field by field."""
    hw, tech, _ = load_design("h100-sxm")
    wl = dse.load_workload("llama2-7b")
    overrides = {"memory.HBM3.capacity": np.geomspace(4e9, 80e9, 25),
                 "compute.units": np.arange(25) % 5 * 30 + 12}
    kwargs = dict(phase=phase, batch=batch, tech=tech if with_tech else None,
                  overrides=overrides)
    monkeypatch.setattr(chunks, "CHUNK_DESIGNS", 10**9)
    whole = dse.evaluate(hw, wl, **kwargs)
    monkeypatch.setattr(chunks, "CHUNK_DESIGNS", 7 if batch != "best" else 24)
    parts = dse.evaluate(hw, wl, **kwargs)
    assert not whole.feasible.all() and whole.feasible.any()
    assert parts.n == whole.n == 25 and parts.batch.n == 25
    _same(parts, whole)


def test_chunked_evaluation_takes_a_design_batch(monkeypatch):
    hw = dse.load_hardware("h100-sxm")
    db = dse.design_batch(hw, {"memory.L2.capacity": np.linspace(1e6, 1e8, 10)})
    wl = dse.load_workload("llama2-7b")
    whole = dse.evaluate(db, wl, phase="decode")
    monkeypatch.setattr(chunks, "CHUNK_DESIGNS", 3)
    _same(dse.evaluate(db, wl, phase="decode"), whole)


def _result_bytes(x: object) -> int:
    """Bytes of an Evaluation's own arrays (broadcast rows counted once: they hold one)."""
    if isinstance(x, np.ndarray):
        return 0 if x.ndim and x.strides[0] == 0 else x.nbytes
    if isinstance(x, dict):
        return sum(_result_bytes(v) for v in x.values())
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return sum(_result_bytes(getattr(x, f.name)) for f in dataclasses.fields(x)
                   if f.name != "batch")
    return 0


def test_chunks_bound_the_working_memory(monkeypatch):
    """The traced peak of 20,000 designs in chunks of 2,000, beyond the result itself, is a
    fraction of one pass's."""
    hw, wl = dse.load_hardware("h100-sxm"), dse.load_workload("llama2-7b")
    overrides = {"memory.L2.capacity": np.linspace(1e7, 1e8, 20_000)}

    def peak(chunk: int) -> tuple[int, int]:
        monkeypatch.setattr(chunks, "CHUNK_DESIGNS", chunk)
        tracemalloc.start()
        try:
            ev = dse.evaluate(hw, wl, phase="serve", batch="max", overrides=overrides)
            return tracemalloc.get_traced_memory()[1], _result_bytes(ev)
        finally:
            tracemalloc.stop()

    (one_pass, result), (chunked, _) = peak(10**9), peak(2_000)
    assert chunked - result < 0.5 * (one_pass - result), (chunked, one_pass, result)


def test_many_designs_run_under_a_memory_limit():
    """200,000 designs (serve, batch max; results ~255 MB of arrays) under a 1.2 GB address
    space limit, which one pass over them (~1.6 GB) exceeds."""
    code = textwrap.dedent("""
        import numpy as np, dse
        from dse.spec.load import load_design
        hw, tech, _ = load_design("h100-sxm")
        ev = dse.evaluate(hw, dse.load_workload("llama2-7b"), phase="serve", batch="max",
                          overrides={"memory.L2.capacity": np.linspace(1e7, 1e8, 200_000)})
        assert ev.n == 200_000 and ev.feasible.all()
        print("ok")
    """)
    r, _ = _subprocess(["-c", code], 1200 << 20)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


# --- dse validate in groups -----------------------------------------------------------------

def _h4_csv(path: Path, unique: bool) -> Path:
    """H4: 100,000 rows cycling through the shipped measurements (their ids repeated, as
    the reproducer has them, or made unique)."""
    head, *rows = (ROOT / "validation" / "measurements.csv").read_text().rstrip("\n").split("\n")
    lines = [head]
    for i in range(100_000):
        row = rows[i % len(rows)]
        lines.append(f"H{i},{row.split(',', 1)[1]}" if unique else row)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_h4_repeated_ids_are_refused_before_any_row_is_modelled(tmp_path):
    """H4 as given repeats the shipped ids: a one-line error at the first repeat, at once
    (before: every row modelled first, ~25 min)."""
    csv = _h4_csv(tmp_path / "H4.csv", unique=False)
    r, seconds = _subprocess(["-m", "dse", "validate", "--measurements", str(csv),
                              "--format", "json"], 500 << 20)
    first = (ROOT / "validation" / "measurements.csv").read_text().split("\n")[1].split(",")[0]
    rows = len((ROOT / "validation" / "measurements.csv").read_text().strip().split("\n")) - 1
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.splitlines() == [
        f"{csv}:{rows + 2}: id: {first} is also at {csv}:2; ids must be unique across the "
        "files validated together"]
    assert seconds < 20


def test_h4_100000_rows_are_modelled_in_groups(tmp_path):
    """H4 with unique ids: 100,000 rows modelled and written as JSON (~6 s on one core,
    ~370 MB; before: ~15 ms a row, ~25 min)."""
    csv = _h4_csv(tmp_path / "H4.csv", unique=True)
    r, seconds = _subprocess(["-m", "dse", "validate", "--measurements", str(csv),
                              "--format", "json"], 1200 << 20)
    assert r.returncode == 0 and r.stderr == "", r.stderr[-2000:]
    assert '"n": 100000' in r.stdout
    assert seconds < 40


def test_grouped_rows_equal_rows_modelled_one_at_a_time(tmp_path):
    """The shipped rows plus batch variants of them: each group's rows (one evaluation) get
    the numbers, bounds and reasons the row gets alone."""
    from dse import validate

    head, *rows = (ROOT / "validation" / "measurements.csv").read_text().strip().split("\n")
    extra = []
    for row in rows:
        cells = row.split(",")
        if cells[8].isdigit() and cells[6] != "training":
            for b in (1, 7, 96):
                extra.append(",".join([f"{cells[0]}b{b}", *cells[1:8], str(b), *cells[9:]]))
    csv = tmp_path / "m.csv"
    csv.write_text("\n".join([head, *rows, *extra]) + "\n")
    records = validate.read_measurements(csv)
    together = validate._run_file(csv, records)
    loaded: dict = {}
    for rec, row in zip(records, together, strict=True):
        alone = validate.Row(id=rec["id"], phase=rec["phase"], metric=rec["metric"],
                             measured=rec["value"], hardware=rec["hardware"],
                             workload=rec["workload"])
        validate._run_group([rec], [alone], loaded)
        assert (row.skipped, row.bound) == (alone.skipped, alone.bound), row.id
        if alone.predicted is None:  # infeasible (e.g. a batch that does not fit): both say so
            assert row.predicted is None, row.id
            assert row.skipped, row.id
        else:
            assert row.predicted == pytest.approx(alone.predicted, rel=1e-12), row.id
    assert len(extra) > 30
    # some variants are infeasible (batch 96 of M054 does not fit): the None branch is exercised
    assert any(r.predicted is None for r in together)


def test_a_failing_row_in_a_group_is_named_by_its_line(tmp_path):
    """Rows 2-4 are one group; the one whose batch the model refuses is the line named."""
    from dse import validate

    head = (ROOT / "validation" / "measurements.csv").read_text().split("\n")[0]
    row = "{},h100-sxm,1,1,1,llama2-7b,decode,bf16,{},128,128,decode_tokens_per_s,100,high,x"
    csv = tmp_path / "m.csv"
    csv.write_text("\n".join([head, row.format("a", 1), row.format("b", 10**300),
                              row.format("c", 4)]) + "\n")
    with pytest.raises(DseError) as e:
        validate.run(csv)
    assert str(e.value).startswith(f"{csv}:3: batch: "), str(e.value)


def test_validate_reports_progress_by_groups(tmp_path):
    from dse import validate

    seen: list[tuple[int, int]] = []
    rows = validate.run(progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (len(rows), len(rows))
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
