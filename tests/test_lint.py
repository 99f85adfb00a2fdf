"""Lint and architecture checks are part of the test run, called through this interpreter so
they cannot be skipped for want of a command on PATH: ruff keeps the code lint-clean, and
import-linter keeps the layer order of DESIGN.md (cli -> report, validate -> model ->
workloads -> spec -> units, errors) and a model core that imports no I/O, plotting or CLI
library (contracts in pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_clean():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "dse", "tests"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_layers():
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename='pyproject.toml'))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout and "KEPT" in result.stdout


def test_test_module_names_are_unique():
    """Test folders have no __init__.py, so pytest imports each test module by its basename:
    two files of one name in two folders stop the whole run at collection."""
    names: dict[str, list[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert not {n: p for n, p in names.items() if len(p) > 1}
