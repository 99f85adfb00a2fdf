"""The README's two commands and the pinned test environment they install from.

A fresh machine must get the versions CI tested: the tests command installs with
requirements/dev.lock as constraints, and the lock pins every package pyproject.toml names.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def first_block() -> dict[str, str]:
    """The README's first code block: comment heading -> the command line under it."""
    text = (ROOT / "README.md").read_text()
    block = text.split("```")[1]
    lines = [ln for ln in block.splitlines()[1:] if ln.strip()]
    return {c.split(":")[0].lstrip("# ").strip(): cmd
            for c, cmd in zip(lines[::2], lines[1::2], strict=True)}


def test_readme_starts_with_the_main_job_and_the_pinned_tests():
    block = first_block()
    assert list(block) == ["main job", "tests"]
    assert "dse study studies/" in block["main job"]
    tests = block["tests"]
    assert "python3 -m venv .venv" in tests
    assert "-c requirements/dev.lock '.[dev]'" in tests
    assert tests.endswith("python -m pytest")


def pins() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for line in (ROOT / "requirements" / "dev.lock").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        if m:
            out.setdefault(m[1].lower().replace("_", "-"), set()).add(m[2])
    return out


def test_the_lock_pins_every_dependency_pyproject_names():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    named = [*project["dependencies"], *(d for extra in project["optional-dependencies"].values()
                                         for d in extra)]
    locked = pins()
    missing = []
    for requirement in named:
        name = re.match(r"[A-Za-z0-9_.\-]+", requirement)[0].lower().replace("_", "-")
        if name not in locked:
            missing.append(name)
    assert not missing, f"not in requirements/dev.lock (run requirements/refresh): {missing}"
    assert len(locked) > 40  # the dependencies' dependencies are pinned too


def test_the_installed_test_tools_are_the_pinned_ones():
    """Run from the README's environment, the test tools are the lock's versions (a machine
    that had an older pytest must not keep it)."""
    from importlib.metadata import version

    locked = pins()
    for tool in ("pytest", "hypothesis", "optuna", "optuna-dashboard", "numpy"):
        assert version(tool) in locked[tool], (tool, version(tool), locked[tool])
