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
        return np.isin(self.kind, MATRIX_KINDS)


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


def rates(batch: DesignBatch, dtypes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[N, I] effective matrix rate (peak x achievable fraction) and vector rate, FLOP/s,
    per operator precision. A chip without separate vector units runs vector work on its
    matrix units; NaN where the chip has no rate at all for the precision."""
    n = batch.n
    m_cols, v_cols = {}, {}
    for dt in set(dtypes):
        p = executed_precision(batch.matrix_peak, dt)
        vector = _rate(batch.vector_peak, dt, n)
        matrix = batch.matrix_peak[p] * batch.matrix_fraction[p] if p in batch.matrix_peak \
            else vector
        vector = np.where(np.isnan(vector), matrix, vector)
        m_cols[dt], v_cols[dt] = matrix, vector
    return (np.stack([m_cols[d] for d in dtypes], axis=1),
            np.stack([v_cols[d] for d in dtypes], axis=1))


def tile_utilization(shape: np.ndarray, tile: tuple[int, int, int] | None) -> np.ndarray:
    """[I] share of the matrix engine doing useful work on an M x N x K problem cut into
    the native tile: prod(dim / (ceil(dim / t) * t)). 1 without a tile."""
    if tile is None:
        return np.ones(len(shape))
    util = np.ones(len(shape))
    for j, t in enumerate(tile):
        dim = np.maximum(shape[:, j], 1.0)
        util *= dim / (np.ceil(dim / t) * t)
    return util


def reread(batch: DesignBatch, shape: np.ndarray, matrix: np.ndarray) -> tuple[np.ndarray,
                                                                             np.ndarray]:
    """[N, I, L] how many times the A operand (M x K, activations) and the B operand (K x N,
    weights or KV cache) of each GEMM cross level l. The buffer inside level l holds square
    output tiles of side T (T = sqrt(capacity / 4); per unit for per-unit levels; for
    level 0 the register file, else the engine's native tile), so A is read ceil(N / T)
    times and B ceil(M / T) times. 1 for operators that are not GEMMs."""
    n_, lv = batch.n, batch.levels
    side = np.empty((n_, lv, 2))  # tile side used for A (along N) and for B (along M)
    tile = batch.tile
    if batch.register_file:
        side[:, 0, :] = np.sqrt(batch.register_file / TILE_BYTES_PER_ELEMENT)
    else:
        side[:, 0, 0] = tile[1] if tile else np.inf
        side[:, 0, 1] = tile[0] if tile else np.inf
    if lv > 1:
        t = np.sqrt(batch.unit_capacity[:, :-1] / TILE_BYTES_PER_ELEMENT)
        side[:, 1:, 0] = t
        side[:, 1:, 1] = t
    m_dim = np.maximum(shape[:, 0], 1.0)[None, :, None]
    n_dim = np.maximum(shape[:, 1], 1.0)[None, :, None]
    ra = np.maximum(np.ceil(n_dim / side[:, None, :, 0]), 1.0)
    rb = np.maximum(np.ceil(m_dim / side[:, None, :, 1]), 1.0)
    mask = matrix[None, :, None]
    return np.where(mask, ra, 1.0), np.where(mask, rb, 1.0)


def op_times(batch: DesignBatch, ops: ChipOps, home: dict[str, np.ndarray],
             act_home: np.ndarray) -> OpTimes:
    """Time of every operator instance on every design.

    home: per class, [N, L] share stored at each level (weights and kv_cache), or [N, I, L]
    where it differs by operator (a cache that holds the decode working set);
    act_home: [N, I] level index where each operator's activations live."""
    n_, lv = batch.n, batch.levels
    levels = np.arange(lv)
    is_matrix = ops.is_matrix
    m_rate, v_rate = rates(batch, ops.dtype)
    util = tile_utilization(ops.shape, batch.tile)
    # A small GEMM runs on whichever engine is faster: the under-used array or the vector
    # units. A chip without vector units has only the array (its vector work runs there).
    matrix_rate = m_rate * util[None, :]
    if batch.vector_peak:
        matrix_rate = np.maximum(matrix_rate, v_rate)
    fp32_vector = _rate(batch.vector_peak, "fp32", n_)
    fp32_vector = np.where(np.isnan(fp32_vector), v_rate.min(axis=1) if v_rate.size
                           else np.nan, fp32_vector)
    quantized = np.isin(ops.wdtype, list(DEQUANT_SLOTS)) & ~np.isin(ops.dtype, ["int8", "int4"])
    slots = np.array([DEQUANT_SLOTS.get(w, 0.0) for w in ops.wdtype]) * quantized * is_matrix
    weight_elems = ops.shape[:, 1] * ops.shape[:, 2] * np.maximum(ops.shape[:, 3], 1.0)
    dequant = (slots * weight_elems)[None, :] * 2.0 / fp32_vector[:, None]
    compute = np.where(is_matrix[None, :], ops.flops[None, :] / matrix_rate,
                       ops.flops[None, :] / v_rate) + dequant
    missing = np.any(np.isnan(compute) & (ops.flops > 0)[None, :], axis=1)
    compute = np.nan_to_num(compute, nan=np.inf)

    def passing(share: np.ndarray) -> np.ndarray:
        """Share stored at level l or beyond = share crossing level l."""
        through = np.flip(np.cumsum(np.flip(share, axis=-1), axis=-1), axis=-1)
        return through if through.ndim == 3 else through[:, None, :]

    through_w = passing(home["weights"])
    through_kv = passing(home["kv_cache"])
    through_act = (levels[None, None, :] <= act_home[:, :, None]).astype(float)
    ra, rb = reread(batch, ops.shape, is_matrix)
    r, w = ops.read, ops.written
    traffic = (r[None, :, W, None] * rb * through_w
               + r[None, :, KV, None] * rb * through_kv
               + w[None, :, KV, None] * through_kv
               + (r[None, :, A, None] * ra + w[None, :, A, None]
                  + (r + w)[None, :, G, None]) * through_act)
    traffic[:, :, 0] += ops.onchip[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        mem = np.where(traffic > 0, traffic / batch.bandwidth[:, None, :], 0.0)
    terms = np.concatenate([compute[:, :, None], mem], axis=2)
    roof = terms.max(axis=2)
    overhead = ops.launches[None, :] * batch.op_overhead[:, None]
    bound = np.where(overhead > roof, -1, np.argmax(terms, axis=2))
    time = roof + overhead
    return OpTimes(time=time, compute=compute, traffic=traffic, bound=bound,
                   missing_rate=missing)
