"""The plain reference of the hot kernel, `dse.model.performance.op_times`.

`op_times` is hand-blocked and updates arrays in place to run the roofline of every operator
of every design in one pass at the speed a study needs; this module is the same model in
its straightforward [N, I, L]-array form (the formulation it replaced, kept verbatim with the
kernel's constants), the specification the fast version must reproduce. Slower and larger
in memory; used by the tests and for reading the model, never by `evaluate`. No I/O.
"""

from __future__ import annotations

import numpy as np

from dse.model.attention import attention_factor
from dse.model.batch import DesignBatch
from dse.model.kernel import DEQUANT_SLOTS, OVERLAP, TYPICAL, executed_precision
from dse.model.operators import KV, A, ChipOps, G, OpTimes, W
from dse.model.tiling import TILE_BYTES_PER_ELEMENT
from dse.workloads.optable import MATRIX_KINDS, PAYLOAD_BYTES


def _ref_rate(table: dict[str, np.ndarray], dtype: str, n: int) -> np.ndarray:
    p = executed_precision(table, dtype)
    return table[p] if p in table else np.full(n, np.nan)


def _ref_rates(batch: DesignBatch, dtypes: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = batch.n
    # A model's matrix operators get the typical share of the best-shape rate (the chip's
    # own, else kernel.TYPICAL); vector work on matrix units gets the best-shape rate; a GEMM
    # on the vector units the same share (achievable fraction x typical) of their peak.
    typical = np.where(np.isnan(batch.matrix_typical), TYPICAL, batch.matrix_typical)
    m_cols, v_cols, g_cols = {}, {}, {}
    for dt in set(dtypes):
        p = executed_precision(batch.matrix_peak, dt)
        vector = _ref_rate(batch.vector_peak, dt, n)
        best = batch.matrix_peak[p] * batch.matrix_fraction[p] if p in batch.matrix_peak \
            else vector
        matrix = best * typical if p in batch.matrix_peak else best
        vector = np.where(np.isnan(vector), best, vector)
        m_cols[dt], v_cols[dt] = matrix, vector
        g_cols[dt] = vector * (batch.matrix_fraction[p] * typical if p in batch.matrix_peak
                               else 1.0)
    m, v, g = (np.stack([c[d] for d in dtypes], axis=1) for c in (m_cols, v_cols, g_cols))
    return m, v, g


def _ref_tile_utilization(shape: np.ndarray, tile: tuple[int, int, int] | None) -> np.ndarray:
    if tile is None:
        return np.ones(len(shape))
    util = np.ones(len(shape))
    for j, t in enumerate(tile):
        dim = np.maximum(shape[:, j], 1.0)
        util *= dim / (np.ceil(dim / t) * t)
    return util


def _ref_reread(batch: DesignBatch, shape: np.ndarray,
                matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n_, lv = batch.n, batch.levels
    side = np.empty((n_, lv, 2))
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


def _ref_issue(batch: DesignBatch, shape: np.ndarray, dtypes: np.ndarray,
               matrix: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """Thread-block wave efficiency x alignment slowdown, one design and operator at a
    time (the specification of kernel.wave_factor and kernel.misaligned)."""
    size = PAYLOAD_BYTES
    out = np.ones((batch.n, len(dtypes)))
    for d in range(batch.n):
        for i, (m, n, k, b) in enumerate(shape):
            if not matrix[i]:
                continue
            m, n, b = max(m, 1.0), max(n, 1.0), max(b, 1.0)
            if batch.tile:
                m = -(-m // batch.tile[0]) * batch.tile[0]
                n = -(-n // batch.tile[1]) * batch.tile[1]
            units = float(batch.units[d])
            best = 1.0 if not batch.blocks else max(
                min(m * n * b / (-(-(-(-m // bm) * -(-n // bn) * b) // units) * units * bm * bn),
                    1.0) for bm, bn in batch.blocks)
            a = batch.align_bytes[d]
            e = size.get(dtypes[i], 2.0)
            whole = k == round(k) and shape[i][1] == round(shape[i][1])
            if np.isfinite(a) and kinds[i] == "gemm" and whole and (
                    (k * e) % a or (shape[i][1] * e) % a):
                best *= batch.align_slowdown[d]
            out[d, i] = best
    return out


def reference_op_times(batch: DesignBatch, ops: ChipOps, home: dict[str, np.ndarray],
                       act_home: np.ndarray) -> OpTimes:
    """performance.op_times written plainly: every term an [N, I, L] array, no blocking,
    no in-place updates. The fast kernel must give the same times, compute terms, traffic,
    bound codes and missing-rate flags (tests/model/test_optimes.py)."""
    n_, lv = batch.n, batch.levels
    levels = np.arange(lv)
    is_matrix = np.isin(ops.kind, MATRIX_KINDS)
    m_rate, v_rate, gemm_on_vector = _ref_rates(batch, ops.dtype)
    util = _ref_tile_utilization(ops.shape, batch.one_tile())
    issue = _ref_issue(batch, ops.shape, ops.dtype, is_matrix, ops.kind)
    attention = attention_factor(batch, ops)  # the stack's attention kernels
    if attention is not None:
        issue = issue * attention
    matrix_rate = m_rate * util[None, :] * issue
    if batch.vector_peak:
        matrix_rate = np.maximum(matrix_rate, gemm_on_vector)
    fp32_vector = _ref_rate(batch.vector_peak, "fp32", n_)
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
        through = np.flip(np.cumsum(np.flip(share, axis=-1), axis=-1), axis=-1)
        return through if through.ndim == 3 else through[:, None, :]

    through_w = passing(home["weights"])
    through_kv = passing(home["kv_cache"])
    through_act = (levels[None, None, :] <= act_home[:, :, None]).astype(float)
    ra, rb = _ref_reread(batch, ops.shape, is_matrix)
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
    on = np.array([k in ("register", "sram", "cache") for k in batch.level_kinds])
    die = np.maximum(compute, mem[:, :, on].max(axis=2, initial=0.0))
    off = mem[:, :, ~on].max(axis=2, initial=0.0)
    big, small = np.maximum(die, off), np.minimum(die, off)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(big > 0, small / big, 0.0)
    roof = np.where(np.isfinite(big) & (big > 0),
                    big * (1 + ratio ** OVERLAP) ** (1 / OVERLAP), big)
    overhead = ops.launches[None, :] * batch.op_overhead[:, None]
    bound = np.where(overhead > roof, -1, np.argmax(terms, axis=2))
    time = roof + overhead
    return OpTimes(time=time, compute=compute, traffic=traffic, bound=bound,
                   missing_rate=missing)
