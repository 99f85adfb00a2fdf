"""A database URL's password never appears in output or files: error lines, run.json."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from dse.cli import app
from dse.search.urls import redact

TINY = Path(__file__).resolve().parents[2] / "studies" / "middle-ground.yaml"


def test_redact_hides_every_password_and_nothing_else():
    assert redact("postgresql://dse:s3cret@127.0.0.1:5432/db") == \
        "postgresql://dse:***@127.0.0.1:5432/db"
    assert redact("postgresql+psycopg://u:p%40ss@h/db and mysql://a:b@c/d") == \
        "postgresql+psycopg://u:***@h/db and mysql://a:***@c/d"
    for plain in ("postgresql://u@h/db", "runs/x/study.journal", "sqlite:///a.db",
                  "http://host:8080/path"):
        assert redact(plain) == plain


def test_an_unreachable_database_error_shows_no_password(tmp_path: Path):
    r = CliRunner().invoke(app, ["study", str(TINY), "--out", str(tmp_path / "o"), "--storage",
                                 "postgresql://dse:s3cret@127.0.0.1:1/none", "-q",
                                 "--trials", "10"])
    assert r.exit_code == 2
    assert "s3cret" not in r.output and "dse:***@127.0.0.1:1/none" in r.output


def test_run_json_keeps_no_password(postgres_url: str, tmp_path: Path):
    url = postgres_url.replace("://dse@", "://dse:s3cret@")  # trust auth ignores it
    out = tmp_path / "o"
    r = CliRunner().invoke(app, ["study", str(TINY), "--out", str(out), "--storage", url,
                                 "-q", "--trials", "20", "--batch", "10",
                                 "--no-alternatives"])
    assert r.exit_code == 0, r.output
    assert "s3cret" not in r.output
    record = json.loads((out / "run.json").read_text())
    assert record["storage"] == url.replace("s3cret", "***")
    for f in out.iterdir():
        if f.suffix in (".json", ".yaml", ".md", ".csv"):
            assert "s3cret" not in f.read_text(), f.name
