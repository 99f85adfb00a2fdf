"""Every complete spec the README shows (a YAML block with a name and a source) passes
`dse check` as written: examples a reader copies must work."""

from __future__ import annotations

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
