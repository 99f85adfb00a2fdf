"""Stack profiles from files: a shipped one by name (`stacks/NAME.yaml`) or a user's by
path, validated against dse.spec.stack.Stack (a bad file: one error naming the file, the
key path and what was expected); the vendor's default; the stack a measurement's
`software` text names. Installs itself as the scenario's stack library on import."""

from __future__ import annotations

import functools
from pathlib import Path

from dse.errors import SpecError
from dse.spec import stack_library
from dse.spec.library import library_dir, library_names, looks_like_path, resolve
from dse.spec.messages import validate
from dse.spec.stack import Stack
from dse.spec.yamlpos import read_yaml

# The stack of a chip whose vendor no shipped stack is the default for: the CUDA default
# (cuBLAS, FlashAttention-3 on Hopper, NCCL), whose engine and GEMM figures are the
# model's own defaults, so such a chip runs as it did before stacks existed.
FALLBACK = "cuda-default"


@functools.lru_cache(maxsize=256)
def _read(path: Path, mtime_ns: int) -> Stack:
    """The stack file at `path` as it was at `mtime_ns` (an edited file is read again)."""
    del mtime_ns
    spec = validate(Stack, read_yaml(path, display=str(path)))
    assert isinstance(spec, Stack)
    return spec


def _read_path(path: Path) -> Stack:
    path = path.resolve()
    return _read(path, path.stat().st_mtime_ns)


@functools.cache
def _shipped_names() -> tuple[str, ...]:
    """The shipped stacks' names (the library does not change while dse runs)."""
    return tuple(library_names("stack"))


@functools.cache
def _shipped(name: str) -> Stack:
    return _read_path(library_dir("stack") / f"{name}.yaml")


def load_stack(ref: str | Path) -> Stack:
    """A stack profile by shipped name ("vllm-rocm") or path. An unknown name raises
    ValueError (a scenario reports it at its `stack:`); a broken file raises SpecError at
    its own line. Every evaluation asks for its stack: a shipped one is read once."""
    ref_s = str(ref)
    if not isinstance(ref, Path) and not looks_like_path(ref_s):
        if ref_s not in _shipped_names():
            raise ValueError(f"unknown stack '{ref_s}'; expected one of: "
                             f"{', '.join(_shipped_names())}, or a path to a stack file")
        return _shipped(ref_s)
    try:
        path = resolve(ref, "stack")
    except SpecError as e:
        raise ValueError(f"stack file '{ref_s}' not found") from e
    return _read_path(path)


def shipped_stacks() -> list[Stack]:
    """Every shipped stack profile, by name."""
    return [_shipped(n) for n in _shipped_names()]


@functools.cache
def default_stack(vendor: str | None) -> Stack:
    """The stack a chip of hardware vendor `vendor` runs when a scenario names none: the
    shipped stack whose `default_for` lists it (case-insensitive), else FALLBACK."""
    key = (vendor or "").strip().casefold()
    for s in shipped_stacks():
        if key and key in (v.casefold() for v in s.default_for):
            return s
    return load_stack(FALLBACK)


def stack_for_software(text: str) -> str | None:
    """The name of the shipped stack whose `software` prefixes match `text` longest (a
    measurements row's software column), or None."""
    if not text or not text.strip():
        return None
    best = max(((s.covers(text), s.name) for s in shipped_stacks()), default=(0, ""))
    return best[1] if best[0] > 0 else None


stack_library.use_library(load_stack, default_stack)
