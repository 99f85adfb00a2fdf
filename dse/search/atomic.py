"""Output files written whole or not at all: each is written to a temporary name beside it
and renamed onto its own (a rename within a folder is atomic on POSIX and Windows), so a
kill or a full disk while writing leaves the previous file, never a shorter one that still
parses. I/O only."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path beside `path` (same suffix, so writers that go by it still do) to
    write to; renamed onto `path` when the block ends without error, removed otherwise."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_text(path: Path, text: str) -> None:
    """`path.write_text(text)`, whole or not at all."""
    with replacing(path) as tmp:
        tmp.write_text(text)
