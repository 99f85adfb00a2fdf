"""GEMM tiling: how well a problem fills the matrix engine's native tile, and how many
times a tiled GEMM's operands cross each memory level given the tile the level inside it
holds. No I/O; arrays over designs and operators."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.model.batch import DesignBatch

# Bytes of buffer per output element of a square, output-stationary GEMM tile held at a
# level: its fp32 accumulator. The operand slabs streamed past it are k_s x T with k_s << T
# (16-64 elements), so they are neglected: a buffer of S bytes holds T = sqrt(S / 4).
TILE_BYTES_PER_ELEMENT = 4.0


Side = float | np.ndarray  # one tile side for every design, or [N]


def tile_sides(batch: DesignBatch) -> list[tuple[Side, Side]]:
    """Per level l, the side T of the square output tiles held by the buffer inside l, for
    the A operand (T along N) and for the B operand (T along M): at level 0 the register
    file's (T = sqrt(bytes / 4)), else the engine's native tile (no tile: unbounded); at
    l > 0 the level inside it, per instance (per unit for per-unit levels). A float where
    every design has the same side, else [N]."""
    tile = batch.tile
    if batch.register_file is not None and batch.register_file > 0:
        t0 = float(np.sqrt(batch.register_file / TILE_BYTES_PER_ELEMENT))
        sides: list[tuple[Side, Side]] = [(t0, t0)]
    else:
        sides = [(float(tile[1]), float(tile[0])) if tile else (np.inf, np.inf)]
    for level in range(batch.levels - 1):
        t = np.sqrt(batch.unit_capacity[:, level] / TILE_BYTES_PER_ELEMENT)
        same = t.size > 0 and bool(np.all(t == t[0]))
        sides.append((float(t[0]), float(t[0])) if same else (t, t))
    return sides


def crossings(dim: np.ndarray, side: Side) -> np.ndarray:
    """How many times a GEMM operand crosses a level whose inner buffer holds output tiles of
    side `side` (a tiled GEMM re-reads A ceil(N / T) times and B ceil(M / T) times): ceil(dim
    / side), at least 1. dim: [I, 1] or [I, N], 0 for operators that are not GEMMs (read
    once); side: a float or [N]."""
    if isinstance(side, np.ndarray) and dim.max(initial=0.0) <= side.min(initial=np.inf):
        return np.ones(dim.shape)  # every operand fits the smallest tile: one crossing
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.divide(dim, side)
    np.ceil(out, out=out)
    return np.fmax(out, 1.0, out=out)  # fmax: 0 / 0 (no GEMM, empty buffer) counts once


def same_side(a: Side, b: Side) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return a is b or (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
                          and np.array_equal(a, b))
    return a == b


@dataclass(frozen=True)
class Gemms:
    """The GEMM dimensions m, n, k over all designs or over a block of them: those the same
    for every design as [I] (`fixed`, None where they differ), their tile-utilization factors
    dim / (ceil(dim / t) * t) as [I, 1] (None where they differ; the product of all when
    none does: `util`) and the rows where a factor is not 1 (only the GEMMs' matter: the
    others run on the vector units, and x 1 is exact); max(dim, 1) of the GEMMs, 0 elsewhere
    (read once), of m and n where fixed; the dequantization FLOPs of the rows `dequant`."""

    fixed: list[np.ndarray | None]
    factors: list[np.ndarray | None]
    factor_rows: list[np.ndarray | None]
    util: np.ndarray | None
    m_dim: np.ndarray | None
    n_dim: np.ndarray | None
    dequant: np.ndarray  # [kq, 1] or [kq, B]

    @classmethod
    def of(cls, shape: np.ndarray, tile: tuple[int, int, int] | None, is_matrix: np.ndarray,
           slots: np.ndarray) -> Gemms:
        """From the shapes, [I, 4] or [B, I, 4]."""
        if shape.ndim == 2:
            fixed: list[np.ndarray | None] = [shape[:, j] for j in range(3)]
        else:
            # The first designs first (most columns that differ do so there), then all.
            same = (shape[:8] == shape[:1]).all(axis=0).all(axis=0)  # (axis=(0, 1): slow)
            if same[:3].any():
                same &= (shape == shape[:1]).all(axis=0).all(axis=0)
            fixed = [shape[0, :, j] if same[j] else None for j in range(3)]
        factors: list[np.ndarray | None] = []
        for col, t in zip(fixed, tile or (), strict=False):
            if col is None:
                factors.append(None)
            else:
                dim = np.maximum(col, 1.0)
                factors.append((dim / (np.ceil(dim / t) * t))[:, None])
        util = None
        known = [f for f in factors if f is not None]
        if len(known) == len(factors):
            util = np.ones((len(is_matrix), 1))
            for f in known:
                util *= f
        matrix = is_matrix[:, None]
        m_dim, n_dim = (None if col is None else np.where(matrix, np.maximum(col[:, None], 1.0),
                                                          0.0) for col in fixed[:2])
        # Dequantization of weight-only-quantized weights on the vector units, in FLOPs.
        q = np.flatnonzero(slots)
        sq = shape[..., q, :]
        dequant = slots[q] * (sq[..., 1] * sq[..., 2] * np.maximum(sq[..., 3], 1.0)) * 2.0
        return cls(fixed=fixed, factors=factors,
                   factor_rows=[None if f is None else np.flatnonzero(is_matrix & (f[:, 0] != 1))
                                for f in factors],
                   util=util, m_dim=m_dim, n_dim=n_dim,
                   dequant=dequant[:, None] if shape.ndim == 2 else dequant.T)
