"""Lint and architecture checks are part of the test run, called through this interpreter so
they cannot be skipped for want of a command on PATH: ruff keeps the code lint-clean;
import-linter keeps the layer order of DESIGN.md (cli -> command modules -> report, validate
-> search -> model -> workloads -> spec -> units, errors) with every module in a layer, no
import cycle, workload kinds independent of each other and a model core that imports no I/O,
plotting or CLI library (contracts in pyproject.toml); mypy keeps the package type-clean,
strict on the model core ([tool.mypy] in pyproject.toml)."""

import subprocess
import sys
import tomllib
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


def _layer_modules() -> list[str]:
    """The modules the layers contract of pyproject.toml names, `:` and `|` separated."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    return [m.strip() for layer in layers for m in layer.replace("|", ":").split(":")]


def _outside(named: list[str]) -> list[str]:
    """The modules of dse in none of the `named` modules or packages (the root package, the
    API, aside)."""
    modules = []
    for path in (ROOT / "dse").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(m for m in modules if m != "dse"
                  and not any(m == n or m.startswith(n + ".") for n in named))


def test_every_module_is_in_a_layer():
    """A module in no layer may import anything and anything may import it (the cli_*
    modules once held a cycle and two upward imports that way)."""
    assert _outside(_layer_modules()) == [], "modules in no import-linter layer (pyproject.toml)"


def test_a_module_outside_the_layers_is_found():
    named = [m for m in _layer_modules() if not m.startswith("dse.cli")]
    assert {"dse.cli", "dse.cli_plot", "dse.cli_errors"} <= set(_outside(named))


def test_types():
    """mypy over the package reports no error (settings: [tool.mypy] in pyproject.toml; its
    cache, .mypy_cache, makes a second run take seconds)."""
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr
    assert "Success: no issues found" in result.stdout
