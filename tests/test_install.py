"""The installed `dse` entry point runs, and the wheel carries the chip library, so
`dse show NAME` works from any directory after a plain `pip install .`."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_entry_point_runs_outside_the_repository(tmp_path):
    # The console script installed beside this interpreter (not whatever `dse` is on PATH).
    exe = str(Path(sys.executable).parent / "dse")
    assert Path(exe).exists(), "the dse console script is not installed beside python"
    result = subprocess.run([exe, "show", "h100-sxm", "--format", "json"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert '"name": "h100-sxm"' in result.stdout
    bad = subprocess.run([exe, "show", "nonexistent-chip"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr


def test_module_entry_point():
    result = subprocess.run([sys.executable, "-m", "dse", "--version"], capture_output=True,
                            text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0
    assert result.stdout.startswith("dse ")


def test_wheel_ships_the_spec_library(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    wheel = next(tmp_path.glob("dse-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("hwspecs", "workloads", "stacks"):
        shipped = {p.name for p in (ROOT / folder).glob("*.yaml")}
        assert shipped
        for name in shipped:
            assert f"dse/_data/{folder}/{name}" in names
    assert "dse/_data/validation/measurements.csv" in names  # dse validate's default
    assert "dse/cli.py" in names
