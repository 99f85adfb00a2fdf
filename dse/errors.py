"""Error types shared by every layer.

User errors (bad input) are `DseError` subclasses: the CLI prints their message and exits
with code 2, never a traceback. Anything else that escapes is an internal error (exit 1).

Every problem is one line (README, "Errors"): whatever a message quotes (a value, a file
name) has its line breaks and other control characters escaped, as Python's repr escapes
them, so one problem never spans two lines and nothing in it drives the terminal.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

# Unicode categories shown escaped: controls (C0, C1: newline, tab, escape ...), format
# characters (bidirectional overrides, zero-width ...), line and paragraph separators (which
# str.splitlines breaks at), surrogates (undecodable bytes of a file name) and private use.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def _escape(ch: str) -> str:
    if unicodedata.category(ch) not in _ESCAPED_CATEGORIES:
        return ch
    code = ord(ch)
    if ch in "\n\r\t":
        return repr(ch)[1:-1]
    return f"\\x{code:02x}" if code < 0x100 else (f"\\u{code:04x}" if code < 0x10000
                                                  else f"\\U{code:08x}")


def one_line(text: str) -> str:
    """`text` with every character that would break the line or act on the terminal shown
    as its escape (`\\n`, `\\t`, `\\x1b`, `\\u2028`); anything else unchanged."""
    if text.isprintable():  # fast path: nothing to escape (spaces are printable)
        return text
    return "".join(_escape(ch) for ch in text)


class DseError(Exception):
    """A user-facing error: bad input, unknown name, unreadable file. Exit code 2.

    `str(error)` is its message on one line (`lines()` for a list); SpecError has one line
    per problem."""

    exit_code = 2

    def lines(self) -> list[str]:
        """The problems, one line each."""
        return [one_line(Exception.__str__(self))]

    def __str__(self) -> str:
        return "\n".join(self.lines())


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
        text = f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"
        return one_line(text)


class SpecError(DseError):
    """One or more problems found in input files, all reported at once."""

    def __init__(self, issues: list[Issue]):
        self.issues = sorted(
            issues, key=lambda i: (i.file, i.line if i.line is not None else 0, i.col or 0)
        )
        super().__init__("\n".join(str(i) for i in self.issues))

    def lines(self) -> list[str]:
        return [str(i) for i in self.issues]


def suggest(word: str, choices: Iterable[str]) -> str:
    """'; did you mean "x"?' for the closest choice, or '' when nothing is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f'; did you mean "{close[0]}"?' if close else ""


class ReadError(SpecError):
    """A file that cannot be read as text at all: missing, not a regular file, too large,
    binary or not UTF-8. The file itself is the problem, wherever it was referenced from."""
