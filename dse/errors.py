"""Error types shared by every layer.

User errors (bad input) are `DseError` subclasses: the CLI prints their message and exits
with code 2, never a traceback. Anything else that escapes is an internal error (exit 1).

Every problem is one line (docs: guide/commands.md, Errors): whatever a message quotes (a value, a
file name) has its line breaks and other control characters escaped, as Python's repr escapes
them, so one problem never spans two lines and nothing in it drives the terminal.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

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


# What a DseError's `field` names, so each route words it (docs: guide/commands.md, Errors): a
# scenario field (`seq_out`: the command line says `--seq-out`, a study
# `workloads.<name>.seq_out`), an execution field (`chips`, `tp`, `pp`: `--chips`) or a
# path of the design vocabulary (`memory.L2.capacity`: `--set memory.L2.capacity`) or a
# field of a training setup (`micro_batch`: `dse memory --micro-batch`).
DOMAINS = ("scenario", "execution", "design", "training")
_UNSET = object()


class DseError(Exception):
    """A user-facing error: bad input, unknown name, unreadable file. Exit code 2.

    `str(error)` is its message on one line (`lines()` for a list); SpecError has one line
    per problem. An error about one input field carries it structured, so that each route
    names the field its own way and no caller parses the text back: `field` (the field's
    name or dotted path, in `domain`), `value` (what was found; `has_value` says whether
    one was given) and `rule` (what was expected). Its `message` is the text after the
    field; `str()` words the field as the API does (`seq_out: ...`), the command line as
    its option (`--seq-out: ...`, dse.cli_errors), a study as its key. Problems found
    together in other fields ride along in `also` (one line, joined by '; ')."""

    exit_code = 2
    # a subclass that sets its text itself is unstructured
    field: str | None = None
    domain = "scenario"
    value: object = None
    has_value = False
    rule: str | None = None
    also: tuple[DseError, ...] = ()
    inline = False  # the message reads on from the field's option: "--chips 3 is not ..."

    def __init__(self, message: object = "", *, field: str | None = None,
                 domain: str = "scenario", value: object = _UNSET,
                 rule: str | None = None, also: Iterable[DseError] = (),
                 inline: bool = False) -> None:
        if domain not in DOMAINS:
            raise ValueError(f"domain: expected one of {', '.join(DOMAINS)}, found {domain!r}")
        self.message = str(message)
        self.field = field or None
        self.domain = domain
        self.value = None if value is _UNSET else value
        self.has_value = value is not _UNSET
        self.rule = rule
        self.also = tuple(also)
        self.inline = inline
        super().__init__(self.worded(lambda part: part.field or "", flags=False))

    @classmethod
    def together(cls, parts: Sequence[DseError]) -> DseError:
        """One error of several problems found together (each keeps its field)."""
        first = parts[0]
        return cls(first.message, field=first.field, domain=first.domain,
                   value=first.value if first.has_value else _UNSET, rule=first.rule,
                   inline=first.inline, also=(*first.also, *parts[1:]))

    @property
    def parts(self) -> tuple[DseError, ...]:
        """This problem and those in `also`."""
        return (self, *self.also)

    def __reduce__(self) -> str | tuple[Any, ...]:  # structured fields survive a pickle
        if self.field is None and not self.also:
            return super().__reduce__()
        return (_rebuilt, (type(self), self.args, self.__dict__))

    def worded(self, name: Callable[[DseError], str], flags: bool = True) -> str:
        """The message with each part's field named by `name(part)` (a route's word for
        it; '' leaves the field out). An inline part reads on from its name (`--chips 4 is
        not ...`); where the name is a plain word (`flags` false: the API, a study) only
        when the message keeps a colon of its own (`tp 3: ...`), so every line still
        reads `where: what` (`chips: 4 is not ...`)."""
        def sep(p: DseError) -> str:
            return " " if p.inline and (flags or ": " in p.message) else ": "

        return "; ".join(f"{name(p)}{sep(p)}{p.message}" if name(p) else p.message
                         for p in self.parts)

    def lines(self) -> list[str]:
        """The problems, one line each."""
        return [one_line(Exception.__str__(self))]

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _rebuilt(cls: type[DseError], args: tuple[Any, ...], state: dict[str, Any]) -> DseError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


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
