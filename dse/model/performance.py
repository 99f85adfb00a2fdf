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
  the level inside l cannot hold its operands (`crossings`);
- bandwidth = the level's peak x its achieved fraction (a measured property of the chip).
The largest term is the operator's bound ("overhead" when the fixed cost exceeds them
all). Everything is [N designs] x [I operators] x [L levels] array arithmetic (computed on
operators x designs blocks, see op_times); no I/O.
"""

from __future__ import annotations

import math
import threading
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
    """The operators one chip runs (after parallel splitting), as arrays over I rows. The
    numeric quantities are per operator ([I], [I, C], [I, 4]) or, where they differ by
    design (a per-design batch size), per design and operator ([N, I], [N, I, C] ...)."""

    name: np.ndarray  # [I] str
    kind: np.ndarray  # [I] str
    stage: np.ndarray  # [I] str
    dtype: np.ndarray  # [I] str
    wdtype: np.ndarray  # [I] str
    count: np.ndarray  # [I] or [N, I]
    flops: np.ndarray  # [I] or [N, I] per instance
    read: np.ndarray  # [I, C] or [N, I, C] per instance, bytes that live off the compute units
    written: np.ndarray  # [I, C] or [N, I, C]
    onchip: np.ndarray  # [I] or [N, I] bytes that stay in the innermost level (fused
    # intermediates)
    shape: np.ndarray  # [I, 4] or [N, I, 4] m, n, k, batch
    launches: np.ndarray  # [I] or [N, I] kernels per instance (0: fused into a neighbour)

    @property
    def is_matrix(self) -> np.ndarray:
        return np.array([k in _MATRIX for k in self.kind.tolist()], dtype=bool)


@dataclass(frozen=True)
class OpTimes:
    """Per design and operator: time per instance, its terms and the traffic per level."""

    time: np.ndarray  # [N, I] s per instance
    compute: np.ndarray  # [N, I] s
    traffic: np.ndarray  # [N, I, L] bytes per instance
    bound: np.ndarray  # [N, I] int8: 0 compute, 1 + l for memory level l, -1 the fixed
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


Side = float | np.ndarray  # one tile side for every design, or [N]


def tile_sides(batch: DesignBatch) -> list[tuple[Side, Side]]:
    """Per level l, the side T of the square output tiles held by the buffer inside l, for
    the A operand (T along N) and for the B operand (T along M): at level 0 the register
    file's (T = sqrt(bytes / 4)), else the engine's native tile (no tile: unbounded); at
    l > 0 the level inside it, per instance (per unit for per-unit levels). A float where
    every design has the same side, else [N]."""
    tile = batch.tile
    if batch.register_file:
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


def _per_op(a: np.ndarray) -> np.ndarray:
    """An operator quantity, [I] or [N, I], as [I, 1] or [I, N] (operators x designs)."""
    return a[:, None] if a.ndim == 1 else a.T


def _cols(a: np.ndarray, designs: slice) -> np.ndarray:
    """The designs `designs` of an [I, 1] or [I, N] operator quantity."""
    return a if a.shape[1] == 1 else a[:, designs]


# Designs per block: op_times works on [operators, block] arrays that stay in the caches and
# are reused from block to block, and from call to call (per thread): fresh memory is
# expensive where every page is faulted in. WORK_ELEMENTS caps operators x block. Their rows
# are PAD elements longer than a block: with a row stride of a large power of two (2048 x 8
# bytes) an operator column of every row falls in one cache set, and the transposes to the
# [N, I] and [N, I, L] outputs run 4-5 times slower.
BLOCK = 2048
WORK_ELEMENTS = 1 << 18
PAD = 8
_LOCAL = threading.local()


def _scratch(name: str, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    """A work array of this thread, kept between calls (contents undefined)."""
    arrays = _LOCAL.__dict__.setdefault("arrays", {})
    size = math.prod(shape)
    have = arrays.get(name)
    if have is None or have.size < size or have.dtype != dtype:
        have = arrays[name] = np.empty(size, dtype=dtype)
    return have[:size].reshape(shape)


def op_times(batch: DesignBatch, ops: ChipOps, home: dict[str, np.ndarray],
             act_home: np.ndarray) -> OpTimes:
    """Time of every operator instance on every design.

    home: per class, [N, L] share stored at each level (weights and kv_cache), or [N, I, L]
    where it differs by operator (a cache that holds the decode working set; [N, 1, L]
    broadcasts); act_home: [N, I] level index where each operator's activations live.
    Operator quantities (flops, read, written, onchip, shape, launches) may be per operator
    ([I], [I, C], [I, 4]) or per design and operator ([N, I], [N, I, C], [N, I, 4]).

    Computed for blocks of designs, level by level, on operators x designs arrays updated
    in place. The bytes crossing level l are
        (W_r rb_l) through_w_l + (KV_r rb_l) through_kv_l + KV_w through_kv_l
        + (A_r ra_l + A_w + G_r + G_w) [act_home >= l]  (+ onchip at level 0)
    with rb_l, ra_l the crossings of each GEMM's B and A operand (`crossings`; per operator
    only where every design has the same tile side at l) and through_l the share stored at
    level l or beyond; the weight and KV-cache terms are computed for the operators that
    have such bytes only. The running maximum of compute and bytes / bandwidth is the roof,
    the first largest term the bound."""
    n_, lv = batch.n, batch.levels
    n_ops = len(ops.kind)
    kinds, dtypes, wdtypes = ops.kind.tolist(), ops.dtype.tolist(), ops.wdtype.tolist()
    is_matrix = np.array([k in _MATRIX for k in kinds], dtype=bool)

    # Rates per precision ([P, N]) and where each operator finds its own.
    precisions = sorted(set(dtypes))
    m_tab, v_tab = (np.ascontiguousarray(t.T) for t in rate_table(batch, precisions))
    rate_row = None if len(precisions) == 1 else \
        np.array([precisions.index(d) for d in dtypes], dtype=np.intp)
    fp32_vector = _rate(batch.vector_peak, "fp32", n_)
    fp32_vector = np.where(np.isnan(fp32_vector), v_tab.min(axis=0) if v_tab.size else np.nan,
                           fp32_vector)
    vector_rows = np.flatnonzero(~is_matrix)
    # Dequantization of weight-only-quantized weights on the vector units, in FLOPs.
    slots = np.array([DEQUANT_SLOTS.get(wd, 0.0) if m and d not in ("int8", "int4") else 0.0
                      for wd, d, m in zip(wdtypes, dtypes, is_matrix.tolist(), strict=True)])
    dequant_rows = np.flatnonzero(slots)
    shape = ops.shape
    dequant = _per_op(shape[..., 1] * shape[..., 2] * np.maximum(shape[..., 3], 1.0))
    dequant = slots[dequant_rows, None] * dequant[dequant_rows] * 2.0
    plain_rows = np.flatnonzero(slots == 0)
    util = _per_op(tile_utilization(shape, batch.tile))
    flops = _per_op(ops.flops)

    # Per-operator bytes, [I, 1] or [I, N], and the rows that have weight or KV-cache bytes.
    r, w = ops.read, ops.written
    w_r, kv_r, kv_w = _per_op(r[..., W]), _per_op(r[..., KV]), _per_op(w[..., KV])
    a_r, a_w = _per_op(r[..., A]), _per_op(w[..., A])
    act_rest = _per_op(r[..., G] + w[..., G])
    onchip = _per_op(ops.onchip)
    launches = _per_op(ops.launches)
    matrix = is_matrix[:, None]
    m_dim = np.where(matrix, np.maximum(_per_op(shape[..., 0]), 1.0), 0.0)
    n_dim = np.where(matrix, np.maximum(_per_op(shape[..., 1]), 1.0), 0.0)
    w_rows = np.flatnonzero(w_r.any(axis=1))
    kv_rows = np.flatnonzero((kv_r != 0).any(axis=1) | (kv_w != 0).any(axis=1))
    mixed = np.array(sorted(set(w_rows.tolist()) | set(kv_rows.tolist())), dtype=np.intp)
    w_at, kv_at = np.searchsorted(mixed, w_rows), np.searchsorted(mixed, kv_rows)
    w_coef, w_m = w_r[w_rows], m_dim[w_rows]
    kv_r_coef, kv_w_coef, kv_m = kv_r[kv_rows], kv_w[kv_rows], m_dim[kv_rows]
    h_w, h_kv = home["weights"], home["kv_cache"]
    act_home = np.asarray(act_home)
    sides = tile_sides(batch)
    bandwidth = np.ascontiguousarray(batch.bandwidth.T)  # [L, N]
    overhead_on = bool(np.any(batch.op_overhead)) and bool(np.any(ops.launches))

    time = np.empty((n_, n_ops))
    compute = np.empty((n_, n_ops))
    traffic = np.empty((n_, n_ops, lv))
    bound = np.empty((n_, n_ops), dtype=np.int8)
    missing = np.zeros(n_, dtype=bool)
    block = min(BLOCK, max(n_, 1), max(64, WORK_ELEMENTS // max(n_ops, 1)))
    work = _scratch("work", (5, n_ops, block + PAD), np.float64)
    mixed_work = _scratch("mixed", (len(mixed), block + PAD), np.float64)
    hit_work = _scratch("hit", (n_ops, block + PAD), np.bool_)
    code_work = _scratch("code", (n_ops, block + PAD), np.int8)

    for start in range(0, n_, block):
        d = slice(start, min(start + block, n_))
        b = d.stop - d.start
        out, mem, roof, comp, tmp = work[:, :, :b]
        hit, code, mixed_out = hit_work[:, :b], code_work[:, :b], mixed_work[:, :b]

        # Compute time. A small GEMM runs on whichever engine is faster: the under-used
        # array or the vector units. A chip without vector units has only the array (its
        # vector work runs there).
        m_rate, v_rate = m_tab[:, d], v_tab[:, d]
        if rate_row is not None:
            m_rate, v_rate = m_rate[rate_row], v_rate[rate_row]
        np.multiply(m_rate, _cols(util, d), out=comp)
        if batch.vector_peak:
            np.maximum(comp, v_rate, out=comp)
        if vector_rows.size:
            comp[vector_rows] = v_rate[vector_rows] if rate_row is not None else v_rate
        np.divide(_cols(flops, d), comp, out=comp)
        with np.errstate(divide="ignore", invalid="ignore"):
            if dequant_rows.size:
                comp[dequant_rows] += _cols(dequant, d) / fp32_vector[d]
            zero = 0.0 / fp32_vector[d]  # no dequantization work at a missing fp32 rate: NaN
            if np.isnan(zero).any():
                comp[plain_rows] += zero
        if not np.isfinite(comp).all():
            missing[d] = np.any(np.isnan(comp) & (_cols(flops, d) > 0), axis=0)
            np.nan_to_num(comp, copy=False, nan=np.inf)
        compute[d] = comp.T

        # Bytes per level and the roofline terms, outermost level first: the shares stored
        # at l or beyond accumulate inwards, and the bound (the first largest term: compute,
        # then the innermost level) is kept by letting a term replace the running maximum
        # when it is at least as large.
        act_at = act_home[d]
        act_lo, act_hi = int(act_at.min(initial=0)), int(act_at.max(initial=-1))
        act_at = act_at.T
        through_w = _Through(h_w[d], w_rows)
        through_kv = _Through(h_kv[d], kv_rows)
        for level in reversed(range(lv)):
            side_a, side_b = sides[level]
            if isinstance(side_a, np.ndarray):
                side_a, side_b = side_a[d], side_b[d]
            if level > act_hi:
                out.fill(0.0)
            else:
                act = _cols(a_r, d) * crossings(_cols(n_dim, d), side_a)
                act += _cols(a_w, d)
                act += _cols(act_rest, d)
                if level > act_lo:  # only where the activations live at this level or beyond
                    np.multiply(act, np.greater_equal(act_at, level, out=hit), out=out)
                else:
                    np.copyto(out, act)
            if mixed.size:
                # (W_r rb) through_w + (KV_r rb) through_kv + KV_w through_kv, in that
                # order, for the operators that have such bytes; then + the activations'.
                if 0 < w_rows.size < mixed.size:  # KV-only operators start from 0
                    mixed_out.fill(0.0)
                if w_rows.size:
                    mixed_out[w_at] = (_cols(w_coef, d) * crossings(_cols(w_m, d), side_b)) \
                        * through_w.at(level)
                if kv_rows.size:
                    t_kv = through_kv.at(level)
                    part = (_cols(kv_r_coef, d) * crossings(_cols(kv_m, d), side_b)) * t_kv
                    if w_rows.size:
                        part += mixed_out[kv_at]
                    part += _cols(kv_w_coef, d) * t_kv
                    mixed_out[kv_at] = part
                out[mixed] += mixed_out
            if level == 0:
                out += _cols(onchip, d)
            traffic[d, :, level] = out.T
            np.divide(out, bandwidth[level, d], out=mem)
            if level == lv - 1:
                np.fmax(mem, 0.0, out=roof)  # fmax: NaN (0 / 0 bandwidth) is no traffic
                code.fill(level + 1)
            else:
                np.greater_equal(mem, roof, out=hit)
                np.copyto(code, level + 1, where=hit)
                np.fmax(roof, mem, out=roof)
        np.greater_equal(comp, roof, out=hit)
        np.copyto(code, 0, where=hit)
        np.fmax(roof, comp, out=roof)
        if overhead_on:  # the fixed cost per launch, when it exceeds every roofline term
            overhead = np.multiply(_cols(launches, d), batch.op_overhead[d], out=tmp)
            np.greater(overhead, roof, out=hit)
            np.copyto(code, -1, where=hit)
            roof += overhead
        time[d] = roof.T
        bound[d] = code.T
    return OpTimes(time=time, compute=compute, traffic=traffic, bound=bound,
                   missing_rate=missing)


class _Through:
    """Share of one tensor class stored at level l or beyond, for the operators `rows` of a
    block of designs, accumulated from the outermost level inwards: [k, B], or [1, B] when
    the homes are the same for every operator."""

    def __init__(self, home: np.ndarray, rows: np.ndarray):
        self.home = home if home.ndim == 3 else home[:, None, :]
        self.rows = slice(0, 1) if self.home.shape[1] == 1 else rows
        self.value = np.empty((1 if self.home.shape[1] == 1 else len(rows), len(home)))
        self.first = True

    def at(self, level: int) -> np.ndarray:
        share = self.home[:, self.rows, level].T
        if self.first:
            np.copyto(self.value, share)
            self.first = False
        else:
            self.value += share
        return self.value
