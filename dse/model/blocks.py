"""Work in blocks of designs: the operator-time stage computes on contiguous [operators,
block] arrays reused from block to block and from call to call (per thread), because fresh
memory is expensive where every page is faulted in. No I/O."""

from __future__ import annotations

import itertools
import math
import threading

import numpy as np
from numpy.typing import DTypeLike

# Designs per block: op_times works on contiguous [operators, block] arrays reused from block
# to block, and from call to call (per thread): fresh memory is expensive where every page is
# faulted in. WORK_ELEMENTS caps operators x block. Blocks of a few thousand designs amortize
# the cost of each numpy call (about 40 per level and block); they are of equal size, none a
# multiple of 16 designs long (`blocks`).
BLOCK = 4096
WORK_ELEMENTS = 1 << 18
_LOCAL = threading.local()


def blocks(n: int, most: int) -> list[slice]:
    """n designs as consecutive blocks of at most about `most`, of equal sizes but none of a
    multiple of 16 (from 256 on; one block of such a size is split in two): a row stride of
    a multiple of 128 bytes maps one operator column of every row to a few cache sets, which
    makes the transposes to the [N, I] and [N, I, L] outputs 4-5 times slower."""
    if n == 0:
        return []
    count = -(-n // most)
    sizes = [n // count + (k < n % count) for k in range(count)]
    if count == 1 and n % 16 == 0 and n >= 512:
        sizes = [n // 2, n // 2]
    for k, size in enumerate(sizes):
        if size % 16 == 0 and size >= 256:
            j = k + 1 if k + 1 < len(sizes) else k - 1
            move = next(m for m in range(1, 8) if (sizes[j] - m) % 16)
            sizes[k] += move
            sizes[j] -= move
    return [slice(a, b) for a, b in itertools.pairwise(np.cumsum([0, *sizes]).tolist())]


def scratch(name: str, size: int, dtype: DTypeLike) -> np.ndarray:
    """A flat work array of this thread, kept between calls (contents undefined)."""
    arrays = _LOCAL.__dict__.setdefault("arrays", {})
    have = arrays.get(name)
    if have is None or have.size < size or have.dtype != dtype:
        have = arrays[name] = np.empty(size, dtype=dtype)
    return have


def shaped(flat: np.ndarray, *shape: int) -> np.ndarray:
    """A contiguous array of `shape` at the start of the flat work array `flat`."""
    return flat[:math.prod(shape)].reshape(shape)


class Field:
    """An operator quantity, [I] or [N, I], on a block of designs, for the operators `rows`
    (None: all): [k, 1] when it is per operator, else [k, B] copied into a work array of this
    thread (one strided read per block; every level then reads contiguous rows). `tables`:
    [N] where `a` holds U distinct tables [U, I] and design n runs table tables[n]
    (operators.ChipOps.rows): a block's columns are gathered from the transposed tables."""

    def __init__(self, name: str, a: np.ndarray, block: int,
                 tables: np.ndarray | None = None):
        self.a = a
        self.tables = tables if a.ndim == 2 else None
        if self.tables is not None:
            self.a_t = np.ascontiguousarray(a.T)  # [I, U]
        if a.ndim == 2:
            self.work = scratch(name, a.shape[1] * block, a.dtype)

    def at(self, designs: slice, rows: np.ndarray | None = None) -> np.ndarray:
        a = self.a
        if a.ndim == 1:
            return (a if rows is None else a[rows])[:, None]
        if self.tables is not None:
            src = self.a_t if rows is None or len(rows) == a.shape[1] else self.a_t[rows]
            out = shaped(self.work, src.shape[0], designs.stop - designs.start)
            np.take(src, self.tables[designs], axis=1, out=out)
            return out
        src = a[designs]
        if rows is not None and len(rows) < a.shape[1]:
            src = src[:, rows]
        out = shaped(self.work, src.shape[1], designs.stop - designs.start)
        np.copyto(out, src.T)
        return out
