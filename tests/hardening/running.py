"""Running dse for the hardening tests: the result of a run, the environment of a
subprocess that runs this checkout, and a run under a timeout and an address-space limit."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str
    seconds: float = 0.0


def checkout_env() -> dict[str, str]:
    """The environment of a subprocess that runs this checkout's dse (not an installed
    copy), single-threaded numerics, without DSE_DEBUG."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")]), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1"}
    env.pop("DSE_DEBUG", None)
    return env


def limited_python(args: list[str], cwd: Path, timeout_s: float, memory_bytes: int
                   ) -> tuple[subprocess.CompletedProcess, float]:
    """`python ARGS` in `cwd` under `timeout_s` and an address-space limit of
    `memory_bytes`; the run and its seconds. Running past the timeout fails the test."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    start = time.monotonic()
    try:
        r = subprocess.run([sys.executable, *args], cwd=cwd, env=checkout_env(),
                           capture_output=True, text=True, timeout=timeout_s,
                           preexec_fn=limit)
    except subprocess.TimeoutExpired:
        pytest.fail(f"python {' '.join(args)[:80]} ran past {timeout_s} s")
    return r, time.monotonic() - start
