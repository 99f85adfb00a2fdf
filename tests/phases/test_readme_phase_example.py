"""The README's example of a phase of one's own runs as written."""

from __future__ import annotations

import re
from pathlib import Path

from dse import phases

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_the_readme_phase_example_runs(capsys) -> None:
    section = README.split("### Phases, workload kinds and the execution", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S)[1]
    try:
        exec(compile(code, "README.md", "exec"), {})
    finally:
        phases.unregister("longprompt")
    out = capsys.readouterr().out
    assert re.fullmatch(r"longprompt \(default\) \d+ ms\n", out), out
    assert "longprompt" not in phases.names()
