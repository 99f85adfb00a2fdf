"""Bounded reading of an input file as text (docs: guide/commands.md, Input limits): only a regular
file of at most a given size is read, and it must be UTF-8 text without control characters (a
leading byte-order mark accepted); each refusal is one clear ReadError naming the file.
Spec files (dse.spec.yamlpos) and measurement CSVs are read through it."""

from __future__ import annotations

import codecs
import errno
import os
import re
import stat
from pathlib import Path

from dse.errors import Issue, ReadError

# Characters YAML does not allow in a stream (YAML 1.1, 5.1; PyYAML's Reader refuses them).
_NON_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd"
                            "\U00010000-\U0010ffff]")

_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


_FILE_TYPES = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISSOCK, "a socket"))


def _size_text(n: int) -> str:
    return f"{n / (1 << 20):.3g} MiB" if n >= 1 << 20 else f"{n:,} bytes"


def _unreadable(file: str, message: str, line: int | None = None, col: int | None = None
                ) -> ReadError:
    return ReadError([Issue(file, line, col, "", message)])


def _open_error(file: str, e: OSError) -> ReadError:
    if isinstance(e, FileNotFoundError):
        return _unreadable(file, "file not found")
    if e.errno == errno.ENAMETOOLONG:
        return _unreadable(file, f"name too long ({len(file)} characters; a file name has "
                                 "at most 255 bytes)")
    if isinstance(e, PermissionError):
        return _unreadable(file, "cannot read: permission denied")
    return _unreadable(file, f"cannot read ({e.strerror or e})")


def read_bytes(path: Path, file: str, limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, else ReadError naming `file`.

    The file is opened without blocking (a named pipe with no writer does not hang), its
    type is checked on the open descriptor (a pipe, device or folder is refused before any
    read) and at most limit + 1 bytes are read (a file that grows is still bounded).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(
        os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise _open_error(file, e) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _FILE_TYPES if test(mode)), "not a file")
            raise _unreadable(file, f"not a regular file ({kind}); dse reads only regular "
                                    "files")
        chunks: list[bytes] = []
        got = 0
        while got <= limit:
            chunk = os.read(fd, min(limit + 1 - got, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as e:
        raise _open_error(file, e) from None
    finally:
        os.close(fd)
    if got > limit:
        raise _unreadable(file, f"file too large (over {_size_text(limit)}, the limit for "
                                f"{what})")
    return b"".join(chunks)


def _line_col(data: bytes, at: int) -> tuple[int, int]:
    """1-based line and column (in characters) of byte offset `at`."""
    start = data.rfind(b"\n", 0, at) + 1
    return data.count(b"\n", 0, at) + 1, len(data[start:at].decode("utf-8", "replace")) + 1


def yaml_text(data: bytes, file: str) -> str:
    """The text of a YAML file (a leading UTF-8 byte-order mark dropped), or ReadError at
    the first NUL byte (binary data), byte that is not UTF-8 or character YAML forbids."""
    if data.startswith(_UTF16_BOMS):
        raise _unreadable(file, "UTF-16 text; save the file as UTF-8", 1, 1)
    data = data.removeprefix(codecs.BOM_UTF8)
    nul = data.find(b"\0")
    if nul >= 0:
        line, col = _line_col(data, nul)
        raise _unreadable(file, "not a YAML text file: binary data (a NUL byte at line "
                                f"{line}, column {col})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, col = _line_col(data, e.start)
        raise _unreadable(file, f"not UTF-8 text: byte 0x{data[e.start]:02x} cannot be "
                                "decoded; save the file as UTF-8", line, col) from None
    bad = _NON_PRINTABLE.search(text)
    if bad is not None:
        at = bad.start()
        line, col = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
        raise _unreadable(file, f"control character U+{ord(bad.group()):04X} is not allowed "
                                'in YAML (in double quotes write it as an escape, e.g. "\\t")',
                          line, col)
    return text
