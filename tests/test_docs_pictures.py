"""The README's pictures are drawn by the commands tools/docs_pictures.py names, and every
picture the README shows is in docs/images/."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("docs_pictures",
                                                  ROOT / "tools" / "docs_pictures.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_pictures_draw(tmp_path: Path) -> None:
    written = _tool().draw(tmp_path)
    assert [p.name for p in written] == list(_tool().PICTURES)
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000


def test_every_readme_picture_is_shipped() -> None:
    shown = re.findall(r"!\[[^\]]*\]\((docs/images/[^)]+)\)", (ROOT / "README.md").read_text())
    assert len(shown) >= 3
    for path in shown:
        assert (ROOT / path).is_file(), path
    drawn = set(_tool().PICTURES) | {"middle-ground-pareto.png"}  # tools/readme_answer.py
    assert {Path(p).name for p in shown} <= drawn
