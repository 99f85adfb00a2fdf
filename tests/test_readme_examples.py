"""Every complete spec the README shows (a YAML block with a name and a source) passes
`dse check` as written, without a warning, and a hardware example that names a process node
prices (`dse area`): examples a reader copies must work."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dse.cli import app

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```yaml\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
COMPLETE = [b for b in BLOCKS if re.search(r"^name:", b, re.M)
            and re.search(r"^source:", b, re.M)]


def test_the_readme_shows_complete_examples() -> None:
    assert len(COMPLETE) >= 4


@pytest.mark.parametrize("block", COMPLETE, ids=[re.search(r"^name:\s*(\S+)", b, re.M)[1]
                                                 for b in COMPLETE])
def test_readme_example_checks(block: str, tmp_path: Path) -> None:
    name = re.search(r"^name:\s*(\S+)", block, re.M)[1]
    path = tmp_path / f"{name}.yaml"
    path.write_text(block)
    result = CliRunner().invoke(app, ["check", str(path)])
    assert result.exit_code == 0, result.output
    assert "warning" not in result.stderr, result.stderr


PRICED = [b for b in COMPLETE if re.search(r"^technology:", b, re.M)]


def test_the_readme_shows_a_priced_hardware_example() -> None:
    assert PRICED


@pytest.mark.parametrize("block", PRICED, ids=[re.search(r"^name:\s*(\S+)", b, re.M)[1]
                                               for b in PRICED])
def test_readme_hardware_example_prices(block: str, tmp_path: Path) -> None:
    """'where it names a process node and a compute style the area model prices it': the
    from-scratch example does, within 5% of the die area it publishes."""
    name = re.search(r"^name:\s*(\S+)", block, re.M)[1]
    path = tmp_path / f"{name}.yaml"
    path.write_text(block)
    result = CliRunner().invoke(app, ["area", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    chip = doc[0] if isinstance(doc, list) else doc
    assert chip["total_mm2"] > 0
    published = float(re.search(r"die_area:\s*([\d.]+)\s*mm2", block)[1])
    assert abs(chip["total_mm2"] / published - 1) < 0.05
