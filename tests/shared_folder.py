"""The project's shared/ folder beside the checkout (published measurements), for the few
tests whose point is to compare the shipped copies with it.

Every other test reads copies inside tests/ or the package. A checkout without shared/ fails
these tests with one line saying where the folder was looked for, instead of skipping them:
a skipped comparison would let the shipped copies drift unseen.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DEFAULT = Path(__file__).resolve().parents[2] / "shared"


def shared(*parts: str) -> Path:
    """The path under shared/ ($DSE_SHARED, else ../shared beside the checkout); fails the
    calling test when it is missing."""
    root = Path(os.environ.get("DSE_SHARED") or DEFAULT)
    path = root.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"{path} is missing: this test compares the project's shipped copy with "
                    f"shared/ beside the checkout; clone the project with it, or set DSE_SHARED "
                    f"to its path", pytrace=False)
    return path
