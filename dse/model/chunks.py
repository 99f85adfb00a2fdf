"""Any number of designs in bounded memory: `evaluate` runs them in chunks and joins the
results.

The pipeline holds arrays over designs x operators x levels (and, for `batch best`, over
BEST_CANDIDATES trial batches per design), so one pass over a million designs took 6.6 GB.
`chunked` wraps the public `dse.evaluate`: up to CHUNK_DESIGNS designs (CHUNK_DESIGNS /
BEST_CANDIDATES with `batch best`) run as before, in one pass; more run a chunk at a time
(`DesignBatch.take`) and their Evaluations are concatenated design by design, so the peak
is the result itself plus one chunk's working set. A batch per design (a list) is cut
with its designs. Every design is evaluated on its own,
so the chunking changes no number. Docs: guide/commands.md, Input limits. No I/O.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from dse.errors import DseError
from dse.model.batch import DesignBatch, design_batch
from dse.model.reasons import Reasons

# Designs per pass of the pipeline: ~12 KB of working set per design for a Transformer step
# (19-22 operators, 3-4 levels; serve with batch max: 190 MB for 16,384 designs, measured
# with /usr/bin/time), so a chunk stays near 200 MB while numpy's per-call overhead is
# spread over enough designs to keep the vectorized speed (~100,000 designs/s).
CHUNK_DESIGNS = 16_384
# batch best (dse.model.evaluate._best): candidate batches run per design at a time (here, below
# evaluate, because the chunk size divides by it)
BEST_CANDIDATES = 12
# Fields of an Evaluation that describe every design at once (not one entry per design).
_SHARED = ("hardware", "workload", "scenario", "scenario_name", "scenario_overrides",
           "chips", "tp", "pp", "level_names", "ops_name", "warnings", "batch",
           "execution")

F = TypeVar("F", bound=Callable[..., Any])


def override_count(hw: object, overrides: object) -> int:
    """The number of designs `hw` and `overrides` describe, without building them: a
    DesignBatch's n, else the longest override (an array's size, a list's length)."""
    if isinstance(hw, DesignBatch):
        return hw.n
    if not isinstance(overrides, dict):
        return 1
    sizes = [v.size if isinstance(v, np.ndarray) else len(v) if isinstance(v, list | tuple)
             else 1 for v in overrides.values()]
    return max(sizes, default=1)


def _smallest_chunk() -> int:
    return max(CHUNK_DESIGNS // BEST_CANDIDATES, 1)


def chunk_size(arguments: dict[str, Any]) -> int:
    """Designs per chunk for one call of evaluate (its bound arguments)."""
    from dse.workloads import resolve_scenario

    keys = ("phase", "batch", "seq_in", "seq_out", "precision", "kv_precision", "sparsity")
    given = {k: arguments[k] for k in keys if arguments.get(k) is not None}
    try:
        _, sc = resolve_scenario(arguments["wl"], arguments["scenario"], **given)
    except DseError:
        return CHUNK_DESIGNS  # evaluate reports the problem itself
    return _smallest_chunk() if sc.batch == "best" else CHUNK_DESIGNS


def chunked(evaluate: F) -> F:
    """`evaluate` for any number of designs: up to a chunk's worth in one call, more in
    chunks whose Evaluations are concatenated (see the module)."""
    signature = inspect.signature(evaluate)

    @functools.wraps(evaluate)
    def run(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        batches = a["batch"] if isinstance(a["batch"], list | tuple | np.ndarray) else None
        designs = override_count(a["hw"], a["overrides"])
        n = max(designs, len(batches)) if batches is not None else designs
        if (n <= _smallest_chunk() or n <= (size := chunk_size(a))
                or (batches is not None and designs not in (1, len(batches)))):
            return evaluate(*args, **kwargs)  # (a count mismatch is evaluate's error)
        hw = a["hw"]
        db = hw if isinstance(hw, DesignBatch) else design_batch(hw, a["overrides"])
        if db.n == 1:  # one design run at a batch per design
            db = db.take(np.zeros(n, dtype=int))
        out: _Joined | None = None
        for start in range(0, db.n, size):
            end = min(start + size, db.n)
            part = evaluate(**{**a, "hw": db.take(slice(start, end)), "overrides": None,
                               "batch": batches[start:end] if batches is not None
                               else a["batch"]})
            out = out or _Joined(part, db)
            out.add(part, start)
        assert out is not None
        return out.result()

    return run  # type: ignore[return-value]


class _Parts(list[Any]):
    """The Reasons of each chunk, in order."""


class _Row:
    """A per-design array that is one row broadcast over the designs (a read-only view, as
    the chunks gave it) while every chunk gives the same row; written out in full from the
    first chunk that differs."""

    def __init__(self, row: np.ndarray):
        self.row = row
        self.full: np.ndarray | None = None

    def add(self, value: np.ndarray, start: int, n: int, total: int) -> None:
        if self.full is None and value.strides[0] == 0 and np.array_equal(
                value[0], self.row, equal_nan=value.dtype.kind in "fc"):
            return
        if self.full is None:
            self.full = np.empty((total, *self.row.shape), dtype=self.row.dtype)
            self.full[:start] = self.row
        self.full[start:start + n] = value

    def result(self, total: int) -> np.ndarray:
        if self.full is not None:
            return self.full
        return np.broadcast_to(self.row, (total, *self.row.shape))


class _Joined:
    """One Evaluation of the designs of `db` filled in from the Evaluations of its chunks, in
    order: per-design arrays (and dicts and dataclasses of them) written into arrays over
    all designs as each chunk arrives (so no chunk is kept), fields that describe all
    designs taken from the first chunk, warnings merged. A per-design array is told from one
    that describes all designs by its length in the first (a full) chunk."""

    def __init__(self, first: Any, db: DesignBatch):
        self.first, self.db, self.n = first, db, first.n
        self.warnings: dict[str, None] = {}
        self.fields = {f.name: self._allocate(getattr(first, f.name))
                       for f in dataclasses.fields(first) if f.init and f.name not in _SHARED}

    def _allocate(self, value: Any) -> Any:
        if isinstance(value, Reasons):  # joined at the end, still unworded
            return _Parts()
        if isinstance(value, np.ndarray) and value.ndim and value.shape[0] == self.n:
            if value.dtype.kind in "US":  # text of any length: joined at the end
                return []
            if value.strides[0] == 0:  # one row for every design: kept so while chunks agree
                return _Row(value[0])
            shape = (self.db.n, *value.shape[1:])
            if value.ndim > 1 and value.T.flags.c_contiguous:  # stored operator-major
                return np.empty(shape[::-1], dtype=value.dtype).T
            return np.empty(shape, dtype=value.dtype)
        if isinstance(value, dict):
            return {k: self._allocate(v) for k, v in value.items()}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: self._allocate(getattr(value, f.name))
                    for f in dataclasses.fields(value) if f.init}
        return value

    def add(self, part: Any, start: int) -> None:
        """Write the designs of chunk `part`, which begins at design `start`."""
        if not np.array_equal(part.ops_name, self.first.ops_name):
            raise AssertionError("chunks of one evaluation ran different operators")
        self.warnings.update(dict.fromkeys(part.warnings))
        for name, target in self.fields.items():
            self._fill(target, getattr(part, name), start, part.n)

    def _fill(self, target: Any, value: Any, start: int, n: int) -> None:
        if isinstance(target, _Row):
            target.add(value, start, n, self.db.n)
        elif isinstance(target, np.ndarray):
            target[start:start + n] = value
        elif isinstance(target, list):
            target.append(value)
        elif isinstance(target, dict):
            for k, t in target.items():
                self._fill(t, value[k] if isinstance(value, dict) else getattr(value, k),
                           start, n)

    def result(self) -> Any:
        """The Evaluation of every design."""
        def build(template: Any, target: Any) -> Any:
            if isinstance(target, _Row):
                return target.result(self.db.n)
            if isinstance(target, _Parts):
                return Reasons.concatenate(target)
            if isinstance(target, list):
                return np.concatenate(target)
            if isinstance(target, dict) and isinstance(template, dict):
                return {k: build(template[k], t) for k, t in target.items()}
            if isinstance(target, dict):  # a dataclass
                return type(template)(**{k: build(getattr(template, k), t)
                                         for k, t in target.items()})
            return target

        shared = {name: getattr(self.first, name) for name in _SHARED
                  if hasattr(self.first, name)}
        shared.update(batch=self.db, warnings=tuple(self.warnings))
        return type(self.first)(**shared, **{name: build(getattr(self.first, name), t)
                                             for name, t in self.fields.items()})
