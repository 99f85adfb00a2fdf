"""Bounded work (issue 15, item 2): sweeps have a size limit, and the API evaluates any
number of designs in chunks.

H3 (a 200 x 200 x 200 `dse workload` sweep: 116 s and 5.8 GB before it ran out of memory)
runs in a subprocess under a timeout and a 500 MiB address-space limit and gets a one-line
error at once. Chunked evaluation gives the same numbers as one pass, and its memory stays
near the result's own size: measured with tracemalloc here, and in a subprocess with a
memory limit that one pass over the same designs exceeds.
"""

from __future__ import annotations

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
        "of 10,000 a sweep may have; narrow the lists or split the sweep (README, Input "
        "limits)"]
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
])
def test_eval_sweeps_above_the_limit_are_one_line_errors(args, start):
    r = runner.invoke(app, ["eval", "h100-sxm", "llama2-7b", "--phase", "decode", *args])
    assert r.exit_code == 2, r.output
    (line,) = r.stderr.splitlines()
    assert line.startswith(start), line
    assert line.endswith("above the limit of 10,000 a sweep may have; narrow the lists or "
                         "split the sweep (README, Input limits)")


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

def _same(a: object, b: object, where: str = "") -> None:
    """Two Evaluations (or parts of them) hold the same values."""
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.shape == b.shape, where
        if a.dtype.kind in "fc":
            np.testing.assert_array_equal(a, b, err_msg=where)
        else:
            assert (a == b).all(), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where  # type: ignore[attr-defined]
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")  # type: ignore[index]
    elif hasattr(a, "__dataclass_fields__") and not isinstance(a, type):
        for k in a.__dataclass_fields__:
            if k not in ("batch", "spec"):
                _same(getattr(a, k), getattr(b, k), f"{where}.{k}")
    else:
        assert a == b, where


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


def test_chunks_bound_the_working_memory(monkeypatch):
    """The traced peak of 20,000 designs in chunks of 2,000 is a fraction of one pass's."""
    hw, wl = dse.load_hardware("h100-sxm"), dse.load_workload("llama2-7b")
    overrides = {"memory.L2.capacity": np.linspace(1e7, 1e8, 20_000)}

    def peak(chunk: int) -> int:
        monkeypatch.setattr(chunks, "CHUNK_DESIGNS", chunk)
        tracemalloc.start()
        try:
            dse.evaluate(hw, wl, phase="serve", batch="max", overrides=overrides)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    one_pass, chunked = peak(10**9), peak(2_000)
    assert chunked < 0.5 * one_pass, (chunked, one_pass)


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
