"""How a kernel uses a chip: the precision it runs at and the rates it gets, the share of the
matrix engines its thread blocks keep busy (waves, alignment), and how its work on the die
overlaps its off-chip traffic. The constants here are properties of GPU libraries and
kernels, each with its source; pure numpy, no I/O."""

from __future__ import annotations

import dataclasses

import numpy as np

from dse.model.batch import DesignBatch
from dse.workloads.optable import PAYLOAD_BYTES

# Precisions tried, in order, when a chip has no rate at the operator's own precision
# (e.g. fp8 on an A100 runs as fp16): same width first, then wider.
FALLBACK = {
    "fp8": ("fp8", "fp16", "bf16", "fp32"), "int8": ("int8", "fp16", "bf16", "fp32"),
    "fp16": ("fp16", "bf16", "fp32"), "bf16": ("bf16", "fp16", "fp32"),
    "fp32": ("fp32", "tf32"), "int4": ("int4", "int8", "fp16", "bf16", "fp32"),
    # block-scaled FP4 runs on FP4 tensor cores only: a chip without an fp4 rate has none
    "nvfp4": ("fp4",), "mxfp4": ("fp4",),
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
# A kernel's work on the die (compute, on-chip memory) and its off-chip traffic do not overlap
# perfectly near the ridge point (the pipeline's first loads and last stores are exposed,
# and both streams contend when neither dominates): its time is their p-norm (`overlap`).
# p = 2 fits cuBLAS kernel durations of the Llama-2 GEMMs on A100 and H100 (fp16,
# M = 1..4096, 240 kernels; microsoft/vidur data/profiling, commit e26eb8f;
# docs/calibration/small-m-gemm.md): median |error| 0.168 with max(), 0.099 with p = 2
# (p = 1.5: 0.100, 3: 0.128, 4: 0.147), near the ridge (M = 128-256) -23..-28% -> -8..-10%.
# No validation row was used.
OVERLAP = 2.0
# The GEMMs inside a model run below the chip's best-shape rate: `fraction` comes from a shape
# search (the maximum achievable matmul FLOPS finder keeps the fastest of thousands of
# shapes), while a layer runs at whatever shape the model has, on the kernel the library's
# heuristic picks for it. Vidur's cuBLAS kernel durations of the Llama-2-7B/70B layer GEMMs
# (fp16 through PyTorch F.linear, M >= 1024, 36 per GPU; microsoft/vidur data/profiling,
# commit e26eb8f; docs/calibration/small-m-gemm.csv) are a median 1.085x this model's time
# on the H100 SXM and 1.142x on the A100 PCIe card (the profiled A100's form factor is not
# stated; its fastest layer GEMM, 0.80 of peak, is the PCIe card's best-shape 0.81 and below
# the SXM's 0.87, so it is read as PCIe; as SXM it would be 1.22x). Their geometric mean,
# 1 / 1.113 = 0.90, is the default for every chip; a chip's spec may state its own
# (compute.matrix.achievable.typical). No validation row was used. `gemm:MxNxK` workloads
# are microbenchmarks and keep the best-shape rate (the GEMM rows measure that maximum).
TYPICAL = 0.90


def best_shape_rates(batch: DesignBatch) -> DesignBatch:
    """The designs as a GEMM microbenchmark sees them: the best-shape rate, `typical` 1."""
    return dataclasses.replace(batch, matrix_typical=np.ones(batch.n))


def executed_precision(peaks: dict[str, np.ndarray], precision: str) -> str:
    """The precision an engine with rates `peaks` runs `precision` at (fp8 on an A100 runs
    as fp16); `precision` itself when it has no rate for any fallback."""
    return next((p for p in FALLBACK.get(precision, (precision,)) if p in peaks), precision)


def rate_of(table: dict[str, np.ndarray], dtype: str, n: int) -> np.ndarray:
    p = executed_precision(table, dtype)
    return table[p] if p in table else np.full(n, np.nan)


def rate_table(batch: DesignBatch, precisions: list[str]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[N, P] effective matrix rate (peak x achievable fraction x the typical share a
    model's layer GEMMs get, TYPICAL where the chip states none), vector rate, and the rate
    of a GEMM run on the vector units (their peak x the same fraction and typical share: no
    unit runs a GEMM at its peak), FLOP/s, of each precision in `precisions`. A chip without
    separate vector units runs vector work on its matrix units, at their best-shape rate (no
    GEMM kernel choice is involved); NaN where the chip has no rate at all for the
    precision."""
    n = batch.n
    typical = np.where(np.isnan(batch.matrix_typical), TYPICAL, batch.matrix_typical)
    matrix_rates, vector_rates = np.empty((n, len(precisions))), np.empty((n, len(precisions)))
    gemm_on_vector = np.empty((n, len(precisions)))
    for j, dt in enumerate(precisions):
        p = executed_precision(batch.matrix_peak, dt)
        vector = rate_of(batch.vector_peak, dt, n)
        best = batch.matrix_peak[p] * batch.matrix_fraction[p] if p in batch.matrix_peak \
            else vector
        matrix_rates[:, j] = best * typical if p in batch.matrix_peak else best
        vector_rates[:, j] = np.where(np.isnan(vector), best, vector)
        share = batch.matrix_fraction[p] * typical if p in batch.matrix_peak else 1.0
        gemm_on_vector[:, j] = vector_rates[:, j] * share
    return matrix_rates, vector_rates, gemm_on_vector


def overlap(on_die: np.ndarray, off_chip: np.ndarray, out: np.ndarray | None = None
            ) -> np.ndarray:
    """Time of a kernel whose work on the die (compute and on-chip memory) and off-chip
    traffic overlap imperfectly: (a^p + b^p)^(1/p) with p = OVERLAP, max(a, b) where one
    dominates and 2^(1/p) x max where they are equal."""
    if OVERLAP == 2.0 and out is not on_die and out is not off_chip:
        # the same, sqrt(a^2 + b^2) (times never reach 1e154, so nothing overflows but an
        # infinite time, which stays infinite); a NaN term counts as the other (fmax/fmin)
        res = np.multiply(on_die, on_die, out=out)
        res += np.square(off_chip)
        np.sqrt(res, out=res)
        nan = np.isnan(res)
        if nan.any():
            res[nan] = np.hypot(np.fmax(on_die, off_chip), np.fmin(on_die, off_chip))[nan]
        return res
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        big = np.fmax(on_die, off_chip)
        r = np.fmin(on_die, off_chip) / big
        res = big * (1.0 + np.nan_to_num(r, nan=0.0, posinf=0.0) ** OVERLAP) ** (1.0 / OVERLAP)
    res = np.where(np.isfinite(big) & (big > 0), res, big)
    if out is None:
        return res
    np.copyto(out, res)
    return out


def issue_factor(batch: DesignBatch, shape: np.ndarray, dtypes: list[str],
                  is_matrix: np.ndarray, kinds: np.ndarray,
                  tables: np.ndarray | None = None) -> np.ndarray | None:
    """[N, I] share of the matrix rate a GEMM keeps: its thread blocks' wave efficiency
    (`wave_factor`) x the misaligned path's slowdown where the alignment rule fails
    (`misaligned`); None when both are 1 everywhere. `tables`: [N] where `shape` holds
    distinct tables [U, I, 4] (operators.ChipOps.rows): each distinct pair of table and
    unit count is worked out once."""
    if tables is not None and shape.ndim == 3:
        return _issue_of_tables(batch, shape, dtypes, is_matrix, kinds, tables)
    out = None
    if batch.blocks:
        out = wave_factor(shape, batch.one_tile(), batch.units, batch.blocks, is_matrix)
    if np.isfinite(batch.align_bytes).any():
        size = np.array([PAYLOAD_BYTES[d] for d in dtypes])
        # The rule is the library GEMM's: fused attention kernels pad their tiles themselves,
        # and a dimension that is an average (a mean context, a mean SQuAD length) is no
        # one shape's leading dimension.
        if shape.ndim == 3 and bool((shape[..., 1:3] == shape[:1, :, 1:3]).all()):
            shape = shape[0]  # the rule reads N and K: when no design's differ, one row
        whole = (shape[..., 1:3] == np.round(shape[..., 1:3])).all(axis=-1)
        rule = batch.align_bytes
        if shape.ndim == 2 and bool((rule == rule[0]).all()):
            rule = rule[:1]  # one rule for every design: check each operator once
        off = misaligned(shape, size, rule, is_matrix & (kinds == "gemm")) & whole
        if off.any():
            slow = np.where(np.broadcast_to(off, (batch.n, off.shape[-1])),
                            batch.align_slowdown[:, None], 1.0)
            out = slow if out is None else out * slow
    if out is not None and bool((out == 1.0).all()):
        return None
    return out


def _issue_of_tables(batch: DesignBatch, shape: np.ndarray, dtypes: list[str],
                     is_matrix: np.ndarray, kinds: np.ndarray, tables: np.ndarray
                     ) -> np.ndarray | None:
    """issue_factor of designs running distinct tables: computed for each distinct (table,
    units, alignment rule and slowdown) once, then picked per design."""
    key = np.asarray(tables, dtype=np.int64)
    for col in (batch.units, batch.align_bytes, batch.align_slowdown):
        col = np.nan_to_num(np.asarray(col, dtype=float), nan=-1.0)
        if (col == col[0]).all():
            continue  # the same for every design: no part of the key
        values, code = np.unique(col, return_inverse=True)
        _, key = np.unique(key * len(values) + code.ravel(), return_inverse=True)
        key = key.ravel().astype(np.int64)  # (< N: no product overflows)
    pairs, inverse = np.unique(key, return_inverse=True)
    first = np.zeros(len(pairs), dtype=np.intp)
    first[inverse.ravel()[::-1]] = np.arange(len(tables))[::-1]  # a design of each pair
    out = issue_factor(batch.take(first), shape[tables[first]], dtypes, is_matrix, kinds)
    return None if out is None else out[inverse.ravel()]


def wave_factor(shape: np.ndarray, tile: tuple[int, int, int] | None, units: np.ndarray,
                blocks: tuple[tuple[int, int], ...], is_matrix: np.ndarray) -> np.ndarray:
    """[N, I] share of the matrix engines' issue slots that a GEMM's thread blocks keep busy,
    beyond the native tile's own padding (`Gemms`): a GEMM of M x N (x batch) runs
    tiles = ceil(M / m) ceil(N / n) batch thread blocks of m x n, in waves of `units`, so
    the engines do useful work for

        (M' N' batch) / (ceil(tiles / units) units m n),  M' = M padded to the native tile

    of the time; the library runs the candidate block with the highest share (NVIDIA,
    "Matrix Multiplication Background User's Guide", DU-09799-001, sections 3.1 tile and
    3.2 wave quantization). 1 for operators that are not GEMMs. shape: [I, 4] or [N, I, 4]
    (m, n, k, batch); units: [N]. Computed for the GEMM columns only; the tile counts once
    per operator when the shapes are the same for every design."""
    n_designs = len(units)
    out = np.ones((n_designs, len(is_matrix)))
    cols = np.flatnonzero(is_matrix)
    if not blocks or not cols.size:
        return out
    # Operators along rows, designs along columns ([I', N]): the tables hold per-design
    # shapes as views of [4, I, N], so each dimension's GEMM rows are contiguous there.
    per_design = shape.ndim == 3
    m, n, b = (np.maximum(np.asarray(shape[..., j]).T[cols], 1.0) for j in (0, 1, 3))
    if not per_design:  # [I'] -> [I', 1], against the distinct unit counts
        m, n, b = m[:, None], n[:, None], b[:, None]
    if tile:  # the native tile's padding is counted by the tile utilization already
        m = np.ceil(m / tile[0]) * tile[0]
        n = np.ceil(n / tile[1]) * tile[1]
    useful = m * n * b
    # Unit counts are few even over many designs: with per-operator shapes, work per
    # distinct count and gather.
    u_vals, inverse = (units, None) if per_design else np.unique(units, return_inverse=True)
    u = np.asarray(u_vals, dtype=float)[None, :]
    # max over blocks of useful / slots is useful / (min over blocks of slots): division
    # rounds monotonically, so the two are equal bit for bit, at one division in all; the
    # tile counts along m and n are shared by the blocks of the same m or n.
    along_m = {bm: np.ceil(m / bm) for bm in dict.fromkeys(bm for bm, _ in blocks)}
    along_n = {bn: np.ceil(n / bn) for bn in dict.fromkeys(bn for _, bn in blocks)}
    slots = np.full(np.broadcast_shapes(useful.shape, (cols.size, u.shape[1])), np.inf)
    waves = np.empty_like(slots)  # one buffer for every block: no fresh memory per step
    for bm, bn in blocks:
        np.multiply(along_m[bm], along_n[bn], out=waves)
        waves *= b  # tiles
        waves /= u
        np.ceil(waves, out=waves)
        waves *= u * (bm * bn)
        np.fmin(slots, waves, out=slots)
    best = useful / slots
    np.minimum(best, 1.0, out=best)
    out[:, cols] = best.T if inverse is None else best.T[inverse.ravel()]
    return out


def misaligned(shape: np.ndarray, element_bytes: np.ndarray, align_bytes: np.ndarray,
               is_matrix: np.ndarray) -> np.ndarray:
    """[N, I] bool: GEMMs whose leading dimensions (K of A, N of B and C, row-major) times
    the element size are not a multiple of `align_bytes` ([N]; NaN: no rule). shape: [I, 4]
    or [N, I, 4]; element_bytes: [I]."""
    k = shape[..., 2] * element_bytes
    n = shape[..., 1] * element_bytes
    a = align_bytes[:, None]
    with np.errstate(invalid="ignore"):
        off = (np.fmod(k, a) != 0) | (np.fmod(n, a) != 0)
    return off & np.isfinite(a) & is_matrix[None, :]
