"""Markdown helpers of the documentation site's generated pages (tools/docs_reference.py):
prose from docstrings and help texts made safe for table cells, code spans and tables."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable

NOTE = ("*Generated from the code when the site is built; a field added to the schema "
        "appears here without editing the documentation.*")


def text(value: str | None) -> str:
    """Prose from a docstring or help text, on one line, safe inside a Markdown table cell:
    runs of whitespace collapsed; outside `code` spans, HTML and emphasis characters and
    pipes escaped."""
    if not value:
        return ""
    parts = re.split(r"(`[^`]*`)", " ".join(value.split()))
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(part.replace("|", "\\|"))
        else:
            out.append(part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                       .replace("*", "\\*").replace("|", "\\|").replace("_", "\\_")
                       .replace("[", "\\["))
    return "".join(out)


def code(value: str) -> str:
    """A `code` span (pipes escaped for tables)."""
    return f"`{value}`".replace("|", "\\|")


def table(header: list[str], rows: Iterable[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def first_paragraph(doc: str | None) -> str:
    return (inspect.cleandoc(doc or "").split("\n\n")[0]).strip()


