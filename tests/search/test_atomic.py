"""Output files are written whole or not at all (dse.search.atomic): a failure while writing
leaves the previous file and no temporary one; a study leaves no temporary file behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from dse.search import atomic


def test_a_failed_write_leaves_the_previous_file(tmp_path: Path):
    path = tmp_path / "trials.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(OSError), atomic.replacing(path) as tmp:
        tmp.write_text("a,b\n")  # a shorter file that would still parse
        raise OSError(28, "No space left on device")
    assert path.read_text() == "a,b\n1,2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["trials.csv"]


def test_a_whole_write_replaces_it_keeping_the_suffix_for_writers(tmp_path: Path):
    path = tmp_path / "pareto.png"
    path.write_bytes(b"old")
    with atomic.replacing(path) as tmp:
        assert tmp.suffix == ".png" and tmp.parent == tmp_path
        tmp.write_bytes(b"new")
    assert path.read_bytes() == b"new"
    atomic.write_text(tmp_path / "summary.md", "# s\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pareto.png", "summary.md"]


def test_a_study_leaves_no_temporary_file(tmp_path: Path):
    from typer.testing import CliRunner

    from dse.cli import app

    study = Path(__file__).resolve().parents[2] / "studies" / "middle-ground.yaml"
    out = tmp_path / "o"
    r = CliRunner().invoke(app, ["study", str(study), "--trials", "40", "--batch", "20",
                                 "--no-alternatives", "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    assert not [p.name for p in out.iterdir() if ".tmp" in p.name]
