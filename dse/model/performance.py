"""Time per operator: a roofline over the whole memory hierarchy, for N designs at once.

For operator i on design n:

    time[n, i] = max(compute[n, i], bytes[n, i, l] / bandwidth[n, l] for every level l)
                 + launches[i] * op_overhead[n]

- compute = matrix FLOPs / (matrix peak x achievable fraction x tile utilization), or the
  vector units' rate when that is faster (a GEMV at batch 1 wastes 127/128 of a 128-row
  array), + vector FLOPs / vector peak + dequantization work of weight-only-quantized
  weights on the vector units;
- bytes at level l = the traffic crossing level l toward the compute units: compulsory
  traffic of every tensor stored at l or beyond, plus the re-reads a tiled GEMM makes when
  the level inside l cannot hold its operands (`reread`);
- bandwidth = the level's peak x its achieved fraction (a measured property of the chip).
The largest term is the operator's bound ("overhead" when the fixed cost exceeds them
all). Everything is [N designs] x [I operators] x [L levels] array arithmetic; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.model.batch import DesignBatch
from dse.workloads.optable import MATRIX_KINDS, TENSOR_CLASSES

_MATRIX = frozenset(MATRIX_KINDS)

W, A, KV, G = (TENSOR_CLASSES.index(c) for c in ("weights", "activations", "kv_cache",
                                                  "gradients"))
# Precisions tried, in order, when a chip has no rate at the operator's own precision
# (e.g. fp8 on an A100 runs as fp16): same width first, then wider.
FALLBACK = {
    "fp8": ("fp8", "fp16", "bf16", "fp32"), "int8": ("int8", "fp16", "bf16", "fp32"),
    "fp16": ("fp16", "bf16", "fp32"), "bf16": ("bf16", "fp16", "fp32"),
    "fp32": ("fp32", "tf32"), "int4": ("int4", "int8", "fp16", "bf16", "fp32"),
}
# Dequantization of weight-only-quantized weights, in fp32 FMA issue slots per weight, on
# the vector units (the weights must be widened, converted and scaled before the multiply):
# int8: sign-extend to 32 bits (64/clk/SM = 1 slot) + int-to-float conversion (16/clk/SM =
# 4 slots) + scale multiply (1 slot) = 6; int4: extract the nibble (shift + mask, 2 slots)
# instead of the sign extension = 7. Throughputs per SM per clock from the CUDA C++
# Programming Guide v12.6, "Throughput of Native Arithmetic Instructions" (cc 8.0: fp32 FMA
# 64, 8/16-bit to 32-bit integer conversions 64, all other conversions 16). One slot costs
# 2 FLOP at the chip's vector fp32 peak.
DEQUANT_SLOTS = {"int8": 6.0, "int4": 7.0}
# Bytes of buffer per output element of a square, output-stationary GEMM tile held at a
# level: its fp32 accumulator. The operand slabs streamed past it are k_s x T with k_s << T
# (16-64 elements), so they are neglected: a buffer of S bytes holds T = sqrt(S / 4).
TILE_BYTES_PER_ELEMENT = 4.0


@dataclass(frozen=True)
class ChipOps:
    """The operators one chip runs (after parallel splitting), as arrays over I rows."""

    name: np.ndarray  # [I] str
    kind: np.ndarray  # [I] str
    stage: np.ndarray  # [I] str
    dtype: np.ndarray  # [I] str
    wdtype: np.ndarray  # [I] str
    count: np.ndarray  # [I]
    flops: np.ndarray  # [I] per instance
    read: np.ndarray  # [I, C] per instance, bytes that live off the compute units
    written: np.ndarray  # [I, C]
    onchip: np.ndarray  # [I] bytes that stay in the innermost level (fused intermediates)
    shape: np.ndarray  # [I, 4] m, n, k, batch
    launches: np.ndarray  # [I] kernels per instance (0: fused into a neighbour)

    @property
    def is_matrix(self) -> np.ndarray:
        return np.array([k in _MATRIX for k in self.kind.tolist()], dtype=bool)


@dataclass(frozen=True)
class OpTimes:
    """Per design and operator: time per instance, its terms and the traffic per level."""

    time: np.ndarray  # [N, I] s per instance
    compute: np.ndarray  # [N, I] s
    traffic: np.ndarray  # [N, I, L] bytes per instance
    bound: np.ndarray  # [N, I] int: 0 compute, 1 + l for memory level l, -1 the fixed
    # per-operator overhead (when it exceeds every roofline term)
    missing_rate: np.ndarray  # [N] bool: some operator's precision has no rate


def executed_precision(peaks: dict[str, np.ndarray], precision: str) -> str:
    """The precision an engine with rates `peaks` runs `precision` at (fp8 on an A100 runs
    as fp16); `precision` itself when it has no rate for any fallback."""
    return next((p for p in FALLBACK.get(precision, (precision,)) if p in peaks), precision)


def _rate(table: dict[str, np.ndarray], dtype: str, n: int) -> np.ndarray:
    p = executed_precision(table, dtype)
    return table[p] if p in table else np.full(n, np.nan)


def rate_table(batch: DesignBatch, precisions: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """[N, P] effective matrix rate (peak x achievable fraction) and vector rate, FLOP/s, of
    each precision in `precisions`. A chip without separate vector units runs vector work on
    its matrix units; NaN where the chip has no rate at all for the precision."""
    n = batch.n
    matrix_rates, vector_rates = np.empty((n, len(precisions))), np.empty((n, len(precisions)))
    for j, dt in enumerate(precisions):
        p = executed_precision(batch.matrix_peak, dt)
        vector = _rate(batch.vector_peak, dt, n)
        matrix = batch.matrix_peak[p] * batch.matrix_fraction[p] if p in batch.matrix_peak \
            else vector
        matrix_rates[:, j] = matrix
        vector_rates[:, j] = np.where(np.isnan(vector), matrix, vector)
    return matrix_rates, vector_rates


def tile_utilization(shape: np.ndarray, tile: tuple[int, int, int] | None) -> np.ndarray:
    """[I] (or [N, I] for per-design shapes [N, I, 4]) share of the matrix engine doing
    useful work on an M x N x K problem cut into the native tile:
    prod(dim / (ceil(dim / t) * t)). 1 without a tile."""
    util = np.ones(shape.shape[:-1])
    if tile is None:
        return util
    for j, t in enumerate(tile):
        dim = np.maximum(shape[..., j], 1.0)
        util *= dim / (np.ceil(dim / t) * t)
    return util


Side = float | np.ndarray  # one tile side for every design, or [N, 1]


def tile_sides(batch: DesignBatch) -> list[tuple[Side, Side]]:
    """Per level l, the side T of the square output tiles held by the buffer inside l, for
    the A operand (T along N) and for the B operand (T along M): at level 0 the register
    file's (T = sqrt(bytes / 4)), else the engine's native tile (no tile: unbounded); at
    l > 0 the level inside it, per instance (per unit for per-unit levels). A float where
    every design has the same side, else an [N, 1] array."""
    tile = batch.tile
    if batch.register_file:
        t0 = float(np.sqrt(batch.register_file / TILE_BYTES_PER_ELEMENT))
        sides: list[tuple[Side, Side]] = [(t0, t0)]
    else:
        sides = [(float(tile[1]), float(tile[0])) if tile else (np.inf, np.inf)]
    for level in range(batch.levels - 1):
        cap = batch.unit_capacity[:, level]
        t = float(np.sqrt(cap[0] / TILE_BYTES_PER_ELEMENT)) if np.all(cap == cap[0]) \
            else np.sqrt(cap / TILE_BYTES_PER_ELEMENT)[:, None]
        sides.append((t, t))
    return sides


def crossings(dim: np.ndarray, side: Side) -> np.ndarray:
    """How many times a GEMM operand crosses a level whose inner buffer holds output tiles of
    side `side` (a tiled GEMM re-reads A ceil(N / T) times and B ceil(M / T) times): ceil(dim
    / side), at least 1. dim: [I] or [N, I], 0 for operators that are not GEMMs (read once).
    """
    if isinstance(side, np.ndarray) and dim.max(initial=0.0) <= side.min(initial=np.inf):
        return np.ones(dim.shape)  # every operand fits the smallest tile: one crossing
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.divide(dim, side)
    np.ceil(out, out=out)
    return np.fmax(out, 1.0, out=out)  # fmax: 0 / 0 (no GEMM, empty buffer) counts once


def _compute(batch: DesignBatch, ops: ChipOps, is_matrix: np.ndarray) -> tuple[np.ndarray,
                                                                             np.ndarray]:
    """[N, I] compute time (inf where the chip has no rate) and [N] missing-rate flags."""
    n = batch.n
    dtypes = ops.dtype.tolist()
    precisions = sorted(set(dtypes))
    m_tab, v_tab = rate_table(batch, precisions)
    if len(precisions) == 1:  # [N, 1] columns broadcast over the operators
        m_rate, v_rate = m_tab, v_tab
    else:
        col = np.array([precisions.index(d) for d in dtypes], dtype=np.intp)
        m_rate, v_rate = m_tab[:, col], v_tab[:, col]
    # A small GEMM runs on whichever engine is faster: the under-used array or the vector
    # units. A chip without vector units has only the array (its vector work runs there).
    rate = m_rate * tile_utilization(ops.shape, batch.tile)
    if batch.vector_peak:
        np.maximum(rate, v_rate, out=rate)
    np.copyto(rate, v_rate, where=~is_matrix)
    compute = np.divide(ops.flops, rate, out=rate)

    fp32_vector = _rate(batch.vector_peak, "fp32", n)
    fp32_vector = np.where(np.isnan(fp32_vector), v_tab.min(axis=1) if v_tab.size else np.nan,
                           fp32_vector)
    slots = np.array([DEQUANT_SLOTS.get(wd, 0.0) if m and d not in ("int8", "int4") else 0.0
                      for wd, d, m in zip(ops.wdtype.tolist(), dtypes, is_matrix.tolist(),
                                          strict=True)])
    with np.errstate(divide="ignore", invalid="ignore"):
        if slots.any():
            shape = ops.shape
            weight_elems = shape[..., 1] * shape[..., 2] * np.maximum(shape[..., 3], 1.0)
            compute += (slots * weight_elems) * 2.0 / fp32_vector[:, None]
        else:  # no dequantization; 0 / a missing fp32 rate is still NaN
            zero = 0.0 / fp32_vector
            if np.isnan(zero).any():
                compute += zero[:, None]
    if np.isfinite(compute).all():
        return compute, np.zeros(n, dtype=bool)
    missing = np.any(np.isnan(compute) & (ops.flops > 0), axis=1)
    return np.nan_to_num(compute, copy=False, nan=np.inf), missing


def op_times(batch: DesignBatch, ops: ChipOps, home: dict[str, np.ndarray],
             act_home: np.ndarray) -> OpTimes:
    """Time of every operator instance on every design.

    home: per class, [N, L] share stored at each level (weights and kv_cache), or [N, I, L]
    where it differs by operator (a cache that holds the decode working set);
    act_home: [N, I] level index where each operator's activations live. Operator
    quantities (flops, read, written, onchip, shape, launches) may be per operator ([I],
    [I, C], [I, 4]) or per design and operator ([N, I], [N, I, C], [N, I, 4]).

    Level by level, on [N, I] arrays updated in place, the bytes crossing level l are
        (W_r rb_l) through_w_l + (KV_r rb_l) through_kv_l + KV_w through_kv_l
        + (A_r ra_l + A_w + G_r + G_w) [act_home >= l]  (+ onchip at level 0)
    with rb_l, ra_l the crossings of each GEMM's B and A operand (`crossings`; per operator
    only where every design has the same tile side at l) and through_l the share stored at
    level l or beyond; the running maximum of compute and bytes / bandwidth is the roof,
    the first largest term the bound."""
    n_, lv = batch.n, batch.levels
    n_ops = len(ops.kind)
    is_matrix = np.array([k in _MATRIX for k in ops.kind.tolist()], dtype=bool)
    compute, missing = _compute(batch, ops, is_matrix)

    # Per-operator constants: [I], or [N, I] for per-design operators.
    r, w = ops.read, ops.written
    w_r, kv_r, kv_w = r[..., W], r[..., KV], w[..., KV]
    a_r, a_w = r[..., A], w[..., A]
    act_rest = r[..., G] + w[..., G]
    use_w, use_kv = bool(w_r.any()), bool(kv_r.any() or kv_w.any())
    shape = ops.shape
    m_dim = np.where(is_matrix, np.maximum(shape[..., 0], 1.0), 0.0)
    n_dim = np.where(is_matrix, np.maximum(shape[..., 1], 1.0), 0.0)
    sides = tile_sides(batch)
    h_w, h_kv = (home[c][:, None, :] if home[c].ndim == 2 else home[c]
                 for c in ("weights", "kv_cache"))
    act_home = np.asarray(act_home)
    act_lo, act_hi = (int(act_home.min()), int(act_home.max())) if act_home.size else (0, -1)

    traffic = np.empty((lv, n_, n_ops))  # level-major: every level's [N, I] is contiguous
    tmp = np.empty((n_, n_ops))
    mem = np.empty((n_, n_ops))
    hit = np.empty((n_, n_ops), dtype=bool)
    roof = np.zeros((n_, n_ops))
    bound = np.zeros((n_, n_ops), dtype=np.int64)
    through_w = through_kv = None
    # Outermost level first: the shares stored at l or beyond accumulate inwards, and the
    # bound (the first largest term: compute, then the innermost level) is kept by letting
    # a term replace the running maximum when it is at least as large.
    for level in reversed(range(lv)):
        out = traffic[level]
        if use_w:
            through_w = h_w[..., level].copy() if through_w is None \
                else np.add(through_w, h_w[..., level], out=through_w)
        if use_kv:
            through_kv = h_kv[..., level].copy() if through_kv is None \
                else np.add(through_kv, h_kv[..., level], out=through_kv)
        side_a, side_b = sides[level]
        rb = crossings(m_dim, side_b) if use_w or use_kv else None
        empty = True
        if use_w:
            np.multiply(w_r * rb, through_w, out=out)
            empty = False
        if use_kv:
            for coef in (kv_r * rb, kv_w):
                if empty:
                    np.multiply(coef, through_kv, out=out)
                    empty = False
                else:
                    out += np.multiply(coef, through_kv, out=tmp)
        if level <= act_hi:
            act = a_r * crossings(n_dim, side_a)
            act += a_w
            act += act_rest
            if level > act_lo:  # only where the activations live at this level or beyond
                act = np.multiply(act, np.greater_equal(act_home, level), out=tmp)
            if empty:
                np.copyto(out, act)
                empty = False
            else:
                out += act
        if empty:
            out.fill(0.0)
        if level == 0:
            out += ops.onchip
        np.divide(out, batch.bandwidth[:, level, None], out=mem)
        np.greater_equal(mem, roof, out=hit)
        np.copyto(bound, level + 1, where=hit)
        np.fmax(roof, mem, out=roof)  # fmax: a NaN (0 / 0 bandwidth) counts as no traffic
    np.greater_equal(compute, roof, out=hit)
    np.copyto(bound, 0, where=hit)
    np.fmax(roof, compute, out=roof)
    overhead = np.multiply(ops.launches, batch.op_overhead[:, None], out=tmp)
    np.greater(overhead, roof, out=hit)
    np.copyto(bound, -1, where=hit)
    time = np.add(roof, overhead, out=roof)
    return OpTimes(time=time, compute=compute, traffic=traffic.transpose(1, 2, 0),
                   bound=bound, missing_rate=missing)
