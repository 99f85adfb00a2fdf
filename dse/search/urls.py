"""Storage URLs as they may be shown: a database URL's password never appears in output or
files (error lines, run.json). I/O-free."""

from __future__ import annotations

import re

# scheme://user:password@host...  ->  scheme://user:***@host...
_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s]*):(?P<pw>[^@\s]*)@")


def redact(url: str) -> str:
    """`url` (or a line holding URLs) with every password written as ***."""
    return _PASSWORD.sub(lambda m: f"{m['head']}:***@", str(url))
