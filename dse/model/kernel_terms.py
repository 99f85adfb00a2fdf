"""What the operator-time kernel (dse.model.performance) accumulates level by level: which
operators have bytes of each tensor class (`Classes`), and the share of a placed class stored
at a level or beyond (`Through`). No I/O."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.model.operators import PLACED_ROLES, TRANSIENT_ROLES


@dataclass(frozen=True)
class Classes:
    """Which operators (rows) have bytes of each tensor class, over all designs or over a
    block of them: the term of a placed class is computed for its rows only (`rows[k]`,
    positions `at[k]` in `mixed`, the rows of any placed class; `writes[k]`: some are
    written), and a transient class's only where it has bytes (`transient[k]`)."""

    rows: tuple[np.ndarray, ...]
    at: tuple[np.ndarray, ...]
    writes: tuple[bool, ...]
    mixed: np.ndarray
    transient: tuple[bool, ...]

    @classmethod
    def of(cls, read: np.ndarray, written: np.ndarray) -> Classes:
        """From the bytes, [I, C] or [B, I, C] (any design)."""
        r = np.asarray(read.any(axis=0) if read.ndim == 3 else read != 0)
        w = np.asarray(written.any(axis=0) if written.ndim == 3 else written != 0)
        has = [r[:, c] | w[:, c] for c, _, _ in PLACED_ROLES]
        mixed = np.flatnonzero(np.logical_or.reduce(has)) if has else np.zeros(0, np.intp)
        rows = tuple(np.flatnonzero(h) for h in has)
        return cls(rows=rows, at=tuple(np.searchsorted(mixed, x) for x in rows),
                   writes=tuple(bool(w[:, c].any()) for c, _, _ in PLACED_ROLES),
                   mixed=mixed,
                   transient=tuple(bool(r[:, c].any() or w[:, c].any())
                                   for c, _, _ in TRANSIENT_ROLES))


class Through:
    """Share of one tensor class stored at level l or beyond, for the operators `rows` of a
    block of designs, accumulated from the outermost level inwards (`add`, then `value`):
    [k, B], or [1, B] when the homes are the same for every operator."""

    def __init__(self, home: np.ndarray, rows: np.ndarray):
        self.home = home if home.ndim == 3 else home[:, None, :]
        self.rows = slice(0, 1) if self.home.shape[1] == 1 else rows
        self.value = np.empty((1 if self.home.shape[1] == 1 else len(rows), len(home)))
        self.first = True
        self._ones: bool | None = None

    def ones(self) -> bool:
        """Whether the value is 1 everywhere (the whole class stored at l or beyond)."""
        if self._ones is None:
            self._ones = bool((self.value == 1.0).all())
        return self._ones

    def add(self, level: int) -> bool:
        """Add the share stored at `level`; whether it changed the value (the first level
        always does)."""
        share = self.home[:, self.rows, level].T
        if self.first:
            np.copyto(self.value, share)
            self.first = False
        elif share.any():
            self.value += share
        else:
            return False
        self._ones = None
        return True
