"""Error types shared by every layer.

User errors (bad input) are `DseError` subclasses: the CLI prints their message and exits
with code 2, never a traceback. Anything else that escapes is an internal error (exit 1).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass


class DseError(Exception):
    """A user-facing error: bad input, unknown name, unreadable file. Exit code 2."""

    exit_code = 2


@dataclass(frozen=True)
class Issue:
    """One problem in one input file: `file:line:col: key.path: message`."""

    file: str
    line: int | None
    col: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}:{self.col or 1}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class SpecError(DseError):
    """One or more problems found in input files, all reported at once."""

    def __init__(self, issues: list[Issue]):
        self.issues = sorted(
            issues, key=lambda i: (i.file, i.line if i.line is not None else 0, i.col or 0)
        )
        super().__init__("\n".join(str(i) for i in self.issues))


def suggest(word: str, choices: Iterable[str]) -> str:
    """'; did you mean "x"?' for the closest choice, or '' when nothing is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f'; did you mean "{close[0]}"?' if close else ""


class ReadError(SpecError):
    """A file that cannot be read as text at all: missing, not a regular file, too large,
    binary or not UTF-8. The file itself is the problem, wherever it was referenced from."""
