"""MkDocs hooks (mkdocs.yml `hooks:`): the pages generated from the code when the site is built.

- `reference/*.md`: every schema field, command, option, API name and metric
  (tools/docs_reference.py), added to the site as generated files: nothing under
  docs/reference/ is kept by hand.
- `validation.md`: at the line `<!-- dse-validate: tables -->`, the accuracy tables of
  `dse validate` on the shipped measurements; its predicted-vs-measured plot is added as
  `assets/generated/validation.png`.

`mkdocs build` (strict, from the repository root) writes site/; `mkdocs serve` shows it at
http://127.0.0.1:8000 and rebuilds on a change.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import docs_reference
import docs_validation

VALIDATION_MARKER = "<!-- dse-validate: tables -->"
VALIDATION_PLOT = "assets/generated/validation.png"


@functools.cache
def _validation() -> tuple[dict[str, Any], bytes]:
    """`dse validate` runs once per process (a few seconds); `mkdocs serve` reuses it."""
    return docs_validation.validation_result()


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, markdown in docs_reference.pages().items():
        if files.get_file_from_path(path) is not None:
            files.remove(files.get_file_from_path(path))
        files.append(File.generated(config, path, content=markdown))
    if files.get_file_from_path("validation.md") is not None:
        files.append(File.generated(config, VALIDATION_PLOT, content=_validation()[1]))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != "validation.md":
        return markdown
    if VALIDATION_MARKER not in markdown:
        raise ValueError(f"docs/validation.md: the line {VALIDATION_MARKER} is missing (the "
                         "generated accuracy tables go there)")
    return markdown.replace(VALIDATION_MARKER, docs_validation.validation_tables(_validation()[0]))
