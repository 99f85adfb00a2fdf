"""A workload kind of one's own is one module and one registration
(dse.workloads.register_kind): a toy kind, a stack of square dense layers, is loaded from
its own YAML file, checked, evaluated through the API and the CLI, and keeps the kind
contract."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
from pydantic import Field
from typer.testing import CliRunner

import dse
from dse.cli import app
from dse.contracts import kind_problems
from dse.spec.load import load_hardware, load_workload
from dse.spec.workload import Scenario, WorkloadFile
from dse.workloads import WorkloadKind, register_kind, unregister_kind
from dse.workloads.common import DEFAULT, Counting
from dse.workloads.optable import DTYPE_BYTES, Facts, OpRow, OpTable


class MlpSpec(WorkloadFile):
    """Square dense layers, one after another."""

    kind: Literal["mlp"]
    layers: int = Field(gt=0)
    width: int = Field(gt=0)
    scenarios: dict[str, Scenario] = Field(min_length=1)


def lower_mlp(spec: MlpSpec, sc: Scenario, counting: Counting = DEFAULT,
              batch: Any = None, chips: int = 1) -> OpTable:
    """One GEMM per layer: batch x width times width x width."""
    del counting, chips
    b = np.asarray(batch, dtype=float) if batch is not None else float(sc.batch)
    e, w = DTYPE_BYTES[sc.precision], float(spec.width)
    rows = [OpRow(f"layer{i}", "gemm", "ffn", 1.0, 2.0 * b * w * w,
                  read={"weights": w * w * e, "activations": b * w * e},
                  written={"activations": b * w * e}, m=b, n=w, k=w, batch=1.0,
                  stage="inference", dtype=sc.precision, wdtype=sc.precision,
                  split="column")
            for i in range(spec.layers)]
    return OpTable.from_rows(rows, Facts(phase=sc.phase, batch=b, seq_in=float(sc.seq_in),
                                         resident={"weights": spec.layers * w * w * e}))


def check_mlp(spec: MlpSpec, sc: Scenario, tp: int, pp: int
              ) -> tuple[list[dse.DseError], list[str]]:
    """Tensor parallelism splits the width: an error about field tp, which each route
    words its own way (--tp on the command line)."""
    if spec.width % tp:
        return [dse.DseError(f"{tp}: expected a divisor of the width {spec.width}",
                             field="tp", domain="execution", value=tp,
                             rule=f"a divisor of {spec.width}", inline=True)], []
    return [], []


MLP = WorkloadKind(lower_mlp, check_mlp, lambda spec: None, frozenset({"encode"}))

FILE = """name: mlp-8x4096
source: a toy kind's file (tests/workloads/test_toy_kind.py)
kind: mlp
layers: 8
width: 4096
scenarios:
  batch-64: {phase: inference, batch: 64, seq_in: 1}
"""


@pytest.fixture
def mlp(tmp_path: Path) -> Iterator[Path]:
    register_kind("mlp", MlpSpec, MLP)
    path = tmp_path / "mlp.yaml"
    path.write_text(FILE)
    yield path
    unregister_kind("mlp")


def test_toy_kind_loads_and_evaluates(mlp: Path) -> None:
    wl = load_workload(mlp)
    assert isinstance(wl, MlpSpec)
    ev = dse.evaluate(load_hardware("h100-sxm"), wl)
    assert ev.feasible[0]
    flops = float(np.sum(ev.ops_count[0] * ev.ops_flops[0]))
    assert flops == 8 * 2 * 64 * 4096 * 4096  # the lowering's FLOPs, unchanged
    assert ev.metrics["samples_per_s"][0] == pytest.approx(64 / ev.metrics["step_time_s"][0])


def test_toy_kind_through_the_cli(mlp: Path) -> None:
    r = CliRunner().invoke(app, ["check", str(mlp)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["eval", "h100-sxm", str(mlp), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["metrics"]["samples_per_s"] > 0
    r = CliRunner().invoke(app, ["eval", "h100-sxm", str(mlp), "--phase", "decode"])
    assert r.exit_code == 2
    assert "a mlp workload runs phase inference, not decode" in r.output
    r = CliRunner().invoke(app, ["eval", "h100-sxm", str(mlp), "--tp", "3", "--chips", "3"])
    assert r.exit_code == 2 and "--tp 3: expected a divisor of the width 4096" in r.output


def test_toy_kind_keeps_the_contract(mlp: Path) -> None:
    assert kind_problems("mlp", load_workload(mlp), load_hardware("h100-sxm")) == []


def test_a_kind_is_registered_once(mlp: Path) -> None:
    with pytest.raises(ValueError, match="registered already"):
        register_kind("mlp", MlpSpec, MLP)


def test_unregistered_kind_is_refused_at_its_key(tmp_path: Path) -> None:
    path = tmp_path / "mlp.yaml"
    path.write_text(FILE)
    r = CliRunner().invoke(app, ["check", str(path)])
    assert r.exit_code == 2
    assert "kind: expected a workload kind (transformer, gemm, recommender), found 'mlp'" \
        in r.output
