"""GEMM thread-block wave quantization and the alignment rule, by hand."""

from __future__ import annotations

import numpy as np
import pytest

import dse
from dse.model.batch import design_batch
from dse.model.kernel import misaligned, wave_factor
from dse.spec.load import load_hardware

H100 = load_hardware("h100-sxm")  # 132 SMs; blocks 128x256 128x128 64x256 64x128 64x64
# L2 and HBM fast enough that a GEMM's time is its compute term alone (to 1e-6).
FAST = {"memory.L2.bandwidth": "1 EB/s", "memory.HBM3.bandwidth": "1 EB/s"}


def factor(m, n, batch=1, units=132, blocks=((128, 256), (128, 128), (64, 256), (64, 128),
                                             (64, 64)), tile=(64, 8, 16)):
    shape = np.array([[m, n, 4096, batch]], dtype=float)
    return float(wave_factor(shape, tile, np.array([units]), blocks, np.array([True]))[0, 0])


def test_a_128x128_gemm_on_132_units_is_one_partial_wave():
    # Best block: 64x64, four of them, one wave of 132 units: 4 / 132 of the engines busy.
    assert factor(128, 128) == pytest.approx(4 / 132)
    # With only 128x128 blocks: one block, 1 / 132.
    assert factor(128, 128, blocks=((128, 128),)) == pytest.approx(1 / 132)


def test_waves_by_hand():
    # 2048 x 2048 with 128x128 blocks: 256 blocks = 2 waves of 132 (264 slots): 256 / 264.
    assert factor(2048, 2048, blocks=((128, 128),)) == pytest.approx(256 / 264)
    # 133 blocks on 132 units: two waves, the second nearly empty.
    assert factor(133 * 128, 128, blocks=((128, 128),)) == pytest.approx(133 / 264)
    # Padding inside a block counts too: M = 96 in a 128-row block (M padded to the native
    # 64-row tile is 128, so the native tile's own padding is not counted twice).
    assert factor(96, 128 * 132, blocks=((128, 128),)) == pytest.approx(1.0)
    # A batch of small GEMMs fills the units like one large one.
    assert factor(128, 128, batch=132, blocks=((128, 128),)) == pytest.approx(1.0)


def test_no_blocks_no_waves_and_other_operators_keep_their_rate():
    assert factor(128, 128, blocks=()) == 1.0
    shape = np.array([[128, 128, 64, 1], [128, 128, 64, 1]], dtype=float)
    out = wave_factor(shape, None, np.array([132, 66]), ((128, 128),), np.array([True, False]))
    assert out.shape == (2, 2) and out[0, 0] == pytest.approx(1 / 132)
    assert out[1, 0] == pytest.approx(1 / 66) and (out[:, 1] == 1.0).all()


def gemm_time(shape, precision="bf16", spec=H100, **over):
    ev = dse.evaluate(spec, dse.load_workload(shape), precision=precision,
                      overrides=over or None)
    return float(ev.ops_time[0, 0]), ev


def test_a_small_gemm_runs_at_its_wave_share_of_the_rate():
    # 512 x 512: 64 blocks of 64x64 in one wave of 132 SMs; still faster on the tensor
    # cores than on the CUDA cores (a smaller one falls back to those, see performance).
    # (L2 and HBM made so fast that the compute term alone sets the time.)
    t, ev = gemm_time("gemm:512x512x65536", **FAST)
    db = design_batch(H100)
    rate = db.matrix_peak["bf16"][0] * db.matrix_fraction["bf16"][0] * 64 / 132
    assert ev.ops_bound[0, 0] == "compute"
    assert t - db.op_overhead[0] == pytest.approx(2 * 512 * 512 * 65536 / rate, rel=1e-6)


def test_an_m1_gemm_is_unchanged():
    bare = H100.model_copy(update={"compute": H100.compute.model_copy(update={
        "matrix": H100.compute.matrix.model_copy(update={"blocks": None})})})
    with_blocks, _ = gemm_time("gemm:1x4096x4096")
    without, _ = gemm_time("gemm:1x4096x4096", spec=bare)
    assert with_blocks == pytest.approx(without, rel=1e-12)


def test_large_gemms_barely_move():
    bare = H100.model_copy(update={"compute": H100.compute.model_copy(update={
        "matrix": H100.compute.matrix.model_copy(update={"blocks": None})})})
    with_blocks, _ = gemm_time("gemm:8192x8192x8192")
    without, _ = gemm_time("gemm:8192x8192x8192", spec=bare)
    assert 1.0 <= with_blocks / without < 1.01


def test_misaligned_leading_dimension_by_hand():
    shape = np.array([[4096, 4096, 4096, 1], [4096, 4096, 4097, 1], [4096, 4097, 4096, 1],
                      [4097, 4096, 4096, 1]], dtype=float)
    off = misaligned(shape, np.full(4, 2.0), np.array([16.0]), np.ones(4, dtype=bool))
    # K and N are leading dimensions (row-major A[M, K], B[K, N], C[M, N]); M is not.
    assert off[0].tolist() == [False, True, True, False]
    # fp8: one byte per element, K = 4112 is a multiple of 16 bytes, 4100 is not.
    one = misaligned(np.array([[64, 64, 4112, 1], [64, 64, 4100, 1]], dtype=float),
                     np.ones(2), np.array([16.0]), np.ones(2, dtype=bool))
    assert one[0].tolist() == [False, True]
    assert not misaligned(shape, np.full(4, 2.0), np.array([np.nan]), np.ones(4, bool)).any()


def test_a_k_misaligned_by_one_element_takes_the_slow_path():
    aligned, _ = gemm_time("gemm:8192x8192x8192", **FAST)
    odd, ev = gemm_time("gemm:8192x8192x8193", **FAST)
    slowdown = H100.compute.matrix.alignment.slowdown
    overhead = float(design_batch(H100).op_overhead[0])
    padded = 8208 / 8192  # K = 8193 runs as 8208, a whole number of 16-deep native tiles
    assert ev.ops_bound[0, 0] == "compute"
    assert (odd - overhead) / (aligned - overhead) == pytest.approx(padded / slowdown,
                                                                    rel=1e-6)
    # The factor is data: a design whose slow path is as fast runs it at full rate.
    free, _ = gemm_time("gemm:8192x8192x8193",
                        **{"compute.matrix.alignment.slowdown": 1.0, **FAST})
    assert (free - overhead) / (aligned - overhead) == pytest.approx(padded, rel=1e-6)


def test_average_shapes_and_fused_attention_keep_the_fast_path():
    # SQuAD's mean length (178.49 tokens) and decode's mean context are averages, not a
    # shape's leading dimension, and flash attention pads its own tiles: the rule is the
    # library GEMM's only, so turning the slow path off changes nothing here.
    a100 = load_hardware("a100-sxm-80gb")
    for wl, kw in (("bert-large", dict(phase="inference", batch=8)),
                   ("llama2-7b", dict(phase="decode", batch=4, seq_in=100, seq_out=7))):
        args = dict(overrides={"compute.matrix.alignment.slowdown": [0.5, 1.0]}, **kw)
        ev = dse.evaluate(a100, dse.load_workload(wl), **args)
        assert np.array_equal(ev.ops_time[0], ev.ops_time[1]), wl


def test_overlap_of_die_work_and_off_chip_traffic_by_hand():
    from dse.model.kernel import OVERLAP, overlap

    assert OVERLAP == 2.0  # the p-norm below is the quadrature sum
    a = np.array([3.0, 5.0, 0.0, 0.0, np.inf, 2.0])
    b = np.array([4.0, 0.0, 7.0, 0.0, 1.0, 2.0])
    np.testing.assert_allclose(overlap(a, b), [5.0, 5.0, 7.0, 0.0, np.inf,
                                               2.0 * np.sqrt(2.0)])
    # Never faster than the larger term, never slower than the two in sequence.
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0, 1, 1000), rng.uniform(0, 1, 1000)
    t = overlap(x, y)
    assert np.all(t >= np.maximum(x, y)) and np.all(t <= x + y + 1e-15)
