"""Nothing silent at the spec boundary (issue 26, item 5): a training scenario's compression
that is infinite, NaN or below its range is refused, naming the file and the key path (the
model's own TrainingPlan check is in tests/model/test_nothing_silent.py)."""

import re
from pathlib import Path

import pytest

from dse.errors import SpecError
from dse.spec import load

WORKLOADS = Path(__file__).resolve().parents[2] / "workloads"


@pytest.mark.parametrize(("compression", "expected"), [
    ("{factor: .inf}", "compression.factor: expected a finite number, found inf"),
    ("{factor: .nan}", r"compression.factor: expected a number >= 1.0, found nan"),
    ("{factor: -.inf}", r"compression.factor: expected a number >= 1.0, found -inf"),
    ("{factor: 0.5}", r"compression.factor: expected a number >= 1.0, found 0.5"),
    ("{factor: 2, flops_per_byte: .inf}", "compression.flops_per_byte: expected a finite"),
    ("{factor: 2, flops_per_byte: .nan}", "compression.flops_per_byte: expected a number"),
])
def test_non_finite_or_out_of_range_compression_is_refused(tmp_path, compression, expected):
    text = (WORKLOADS / "mpt-7b.yaml").read_text()
    old = "foundry-training: {phase: training, batch: 48, seq_in: 2048, precision: bf16}"
    assert old in text
    path = tmp_path / "mpt.yaml"
    path.write_text(text.replace(old, old[:-1] + f", training: {{compression: {compression}}}}}"))
    with pytest.raises(SpecError) as info:
        load.load_workload(str(path))
    (line,) = info.value.lines()
    assert line.startswith(f"{path}:27:")
    assert "scenarios.foundry-training.training." in line
    assert re.search(expected, line), line
