"""The docs' example of a phase of one's own (contributing.md, Add a phase) runs as written."""

from __future__ import annotations

import re
from pathlib import Path

from dse import phases

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "contributing.md").read_text()


def test_the_docs_phase_example_runs(capsys) -> None:
    section = PAGE.split("## Add a phase", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S)[1]
    try:
        exec(compile(code, "docs/contributing.md", "exec"), {})
    finally:
        phases.unregister("longprompt")
    out = capsys.readouterr().out
    assert re.fullmatch(r"longprompt \(default\) \d+ ms\n", out), out
    assert "longprompt" not in phases.names()
